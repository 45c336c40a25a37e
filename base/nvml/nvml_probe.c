/* NVML's health readings for one GPU (nvml_probe.h). libnvidia-ml is opened with dlopen, not linked, so
 * every build starts without the driver (CI, the twin, MUSA nodes), and its entry points are typed from
 * nvml_api.h (why that is hand-written is said there). */
#include "nvml_probe.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_api.h"

typedef struct nvml_fns {
    __typeof__(nvmlInit_v2) *init;
    __typeof__(nvmlShutdown) *shutdown;
    __typeof__(nvmlErrorString) *error_string;
    __typeof__(nvmlDeviceGetHandleByPciBusId_v2) *by_bus_id;
    __typeof__(nvmlDeviceGetIndex) *index;
    __typeof__(nvmlDeviceGetTotalEccErrors) *ecc;
    __typeof__(nvmlDeviceGetTemperatureV) *temperature_v; /* NULL on drivers before it (R5xx) */
    __typeof__(nvmlDeviceGetTemperature) *temperature;    /* NULL once removed (CUDA 14) */
} nvml_fns;

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    (void)dlerror();
    return p;
}

/* a dlsym result into a function pointer slot: object and function pointers have one size on every ABI
 * we build for, and memcpy says so without a cast the compiler warns about */
#define NVML_SYM(lib, slot, name)                                                                                      \
    do {                                                                                                               \
        void *p_ = sym(lib, name);                                                                                     \
        memcpy(&(slot), &p_, sizeof p_);                                                                               \
    } while (0)

static const char *err_text(const nvml_fns *f, nvmlReturn_t rc) {
    const char *s = f->error_string ? f->error_string(rc) : NULL;
    return s && *s ? s : "unknown NVML error";
}

static void add_missing(dev_health *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_missing(dev_health *out, const char *fmt, ...) {
    size_t used = strlen(out->missing);
    if (used + 3 >= sizeof out->missing) return;
    if (used) used += (size_t)snprintf(out->missing + used, sizeof out->missing - used, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->missing + used, sizeof out->missing - used, fmt, ap);
    va_end(ap);
}

static void read_ecc(const nvml_fns *f, nvmlDevice_t h, dev_health *out) {
    nvmlReturn_t rc = f->ecc(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &out->ecc_volatile);
    out->has_ecc_volatile = rc == NVML_SUCCESS;
    if (rc != NVML_SUCCESS) add_missing(out, "volatile ECC: %s", err_text(f, rc));
    rc = f->ecc(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &out->ecc_aggregate);
    out->has_ecc_aggregate = rc == NVML_SUCCESS;
    if (rc != NVML_SUCCESS) add_missing(out, "aggregate ECC: %s", err_text(f, rc));
}

/* nvmlDeviceGetTemperatureV where the driver has it; the older call where it has not, or where the
 * versioned one refuses for another reason than a missing sensor (an unknown struct version) */
static void read_temperature(const nvml_fns *f, nvmlDevice_t h, dev_health *out) {
    nvmlReturn_t rc = NVML_ERROR_FUNCTION_NOT_FOUND;
    if (f->temperature_v) {
        nvmlTemperature_v1_t t = {.version = nvmlTemperature_v1, .sensorType = NVML_TEMPERATURE_GPU};
        rc = f->temperature_v(h, &t);
        if (rc == NVML_SUCCESS) out->temperature_c = t.temperature;
    }
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED && f->temperature) {
        unsigned int c = 0;
        rc = f->temperature(h, NVML_TEMPERATURE_GPU, &c);
        if (rc == NVML_SUCCESS) out->temperature_c = (int)c;
    }
    out->has_temperature = rc == NVML_SUCCESS;
    if (rc != NVML_SUCCESS) add_missing(out, "temperature: %s", err_text(f, rc));
}

void tr_nvml_probe(const char *pci_bus_id, dev_health *out) {
    memset(out, 0, sizeof *out);
    out->index = -1;
    /* named as nvidia-smi prints it (NVML's busId: 8-digit domain, upper case), whatever spelling the caller
     * had (CUDA's: "0000:1b:00.0"), so the report can be matched against nvidia-smi's output */
    unsigned dom, bus, dev, fn;
    if (pci_bus_id && sscanf(pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4)
        snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
    else snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%.31s", pci_bus_id ? pci_bus_id : "");
    const char *path = getenv(TR_NVML_LIBRARY_ENV);
    if (!path || !*path) path = "libnvidia-ml.so.1";
    /* never closed: the driver's library may keep state past nvmlShutdown, as NCCL, which also opens it,
     * assumes; the doctor asks once per process */
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(out->reason, sizeof out->reason, "cannot load %s (NVML, installed with the NVIDIA driver): %s", path,
                 e ? e : "?");
        return;
    }
    nvml_fns f;
    NVML_SYM(lib, f.init, "nvmlInit_v2");
    NVML_SYM(lib, f.shutdown, "nvmlShutdown");
    NVML_SYM(lib, f.error_string, "nvmlErrorString");
    NVML_SYM(lib, f.by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
    NVML_SYM(lib, f.index, "nvmlDeviceGetIndex");
    NVML_SYM(lib, f.ecc, "nvmlDeviceGetTotalEccErrors");
    NVML_SYM(lib, f.temperature_v, "nvmlDeviceGetTemperatureV");
    NVML_SYM(lib, f.temperature, "nvmlDeviceGetTemperature");
    if (!f.init || !f.shutdown || !f.by_bus_id || !f.index || !f.ecc) {
        snprintf(out->reason, sizeof out->reason,
                 "%s lacks nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetIndex or "
                 "nvmlDeviceGetTotalEccErrors (a driver older than R450?)",
                 path);
        return;
    }
    if (!pci_bus_id || !*pci_bus_id) {
        snprintf(out->reason, sizeof out->reason, "the GPU's PCI bus id is unknown, so NVML cannot be asked about it");
        return;
    }
    nvmlReturn_t rc = f.init();
    if (rc != NVML_SUCCESS) {
        snprintf(out->reason, sizeof out->reason, "nvmlInit_v2 failed: %s", err_text(&f, rc));
        return;
    }
    nvmlDevice_t h = NULL;
    rc = f.by_bus_id(pci_bus_id, &h);
    if (rc != NVML_SUCCESS) {
        snprintf(out->reason, sizeof out->reason, "NVML knows no GPU at PCI bus id %s: %s", pci_bus_id,
                 err_text(&f, rc));
        (void)f.shutdown();
        return;
    }
    unsigned int index = 0;
    if (f.index(h, &index) == NVML_SUCCESS) out->index = (int)index;
    read_ecc(&f, h, out);
    read_temperature(&f, h, out);
    out->reported = true;
    (void)f.shutdown();
}
