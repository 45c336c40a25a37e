/* One GPU's health from NVML, the library the NVIDIA driver installs (libnvidia-ml.so.1), opened at run
 * time: uncorrectable ECC errors (volatile and aggregate) and the core temperature. It needs no CUDA: the
 * caller names the GPU by its PCI bus id (the CUDA backend asks cudaDeviceGetPCIBusId for the device its
 * rank drives, so CUDA_VISIBLE_DEVICES' renumbering cannot point it at another card). */
#ifndef TWINRUN_BASE_NVML_NVML_PROBE_H
#define TWINRUN_BASE_NVML_NVML_PROBE_H

#include "twinrun/dev.h"

/* TWINRUN_NVML_LIBRARY names another file to open instead of libnvidia-ml.so.1 (a driver installed
 * elsewhere; the tests' fake). */
#define TR_NVML_LIBRARY_ENV "TWINRUN_NVML_LIBRARY"

/* Fills out for the GPU at pci_bus_id ("0000:1B:00.0"). Never fails: a missing library, a driver that
 * does not answer or a GPU NVML does not know leaves out->reported false with the reason; a reading the
 * GPU does not support (NVML_ERROR_NOT_SUPPORTED) leaves its has_ flag false and is named in `missing`. */
void tr_nvml_probe(const char *pci_bus_id, dev_health *out);

#endif
