/* libfabric endpoint, send queue and receive path of the multi-process twin (mp_transport.h).
 *
 * Headers arrive in buffers posted in advance (tag MP_TAG_HEADER); a payload too large to travel
 * inline is received into a buffer of exactly its size, posted once its header has said how big
 * it is and under which tag (the provider holds it as an unexpected message meanwhile). */
#include "mp_transport.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "mp_dl.h"
#include "twinrun/err.h"

#define MP_TAG_HEADER 0ULL
#define HEADER_BUFS 32
#define HEADER_BUF_SIZE (MP_HDR_SIZE + MP_INLINE_MAX)

typedef enum op_kind { OP_SEND, OP_RECV_HEADER, OP_RECV_PAYLOAD } op_kind;

typedef struct mp_net_op {
    struct fi_context ctx; /* first: completions hand back its address */
    op_kind kind;
    unsigned char *buf;
    size_t len;
    uint64_t tag;
    int peer;
    mp_header h;                             /* OP_RECV_PAYLOAD: the header it belongs to */
    struct mp_net_op *next;                  /* backlog */
    struct mp_net_op *live_prev, *live_next; /* every send and payload receive not yet completed */
} mp_net_op;

struct mp_net {
    mp_fabric_api fi; /* libfabric's exported functions (mp_dl.h) */
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_ep *ep;
    struct fid_av *av;
    struct fid_cq *cq;
    bool can_wait; /* the CQ has a wait object: fi_cq_sread blocks */
    int nprocs, self;
    uint64_t job, next_tag;
    fi_addr_t *addr; /* [nprocs] */
    mp_net_op *headers[HEADER_BUFS];
    /* per peer: sends the provider could not take yet, in order; one queue per peer, so that a peer
     * that is gone (its sends refused until the connection fails) holds up nobody else */
    mp_net_op **backlog, **backlog_last;
    size_t backlogged;
    size_t in_flight; /* sends posted and not completed, plus the backlog */
    mp_msg *inbox, *inbox_last;
    mp_net_op *live; /* freed at close if never completed (a peer that died) */
    char error[512];
    int error_proc;
    /* [nprocs] peers that said goodbye with every message of theirs received (mp_net_peer_departed):
     * what still goes to them is chatter they no longer need, so its loss is no failure */
    bool *departed;
};

static void live_add(mp_net *f, mp_net_op *op) {
    op->live_next = f->live;
    if (f->live) f->live->live_prev = op;
    f->live = op;
}

static void live_free(mp_net *f, mp_net_op *op) {
    if (op->live_prev) op->live_prev->live_next = op->live_next;
    else f->live = op->live_next;
    if (op->live_next) op->live_next->live_prev = op->live_prev;
    free(op->buf);
    free(op);
}

static void set_error(mp_net *f, int proc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_error(mp_net *f, int proc, const char *fmt, ...) {
    if (f->error[0]) return;
    if (proc >= 0 && f->departed && f->departed[proc]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->error, sizeof f->error, fmt, ap);
    va_end(ap);
    f->error_proc = proc;
}

const char *mp_net_error(const mp_net *f, int *proc) {
    if (proc) *proc = f->error_proc;
    return f->error[0] ? f->error : NULL;
}

void mp_net_clear_error(mp_net *f) {
    f->error[0] = '\0';
    f->error_proc = -1;
}

void mp_net_peer_departed(mp_net *f, int proc) {
    TR_CHECK(proc >= 0 && proc < f->nprocs && proc != f->self, "departure of an invalid process");
    f->departed[proc] = true; /* what is queued for it stays: it includes the goodbye it waits for */
}

const char *mp_net_provider(const mp_net *f) { return f->info->fabric_attr->prov_name; }

static int open_cq(mp_net *f, enum fi_wait_obj wait) {
    struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = wait, .size = 1024};
    return fi_cq_open(f->domain, &attr, &f->cq, NULL);
}

static int fi_failed(char *err, size_t errlen, const char *call, int rc, const mp_net *f) {
    return tr_errf(err, errlen, "libfabric %s failed with provider %s: %s", call,
                   f->info ? f->info->fabric_attr->prov_name : "?", f->fi.strerror(-rc));
}

mp_net *mp_net_open(char *err, size_t errlen) {
    mp_net *f = calloc(1, sizeof *f);
    if (!f) {
        tr_errf(err, errlen, "out of host memory opening the libfabric endpoint");
        return NULL;
    }
    if (mp_fabric_load(&f->fi, err, errlen)) {
        free(f);
        return NULL;
    }
    struct fi_info *hints = f->fi.dupinfo(NULL); /* fi_allocinfo() */
    if (!hints) {
        free(f);
        tr_errf(err, errlen, "out of host memory opening the libfabric endpoint");
        return NULL;
    }
    f->error_proc = -1;
    hints->caps = FI_TAGGED;
    hints->ep_attr->type = FI_EP_RDM;
    hints->mode = FI_CONTEXT;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->mr_mode = 0; /* the twin's buffers are plain host memory, never registered */
    int rc = f->fi.getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &f->info);
    f->fi.freeinfo(hints);
    if (rc) {
        const char *prov = getenv("FI_PROVIDER");
        if (prov && *prov)
            tr_errf(err, errlen,
                    "libfabric has no provider matching FI_PROVIDER=\"%s\" that offers reliable datagram endpoints "
                    "with tagged messages (%s); use FI_PROVIDER=\"tcp;ofi_rxm\" (any network) or FI_PROVIDER=shm "
                    "(processes of one host), or unset it",
                    prov, f->fi.strerror(-rc));
        else
            tr_errf(err, errlen,
                    "libfabric found no provider with reliable datagram endpoints and tagged messages (%s): "
                    "install libfabric1 with its tcp and shm providers (ci/deps.sh)",
                    f->fi.strerror(-rc));
        mp_net_close(f);
        return NULL;
    }
    if ((rc = f->fi.fabric(f->info->fabric_attr, &f->fabric, NULL))) goto fail_fabric;
    if ((rc = fi_domain(f->fabric, f->info, &f->domain, NULL))) goto fail_domain;
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    if ((rc = fi_av_open(f->domain, &av_attr, &f->av, NULL))) goto fail_av;
    f->can_wait = open_cq(f, FI_WAIT_UNSPEC) == 0;
    if (!f->can_wait && (rc = open_cq(f, FI_WAIT_NONE))) goto fail_cq;
    if ((rc = fi_endpoint(f->domain, f->info, &f->ep, NULL))) goto fail_ep;
    if ((rc = fi_ep_bind(f->ep, &f->av->fid, 0)) || (rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV)))
        goto fail_bind;
    if ((rc = fi_enable(f->ep))) goto fail_enable;
    for (int i = 0; i < HEADER_BUFS; i++) {
        mp_net_op *op = calloc(1, sizeof *op);
        unsigned char *buf = malloc(HEADER_BUF_SIZE);
        if (!op || !buf) {
            free(op);
            free(buf);
            tr_errf(err, errlen, "out of host memory for receive buffers");
            mp_net_close(f);
            return NULL;
        }
        op->kind = OP_RECV_HEADER;
        op->buf = buf;
        op->len = HEADER_BUF_SIZE;
        f->headers[i] = op;
    }
    return f;
    /* one line per failure */
    /* clang-format off */
fail_fabric: fi_failed(err, errlen, "fi_fabric", rc, f); goto out;
fail_domain: fi_failed(err, errlen, "fi_domain", rc, f); goto out;
fail_av: fi_failed(err, errlen, "fi_av_open", rc, f); goto out;
fail_cq: fi_failed(err, errlen, "fi_cq_open", rc, f); goto out;
fail_ep: fi_failed(err, errlen, "fi_endpoint", rc, f); goto out;
fail_bind: fi_failed(err, errlen, "fi_ep_bind", rc, f); goto out;
fail_enable: fi_failed(err, errlen, "fi_enable", rc, f);
    /* clang-format on */
out:
    mp_net_close(f);
    return NULL;
}

int mp_net_address(const mp_net *f, unsigned char *addr, uint32_t *len, char *err, size_t errlen) {
    size_t n = MP_ADDR_MAX;
    int rc = fi_getname(&f->ep->fid, addr, &n);
    if (rc == -FI_ETOOSMALL)
        return tr_errf(err, errlen,
                       "provider %s's endpoint address has %zu bytes (at most %d fit the bootstrap "
                       "record)",
                       mp_net_provider(f), n, MP_ADDR_MAX);
    if (rc) return fi_failed(err, errlen, "fi_getname", rc, f);
    *len = (uint32_t)n;
    return 0;
}

static int post_header(mp_net *f, mp_net_op *op) {
    ssize_t rc;
    while ((rc = fi_trecv(f->ep, op->buf, op->len, NULL, FI_ADDR_UNSPEC, MP_TAG_HEADER, 0, &op->ctx)) == -FI_EAGAIN)
        mp_net_progress(f);
    return (int)rc;
}

int mp_net_connect(mp_net *f, const mp_peer *peers, int nprocs, int self, uint64_t job, char *err, size_t errlen) {
    f->nprocs = nprocs;
    f->self = self;
    f->job = job;
    f->addr = calloc((size_t)nprocs, sizeof *f->addr);
    f->backlog = calloc((size_t)nprocs, sizeof *f->backlog);
    f->backlog_last = calloc((size_t)nprocs, sizeof *f->backlog_last);
    f->departed = calloc((size_t)nprocs, sizeof *f->departed);
    if (!f->addr || !f->backlog || !f->backlog_last || !f->departed)
        return tr_errf(err, errlen, "out of host memory for %d peer addresses", nprocs);
    for (int p = 0; p < nprocs; p++) {
        int rc = fi_av_insert(f->av, peers[p].addr, 1, &f->addr[p], 0, NULL);
        if (rc != 1)
            return tr_errf(err, errlen, "libfabric cannot use the address of process %d (host %s, provider %s): %s", p,
                           peers[p].host, peers[p].provider, rc < 0 ? f->fi.strerror(-rc) : "not inserted");
    }
    for (int i = 0; i < HEADER_BUFS; i++) {
        int rc = post_header(f, f->headers[i]);
        if (rc) return fi_failed(err, errlen, "fi_trecv", rc, f);
    }
    return 0;
}

static bool try_send(mp_net *f, mp_net_op *op) {
    ssize_t rc = fi_tsend(f->ep, op->buf, op->len, NULL, f->addr[op->peer], op->tag, &op->ctx);
    if (rc == -FI_EAGAIN) return false;
    if (rc) {
        set_error(f, op->peer, "sending to process %d failed: %s", op->peer, f->fi.strerror((int)-rc));
        f->in_flight--;
        live_free(f, op);
    }
    return true;
}

static void queue_send(mp_net *f, int proc, unsigned char *buf, size_t len, uint64_t tag) {
    mp_net_op *op = calloc(1, sizeof *op);
    TR_CHECK(op != NULL, "out of host memory queueing a message to another process");
    op->kind = OP_SEND;
    op->buf = buf;
    op->len = len;
    op->tag = tag;
    op->peer = proc;
    f->in_flight++;
    live_add(f, op);
    if (!f->backlog[proc] && try_send(f, op)) return;
    /* order kept per peer: nothing overtakes its backlog */
    if (f->backlog_last[proc]) f->backlog_last[proc]->next = op;
    else f->backlog[proc] = op;
    f->backlog_last[proc] = op;
    f->backlogged++;
}

void mp_net_send(mp_net *f, int proc, mp_msg_type type, int64_t arg, void *payload, size_t len) {
    TR_CHECK(proc >= 0 && proc < f->nprocs && proc != f->self, "message to an invalid process");
    if (f->departed[proc]) { /* it has everything it waited for and may have left: nothing to send */
        free(payload);
        return;
    }
    mp_header h = {.type = type,
                   .src_proc = (uint32_t)f->self,
                   .nprocs = (uint32_t)f->nprocs,
                   .job = f->job,
                   .payload_len = len,
                   .arg = arg};
    const bool inline_payload = len <= MP_INLINE_MAX;
    if (!inline_payload) h.payload_tag = 1ULL << 63 | (uint64_t)f->self << 40 | (++f->next_tag & ((1ULL << 40) - 1));
    unsigned char *buf = malloc(MP_HDR_SIZE + (inline_payload ? len : 0));
    TR_CHECK(buf != NULL, "out of host memory for a message to another process");
    mp_header_encode(buf, &h);
    if (inline_payload) {
        if (len) memcpy(buf + MP_HDR_SIZE, payload, len);
        free(payload);
        queue_send(f, proc, buf, MP_HDR_SIZE + len, MP_TAG_HEADER);
        return;
    }
    queue_send(f, proc, buf, MP_HDR_SIZE, MP_TAG_HEADER);
    queue_send(f, proc, payload, len, h.payload_tag);
}

static void deliver(mp_net *f, const mp_header *h, unsigned char *payload) {
    mp_msg *m = calloc(1, sizeof *m);
    TR_CHECK(m != NULL, "out of host memory for a received message");
    m->h = *h;
    m->payload = payload;
    if (f->inbox_last) f->inbox_last->next = m;
    else f->inbox = m;
    f->inbox_last = m;
}

static void header_arrived(mp_net *f, mp_net_op *op, size_t len) {
    mp_header h;
    char err[256];
    if (mp_header_decode(op->buf, len, &h, err, sizeof err)) {
        set_error(f, -1, "a message that is not from this job arrived: %s", err);
    } else if (h.job != f->job || (int)h.nprocs != f->nprocs) {
        /* its sender is no process of this job (its number may be past this job's last) */
        set_error(f, -1,
                  "a message from another job arrived (process %u of %u): two jobs share an "
                  "address or port",
                  h.src_proc, h.nprocs);
    } else if (h.payload_tag == 0) {
        unsigned char *payload = NULL;
        if (h.payload_len) {
            payload = malloc(h.payload_len);
            TR_CHECK(payload != NULL, "out of host memory for a received message");
            memcpy(payload, op->buf + MP_HDR_SIZE, h.payload_len);
        }
        deliver(f, &h, payload);
    } else {
        mp_net_op *p = calloc(1, sizeof *p);
        unsigned char *buf = malloc(h.payload_len ? h.payload_len : 1);
        if (!p || !buf) {
            free(p);
            free(buf);
            set_error(f, (int)h.src_proc, "out of host memory for a %llu-byte message from process %u",
                      (unsigned long long)h.payload_len, h.src_proc);
        } else {
            p->kind = OP_RECV_PAYLOAD;
            p->buf = buf;
            p->len = h.payload_len;
            p->h = h;
            live_add(f, p);
            ssize_t rc;
            while ((rc = fi_trecv(f->ep, p->buf, p->len, NULL, FI_ADDR_UNSPEC, h.payload_tag, 0, &p->ctx)) ==
                   -FI_EAGAIN)
                mp_net_progress(f);
            if (rc) {
                set_error(f, (int)h.src_proc, "cannot receive a message from process %u: %s", h.src_proc,
                          f->fi.strerror((int)-rc));
                live_free(f, p);
            }
        }
    }
    int rc = post_header(f, op);
    if (rc) set_error(f, -1, "cannot post a receive buffer: %s", f->fi.strerror(-rc));
}

static void completed(mp_net *f, mp_net_op *op, size_t len) {
    switch (op->kind) {
    case OP_SEND:
        f->in_flight--;
        live_free(f, op);
        return;
    case OP_RECV_HEADER: header_arrived(f, op, len); return;
    case OP_RECV_PAYLOAD:
        deliver(f, &op->h, op->buf);
        op->buf = NULL;
        live_free(f, op);
        return;
    }
}

static void failed(mp_net *f) {
    struct fi_cq_err_entry e;
    memset(&e, 0, sizeof e);
    if (fi_cq_readerr(f->cq, &e, 0) < 1) return;
    mp_net_op *op = e.op_context;
    char prov[256] = "";
    const char *detail = fi_cq_strerror(f->cq, e.prov_errno, e.err_data, prov, sizeof prov);
    if (op && op->kind == OP_SEND) {
        set_error(f, op->peer, "a message to process %d was lost: %s (%s)", op->peer, f->fi.strerror(e.err),
                  detail ? detail : "");
        f->in_flight--;
        live_free(f, op);
    } else if (op && e.err == FI_ECANCELED) {
        /* fi_close cancels posted receives */
    } else {
        set_error(f, op && op->kind == OP_RECV_PAYLOAD ? (int)op->h.src_proc : -1, "a receive failed: %s (%s)",
                  f->fi.strerror(e.err), detail ? detail : "");
        if (op && op->kind == OP_RECV_HEADER) {
            int rc = post_header(f, op);
            if (rc) set_error(f, -1, "cannot post a receive buffer: %s", f->fi.strerror(-rc));
        }
    }
}

static void flush_backlog(mp_net *f) {
    for (int p = 0; f->backlogged && p < f->nprocs; p++)
        while (f->backlog[p]) {
            mp_net_op *op = f->backlog[p], *next = op->next; /* a refused send is freed by try_send */
            op->next = NULL;
            if (!try_send(f, op)) {
                op->next = next;
                break;
            }
            f->backlog[p] = next;
            if (!next) f->backlog_last[p] = NULL;
            f->backlogged--;
        }
}

static int handle(mp_net *f, struct fi_cq_tagged_entry *e, ssize_t n) {
    for (ssize_t i = 0; i < n; i++) completed(f, e[i].op_context, e[i].len);
    return (int)n;
}

int mp_net_progress(mp_net *f) {
    struct fi_cq_tagged_entry e[16];
    int handled = 0;
    for (;;) {
        ssize_t n = fi_cq_read(f->cq, e, 16);
        if (n > 0) {
            handled += handle(f, e, n);
            continue;
        }
        if (n == -FI_EAVAIL) {
            failed(f);
            handled++;
            continue;
        }
        if (n != -FI_EAGAIN) set_error(f, -1, "reading the completion queue failed: %s", f->fi.strerror((int)-n));
        break;
    }
    flush_backlog(f);
    return handled;
}

void mp_net_wait(mp_net *f, double timeout_s) {
    if (mp_net_progress(f) || f->inbox) return;
    if (f->can_wait && !f->backlogged) {
        struct fi_cq_tagged_entry e[16];
        int ms = timeout_s <= 0 ? 0 : timeout_s > 1e6 ? 1000000000 : (int)(timeout_s * 1000.0 + 1);
        ssize_t n = fi_cq_sread(f->cq, e, 16, NULL, ms);
        if (n > 0) handle(f, e, n);
        else if (n == -FI_EAVAIL) failed(f);
    } else {
        /* no wait object (or sends to push): poll at 1 ms, which costs the other processes almost no CPU */
        double slept = 0;
        while (slept < timeout_s && !mp_net_progress(f) && !f->inbox) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
            slept += 1e-3;
        }
    }
    mp_net_progress(f);
}

mp_msg *mp_net_next(mp_net *f) {
    mp_msg *m = f->inbox;
    if (m) {
        f->inbox = m->next;
        if (!f->inbox) f->inbox_last = NULL;
        m->next = NULL;
    }
    return m;
}

void mp_msg_free(mp_msg *m) {
    if (!m) return;
    free(m->payload);
    free(m);
}

size_t mp_net_sends_pending(const mp_net *f) { return f->in_flight; }

void mp_net_close(mp_net *f) {
    if (!f) return;
    /* closing the endpoint cancels what is posted; the buffers are ours to free afterwards */
    if (f->ep) fi_close(&f->ep->fid);
    if (f->cq) fi_close(&f->cq->fid);
    if (f->av) fi_close(&f->av->fid);
    if (f->domain) fi_close(&f->domain->fid);
    if (f->fabric) fi_close(&f->fabric->fid);
    if (f->info) f->fi.freeinfo(f->info);
    for (int i = 0; i < HEADER_BUFS; i++)
        if (f->headers[i]) {
            free(f->headers[i]->buf);
            free(f->headers[i]);
        }
    while (f->live) live_free(f, f->live); /* the backlog's too */
    for (mp_msg *m = f->inbox, *next; m; m = next) {
        next = m->next;
        mp_msg_free(m);
    }
    free(f->addr);
    free(f->backlog);
    free(f->backlog_last);
    free(f->departed);
    free(f);
}
