/* The bytes the processes of a multi-process twin send each other, kept apart from the transport
 * so that every decoder of bytes from the network is fuzzed (fuzz/fuzz_xwire.c).
 *
 * Bootstrap record (XW_PEER_SIZE bytes: "TWB1" proc nprocs ranks_per_proc world pid:u32 host[64] provider[32]
 * addrlen:u32 addr[128] chunk:u32, exchanged through MPI_Allgather or the rendezvous store
 * before any libfabric traffic): who a process is and its libfabric endpoint address.
 *
 * Message: a header (XW_HDR_SIZE bytes) and a payload. Payloads up to XW_INLINE_MAX bytes travel
 * in the header's own tagged message; larger ones follow as a second tagged message whose tag the
 * header names, so a receiver only ever posts buffers of a size it knows.
 *
 *   header: "TWX1" version:u16 type:u16 src_proc:u32 nprocs:u32 job:u64 payload_len:u64
 *           payload_tag:u64 (0 = inline) arg:i64 (BYE: exit code; FAIL: rank)
 *   CONTRIB payload (one process's members of one collective or send/recv):
 *           uid:u64 seq:u64 a:i32 b:i32 n:i32 op:u8 dtype:u8 redop:i8 pad:u8 peer:i32
 *           nmembers:u32 count:u64, then nmembers x (index:u32 rank:u32 arrival:f64 data_len:u64),
 *           then the members' data, in member order
 *   ABORT, FAIL: a reason (text); DUMP: flight dumps (sim/flight text format); BYE: exit code (4 bytes);
 *   IDLE: messages received (8 bytes); CONFIRM_OK: quiet (1 byte), the confirmed sent and received counts
 *   (8 bytes each); HELLO, CONFIRM, STUCK: none
 * Integers are little-endian; doubles are IEEE-754 binary64 bit patterns. */
#ifndef TWINRUN_SIM_FABRIC_XWIRE_H
#define TWINRUN_SIM_FABRIC_XWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XW_VERSION 1
#define XW_HDR_SIZE 48
#define XW_INLINE_MAX 8192
#define XW_MAX_PAYLOAD ((uint64_t)1 << 40)
#define XW_MAX_PROCS 65536
#define XW_MAX_GROUP (1 << 20)
#define XW_MAX_TEXT 65536 /* ABORT and FAIL reasons */

typedef enum xw_type {
    XW_HELLO = 1, /* start-up: the libfabric path to every peer works */
    XW_CONTRIB,   /* members' arrivals and data for one collective or send/recv */
    XW_FAIL,      /* a rank of the sender failed (tr_fatal); arg = rank */
    XW_BYE,       /* every rank of the sender has ended; arg = its ranks' messages sent before (CONTRIB,
                     FAIL), payload = the process's exit code (4 bytes) */
    XW_ABORT,     /* the sender tears the job down; payload = why */
    XW_DUMP,      /* answer to an abort: the sender's flight dumps */
    XW_IDLE,      /* to process 0: nothing can run here; arg = messages sent, payload = 8 bytes received */
    XW_CONFIRM,   /* from process 0: still idle with the same counts? arg = round */
    XW_CONFIRM_OK,/* the answer; arg = round, payload = yes (1 byte) and the counts it confirms */
    XW_STUCK,     /* from process 0: every process waits and no message is on its way */
    XW_TYPE_END
} xw_type;

typedef struct xw_header {
    xw_type type;
    uint32_t src_proc, nprocs;
    uint64_t job;
    uint64_t payload_len;
    uint64_t payload_tag;
    int64_t arg;
} xw_header;

const char *xw_type_name(xw_type t);
void xw_header_encode(unsigned char out[XW_HDR_SIZE], const xw_header *h);
/* 0, or -1 with err (bad magic, version, type, sizes, a source outside [0, nprocs)). */
int xw_header_decode(const unsigned char *buf, size_t n, xw_header *h, char *err, size_t errlen);

/* ---- CONTRIB ------------------------------------------------------------------------------- */
#define XW_CONTRIB_FIXED 48
#define XW_MEMBER_SIZE 24

typedef struct xw_contrib {
    uint64_t uid, seq;
    int32_t a, b;   /* send/recv: sender's and receiver's group ranks; collectives: -1, -1 */
    int32_t n;      /* members of the meeting: the group's size, 2 for a send/recv */
    int op, dtype, redop, peer;
    uint32_t nmembers;
    uint64_t count;
} xw_contrib;

typedef struct xw_member {
    uint32_t index; /* group rank (collective) or 0 = sender, 1 = receiver */
    uint32_t rank;  /* global rank, for messages */
    double arrival;
    uint64_t data_len;
    const unsigned char *data; /* into the parsed payload */
} xw_member;

/* Bytes of a CONTRIB payload with these members and data. */
size_t xw_contrib_size(uint32_t nmembers, uint64_t data_bytes);
/* Writes the fixed part and member table into out (of xw_contrib_size bytes); returns where the
 * data goes (members' data_len set, data pointers ignored). */
unsigned char *xw_contrib_encode(unsigned char *out, const xw_contrib *c, const xw_member *m);
/* Parses a payload of len bytes; members[] (allocated, *members freed by the caller) point into
 * buf. 0, or -1 with err. */
int xw_contrib_decode(const unsigned char *buf, size_t len, xw_contrib *c, xw_member **members, char *err,
                      size_t errlen);

/* ---- bootstrap record ------------------------------------------------------------------------ */
#define XW_PEER_SIZE 256
#define XW_ADDR_MAX 128
#define XW_HOST_MAX 64
#define XW_PROV_MAX 32

typedef struct xw_peer {
    uint32_t proc, nprocs, ranks_per_proc, world, pid;
    uint32_t chunk; /* ranks are dealt to processes round-robin in chunks of this many */
    char host[XW_HOST_MAX];     /* NUL-terminated */
    char provider[XW_PROV_MAX]; /* libfabric provider name, NUL-terminated */
    uint32_t addrlen;
    unsigned char addr[XW_ADDR_MAX];
} xw_peer;

void xw_peer_encode(unsigned char out[XW_PEER_SIZE], const xw_peer *p);
int xw_peer_decode(const unsigned char *buf, size_t n, xw_peer *p, char *err, size_t errlen);

/* Text payloads (ABORT, FAIL): printable ASCII, newlines and tabs only; -1 otherwise. */
int xw_text_check(const unsigned char *buf, size_t len, char *err, size_t errlen);

#endif
