/* The start-up banner Megatron's users read before anything trains: which build, the world and its
 * parallel sizes, every argument (Megatron's "arguments" block: name, dots, value, sorted), the padded
 * vocabulary, and the parameters on each (tensor, pipeline) model-parallel rank. */
#ifndef TWINRUN_ENGINE_TRAIN_BANNER_H
#define TWINRUN_ENGINE_TRAIN_BANNER_H

#include <stdio.h>

#include "twinrun/config.h"

/* cfg after train_prepare_config, for a job of `world` ranks; `program` names the build line. */
void train_banner_print(FILE *out, const char *program, const tr_config *cfg, int world);

#endif
