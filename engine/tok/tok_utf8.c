/* UTF-8 and GPT-2's byte-level alphabet: every byte is written as a printable code point (the bytes
 * that are printable Latin-1 as themselves, the other 68 as U+0100 onwards, in byte order), which is
 * how tokenizer.json spells its byte-level vocabulary. */
#include "tok/tok_internal.h"

static bool printable(unsigned b) { return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae; }

uint32_t tr_tok_byte_char(unsigned char b) {
    if (printable(b)) return b;
    uint32_t n = 0; /* the non-printable bytes below b */
    for (unsigned i = 0; i < b; i++) n += !printable(i);
    return 0x100 + n;
}

int tr_tok_char_byte(uint32_t cp) {
    if (cp < 0x100) return printable(cp) ? (int)cp : -1;
    uint32_t n = cp - 0x100;
    for (unsigned i = 0; i < 256; i++)
        if (!printable(i) && n-- == 0) return (int)i;
    return -1;
}

size_t tr_tok_utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
        if (!k || c > 0xf4 || i + k > n) return i;
        for (size_t j = 1; j < k; j++)
            if ((u[i + j] & 0xc0) != 0x80) return i;
        /* overlong 3- and 4-byte forms, UTF-16 surrogates, beyond U+10FFFF */
        if ((c == 0xe0 && u[i + 1] < 0xa0) || (c == 0xed && u[i + 1] >= 0xa0) || (c == 0xf0 && u[i + 1] < 0x90) ||
            (c == 0xf4 && u[i + 1] >= 0x90))
            return i;
        i += k;
    }
    return n;
}

int tr_tok_utf8_next(const char *s, size_t n, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0];
    int k = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    if ((size_t)k > n) k = (int)n;
    uint32_t v = k == 1 ? c : c & (0x7f >> k);
    for (int j = 1; j < k; j++) v = (v << 6) | (u[j] & 0x3f);
    *cp = v;
    return k;
}
