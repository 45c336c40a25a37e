#include "optim/lr_schedule.h"

#include <math.h>

#include "twinrun/err.h"

int tr_lr_schedule_init(tr_lr_schedule *lr, const tr_config *cfg, char *err, size_t errlen) {
    const int64_t gbs = cfg->global_batch_size;
    lr->max_lr = cfg->lr;
    lr->min_lr = cfg->min_lr;
    lr->init_lr = cfg->lr_warmup_init;
    lr->style = cfg->lr_decay_style;
    if (gbs <= 0) return tr_errf(err, errlen, "--global-batch-size must be positive");
    if (cfg->train_samples > 0) {
        /* sample-based run: Megatron reads only the *-samples flags */
        lr->decay_samples = cfg->lr_decay_samples > 0 ? cfg->lr_decay_samples : cfg->train_samples;
        lr->warmup_samples = cfg->lr_warmup_samples;
    } else {
        int64_t decay_iters = cfg->lr_decay_iters > 0 ? cfg->lr_decay_iters : cfg->train_iters;
        lr->decay_samples = decay_iters * gbs;
        lr->warmup_samples = cfg->lr_warmup_iters * gbs;
    }
    if (cfg->lr_warmup_fraction >= 0)
        lr->warmup_samples = (int64_t)(cfg->lr_warmup_fraction * (double)lr->decay_samples);
    if (lr->decay_samples <= 0)
        return tr_errf(err, errlen, "lr decay span is zero: set --train-iters/--train-samples or --lr-decay-*");
    if (lr->warmup_samples >= lr->decay_samples && lr->style != TR_LR_CONSTANT)
        return tr_errf(err, errlen,
                       "lr warmup (%lld samples) must be shorter than the decay (%lld samples); "
                       "lower --lr-warmup-* or raise --lr-decay-*",
                       (long long)lr->warmup_samples, (long long)lr->decay_samples);
    if (lr->min_lr > lr->max_lr) return tr_errf(err, errlen, "--min-lr %g exceeds --lr %g", lr->min_lr, lr->max_lr);
    return 0;
}

bool tr_lr_schedule_decoupled(tr_lr_schedule *dec, const tr_lr_schedule *main, const tr_config *cfg) {
    if (cfg->decoupled_lr < 0) return false;
    *dec = *main;
    dec->max_lr = cfg->decoupled_lr;
    if (cfg->decoupled_min_lr >= 0) dec->min_lr = cfg->decoupled_min_lr;
    return true;
}

double tr_lr_at(const tr_lr_schedule *lr, int64_t n) {
    if (lr->warmup_samples > 0 && n <= lr->warmup_samples)
        return lr->init_lr + (lr->max_lr - lr->init_lr) * (double)n / (double)lr->warmup_samples;
    if (lr->style == TR_LR_CONSTANT) return lr->max_lr;
    if (n > lr->decay_samples) return lr->min_lr;
    if (lr->style == TR_LR_INVERSE_SQRT) {
        double w = (double)(lr->warmup_samples > 1 ? lr->warmup_samples : 1);
        double s = (double)(n > 1 ? n : 1);
        double v = lr->max_lr * sqrt(w) / sqrt(s);
        return v > lr->min_lr ? v : lr->min_lr;
    }
    double ratio = (double)(n - lr->warmup_samples) / (double)(lr->decay_samples - lr->warmup_samples);
    double coeff = lr->style == TR_LR_LINEAR ? 1.0 - ratio : 0.5 * (cos(M_PI * ratio) + 1.0);
    return lr->min_lr + coeff * (lr->max_lr - lr->min_lr);
}
