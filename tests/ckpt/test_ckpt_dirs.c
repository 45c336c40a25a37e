/* What a checkpoint directory holds (ckpt_iter_path, ckpt_dir_probe), the --save lock, the
 * writability probe, and ckpt_save_begin never replacing a complete iteration unless asked to:
 * every refusal leaves each byte of the directory as it was (a hash of the tree before and after). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/fixture.h"
#include "common/fixture_ckpt.h"

static const ckpt_layout L4 = {.tp = 2, .pp = 1, .dp = 2, .cp = 1, .dist_opt = true};

/* FNV-1a over every entry's name and bytes, in name order, recursively: equal iff nothing changed. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static uint64_t tree_hash(const char *dir, uint64_t h) {
    struct dirent **names;
    int n = scandir(dir, &names, NULL, by_name);
    if (n < 0) return fnv(h, "absent", 6);
    for (int i = 0; i < n; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]->d_name);
        if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, "..")) {
            h = fnv(h, names[i]->d_name, strlen(names[i]->d_name) + 1);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) h = tree_hash(p, h);
            else {
                size_t len = 0;
                char *data = fx_read_file(p, &len);
                h = fnv(h, data ? data : "", len);
                free(data);
            }
        }
        free(names[i]);
    }
    free(names);
    return h;
}

static void test_iter_path(void **state) {
    (void)state;
    char root[512];
    int64_t it = -1;
    assert_int_equal(ckpt_iter_path("/data/ck/iter_0000004", root, sizeof root, &it), 1);
    assert_string_equal(root, "/data/ck");
    assert_int_equal(it, 4);
    assert_int_equal(ckpt_iter_path("ck/iter_0001200//", root, sizeof root, &it), 1);
    assert_string_equal(root, "ck");
    assert_int_equal(it, 1200);
    assert_int_equal(ckpt_iter_path("iter_0000007", root, sizeof root, &it), 1);
    assert_string_equal(root, ".");
    assert_int_equal(ckpt_iter_path("/iter_0000007", root, sizeof root, &it), 1);
    assert_string_equal(root, "/");
    assert_int_equal(ckpt_iter_path("/data/ck", root, sizeof root, &it), 0);
    assert_int_equal(ckpt_iter_path("ck/iter_12", root, sizeof root, &it), 0);        /* not iter_%07d */
    assert_int_equal(ckpt_iter_path("ck/iter_000000x", root, sizeof root, &it), 0);   /* not digits */
    assert_int_equal(ckpt_iter_path("ck/iter_0000004.x", root, sizeof root, &it), 0); /* a quarantined copy */
    /* a root that happens to be called iter_N (it holds the tracker itself) stays a root */
    char dir[256];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckdirs_named"), 0);
    char named[300], tracker[400];
    snprintf(named, sizeof named, "%s/iter_0000009", dir);
    assert_int_equal(ckpt_make_dirs(named, tracker, sizeof tracker), 0);
    snprintf(tracker, sizeof tracker, "%s/%s", named, CKPT_TRACKER);
    fx_write_file(tracker, "3", 1);
    assert_int_equal(ckpt_iter_path(named, root, sizeof root, &it), 0);
    fx_rm_rf(dir);
}

static void test_probe_kinds(void **state) {
    (void)state;
    char dir[256], err[1024], path[512];
    ckpt_dir_info info;
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckdirs_probe"), 0);
    assert_int_equal(ckpt_dir_probe(dir, &info, err, sizeof err), 0);
    assert_int_equal(info.kind, CKPT_DIR_ABSENT);
    assert_int_equal(ckpt_make_dirs(dir, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_LOCK);
    fx_write_file(path, "x", 1); /* a lock file left by a killed job does not make it non-empty */
    assert_int_equal(ckpt_dir_probe(dir, &info, err, sizeof err), 0);
    assert_int_equal(info.kind, CKPT_DIR_EMPTY);
    snprintf(path, sizeof path, "%s/iter_0000002", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(ckpt_dir_probe(dir, &info, err, sizeof err), 0);
    assert_int_equal(info.kind, CKPT_DIR_INTERRUPTED);
    assert_int_equal(info.incomplete, 2);
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    fx_write_file(path, "mine", 4);
    assert_int_equal(ckpt_dir_probe(dir, &info, err, sizeof err), 0);
    assert_int_equal(info.kind, CKPT_DIR_FOREIGN);
    assert_string_equal(info.foreign, "notes.txt");
    for (int64_t it = 6; it >= 4; it -= 2) /* written out of order: listed ascending */
        if (tm_save(NULL, dir, it, &L4, 1, err, sizeof err)) fail_msg("%s", err);
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_TRACKER);
    assert_int_equal(ckpt_dir_probe(dir, &info, err, sizeof err), 0);
    assert_int_equal(info.kind, CKPT_DIR_TRACKED);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(ckpt_dir_probe(dir, &info, err, sizeof err), 0);
    assert_int_equal(info.kind, CKPT_DIR_UNTRACKED);
    assert_int_equal(info.n_complete, 2);
    assert_int_equal(info.newest_complete, 6);
    char list[64];
    ckpt_dir_list_text(&info, list, sizeof list);
    assert_string_equal(list, "4, 6");
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    assert_int_equal(ckpt_dir_probe(path, &info, err, sizeof err), -1);
    assert_non_null(strstr(err, "is not a directory"));
    fx_rm_rf(dir);
}

static void test_lock(void **state) {
    (void)state;
    char dir[256], err[1024], pid[32];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckdirs_lock"), 0);
    assert_int_equal(ckpt_make_dirs(dir, err, sizeof err), 0);
    ckpt_lock *a = ckpt_lock_take(dir, err, sizeof err);
    assert_non_null(a);
    /* a second job, even one in this same process (the scenario runner's case), is refused naming the first */
    assert_null(ckpt_lock_take(dir, err, sizeof err));
    snprintf(pid, sizeof pid, "pid %ld,", (long)getpid());
    assert_non_null(strstr(err, "is in use by another job (host "));
    assert_non_null(strstr(err, pid));
    assert_non_null(strstr(err, "give this one another --save"));
    ckpt_lock_release(a);
    ckpt_lock *b = ckpt_lock_take(dir, err, sizeof err);
    assert_non_null(b);
    ckpt_lock_release(b);
    ckpt_dir_info info;
    assert_int_equal(ckpt_dir_probe(dir, &info, err, sizeof err), 0);
    assert_int_equal(info.kind, CKPT_DIR_EMPTY); /* released: nothing left behind */
    assert_int_equal(ckpt_dir_writable(dir, err, sizeof err), 0);
    assert_int_equal(ckpt_dir_probe(dir, &info, err, sizeof err), 0);
    assert_int_equal(info.kind, CKPT_DIR_EMPTY); /* the probe's file is gone too */
    char missing[300];
    snprintf(missing, sizeof missing, "%s/not/there", dir);
    assert_int_equal(ckpt_dir_writable(missing, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot be written"));
    fx_rm_rf(dir);
}

static void test_save_begin_never_replaces(void **state) {
    (void)state;
    char dir[256], err[1024], path[512];
    assert_int_equal(fx_tmppath(dir, sizeof dir, "ckdirs_over"), 0);
    if (tm_save(NULL, dir, 10, &L4, 1, err, sizeof err) || tm_save(NULL, dir, 20, &L4, 1, err, sizeof err))
        fail_msg("%s", err);
    /* the tracker's iteration and an older complete one: refused, not a byte changed */
    const uint64_t before = tree_hash(dir, 14695981039346656037ull);
    for (int64_t it = 10; it <= 20; it += 10) {
        assert_int_equal(ckpt_save_begin(NULL, dir, it, false, err, sizeof err), -1);
        assert_non_null(strstr(err, "already a complete checkpoint"));
        assert_non_null(strstr(err, "--overwrite-checkpoints"));
        assert_int_equal(tree_hash(dir, 14695981039346656037ull), before);
    }
    /* asked to: the tracker first steps back to 10, so a crash while 20 is rewritten leaves it on a
     * complete checkpoint */
    assert_int_equal(ckpt_save_begin(NULL, dir, 20, true, err, sizeof err), 0);
    int64_t it = -1;
    assert_int_equal(ckpt_latest(dir, &it, err, sizeof err), 0);
    assert_int_equal(it, 10);
    snprintf(path, sizeof path, "%s/iter_0000020/%s", dir, CKPT_MANIFEST);
    struct stat st;
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(ckpt_verify(dir, 10, NULL, err, sizeof err), 0);
    /* replacing the only checkpoint: no tracker at all while it is rewritten */
    assert_int_equal(ckpt_save_begin(NULL, dir, 10, true, err, sizeof err), 0);
    assert_int_equal(ckpt_latest(dir, &it, err, sizeof err), 1);
    if (tm_save_over(NULL, dir, 10, &L4, 1, true, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(ckpt_latest(dir, &it, err, sizeof err), 0);
    assert_int_equal(it, 10);
    fx_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iter_path),
        cmocka_unit_test(test_probe_kinds),
        cmocka_unit_test(test_lock),
        cmocka_unit_test(test_save_begin_never_replaces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
