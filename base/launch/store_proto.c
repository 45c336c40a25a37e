#include "launch/store_proto.h"

#include <string.h>

#include "launch/sha256.h"
#include "twinrun/err.h"

static const unsigned char magic[4] = {'T', 'W', 'S', '2'};

static uint32_t le(const unsigned char *p, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static int key_ok(const unsigned char *k, size_t n) {
    if (n < 1 || n > TR_STORE_MAX_KEY) return 0;
    for (size_t i = 0; i < n; i++)
        if (k[i] < 0x21 || k[i] > 0x7e) return 0;
    return 1;
}

/* -1 with err when the first bytes are not this protocol's magic. */
static int check_magic(const unsigned char *buf, size_t n, const char *who, char *err, size_t errlen) {
    const size_t m = n < 4 ? n : 4;
    if (memcmp(buf, magic, m) == 0) return 0;
    if (n >= 4 && memcmp(buf, "TWS", 3) == 0)
        return tr_errf(err, errlen,
                       "%s speaks rendezvous version '%c', this build version '2': run the same twinrun "
                       "build on every node",
                       who, buf[3] >= 0x20 && buf[3] < 0x7f ? buf[3] : '?');
    return tr_errf(err, errlen, "%s is not a twinrun rendezvous (is another program using MASTER_PORT?)", who);
}

int tr_store_parse_greeting(const unsigned char *buf, size_t n, unsigned char nonce[TR_STORE_NONCE], char *err,
                            size_t errlen) {
    if (check_magic(buf, n, "the server", err, errlen)) return -1;
    if (n < TR_STORE_GREETING) return 0;
    memcpy(nonce, buf + 4, TR_STORE_NONCE);
    return 1;
}

void tr_store_encode_greeting(unsigned char out[TR_STORE_GREETING], const unsigned char nonce[TR_STORE_NONCE]) {
    memcpy(out, magic, 4);
    memcpy(out + 4, nonce, TR_STORE_NONCE);
}

static void mac_of(const tr_store_auth *auth, const unsigned char *body, size_t n, unsigned char out[TR_STORE_MAC]) {
    tr_hmac_sha256(auth->token, auth->token_len, auth->nonce, TR_STORE_NONCE, body, n, out);
}

int tr_store_parse_request(const unsigned char *buf, size_t n, const tr_store_auth *auth, tr_store_req *req,
                           size_t *used, char *err, size_t errlen) {
    if (check_magic(buf, n, "the client", err, errlen)) return -1;
    const size_t h = TR_STORE_HEAD;
    if (n < h + 3) return 0;
    const char op = (char)buf[h];
    if (op != 'S' && op != 'G' && op != 'H')
        return tr_errf(err, errlen, "unknown request '%c'", op >= 0x20 && op < 0x7f ? op : '?');
    const size_t klen = le(buf + h + 1, 2);
    if (klen < 1 || klen > TR_STORE_MAX_KEY)
        return tr_errf(err, errlen, "key length %zu outside 1..%d", klen, TR_STORE_MAX_KEY);
    if (n < h + 3 + klen) return 0;
    if (!key_ok(buf + h + 3, klen)) return tr_errf(err, errlen, "key holds a character outside printable ASCII");
    size_t pos = h + 3 + klen, vlen = 0;
    if (op != 'G') { /* a set's value; a heartbeat's: who the member is */
        if (n < pos + 4) return 0;
        vlen = le(buf + pos, 4);
        if (vlen > TR_STORE_MAX_VALUE)
            return tr_errf(err, errlen, "value of %zu bytes; at most %d", vlen, TR_STORE_MAX_VALUE);
        pos += 4;
        if (n < pos + vlen) return 0;
    }
    unsigned char mac[TR_STORE_MAC];
    mac_of(auth, buf + h, pos + vlen - h, mac);
    if (!tr_sha256_equal_ct(mac, buf + 4, TR_STORE_MAC))
        return tr_errf(err, errlen,
                       "authentication failed: the client does not hold this job's token (set the same "
                       "TWINRUN_STORE_TOKEN for every rank of the job)");
    req->op = op;
    memcpy(req->key, buf + h + 3, klen);
    req->key[klen] = '\0';
    req->value = op != 'G' ? buf + pos : NULL;
    req->value_len = vlen;
    *used = pos + vlen;
    return 1;
}

size_t tr_store_encode_request(unsigned char *out, size_t cap, const tr_store_auth *auth, char op, const char *key,
                               const void *value, size_t value_len) {
    const size_t klen = strlen(key);
    if (!key_ok((const unsigned char *)key, klen) || (op != 'S' && op != 'G' && op != 'H') ||
        value_len > TR_STORE_MAX_VALUE)
        return 0;
    const size_t h = TR_STORE_HEAD;
    const size_t total = h + 3 + klen + (op != 'G' ? 4 + value_len : 0);
    if (total > cap) return 0;
    memcpy(out, magic, 4);
    out[h] = (unsigned char)op;
    out[h + 1] = (unsigned char)(klen & 0xff);
    out[h + 2] = (unsigned char)(klen >> 8);
    memcpy(out + h + 3, key, klen);
    if (op != 'G') {
        unsigned char *p = out + h + 3 + klen;
        for (int i = 0; i < 4; i++) p[i] = (unsigned char)(value_len >> (8 * i));
        if (value_len) memcpy(p + 4, value, value_len);
    }
    mac_of(auth, out + h, total - h, out + 4);
    return total;
}
