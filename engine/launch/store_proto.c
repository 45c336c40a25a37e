#include "launch/store_proto.h"

#include <string.h>

#include "twinrun/err.h"

static const unsigned char magic[4] = {'T', 'W', 'S', '1'};

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

int tr_store_parse_request(const unsigned char *buf, size_t n, tr_store_req *req, size_t *used, char *err,
                           size_t errlen) {
    const size_t m = n < 4 ? n : 4;
    if (memcmp(buf, magic, m) != 0)
        return tr_errf(err, errlen, "not a twinrun rendezvous request (is another program using MASTER_PORT?)");
    if (n < 7) return 0;
    const char op = (char)buf[4];
    if (op != 'S' && op != 'G') return tr_errf(err, errlen, "unknown request '%c'", op >= 0x20 && op < 0x7f ? op : '?');
    const size_t klen = le(buf + 5, 2);
    if (klen < 1 || klen > TR_STORE_MAX_KEY) return tr_errf(err, errlen, "key length %zu outside 1..%d", klen, TR_STORE_MAX_KEY);
    if (n < 7 + klen) return 0;
    if (!key_ok(buf + 7, klen)) return tr_errf(err, errlen, "key holds a character outside printable ASCII");
    req->op = op;
    memcpy(req->key, buf + 7, klen);
    req->key[klen] = '\0';
    req->value = NULL;
    req->value_len = 0;
    size_t pos = 7 + klen;
    if (op == 'S') {
        if (n < pos + 4) return 0;
        const size_t vlen = le(buf + pos, 4);
        if (vlen > TR_STORE_MAX_VALUE) return tr_errf(err, errlen, "value of %zu bytes; at most %d", vlen, TR_STORE_MAX_VALUE);
        pos += 4;
        if (n < pos + vlen) return 0;
        req->value = buf + pos;
        req->value_len = vlen;
        pos += vlen;
    }
    *used = pos;
    return 1;
}

size_t tr_store_encode_request(unsigned char *out, size_t cap, char op, const char *key, const void *value,
                               size_t value_len) {
    const size_t klen = strlen(key);
    if (!key_ok((const unsigned char *)key, klen) || (op != 'S' && op != 'G') || value_len > TR_STORE_MAX_VALUE) return 0;
    const size_t total = 7 + klen + (op == 'S' ? 4 + value_len : 0);
    if (total > cap) return 0;
    memcpy(out, magic, 4);
    out[4] = (unsigned char)op;
    out[5] = (unsigned char)(klen & 0xff);
    out[6] = (unsigned char)(klen >> 8);
    memcpy(out + 7, key, klen);
    if (op == 'S') {
        unsigned char *p = out + 7 + klen;
        for (int i = 0; i < 4; i++) p[i] = (unsigned char)(value_len >> (8 * i));
        if (value_len) memcpy(p + 4, value, value_len);
    }
    return total;
}
