/* What every program prints for --version: twinrun's version, the commit it was built from and the
 * backend linked behind the seam, so a log or a bug report says exactly which build ran. */
#ifndef TWINRUN_BASE_VERSION_H
#define TWINRUN_BASE_VERSION_H

#include <stdbool.h>
#include <stdio.h>

#define TR_VERSION_NUMBER "0.3.0"

const char *tr_version_commit(void);  /* "1a2b3c4d5e6f", "…-dirty", or "unknown" outside git */
const char *tr_version_backend(void); /* "twin", "cuda" or "musa" */

/* "PROGRAM (twinrun 0.3.0, commit 1a2b3c4d5e6f, backend twin)" and a newline. */
void tr_version_print(FILE *out, const char *program);

/* True when argv[1] is --version: the caller prints and exits 0 before reading anything else. */
bool tr_version_requested(int argc, char **argv);

#endif
