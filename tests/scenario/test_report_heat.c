/* The report page's heat map of a trace whose rings dropped spans (runner/report_html_data.c): a
 * rank with the trace's summary of its dropped spans ("twinrun_dropped") is drawn busy and waiting
 * from them over the whole attempt; a rank without one stays grey ("not recorded") up to its first
 * kept span. The page's rows: a state letter (b busy, c waiting, f not recorded) and a run length. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "common/fixture.h"
#include "runner/report_html_internal.h"

/* Attempt 0 of 2 ranks over 1 s: both kept only their spans after 0.9 s; rank 0 also has summaries
 * of what it dropped: busy over [0, 0.45], waiting for peers over [0.45, 0.9]. */
static const char TRACE[] =
    "{\"otherData\":{\"world\":2,\"end_time_s\":1.0,\"dropped_events\":1000},\"traceEvents\":[\n"
    "{\"ph\":\"X\",\"name\":\"compute\",\"cat\":\"compute\",\"pid\":1,\"tid\":1,\"ts\":900000,\"dur\":100000},\n"
    "{\"ph\":\"X\",\"name\":\"compute\",\"cat\":\"compute\",\"pid\":1,\"tid\":2,\"ts\":900000,\"dur\":100000},\n"
    "{\"ph\":\"M\",\"name\":\"twinrun_dropped\",\"cat\":\"summary\",\"pid\":1,\"tid\":1,\"ts\":0,\"args\":"
    "{\"t0\":[0,450000],\"t1\":[450000,900000],\"busy\":[450000,0],\"wait\":[0,450000]}}\n"
    "]}\n";

static const char *row_of(const cJSON *heat, int rank) {
    const cJSON *index = cJSON_GetObjectItem(heat, "rank_row"), *rows = cJSON_GetObjectItem(heat, "rows");
    const cJSON *k = cJSON_GetArrayItem(index, rank);
    assert_non_null(k);
    return cJSON_GetArrayItem(rows, k->valueint)->valuestring;
}

/* The column of simulated time t (seconds) on the heat map's axis (its segments: active stretches
 * and breaks, each [t0, t1] over columns [c0, c1)). */
static int column_at(const cJSON *heat, double t) {
    const cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItem(heat, "segments")) {
        const double t0 = cJSON_GetObjectItem(g, "t0")->valuedouble, t1 = cJSON_GetObjectItem(g, "t1")->valuedouble;
        const int c0 = cJSON_GetObjectItem(g, "c0")->valueint, c1 = cJSON_GetObjectItem(g, "c1")->valueint;
        if (t >= t0 && t < t1) return c0 + (int)((t - t0) / (t1 - t0) * (c1 - c0));
    }
    fail_msg("no segment holds t = %g s", t);
    return -1;
}

/* The state of column c of an encoded row ("b12c388": 12 columns busy, then 388 waiting). */
static char state_at(const char *row, int c) {
    for (const char *p = row; *p;) {
        const char st = *p++;
        const int n = (int)strtol(p, (char **)&p, 10);
        if (c < n) return st;
        c -= n;
    }
    return '?';
}

static void test_summaries_fill_the_dropped_stretch(void **state) {
    (void)state;
    char dir[] = "/tmp/twinrun_heat_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/trace_attempt0.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(TRACE, f);
    fclose(f);
    char err[256] = "";
    cJSON *d = report_html_data("{\"name\":\"x\",\"checks\":[],\"attempts\":[{}]}", dir, NULL, err, sizeof err);
    unlink(path);
    rmdir(dir);
    if (!d) fail_msg("%s", err);
    const cJSON *heat = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "heat"), 0);
    assert_non_null(heat);
    const char *r0 = row_of(heat, 0), *r1 = row_of(heat, 1);
    /* inside each summary interval and the kept spans (the axis may draw a long stretch without a
     * state change as a break: its columns still show the state) */
    const int early = column_at(heat, 0.2), middle = column_at(heat, 0.7), late = column_at(heat, 0.95);
    assert_int_equal(state_at(r0, early), 'b');  /* summarized busy */
    assert_int_equal(state_at(r0, middle), 'c'); /* summarized waiting */
    assert_int_equal(state_at(r0, late), 'b');   /* its kept span */
    assert_int_equal(state_at(r1, early), 'f');  /* nothing kept, nothing summarized: grey */
    assert_int_equal(state_at(r1, middle), 'f');
    assert_int_equal(state_at(r1, late), 'b');
    cJSON_Delete(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summaries_fill_the_dropped_stretch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
