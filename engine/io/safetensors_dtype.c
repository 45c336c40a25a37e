/* safetensors dtype strings and element sizes (the subset twinrun reads and writes). */
#include <string.h>

#include "io/safetensors.h"

typedef struct st_dtype_info {
    st_dtype dt;
    const char *name;
    size_t size;
} st_dtype_info;

/* Indexed by st_dtype. */
static const st_dtype_info ST_DTYPES[ST_NUM_DTYPES] = {
    {ST_F32, "F32", 4}, {ST_BF16, "BF16", 2}, {ST_F16, "F16", 2},   {ST_F64, "F64", 8},
    {ST_I32, "I32", 4}, {ST_I64, "I64", 8},   {ST_U8, "U8", 1},     {ST_I8, "I8", 1},
    {ST_I16, "I16", 2}, {ST_U16, "U16", 2},   {ST_BOOL, "BOOL", 1},
};

static int st_dtype_valid(st_dtype dt) { return (int)dt >= 0 && (int)dt < ST_NUM_DTYPES; }

const char *st_dtype_name(st_dtype dt) { return st_dtype_valid(dt) ? ST_DTYPES[dt].name : "?"; }

size_t st_dtype_size(st_dtype dt) { return st_dtype_valid(dt) ? ST_DTYPES[dt].size : 0; }

int st_dtype_parse(const char *s, st_dtype *out) {
    for (int i = 0; i < ST_NUM_DTYPES; i++) {
        if (strcmp(s, ST_DTYPES[i].name) == 0) {
            *out = ST_DTYPES[i].dt;
            return 0;
        }
    }
    return -1;
}
