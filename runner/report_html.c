/* The HTML report: one page, every byte it needs inside it. The tables (verdict, expectations,
 * attempts, faults) are written here as HTML, so they read without a script; the plots are drawn by
 * the page's script (report_html.js) from the data object this file embeds, with uPlot (inlined from
 * its npm package, license included) for the curves and a canvas for the heat maps and memory. */
#include <stdlib.h>
#include <string.h>

#include "core/safe_file.h"
#include "report_html_internal.h"

/* The first line of every page, so a later run knows the file is one it may replace. */
#define PAGE_MARK "<!DOCTYPE html>\n<!-- twinrun scenario report (scenario run --html) -->\n"

#ifndef TWINRUN_NPM_DIR
#define TWINRUN_NPM_DIR "build/npm"
#endif

/* Text into HTML: & < > " escaped, control characters but newline and tab dropped. */
static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '&') fputs("&amp;", f);
        else if (c == '<') fputs("&lt;", f);
        else if (c == '>') fputs("&gt;", f);
        else if (c == '"') fputs("&quot;", f);
        else if (c >= 0x20 || c == '\n' || c == '\t') fputc(c, f);
    }
}

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}
static const cJSON *jget(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }
static bool jtrue(const cJSON *o, const char *key) { return cJSON_IsTrue(jget(o, key)); }

/* A number cell: shown with fmt, its exact value in data-v (the browser test compares it with the JSON). */
static void num_cell(FILE *f, const char *key, const cJSON *v, const char *fmt) {
    if (!cJSON_IsNumber(v)) {
        fprintf(f, "<td data-k=\"%s\" data-v=\"null\">-</td>", key);
        return;
    }
    fprintf(f, "<td class=\"n\" data-k=\"%s\" data-v=\"%.17g\">", key, v->valuedouble);
    fprintf(f, fmt, v->valuedouble);
    fputs("</td>", f);
}

static void header(FILE *f, const cJSON *r) {
    const cJSON *checks = jget(r, "checks"), *layout = jget(r, "layout");
    int n = cJSON_GetArraySize(checks), failed = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks) failed += !jtrue(c, "passed");
    const bool passed = jtrue(r, "passed");
    fputs("<header><h1>scenario ", f);
    esc(f, jstr(r, "name"));
    fprintf(f, "</h1>\n<p id=\"verdict\" class=\"%s\" data-passed=\"%s\" data-checks=\"%d\" data-failed=\"%d\">",
            passed ? "pass" : "fail", passed ? "true" : "false", n, failed);
    if (passed) fprintf(f, "PASSED: %d/%d expectations", n, n);
    else fprintf(f, "FAILED: %d of %d expectations", failed, n);
    fputs("</p>\n<p class=\"sub\">", f);
    esc(f, jstr(r, "path"));
    const cJSON *w = jget(r, "world"), *nodes = jget(r, "nodes"), *g = jget(r, "gpus_per_node");
    fprintf(f, " &middot; <span data-k=\"world\" data-v=\"%d\">%d ranks</span> (%d nodes x %d ", w ? w->valueint : 0,
            w ? w->valueint : 0, nodes ? nodes->valueint : 0, g ? g->valueint : 0);
    esc(f, jstr(r, "device"));
    const cJSON *tp = jget(layout, "tp"), *pp = jget(layout, "pp"), *cp = jget(layout, "cp"), *dp = jget(layout, "dp");
    fprintf(f, "), TP%dxPP%dxCP%dxDP%d, %d iterations", tp ? tp->valueint : 0, pp ? pp->valueint : 0,
            cp ? cp->valueint : 0, dp ? dp->valueint : 0,
            jget(r, "train_iters") ? jget(r, "train_iters")->valueint : 0);
    const cJSON *sim = jget(r, "sim_seconds"), *wall = jget(r, "wall_seconds");
    fprintf(f, " &middot; simulated <span data-k=\"sim_seconds\" data-v=\"%.17g\">%.3f s</span>, wall %.3f s</p>\n",
            cJSON_IsNumber(sim) ? sim->valuedouble : 0, cJSON_IsNumber(sim) ? sim->valuedouble : 0,
            cJSON_IsNumber(wall) ? wall->valuedouble : 0);
    fputs("</header>\n", f);
}

static void expectations(FILE *f, const cJSON *r) {
    fputs("<section id=\"expectations\"><h2>Expectations</h2>\n<table><tr><th></th><th>expectation</th>"
          "<th>detail</th></tr>\n",
          f);
    const cJSON *c;
    cJSON_ArrayForEach(c, jget(r, "checks")) {
        const bool ok = jtrue(c, "passed");
        fprintf(f, "<tr class=\"check %s\" data-passed=\"%s\"><td>%s</td><td>", ok ? "pass" : "fail",
                ok ? "true" : "false", ok ? "PASS" : "FAIL");
        esc(f, jstr(c, "name"));
        fputs("</td><td>", f);
        esc(f, jstr(c, "detail"));
        fputs("</td></tr>\n", f);
    }
    fputs("</table></section>\n", f);
}

static void attempts(FILE *f, const cJSON *r) {
    fputs("<section id=\"attempts\"><h2>Attempts</h2>\n<table><tr><th>#</th><th>iterations</th><th>exit</th>"
          "<th>simulated s</th><th>cause</th></tr>\n",
          f);
    const cJSON *a;
    cJSON_ArrayForEach(a, jget(r, "attempts")) {
        fputs("<tr class=\"attempt\">", f);
        num_cell(f, "index", jget(a, "index"), "#%.0f");
        fputs("<td>", f);
        const cJSON *s = jget(a, "start_iteration"), *e = jget(a, "end_iteration");
        fprintf(f, "%.0f &rarr; %.0f</td>", cJSON_IsNumber(s) ? s->valuedouble : 0,
                cJSON_IsNumber(e) ? e->valuedouble : 0);
        num_cell(f, "exit_code", jget(a, "exit_code"), "%.0f");
        num_cell(f, "sim_seconds", jget(a, "sim_seconds"), "%.3f");
        fputs("<td>", f);
        esc(f, jstr(a, "cause"));
        fputs("</td></tr>\n", f);
    }
    fputs("</table></section>\n", f);
}

static void faults(FILE *f, const cJSON *r) {
    fputs("<section id=\"faults\"><h2>Faults</h2>\n", f);
    if (cJSON_GetArraySize(jget(r, "faults")) == 0) {
        fputs("<p>No faults were injected.</p></section>\n", f);
        return;
    }
    fputs("<table><tr><th>#</th><th>fault</th><th>attempt</th><th>fired at s</th><th>detected</th>"
          "<th>attributed</th><th>detect s</th><th>blame</th></tr>\n",
          f);
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, jget(r, "faults")) {
        fprintf(f, "<tr class=\"fault\" data-i=\"%d\"><td>%d</td><td>", i, i + 1);
        esc(f, jstr(x, "description"));
        fputs("</td>", f);
        num_cell(f, "attempt", jget(x, "attempt"), "#%.0f");
        num_cell(f, "fired_at", jget(x, "fired_at"), "%.6f");
        fprintf(f, "<td class=\"%s\">%s</td><td class=\"%s\">%s</td>", jtrue(x, "detected") ? "pass" : "fail",
                jtrue(x, "detected") ? "yes" : "no", jtrue(x, "attributed") ? "pass" : "fail",
                jtrue(x, "attributed") ? "yes" : "no");
        num_cell(f, "detect_seconds", jget(x, "detect_seconds"), "%.3f");
        fputs("<td class=\"blame\">", f);
        esc(f, jstr(x, "diagnosis"));
        fputs("</td></tr>\n", f);
        i++;
    }
    fputs("</table></section>\n", f);
}

/* A campaign's seed as the JSON holds it: a number, or beyond 2^53 its decimal string. */
static void seed_text(FILE *f, const cJSON *seed) {
    if (cJSON_IsString(seed)) esc(f, seed->valuestring);
    else fprintf(f, "%.0f", cJSON_IsNumber(seed) ? seed->valuedouble : 0);
}

/* A campaign: its totals, ok/trials per kind, and every trial with its fault and fate; a failed one
 * with the command that replays it alone. Cells carry their JSON values (data-k/data-v) for the
 * browser test. */
static void campaign(FILE *f, const cJSON *r) {
    const cJSON *c = jget(r, "campaign");
    if (!cJSON_IsObject(c)) return;
    const cJSON *t = jget(c, "trials"), *seed = jget(c, "seed");
    fputs("<section id=\"campaign\"><h2>Campaign</h2>\n<p>", f);
    fprintf(f, "<span data-k=\"trials\" data-v=\"%.0f\">%.0f trials</span>", cJSON_IsNumber(t) ? t->valuedouble : 0,
            cJSON_IsNumber(t) ? t->valuedouble : 0);
    static const char *const totals[] = {"fired", "detected", "attributed", "continuity_ok", "recovered"};
    for (size_t i = 0; i < sizeof totals / sizeof *totals; i++) {
        const cJSON *v = jget(c, totals[i]);
        fprintf(f, ", <span data-k=\"%s\" data-v=\"%.0f\">%.0f %s</span>", totals[i],
                cJSON_IsNumber(v) ? v->valuedouble : 0, cJSON_IsNumber(v) ? v->valuedouble : 0,
                i == 3 ? "bit-identical" : totals[i]);
    }
    const cJSON *wall = jget(c, "wall_seconds"), *each = jget(c, "mean_trial_seconds"), *jobs = jget(c, "jobs");
    fprintf(f, "; %.1f s of wall time, %.2f s a trial, %.0f at a time; drawn from seed ",
            cJSON_IsNumber(wall) ? wall->valuedouble : 0, cJSON_IsNumber(each) ? each->valuedouble : 0,
            cJSON_IsNumber(jobs) ? jobs->valuedouble : 0);
    seed_text(f, seed);
    fputs("</p>\n<table><tr><th>fault kind</th><th>trials</th><th>ok</th></tr>\n", f);
    const cJSON *k;
    cJSON_ArrayForEach(k, jget(c, "per_kind")) {
        const cJSON *n = jget(k, "trials");
        if (!cJSON_IsNumber(n) || n->valuedouble <= 0) continue;
        fputs("<tr class=\"kind\"><td>", f);
        esc(f, k->string);
        fputs("</td>", f);
        num_cell(f, "kind_trials", n, "%.0f");
        num_cell(f, "kind_ok", jget(k, "ok"), "%.0f");
        fputs("</tr>\n", f);
    }
    fputs("</table>\n<table><tr><th>trial</th><th>fault</th><th>from iteration</th><th>detected</th>"
          "<th>attributed</th><th>detect s</th><th>nothing lost</th><th>wall s</th><th>diagnosis</th></tr>\n",
          f);
    const cJSON *x;
    cJSON_ArrayForEach(x, jget(c, "per_trial")) {
        const bool ok = jtrue(x, "ok");
        fprintf(f, "<tr class=\"trial %s\" data-ok=\"%s\">", ok ? "pass" : "fail", ok ? "true" : "false");
        num_cell(f, "trial", jget(x, "trial"), "%.0f");
        fputs("<td>", f);
        esc(f, jstr(x, "description"));
        fputs("</td>", f);
        num_cell(f, "resumed_from", jget(x, "resumed_from"), "%.0f");
        fprintf(f, "<td class=\"%s\">%s</td><td class=\"%s\">%s</td>", jtrue(x, "detected") ? "pass" : "fail",
                jtrue(x, "detected") ? "yes" : "no", jtrue(x, "attributed") ? "pass" : "fail",
                jtrue(x, "attributed") ? "yes" : "no");
        num_cell(f, "detect_seconds", jget(x, "detect_seconds"), "%.3f");
        fprintf(f, "<td class=\"%s\">%s</td>", jtrue(x, "continuity_ok") ? "pass" : "fail",
                jtrue(x, "continuity_ok") ? "yes" : "no");
        num_cell(f, "wall_seconds", jget(x, "wall_seconds"), "%.2f");
        fputs("<td class=\"blame\">", f);
        esc(f, jstr(x, "diagnosis"));
        if (!ok) {
            const cJSON *num = jget(x, "trial");
            fputs("<br><code>scenario run ", f);
            esc(f, jstr(r, "path"));
            fputs(" --campaign-seed ", f);
            seed_text(f, seed);
            fprintf(f, " --trial %.0f</code>", cJSON_IsNumber(num) ? num->valuedouble : 0);
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</table></section>\n", f);
}

/* The data object inside a <script>: "</" written "<\/" so no string in it can close the element. */
static int data_script(FILE *f, const cJSON *d) {
    char *text = cJSON_PrintUnformatted(d);
    if (!text) return -1;
    fputs("<script id=\"report-data\" type=\"application/json\">", f);
    for (const char *p = text; *p; p++) {
        if (p[0] == '<' && p[1] == '/') fputs("<\\", f);
        else fputc(*p, f);
    }
    fputs("</script>\n", f);
    cJSON_free(text);
    return 0;
}

static const char STYLE[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;max-width:1280px;padding:12px 24px;color:#222}"
    "h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:22px 0 6px;border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:3px 6px;text-align:left;"
    "vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}.pass{color:#17702a}"
    ".fail{color:#b3261e;font-weight:600}#verdict{font-size:18px;font-weight:700}.sub{color:#555}"
    "td.blame{font-size:12px;color:#444;max-width:480px}.plots{display:flex;flex-wrap:wrap;gap:16px}"
    ".plot{min-height:120px}.heat{margin:10px 0 18px}.heat canvas{border:1px solid #ccc;cursor:crosshair}"
    ".legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:12px;height:12px;"
    "margin-right:4px;vertical-align:-2px}.note{color:#666;font-size:12px}#tip{position:fixed;pointer-events:none;"
    "background:#fff;border:1px solid #999;padding:2px 6px;font-size:12px;display:none}"
    "pre.license{font-size:11px;white-space:pre-wrap;background:#f6f6f6;padding:8px}";

/* uPlot's three files from its npm package; NULL with err naming the folder and the fix. */
static char *uplot_file(const char *dir, const char *name, char *err, size_t errlen) {
    char path[REPORT_HTML_PATH];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char why[REPORT_HTML_PATH + 128];
    char *text = report_html_slurp(path, NULL, why, sizeof why);
    if (!text)
        snprintf(err, errlen,
                 "the page inlines uPlot, and %s: install it with ci/deps.sh (npm, into build/npm), or point "
                 "TWINRUN_UPLOT_DIR at an unpacked uplot package",
                 why);
    return text;
}

int report_html(FILE *f, const report_html_input *in, char *err, size_t errlen) {
    if (!f || !in || !in->report_json) {
        snprintf(err, errlen, "report_html: no report");
        return -1;
    }
    const char *dir = in->uplot_dir ? in->uplot_dir : getenv("TWINRUN_UPLOT_DIR");
    if (!dir || !dir[0]) dir = TWINRUN_NPM_DIR "/node_modules/uplot";
    char *js = uplot_file(dir, "dist/uPlot.iife.min.js", err, errlen);
    char *css = js ? uplot_file(dir, "dist/uPlot.min.css", err, errlen) : NULL;
    char *license = css ? uplot_file(dir, "LICENSE", err, errlen) : NULL;
    char *pkg = license ? uplot_file(dir, "package.json", err, errlen) : NULL;
    cJSON *d = pkg ? report_html_data(in->report_json, in->work_dir, in->compare, err, errlen) : NULL;
    if (!d) {
        free(js), free(css), free(license), free(pkg);
        return -1;
    }
    cJSON *pj = cJSON_Parse(pkg);
    const char *version = jstr(pj, "version");
    const cJSON *r = jget(d, "report");
    fputs(PAGE_MARK "<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>scenario ", f);
    esc(f, jstr(r, "name"));
    fprintf(f, "</title>\n<style>%s</style>\n<style>%s</style>\n</head><body>\n", css, STYLE);
    header(f, r);
    expectations(f, r);
    fputs("<section id=\"curves\"><h2>Loss and grad norm per iteration</h2>\n<p class=\"note\">The fault-free run "
          "against every attempt; a ring marks where an attempt resumed from its checkpoint. Drag to zoom, "
          "double-click to reset.</p>\n<div class=\"plots\"><div id=\"plot-loss\" class=\"plot\"></div>"
          "<div id=\"plot-grad\" class=\"plot\"></div></div></section>\n",
          f);
    campaign(f, r);
    attempts(f, r);
    fputs("<section id=\"timeline\"><h2>Ranks over simulated time</h2>\n<div class=\"legend\" id=\"heat-legend\">"
          "</div>\n<p class=\"note\">One row per rank, one map per attempt. Quiet stretches (no rank changed "
          "state) are drawn as breaks (hatched columns) with their length on the axis. Faults: a red mark where "
          "and when one fired, a dashed line when it was detected. Drag a rectangle to zoom, double-click to "
          "reset.</p>\n<div id=\"heatmaps\"></div></section>\n",
          f);
    faults(f, r);
    fputs("<section id=\"memory\"><h2>Device memory per pipeline stage</h2>\n<div id=\"memory-plot\"></div>"
          "</section>\n",
          f);
    fputs("<footer><h2>About this page</h2><p class=\"note\">Written by <code>scenario</code> (twinrun); plots "
          "drawn with <a href=\"https://github.com/leeoniya/uPlot\">uPlot</a> ",
          f);
    esc(f, version);
    fputs(", inlined with its license:</p>\n<pre class=\"license\" id=\"uplot-license\">", f);
    esc(f, license);
    fputs("</pre></footer>\n<div id=\"tip\"></div>\n<div id=\"js-errors\" hidden></div>\n", f);
    /* errors of the page's script, where a headless browser's DOM dump shows them */
    fputs("<script>window.addEventListener('error',function(e){var d=document.getElementById('js-errors');"
          "d.hidden=false;d.textContent+='error: '+e.message+'\\n';});</script>\n",
          f);
    int rc = data_script(f, d);
    fputs("<script>", f);
    fputs(js, f);
    fputs("</script>\n<script>", f);
    fputs(report_html_js, f);
    fputs("</script>\n</body></html>\n", f);
    if (rc || ferror(f)) rc = -1, snprintf(err, errlen, "cannot write the page (out of memory or disk)");
    cJSON_Delete(pj), cJSON_Delete(d);
    free(js), free(css), free(license), free(pkg);
    return rc;
}

/* Whether path holds a page report_html wrote (its first bytes are PAGE_MARK). */
static bool is_ours(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char head[sizeof PAGE_MARK];
    const size_t n = fread(head, 1, sizeof PAGE_MARK - 1, f);
    fclose(f);
    return n == sizeof PAGE_MARK - 1 && !memcmp(head, PAGE_MARK, n);
}

int report_html_write(const char *path, const report_html_input *in, char *err, size_t errlen) {
    tr_safe_file s;
    if (tr_safe_open(&s, path, is_ours(path), "(it is not a page scenario wrote: move it away or pick another name)",
                     err, errlen))
        return -1;
    if (report_html(s.f, in, err, errlen)) {
        tr_safe_abort(&s);
        return -1;
    }
    return tr_safe_commit(&s, err, errlen);
}
