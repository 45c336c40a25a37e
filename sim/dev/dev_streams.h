/* The stream table of a device that has had a second stream: who is ordered after what (vector
 * clocks) and the operations not yet known to be ordered before every stream (the hazard check's
 * memory). Shared by dev_streams.c (streams, events, syncs) and dev_hazard.c (the check). */
#ifndef TWINRUN_SIM_DEV_DEV_STREAMS_H
#define TWINRUN_SIM_DEV_DEV_STREAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "dev_internal.h"
#include "twin_stream.h"

enum {
    TWIN_OP_ACCESS_MAX = 12, /* ranges one operation declares (attention_backward_pos: ten) */
    /* pending operations kept per stream; older ones are dropped (counted). A full stream's array is at
     * most twice this (amortised compaction), ~300 bytes an operation: 1.2 MB a stream at 2048 */
    TWIN_STREAM_OPS_MAX = 2048,
};

typedef struct twin_op_rec {
    uint64_t seq; /* 1-based position on its stream */
    const char *what, *detail;
    int nacc;
    twin_access acc[TWIN_OP_ACCESS_MAX];
} twin_op_rec;

typedef struct stream_slot {
    dev_stream *stream; /* NULL: free, or destroyed with work still pending (it still races) */
    char name[32];
    uint64_t seq;                    /* operations recorded on the slot so far; never reset, so vector
                                        clocks stay valid when a destroyed stream's slot is reused */
    uint64_t seen[TWIN_STREAMS_MAX]; /* this stream is ordered after slot j's operations 1..seen[j] */
    twin_op_rec *ops;                /* ops[head..n): recorded, not yet ordered before every stream */
    size_t head, n, cap;
    uint64_t dropped; /* operations dropped for TWIN_STREAM_OPS_MAX: races with them go unseen */
} stream_slot;

struct twin_streams {
    stream_slot slot[TWIN_STREAMS_MAX];
    uint64_t host_seen[TWIN_STREAMS_MAX]; /* the host has waited for slot j's operations 1..host_seen[j] */
};

/* Operation seq of slot b is ordered before whatever slot a enqueues next. */
static inline bool twin_streams_ordered(const twin_streams *t, int a, int b, uint64_t seq) {
    return a == b || seq <= t->slot[a].seen[b] || seq <= t->host_seen[b];
}

#endif
