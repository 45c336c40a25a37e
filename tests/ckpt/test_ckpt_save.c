/* Checkpoint save and load: round trip of 4 shards and a manifest; a crash at every io step of a
 * save (with a power cut's losses) never leaves a partial checkpoint as the latest; ENOSPC at
 * every write fails cleanly with the bytes needed; a missing shard or a hole in a tensor is
 * refused at commit; an existing complete checkpoint is never overwritten. */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/fixture.h"
#include "common/fixture_ckpt.h"

static const ckpt_layout L4 = {.tp = 2, .pp = 1, .dp = 2, .cp = 1, .dist_opt = true};

static void check_all(const char *dir, int64_t iter, const ckpt_layout *L) {
    char err[1024];
    ckpt_reader *rd = ckpt_reader_open(dir, iter, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    int64_t s86[2] = {8, 6}, s68[2] = {6, 8}, s8[1] = {8}, s3[1] = {3};
    for (int l = 0; l < TM_LAYERS; l++) {
        char a[64], b[64], c[64];
        snprintf(a, sizeof a, "layers.%d.col", l), snprintf(b, sizeof b, "layers.%d.row", l);
        snprintf(c, sizeof c, "optim.exp_avg/layers.%d.row", l);
        if (tm_check_region(rd, a, CKPT_F32, s86, 2, ckpt_place_full(), iter, err, sizeof err) ||
            tm_check_region(rd, b, CKPT_F32, s68, 2, ckpt_place_full(), iter, err, sizeof err) ||
            tm_check_region(rd, c, CKPT_F32, s68, 2, ckpt_place_full(), iter, err, sizeof err))
            fail_msg("%s", err);
    }
    assert_int_equal(tm_check_region(rd, "norm", CKPT_BF16, s8, 1, ckpt_place_full(), iter, err, sizeof err), 0);
    assert_int_equal(tm_check_region(rd, "step", CKPT_I64, s8, 0, ckpt_place_full(), iter, err, sizeof err), 0);
    for (int r = 0; r < ckpt_layout_world(L); r++) {
        char n[64];
        snprintf(n, sizeof n, "rng/rank_%05d", r);
        assert_int_equal(tm_check_region(rd, n, CKPT_U64, s3, 1, ckpt_place_full(), iter, err, sizeof err), 0);
    }
    ckpt_reader_close(rd);
}

static void test_round_trip(void **state) {
    (void)state;
    char dir[256], err[1024];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckpt_rt"), 0);
    int64_t it = -1;
    assert_int_equal(ckpt_latest(dir, &it, err, sizeof err), 1); /* nothing saved yet */
    for (int gather = 0; gather < 2; gather++) {
        int64_t iter = 100 + gather;
        if (tm_save(NULL, dir, iter, &L4, gather, err, sizeof err)) fail_msg("%s", err);
        assert_int_equal(ckpt_latest(dir, &it, err, sizeof err), 0);
        assert_int_equal(it, iter);
        ckpt_manifest m, want = tm_manifest(iter, &L4);
        assert_int_equal(ckpt_manifest_load(dir, iter, &m, err, sizeof err), 0);
        assert_int_equal(m.n_files, 4);
        assert_int_equal(m.consumed_train_samples, want.consumed_train_samples);
        assert_int_equal(m.consumed_valid_samples, want.consumed_valid_samples);
        assert_memory_equal(&m.model, &want.model, sizeof m.model);
        assert_memory_equal(&m.sched, &want.sched, sizeof m.sched);
        assert_true(m.layout.tp == 2 && m.layout.dp == 2 && m.layout.pp == 1 && m.layout.cp == 1 && m.layout.dist_opt);
        assert_true(m.seed == want.seed && m.optimizer_step == iter && m.bf16);
        assert_string_equal(m.files[3].name, "shard_00003.bin");
        ckpt_manifest_free(&m);
        ckpt_verify_report rep;
        if (ckpt_verify(dir, iter, &rep, err, sizeof err)) fail_msg("%s", err);
        assert_int_equal(rep.n_files, 4);
        assert_int_equal(rep.n_tensors, 2 * 3 + 2 + 4);
        check_all(dir, iter, &L4);
    }
    /* the tracker is Megatron's: the bare number, no newline */
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_TRACKER);
    size_t len = 0;
    char *t = fx_read_file(path, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(t, "101", 3);
    free(t);
    /* a complete checkpoint is never overwritten */
    assert_int_equal(ckpt_save_begin(NULL, dir, 101, false, err, sizeof err), -1);
    assert_non_null(strstr(err, "already a complete checkpoint (the latest)"));
    fx_rm_rf(dir);
}

static void assert_no_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strstr(e->d_name, ".tmp")) fail_msg("%s/%s left behind", dir, e->d_name);
    }
    closedir(d);
}

/* The checkpoint in dir is whole: latest is one of the allowed iterations and verifies fully. */
static int64_t assert_latest_whole(const char *dir, int64_t a, int64_t b, const char *when) {
    char err[1024];
    int64_t it = -1;
    if (ckpt_latest(dir, &it, err, sizeof err) != 0) fail_msg("%s: ckpt_latest: %s", when, err);
    if (it != a && it != b) fail_msg("%s: latest is %lld", when, (long long)it);
    if (ckpt_verify(dir, it, NULL, err, sizeof err))
        fail_msg("%s: latest %lld does not verify: %s", when, (long long)it, err);
    check_all(dir, it, &L4);
    return it;
}

static void test_crash_at_every_step(void **state) {
    (void)state;
    char dir[256], err[1024], when[64];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckpt_crash"), 0);
    int saw_old = 0, saw_new = 0, steps = -1;
    for (int k = 0; steps < 0; k++) {
        fx_rm_rf(dir);
        if (tm_save(NULL, dir, 10, &L4, k % 2, err, sizeof err)) fail_msg("%s", err);
        fault_io f;
        fio_init(&f);
        f.crash_at = k;
        int rc = tm_save(&f.io, dir, 20, &L4, k % 2, err, sizeof err);
        if (!f.dead) {
            if (rc) fail_msg("save without a fault failed: %s", err);
            steps = f.step;          /* the save finished before step k: every step has been crashed at */
            fio_crash_aftermath(&f); /* and the power fails right after it returned: it must be durable */
            assert_latest_whole(dir, 20, 20, "power cut after the save returned");
        } else {
            fio_crash_aftermath(&f);
        }
        snprintf(when, sizeof when, "crash at step %d", k);
        int64_t it = assert_latest_whole(dir, 10, 20, when);
        saw_old += it == 10, saw_new += it == 20;
        if (steps < 0) {
            /* the next save after the crash succeeds over the debris; a complete iter_20 the crash left
             * (its manifest written, the tracker not yet renamed) is replaced only when asked to */
            char man[600];
            snprintf(man, sizeof man, "%s/iter_0000020/%s", dir, CKPT_MANIFEST);
            struct stat ms;
            const bool complete = stat(man, &ms) == 0;
            int retry = tm_save(NULL, dir, 20, &L4, 1, err, sizeof err);
            if (retry && it != 20 && !(complete && strstr(err, "--overwrite-checkpoints")))
                fail_msg("%s: retry: %s", when, err);
            if (retry && it != 20 && tm_save_over(NULL, dir, 20, &L4, 1, true, err, sizeof err))
                fail_msg("%s: retry with overwrite: %s", when, err);
            assert_latest_whole(dir, 20, 20, when);
        }
    }
    assert_true(steps > 30); /* begin, 4 shards, manifest, tracker: dozens of steps */
    assert_true(saw_old > 0 && saw_new > 0);
    fx_rm_rf(dir);
}

static void test_enospc_at_every_write(void **state) {
    (void)state;
    char dir[256], err[1024];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckpt_enospc"), 0);
    int writes = -1;
    regex_t re;
    assert_int_equal(regcomp(&re,
                             "no space left on device after [0-9]+ of ([0-9]+) bytes; this file needs [0-9]+ bytes",
                             REG_EXTENDED),
                     0);
    for (int k = 0; writes < 0; k++) {
        fx_rm_rf(dir);
        if (tm_save(NULL, dir, 10, &L4, 0, err, sizeof err)) fail_msg("%s", err);
        fault_io f;
        fio_init(&f);
        f.fail_at = k, f.fail_errno = ENOSPC, f.fail_writes_only = 1;
        err[0] = '\0';
        int rc = tm_save(&f.io, dir, 20, &L4, 0, err, sizeof err);
        fio_release(&f);
        if (rc == 0) {
            writes = f.writes;
            break;
        }
        if (regexec(&re, err, 0, NULL, 0) != 0) fail_msg("write %d: message without the bytes needed: %s", k, err);
        assert_latest_whole(dir, 10, 10, "after ENOSPC");
        char idir[300];
        snprintf(idir, sizeof idir, "%s/iter_0000020", dir);
        assert_no_tmp(idir);
        assert_no_tmp(dir);
    }
    assert_true(writes >= 6); /* 4 shards (several writes each), manifest, tracker */
    regfree(&re);
    /* any other failing step (open, fsync, rename, ...) also fails cleanly */
    for (int k = 0;; k++) {
        fx_rm_rf(dir);
        if (tm_save(NULL, dir, 10, &L4, 0, err, sizeof err)) fail_msg("%s", err);
        fault_io f;
        fio_init(&f);
        f.fail_at = k, f.fail_errno = EIO;
        int rc = tm_save(&f.io, dir, 20, &L4, 0, err, sizeof err);
        int total = f.step;
        fio_release(&f);
        if (rc == 0 && total <= k) break;
        assert_latest_whole(dir, 10, 20, "after EIO"); /* 20 only when the last fsync of the directory failed */
    }
    fx_rm_rf(dir);
}

static void test_commit_refuses_incomplete(void **state) {
    (void)state;
    char dir[256], err[1024], path[512];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckpt_incomplete"), 0);
    if (tm_save(NULL, dir, 10, &L4, 0, err, sizeof err)) fail_msg("%s", err);
    /* rank 2 dies before writing its shard */
    assert_int_equal(ckpt_save_begin(NULL, dir, 20, false, err, sizeof err), 0);
    for (int r = 0; r < 4; r++) {
        if (r == 2) continue;
        tm_rank tr;
        tm_rank_blobs(&tr, &L4, r, 20);
        ckpt_coords c = ckpt_coords_of(&L4, r);
        assert_int_equal(ckpt_shard_write(NULL, dir, 20, &L4, &c, tr.blobs, tr.n, NULL, err, sizeof err), 0);
        tm_rank_free(&tr);
    }
    ckpt_manifest m = tm_manifest(20, &L4);
    assert_int_equal(ckpt_save_commit(NULL, dir, 20, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "shard_00002.bin: missing"));
    int64_t it;
    assert_int_equal(ckpt_latest(dir, &it, err, sizeof err), 0);
    assert_int_equal(it, 10);
    /* rank 2 writes, but forgot its piece of a tensor: a hole is refused */
    tm_rank tr;
    tm_rank_blobs(&tr, &L4, 2, 20);
    ckpt_coords c = ckpt_coords_of(&L4, 2);
    int drop = -1;
    for (int i = 0; i < tr.n; i++)
        if (strcmp(tr.blobs[i].name, "optim.exp_avg/layers.1.row") == 0) drop = i;
    assert_true(drop >= 0);
    tr.blobs[drop] = tr.blobs[tr.n - 1];
    assert_int_equal(ckpt_shard_write(NULL, dir, 20, &L4, &c, tr.blobs, tr.n - 1, NULL, err, sizeof err), 0);
    tm_rank_free(&tr);
    assert_int_equal(ckpt_save_commit(NULL, dir, 20, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "optim.exp_avg/layers.1.row"));
    assert_non_null(strstr(err, "in no shard"));
    /* a stale shard from another iteration is refused */
    snprintf(path, sizeof path, "%s/iter_0000020/shard_00002.bin", dir);
    char src[512];
    snprintf(src, sizeof src, "%s/iter_0000010/shard_00002.bin", dir);
    size_t len = 0;
    char *old = fx_read_file(src, &len);
    fx_write_file(path, old, len);
    free(old);
    assert_int_equal(ckpt_save_commit(NULL, dir, 20, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "belongs to iteration 10"));
    /* a rank's reported size that disagrees with the disk is refused */
    assert_int_equal(ckpt_latest(dir, &it, err, sizeof err), 0);
    assert_int_equal(it, 10);
    fx_rm_rf(dir);
}

static void test_bad_blobs_rejected(void **state) {
    (void)state;
    char dir[256], err[1024];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckpt_badblob"), 0);
    assert_int_equal(ckpt_save_begin(NULL, dir, 1, false, err, sizeof err), 0);
    float x[4] = {0};
    ckpt_layout one = {1, 1, 1, 1, false};
    ckpt_coords c0 = {0};
    ckpt_blob b = {
        .name = "w", .dtype = CKPT_F32, .data = x, .ndim = 2, .shape = {2, 2}, .place = ckpt_place_slice(0, 1, 2)};
    assert_int_equal(ckpt_shard_write(NULL, dir, 1, &one, &c0, &b, 1, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "'w': slice [1, +2) outside axis 0"));
    b.place = ckpt_place_slice(2, 0, 1);
    assert_int_equal(ckpt_shard_write(NULL, dir, 1, &one, &c0, &b, 1, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "axis 2"));
    b.place = ckpt_place_full(), b.name = "";
    assert_int_equal(ckpt_shard_write(NULL, dir, 1, &one, &c0, &b, 1, NULL, err, sizeof err), -1);
    b.name = "w";
    ckpt_coords bad = {.rank = 1};
    assert_int_equal(ckpt_shard_write(NULL, dir, 1, &one, &bad, &b, 1, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not fit layout"));
    fx_rm_rf(dir);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-fixture") == 0) { /* for the ckpt program's tests */
        char err[1024];
        fx_rm_rf(argv[2]);
        if (tm_save(NULL, argv[2], 10, &L4, 0, err, sizeof err) ||
            tm_save(NULL, argv[2], 20, &L4, 1, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_crash_at_every_step),
        cmocka_unit_test(test_enospc_at_every_write),
        cmocka_unit_test(test_commit_refuses_incomplete),
        cmocka_unit_test(test_bad_blobs_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
