/* dev_get_health for the real backend: the rank's GPU named by its PCI bus id (CUDA's numbering follows
 * CUDA_VISIBLE_DEVICES and NVML's does not, so an ordinal would name another card), then NVML's readings
 * (base/nvml/nvml_probe.c). On MUSA the health stays "not reported": MUSA's management library (MTML)
 * is not read yet, and nothing of it was available to write against (untested on MTT S5000 hardware). */
#include <stdio.h>
#include <string.h>

#include "cuda_dev.h"
#include "nvml/nvml_probe.h"

void dev_get_health(const dev_device *d, dev_health *out) {
#ifdef TWINRUN_MUSA
    (void)d;
    memset(out, 0, sizeof *out);
    out->index = -1;
    snprintf(out->reason, sizeof out->reason,
             "the MUSA build does not read the GPUs' ECC or temperature yet: read them with mthreads-gmi");
#else
    char bus[32] = "";
    cudaError_t e = cudaDeviceGetPCIBusId(bus, (int)sizeof bus, d->ordinal);
    if (e != cudaSuccess) {
        memset(out, 0, sizeof *out);
        out->index = -1;
        snprintf(out->reason, sizeof out->reason, "cudaDeviceGetPCIBusId(%d) failed: %s", d->ordinal,
                 cudaGetErrorString(e));
        return;
    }
    tr_nvml_probe(bus, out);
#endif
}
