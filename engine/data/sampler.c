/* Megatron's pretraining sampler (see sampler.h). */
#include "data/sampler.h"

#include "twinrun/err.h"

int tr_sampler_init(tr_sampler *s, int64_t total, int64_t consumed, int mbs, int dp_rank, int dp_size, char *err,
                    size_t errlen) {
    if (mbs < 1) return tr_errf(err, errlen, "--micro-batch-size %d: must be at least 1", mbs);
    if (dp_size < 1 || dp_rank < 0 || dp_rank >= dp_size)
        return tr_errf(err, errlen, "data-parallel rank %d of %d is not valid", dp_rank, dp_size);
    if (consumed < 0 || consumed > total)
        return tr_errf(err, errlen, "consumed samples %lld is outside the dataset's %lld samples", (long long)consumed,
                       (long long)total);
    s->total = total;
    s->consumed = consumed;
    s->mbs = mbs;
    s->dp_rank = dp_rank;
    s->dp_size = dp_size;
    return 0;
}

int tr_sampler_next(tr_sampler *s, int64_t *idx, char *err, size_t errlen) {
    int64_t chunk = (int64_t)s->mbs * s->dp_size;
    if (s->consumed + chunk > s->total)
        return tr_errf(err, errlen,
                       "data exhausted: %lld of %lld samples consumed and a micro-batch needs %lld more across "
                       "data-parallel ranks (raise --train-samples/--train-iters or --eval-iters so the dataset is "
                       "built larger)",
                       (long long)s->consumed, (long long)s->total, (long long)chunk);
    for (int b = 0; b < s->mbs; b++) idx[b] = s->consumed + (int64_t)s->dp_rank * s->mbs + b;
    s->consumed += chunk;
    return 0;
}
