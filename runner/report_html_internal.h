/* Private to the HTML report's files (report_html.c, report_html_data.c). */
#ifndef TWINRUN_RUNNER_REPORT_HTML_INTERNAL_H
#define TWINRUN_RUNNER_REPORT_HTML_INTERNAL_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "runner/report.h"

#define REPORT_HTML_PATH 4200

/* A whole file, NUL-terminated (*len without the NUL; len may be NULL); NULL with err. */
char *report_html_slurp(const char *path, size_t *len, char *err, size_t errlen);

/* What the page draws, as one object: "report" (the JSON report, parsed), "reference_metrics" and
 * "attempt_metrics" ([[iteration, lm_loss, grad_norm], ...] or null), "heat" (one per attempt traced),
 * "compare" ({path, metrics} or null), "memory" (per stage, from job.log). work may be NULL (the
 * report alone). NULL with err on a report that is not one, a metrics file or trace that cannot be read. */
cJSON *report_html_data(const char *report_json, const char *work, const char *compare, char *err, size_t errlen);

/* The page's own script (runner/report_html.js, embedded at build time). */
extern const char report_html_js[];

#endif
