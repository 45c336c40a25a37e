/* The kernel tests' fixtures (fixture_kern.h): the shared device, splitmix64 inputs, device buffers
 * of fp32 or bf16 from host arrays and back, relative-L2 comparisons and the finite-difference check. */
#include "common/fixture_kern.h"

dev_device *kt_dev;
dev_stream *kt_s;

int kt_setup(void **state) {
    (void)state;
    char err[256] = "";
    kt_dev = dev_open(0, 0, err, sizeof err);
    if (!kt_dev) {
        fprintf(stderr, "dev_open failed: %s\n", err);
        return -1;
    }
    kt_s = dev_stream_default(kt_dev);
    return 0;
}

int kt_teardown(void **state) {
    (void)state;
    if (kt_dev) {
        assert_int_equal(dev_mem_used(kt_dev), 0); /* every test frees what it allocates */
        dev_close(kt_dev);
    }
    kt_dev = NULL;
    kt_s = NULL;
    return 0;
}

kt_rng kt_rng_make(uint64_t seed) {
    kt_rng r = {seed};
    return r;
}

uint64_t kt_next(kt_rng *r) {
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double kt_uniform(kt_rng *r) { return (double)(kt_next(r) >> 11) * 0x1.0p-53; }

float kt_sym(kt_rng *r, float scale) { return (float)((2.0 * kt_uniform(r) - 1.0) * scale); }

void kt_fill(kt_rng *r, float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = kt_sym(r, scale);
}

int kt_below(kt_rng *r, int n) { return (int)(kt_uniform(r) * (double)n); }

float *kt_host(size_t n) {
    float *p = calloc(n ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

double *kt_host_d(size_t n) {
    double *p = calloc(n ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

void *kt_alloc(size_t bytes) {
    void *p = dev_alloc(kt_dev, bytes ? bytes : 1, "kernel test");
    assert_non_null(p);
    return p;
}

void kt_free(void *p) { dev_free(kt_dev, p); }

void kt_write(tr_buf b, const float *host, size_t n) {
    if (b.dt == TR_F32) {
        dev_copy_h2d(kt_s, b.p, host, n * sizeof(float));
        dev_stream_sync(kt_s);
        return;
    }
    assert_int_equal(b.dt, TR_BF16);
    uint16_t *tmp = calloc(n ? n : 1, sizeof *tmp);
    assert_non_null(tmp);
    for (size_t i = 0; i < n; i++) tmp[i] = tr_f32_to_bf16(host[i]);
    dev_copy_h2d(kt_s, b.p, tmp, n * sizeof *tmp);
    dev_stream_sync(kt_s);
    free(tmp);
}

tr_buf kt_upload(const float *host, size_t n, tr_dtype dt) {
    tr_buf b = tr_buf_make(kt_alloc(n * tr_dtype_size(dt)), dt);
    kt_write(b, host, n);
    return b;
}

void kt_download(float *host, tr_buf b, size_t n) {
    if (b.dt == TR_F32) {
        dev_copy_d2h(kt_s, host, b.p, n * sizeof(float));
        dev_stream_sync(kt_s);
        return;
    }
    assert_int_equal(b.dt, TR_BF16);
    uint16_t *tmp = calloc(n ? n : 1, sizeof *tmp);
    assert_non_null(tmp);
    dev_copy_d2h(kt_s, tmp, b.p, n * sizeof *tmp);
    dev_stream_sync(kt_s);
    for (size_t i = 0; i < n; i++) host[i] = tr_bf16_to_f32(tmp[i]);
    free(tmp);
}

float *kt_upload_f32(const float *host, size_t n) { return kt_upload(host, n, TR_F32).p; }

void kt_download_f32(float *host, const float *dev, size_t n) { kt_download(host, tr_buf_f32((float *)dev), n); }

int32_t *kt_upload_i32(const int32_t *host, size_t n) {
    int32_t *d = kt_alloc(n * sizeof *d);
    dev_copy_h2d(kt_s, d, host, n * sizeof *d);
    dev_stream_sync(kt_s);
    return d;
}

double kt_rel_l2(const float *got, const double *want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - want[i];
        num += d * d;
        den += want[i] * want[i];
    }
    if (den == 0.0) return sqrt(num);
    return sqrt(num / den);
}

double kt_rel_l2_ff(const float *got, const float *want, size_t n) {
    double *w = kt_host_d(n);
    for (size_t i = 0; i < n; i++) w[i] = want[i];
    const double r = kt_rel_l2(got, w, n);
    free(w);
    return r;
}

void kt_expect_close(const char *what, double rel, double tol) {
    printf("  %-46s rel L2 %.3e (bound %.0e)\n", what, rel, tol);
    if (!(rel <= tol)) fail_msg("%s: relative L2 error %.3e exceeds %.0e", what, rel, tol);
}

double kt_fwd_tol(void) {
    dev_info info;
    dev_get_info(kt_dev, &info);
    return strcmp(info.backend, "twin") == 0 ? 1e-6 : 1e-5;
}

bool kt_backend_is_twin(void) {
    dev_info info;
    dev_get_info(kt_dev, &info);
    return strcmp(info.backend, "twin") == 0;
}

double kt_dot(const float *a, const float *w, size_t n) {
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) acc += (double)a[i] * (double)w[i];
    return acc;
}

void kt_fd_check(const char *what, float *x, size_t n, const float *analytic, kt_loss_fn loss, void *ctx, double h,
                 size_t max_samples, double tol, kt_rng *r) {
    const size_t count = n < max_samples ? n : max_samples;
    float *ana = kt_host(count);
    double *num = kt_host_d(count);
    for (size_t j = 0; j < count; j++) {
        const size_t i = count == n ? j : (size_t)kt_below(r, (int)n);
        const float x0 = x[i];
        const float xp = (float)((double)x0 + h), xm = (float)((double)x0 - h);
        x[i] = xp;
        const double lp = loss(ctx);
        x[i] = xm;
        const double lm = loss(ctx);
        x[i] = x0;
        num[j] = (lp - lm) / ((double)xp - (double)xm);
        ana[j] = analytic[i];
    }
    char label[256];
    snprintf(label, sizeof label, "fd %s (%zu of %zu)", what, count, n);
    kt_expect_close(label, kt_rel_l2(ana, num, count), tol);
    free(num);
    free(ana);
}
