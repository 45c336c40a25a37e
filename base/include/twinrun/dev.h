/* The device seam: memory, copies, streams, events and the clock.
 *
 * Resolved at link time: sim/dev/dev_sim.c (twin: host memory with a per-rank capacity and a simulated
 * clock) or cuda/dev_cuda.cu (CUDA/MUSA runtime). Engine code never dereferences a device
 * pointer on the host; it copies through these calls. The twin still runs each piece of work in issue
 * order, but it times every stream on a clock of its own and orders streams only by events, and it
 * reports work on one stream that touches memory another stream's unordered work writes (a stream
 * race: docs/twin.md#streams).
 *
 * Errors: allocation failure returns NULL after recording a message (dev_last_error); every other
 * failure is fatal for the rank and goes through dev_rank_abort. */
#ifndef TWINRUN_BASE_DEV_H
#define TWINRUN_BASE_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dev_device dev_device;
typedef struct dev_stream dev_stream;
typedef struct dev_event dev_event;

typedef struct dev_info {
    char name[64];          /* "twin-cpu", "NVIDIA H200", ... */
    char backend[16];       /* "twin", "cuda", "musa" */
    size_t capacity;        /* bytes this rank may allocate */
    int count;              /* devices this process's node shows (twin: the node's GPUs); the preflight compares */
    char simulated[16];     /* "" when dev_clock_now is wall time; else the spec the twin's cost model times
                           * kernels and collectives against ("H100"): such figures must say so */
    double peak_bf16_flops; /* dense bf16 tensor-core peak, FLOP/s, that MFU is measured against: the twin's
                             * spec's; 0 when the backend does not know it (the CUDA build) */
    size_t runtime_bytes;   /* device memory held beside this rank's allocations and outside its capacity: the
                             * CUDA context, libraries' state (a GPU: in use when the device was opened; the
                             * twin's predict mode: its spec's measured figure; otherwise 0) */
    char versions[128];     /* the driver, runtime and collective library below the build ("driver 13.0, runtime
                             * 13.0, NCCL 2.27.3"; the twin: "twin 0.3.0"): what the doctor compares across nodes */
} dev_info;

/* Opens device `ordinal` for one rank. capacity == 0 means the device's own memory size
 * (twin: unlimited unless set). Returns NULL and fills err on failure. */
dev_device *dev_open(int ordinal, size_t capacity, char *err, size_t errlen);
void dev_close(dev_device *d);

/* What the rank that opened d holds on the host (its model's tables, optimizer, data views), to be
 * freed by fn(arg) if the rank ends without returning from its entry: a crash, or killed by the
 * watchdog's abort mid-call, as an OS frees a dead process's memory. The twin, where ranks share a
 * process, calls fn when it reclaims such a rank: after withdrawing its collectives and destroying its
 * communicators, before freeing d's memory, so fn may free device buffers but must neither communicate
 * nor destroy communicators. Real backends never call it (the process is gone). fn NULL clears it; a
 * rank that returns frees its own state and clears it first. */
void dev_set_reclaim(dev_device *d, void (*fn)(void *arg), void *arg);
void dev_get_info(const dev_device *d, dev_info *out);

/* The health of the GPU a rank drives, as its driver reports it: what the doctor's `health` check judges
 * (engine/doctor/doctor_health.c). Asked for apart from dev_get_info because asking costs (the CUDA
 * build loads NVML and initialises it) and only the doctor needs it. Each reading says whether the
 * driver gave it; nothing here is a failure of the rank. */
typedef struct dev_health {
    bool reported;          /* the driver was asked about this rank's GPU and answered; else `reason` says why not */
    char reason[192];       /* "the twin has no sensors", "cannot load libnvidia-ml.so.1 ..." */
    int index;              /* the GPU as nvidia-smi numbers it (NVML's index, not CUDA_VISIBLE_DEVICES'); -1 unknown */
    char pci_bus_id[32];    /* "00000000:1B:00.0" as nvidia-smi prints it: how the rank's CUDA device was matched
                             * to NVML's ("" unknown) */
    bool has_ecc_volatile;  /* ecc_volatile holds a reading */
    bool has_ecc_aggregate; /* ecc_aggregate holds a reading */
    bool has_temperature;   /* temperature_c holds a reading */
    unsigned long long ecc_volatile;  /* uncorrectable ECC errors since the driver last loaded */
    unsigned long long ecc_aggregate; /* uncorrectable ECC errors over the GPU's life (its InfoROM) */
    int temperature_c;                /* the GPU's core temperature, degrees Celsius */
    char missing[128];                /* the readings the driver did not give, and why ("temperature: Not Supported") */
} dev_health;

void dev_get_health(const dev_device *d, dev_health *out);

/* Memory. `what` names the allocation for out-of-memory messages. */
void *dev_alloc(dev_device *d, size_t bytes, const char *what);
void dev_free(dev_device *d, void *p);
size_t dev_mem_used(const dev_device *d);
size_t dev_mem_peak(const dev_device *d);
const char *dev_last_error(const dev_device *d);

/* What an allocation is for: the parts of a memory report (Megatron's categories). The engine sets
 * the device's current purpose before it allocates (dev_mem_tag_set returns the previous one, to
 * restore); every dev_alloc is counted under the purpose current at the time, and dev_free takes it
 * off the same part. Untagged allocations (small flags, scalars) count as DEV_MEM_WORKSPACE. */
typedef enum dev_mem_tag {
    DEV_MEM_WORKSPACE = 0, /* backward scratch, flags and scalars: whatever is neither of the below */
    DEV_MEM_WEIGHTS,       /* the model's parameters in their compute type */
    DEV_MEM_MAIN_GRADS,    /* the gradient buffer (fp32 main grads in bf16 training) */
    DEV_MEM_OPTIMIZER,     /* fp32 master weights (a separate copy) and Adam's moments, sharded or whole */
    DEV_MEM_ACTIVATIONS,   /* activations kept for the backward pass, the recompute workspace */
    DEV_MEM_COMM,          /* staging buffers of collectives (sequence- and context-parallel gathers) */
    DEV_MEM_TAG_COUNT,
} dev_mem_tag;

dev_mem_tag dev_mem_tag_set(dev_device *d, dev_mem_tag tag);
/* parts[tag]: the bytes of each purpose in use at the moment of the device's peak; they sum to
 * dev_mem_peak exactly. */
void dev_mem_peak_parts(const dev_device *d, size_t parts[DEV_MEM_TAG_COUNT]);
const char *dev_mem_tag_name(dev_mem_tag tag); /* "weights", "main_grads", ... (the JSON report's keys) */

/* Shape-only ("predict") mode, from now on for the whole device: dev_alloc accounts bytes without
 * memory behind them (and no capacity stops it: the report says whether the peak fits), kernels and
 * collectives charge their simulated time and compute and move nothing, copies to the host fill
 * zeros. Only the twin has it: the real backends return -1 with err saying so. Set it right after
 * dev_open, before the first allocation. */
int dev_set_shape_only(dev_device *d, char *err, size_t errlen);
bool dev_shape_only(const dev_device *d);

/* --deterministic-mode: from now on, kernels that have a faster variant whose sums run in no fixed
 * order (atomics) take their fixed-order one, so two runs give the same bits. The twin's kernels are
 * all fixed-order: there it is only recorded. */
void dev_set_deterministic(dev_device *d, bool on);
bool dev_deterministic(const dev_device *d);

/* Streams: ordered queues of work. The default stream exists for the device's lifetime. */
dev_stream *dev_stream_default(dev_device *d);
dev_stream *dev_stream_create(dev_device *d);
void dev_stream_destroy(dev_stream *s);
void dev_stream_sync(dev_stream *s); /* host waits until the stream's work is done */
dev_device *dev_stream_device(dev_stream *s);
/* A name for reports (the twin's stream-race messages); copied. Optional: unnamed streams are
 * "default" and "stream N". The CUDA build ignores it. */
void dev_stream_set_name(dev_stream *s, const char *name);
/* Background work (the optimizer's step ahead of the forward pass): from the first call on, s's work
 * yields to the other streams' (on a GPU: the lowest stream priority, the others the highest); while
 * `active`, the GEMMs launched on the device's other streams leave it a few multiprocessors
 * (TWINRUN_BACKGROUND_SMS, core/background_sms.h), so the two run side by side instead of one after the
 * other. Call it with active false once the other streams wait for what s does. Deterministic as the
 * rest: a GEMM's algorithm follows the multiprocessors it is given, the same in every run of the same
 * job. The twin's side streams already overlap the default stream in simulated time; it charges the
 * default stream's GEMMs the multiprocessors they keep meanwhile. */
void dev_stream_set_background(dev_stream *s, bool active);

dev_event *dev_event_create(dev_device *d);
void dev_event_destroy(dev_event *e);
void dev_event_record(dev_event *e, dev_stream *s);
void dev_stream_wait_event(dev_stream *s, dev_event *e);

/* Copies are ordered on stream s; host buffers must stay valid until dev_stream_sync. */
void dev_copy_h2d(dev_stream *s, void *dst, const void *src, size_t bytes);
void dev_copy_d2h(dev_stream *s, void *dst, const void *src, size_t bytes);
void dev_copy_d2d(dev_stream *s, void *dst, const void *src, size_t bytes);
void dev_memset_zero(dev_stream *s, void *dst, size_t bytes);

/* Clock in seconds: wall time on real devices, simulated time in the twin, so a 10-minute
 * watchdog costs no wall time there. */
double dev_clock_now(dev_device *d);
void dev_sleep(dev_device *d, double seconds);
/* Of dev_clock_now, the seconds this rank spent on its own work rather than in collectives: what a
 * straggler report compares. The twin knows it exactly; the CUDA build returns dev_clock_now, the
 * wall clock with collectives included (no per-kernel timing there). */
double dev_busy_seconds(dev_device *d);
/* The rest of dev_clock_now, split: *wait the seconds the rank spent in collectives and transfers before
 * the last of their members arrived (a pipeline stage waiting for its neighbour, or for the stages still
 * draining the pipeline: the pipeline bubble), *comm the seconds they then took to move the data
 * (exposed communication). busy + wait + comm = dev_clock_now. The twin knows them exactly; the CUDA
 * build has no per-call timing and returns 0 for both. */
void dev_wait_split(dev_device *d, double *wait, double *comm);
/* The training loop marks where each iteration starts (iteration >= 1) and where the iterations end
 * (0), so a backend's profiler can leave out the warm-up and the set-up around them: the GPU build's
 * TWINRUN_GPU_PROFILE table and the twin's TWINRUN_TWIN_PROFILE ledger report a steady step. No
 * effect on results or on the clock. */
void dev_step_mark(dev_device *d, int64_t iteration);

/* The one rank-fail path's last step: real mode exits the process with `code`; the twin ends
 * only the calling rank. Never returns. */
_Noreturn void dev_rank_abort(int code);
/* The fatal message a failing rank leaves (tr_fatal calls it before dev_rank_abort): the twin keeps it
 * for its run report; a real process has already printed it. */
void dev_rank_note(const char *msg);

/* A fault injection's stuck rank: it never returns and never progresses (a hung kernel, a host that
 * keeps its sockets open). Real mode: the process sleeps until killed; the twin: the rank blocks
 * forever, so only its peers' watchdogs can notice. */
_Noreturn void dev_rank_hang(void);

#endif
