/* The protobuf bytes of a TensorBoard Event and the TFRecord frame around them, encoded by hand:
 * two messages with four field types do not justify a protobuf runtime. Field numbers are those of
 * tensorflow/core/util/event.proto and summary.proto. */
#include "io/tensorboard.h"

#include <string.h>

#include "io/crc32c.h"

typedef struct pb {
    unsigned char *p;
    size_t len, cap;
    bool overflow;
} pb;

static void put(pb *b, const void *src, size_t n) {
    if (b->overflow || n > b->cap - b->len) {
        b->overflow = true;
        return;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_varint(pb *b, uint64_t v) {
    unsigned char tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v) tmp[n] |= 0x80;
        n++;
    } while (v);
    put(b, tmp, n);
}

static void put_le(pb *b, uint64_t v, int bytes) {
    unsigned char tmp[8];
    for (int i = 0; i < bytes; i++) tmp[i] = (unsigned char)(v >> (8 * i));
    put(b, tmp, (size_t)bytes);
}

/* key = field number << 3 | wire type (0 varint, 1 64-bit, 2 length-delimited, 5 32-bit) */
static void put_key(pb *b, unsigned field, unsigned wire) { put_varint(b, (uint64_t)(field << 3 | wire)); }

static void put_bytes_field(pb *b, unsigned field, const void *data, size_t n) {
    put_key(b, field, 2);
    put_varint(b, n);
    put(b, data, n);
}

static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >>= 7) n++;
    return n;
}

size_t tr_tb_encode_event(unsigned char *out, size_t cap, double wall_time, int64_t step, const char *file_version,
                          const char *tag, float value) {
    pb b = {out, 0, cap, false};
    uint64_t bits;
    memcpy(&bits, &wall_time, sizeof bits);
    put_key(&b, 1, 1); /* wall_time: double */
    put_le(&b, bits, 8);
    if (step != 0) {
        put_key(&b, 2, 0); /* step: int64, two's complement varint */
        put_varint(&b, (uint64_t)step);
    }
    if (file_version) put_bytes_field(&b, 3, file_version, strlen(file_version));
    if (tag) {
        /* Summary { repeated Value value = 1 } ; Value { string tag = 1; float simple_value = 2 } */
        const size_t tag_len = strlen(tag);
        const size_t value_len = 1 + varint_len(tag_len) + tag_len + 1 + 4;
        const size_t summary_len = 1 + varint_len(value_len) + value_len;
        put_key(&b, 5, 2);
        put_varint(&b, summary_len);
        put_key(&b, 1, 2);
        put_varint(&b, value_len);
        put_bytes_field(&b, 1, tag, tag_len);
        uint32_t fbits;
        memcpy(&fbits, &value, sizeof fbits);
        put_key(&b, 2, 5);
        put_le(&b, fbits, 4);
    }
    return b.overflow ? 0 : b.len;
}

size_t tr_tb_frame(unsigned char *out, size_t cap, const unsigned char *data, size_t n) {
    if (cap < n + 16) return 0;
    pb b = {out, 0, cap, false};
    put_le(&b, n, 8);
    put_le(&b, tr_crc32c_masked(out, 8), 4);
    put(&b, data, n);
    put_le(&b, tr_crc32c_masked(data, n), 4);
    return b.overflow ? 0 : b.len;
}
