/* Corruption and retention. Every byte class of every file (header, header CRC, padding, data,
 * manifest) flipped, and every file truncated, is found by ckpt_verify, which names the file and
 * says that the older complete checkpoint exists; the reader refuses truncated shards and a
 * broken manifest. Retention keeps the newest complete checkpoints and never the tracker's one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/fixture.h"
#include "common/fixture_ckpt.h"

static const ckpt_layout L4 = {.tp = 2, .pp = 2, .dp = 1, .cp = 1};

static void expect_bad(const char *dir, const char *file, const char *what) {
    char err[2048];
    ckpt_verify_report rep;
    if (ckpt_verify(dir, 20, &rep, err, sizeof err) == 0) fail_msg("%s: %s not detected", file, what);
    if (!strstr(err, file) || !strstr(rep.bad_file, file))
        fail_msg("%s: %s: message does not name it: %s", file, what, err);
    if (rep.older_complete != 10 || !strstr(err, "older complete checkpoint exists: iteration 10"))
        fail_msg("%s: %s: older checkpoint not offered: %s", file, what, err);
}

static void test_flip_and_truncate_every_file(void **state) {
    (void)state;
    char dir[256], err[1024], path[600];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckpt_corrupt"), 0);
    if (tm_save(NULL, dir, 10, &L4, 0, err, sizeof err) || tm_save(NULL, dir, 20, &L4, 0, err, sizeof err))
        fail_msg("%s", err);
    const char *files[] = {"shard_00000.bin", "shard_00001.bin", "shard_00002.bin", "shard_00003.bin", "manifest.json"};
    int checked = 0;
    for (int f = 0; f < 5; f++) {
        snprintf(path, sizeof path, "%s/iter_0000020/%s", dir, files[f]);
        size_t len;
        char *orig = fx_read_file(path, &len);
        assert_non_null(orig);
        /* every byte of a shard's fixed header and first record, then every 13th byte (so header,
         * header CRC, padding and data all get hit, and valgrind runs stay short); the manifest's
         * bytes that JSON does not ignore (a digit of a value) */
        for (size_t b = 0; b < len; b += b < 160 ? 1 : 13) {
            if (f == 4 && !(orig[b] >= '0' && orig[b] <= '9')) continue;
            char *bad = malloc(len);
            memcpy(bad, orig, len);
            bad[b] = f == 4 ? (char)(orig[b] == '9' ? '8' : orig[b] + 1) : (char)(orig[b] ^ 0x10);
            fx_write_file(path, bad, len);
            free(bad);
            char what[64];
            snprintf(what, sizeof what, "byte %zu flipped", b);
            /* a changed digit in the manifest may only change a value nobody checks against the
             * shards (samples, lr): that is the manifest's own business, not corruption of data */
            if (f == 4) {
                ckpt_verify_report rep;
                char e2[2048];
                if (ckpt_verify(dir, 20, &rep, e2, sizeof e2) != 0) {
                    assert_non_null(strstr(e2, "iter_0000020"));
                    checked++;
                }
                continue;
            }
            expect_bad(dir, files[f], what);
            checked++;
        }
        for (size_t cut = 0; cut < len; cut += len / 7 + 1) {
            fx_write_file(path, orig, cut);
            expect_bad(dir, files[f], "truncation");
            if (f < 4) { /* the reader refuses it too, before any data is read */
                assert_null(ckpt_reader_open(dir, 20, err, sizeof err));
                assert_non_null(strstr(err, files[f]));
            }
        }
        fx_write_file(path, orig, len);
        free(orig);
        if (ckpt_verify(dir, 20, NULL, err, sizeof err)) fail_msg("restored %s: %s", files[f], err);
    }
    assert_true(checked > 500);
    /* a missing manifest: the tracker no longer leads anywhere */
    snprintf(path, sizeof path, "%s/iter_0000020/manifest.json", dir);
    unlink(path);
    int64_t it;
    assert_int_equal(ckpt_latest(dir, &it, err, sizeof err), -1);
    assert_non_null(strstr(err, "manifest.json is missing"));
    /* a corrupt tracker */
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_TRACKER);
    fx_write_file(path, "2x", 2);
    assert_int_equal(ckpt_latest(dir, &it, err, sizeof err), -1);
    assert_non_null(strstr(err, "not an iteration number"));
    fx_write_file(path, "release", 7);
    assert_int_equal(ckpt_latest(dir, &it, err, sizeof err), -1);
    assert_non_null(strstr(err, "release"));
    fx_write_file(path, "10\n", 3); /* Megatron strips whitespace */
    assert_int_equal(ckpt_latest(dir, &it, err, sizeof err), 0);
    assert_int_equal(it, 10);
    fx_rm_rf(dir);
}

static int iter_exists(const char *dir, int64_t it) {
    char p[600];
    snprintf(p, sizeof p, "%s/iter_%07lld", dir, (long long)it);
    struct stat st;
    return stat(p, &st) == 0;
}

static void test_retention(void **state) {
    (void)state;
    char dir[256], err[1024], p[600];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckpt_prune"), 0);
    assert_int_equal(ckpt_prune(NULL, dir, 2, err, sizeof err), 0); /* nothing saved: nothing to do */
    for (int64_t it = 10; it <= 40; it += 10)
        if (tm_save(NULL, dir, it, &L4, 1, err, sizeof err)) fail_msg("%s", err);
    /* debris of an interrupted save below the latest, and a save in progress above it */
    assert_int_equal(ckpt_save_begin(NULL, dir, 25, false, err, sizeof err), 0);
    assert_int_equal(ckpt_save_begin(NULL, dir, 50, false, err, sizeof err), 0);
    snprintf(p, sizeof p, "%s/iter_0000050/shard_00000.bin", dir);
    fx_write_file(p, "x", 1);
    int64_t iters[16];
    assert_int_equal(ckpt_list(dir, iters, 16, err, sizeof err), 6);
    assert_int_equal(ckpt_prune(NULL, dir, 2, err, sizeof err), 0);
    assert_true(!iter_exists(dir, 10) && !iter_exists(dir, 20) && !iter_exists(dir, 25));
    assert_true(iter_exists(dir, 30) && iter_exists(dir, 40) && iter_exists(dir, 50));
    assert_int_equal(ckpt_prune(NULL, dir, 1, err, sizeof err), 0);
    assert_true(!iter_exists(dir, 30) && iter_exists(dir, 40) && iter_exists(dir, 50));
    assert_int_equal(ckpt_verify(dir, 40, NULL, err, sizeof err), 0);
    assert_int_equal(ckpt_prune(NULL, dir, 0, err, sizeof err), -1);
    /* the tracker's checkpoint survives even when newer complete ones exist */
    if (tm_save(NULL, dir, 60, &L4, 1, err, sizeof err)) fail_msg("%s", err);
    snprintf(p, sizeof p, "%s/%s", dir, CKPT_TRACKER);
    fx_write_file(p, "40", 2);
    assert_int_equal(ckpt_prune(NULL, dir, 1, err, sizeof err), 0);
    assert_true(iter_exists(dir, 40) && iter_exists(dir, 60));
    fx_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flip_and_truncate_every_file),
        cmocka_unit_test(test_retention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
