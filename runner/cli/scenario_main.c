/* scenario: rehearse cluster jobs on the twin.
 *
 *   scenario run FILE.yaml|DIR ... [--work DIR] [--json FILE] [--junit FILE] [--trace FILE] [--log FILE] [--clean]
 *                [--html PAGE [--compare METRICS.jsonl]]
 *   scenario report WORKDIR --html PAGE [--compare METRICS.jsonl]
 *   scenario check FILE.yaml ...
 *   scenario plan FILE.yaml [--device NAME] [--micro-batches 1,2,4] [--recompute ...] [--layouts] ...
 *
 * `run` rehearses each scenario (a directory: every *.yaml in it, in name order), prints the
 * one-screen summary, and writes the JSON / JUnit / Perfetto / HTML reports asked for; `report` draws
 * the HTML page again from what `run --html` kept in a scenario's work folder. Exit status: 0 when
 * every expectation of every scenario held, 1 when one did not, 2 when a scenario could not be
 * loaded or run (the message says where and how to fix it). `plan` searches micro-batch sizes and
 * recomputation (runner/plan.h): exit 0 when one fits, 1 when none does, 2 on bad input. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/safe_file.h"
#include "runner/plan.h"
#include "runner/report.h"
#include "runner/runner.h"
#include "runner/scenario.h"
#include "twinrun/version.h"

static int usage(void) {
    fputs(
        "usage: scenario run FILE.yaml|DIR ... [--work DIR] [--json FILE] [--junit FILE] [--trace FILE] [--log FILE]\n"
        "                    [--clean]   (after a scenario passed: drop its checkpoints and data cache)\n"
        "                    [--jobs N]  (a campaign's trials N at a time, each in its own process; default: one per CPU)\n"
        "                    [--campaign-seed S] [--trial K]   (a campaign's draws from seed S; only its trial K: a replay)\n"
        "                    [--from-start]   (a campaign's trials from iteration 1, not from the fault-free run's checkpoints)\n"
        "                    [--to-the-end]   (a campaign's restarts run even where a verified resume stands for them)\n"
        "                    [--html PAGE [--compare METRICS.jsonl]]   (one scenario: its page, docs/reports.md#html)\n"
        "       scenario report WORKDIR --html PAGE [--compare METRICS.jsonl]   (the page again, from WORKDIR)\n"
        "       scenario check FILE.yaml ...\n"
        "       scenario plan FILE.yaml [--device NAME] [--micro-batches 1,2,4] [--recompute none,selective,full]\n"
        "                               [--layouts] [--all] [--headroom F] [--work DIR] [--json FILE]\n"
        "Rehearses each scenario on the twin (docs/scenarios.md). Exit 0: every expectation held; 1: one did not;\n"
        "2: a scenario could not be loaded or run.\n",
        stderr);
    return 2;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* FILE, or every *.yaml of DIR in name order; a name that is not here is looked for under scenarios/
 * (scenario_find). Returns 0, -1 on a directory that cannot be read (errno), -2 on a name found nowhere
 * (err says where it looked). */
static int expand(const char *name, char ***files, int *n, char *err, size_t errlen) {
    struct stat st;
    char arg[4096];
    const int where = scenario_find(name, arg, sizeof arg, err, errlen);
    if (where < 0) return -2;
    if (where == 1) fprintf(stderr, "scenario: %s: not in the current directory; using %s\n", name, arg);
    if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
        DIR *d = opendir(arg);
        if (!d) return -1;
        struct dirent *e;
        int first = *n;
        while ((e = readdir(d))) {
            size_t len = strlen(e->d_name);
            if (len < 6 || strcmp(e->d_name + len - 5, ".yaml")) continue;
            *files = realloc(*files, sizeof **files * (size_t)(*n + 1));
            size_t plen = strlen(arg) + len + 2;
            (*files)[*n] = malloc(plen);
            snprintf((*files)[*n], plen, "%s/%s", arg, e->d_name);
            (*n)++;
        }
        closedir(d);
        qsort(*files + first, (size_t)(*n - first), sizeof **files, cmp_str);
        return 0;
    }
    *files = realloc(*files, sizeof **files * (size_t)(*n + 1));
    (*files)[(*n)++] = strdup(arg);
    return 0;
}

static int free_files(char **files, int n, int status) {
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    return status;
}

/* The HTML page of one scenario from its JSON report text and work folder (which gets report.json, so
 * `scenario report` can draw it again). 0, or 2 with the reason on stderr. */
static int html_page(const char *page, const char *json, const char *work, const char *compare, bool keep_json) {
    char err[4400];
    char path[SC_PATH_LEN + SC_NAME_LEN + 32];
    snprintf(path, sizeof path, "%s/report.json", work);
    if (keep_json && tr_safe_write(path, json, strlen(json), true, NULL, err, sizeof err))
        return fprintf(stderr, "scenario: %s\n", err), 2;
    report_html_input in = {.report_json = json, .work_dir = work, .compare = compare};
    if (report_html_write(page, &in, err, sizeof err))
        return fprintf(stderr, "scenario: --html %s: %s\n", page, err), 2;
    printf("html report: %s\n", page);
    return 0;
}

/* scenario report WORKDIR --html PAGE [--compare METRICS.jsonl] */
static int report_main(int argc, char **argv) {
    const char *work = NULL, *page = NULL, *compare = NULL;
    for (int i = 0; i < argc; i++) {
        const char **slot = !strcmp(argv[i], "--html") ? &page : !strcmp(argv[i], "--compare") ? &compare : NULL;
        if (slot && i + 1 >= argc) return fprintf(stderr, "scenario report: %s needs a value\n", argv[i]), 2;
        if (slot) *slot = argv[++i];
        else if (argv[i][0] == '-') return fprintf(stderr, "scenario report: unknown option %s\n", argv[i]), usage();
        else if (work) return fprintf(stderr, "scenario report: one work folder, not %s and %s\n", work, argv[i]), 2;
        else work = argv[i];
    }
    if (!work || !page)
        return fprintf(stderr, "scenario report: needs a scenario's work folder and --html PAGE\n"), usage();
    char path[4200];
    snprintf(path, sizeof path, "%s/report.json", work);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fprintf(stderr,
                       "scenario report: %s: %s (`scenario run FILE --html PAGE` keeps it in the scenario's work "
                       "folder, WORK/NAME)\n",
                       path, strerror(errno)),
               2;
    char *json = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&json, &len);
    char buf[65536];
    for (size_t n; m && (n = fread(buf, 1, sizeof buf, f)) > 0;) fwrite(buf, 1, n, m);
    const bool bad = ferror(f);
    fclose(f);
    if (m) fclose(m);
    if (!m || bad) {
        free(json);
        return fprintf(stderr, "scenario report: cannot read %s\n", path), 2;
    }
    const int rc = html_page(page, json, work, compare, false);
    free(json);
    return rc;
}

static FILE *open_out(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "scenario: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

/* The twin's device memory is malloc's (sim/dev): a run of 1024 ranks faults its ~2 GiB in page by page
 * at every attempt, and a campaign makes thousands of attempts. With glibc's malloc asking for
 * transparent huge pages (the tunable glibc.malloc.hugetlb=1: glibc 2.35 or later, where
 * /sys/kernel/mm/transparent_hugepage/enabled is madvise or always; older ones ignore it) a trial of
 * campaign_1024 takes about a tenth less CPU time (docs/benchmarks.md); where memory lies changes no
 * bit. A tunable is read at start-up only, so `run` starts itself again with it — not when
 * GLIBC_TUNABLES is set already (the caller's choice), nor under valgrind (a program it execs runs
 * without it), nor with TWINRUN_HUGEPAGES=0. Returns only when it did not. */
static void exec_with_hugepages(char **argv) {
    const char *pre = getenv("LD_PRELOAD"), *off = getenv("TWINRUN_HUGEPAGES");
    if (getenv("GLIBC_TUNABLES") || (pre && strstr(pre, "vgpreload")) || (off && !strcmp(off, "0"))) return;
    if (setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1)) return;
    execv("/proc/self/exe", argv);
    unsetenv("GLIBC_TUNABLES"); /* not started again: on as we are */
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "scenario");
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "plan")) return plan_main(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "report")) return report_main(argc - 2, argv + 2);
    if (argc < 3 || (strcmp(argv[1], "run") && strcmp(argv[1], "check"))) return usage();
    if (!strcmp(argv[1], "run")) exec_with_hugepages(argv);
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines in order with the ranks' messages, also in a file */
    const bool run = !strcmp(argv[1], "run");
    const char *work = "build/scenarios", *json = NULL, *junit = NULL, *trace = NULL, *logp = NULL, *html = NULL,
               *compare = NULL;
    bool clean = false, campaign_seed_set = false, from_start = false, to_the_end = false;
    unsigned long long campaign_seed = 0;
    int jobs = 0, trial = 0;
    char **files = NULL;
    int nfiles = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = !strcmp(a, "--work")      ? &work
                            : !strcmp(a, "--json")    ? &json
                            : !strcmp(a, "--junit")   ? &junit
                            : !strcmp(a, "--trace")   ? &trace
                            : !strcmp(a, "--log")     ? &logp
                            : !strcmp(a, "--html")    ? &html
                            : !strcmp(a, "--compare") ? &compare
                                                      : NULL;
        if (!strcmp(a, "--clean")) {
            clean = true;
        } else if (!strcmp(a, "--from-start")) {
            from_start = true;
        } else if (!strcmp(a, "--to-the-end")) {
            to_the_end = true;
        } else if (!strcmp(a, "--jobs") || !strcmp(a, "--campaign-seed") || !strcmp(a, "--trial")) {
            if (i + 1 >= argc) return fprintf(stderr, "scenario: %s needs a value\n", a), free_files(files, nfiles, 2);
            const char *v = argv[++i];
            char *end = NULL;
            errno = 0;
            const unsigned long long x = strtoull(v, &end, 10);
            const bool seed = !strcmp(a, "--campaign-seed");
            if (!*v || *end || errno || v[0] == '-' || (!seed && (x < 1 || x > 1000000)))
                return fprintf(stderr, "scenario: %s %s: %s\n", a, v,
                               seed ? "an integer 0..18446744073709551615 please" : "a whole number 1..1000000 please"),
                       free_files(files, nfiles, 2);
            if (seed) campaign_seed = x, campaign_seed_set = true;
            else if (!strcmp(a, "--jobs")) jobs = (int)x;
            else trial = (int)x;
        } else if (slot) {
            if (i + 1 >= argc) return fprintf(stderr, "scenario: %s needs a value\n", a), free_files(files, nfiles, 2);
            *slot = argv[++i];
        } else if (a[0] == '-') {
            fprintf(stderr, "scenario: unknown option %s\n", a);
            return free_files(files, nfiles, usage());
        } else {
            char err[4200];
            const int rc = expand(a, &files, &nfiles, err, sizeof err);
            if (rc == -2) fprintf(stderr, "scenario: %s\n", err);
            else if (rc) fprintf(stderr, "scenario: cannot read directory %s: %s\n", a, strerror(errno));
            if (rc) return free_files(files, nfiles, 2);
        }
    }
    if (nfiles == 0)
        return fprintf(stderr, "scenario: no scenario files given (a directory had no *.yaml?)\n"),
               free_files(files, nfiles, 2);
    if (compare && !html)
        return fprintf(stderr, "scenario: --compare draws a real run beside the twin's on the page: it needs --html\n"),
               free_files(files, nfiles, 2);
    if (html && (!run || nfiles > 1))
        return fprintf(stderr, "scenario: --html draws one scenario's page: %s\n",
                       run ? "give one scenario file (or one --html per run)" : "it is an option of `run`"),
               free_files(files, nfiles, 2);
    if ((trial || campaign_seed_set) && (!run || nfiles > 1))
        return fprintf(stderr, "scenario: --trial and --campaign-seed replay one scenario's campaign: %s\n",
                       run ? "give one scenario file" : "they are options of `run`"),
               free_files(files, nfiles, 2);
    if (html && trace)
        return fprintf(stderr, "scenario: --html keeps every attempt's trace of every rank in the work folder "
                               "(WORK/NAME/trace_attempt0.json is the first attempt's): drop --trace\n"),
               free_files(files, nfiles, 2);
    sc_report *reports = calloc((size_t)nfiles, sizeof *reports);
    const sc_report **views = calloc((size_t)nfiles, sizeof *views);
    int nrep = 0, status = 0;
    FILE *log = logp ? open_out(logp) : NULL;
    if (logp && !log) return 2;
    for (int i = 0; i < nfiles; i++) {
        scenario s;
        char err[4096] = "";
        if (scenario_load(files[i], &s, err, sizeof err)) {
            fprintf(stderr, "scenario: %s\n", err);
            status = 2;
            continue;
        }
        char dir[SC_PATH_LEN + SC_NAME_LEN + 2];
        snprintf(dir, sizeof dir, "%s/%s", work, s.name);
        if (!run && (runner_check(&s, dir, err, sizeof err) || work_check(dir, err, sizeof err))) {
            fprintf(stderr, "scenario: %s\n", err);
            status = 2;
            scenario_free(&s);
            continue;
        }
        if (!run) {
            printf("%s: ok (%d ranks: %d nodes x %d %s; TP%d PP%d CP%d DP%d; %d faults%s)\n", files[i],
                   s.nodes * s.gpus_per_node, s.nodes, s.gpus_per_node, s.device, s.tp, s.pp, s.cp, s.dp, s.faults.n,
                   s.campaign.count ? ", a campaign" : "");
            scenario_free(&s);
            continue;
        }
        printf("== %s: %s\n", s.name, s.description[0] ? s.description : s.path);
        fflush(stdout);
        if ((trial || campaign_seed_set) && (s.campaign.count <= 0 || s.predict)) {
            fprintf(stderr,
                    "scenario: %s has no campaign (campaign: {count: N, seed: S}): --trial and --campaign-seed "
                    "replay a campaign's trial\n",
                    files[i]);
            status = 2;
            scenario_free(&s);
            continue;
        }
        sc_run_options o = {.work_dir = dir,
                            .job_log = log,
                            .progress = stdout,
                            .trace_path = trace,
                            .record = html != NULL,
                            .jobs = jobs,
                            .campaign_seed_set = campaign_seed_set,
                            .campaign_seed = campaign_seed,
                            .trial = trial,
                            .from_start = from_start,
                            .to_the_end = to_the_end};
        if (runner_run(&s, &o, &reports[nrep], err, sizeof err)) {
            fprintf(stderr, "scenario: %s\n", err);
            status = 2;
            report_free(&reports[nrep]);
        } else {
            report_text(stdout, &reports[nrep]);
            char *text = NULL;
            size_t len = 0;
            FILE *m = html ? open_memstream(&text, &len) : NULL;
            int jrc = m ? report_json(m, &reports[nrep]) : -1;
            if (m && fclose(m)) jrc = -1;
            if (html && jrc) fprintf(stderr, "scenario: --html %s: out of memory for the report\n", html), status = 2;
            else if (html && html_page(html, text, dir, compare, true)) status = 2;
            free(text);
            if (!reports[nrep].passed && status == 0) status = 1;
            if (clean && reports[nrep].passed && work_clean(dir)) status = 2;
            views[nrep] = &reports[nrep];
            nrep++;
        }
        fflush(stdout);
        scenario_free(&s);
    }
    /* the reports go to a temporary name, renamed over the old one only once whole */
    if (json && nrep) {
        tr_safe_file sf;
        char err[512];
        if (tr_safe_open(&sf, json, true, NULL, err, sizeof err)) {
            fprintf(stderr, "scenario: --json %s\n", err), status = 2;
        } else {
            if (nrep == 1) report_json(sf.f, &reports[0]);
            else {
                fputs("[\n", sf.f);
                for (int i = 0; i < nrep; i++) {
                    if (i) fputs(",\n", sf.f);
                    report_json(sf.f, &reports[i]);
                }
                fputs("]\n", sf.f);
            }
            if (tr_safe_commit(&sf, err, sizeof err)) fprintf(stderr, "scenario: --json %s\n", err), status = 2;
        }
    }
    if (junit && nrep) {
        tr_safe_file sf;
        char err[512];
        if (tr_safe_open(&sf, junit, true, NULL, err, sizeof err)) {
            fprintf(stderr, "scenario: --junit %s\n", err), status = 2;
        } else {
            report_junit(sf.f, views, nrep);
            if (tr_safe_commit(&sf, err, sizeof err)) fprintf(stderr, "scenario: --junit %s\n", err), status = 2;
        }
    }
    if (log) fclose(log);
    for (int i = 0; i < nrep; i++) report_free(&reports[i]);
    for (int i = 0; i < nfiles; i++) free(files[i]);
    free(files), free(reports), free(views);
    return status;
}
