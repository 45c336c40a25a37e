/* A progress bar for a person watching a long rehearsal. Logs and CI files get nothing: a bar
 * redrawn with carriage returns is noise anywhere but a terminal. */
#include <unistd.h>

#include "runner/report.h"

#define BAR 30

void report_progress(FILE *f, const char *what, int64_t done, int64_t total) {
    if (!f || !isatty(fileno(f))) return;
    if (done < 0) done = 0;
    if (total > 0 && done > total) done = total;
    const int filled = total > 0 ? (int)(done * BAR / total) : 0;
    char bar[BAR + 1];
    for (int i = 0; i < BAR; i++) bar[i] = i < filled ? '#' : '-';
    bar[BAR] = '\0';
    /* \033[K clears what a longer previous line left behind */
    fprintf(f, "\r[%s] %s %lld/%lld\033[K", bar, what ? what : "", (long long)done, (long long)total);
    if (done == total) fputc('\n', f);
    fflush(f);
}

void report_progress_line(FILE *f, double elapsed, int64_t done, int64_t total, const char *what) {
    if (!f) return;
    if (done > 0 && total > done)
        fprintf(f, "  [%.1f s, about %.0f s left] %s\n", elapsed, elapsed / (double)done * (double)(total - done),
                what ? what : "");
    else fprintf(f, "  [%.1f s] %s\n", elapsed, what ? what : "");
    fflush(f);
}
