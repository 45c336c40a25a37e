/* Who is running: the twin in progress (one per process, single-threaded) or the implicit
 * rank 0 that programs without twin_run use. Mutable globals are allowed in sim/ (not in
 * engine/): they are the "hardware" the engine runs on. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "sched_internal.h"
#include "twinrun/err.h"

static twin_sched *g_sched;
static twin_rank g_implicit = {.id = 0, .state = RANK_RUNNABLE, .deadline = INFINITY, .watchdog_s = 600.0};
static struct coll_registry *g_implicit_registry;

twin_sched *twin_sched_get(void) { return g_sched; }
void twin_sched_set(twin_sched *s) { g_sched = s; }
const twin_remote *twin_remote_get(void) { return g_sched ? g_sched->remote : NULL; }

twin_rank *twin_self(void) {
    if (!g_sched) return &g_implicit;
    TR_CHECK(g_sched->current != NULL, "twin call from the scheduler itself, outside any rank");
    return g_sched->current;
}

int twin_world(void) { return g_sched ? g_sched->world : 1; }
struct coll_registry **twin_registry(void) {
    return g_sched ? &g_sched->groups : &g_implicit_registry;
}

const twin_device_spec *twin_spec(void) { return g_sched ? g_sched->spec : twin_device_spec_find("H100"); }
int twin_gpus_per_node(void) { return g_sched ? g_sched->opt.gpus_per_node : 8; }

uint64_t twin_mix64(uint64_t x) {
    /* splitmix64's finaliser: a bijection with good avalanche, so nearby keys give unrelated values */
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

double twin_jitter(uint64_t key) {
    if (!g_sched || g_sched->opt.cost_jitter <= 0) return 1.0;
    uint64_t u = twin_mix64(key ^ twin_mix64(g_sched->opt.seed));
    return 1.0 + g_sched->opt.cost_jitter * (double)(u >> 11) * 0x1.0p-53;
}

bool twin_logging(void) { return g_sched && g_sched->opt.event_log; }

void twin_log(const char *fmt, ...) {
    if (!twin_logging()) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(g_sched->opt.event_log, fmt, ap);
    va_end(ap);
    fputc('\n', g_sched->opt.event_log);
}

void twin_report(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (g_sched && g_sched->report_stream) {
        vfprintf(g_sched->report_stream, fmt, ap);
        fputc('\n', g_sched->report_stream);
    } else {
        /* implicit rank: a report has no reader but the person at the terminal */
        fputs("twinrun: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
    va_end(ap);
}

/* ---- the in-rank API of twin.h ------------------------------------------------------------ */
bool twin_active(void) { return g_sched != NULL; }
int twin_rank_id(void) { return twin_self()->id; }
int twin_world_size(void) { return twin_world(); }
double twin_now(void) { return twin_self()->now; }

uint64_t twin_rand(void) {
    twin_rank *r = twin_self();
    r->rng += 0x9e3779b97f4a7c15ULL;
    return twin_mix64(r->rng);
}

void twin_set_watchdog(double seconds) {
    TR_CHECK(seconds >= 0 && isfinite(seconds), "twin_set_watchdog: timeout must be finite and >= 0 (0 disables)");
    twin_self()->watchdog_s = seconds;
}
