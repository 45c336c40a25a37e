/* Encoding and checked decoding of the multi-process twin's messages (format in mp_wire.h). */
#include "mp_wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flight/flight.h"
#include "twinrun/err.h"

static const unsigned char HDR_MAGIC[4] = {'T', 'W', 'X', '1'};
static const unsigned char PEER_MAGIC[4] = {'T', 'W', 'B', '1'};

static void put16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static void putf64(unsigned char *p, double d) {
    uint64_t v;
    memcpy(&v, &d, 8);
    put64(p, v);
}
static double getf64(const unsigned char *p) {
    uint64_t v = get64(p);
    double d;
    memcpy(&d, &v, 8);
    return d;
}

void mp_header_encode(unsigned char out[MP_HDR_SIZE], const mp_header *h) {
    memcpy(out, HDR_MAGIC, 4);
    put16(out + 4, MP_VERSION);
    put16(out + 6, (uint16_t)h->type);
    put32(out + 8, h->src_proc);
    put32(out + 12, h->nprocs);
    put64(out + 16, h->job);
    put64(out + 24, h->payload_len);
    put64(out + 32, h->payload_tag);
    put64(out + 40, (uint64_t)h->arg);
}

int mp_header_decode(const unsigned char *buf, size_t n, mp_header *h, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    if (n < MP_HDR_SIZE)
        return tr_errf(err, errlen, "message of %zu bytes is shorter than a header (%d)", n, MP_HDR_SIZE);
    if (memcmp(buf, HDR_MAGIC, 4) != 0)
        return tr_errf(err, errlen,
                       "message does not start with \"TWX1\": not a twinrun peer (another job on this "
                       "port or provider?)");
    if (get16(buf + 4) != MP_VERSION)
        return tr_errf(err, errlen,
                       "message of wire version %u, this build speaks %d: run the same twinrun build "
                       "everywhere",
                       get16(buf + 4), MP_VERSION);
    const unsigned type = get16(buf + 6);
    if (type < MP_HELLO || type >= MP_TYPE_END) return tr_errf(err, errlen, "unknown message type %u", type);
    h->type = (mp_msg_type)type;
    h->src_proc = get32(buf + 8);
    h->nprocs = get32(buf + 12);
    h->job = get64(buf + 16);
    h->payload_len = get64(buf + 24);
    h->payload_tag = get64(buf + 32);
    h->arg = (int64_t)get64(buf + 40);
    if (h->nprocs < 1 || h->nprocs > MP_MAX_PROCS || h->src_proc >= h->nprocs)
        return tr_errf(err, errlen, "message from process %u of %u: outside [0, %u)", h->src_proc, h->nprocs,
                       h->nprocs);
    if (h->payload_len > MP_MAX_PAYLOAD)
        return tr_errf(err, errlen, "message announces %llu payload bytes (more than %llu)",
                       (unsigned long long)h->payload_len, (unsigned long long)MP_MAX_PAYLOAD);
    const bool inline_payload = h->payload_tag == 0;
    if (inline_payload && h->payload_len > MP_INLINE_MAX)
        return tr_errf(err, errlen, "inline payload of %llu bytes (at most %d)", (unsigned long long)h->payload_len,
                       MP_INLINE_MAX);
    if (inline_payload && n != MP_HDR_SIZE + h->payload_len)
        return tr_errf(err, errlen, "message of %zu bytes but its header says %llu", n,
                       (unsigned long long)(MP_HDR_SIZE + h->payload_len));
    if (!inline_payload && n != MP_HDR_SIZE)
        return tr_errf(err, errlen, "a header with a separate payload has %zu bytes", n);
    if (!inline_payload && !(h->payload_tag >> 63)) return tr_errf(err, errlen, "payload tag without its high bit");
    return 0;
}

size_t mp_contrib_size(uint32_t nmembers, uint64_t data_bytes) {
    return MP_CONTRIB_FIXED + (size_t)nmembers * MP_CONTRIB_MEMBER_SIZE + (size_t)data_bytes;
}

unsigned char *mp_contrib_encode(unsigned char *out, const mp_contrib *c, const mp_contrib_member *m) {
    put64(out, c->uid);
    put64(out + 8, c->seq);
    put32(out + 16, (uint32_t)c->a);
    put32(out + 20, (uint32_t)c->b);
    put32(out + 24, (uint32_t)c->n);
    out[28] = (unsigned char)c->op;
    out[29] = (unsigned char)c->dtype;
    out[30] = (unsigned char)(signed char)c->redop;
    out[31] = 0;
    put32(out + 32, (uint32_t)c->peer);
    put32(out + 36, c->nmembers);
    put64(out + 40, c->count);
    unsigned char *p = out + MP_CONTRIB_FIXED;
    for (uint32_t i = 0; i < c->nmembers; i++, p += MP_CONTRIB_MEMBER_SIZE) {
        put32(p, m[i].index);
        put32(p + 4, m[i].rank);
        putf64(p + 8, m[i].arrival);
        put64(p + 16, m[i].data_len);
    }
    return p;
}

int mp_contrib_decode(const unsigned char *buf, size_t len, mp_contrib *c, mp_contrib_member **members, char *err,
                      size_t errlen) {
    *members = NULL;
    memset(c, 0, sizeof *c);
    if (len < MP_CONTRIB_FIXED) return tr_errf(err, errlen, "contribution of %zu bytes is too short", len);
    c->uid = get64(buf);
    c->seq = get64(buf + 8);
    c->a = (int32_t)get32(buf + 16);
    c->b = (int32_t)get32(buf + 20);
    c->n = (int32_t)get32(buf + 24);
    c->op = buf[28];
    c->dtype = buf[29];
    c->redop = (signed char)buf[30];
    c->peer = (int32_t)get32(buf + 32);
    c->nmembers = get32(buf + 36);
    c->count = get64(buf + 40);
    if (buf[31]) return tr_errf(err, errlen, "contribution with a non-zero reserved byte");
    if (c->n < 1 || c->n > MP_MAX_GROUP) return tr_errf(err, errlen, "contribution to a meeting of %d members", c->n);
    if (c->op >= FLIGHT_OP_COUNT) return tr_errf(err, errlen, "contribution with unknown operation %d", c->op);
    const bool p2p = c->op == FLIGHT_SEND || c->op == FLIGHT_RECV;
    if (p2p ? (c->n != 2 || c->a < 0 || c->b < 0 || c->a == c->b) : (c->a != -1 || c->b != -1))
        return tr_errf(err, errlen, "contribution's pair (%d, %d) does not fit a %s of %d members", c->a, c->b,
                       flight_op_name((flight_op)c->op), c->n);
    if (c->dtype > 2) return tr_errf(err, errlen, "contribution with unknown element type %d", c->dtype);
    if (c->redop < -1 || c->redop > 3) return tr_errf(err, errlen, "contribution with unknown reduction %d", c->redop);
    if (c->peer < -1 || c->peer >= MP_MAX_GROUP) return tr_errf(err, errlen, "contribution with peer %d", c->peer);
    if (c->count > ((uint64_t)1 << 48))
        return tr_errf(err, errlen, "contribution of %llu elements", (unsigned long long)c->count);
    if (c->nmembers < 1 || c->nmembers > (uint32_t)c->n)
        return tr_errf(err, errlen, "contribution of %u members to a meeting of %d", c->nmembers, c->n);
    if ((len - MP_CONTRIB_FIXED) / MP_CONTRIB_MEMBER_SIZE < c->nmembers)
        return tr_errf(err, errlen, "contribution of %zu bytes cannot hold %u members", len, c->nmembers);
    mp_contrib_member *m = calloc(c->nmembers, sizeof *m);
    if (!m) return tr_errf(err, errlen, "out of host memory decoding a contribution of %u members", c->nmembers);
    const unsigned char *p = buf + MP_CONTRIB_FIXED, *data = p + (size_t)c->nmembers * MP_CONTRIB_MEMBER_SIZE;
    size_t left = len - (size_t)(data - buf);
    int rc = 0;
    for (uint32_t i = 0; i < c->nmembers && !rc; i++, p += MP_CONTRIB_MEMBER_SIZE) {
        m[i].index = get32(p);
        m[i].rank = get32(p + 4);
        m[i].arrival = getf64(p + 8);
        m[i].data_len = get64(p + 16);
        if (m[i].index >= (uint32_t)c->n || (i && m[i].index <= m[i - 1].index))
            rc = tr_errf(err, errlen, "contribution member %u: index %u out of order or outside [0, %d)", i, m[i].index,
                         c->n);
        else if (!isfinite(m[i].arrival) || m[i].arrival < 0)
            rc = tr_errf(err, errlen, "contribution member %u: arrival time is not a finite time", i);
        else if (m[i].data_len > left)
            rc = tr_errf(err, errlen, "contribution member %u: %llu data bytes but %zu left", i,
                         (unsigned long long)m[i].data_len, left);
        if (rc) break;
        m[i].data = data;
        data += m[i].data_len;
        left -= (size_t)m[i].data_len;
    }
    if (!rc && left) rc = tr_errf(err, errlen, "contribution has %zu bytes past its members' data", left);
    if (rc) {
        free(m);
        return -1;
    }
    *members = m;
    return 0;
}

void mp_peer_encode(unsigned char out[MP_PEER_SIZE], const mp_peer *p) {
    memset(out, 0, MP_PEER_SIZE);
    memcpy(out, PEER_MAGIC, 4);
    put32(out + 4, p->proc);
    put32(out + 8, p->nprocs);
    put32(out + 12, p->ranks_per_proc);
    put32(out + 16, p->world);
    put32(out + 20, p->pid);
    memcpy(out + 24, p->host, strnlen(p->host, MP_HOST_MAX - 1));
    memcpy(out + 88, p->provider, strnlen(p->provider, MP_PROV_MAX - 1));
    put32(out + 120, p->addrlen);
    memcpy(out + 124, p->addr, p->addrlen <= MP_ADDR_MAX ? p->addrlen : MP_ADDR_MAX);
    put32(out + 252, p->chunk);
}

static int fixed_string(char *dst, const unsigned char *src, size_t cap, const char *what, char *err, size_t errlen) {
    size_t n = strnlen((const char *)src, cap);
    if (n == cap) return tr_errf(err, errlen, "bootstrap record: %s is not terminated", what);
    for (size_t i = 0; i < n; i++)
        if (src[i] < 0x21 || src[i] > 0x7e)
            return tr_errf(err, errlen, "bootstrap record: %s has a byte 0x%02x", what, src[i]);
    memcpy(dst, src, n + 1);
    return 0;
}

int mp_peer_decode(const unsigned char *buf, size_t n, mp_peer *p, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    if (n != MP_PEER_SIZE) return tr_errf(err, errlen, "bootstrap record of %zu bytes (expected %d)", n, MP_PEER_SIZE);
    if (memcmp(buf, PEER_MAGIC, 4) != 0)
        return tr_errf(err, errlen,
                       "bootstrap record does not start with \"TWB1\": another program uses this "
                       "rendezvous");
    p->proc = get32(buf + 4);
    p->nprocs = get32(buf + 8);
    p->ranks_per_proc = get32(buf + 12);
    p->world = get32(buf + 16);
    p->pid = get32(buf + 20);
    if (p->nprocs < 1 || p->nprocs > MP_MAX_PROCS || p->proc >= p->nprocs)
        return tr_errf(err, errlen, "bootstrap record of process %u of %u", p->proc, p->nprocs);
    if (p->ranks_per_proc < 1 || (uint64_t)p->ranks_per_proc * p->nprocs != p->world || p->world > MP_MAX_GROUP)
        return tr_errf(err, errlen, "bootstrap record: %u processes x %u ranks is not a world of %u", p->nprocs,
                       p->ranks_per_proc, p->world);
    p->chunk = get32(buf + 252);
    if (p->chunk < 1 || p->ranks_per_proc % p->chunk)
        return tr_errf(err, errlen, "bootstrap record: chunks of %u ranks do not divide %u ranks per process", p->chunk,
                       p->ranks_per_proc);
    if (fixed_string(p->host, buf + 24, MP_HOST_MAX, "host name", err, errlen) ||
        fixed_string(p->provider, buf + 88, MP_PROV_MAX, "provider name", err, errlen))
        return -1;
    p->addrlen = get32(buf + 120);
    if (p->addrlen < 1 || p->addrlen > MP_ADDR_MAX)
        return tr_errf(err, errlen, "bootstrap record: endpoint address of %u bytes", p->addrlen);
    memcpy(p->addr, buf + 124, p->addrlen);
    return 0;
}

int mp_text_check(const unsigned char *buf, size_t len, char *err, size_t errlen) {
    if (len > MP_MAX_TEXT) return tr_errf(err, errlen, "text of %zu bytes (at most %d)", len, MP_MAX_TEXT);
    for (size_t i = 0; i < len; i++)
        if ((buf[i] < 0x20 || buf[i] > 0x7e) && buf[i] != '\n' && buf[i] != '\t')
            return tr_errf(err, errlen, "text has a byte 0x%02x at %zu", buf[i], i);
    return 0;
}
