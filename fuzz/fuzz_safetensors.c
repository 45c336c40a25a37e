/* libFuzzer target: st_parse on raw bytes; on success every tensor is read back through both
 * converters (one of the two rejects its dtype), so the conversion paths see fuzzed data too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file f;
    char err[512] = "";
    if (st_parse(&f, data, size, "fuzz.safetensors", err, sizeof err) != 0) {
        if (err[0] == '\0') abort(); /* a failure always says why */
        return 0;
    }
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        if (st_find(&f, t->name) == NULL) abort();
        uint64_t numel = st_tensor_numel(t);
        if (numel > (64u << 20)) continue; /* the data section holds them, but keep each run fast */
        void *buf = malloc(numel ? numel * 4 : 1);
        if (!buf) continue;
        int rf = st_tensor_read_f32(&f, t, buf, t->shape, t->ndim, err, sizeof err);
        int ri = st_tensor_read_i32(&f, t, buf, t->shape, t->ndim, err, sizeof err);
        (void)rf, (void)ri;
        free(buf);
    }
    st_close(&f);
    return 0;
}
