/* train_llama3: Megatron-LM's pretrain_gpt.py flags, one rank, on whichever backend this binary
 * was linked with (the twin or CUDA). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "fault/fault.h"
#include "launch/launch_vars.h"
#include "train/banner.h"
#include "train/batch_source.h"
#include "train/trainer.h"
#include "twinrun/config.h"
#include "twinrun/err.h"
#include "twinrun/launch.h"
#include "twinrun/version.h"

int main(int argc, char **argv) {
    struct timespec started; /* wall clock at the start of main: start-up is measured from here */
    clock_gettime(CLOCK_REALTIME, &started);
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "train_llama3");
        return 0;
    }
    tr_config cfg;
    char err[2048] = "";
    tr_config_defaults(&cfg);
    int rc = tr_config_parse(&cfg, argc - 1, argv + 1, err, sizeof err);
    if (rc == 1) return 0; /* --help */
    if (rc) {
        fprintf(stderr, "train_llama3: %s\n", err);
        return TR_EXIT_USAGE;
    }
    /* WORLD_SIZE in the environment, as torchrun and mpirun set it: the twin runs that many ranks in
     * this process, a real build is one of them */
    int world = launch_world_size(err, sizeof err);
    if (world < 0) {
        fprintf(stderr, "train_llama3: %s\n", err);
        return TR_EXIT_USAGE;
    }
    /* the environment the configuration checks need (--deterministic-mode: Megatron's NCCL_ALGO rule) */
    const char *nccl_algo = getenv("NCCL_ALGO");
    snprintf(cfg.nccl_algo, sizeof cfg.nccl_algo, "%s", nccl_algo ? nccl_algo : "");
    if (train_prepare_config(&cfg, world, err, sizeof err)) {
        fputs(cfg.warnings, stderr);
        fprintf(stderr, "train_llama3: %s\n", err);
        return TR_EXIT_USAGE;
    }
    fputs(cfg.warnings, stderr);
    /* Megatron's start-up banner, once per job: by the process that runs rank 0 */
    tr_launch_vars lv0;
    if (tr_launch_vars_from_env(&lv0, err, sizeof err) != 0 || lv0.rank <= 0)
        train_banner_print(stdout, "train_llama3", &cfg, world);
    /* faults to rehearse with (docs/faults.md): the same plan in the twin and on GPUs */
    fault_plan plan = {0};
    const char *faults = getenv("TWINRUN_FAULTS");
    if (faults && *faults) {
        /* nodes as the launcher laid them out (LOCAL_WORLD_SIZE), else of 8 GPUs, or one node of a smaller job */
        tr_launch_vars lv;
        const int per_node = tr_launch_vars_from_env(&lv, err, sizeof err) == 0 && lv.local_world > 0 ? lv.local_world
                             : world < 8                                                              ? world
                                                                                                      : 8;
        if (fault_plan_parse(faults, world, per_node, &plan, err, sizeof err)) {
            fprintf(stderr, "train_llama3: TWINRUN_FAULTS: %s\n", err);
            return TR_EXIT_USAGE;
        }
        /* against this job, by the check scenarios use: a fault that could never fire is refused */
        const int64_t iters = cfg.train_iters > 0
                                  ? cfg.train_iters
                                  : cfg.train_samples / (cfg.global_batch_size > 0 ? cfg.global_batch_size : 1);
        const fault_job job = {.world = world,
                               .gpus_per_node = per_node,
                               .train_iters = iters,
                               .num_layers = cfg.num_layers,
                               .save_interval = !cfg.save[0]            ? 0
                                                : cfg.save_interval > 0 ? cfg.save_interval
                                                                        : (int)(iters < INT32_MAX ? iters : 0),
                               .iters_name = "--train-iters",
                               .layers_name = "--num-layers",
                               .interval_name = "--save and --save-interval",
                               .fp8 = cfg.fp8 != TR_FP8_MODE_NONE};
        for (int i = 0; i < plan.n; i++) {
            if (fault_kind_is_doctor(plan.faults[i].kind))
                snprintf(err, sizeof err, "%s is found by the doctor before a job, not by training: run doctor with it",
                         fault_kind_name(plan.faults[i].kind));
            if (fault_kind_is_doctor(plan.faults[i].kind) ||
                fault_spec_check_job(&plan.faults[i], &job, NULL, err, sizeof err)) {
                char what[256];
                fault_spec_describe(&plan.faults[i], what, sizeof what);
                fprintf(stderr, "train_llama3: TWINRUN_FAULTS: fault %d (%s): %s\n", i + 1, what, err);
                fault_plan_free(&plan);
                return TR_EXIT_USAGE;
            }
        }
        cfg.faults = &plan;
    }
    tr_train_summary sum = {0}; /* no per-iteration arrays: train_run keeps these two pointers */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = train_run(&cfg, world, stdout, &sum, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fault_plan_free(&plan);
    if (rc) {
        fprintf(stderr, "train_llama3: %s\n", err);
        return rc;
    }
    /* the summary is the reporting rank's: processes of a multi-process job without it say nothing */
    if (sum.reported && sum.iterations > sum.start_iteration)
        printf("[after training] %d ranks, %lld iterations, %lld samples, lm loss %.6E -> %.6E, device memory peak "
               "%.1f MiB per rank\n",
               sum.world, (long long)sum.iterations, (long long)sum.consumed_samples, sum.first_loss, sum.last_loss,
               sum.device_peak_bytes / 1048576.0);
    else if (sum.reported) /* resumed at (or past) the last iteration: there were no losses to report */
        printf("[after training] %d ranks, no iteration to run: resumed at iteration %lld, %lld samples, device memory "
               "peak %.1f MiB per rank\n",
               sum.world, (long long)sum.start_iteration, (long long)sum.consumed_samples,
               sum.device_peak_bytes / 1048576.0);
    if (sum.reported && sum.first_iteration_wall > 0)
        printf("[startup] %.3f s from the start of the program to its first iteration\n",
               sum.first_iteration_wall - ((double)started.tv_sec + started.tv_nsec * 1e-9));
    /* what this process cost: for the twin, the price of rehearsing `world` ranks on this machine */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("[process] wall %.2f s for %d ranks (%.1f ms per iteration, setup included), host peak RSS %.1f MiB\n", wall,
           world, sum.iterations > 0 ? wall * 1000.0 / (double)sum.iterations : 0.0, ru.ru_maxrss / 1024.0);
    return 0;
}
