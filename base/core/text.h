/* Small text helpers shared by every parser that names the closest key or refuses a flag-like value. */
#ifndef TWINRUN_BASE_CORE_TEXT_H
#define TWINRUN_BASE_CORE_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Levenshtein distance of a[0..la) and b[0..lb); names are short, so input is measured on its first
 * TR_EDIT_MAX bytes (longer input is far from every name anyway). */
#define TR_EDIT_MAX 96
size_t tr_edit_distance(const char *a, size_t la, const char *b, size_t lb);

/* A token argparse would take for an option: "-x..." or "--x", but not a negative number or a lone "-". */
bool tr_looks_like_flag(const char *t);

#endif
