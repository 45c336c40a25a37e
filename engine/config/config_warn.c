/* The warnings list in tr_config: complete lines the caller prints once (see config.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/flags.h"

void tr_config_warn(tr_config *cfg, const char *fmt, ...) {
    char line[512];
    int k = snprintf(line, sizeof line, "twinrun: warning: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + k, sizeof line - (size_t)k - 1, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    cfg->warnings[sizeof cfg->warnings - 1] = 0; /* a caller-built config may hold anything */
    if (strstr(cfg->warnings, line)) return;     /* a repeated flag warns once */

    size_t used = strnlen(cfg->warnings, sizeof cfg->warnings);
    static const char full[] = "twinrun: warning: (more warnings dropped)\n";
    if (used + strlen(line) + sizeof full > sizeof cfg->warnings) {
        /* keep room for the marker so the reader knows the list is cut short */
        if (!strstr(cfg->warnings, full) && used + sizeof full <= sizeof cfg->warnings)
            memcpy(cfg->warnings + used, full, sizeof full);
        return;
    }
    memcpy(cfg->warnings + used, line, strlen(line) + 1);
    cfg->n_warnings++;
}
