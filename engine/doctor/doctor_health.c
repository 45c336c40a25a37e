/* The `health` check: each rank's GPU as its driver reports it (dev_get_health: NVML on the CUDA build;
 * nothing on the twin and on MUSA), carried to rank 0 as lines of the rank's facts and judged there.
 * Backend-neutral on purpose: the readings are plain data, so the twin's tests drive this file with a
 * fake NVML's readings and with any mix of ranks.
 *
 * The rule (docs/doctor.md): an uncorrectable ECC error since the driver loaded (NVML's volatile
 * counter) fails: the card returned bad data and must be drained and checked. Uncorrectable errors only
 * in the lifetime (aggregate) counter warn: an old event, usually retired or remapped memory, still to
 * be looked at; where the volatile counter is not reported the aggregate one fails, as nothing says the
 * errors are old. Above 85 C warns. A GPU the driver does not report on is skipped with the reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor_internal.h"

#define HOT_C 85
#define LISTED 3 /* GPUs named in one detail; the rest are counted */

void doctor_health_format(const dev_health *h, char *out, size_t len) {
    size_t n = 0;
#define PUT(...)                                                                                                       \
    do {                                                                                                               \
        if (n < len) n += (size_t)snprintf(out + n, len - n, __VA_ARGS__);                                             \
    } while (0)
    out[0] = 0;
    if (!h->reported) {
        PUT("health=not reported: %s\n", h->reason);
        return;
    }
    PUT("health=reported\ngpu=%d\npci=%s\n", h->index, h->pci_bus_id);
    if (h->has_ecc_volatile) PUT("ecc_volatile=%llu\n", h->ecc_volatile);
    if (h->has_ecc_aggregate) PUT("ecc_aggregate=%llu\n", h->ecc_aggregate);
    if (h->has_temperature) PUT("temperature=%d\n", h->temperature_c);
    if (h->missing[0]) PUT("health_missing=%s\n", h->missing);
#undef PUT
    if (n >= len) out[0] = 0; /* all or nothing: rank 0 must not read half the readings */
}

void doctor_health_parse(const char *text, dev_health *h) {
    memset(h, 0, sizeof *h);
    h->index = -1;
    char v[256];
    if (!doctor_fact(text, "health", v, sizeof v)) {
        snprintf(h->reason, sizeof h->reason, "this rank sent no health readings");
        return;
    }
    if (strcmp(v, "reported") != 0) {
        const char *p = strncmp(v, "not reported: ", 14) ? v : v + 14;
        snprintf(h->reason, sizeof h->reason, "%.*s", (int)sizeof h->reason - 1, p);
        return;
    }
    h->reported = true;
    if (doctor_fact(text, "gpu", v, sizeof v)) h->index = atoi(v);
    doctor_fact(text, "pci", h->pci_bus_id, sizeof h->pci_bus_id);
    if ((h->has_ecc_volatile = doctor_fact(text, "ecc_volatile", v, sizeof v))) h->ecc_volatile = strtoull(v, NULL, 10);
    if ((h->has_ecc_aggregate = doctor_fact(text, "ecc_aggregate", v, sizeof v)))
        h->ecc_aggregate = strtoull(v, NULL, 10);
    if ((h->has_temperature = doctor_fact(text, "temperature", v, sizeof v))) h->temperature_c = atoi(v);
    doctor_fact(text, "health_missing", h->missing, sizeof h->missing);
}

/* "node 3 (ranks 24-31) GPU 5 (PCI 0000:9B:00.0, rank 29)" */
static void name_gpu(const doctor_report *r, int rank, const dev_health *h, char *out, size_t len) {
    const int node = rank / r->gpus_per_node;
    int a, b;
    doctor_node_ranks(r, node, &a, &b);
    char idx[16] = "?";
    if (h->index >= 0) snprintf(idx, sizeof idx, "%d", h->index);
    snprintf(out, len, "node %d (ranks %d-%d) GPU %s (PCI %s, rank %d)", node, a, b, idx,
             h->pci_bus_id[0] ? h->pci_bus_id : "?", rank);
}

/* a rank whose GPU an earlier rank of its node already reported (ranks sharing a card) */
static bool seen_before(const doctor_report *r, const dev_health *all, int rank) {
    if (!all[rank].pci_bus_id[0]) return false;
    const int first = rank / r->gpus_per_node * r->gpus_per_node;
    for (int k = first; k < rank; k++)
        if (all[k].reported && !strcmp(all[k].pci_bus_id, all[rank].pci_bus_id)) return true;
    return false;
}

typedef struct finding {
    int count, first_rank;
    char text[480]; /* LISTED GPUs of ~150 characters */
    size_t used;
} finding;

static void note(finding *f, const doctor_report *r, const dev_health *all, int rank, const char *what) {
    if (f->count++ == 0) f->first_rank = rank;
    if (f->count > LISTED) return;
    char who[160];
    name_gpu(r, rank, &all[rank], who, sizeof who);
    if (f->used < sizeof f->text)
        f->used +=
            (size_t)snprintf(f->text + f->used, sizeof f->text - f->used, "%s%s %s", f->used ? "; " : "", who, what);
}

static const char *more(const finding *f, char *buf, size_t len) {
    if (f->count <= LISTED) return "";
    snprintf(buf, len, " (and %d more GPU%s)", f->count - LISTED, f->count - LISTED == 1 ? "" : "s");
    return buf;
}

void doctor_health_judge(doctor_report *r, const dev_health *all) {
    const char *title = "GPU health (ECC, temperature)";
    finding bad = {0}, old = {0}, hot = {0};
    int reported = 0, gpus = 0, unreported = 0, first_unreported = -1, with_ecc = 0, with_temp = 0, partial = -1;
    int hottest = -1;
    for (int rk = 0; rk < r->world; rk++) {
        const dev_health *h = &all[rk];
        if (!h->reported) {
            if (unreported++ == 0) first_unreported = rk;
            continue;
        }
        reported++;
        if (seen_before(r, all, rk)) continue;
        gpus++;
        with_ecc += h->has_ecc_volatile || h->has_ecc_aggregate;
        with_temp += h->has_temperature;
        if (h->missing[0] && partial < 0) partial = rk;
        char what[160];
        if (h->has_ecc_volatile && h->ecc_volatile > 0) {
            char life[32] = "not reported";
            if (h->has_ecc_aggregate) snprintf(life, sizeof life, "%llu", h->ecc_aggregate);
            snprintf(what, sizeof what, "reports %llu uncorrectable ECC error%s since the driver loaded (lifetime: %s)",
                     h->ecc_volatile, h->ecc_volatile == 1 ? "" : "s", life);
            note(&bad, r, all, rk, what);
        } else if (h->has_ecc_aggregate && h->ecc_aggregate > 0) {
            snprintf(what, sizeof what, "reports %llu uncorrectable ECC error%s in its lifetime (%s)", h->ecc_aggregate,
                     h->ecc_aggregate == 1 ? "" : "s",
                     h->has_ecc_volatile ? "none since the driver loaded" : "since the driver loaded: not reported");
            note(h->has_ecc_volatile ? &old : &bad, r, all, rk, what);
        }
        if (h->has_temperature && h->temperature_c > HOT_C) {
            snprintf(what, sizeof what, "is at %d C", h->temperature_c);
            note(&hot, r, all, rk, what);
        }
        if (h->has_temperature && (hottest < 0 || h->temperature_c > all[hottest].temperature_c)) hottest = rk;
    }
    char buf[64], who[160];
    if (reported == 0) {
        doctor_add(r, "health", title, DOCTOR_SKIP, -1,
                   "not reported (%s): read them on each node with nvidia-smi -q -d ECC,TEMPERATURE or mthreads-gmi",
                   all[first_unreported].reason);
        return;
    }
    if (with_ecc == 0 && with_temp == 0) {
        name_gpu(r, partial >= 0 ? partial : 0, &all[partial >= 0 ? partial : 0], who, sizeof who);
        doctor_add(r, "health", title, DOCTOR_SKIP, -1,
                   "the driver reports neither ECC errors nor temperature for these GPUs (%s: %s): read them with "
                   "nvidia-smi -q -d ECC,TEMPERATURE",
                   who, all[partial >= 0 ? partial : 0].missing);
        return;
    }
    if (bad.count) {
        const int node = bad.first_rank / r->gpus_per_node;
        const dev_health *h = &all[bad.first_rank];
        char idx[16] = "<index>";
        if (h->index >= 0) snprintf(idx, sizeof idx, "%d", h->index);
        doctor_add(r, "health", title, DOCTOR_FAIL, node,
                   "%s%s: its memory returned data it could not correct: drain node %d from the hostfile and have the "
                   "GPU checked (nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER -i %s; a pending retirement or "
                   "remap needs a GPU reset, nvidia-smi -r -i %s, or a reboot; errors that come back mean a new card)",
                   bad.text, more(&bad, buf, sizeof buf), node, idx, idx);
        return;
    }
    if (hot.count || old.count) {
        const finding *first = hot.count ? &hot : &old;
        char text[1400]; /* both findings; doctor_add keeps what fits the check's detail */
        size_t n = 0;
        if (hot.count)
            n +=
                (size_t)snprintf(text + n, sizeof text - n,
                                 "%s%s: above %d C: check the node's cooling (fans, airflow, inlet temperature) before "
                                 "a long job; a hot GPU lowers its clocks and slows every rank with it",
                                 hot.text, more(&hot, buf, sizeof buf), HOT_C);
        if (old.count && n < sizeof text)
            n += (size_t)snprintf(text + n, sizeof text - n,
                                  "%s%s%s: look at its retired pages and remapped rows (nvidia-smi -q -d "
                                  "PAGE_RETIREMENT,ROW_REMAPPER) before trusting it with a long job",
                                  n ? "; " : "", old.text, more(&old, buf, sizeof buf));
        doctor_add(r, "health", title, DOCTOR_WARN, first->first_rank / r->gpus_per_node, "%s", text);
        return;
    }
    char detail[1000];
    size_t n = (size_t)snprintf(detail, sizeof detail, "%d GPU%s: no uncorrectable ECC errors (%d report ECC)", gpus,
                                gpus == 1 ? "" : "s", with_ecc);
    if (hottest >= 0) {
        name_gpu(r, hottest, &all[hottest], who, sizeof who);
        n += (size_t)snprintf(detail + n, sizeof detail - n, "; hottest %d C, %s", all[hottest].temperature_c, who);
    }
    if (partial >= 0 && n < sizeof detail) {
        name_gpu(r, partial, &all[partial], who, sizeof who);
        n += (size_t)snprintf(detail + n, sizeof detail - n, "; not reported by %s: %s", who, all[partial].missing);
    }
    if (unreported && n < sizeof detail)
        snprintf(detail + n, sizeof detail - n, "; %d rank%s reported nothing (rank %d: %s)", unreported,
                 unreported == 1 ? "" : "s", first_unreported, all[first_unreported].reason);
    doctor_add(r, "health", title, DOCTOR_PASS, -1, "%s", detail);
}
