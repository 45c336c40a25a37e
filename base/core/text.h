/* Small text helpers shared by every parser that names the closest key or refuses a flag-like value. */
#ifndef TWINRUN_BASE_CORE_TEXT_H
#define TWINRUN_BASE_CORE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Levenshtein distance of a[0..la) and b[0..lb); names are short, so input is measured on its first
 * TR_EDIT_MAX bytes (longer input is far from every name anyway). */
#define TR_EDIT_MAX 96
size_t tr_edit_distance(const char *a, size_t la, const char *b, size_t lb);

/* A token argparse would take for an option: "-x..." or "--x", but not a negative number or a lone "-". */
bool tr_looks_like_flag(const char *t);

/* s as text of an XML 1.0 document (the JUnit reports of the scenario runner and the doctor): markup
 * escaped, control characters XML cannot carry dropped, malformed UTF-8 replaced by '?' (one stray byte
 * from a diagnosis would make a CI's parser reject the whole report). In an attribute a newline or tab
 * would be normalised to a space by the reader, so there they are written as character references. */
void tr_xml_text(FILE *f, const char *s, bool attribute);

#endif
