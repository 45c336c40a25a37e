/* {"ids": [...]} lines (see jsonl.h). cJSON keeps numbers as doubles, so ids above 2^53 cannot be
 * told apart and are refused. */
#include "data/jsonl.h"

#include <stdlib.h>

#include <cjson/cJSON.h>

#include "twinrun/err.h"

static int grow(int64_t **ids, int64_t *cap, int64_t need) {
    if (need <= *cap) return 0;
    int64_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    int64_t *ni = realloc(*ids, (size_t)nc * sizeof *ni);
    if (!ni) return -1;
    *ids = ni;
    *cap = nc;
    return 0;
}

int64_t tr_jsonl_ids(const char *line, int64_t **ids, int64_t *cap, int64_t vocab, char *err, size_t errlen) {
    cJSON *j = cJSON_Parse(line);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return tr_errf(err, errlen, "not a JSON object (expected {\"ids\": [1, 2, ...]})");
    }
    cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "ids");
    if (!cJSON_IsArray(a)) {
        cJSON_Delete(j);
        return tr_errf(err, errlen, "no \"ids\" array (expected {\"ids\": [1, 2, ...]})");
    }
    int64_t n = 0;
    const double limit = vocab > 0 ? (double)vocab : 9007199254740992.0;
    for (cJSON *e = a->child; e; e = e->next, n++) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1.0;
        if (!cJSON_IsNumber(e) || !(v >= 0.0 && v < limit) || v != (double)(int64_t)v) {
            cJSON_Delete(j);
            return tr_errf(err, errlen, "ids[%lld] is not a token id in [0, %.0f)", (long long)n, limit);
        }
        if (grow(ids, cap, n + 2)) {
            cJSON_Delete(j);
            return tr_errf(err, errlen, "out of memory");
        }
        (*ids)[n] = (int64_t)v;
    }
    cJSON_Delete(j);
    if (grow(ids, cap, n + 2)) return tr_errf(err, errlen, "out of memory");
    return n;
}
