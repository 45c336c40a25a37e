/* Converting one flag's value text into its tr_config field, with Megatron's types and twinrun's
 * ranges. Private to engine/config. */
#ifndef TWINRUN_ENGINE_CONFIG_ARGS_VALUE_H
#define TWINRUN_ENGINE_CONFIG_ARGS_VALUE_H

#include <stddef.h>

#include "config/flags.h"

/* Checks `value` against f's kind, range or choices and stores it (when f has a field).
 * For TR_K_INT, _INT64, _U64, _DOUBLE, _STRING and _ENUM. Returns 0 or -1 with err. */
int tr_flag_store_value(tr_config *cfg, const tr_flag *f, const char *value, char *err, size_t errlen);

/* "at least 1", "in (0, 1]" ...: the range as the error messages and --help show it; "" if none. */
void tr_flag_range_text(const tr_flag *f, char *buf, size_t len);

/* "a, b, c": the choices of an enum flag. */
void tr_flag_choices_text(const tr_flag *f, char *buf, size_t len);

#endif
