/* A scenario's work folder (runner/work_dir.c, runner/work_clean.c): names that would leave --work are
 * refused at load, a folder that is not the runner's is refused before anything is written in it,
 * and --clean deletes only in a folder the runner marked, never through a link. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fixture.h"

#include "runner/runner.h"
#include "runner/scenario.h"

static char g_dir[64];

static int setup(void **state) {
    (void)state;
    return fx_tmpdir(g_dir, sizeof g_dir, "workdir");
}

static int teardown(void **state) {
    (void)state;
    return fx_rm_rf(g_dir);
}

static void put(const char *rel, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static bool exists(const char *rel) {
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    return lstat(path, &st) == 0;
}

static void sub(char *out, size_t cap, const char *rel) { snprintf(out, cap, "%s/%s", g_dir, rel); }

static int parse(const char *text, char *err, size_t errlen) {
    scenario s;
    int rc = scenario_parse(text, strlen(text), "s.yaml", &s, err, errlen);
    if (!rc) scenario_free(&s);
    return rc;
}

static void test_names(void **state) {
    (void)state;
    static const struct {
        const char *name, *why;
    } bad[] = {
        {"../../x", "climbs out of --work ('..')"},
        {"..", "climbs out of --work ('..')"},
        {"/tmp/x", "is an absolute path"},
        {"a/b", "is a path, not a name"},
        {".", "is --work itself"},
        {".hidden", "starts with '.'"},
        {"'a b'", "holds a character other than"},
    };
    char text[256], err[1024];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(text, sizeof text, "name: %s\ncluster: {nodes: 1, gpus_per_node: 1}\nmodel: {preset: tiny}\n",
                 bad[i].name);
        assert_int_equal(parse(text, err, sizeof err), -1);
        if (!strstr(err, bad[i].why) || !strstr(err, "use one plain folder name")) fail_msg("%s: %s", bad[i].name, err);
        assert_non_null(strstr(err, "s.yaml:1:7: name: '"));
    }
    /* no name: the file's, which must be a plain name too */
    const char *anon = "cluster: {nodes: 1, gpus_per_node: 1}\nmodel: {preset: tiny}\n";
    scenario s;
    assert_int_equal(scenario_parse(anon, strlen(anon), "..yaml", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "..yaml:1:1: the file's name (the scenario's default name) '.' is --work itself"));
    assert_non_null(strstr(err, "or give the scenario a name:"));
    if (parse("name: fine-1.2_x\ncluster: {nodes: 1, gpus_per_node: 1}\nmodel: {preset: tiny}\n"
              "training: {train-iters: 4, micro-batch-size: 1, global-batch-size: 1, lr: 1e-3}\ndata: {mock: true}\n",
              err, sizeof err))
        fail_msg("%s", err);
}

static void test_check(void **state) {
    (void)state;
    char dir[256], err[1024];
    sub(dir, sizeof dir, "absent");
    assert_int_equal(work_check(dir, err, sizeof err), 0);
    /* someone's folder: refused, named, untouched */
    sub(dir, sizeof dir, "user");
    assert_int_equal(mkdir(dir, 0755), 0);
    put("user/notes.txt", "mine");
    assert_int_equal(work_check(dir, err, sizeof err), -1);
    assert_non_null(strstr(err, "already exists and scenario run did not make it (no .twinrun-scenario in it; it "
                                "holds 'notes.txt')"));
    assert_non_null(strstr(err, "give another --work or rename the scenario"));
    /* marked: fine; a part that is a link out: refused */
    put("user/.twinrun-scenario", "work folder\n");
    assert_int_equal(work_check(dir, err, sizeof err), 0);
    char link[256];
    sub(link, sizeof link, "user/checkpoints");
    assert_int_equal(symlink("/", link), 0);
    assert_int_equal(work_check(dir, err, sizeof err), -1);
    assert_non_null(strstr(err, "/user/checkpoints is a symbolic link"));
    /* the folder itself a link */
    sub(link, sizeof link, "linked");
    assert_int_equal(symlink(dir, link), 0);
    assert_int_equal(work_check(link, err, sizeof err), -1);
    assert_non_null(strstr(err, "is a symbolic link: a rehearsal writes and empties checkpoints only inside --work"));
}

static void test_clean(void **state) {
    (void)state;
    char dir[256], path[256];
    sub(dir, sizeof dir, "w");
    assert_int_equal(mkdir(dir, 0755), 0);
    sub(path, sizeof path, "w/checkpoints");
    assert_int_equal(mkdir(path, 0755), 0);
    put("w/checkpoints/keep.bin", "weights");
    put("w/job.log", "log");
    /* not marked: nothing removed */
    assert_int_equal(work_clean(dir), -1);
    assert_true(exists("w/checkpoints/keep.bin"));
    /* marked: the checkpoints go, the log and the marker stay; a link in it is removed, not followed */
    put("w/.twinrun-scenario", "work folder\n");
    sub(path, sizeof path, "outside");
    assert_int_equal(mkdir(path, 0755), 0);
    put("outside/precious", "x");
    char link[256];
    sub(link, sizeof link, "w/data_cache");
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(work_clean(dir), 0);
    assert_false(exists("w/checkpoints"));
    assert_false(exists("w/data_cache"));
    assert_true(exists("outside/precious"));
    assert_true(exists("w/job.log"));
    assert_true(exists("w/.twinrun-scenario"));
    /* a marked folder reached through a link is not cleaned */
    sub(path, sizeof path, "w/checkpoints");
    assert_int_equal(mkdir(path, 0755), 0);
    sub(link, sizeof link, "wl");
    assert_int_equal(symlink(dir, link), 0);
    assert_int_equal(work_clean(link), -1);
    assert_true(exists("w/checkpoints"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clean, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
