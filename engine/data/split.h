/* Megatron's --split: "99,1,0" -> normalised weights -> split matrix -> document ranges.
 * Numbers are the runs of [.0-9] in the string (anything else separates them), padded with zeros
 * to three and normalised by their sum; bounds are cumulative sums starting from the integer 0;
 * a split whose bounds do not grow is absent. Ranges are round-half-to-even(bound * N). */
#ifndef TWINRUN_ENGINE_DATA_SPLIT_H
#define TWINRUN_ENGINE_DATA_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { TR_SPLIT_TRAIN = 0, TR_SPLIT_VALID = 1, TR_SPLIT_TEST = 2, TR_NSPLITS = 3 };

typedef struct tr_split {
    double weight[TR_NSPLITS]; /* normalised */
    bool present[TR_NSPLITS];  /* the matrix entry is not None */
    double lo[TR_NSPLITS], hi[TR_NSPLITS];
} tr_split;

const char *tr_split_name(int split); /* "train", "valid", "test" */
int tr_split_parse(const char *text, tr_split *out, char *err, size_t errlen);
/* Document range [beg, end) of split s among n documents. */
void tr_split_range(const tr_split *sp, int s, int64_t n, int64_t *beg, int64_t *end);

#endif
