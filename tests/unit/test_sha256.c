/* SHA-256 and HMAC-SHA256 (base/launch/sha256.h) against published vectors: FIPS 180-4's examples
 * and RFC 4231's HMAC test cases 1, 2, 6 (a key longer than the block) and 7. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "launch/sha256.h"

static void hex(const unsigned char *b, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static void check_sha(const char *msg, size_t repeat, const char *want) {
    tr_sha256 s;
    tr_sha256_init(&s);
    for (size_t i = 0; i < repeat; i++) tr_sha256_update(&s, msg, strlen(msg));
    unsigned char d[TR_SHA256_BYTES];
    char h[65];
    tr_sha256_final(&s, d);
    hex(d, sizeof d, h);
    assert_string_equal(h, want);
}

static void test_sha256_vectors(void **state) {
    (void)state;
    check_sha("", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_sha("abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* a million 'a', fed in pieces that straddle the 64-byte blocks */
    check_sha("aaaaaaaaaaaaaaaaaaaaaaaaa", 40000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void check_hmac(const unsigned char *key, size_t key_len, const char *a, const char *b, const char *want) {
    unsigned char d[TR_SHA256_BYTES];
    char h[65];
    tr_hmac_sha256(key, key_len, a, strlen(a), b, strlen(b), d);
    hex(d, sizeof d, h);
    assert_string_equal(h, want);
}

static void test_hmac_rfc4231(void **state) {
    (void)state;
    unsigned char k20[20], k131[131];
    memset(k20, 0x0b, sizeof k20);
    memset(k131, 0xaa, sizeof k131);
    check_hmac(k20, 20, "Hi There", "", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    /* the message split across the two parts gives the same MAC */
    check_hmac(k20, 20, "Hi ", "There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    check_hmac((const unsigned char *)"Jefe", 4, "what do ya want ", "for nothing?",
               "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    check_hmac(k131, 131, "Test Using Larger Than Block-Size Key - Hash Key First", "",
               "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    check_hmac(k131, 131, "This is a test using a larger than block-size key and a larger than block-size data. ",
               "The key needs to be hashed before being used by the HMAC algorithm.",
               "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

static void test_equal_ct(void **state) {
    (void)state;
    assert_true(tr_sha256_equal_ct("abcd", "abcd", 4));
    assert_false(tr_sha256_equal_ct("abcd", "abce", 4));
    assert_false(tr_sha256_equal_ct("xbcd", "abcd", 4));
    assert_true(tr_sha256_equal_ct("", "", 0));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_equal_ct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
