/* Reads the dump text format of flight.h. Dumps come from other machines and other builds, so
 * every field is checked and every error names the line and the field. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "flight/flight.h"
#include "twinrun/dtype.h"
#include "twinrun/err.h"

#define MAX_TOKENS 32
#define MAX_COMMS 65536
#define MAX_LINE (4u << 20)

typedef struct parser {
    const char *text;
    size_t len, pos, *line;
    char *buf; /* the current line, NUL-terminated and cut into tokens */
    size_t buf_cap;
    char *tok[MAX_TOKENS];
    int ntok;
    char *err;
    size_t errlen;
} parser;

/* Next non-blank, non-comment line into p->tok. 1 = got one, 0 = end of input, -1 = error. */
static int next_line(parser *p) {
    for (;;) {
        if (p->pos >= p->len) return 0;
        const char *s = p->text + p->pos;
        const char *nl = memchr(s, '\n', p->len - p->pos);
        size_t n = nl ? (size_t)(nl - s) : p->len - p->pos;
        p->pos += n + (nl ? 1 : 0);
        (*p->line)++;
        if (n > MAX_LINE) return tr_errf(p->err, p->errlen, "line %zu: longer than %u bytes", *p->line, MAX_LINE);
        if (memchr(s, '\0', n)) return tr_errf(p->err, p->errlen, "line %zu: contains a NUL byte", *p->line);
        if (n + 1 > p->buf_cap) {
            char *b = realloc(p->buf, n + 1);
            if (!b) return tr_errf(p->err, p->errlen, "line %zu: out of memory", *p->line);
            p->buf = b;
            p->buf_cap = n + 1;
        }
        memcpy(p->buf, s, n);
        p->buf[n] = '\0';
        if (n && p->buf[n - 1] == '\r') p->buf[n - 1] = '\0';
        p->ntok = 0;
        char *save = NULL;
        for (char *t = strtok_r(p->buf, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
            if (p->ntok == MAX_TOKENS) return tr_errf(p->err, p->errlen, "line %zu: too many fields", *p->line);
            p->tok[p->ntok++] = t;
        }
        if (p->ntok == 0 || p->tok[0][0] == '#') continue;
        return 1;
    }
}

static int fail(parser *p, const char *what, const char *tok) {
    return tr_errf(p->err, p->errlen, "line %zu: %s (got '%.40s')", *p->line, what, tok ? tok : "");
}

/* Expect tokens "key value" at position i; returns the value or NULL after recording an error. */
static const char *field(parser *p, int i, const char *key) {
    if (i + 1 >= p->ntok || strcmp(p->tok[i], key) != 0) {
        tr_errf(p->err, p->errlen, "line %zu: expected field '%s' at position %d", *p->line, key, i + 1);
        return NULL;
    }
    return p->tok[i + 1];
}

static int to_u64(const char *s, uint64_t max, uint64_t *out) {
    if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 20) return -1;
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno || v > max) return -1;
    *out = v;
    return 0;
}

static int to_int(const char *s, long lo, long hi, int *out) {
    uint64_t v;
    bool neg = s && s[0] == '-';
    if (to_u64(neg ? s + 1 : s, (uint64_t)1 << 31, &v)) return -1;
    long x = neg ? -(long)v : (long)v;
    if (x < lo || x > hi) return -1;
    *out = (int)x;
    return 0;
}

/* Times: "-" (not reached) or plain decimal seconds. */
static int to_time(const char *s, bool allow_dash, double *out) {
    if (!s) return -1;
    if (strcmp(s, "-") == 0) {
        if (!allow_dash) return -1;
        *out = -1;
        return 0;
    }
    if (!*s || strspn(s, "0123456789.") != strlen(s) || strlen(s) > 40) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < 0) return -1;
    *out = v;
    return 0;
}

static int lookup(const char *s, const char *(*name)(int), int n) {
    for (int i = 0; i < n; i++)
        if (s && strcmp(s, name(i)) == 0) return i;
    return -1;
}
static const char *op_name_i(int i) { return flight_op_name((flight_op)i); }
static const char *state_name_i(int i) { return flight_state_name((flight_state)i); }
static const char *dtype_name_i(int i) { return tr_dtype_name((tr_dtype)i); }
static const char *redop_name_i(int i) { return flight_redop_name(i); }

static bool valid_token(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n == 0 || n >= max) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e) return false;
    return true;
}

static int parse_rank_line(parser *p, flight_dump *d) {
    const char *v;
    if (p->ntok != 11) return fail(p, "want 'rank R world W backend B time T status S CODE'", p->tok[0]);
    if (!(v = field(p, 2, "world")) || to_int(v, 1, FLIGHT_MAX_WORLD, &d->world)) return fail(p, "bad world size", v);
    if (!(v = field(p, 0, "rank")) || to_int(v, 0, d->world - 1, &d->rank))
        return fail(p, "rank outside [0, world)", v);
    if (!(v = field(p, 4, "backend")) || !valid_token(v, sizeof d->backend)) return fail(p, "bad backend name", v);
    snprintf(d->backend, sizeof d->backend, "%s", v);
    if (!(v = field(p, 6, "time")) || to_time(v, false, &d->time)) return fail(p, "bad dump time", v);
    static const char *const statuses[] = {"running", "blocked", "exited", "failed", "killed"};
    if (!(v = field(p, 8, "status"))) return -1;
    bool known = false;
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) known |= strcmp(v, statuses[i]) == 0;
    if (!known) return fail(p, "status must be running, blocked, exited, failed or killed", v);
    snprintf(d->status, sizeof d->status, "%s", v);
    if (to_int(p->tok[10], -2147483647L, 2147483647L, &d->exit_code)) return fail(p, "bad exit code", p->tok[10]);
    return 0;
}

static int parse_comm_line(parser *p, flight_dump *d) {
    const char *v;
    int id;
    if (p->ntok != 10) return fail(p, "want 'comm I uid HEX name N size S ranks LIST'", p->tok[0]);
    if (d->ncomms >= MAX_COMMS) return fail(p, "too many communicators", p->tok[1]);
    if (to_int(p->tok[1], 0, MAX_COMMS, &id) || id != d->ncomms)
        return fail(p, "comm ids must count 0, 1, 2, ...", p->tok[1]);
    if (!(v = field(p, 2, "uid")) || strlen(v) != 16 || strspn(v, "0123456789abcdef") != 16)
        return fail(p, "uid must be 16 lowercase hex digits", v);
    flight_comm c = {.uid = strtoull(v, NULL, 16)};
    if (!(v = field(p, 4, "name")) || !valid_token(v, sizeof c.name)) return fail(p, "bad communicator name", v);
    snprintf(c.name, sizeof c.name, "%s", v);
    if (!(v = field(p, 6, "size")) || to_int(v, 1, d->world, &c.size)) return fail(p, "size outside [1, world]", v);
    if (!(v = field(p, 8, "ranks"))) return -1;
    int n;
    char rerr[160];
    if (flight_ranks_parse(v, d->world, &c.ranks, &n, rerr, sizeof rerr))
        return tr_errf(p->err, p->errlen, "line %zu: %s", *p->line, rerr);
    bool member = false;
    for (int i = 0; i < n; i++) member |= c.ranks[i] == d->rank;
    if (n != c.size || !member) {
        free(c.ranks);
        return fail(p, n != c.size ? "rank list length differs from size" : "the dumping rank is not a member", v);
    }
    flight_comm *cs = realloc(d->comms, sizeof *cs * (size_t)(d->ncomms + 1));
    if (!cs) {
        free(c.ranks);
        return fail(p, "out of memory", v);
    }
    d->comms = cs;
    d->comms[d->ncomms++] = c;
    return 0;
}

static int parse_rec_line(parser *p, flight_dump *d, size_t *cap) {
    const char *v;
    flight_record r = {0};
    uint64_t u;
    int i;
    if (p->ntok != 24)
        return fail(
            p, "want 'rec ID comm C seq S op OP count N dtype D redop R peer P state S t_sched T t_start T t_end T'",
            p->tok[0]);
    if (to_u64(p->tok[1], UINT64_MAX, &r.id)) return fail(p, "bad record id", p->tok[1]);
    if (d->nrecords && r.id <= d->records[d->nrecords - 1].id) return fail(p, "record ids must increase", p->tok[1]);
    if (!(v = field(p, 2, "comm")) || to_int(v, 0, d->ncomms - 1, &r.comm))
        return fail(p, "comm is not a declared communicator", v);
    if (!(v = field(p, 4, "seq")) || to_u64(v, UINT64_MAX, &r.seq)) return fail(p, "bad seq", v);
    if (!(v = field(p, 6, "op")) || (i = lookup(v, op_name_i, FLIGHT_OP_COUNT)) < 0) return fail(p, "unknown op", v);
    r.op = (flight_op)i;
    if (!(v = field(p, 8, "count")) || to_u64(v, (uint64_t)1 << 48, &u)) return fail(p, "bad count", v);
    r.count = u;
    if (!(v = field(p, 10, "dtype")) || (r.dtype = lookup(v, dtype_name_i, 3)) < 0) return fail(p, "unknown dtype", v);
    if (!(v = field(p, 12, "redop"))) return -1;
    bool reduces = r.op == FLIGHT_ALL_REDUCE || r.op == FLIGHT_REDUCE_SCATTER;
    r.redop = strcmp(v, "-") == 0 ? -1 : lookup(v, redop_name_i, 4);
    if (reduces ? r.redop < 0 : strcmp(v, "-") != 0)
        return fail(p, reduces ? "reduction needs sum, avg, max or min" : "redop must be '-' for this op", v);
    const int size = d->comms[r.comm].size;
    bool has_peer = r.op == FLIGHT_BROADCAST || r.op == FLIGHT_SEND || r.op == FLIGHT_RECV;
    if (!(v = field(p, 14, "peer")) || to_int(v, has_peer ? 0 : -1, has_peer ? size - 1 : -1, &r.peer))
        return fail(p, has_peer ? "peer outside the communicator" : "peer must be -1 for this op", v);
    if (!(v = field(p, 16, "state")) || (i = lookup(v, state_name_i, FLIGHT_STATE_COUNT)) < 0)
        return fail(p, "unknown state", v);
    r.state = (flight_state)i;
    if (!(v = field(p, 18, "t_sched")) || to_time(v, false, &r.t_sched)) return fail(p, "bad t_sched", v);
    if (!(v = field(p, 20, "t_start")) || to_time(v, true, &r.t_start)) return fail(p, "bad t_start", v);
    if (!(v = field(p, 22, "t_end")) || to_time(v, true, &r.t_end)) return fail(p, "bad t_end", v);
    if (r.state != FLIGHT_ABORTED && (r.state == FLIGHT_SCHEDULED) != (r.t_start < 0))
        return fail(p, "t_start must be '-' exactly when scheduled", p->tok[21]);
    if ((r.state == FLIGHT_COMPLETED) != (r.t_end >= 0) && r.state != FLIGHT_ABORTED)
        return fail(p, "t_end must be given exactly when completed", p->tok[23]);
    if ((r.t_start >= 0 && r.t_start < r.t_sched) ||
        (r.t_end >= 0 && r.t_end < (r.t_start >= 0 ? r.t_start : r.t_sched)))
        return fail(p, "times must not decrease: t_sched <= t_start <= t_end", p->tok[19]);
    if (d->nrecords == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        flight_record *rs = realloc(d->records, sizeof *rs * c);
        if (!rs) return fail(p, "out of memory", p->tok[1]);
        d->records = rs;
        *cap = c;
    }
    d->records[d->nrecords++] = r;
    return 0;
}

int flight_dump_parse(const char *text, size_t len, size_t *pos, size_t *line, flight_dump *out, char *err,
                      size_t errlen) {
    memset(out, 0, sizeof *out);
    out->owns_ranks = true;
    parser p = {.text = text, .len = len, .pos = *pos, .line = line, .err = err, .errlen = errlen};
    size_t cap = 0;
    int rc = next_line(&p);
    if (rc <= 0) goto done;
    rc = -1;
    if (p.ntok != 2 || strcmp(p.tok[0], "twinrun-flight") != 0) {
        fail(&p, "a dump starts with 'twinrun-flight 1'", p.tok[0]);
        goto done;
    }
    if (strcmp(p.tok[1], "1") != 0) {
        fail(&p, "unsupported dump version (this reader knows 1)", p.tok[1]);
        goto done;
    }
    if (next_line(&p) != 1 || strcmp(p.tok[0], "rank") != 0) {
        if (p.pos < p.len || p.ntok) fail(&p, "expected the 'rank' line after the header", p.ntok ? p.tok[0] : "");
        else tr_errf(err, errlen, "line %zu: dump ends after its header", *line);
        goto done;
    }
    if (parse_rank_line(&p, out)) goto done;
    for (;;) {
        int got = next_line(&p);
        if (got < 0) goto done;
        if (got == 0) {
            tr_errf(err, errlen, "line %zu: dump of rank %d ends without 'dropped N' and 'end'", *line, out->rank);
            goto done;
        }
        const char *k = p.tok[0];
        if (strcmp(k, "comm") == 0) {
            if (out->nrecords) {
                fail(&p, "comm lines come before rec lines", k);
                goto done;
            }
            if (parse_comm_line(&p, out)) goto done;
        } else if (strcmp(k, "rec") == 0) {
            if (parse_rec_line(&p, out, &cap)) goto done;
        } else if (strcmp(k, "dropped") == 0) {
            if (p.ntok != 2 || to_u64(p.tok[1], UINT64_MAX, &out->dropped)) {
                fail(&p, "want 'dropped N'", p.ntok > 1 ? p.tok[1] : "");
                goto done;
            }
            if (next_line(&p) != 1 || p.ntok != 1 || strcmp(p.tok[0], "end") != 0) {
                fail(&p, "expected 'end' after 'dropped'", p.ntok ? p.tok[0] : "");
                goto done;
            }
            rc = 1;
            goto done;
        } else {
            fail(&p, "unknown line kind (want comm, rec, dropped)", k);
            goto done;
        }
    }
done:
    free(p.buf);
    if (rc == 1 || rc == 0) *pos = p.pos;
    if (rc != 1) flight_dump_free(out);
    return rc;
}
