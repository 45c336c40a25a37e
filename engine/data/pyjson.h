/* Text exactly as Python's json.dumps(obj, indent=4) writes it, for Megatron's dataset
 * descriptions: their MD5 names the cache files, so every byte matters (float repr, spacing,
 * ensure_ascii escapes). Build a document with the calls below; errors (out of memory) stick. */
#ifndef TWINRUN_ENGINE_DATA_PYJSON_H
#define TWINRUN_ENGINE_DATA_PYJSON_H

#include <stddef.h>
#include <stdint.h>

#define TR_PYJSON_MAX_DEPTH 16

typedef struct tr_pyjson {
    char *buf;
    size_t len, cap;
    int depth;
    int items[TR_PYJSON_MAX_DEPTH]; /* [depth] values written so far in each open container */
    int after_key;                  /* the next value follows a "key": */
    int failed;
} tr_pyjson;

void tr_pyjson_init(tr_pyjson *j);
void tr_pyjson_free(tr_pyjson *j);
void tr_pyjson_obj_begin(tr_pyjson *j);
void tr_pyjson_obj_end(tr_pyjson *j);
void tr_pyjson_arr_begin(tr_pyjson *j);
void tr_pyjson_arr_end(tr_pyjson *j);
void tr_pyjson_key(tr_pyjson *j, const char *key);
void tr_pyjson_str(tr_pyjson *j, const char *s); /* NULL writes null */
void tr_pyjson_int(tr_pyjson *j, int64_t v);
void tr_pyjson_float(tr_pyjson *j, double v);
void tr_pyjson_null(tr_pyjson *j);
void tr_pyjson_bool(tr_pyjson *j, int v);
/* Re-emits a JSON text (an object, usually a tokenizer's identifiers) in this style; numbers
 * without '.', 'e' or 'E' stay integers. Returns 0 or -1 if the text is not valid JSON. */
int tr_pyjson_raw(tr_pyjson *j, const char *json_text);

/* Python's repr(float): the shortest digits that round-trip, '1e-05' / '0.99' / '1.0' style. */
void tr_pyjson_float_repr(double v, char *out, size_t cap);

#endif
