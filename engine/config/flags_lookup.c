/* Finding a flag by name, and the "did you mean" for a misspelt one. */
#include <stdint.h>
#include <string.h>

#include "config/flags.h"

const char *tr_flag_section_title(tr_flag_section s) {
    static const char *const titles[TR_SEC_COUNT] = {
        [TR_SEC_MODEL] = "Model",
        [TR_SEC_TRAINING] = "Training",
        [TR_SEC_OPTIMIZER] = "Optimizer and learning rate",
        [TR_SEC_PARALLEL] = "Parallelism",
        [TR_SEC_DATA] = "Data",
        [TR_SEC_LOGGING] = "Evaluation, logging and profiling",
        [TR_SEC_CHECKPOINT] = "Checkpoints",
        [TR_SEC_PERF] = "Performance switches of Megatron's PyTorch stack",
        [TR_SEC_TWINRUN] = "twinrun's own",
    };
    return (unsigned)s < TR_SEC_COUNT ? titles[s] : "?";
}

const char *tr_flag_status_name(tr_flag_status s) {
    switch (s) {
    case TR_ST_IMPLEMENTED: return "implemented";
    case TR_ST_ACCEPTED: return "accepted, no effect";
    case TR_ST_WARNED: return "accepted, ignored with a warning";
    case TR_ST_REJECTED: return "rejected";
    }
    return "?";
}

const tr_flag *tr_flag_find(const char *name, size_t len) {
    size_t n;
    const tr_flag *t = tr_flags(&n);
    for (size_t i = 0; i < n; i++)
        if (strlen(t[i].name) == len && memcmp(t[i].name, name, len) == 0) return &t[i];
    return NULL;
}

/* Levenshtein distance with one rolling row; names are short, so a fixed row suffices and longer
 * input is measured on its first TR_EDIT_MAX bytes (it is then far from every flag anyway). */
#define TR_EDIT_MAX 96
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb) {
    size_t row[TR_EDIT_MAX + 1];
    if (la > TR_EDIT_MAX) la = TR_EDIT_MAX;
    if (lb > TR_EDIT_MAX) lb = TR_EDIT_MAX;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const tr_flag *tr_flag_suggest(const char *name, size_t len) {
    size_t n, best = SIZE_MAX;
    const tr_flag *t = tr_flags(&n), *hit = NULL;
    /* a cut-short name (--micro-batch) means the shortest flag it begins */
    if (len >= 6)
        for (size_t i = 0; i < n; i++)
            if (strlen(t[i].name) > len && memcmp(t[i].name, name, len) == 0 &&
                (!hit || strlen(t[i].name) < strlen(hit->name)))
                hit = &t[i];
    if (hit) return hit;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(name, len, t[i].name, strlen(t[i].name));
        if (d < best) best = d, hit = &t[i];
    }
    /* Only a plausible typo earns a suggestion: a third of the name, at least 2 edits. */
    size_t limit = len / 3 > 2 ? len / 3 : 2;
    return best <= limit ? hit : NULL;
}
