/* The rank grid in Megatron's default order tp-cp-ep-dp-pp (tp fastest):
 *   rank = tp + TP * (cp + CP * (dp + DP * pp)),  world = TP * CP * DP * PP  (no expert parallelism).
 * and the communicators each rank needs along it. */
#ifndef TWINRUN_ENGINE_PARALLEL_GRID_H
#define TWINRUN_ENGINE_PARALLEL_GRID_H

#include <stddef.h>

#include "twinrun/coll.h"
#include "twinrun/config.h"

typedef enum tr_axis { TR_AXIS_TP = 0, TR_AXIS_CP, TR_AXIS_DP, TR_AXIS_PP, TR_AXIS_COUNT } tr_axis;

typedef struct tr_grid {
    int world, rank;
    int size[TR_AXIS_COUNT]; /* TP, CP, DP, PP */
    int coord[TR_AXIS_COUNT];
} tr_grid;

/* Derives DP = world / (TP*CP*PP) and this rank's coordinates; -1 with a message showing the
 * numbers when the world does not factor. */
int tr_grid_init(tr_grid *g, const tr_config *cfg, int world, int rank, char *err, size_t errlen);
int tr_grid_rank_of(const tr_grid *g, const int coord[TR_AXIS_COUNT]);
/* The global ranks of this rank's group along `axis` (ascending by that coordinate): [size[axis]]. */
void tr_grid_group(const tr_grid *g, tr_axis axis, int *ranks);
/* The data-parallel x context-parallel group (Megatron's gradient reduction group), ascending. */
void tr_grid_group_dp_cp(const tr_grid *g, int *ranks);

/* Communicators of one rank. Groups of one rank are still communicators (their collectives are
 * copies), so the engine never special-cases a dimension of size 1. */
typedef struct tr_groups {
    coll_comm *tp, *cp, *dp, *pp, *dp_cp, *world;
} tr_groups;

int tr_groups_create(tr_groups *gr, const tr_grid *g, dev_device *d, char *err, size_t errlen);
void tr_groups_destroy(tr_groups *gr);

#endif
