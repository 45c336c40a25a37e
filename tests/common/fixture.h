/* The test-fixture library (twinrun_test_fixtures, linked into every cmocka test program): what tests
 * of several folders need alike, one copy each. This header is the general part -- scratch folders and
 * files, shell commands, a printer's output as a string, death tests, tiny Llama configs -- and brings
 * the shared cmocka assertions (assert_text.h). The folder-specific fixtures have their own headers:
 * fixture_kern.h (the kernel tests' device, buffers, comparisons and finite differences),
 * fixture_coll.h (the collectives' inputs and serial references), fixture_ckpt.h (a file-system
 * table that crashes on cue, a small checkpointed model). Include after <cmocka.h>'s prerequisites or
 * first: it includes them itself. */
#ifndef TWINRUN_TESTS_COMMON_FIXTURE_H
#define TWINRUN_TESTS_COMMON_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "common/assert_text.h"
#include "io/hf_config.h"
#include "twinrun/config.h"

/* ---- scratch folders and files ------------------------------------------------------------- */

/* Room for any scratch path the fixtures make (a folder under /tmp and a file or two below it). */
#define FX_PATH 512

/* Makes a fresh folder /tmp/twinrun-TAG-XXXXXX (mkdtemp: unique, mode 0700) and writes its path to
 * out. Returns 0, or -1 when it could not (out too small, mkdtemp failed). */
int fx_tmpdir(char *out, size_t cap, const char *tag);

/* A scratch path for the code under test to create: /tmp/twinrun-PID-TAG (TAG may end in an extension),
 * with whatever an earlier run left there removed. Returns 0, or -1 when out is too small or the old
 * one could not be removed. */
int fx_tmppath(char *out, size_t cap, const char *tag);

/* rm -rf: removes path and everything below it, depth first, never following a link (a link is removed,
 * not what it points to). Returns 0 when path is gone (or was never there), -1 otherwise. */
int fx_rm_rf(const char *path);

/* The whole file, NUL-terminated (so text can be used as a string), in malloc'd memory; its length
 * (without the NUL) in *len when len is not NULL. NULL when it cannot be opened or read in full. */
char *fx_read_file(const char *path, size_t *len);

/* Writes len bytes as the whole file path (created or truncated). Returns 0, or -1. */
int fx_write_file(const char *path, const void *data, size_t len);

/* Writes text as the file DIR/NAME; asserts it could (a test's setup that cannot write is broken). */
void fx_write_text(const char *dir, const char *name, const char *text);

/* Runs a shell command built from fmt (sh -c through system()). Returns the command's exit code: 0
 * exactly when it ran and exited 0 (a command cut off by a signal, or one that did not start, is not 0). */
int fx_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A TCP port for a test's rendezvous: below the kernel's ephemeral range (32768 and up on Linux, where an
 * outgoing connection of anything on the host may hold any port at any time), free on 127.0.0.1 when
 * asked (bound and released), and a different one at each call. Another test can still take it in the
 * moment between; 0 when none of 200 tries was free. */
int fx_free_port(void);

/* ---- output and death tests ---------------------------------------------------------------- */

/* What print(f, arg) writes, as a malloc'd string (asserts the stream could be made). */
char *fx_capture(void (*print)(FILE *f, const void *arg), const void *arg);

/* The same for a printer without an argument (--help, docs/flags.md). */
char *fx_capture_f(void (*print)(FILE *f));

typedef void (*fx_case_fn)(void);

/* A death test for the rank-fail path: runs fn in a forked child, its stderr caught in a pipe, and
 * asserts the child ended through tr_fatal (exit code TR_EXIT_FATAL) with a message holding both
 * needles. Prints the message beside name, so a test's log shows every guard's words. */
void fx_expect_fatal(const char *name, fx_case_fn fn, const char *needle1, const char *needle2);

/* ---- tiny models --------------------------------------------------------------------------- */

/* The tiny Llama 3 of the model and training tests: defaults, then 2 layers of hidden, ffn, 4 heads in
 * 2 query groups, seq_length = max_position_embeddings = seq, vocab, RoPE, RMSNorm, SwiGLU, untied
 * embeddings, no linear biases, micro and global batch 1. A test sets what it varies afterwards. */
void fx_tiny_llama(tr_config *c, int hidden, int ffn, int seq, int vocab);

/* The Hugging Face reference model tests/data/tiny_gqa (config.json applied over the defaults),
 * micro-batch 1 and sequence 8 as its reference logits were made with; the HF config itself in *hf
 * when hf is not NULL. Returns 0, or -1 with err. */
#define FX_TINY_GQA TWINRUN_TEST_DATA "/tiny_gqa"
int fx_tiny_gqa(tr_config *c, hf_llama_config *hf, char *err, size_t errlen);

#endif
