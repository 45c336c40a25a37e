/* One line of the preprocessing input: a JSON object {"ids": [1, 2, ...]} of token ids that are
 * already tokenized (the `dataset preprocess` command). */
#ifndef TWINRUN_ENGINE_DATA_JSONL_H
#define TWINRUN_ENGINE_DATA_JSONL_H

#include <stddef.h>
#include <stdint.h>

/* Parses line; the ids go to *ids (grown with realloc; *cap entries, always room for one more
 * token after them, for an appended eod). Ids must be integers in [0, vocab) (vocab <= 0: any
 * non-negative integer up to 2^53). Returns the count, or -1 with err. */
int64_t tr_jsonl_ids(const char *line, int64_t **ids, int64_t *cap, int64_t vocab, char *err, size_t errlen);

#endif
