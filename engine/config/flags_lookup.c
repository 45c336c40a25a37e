/* Finding a flag by name, and the "did you mean" for a misspelt one. */
#include <stdint.h>
#include <string.h>

#include "config/flags.h"
#include "core/text.h"

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
    case TR_ST_ZERO_ONLY: return "only 0: another value is ignored with a warning";
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
        size_t d = tr_edit_distance(name, len, t[i].name, strlen(t[i].name));
        if (d < best) best = d, hit = &t[i];
    }
    /* Only a plausible typo earns a suggestion: a third of the name, at least 2 edits. */
    size_t limit = len / 3 > 2 ? len / 3 : 2;
    return best <= limit ? hit : NULL;
}
