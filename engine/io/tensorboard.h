/* TensorBoard event files (--tensorboard-dir), written without TensorFlow or a protobuf runtime.
 *
 * A file is a sequence of TFRecords: uint64 length, masked CRC-32C of those 8 bytes, the data, the
 * masked CRC-32C of the data (all little-endian). Each record holds one Event protobuf: the first
 * carries file_version "brain.Event:2", every later one a Summary with one scalar (tag,
 * simple_value) at a step. The file is named as PyTorch's SummaryWriter (which Megatron uses)
 * names it: events.out.tfevents.<unix seconds>.<hostname>.<pid>.0, so TensorBoard, tbparse and
 * EventAccumulator read it as they read Megatron's. */
#ifndef TWINRUN_ENGINE_IO_TENSORBOARD_H
#define TWINRUN_ENGINE_IO_TENSORBOARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tr_tb_writer tr_tb_writer;

/* Creates dir (and its parents) if needed and opens a new event file in it, writing the
 * file_version record. NULL with err naming the path and the fix. */
tr_tb_writer *tr_tb_open(const char *dir, char *err, size_t errlen);
/* Appends one scalar at `step` with the current wall time, and flushes (a crash loses nothing that
 * was logged). 0, or -1 with err (disk full, ...). NULL writer: no-op. */
int tr_tb_scalar(tr_tb_writer *w, const char *tag, double value, int64_t step, char *err, size_t errlen);
/* Closes the file; NULL is a no-op. 0, or -1 if the last writes failed. */
int tr_tb_close(tr_tb_writer *w);
const char *tr_tb_path(const tr_tb_writer *w);

/* ---- encoding (tb_event.c), exposed for tests ---------------------------------------------------
 * One Event's protobuf bytes into out[cap]: wall_time, step (omitted when 0), file_version (if not
 * NULL) and a one-value Summary (if tag is not NULL). Returns the length, or 0 if cap is too small. */
size_t tr_tb_encode_event(unsigned char *out, size_t cap, double wall_time, int64_t step, const char *file_version,
                          const char *tag, float value);
/* The TFRecord frame of data[n] into out[cap] (n + 16 bytes). Returns the length, or 0 if cap is too
 * small. */
size_t tr_tb_frame(unsigned char *out, size_t cap, const unsigned char *data, size_t n);

#endif
