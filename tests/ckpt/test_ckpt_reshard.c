/* Reassembly: a checkpoint saved by one layout is read by another. Saved with (tp, pp, dp) =
 * (2, 2, 1) and (2, 1, 2) with the distributed optimizer; read as (1, 1, 1) (whole tensors) and as
 * (4, 1, 1) (row and column slices, flat ranges of slices); every element must be exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/fixture.h"
#include "common/fixture_ckpt.h"

static void read_as(const char *dir, int64_t iter, int tp, int dp) {
    char err[1024];
    ckpt_reader *rd = ckpt_reader_open(dir, iter, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    const int64_t s86[2] = {8, 6}, s68[2] = {6, 8};
    int rows = 8 / tp;
    for (int l = 0; l < TM_LAYERS; l++) {
        char col[64], row[64], opt[64];
        snprintf(col, sizeof col, "layers.%d.col", l), snprintf(row, sizeof row, "layers.%d.row", l);
        snprintf(opt, sizeof opt, "optim.exp_avg/layers.%d.row", l);
        for (int t = 0; t < tp; t++) {
            ckpt_place rp = ckpt_place_slice(0, rows * t, rows), cp = ckpt_place_slice(1, rows * t, rows);
            if (tm_check_region(rd, col, CKPT_F32, s86, 2, rp, iter, err, sizeof err) ||
                tm_check_region(rd, row, CKPT_F32, s68, 2, cp, iter, err, sizeof err))
                fail_msg("tp%d rank %d: %s", tp, t, err);
            for (int d = 0; d < dp; d++) { /* the new layout's distributed-optimizer ranges */
                ckpt_place fp = cp;
                int64_t sub = 6 * rows, chunk = sub / dp;
                fp.off = chunk * d, fp.n = d == dp - 1 ? sub - fp.off : chunk;
                if (tm_check_region(rd, opt, CKPT_F32, s68, 2, fp, iter, err, sizeof err))
                    fail_msg("tp%d dp%d rank (%d,%d): %s", tp, dp, t, d, err);
            }
        }
        /* flat ranges of whole tensors, crossing every saved piece's boundary */
        for (int64_t off = 0; off < 48; off += 7)
            if (tm_check_region(rd, opt, CKPT_F32, s68, 2, ckpt_place_flat(off, 48 - off > 11 ? 11 : 48 - off), iter,
                                err, sizeof err))
                fail_msg("flat %lld: %s", (long long)off, err);
    }
    ckpt_dtype dt;
    int nd;
    int64_t shape[CKPT_MAX_DIMS];
    assert_int_equal(ckpt_reader_tensor(rd, "layers.1.row", &dt, &nd, shape), 0);
    assert_true(dt == CKPT_F32 && nd == 2 && shape[0] == 6 && shape[1] == 8);
    assert_int_equal(ckpt_reader_tensor(rd, "nope", &dt, &nd, shape), -1);
    /* what does not exist is said so */
    float x[8];
    assert_int_equal(ckpt_read(rd, "nope", CKPT_F32, ckpt_place_full(), x, err, sizeof err), -1);
    assert_non_null(strstr(err, "no shard holds tensor 'nope'"));
    assert_int_equal(ckpt_read(rd, "norm", CKPT_F32, ckpt_place_full(), x, err, sizeof err), -1);
    assert_non_null(strstr(err, "stored as BF16"));
    assert_int_equal(ckpt_read(rd, "layers.0.col", CKPT_F32, ckpt_place_slice(0, 6, 4), x, err, sizeof err), -1);
    assert_non_null(strstr(err, "outside axis 0"));
    ckpt_reader_close(rd);
}

static void save_and_read(const ckpt_layout *L, const char *tag) {
    char dir[256], err[1024];
    char name[128];
    snprintf(name, sizeof name, "ckpt_reshard_%s", tag);
    assert_int_equal(fx_tmppath(dir, sizeof dir, name), 0);
    if (tm_save(NULL, dir, 7, L, 0, err, sizeof err)) fail_msg("%s", err);
    if (ckpt_verify(dir, 7, NULL, err, sizeof err)) fail_msg("%s", err);
    read_as(dir, 7, 1, 1);
    read_as(dir, 7, 4, 1);
    read_as(dir, 7, 2, 2);
    read_as(dir, 7, 1, 3);
    fx_rm_rf(dir);
}

static void test_from_tp2_pp2(void **state) {
    (void)state;
    ckpt_layout L = {.tp = 2, .pp = 2, .dp = 1, .cp = 1};
    save_and_read(&L, "tp2pp2");
}

static void test_from_tp2_dp2_distopt(void **state) {
    (void)state;
    ckpt_layout L = {.tp = 2, .pp = 1, .dp = 2, .cp = 1, .dist_opt = true};
    save_and_read(&L, "tp2dp2");
}

static void test_from_tp4_pp2_dp2_cp2(void **state) {
    (void)state;
    ckpt_layout L = {.tp = 4, .pp = 2, .dp = 2, .cp = 2, .dist_opt = true};
    save_and_read(&L, "big");
}

/* The run arithmetic itself: every placement's runs cover exactly its elements, in order. */
static void test_runs_cover_placements(void **state) {
    (void)state;
    const int64_t shape[3] = {3, 4, 5};
    char err[256];
    for (int axis = 0; axis < 3; axis++)
        for (int64_t start = 0; start < shape[axis]; start++)
            for (int64_t len = 0; start + len <= shape[axis]; len++) {
                int64_t sub = 60 / shape[axis] * len;
                for (int64_t off = 0; off <= sub; off += 3) {
                    ckpt_place p = {axis, start, len, off, -1};
                    assert_int_equal(ckpt_place_resolve(&p, shape, 3, "t", err, sizeof err), 0);
                    ckpt_runs it;
                    ckpt_runs_init(&it, &p, shape, 3);
                    uint64_t g, local, n, next_local = 0, last_g = 0;
                    for (uint64_t k = 0; ckpt_runs_get(&it, k, &g, &local, &n); k++) {
                        assert_int_equal(local, next_local);
                        for (uint64_t e = 0; e < n; e++) {
                            /* independently: element j of the slice, as (outer, axis, inner) indices */
                            uint64_t j = (uint64_t)p.off + local + e, mid = (uint64_t)shape[axis];
                            uint64_t inner = axis == 2 ? 1 : axis == 1 ? 5 : 20;
                            uint64_t o = j / ((uint64_t)len * inner), m = j / inner % (uint64_t)len, i = j % inner;
                            uint64_t want = o * mid * inner + ((uint64_t)start + m) * inner + i;
                            assert_int_equal(g + e, want);
                            assert_true(k == 0 && e == 0 ? 1 : g + e > last_g);
                            last_g = g + e;
                        }
                        next_local += n;
                    }
                    assert_int_equal(next_local, (uint64_t)p.n);
                }
            }
}

/* Pieces that overlap partly or contain one another (replicas, uneven splits) are read once each. */
static void test_overlapping_pieces(void **state) {
    (void)state;
    char dir[256], err[1024];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckpt_overlap"), 0);
    ckpt_layout one = {1, 1, 1, 1, false};
    ckpt_coords c0 = {0};
    const int64_t shape[2] = {6, 8};
    const ckpt_place places[4] = {ckpt_place_flat(0, 30), ckpt_place_flat(20, 28), ckpt_place_flat(5, 10),
                                  ckpt_place_slice(1, 2, 3)};
    ckpt_blob b[4];
    void *data[4];
    for (int i = 0; i < 4; i++) {
        memset(&b[i], 0, sizeof b[i]);
        b[i].name = "t", b[i].dtype = CKPT_F32, b[i].ndim = 2, b[i].shape[0] = 6, b[i].shape[1] = 8;
        b[i].place = places[i];
        assert_true(tm_fill("t", CKPT_F32, shape, 2, &b[i].place, 3, &data[i]) > 0);
        b[i].data = data[i];
    }
    assert_int_equal(ckpt_save_begin(NULL, dir, 3, false, err, sizeof err), 0);
    assert_int_equal(ckpt_shard_write(NULL, dir, 3, &one, &c0, b, 4, NULL, err, sizeof err), 0);
    ckpt_manifest m = tm_manifest(3, &one);
    if (ckpt_save_commit(NULL, dir, 3, &m, err, sizeof err)) fail_msg("%s", err);
    ckpt_reader *rd = ckpt_reader_open(dir, 3, err, sizeof err);
    assert_non_null(rd);
    assert_int_equal(tm_check_region(rd, "t", CKPT_F32, shape, 2, ckpt_place_full(), 3, err, sizeof err), 0);
    assert_int_equal(tm_check_region(rd, "t", CKPT_F32, shape, 2, ckpt_place_slice(1, 1, 6), 3, err, sizeof err), 0);
    ckpt_reader_close(rd);
    for (int i = 0; i < 4; i++) free(data[i]);
    fx_rm_rf(dir);
}

/* The reader maps a shard on its first piece, and reads it with pread when the file no longer has the
 * size the manifest gave at open: grown since, it still reads the right bytes (the pread path); cut
 * short since, the read fails with the tensor named (a mapping past the file's end faults: SIGBUS). */
static void test_shard_changed_after_open(void **state) {
    (void)state;
    char dir[256], shard[512], err[1024];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckpt_changed"), 0);
    ckpt_layout one = {1, 1, 1, 1, false};
    ckpt_coords c0 = {0};
    const int64_t shape[2] = {6, 8};
    ckpt_blob b;
    void *data = NULL;
    memset(&b, 0, sizeof b);
    b.name = "t", b.dtype = CKPT_F32, b.ndim = 2, b.shape[0] = 6, b.shape[1] = 8, b.place = ckpt_place_full();
    assert_true(tm_fill("t", CKPT_F32, shape, 2, &b.place, 3, &data) > 0);
    b.data = data;
    assert_int_equal(ckpt_save_begin(NULL, dir, 3, false, err, sizeof err), 0);
    assert_int_equal(ckpt_shard_write(NULL, dir, 3, &one, &c0, &b, 1, NULL, err, sizeof err), 0);
    ckpt_manifest m = tm_manifest(3, &one);
    if (ckpt_save_commit(NULL, dir, 3, &m, err, sizeof err)) fail_msg("%s", err);
    snprintf(shard, sizeof shard, "%s/iter_0000003/shard_00000.bin", dir);
    struct stat st;
    assert_int_equal(stat(shard, &st), 0);

    ckpt_reader *rd = ckpt_reader_open(dir, 3, err, sizeof err);
    assert_non_null(rd);
    FILE *f = fopen(shard, "ab"); /* grown after the open: read, not mapped */
    assert_non_null(f);
    assert_int_equal(fwrite("appended bytes!!", 1, 16, f), 16);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(tm_check_region(rd, "t", CKPT_F32, shape, 2, ckpt_place_full(), 3, err, sizeof err), 0);
    assert_int_equal(tm_check_region(rd, "t", CKPT_F32, shape, 2, ckpt_place_slice(1, 2, 5), 3, err, sizeof err), 0);
    ckpt_reader_close(rd);

    assert_int_equal(truncate(shard, st.st_size), 0); /* as written: opens again */
    rd = ckpt_reader_open(dir, 3, err, sizeof err);
    assert_non_null(rd);
    assert_int_equal(truncate(shard, 8), 0); /* cut short after the open */
    float x[48];
    assert_int_equal(ckpt_read(rd, "t", CKPT_F32, ckpt_place_full(), x, err, sizeof err), -1);
    assert_non_null(strstr(err, "read of tensor 't' failed"));
    ckpt_reader_close(rd);
    free(data);
    fx_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_cover_placements),    cmocka_unit_test(test_overlapping_pieces),
        cmocka_unit_test(test_shard_changed_after_open), cmocka_unit_test(test_from_tp2_pp2),
        cmocka_unit_test(test_from_tp2_dp2_distopt),     cmocka_unit_test(test_from_tp4_pp2_dp2_cp2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
