/* Where a job's data comes from, byte by byte: for the scenario runner's data faults, which damage the
 * very token a given iteration reads (docs/faults.md, data_corrupt with damage token). */
#ifndef TWINRUN_ENGINE_DATA_DATA_ORIGIN_H
#define TWINRUN_ENGINE_DATA_DATA_ORIGIN_H

#include <stddef.h>
#include <stdint.h>

struct tr_config;

/* The middle token of the first train sample of iteration `iteration` (1-based; the sample that
 * data-parallel rank 0 reads first there, Megatron's sampler at consumed (iteration - 1) x the global
 * batch): the file it is read from (<prefix>.bin, into bin_path), its byte offset there, the
 * file's Megatron dtype code and the token's size in bytes. The middle token, because a sample's first and last tokens are also
 * its neighbours' (the label of one is the input of the next). Opens cfg's data as the job does (its
 * index cache included). 0, or -1 with err (mock data, an iteration past the train samples). */
int tr_data_token_origin(const struct tr_config *cfg, int64_t iteration, char *bin_path, size_t pathlen,
                         int64_t *byte_offset, int *dtype_code, int *itemsize, char *err, size_t errlen);

#endif
