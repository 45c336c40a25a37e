/* RMSNorm and LayerNorm, forward and backward, for the twin.
 *
 * Row statistics are computed in double (two passes for LayerNorm: mean, then the centred sum of
 * squares, which avoids cancellation) and stored as fp32 mean/rstd. The forward output uses the
 * double statistics; the backward recomputes xhat from the stored fp32 ones, exactly as the
 * GPU kernels will have to. */
#include <math.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

/* The scale applied to channel c: weight, or 1 + weight with --apply-layernorm-1p. */
static double gamma_of(const kern_norm_desc *nd, tr_buf weight, size_t c) {
    const double w = ld(weight, c);
    return nd->zero_centered_gamma ? 1.0 + w : w;
}

/* Both directions' arguments (forward: out, mean, rstd written; backward: dinp, dweight, dbias). */
typedef struct norm_args {
    kern_norm_desc nd; /* copied: the caller's descriptor may be gone when the body runs */
    tr_buf out, inp, weight, bias, dinp, dweight, dbias, dout; /* [N, C] or [C] */
    float *mean_out, *rstd_out;                                /* [N] the forward writes */
    const float *mean, *rstd;                                  /* [N] the backward reads */
    int N, C;
} norm_args;

static void norm_forward_body(void *args) {
    const norm_args *a = args;
    const kern_norm_desc *nd = &a->nd;
    const tr_buf out = a->out, inp = a->inp, weight = a->weight, bias = a->bias;
    float *mean = a->mean_out, *rstd = a->rstd_out;
    const int N = a->N, C = a->C;
    const bool layer = nd->kind == KERN_NORM_LAYER;

    const size_t Cz = (size_t)C;
    double *x = kern_scratch(Cz, sizeof *x, "norm row"); /* [C] */
    for (int n = 0; n < N; n++) {
        const size_t row = (size_t)n * Cz;
        ld_row_d(x, inp, row, Cz);
        double mu = 0.0;
        if (layer) {
            for (size_t c = 0; c < Cz; c++) mu += x[c];
            mu /= (double)C;
        }
        double ss = 0.0;
        for (size_t c = 0; c < Cz; c++) ss += (x[c] - mu) * (x[c] - mu);
        const double r = 1.0 / sqrt(ss / (double)C + (double)nd->eps);
        if (layer) mean[n] = (float)mu;
        else if (mean) mean[n] = 0.0f;
        rstd[n] = (float)r;
        for (size_t c = 0; c < Cz; c++) {
            double y = (x[c] - mu) * r * gamma_of(nd, weight, c);
            if (bias.p) y += ld(bias, c);
            st_d(out, row + c, y);
        }
    }
    free(x);
}

void kern_norm_forward(dev_stream *s, const kern_norm_desc *nd, tr_buf out, float *mean, float *rstd, tr_buf inp,
                       tr_buf weight, tr_buf bias, int N, int C) {
    kern_cost(s, TWIN_K_NORM_FWD, 6.0 * N * (double)C, 2.0 * N * C * tr_dtype_size(inp.dt), TR_F32);
    kern_norm_forward_check(s, nd, out, mean, rstd, inp, weight, bias, N, C);
    kern_access(s, "kernel norm_forward",
                (const twin_access[]){{out.p, kern_bytes(out, (size_t)N * (size_t)C), true},
                                      {mean, (size_t)N * sizeof(float), true},
                                      {rstd, (size_t)N * sizeof(float), true},
                                      {inp.p, kern_bytes(inp, (size_t)N * (size_t)C), false},
                                      {weight.p, kern_bytes(weight, (size_t)C), false},
                                      {bias.p, kern_bytes(bias, (size_t)C), false}},
                6);
    if (kern_shape_only(s)) return;
    norm_args a = {.nd = *nd,
                   .out = out,
                   .inp = inp,
                   .weight = weight,
                   .bias = bias,
                   .mean_out = mean,
                   .rstd_out = rstd,
                   .N = N,
                   .C = C};
    kern_submit(s, norm_forward_body, &a, sizeof a);
}

static void norm_backward_body(void *args) {
    const norm_args *a = args;
    const kern_norm_desc *nd = &a->nd;
    const tr_buf dinp = a->dinp, dweight = a->dweight, dbias = a->dbias, dout = a->dout, inp = a->inp,
                 weight = a->weight;
    const float *mean = a->mean, *rstd = a->rstd;
    const int N = a->N, C = a->C;
    const bool layer = nd->kind == KERN_NORM_LAYER;

    const size_t Cz = (size_t)C;
    double *xhat = kern_scratch(Cz, sizeof *xhat, "norm xhat");    /* [C] */
    double *g = kern_scratch(Cz, sizeof *g, "norm dout row");      /* [C] */
    double *dw = kern_scratch(Cz, sizeof *dw, "norm dweight sum"); /* [C] */
    double *db = kern_scratch(Cz, sizeof *db, "norm dbias sum");   /* [C] */
    double *gam = kern_scratch(Cz, sizeof *gam, "norm gamma");     /* [C] */
    for (size_t c = 0; c < Cz; c++) {
        dw[c] = 0.0;
        db[c] = 0.0;
        gam[c] = gamma_of(nd, weight, c);
    }
    for (int n = 0; n < N; n++) {
        const size_t row = (size_t)n * Cz;
        const double mu = layer ? (double)mean[n] : 0.0, r = rstd[n];
        ld_row_d(xhat, inp, row, Cz);
        ld_row_d(g, dout, row, Cz);
        /* dxhat = dout * gamma; the input gradient needs its row mean and its mean against xhat. */
        double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
        for (size_t c = 0; c < Cz; c++) {
            xhat[c] = (xhat[c] - mu) * r;
            const double dxhat = g[c] * gam[c];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * xhat[c];
            dw[c] += g[c] * xhat[c]; /* d(1 + w)/dw = 1: same gradient with zero-centred gamma */
            db[c] += g[c];
        }
        const double mean_dxhat = layer ? sum_dxhat / (double)C : 0.0;
        const double mean_dxhat_xhat = sum_dxhat_xhat / (double)C;
        for (size_t c = 0; c < Cz; c++) {
            const double dx = r * (g[c] * gam[c] - mean_dxhat - xhat[c] * mean_dxhat_xhat);
            st_d(dinp, row + c, (double)ld(dinp, row + c) + dx);
        }
    }
    for (size_t c = 0; c < Cz; c++) {
        st_d(dweight, c, (double)ld(dweight, c) + dw[c]);
        if (dbias.p) st_d(dbias, c, (double)ld(dbias, c) + db[c]);
    }
    free(gam);
    free(db);
    free(dw);
    free(g);
    free(xhat);
}

void kern_norm_backward(dev_stream *s, const kern_norm_desc *nd, tr_buf dinp, tr_buf dweight, tr_buf dbias, tr_buf dout,
                        tr_buf inp, tr_buf weight, const float *mean, const float *rstd, int N, int C) {
    kern_cost(s, TWIN_K_NORM_BWD, 12.0 * N * (double)C, 4.0 * N * C * tr_dtype_size(inp.dt), TR_F32);
    kern_norm_backward_check(s, nd, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    kern_access(s, "kernel norm_backward",
                (const twin_access[]){{dinp.p, kern_bytes(dinp, (size_t)N * (size_t)C), true},
                                      {dweight.p, kern_bytes(dweight, (size_t)C), true},
                                      {dbias.p, kern_bytes(dbias, (size_t)C), true},
                                      {dout.p, kern_bytes(dout, (size_t)N * (size_t)C), false},
                                      {inp.p, kern_bytes(inp, (size_t)N * (size_t)C), false},
                                      {weight.p, kern_bytes(weight, (size_t)C), false},
                                      {mean, (size_t)N * sizeof(float), false},
                                      {rstd, (size_t)N * sizeof(float), false}},
                8);
    if (kern_shape_only(s)) return;
    norm_args a = {.nd = *nd,
                   .dinp = dinp,
                   .dweight = dweight,
                   .dbias = dbias,
                   .dout = dout,
                   .inp = inp,
                   .weight = weight,
                   .mean = mean,
                   .rstd = rstd,
                   .N = N,
                   .C = C};
    kern_submit(s, norm_backward_body, &a, sizeof a);
}
