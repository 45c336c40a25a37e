/* A stand-in for libnvidia-ml.so.1, built only for tests: the entry points base/nvml/nvml_probe.c opens,
 * with the GPUs and readings taken from the environment at every call, so one test process can stage
 * each case. Loaded through TWINRUN_NVML_LIBRARY. It defines the prototypes of base/nvml/nvml_api.h, so
 * the compiler holds the fake and the probe to the same declarations. What it cannot show: that those
 * declarations match NVIDIA's library (only a GPU node can: docs/doctor.md).
 *
 *   FAKE_NVML_GPUS            PCI bus ids in NVML's index order, comma-separated ("00000000:1B:00.0,...")
 *   FAKE_NVML_INIT_RC         nvmlInit_v2's return code (default 0)
 *   FAKE_NVML_ECC_VOLATILE    uncorrectable volatile counts per GPU index, comma-separated (missing: 0)
 *   FAKE_NVML_ECC_AGGREGATE   the same, aggregate
 *   FAKE_NVML_TEMP            temperatures per GPU index (missing: 40)
 *   FAKE_NVML_ECC_RC          nvmlDeviceGetTotalEccErrors' return code (3: NOT_SUPPORTED)
 *   FAKE_NVML_TEMP_RC         both temperature calls' return code
 *   FAKE_NVML_TEMPV_RC        nvmlDeviceGetTemperatureV's alone (25: a struct version it does not know)
 * fake_nvml_sessions: nvmlInit_v2 calls not yet matched by nvmlShutdown (the test checks the balance). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml/nvml_api.h"

#define MAX_GPUS 16

struct nvmlDevice_st {
    int index;
};
static struct nvmlDevice_st devices[MAX_GPUS];

int fake_nvml_sessions;

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* item `k` of a comma-separated list in env `name`, or dflt */
static unsigned long long list_item(const char *name, int k, unsigned long long dflt) {
    const char *v = getenv(name);
    for (int i = 0; v && *v; i++) {
        if (i == k) return *v == ',' ? dflt : strtoull(v, NULL, 10);
        v = strchr(v, ',');
        if (v) v++;
    }
    return dflt;
}

/* NVML compares bus ids as numbers: CUDA's "0000:1b:00.0" is NVML's "00000000:1B:00.0" */
static int parse_bus(const char *s, unsigned *dom, unsigned *bus, unsigned *dev, unsigned *fn) {
    return sscanf(s, "%x:%x:%x.%x", dom, bus, dev, fn) == 4;
}

nvmlReturn_t nvmlInit_v2(void) {
    const int rc = env_int("FAKE_NVML_INIT_RC", 0);
    if (rc == 0) fake_nvml_sessions++;
    return (nvmlReturn_t)rc;
}

nvmlReturn_t nvmlShutdown(void) {
    if (fake_nvml_sessions == 0) return NVML_ERROR_UNINITIALIZED;
    fake_nvml_sessions--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t rc) {
    switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device) {
    if (fake_nvml_sessions == 0) return NVML_ERROR_UNINITIALIZED;
    unsigned want[4], have[4];
    if (!pciBusId || !device || !parse_bus(pciBusId, &want[0], &want[1], &want[2], &want[3]))
        return NVML_ERROR_INVALID_ARGUMENT;
    const char *v = getenv("FAKE_NVML_GPUS");
    for (int i = 0; v && *v && i < MAX_GPUS; i++) {
        if (parse_bus(v, &have[0], &have[1], &have[2], &have[3]) && !memcmp(want, have, sizeof want)) {
            devices[i].index = i;
            *device = &devices[i];
            return NVML_SUCCESS;
        }
        v = strchr(v, ',');
        if (v) v++;
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    if (!device || !index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)device->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType, unsigned long long *eccCounts) {
    if (fake_nvml_sessions == 0) return NVML_ERROR_UNINITIALIZED;
    /* the fake keeps uncorrected counts only: a probe asking for corrected ones gets refused */
    if (!device || !eccCounts || errorType != NVML_MEMORY_ERROR_TYPE_UNCORRECTED) return NVML_ERROR_INVALID_ARGUMENT;
    const int rc = env_int("FAKE_NVML_ECC_RC", 0);
    if (rc) return (nvmlReturn_t)rc;
    if (counterType == NVML_VOLATILE_ECC) *eccCounts = list_item("FAKE_NVML_ECC_VOLATILE", device->index, 0);
    else if (counterType == NVML_AGGREGATE_ECC) *eccCounts = list_item("FAKE_NVML_ECC_AGGREGATE", device->index, 0);
    else return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_v1_t *temperature) {
    if (fake_nvml_sessions == 0) return NVML_ERROR_UNINITIALIZED;
    if (!device || !temperature) return NVML_ERROR_INVALID_ARGUMENT;
    if (temperature->version != nvmlTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (temperature->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    const int rc = env_int("FAKE_NVML_TEMPV_RC", env_int("FAKE_NVML_TEMP_RC", 0));
    if (rc) return (nvmlReturn_t)rc;
    temperature->temperature = (int)list_item("FAKE_NVML_TEMP", device->index, 40);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp) {
    if (fake_nvml_sessions == 0) return NVML_ERROR_UNINITIALIZED;
    if (!device || !temp || sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    const int rc = env_int("FAKE_NVML_TEMP_RC", 0);
    if (rc) return (nvmlReturn_t)rc;
    *temp = (unsigned)list_item("FAKE_NVML_TEMP", device->index, 40);
    return NVML_SUCCESS;
}
