/* The doctor's ranks: each opens its device, reads its clock after a barrier, runs the collective test,
 * collects its facts and sends them to rank 0, which compares them and writes the report. The verdict
 * is broadcast, so every process of a real job exits with the same status. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctor/doctor_internal.h"
#include "twinrun/err.h"

void doctor_options_default(doctor_options *o) {
    memset(o, 0, sizeof *o);
    o->gpus_per_node = 8;
    o->tp = o->pp = o->cp = 1;
    /* nccl-tests' usual span, up to where bus bandwidth levels off on NVLink and InfiniBand */
    o->nsizes = 3;
    o->sizes[0] = (size_t)8 << 20, o->sizes[1] = (size_t)64 << 20, o->sizes[2] = (size_t)512 << 20;
    o->slow_ratio = 0.5;
    o->max_clock_skew_s = 1.0;
    o->timeout_s = 600;
}

const char *doctor_status_name(doctor_status s) {
    static const char *const names[] = {"pass", "warn", "fail", "skip"};
    return (unsigned)s < 4 ? names[s] : "?";
}

typedef struct doctor_job {
    const doctor_options *o;
    doctor_report *rep;
    char err[640];  /* the first rank's failure to set up */
    bool ran_rank0; /* rank 0 ran in this process: the report must be whole */
} doctor_job;

/* A wall clock every node shares (when their clocks agree) on real devices; the twin's simulated one,
 * which has no skew to find unless a rehearsal adds some. */
static double clock_now(dev_device *d, bool simulated) {
    if (simulated) return dev_clock_now(d);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Every rank's record to rank 0, one point-to-point transfer each. */
static void gather_to_zero(coll_comm *world_c, dev_device *d, int rank, int world, doctor_wire *mine,
                           doctor_wire *all) {
    const size_t words = sizeof *mine / sizeof(int32_t);
    dev_stream *s = dev_stream_default(d);
    void *buf = dev_alloc(d, sizeof *mine, "doctor: facts");
    TR_CHECK(buf != NULL, "out of device memory for the doctor's facts");
    if (rank == 0) {
        all[0] = *mine;
        for (int r = 1; r < world; r++) {
            coll_recv(world_c, s, buf, words, TR_I32, r);
            dev_copy_d2h(s, &all[r], buf, sizeof *mine);
            dev_stream_sync(s);
        }
    } else {
        dev_copy_h2d(s, buf, mine, sizeof *mine);
        coll_send(world_c, s, buf, words, TR_I32, 0);
        dev_stream_sync(s);
    }
    dev_free(d, buf);
}

static void verdict(coll_comm *world_c, dev_device *d, int32_t *v) {
    int32_t *buf = dev_alloc(d, sizeof *buf, "doctor: verdict");
    TR_CHECK(buf != NULL, "out of device memory for the doctor's verdict");
    dev_stream *s = dev_stream_default(d);
    dev_copy_h2d(s, buf, v, sizeof *v);
    coll_broadcast(world_c, s, buf, 1, TR_I32, 0);
    dev_copy_d2h(s, v, buf, sizeof *v);
    dev_stream_sync(s);
    dev_free(d, buf);
}

/* Rank 0: the report from every rank's record. */
static void assess(const doctor_options *o, doctor_report *r, const doctor_wire *all, int world) {
    r->world = world;
    r->gpus_per_node = o->gpus_per_node;
    r->nodes = world / o->gpus_per_node;
    r->slow_node = -1;
    doctor_fact(all[0].text, "build", r->build, sizeof r->build);
    doctor_fact(all[0].text, "backend", r->backend, sizeof r->backend);
    doctor_fact(all[0].text, "device", r->device, sizeof r->device);
    doctor_fact(all[0].text, "versions", r->versions, sizeof r->versions);
    doctor_fact(all[0].text, "simulated", r->simulated, sizeof r->simulated);
    doctor_compare(o, r, all);
    doctor_hostfile_check(o, r);
    doctor_bandwidth(o, r, all);
    r->passed = true;
    for (int i = 0; i < r->nchecks; i++) r->passed &= r->checks[i].status != DOCTOR_FAIL;
    r->reported = true;
}

static int doctor_rank(int rank, int world, void *arg) {
    doctor_job *job = arg;
    const doctor_options *o = job->o;
    char err[512];
    if (rank == 0) job->ran_rank0 = true;
    dev_device *d = dev_open(0, 0, err, sizeof err);
    if (!d) {
        if (!job->err[0]) snprintf(job->err, sizeof job->err, "rank %d: %s", rank, err);
        return TR_EXIT_FATAL;
    }
    coll_set_timeout(d, o->timeout_s);
    fault_rank *fr = fault_rank_open(o->faults, rank, world, d);
    fault_slow_links(fr);
    dev_info info;
    dev_get_info(d, &info);
    const bool simulated = info.simulated[0] != 0;
    int *all_ranks = malloc(sizeof *all_ranks * (size_t)world);
    TR_CHECK(all_ranks != NULL, "out of host memory");
    for (int r = 0; r < world; r++) all_ranks[r] = r;
    coll_comm *world_c = coll_comm_create(d, all_ranks, world, rank, "doctor_world", err, sizeof err);
    free(all_ranks);
    if (!world_c) {
        if (!job->err[0]) snprintf(job->err, sizeof job->err, "rank %d: %s", rank, err);
        fault_rank_close(fr);
        dev_close(d);
        return TR_EXIT_FATAL;
    }
    doctor_wire *mine = calloc(1, sizeof *mine);
    TR_CHECK(mine != NULL, "out of host memory");
    /* the clocks: read by every rank as it leaves one barrier */
    coll_barrier(world_c, dev_stream_default(d));
    dev_stream_sync(dev_stream_default(d));
    const double clock = clock_now(d, simulated);

    /* the twin times the test on a shape-only device: sizes as on GPUs, no bytes moved */
    dev_device *td = d;
    if (simulated) {
        td = dev_open(0, 0, err, sizeof err);
        if (td && dev_set_shape_only(td, err, sizeof err)) dev_close(td), td = NULL;
        if (!td) td = d;
    }
    const int iters = o->iters > 0 ? o->iters : simulated ? 1 : 5;
    if (o->progress && rank == 0) fprintf(o->progress, "doctor: collective test over %d ranks ...\n", world);
    int rc = doctor_coll_test(o, td, rank, world, iters, mine, err, sizeof err);
    if (td != d) dev_close(td);
    if (rc) tr_fatal("doctor: rank %d: the collective test could not run: %s", rank, err);

    doctor_facts_collect(o, d, fr, rank, clock, mine);
    doctor_wire *all = rank == 0 ? calloc((size_t)world, sizeof *all) : NULL;
    TR_CHECK(rank != 0 || all != NULL, "out of host memory for the doctor's records");
    gather_to_zero(world_c, d, rank, world, mine, all);
    int32_t passed = 0;
    if (rank == 0) {
        assess(o, job->rep, all, world);
        passed = job->rep->passed;
    }
    verdict(world_c, d, &passed);
    free(all);
    free(mine);
    coll_comm_destroy(world_c);
    fault_rank_close(fr);
    dev_close(d);
    return passed ? 0 : TR_EXIT_FATAL;
}

int doctor_run_with(const doctor_options *o, int world, doctor_report *rep, launch_fn launch, void *launch_ctx,
                    char *err, size_t errlen) {
    memset(rep, 0, sizeof *rep);
    rep->slow_node = -1;
    if (world < 1 || o->gpus_per_node < 1 || world % o->gpus_per_node)
        return tr_errf(err, errlen, "%d ranks are not whole nodes of %d GPUs: set the ranks per node", world,
                       o->gpus_per_node);
    doctor_job job = {.o = o, .rep = rep};
    int rc = launch ? launch(launch_ctx, world, doctor_rank, &job, err, errlen)
                    : launch_ranks(world, doctor_rank, &job, err, errlen);
    if (rc < 0) return -1;
    if (job.err[0]) return tr_errf(err, errlen, "%s", job.err);
    /* a rank that died (its message is on stderr) leaves rank 0's report unwritten, or a verdict unheard */
    if (job.ran_rank0 && !rep->reported)
        return tr_errf(err, errlen, "the doctor did not finish: a rank failed (its message is above)");
    if (rc != 0 && rc != TR_EXIT_FATAL) return tr_errf(err, errlen, "a rank of the doctor ended with status %d", rc);
    if (rc && rep->reported && rep->passed)
        return tr_errf(err, errlen, "a rank of the doctor failed (its message is above)");
    rep->exit_code = rc;
    return 0;
}

int doctor_run(const doctor_options *o, int world, doctor_report *rep, char *err, size_t errlen) {
    return doctor_run_with(o, world, rep, NULL, NULL, err, errlen);
}

void doctor_report_free(doctor_report *r) {
    if (!r) return;
    free(r->checks);
    free(r->measures);
    memset(r, 0, sizeof *r);
    r->slow_node = -1;
}

const doctor_check *doctor_report_failed(const doctor_report *r, const char *id) {
    for (int i = 0; i < r->nchecks; i++)
        if (r->checks[i].status == DOCTOR_FAIL && !strncmp(r->checks[i].id, id, strlen(id))) return &r->checks[i];
    return NULL;
}
