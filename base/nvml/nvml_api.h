/* The few NVML (libnvidia-ml) types, constants and entry points the health probe uses, declared by hand.
 *
 * Why by hand: the CUDA 13 toolkit the project builds against ships no nvml.h (it comes with the driver's
 * development package), the MUSA build and the twin have none, and the probe opens libnvidia-ml.so.1 with
 * dlopen at run time, so no program needs the library or the driver to link or start (NCCL does the same
 * in its nvmlwrap.h, "extracted from nvml.h"). The prototypes below are never called directly (that would
 * link against the library): nvml_probe.c types its dlsym pointers from them, and the tests' fake
 * libnvidia-ml defines them, so the compiler holds both to one declaration.
 *
 * Checked against NVIDIA's NVML API Reference (docs.nvidia.com/deploy/nvml-api, R590) and its nvml.h:
 * the return codes' values; NVML_TEMPERATURE_GPU = 0; NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
 * NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1; nvmlDevice_t an opaque pointer; the signatures of
 * nvmlInit_v2, nvmlShutdown, nvmlErrorString, nvmlDeviceGetHandleByPciBusId_v2 (takes "%x:%x:%x.%x",
 * CUDA's "0000:1B:00.0" as NVML's "00000000:1B:00.0"), nvmlDeviceGetIndex, nvmlDeviceGetTotalEccErrors,
 * nvmlDeviceGetTemperature (deprecated in CUDA 13.0, to be removed in 14.0: then it returns
 * NVML_ERROR_DEPRECATED) and its successor nvmlDeviceGetTemperatureV with nvmlTemperature_v1_t, whose
 * version word is NVML_STRUCT_VERSION(Temperature, 1) = sizeof(nvmlTemperature_v1_t) | 1 << 24.
 * nvml.h's enums are C enums (int-sized, passed as int); they are enums here too. */
#ifndef TWINRUN_BASE_NVML_NVML_API_H
#define TWINRUN_BASE_NVML_NVML_API_H

typedef struct nvmlDevice_st *nvmlDevice_t;

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3, /* the GPU does not report it: "not reported", never a failure */
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef enum nvmlTemperatureSensors_enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;
typedef enum nvmlMemoryErrorType_enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
} nvmlMemoryErrorType_t;
typedef enum nvmlEccCounterType_enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 } nvmlEccCounterType_t;

typedef struct nvmlTemperature_v1_st {
    unsigned int version; /* nvmlTemperature_v1 */
    nvmlTemperatureSensors_t sensorType;
    int temperature; /* degrees Celsius */
} nvmlTemperature_v1_t;
#define nvmlTemperature_v1 ((unsigned int)(sizeof(nvmlTemperature_v1_t) | (1u << 24)))

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType, unsigned long long *eccCounts);
nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_v1_t *temperature);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp);

#endif
