#include "core/majority.h"

uint64_t tr_majority_u64(const uint64_t *v, const bool *skip, int n, bool *has_majority) {
    uint64_t cand = 0, first = 0;
    int votes = 0, counted = 0;
    bool any = false;
    for (int i = 0; i < n; i++) {
        if (skip && skip[i]) continue;
        if (!any) first = v[i], any = true;
        if (votes == 0) cand = v[i], votes = 1;
        else votes += v[i] == cand ? 1 : -1;
    }
    int held = 0;
    for (int i = 0; i < n; i++)
        if (!(skip && skip[i])) held += v[i] == cand, counted++;
    *has_majority = any && 2 * held > counted;
    return *has_majority ? cand : first;
}
