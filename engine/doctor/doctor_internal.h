/* What the doctor's files share: the record each rank sends rank 0, the test's rounds and groups, and the
 * helpers that add checks to the report. */
#ifndef TWINRUN_ENGINE_DOCTOR_DOCTOR_INTERNAL_H
#define TWINRUN_ENGINE_DOCTOR_DOCTOR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "doctor/doctor.h"
#include "fault/fault.h"
#include "twinrun/coll.h"
#include "twinrun/dev.h"

/* The collective test's rounds: the guide's four stages, the two-node one twice (pairs 0-1, 2-3, ...
 * then 1-2, 3-4, ..., so a node in two slow pairs is named rather than a pair). */
enum { DOCTOR_R_NODE = 0, DOCTOR_R_PAIR_A, DOCTOR_R_PAIR_B, DOCTOR_R_MP, DOCTOR_R_ALL, DOCTOR_ROUNDS };
enum { DOCTOR_OP_ALL_REDUCE = 0, DOCTOR_OP_ALL_GATHER, DOCTOR_OP_REDUCE_SCATTER, DOCTOR_OP_SENDRECV, DOCTOR_OPS };
#define DOCTOR_TIMES (DOCTOR_ROUNDS * DOCTOR_OPS * DOCTOR_MAX_SIZES)

/* What one rank sends rank 0: its facts as "key=value" lines, and the test's times (seconds per
 * operation; < 0 where the rank took no part). Sent as int32 words, the type every backend moves. */
#define DOCTOR_TEXT_LEN 6144
typedef struct doctor_wire {
    char text[DOCTOR_TEXT_LEN];
    double times[DOCTOR_TIMES];
} doctor_wire;

static inline int doctor_time_index(int round, int op, int size) {
    return (round * DOCTOR_OPS + op) * DOCTOR_MAX_SIZES + size;
}

/* ---- one rank (doctor_facts.c, doctor_coll.c) ------------------------------------------------- */
/* The rank's facts into w->text: build and commit, backend, device, versions, devices, health, launcher
 * settings, its clock after the barrier (`clock`), and, on the first rank of a node, each directory. */
void doctor_facts_collect(const doctor_options *o, dev_device *d, fault_rank *fr, int rank, double clock,
                          doctor_wire *w);
/* The value of key in a rank's text into out ("" and false when absent). */
bool doctor_fact(const char *text, const char *key, char *out, size_t outlen);

/* The ranks of `rank`'s group in a round (ascending) into ranks[world]; 0 when it sits the round out. */
int doctor_group(const doctor_options *o, int world, int round, int rank, int *ranks);
const char *doctor_round_stage(int round); /* "one_node", "two_nodes", "mp_group", "all_ranks" */
const char *doctor_op_name(int op);
/* nccl-tests' bus bandwidth factor of op over n ranks (doc/PERFORMANCE.md). */
double doctor_busbw_factor(int op, int n);
/* The bytes one operation of op moves at size S over n ranks, as nccl-tests counts S (all-gather and
 * reduce-scatter: n blocks of S/n, whole elements). */
size_t doctor_op_bytes(int op, size_t size, int n);
/* Runs every round on device d; this rank's times into w->times. 0, or -1 with err. */
int doctor_coll_test(const doctor_options *o, dev_device *d, int rank, int world, int iters, doctor_wire *w, char *err,
                     size_t errlen);

/* ---- rank 0 (doctor_compare.c, doctor_bw.c, doctor_hostfile.c) --------------------------------- */
doctor_check *doctor_add(doctor_report *r, const char *id, const char *title, doctor_status st, int node,
                         const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void doctor_node_ranks(const doctor_report *r, int node, int *first, int *last);
void doctor_compare(const doctor_options *o, doctor_report *r, const doctor_wire *all);
void doctor_bandwidth(const doctor_options *o, doctor_report *r, const doctor_wire *all);
void doctor_hostfile_check(const doctor_options *o, doctor_report *r);

/* ---- the health check (doctor_health.c) -------------------------------------------------------- */
/* A rank's GPU readings as lines of its facts ("health=reported", "gpu=", "pci=", "ecc_volatile=",
 * "ecc_aggregate=", "temperature=", "health_missing="; or "health=not reported: REASON"), and back. */
void doctor_health_format(const dev_health *h, char *out, size_t len);
void doctor_health_parse(const char *text, dev_health *h);
/* Adds the `health` check from every rank's readings (all[world]): fail on an uncorrectable ECC error
 * since the driver loaded, warn above 85 C or on lifetime-only errors, skip where nothing is reported. */
void doctor_health_judge(doctor_report *r, const dev_health *all);

#endif
