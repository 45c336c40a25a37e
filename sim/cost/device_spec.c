/* The device spec table. Each number is a vendor figure unless marked "assumed"; the source
 * field says which document. Network figures are the common cluster build (one 400 Gb/s NIC per
 * GPU), not part of the GPU's datasheet. */
#include <stddef.h>
#include <strings.h>

#include "cost/calibration.h"
#include "twin_cost.h"

#define TB 1e12
#define GB 1e9
#define GIB ((size_t)1 << 30)
#define MIB ((size_t)1 << 20)

/* What the real build's process holds on an H200 beside its accounted allocations, at the step's peak:
 * nvidia-smi's peak (less what was in use before the process) minus the engine's accounted peak, over
 * the six configs of docs/results/calibration/h200-2026-12-02b: 3.12-3.31 GiB, mean 3.22 GiB (0.8 GiB
 * of it the CUDA context and modules, still held after the model is freed). The other devices run the
 * same stack: the H200's figure stands for them (assumed) until one is measured. */
#define RUNTIME_H200 ((size_t)(3.22 * (double)GIB))

static const twin_device_spec specs[] = {
    {
        .name = "H100",
        .full_name = "NVIDIA H100 SXM5 80GB (twin)",
        .bf16_flops = 989.5 * TB, /* 1,979 TFLOPS with sparsity; dense is half */
        .fp8_flops = 1979 * TB,   /* dense FP8 tensor core (3,958 with sparsity) */
        .fp32_flops = 67 * TB,
        .mem_bandwidth = 3.35 * TB,
        .mem_bytes = 80 * GIB,         /* datasheet 80 GB; nvidia-smi shows 81559 MiB (79.6 GiB), 0.4 GiB less */
        .runtime_bytes = RUNTIME_H200, /* assumed: the H200's measurement */
        .link_bandwidth = 450 * GB,    /* NVLink 4: 900 GB/s total, both directions */
        .link_latency = 1e-6,          /* assumed */
        .net_bandwidth = 50 * GB,      /* 400 Gb/s NDR InfiniBand per GPU */
        .net_latency = 5e-6,           /* assumed: NIC + switch + NCCL protocol */
        .launch_overhead = 4e-6,       /* assumed: typical CUDA launch */
        .sms = 132,
        .source = "NVIDIA H100 Tensor Core GPU datasheet (SXM5 column); network: ConnectX-7 NDR 400 Gb/s",
    },
    {
        .name = "H200",
        .full_name = "NVIDIA H200 SXM 141GB (twin)",
        .bf16_flops = 989.5 * TB, /* 1,979 TFLOPS with sparsity; dense is half */
        .fp8_flops = 1979 * TB,   /* dense FP8 tensor core (3,958 with sparsity) */
        .fp32_flops = 67 * TB,
        .mem_bandwidth = 4.8 * TB,
        .mem_bytes = 143771 * MIB,     /* nvidia-smi's total (datasheet: 141 GB); 141e9 bytes would undercount 9 GiB */
        .runtime_bytes = RUNTIME_H200, /* measured (above) */
        .link_bandwidth = 450 * GB,    /* NVLink 4: 900 GB/s total */
        .link_latency = 1e-6,
        .net_bandwidth = 50 * GB,
        .net_latency = 5e-6,
        .launch_overhead = 4e-6,
        .sms = 132,
        .background_rate = 0.53, /* assumed: H100-cal's fit (the same multiprocessors); not measured on an H200 */
        .source = "NVIDIA H200 Tensor Core GPU datasheet (SXM column); memory: nvidia-smi's total (143771 MiB); "
                  "network: ConnectX-7 NDR 400 Gb/s",
        .cal = &twin_calibration_h200, /* kernel efficiencies fitted to the real build on an H200 */
    },
    {
        .name = "A100",
        .full_name = "NVIDIA A100 SXM4 80GB (twin)",
        .bf16_flops = 312 * TB, /* 624 with sparsity */
        .fp8_flops = 0,         /* no FP8 tensor cores: FP8 GEMMs at the bf16 rate */
        .fp32_flops = 19.5 * TB,
        .mem_bandwidth = 2.039 * TB,
        .mem_bytes = 80 * GIB,
        .runtime_bytes = RUNTIME_H200, /* assumed: the H200's measurement */
        .link_bandwidth = 300 * GB,    /* NVLink 3: 600 GB/s total */
        .link_latency = 1e-6,
        .net_bandwidth = 25 * GB, /* 200 Gb/s HDR InfiniBand per GPU (DGX A100) */
        .net_latency = 5e-6,
        .launch_overhead = 4e-6,
        .sms = 108,
        .source = "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM column); network: DGX A100 HDR 200 Gb/s per GPU",
    },
    {
        .name = "MTT-S5000",
        .full_name = "Moore Threads MTT S5000 (twin)",
        .bf16_flops = 500 * TB, /* assumed: half the ~1000 TFLOPS FP8 press figure; BF16 is unpublished */
        .fp8_flops = 1000 * TB, /* the ~1000 TFLOPS FP8 press figure */
        .fp32_flops = 32 * TB,  /* assumed: unpublished */
        .mem_bandwidth = 1.6 * TB,
        .mem_bytes = 80 * GIB,
        .runtime_bytes = RUNTIME_H200, /* assumed: the H200's measurement */
        .link_bandwidth = 392 * GB,    /* ~784 GB/s card-to-card press figure, read as both directions */
        .link_latency = 1e-6,          /* assumed */
        .net_bandwidth = 50 * GB,      /* assumed: 400 Gb/s RoCE per GPU */
        .net_latency = 5e-6,
        .launch_overhead = 4e-6,
        .sms = 0, /* the MUSA build's GEMMs (muBLAS) take no SM-count target: nothing shared */
        .source = "Moore Threads press figures (80 GB, ~1.6 TB/s, ~784 GB/s card-to-card, ~1000 TFLOPS FP8); "
                  "BF16/FP32 rates and network assumed",
    },
    {
        /* The H100's figures with kernel efficiencies fitted to the real build on an H100 (lab/gpu_calibrate.sh's
         * eight configs: the 1.5B model at four sequence lengths and both recompute kinds, the 8B and 70B
         * seeds' layers at seq 8192; docs/prediction.md#calibration); the planner's 80 GiB cards with
         * calibrated times. */
        .name = "H100-cal",
        .full_name = "NVIDIA H100 SXM5 80GB (twin, calibrated on an H100)",
        .bf16_flops = 989.5 * TB,
        .fp8_flops = 1979 * TB, /* dense FP8 tensor core (3,958 with sparsity) */
        .fp32_flops = 67 * TB,
        .mem_bandwidth = 3.35 * TB,
        .mem_bytes = 80 * GIB,
        .runtime_bytes = RUNTIME_H200, /* assumed: the H200's measurement */
        .link_bandwidth = 450 * GB,
        .link_latency = 1e-6,
        .net_bandwidth = 50 * GB,
        .net_latency = 5e-6,
        .launch_overhead = 4e-6,
        .sms = 132,
        /* fitted to the same eight configs' steps on one H100 at 2b9506d
         * (lab/calib/fit_background_rate.py docs/results/calibration/h100-2026-12-07b) */
        .background_rate = 0.53,
        .source = "NVIDIA H100 Tensor Core GPU datasheet (SXM5 column); kernel efficiencies fitted on an H100 "
                  "80GB HBM3 (docs/results/calibration/h100-2026-12-07b)",
        .cal = &twin_calibration_h100,
    },
};

static const struct {
    const char *alias, *name;
} aliases[] = {{"S5000", "MTT-S5000"}, {"MTT_S5000", "MTT-S5000"}, {"MTTS5000", "MTT-S5000"}};

int twin_device_spec_count(void) { return (int)(sizeof specs / sizeof specs[0]); }

const twin_device_spec *twin_device_spec_at(int i) { return i >= 0 && i < twin_device_spec_count() ? &specs[i] : NULL; }

const twin_device_spec *twin_device_spec_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcasecmp(name, aliases[i].alias) == 0) name = aliases[i].name;
    for (int i = 0; i < twin_device_spec_count(); i++)
        if (strcasecmp(name, specs[i].name) == 0) return &specs[i];
    return NULL;
}
