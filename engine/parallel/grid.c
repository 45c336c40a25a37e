#include "parallel/grid.h"

#include <stdlib.h>
#include <string.h>

#include "twinrun/err.h"

int tr_grid_init(tr_grid *g, const tr_config *cfg, int world, int rank, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    int tp = cfg->tensor_model_parallel_size, cp = cfg->context_parallel_size, pp = cfg->pipeline_model_parallel_size;
    if (tp < 1 || cp < 1 || pp < 1) return tr_errf(err, errlen, "parallel sizes must be at least 1");
    long long mp = (long long)tp * cp * pp;
    if (world < 1 || world % mp)
        return tr_errf(err, errlen,
                       "WORLD_SIZE %d is not divisible by TP x CP x PP = %d x %d x %d = %lld; "
                       "WORLD_SIZE must equal TP x CP x PP x DP",
                       world, tp, cp, pp, mp);
    if (rank < 0 || rank >= world) return tr_errf(err, errlen, "rank %d outside a world of %d", rank, world);
    g->world = world;
    g->rank = rank;
    g->size[TR_AXIS_TP] = tp;
    g->size[TR_AXIS_CP] = cp;
    g->size[TR_AXIS_DP] = (int)(world / mp);
    g->size[TR_AXIS_PP] = pp;
    int r = rank;
    for (int a = 0; a < TR_AXIS_COUNT; a++) {
        g->coord[a] = r % g->size[a];
        r /= g->size[a];
    }
    return 0;
}

int tr_grid_rank_of(const tr_grid *g, const int coord[TR_AXIS_COUNT]) {
    int r = 0;
    for (int a = TR_AXIS_COUNT - 1; a >= 0; a--) r = r * g->size[a] + coord[a];
    return r;
}

void tr_grid_group(const tr_grid *g, tr_axis axis, int *ranks) {
    int c[TR_AXIS_COUNT];
    memcpy(c, g->coord, sizeof c);
    for (int i = 0; i < g->size[axis]; i++) {
        c[axis] = i;
        ranks[i] = tr_grid_rank_of(g, c);
    }
}

void tr_grid_group_dp_cp(const tr_grid *g, int *ranks) {
    int c[TR_AXIS_COUNT], n = 0;
    memcpy(c, g->coord, sizeof c);
    for (int dp = 0; dp < g->size[TR_AXIS_DP]; dp++)
        for (int cp = 0; cp < g->size[TR_AXIS_CP]; cp++) {
            c[TR_AXIS_DP] = dp;
            c[TR_AXIS_CP] = cp;
            ranks[n++] = tr_grid_rank_of(g, c); /* cp varies fastest: ascending global ranks */
        }
}

static coll_comm *make(const tr_grid *g, dev_device *d, const int *ranks, int n, const char *name, char *err,
                       size_t errlen) {
    return coll_comm_create(d, ranks, n, g->rank, name, err, errlen);
}

int tr_groups_create(tr_groups *gr, const tr_grid *g, dev_device *d, char *err, size_t errlen) {
    memset(gr, 0, sizeof *gr);
    int *ranks = malloc((size_t)g->world * sizeof *ranks);
    if (!ranks) return tr_errf(err, errlen, "out of host memory");
    static const char *const names[TR_AXIS_COUNT] = {"tp", "cp", "dp", "pp"};
    coll_comm **slots[TR_AXIS_COUNT] = {&gr->tp, &gr->cp, &gr->dp, &gr->pp};
    int rc = 0;
    for (int a = 0; a < TR_AXIS_COUNT && !rc; a++) {
        tr_grid_group(g, (tr_axis)a, ranks);
        *slots[a] = make(g, d, ranks, g->size[a], names[a], err, errlen);
        if (!*slots[a]) rc = -1;
    }
    if (!rc) {
        tr_grid_group_dp_cp(g, ranks);
        gr->dp_cp = make(g, d, ranks, g->size[TR_AXIS_DP] * g->size[TR_AXIS_CP], "dp_cp", err, errlen);
        if (!gr->dp_cp) rc = -1;
    }
    if (!rc) {
        for (int i = 0; i < g->world; i++) ranks[i] = i;
        gr->world = make(g, d, ranks, g->world, "world", err, errlen);
        if (!gr->world) rc = -1;
    }
    free(ranks);
    if (rc) tr_groups_destroy(gr);
    return rc;
}

void tr_groups_destroy(tr_groups *gr) {
    coll_comm *all[] = {gr->tp, gr->cp, gr->dp, gr->pp, gr->dp_cp, gr->world};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) coll_comm_destroy(all[i]);
    memset(gr, 0, sizeof *gr);
}
