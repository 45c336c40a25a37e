/* The bytes the processes of a multi-process twin send each other, kept apart from the transport
 * so that every decoder of bytes from the network is fuzzed (fuzz/fuzz_mp_wire.c).
 *
 * Bootstrap record (MP_PEER_SIZE bytes: "TWB1" proc nprocs ranks_per_proc world pid:u32 host[64] provider[32]
 * addrlen:u32 addr[128] chunk:u32, exchanged through MPI_Allgather or the rendezvous store
 * before any libfabric traffic): who a process is and its libfabric endpoint address.
 *
 * Message: a header (MP_HDR_SIZE bytes) and a payload. Payloads up to MP_INLINE_MAX bytes travel
 * in the header's own tagged message; larger ones follow as a second tagged message whose tag the
 * header names, so a receiver only ever posts buffers of a size it knows.
 *
 *   header: "TWX1" version:u16 type:u16 src_proc:u32 nprocs:u32 job:u64 payload_len:u64
 *           payload_tag:u64 (0 = inline) arg:i64 (BYE: exit code; FAIL: rank)
 *   CONTRIB payload (one process's members of one collective or send/recv):
 *           uid:u64 seq:u64 a:i32 b:i32 n:i32 op:u8 dtype:u8 redop:i8 pad:u8 peer:i32
 *           nmembers:u32 count:u64, then nmembers x (index:u32 rank:u32 arrival:f64 data_len:u64),
 *           then the members' data, in member order
 *   ABORT, FAIL: a reason (text); DUMP: flight dumps (base/flight text format); BYE: exit code (4 bytes);
 *   IDLE: messages received (8 bytes); CONFIRM_OK: quiet (1 byte), the confirmed sent and received counts
 *   (8 bytes each); HELLO, CONFIRM, STUCK: none
 * Integers are little-endian; doubles are IEEE-754 binary64 bit patterns. */
#ifndef TWINRUN_SIM_MULTIPROC_MP_WIRE_H
#define TWINRUN_SIM_MULTIPROC_MP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MP_VERSION 1
#define MP_HDR_SIZE 48
#define MP_INLINE_MAX 8192
#define MP_MAX_PAYLOAD ((uint64_t)1 << 40)
#define MP_MAX_PROCS 65536
#define MP_MAX_GROUP (1 << 20)
#define MP_MAX_TEXT 65536 /* ABORT and FAIL reasons */

typedef enum mp_msg_type {
    MP_HELLO = 1,  /* start-up: the libfabric path to every peer works */
    MP_CONTRIB,    /* members' arrivals and data for one collective or send/recv */
    MP_FAIL,       /* a rank of the sender failed (tr_fatal); arg = rank */
    MP_BYE,        /* every rank of the sender has ended; arg = its ranks' messages sent before (CONTRIB,
                      FAIL), payload = the process's exit code (4 bytes) */
    MP_ABORT,      /* the sender tears the job down; payload = why */
    MP_DUMP,       /* answer to an abort: the sender's flight dumps */
    MP_IDLE,       /* to process 0: nothing can run here; arg = messages sent, payload = 8 bytes received */
    MP_CONFIRM,    /* from process 0: still idle with the same counts? arg = round */
    MP_CONFIRM_OK, /* the answer; arg = round, payload = yes (1 byte) and the counts it confirms */
    MP_STUCK,      /* from process 0: every process waits and no message is on its way */
    MP_TYPE_END
} mp_msg_type;

typedef struct mp_header {
    mp_msg_type type;
    uint32_t src_proc, nprocs;
    uint64_t job;
    uint64_t payload_len;
    uint64_t payload_tag;
    int64_t arg;
} mp_header;

void mp_header_encode(unsigned char out[MP_HDR_SIZE], const mp_header *h);
/* 0, or -1 with err (bad magic, version, type, sizes, a source outside [0, nprocs)). */
int mp_header_decode(const unsigned char *buf, size_t n, mp_header *h, char *err, size_t errlen);

/* ---- CONTRIB ------------------------------------------------------------------------------- */
#define MP_CONTRIB_FIXED 48
#define MP_CONTRIB_MEMBER_SIZE 24

typedef struct mp_contrib {
    uint64_t uid, seq;
    int32_t a, b; /* send/recv: sender's and receiver's group ranks; collectives: -1, -1 */
    int32_t n;    /* members of the meeting: the group's size, 2 for a send/recv */
    int op, dtype, redop, peer;
    uint32_t nmembers;
    uint64_t count;
} mp_contrib;

typedef struct mp_contrib_member {
    uint32_t index; /* group rank (collective) or 0 = sender, 1 = receiver */
    uint32_t rank;  /* global rank, for messages */
    double arrival;
    uint64_t data_len;
    const unsigned char *data; /* into the parsed payload */
} mp_contrib_member;

/* Bytes of a CONTRIB payload with these members and data. */
size_t mp_contrib_size(uint32_t nmembers, uint64_t data_bytes);
/* Writes the fixed part and member table into out (of mp_contrib_size bytes); returns where the
 * data goes (members' data_len set, data pointers ignored). */
unsigned char *mp_contrib_encode(unsigned char *out, const mp_contrib *c, const mp_contrib_member *m);
/* Parses a payload of len bytes; members[] (allocated, *members freed by the caller) point into
 * buf. 0, or -1 with err. */
int mp_contrib_decode(const unsigned char *buf, size_t len, mp_contrib *c, mp_contrib_member **members, char *err,
                      size_t errlen);

/* ---- bootstrap record ------------------------------------------------------------------------ */
#define MP_PEER_SIZE 256
#define MP_ADDR_MAX 128
#define MP_HOST_MAX 64
#define MP_PROV_MAX 32

typedef struct mp_peer {
    uint32_t proc, nprocs, ranks_per_proc, world, pid;
    uint32_t chunk;             /* ranks are dealt to processes round-robin in chunks of this many */
    char host[MP_HOST_MAX];     /* NUL-terminated */
    char provider[MP_PROV_MAX]; /* libfabric provider name, NUL-terminated */
    uint32_t addrlen;
    unsigned char addr[MP_ADDR_MAX];
} mp_peer;

void mp_peer_encode(unsigned char out[MP_PEER_SIZE], const mp_peer *p);
int mp_peer_decode(const unsigned char *buf, size_t n, mp_peer *p, char *err, size_t errlen);

/* Text payloads (ABORT, FAIL): printable ASCII, newlines and tabs only; -1 otherwise. */
int mp_text_check(const unsigned char *buf, size_t len, char *err, size_t errlen);

#endif
