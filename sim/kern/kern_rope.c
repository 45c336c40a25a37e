/* Rotary position embedding (rotate-half convention), forward and backward, for the twin.
 *
 * Angles follow Hugging Face's LlamaRotaryEmbedding, which builds cos/sin in fp32 even for a
 * float64 model: inv_freq_i is fp32, the angle is the fp32 product pos * inv_freq_i. cos and sin
 * of that fp32 angle are evaluated in double and rounded to fp32, which is as close to correctly
 * rounded as libm gets and does not depend on the platform's cosf/sinf. The rotation itself is
 * done in double and rounded once per element. */
#include <math.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

/* cs[half], sn[half] for one position. inv_freq [half] fp32. */
static void angles(float *cs, float *sn, const float *inv_freq, int half, int32_t pos) {
    for (int i = 0; i < half; i++) {
        const float a = (float)pos * inv_freq[i];
        cs[i] = (float)cos((double)a);
        sn[i] = (float)sin((double)a);
    }
}

/* Rotates every head of x by +angle (sign = 1) or -angle (sign = -1). */
static void rope_apply(const kern_rope_desc *rd, tr_buf x, const int32_t *positions, int B, int T, int H, int D,
                       double sign) {
    const int half = rd->rot_dim / 2;
    float *inv_freq = kern_scratch((size_t)half, sizeof *inv_freq, "rope inv_freq"); /* [half] */
    float *cs = kern_scratch((size_t)half, sizeof *cs, "rope cos");                  /* [half] */
    float *sn = kern_scratch((size_t)half, sizeof *sn, "rope sin");                  /* [half] */
    for (int i = 0; i < half; i++) {
        /* theta^(-2i/rot_dim), the exponent exact in fp32 as in HF, the power rounded once. */
        const float e = (float)(2 * i) / (float)rd->rot_dim;
        inv_freq[i] = (float)(1.0 / pow((double)rd->theta, (double)e));
    }
    for (int bt = 0; bt < B * T; bt++) {
        const int32_t pos = positions ? positions[bt] : (int32_t)(bt % T);
        angles(cs, sn, inv_freq, half, pos);
        for (int h = 0; h < H; h++) {
            const size_t base = ((size_t)bt * (size_t)H + (size_t)h) * (size_t)D;
            for (int i = 0; i < half; i++) {
                const size_t i1 = base + (size_t)i, i2 = i1 + (size_t)half;
                const double x1 = ld(x, i1), x2 = ld(x, i2), c = cs[i], sg = sign * (double)sn[i];
                st_d(x, i1, x1 * c - x2 * sg);
                st_d(x, i2, x2 * c + x1 * sg);
            }
        }
    }
    free(sn);
    free(cs);
    free(inv_freq);
}

typedef struct rope_args {
    kern_rope_desc rd;        /* copied: the caller's descriptor may be gone when the body runs */
    tr_buf x;                 /* [B, T, H, D] */
    const int32_t *positions; /* [B*T] device, or NULL for bt % T */
    int B, T, H, D;
    double sign;
} rope_args;

static void rope_body(void *args) {
    const rope_args *a = args;
    rope_apply(&a->rd, a->x, a->positions, a->B, a->T, a->H, a->D, a->sign);
}

void kern_rope_forward(dev_stream *s, const kern_rope_desc *rd, tr_buf x, const int32_t *positions, int B, int T, int H,
                       int D) {
    kern_cost(s, TWIN_K_ROPE_FWD, 6.0 * B * T * H * (double)rd->rot_dim, 2.0 * B * T * H * D * tr_dtype_size(x.dt),
              TR_F32);
    kern_rope_forward_check(s, rd, x, positions, B, T, H, D);
    kern_access(s, "kernel rope_forward",
                (const twin_access[]){{x.p, kern_bytes(x, (size_t)B * (size_t)T * (size_t)H * (size_t)D), true},
                                      {positions, (size_t)B * (size_t)T * sizeof(int32_t), false}},
                2);
    if (kern_shape_only(s)) return;
    rope_args a = {*rd, x, positions, B, T, H, D, 1.0};
    kern_submit(s, rope_body, &a, sizeof a);
}

void kern_rope_backward(dev_stream *s, const kern_rope_desc *rd, tr_buf dx, const int32_t *positions, int B, int T,
                        int H, int D) {
    kern_cost(s, TWIN_K_ROPE_BWD, 6.0 * B * T * H * (double)rd->rot_dim, 2.0 * B * T * H * D * tr_dtype_size(dx.dt),
              TR_F32);
    kern_rope_backward_check(s, rd, dx, positions, B, T, H, D);
    kern_access(s, "kernel rope_backward",
                (const twin_access[]){{dx.p, kern_bytes(dx, (size_t)B * (size_t)T * (size_t)H * (size_t)D), true},
                                      {positions, (size_t)B * (size_t)T * sizeof(int32_t), false}},
                2);
    if (kern_shape_only(s)) return;
    rope_args a = {*rd, dx, positions, B, T, H, D, -1.0};
    kern_submit(s, rope_body, &a, sizeof a);
}
