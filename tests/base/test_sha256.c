/*
 * test_sha256.c — our SHA-256 against the FIPS 180-2 / 180-4 example
 * vectors, block-boundary lengths and arbitrary streaming splits.
 */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "src/base/sha256.h"

static void check_digest(int line, const uint8_t d[FX_SHA256_BYTES], const char *want) {
    char hex[2 * FX_SHA256_BYTES + 1];
    fx_sha256_hex(d, hex);
    if (strcmp(hex, want)) fx_test_fail(__FILE__, line, "digest %s, want %s", hex, want);
}

/* Digest with the portable rounds (ni = 0) or the default choice (1). */
static void digest_with(const void *msg, size_t n, int ni, uint8_t d[FX_SHA256_BYTES]) {
    fx_sha256 h;
    fx_sha256_init(&h);
    if (!ni) h.sha_ni = 0;
    fx_sha256_update(&h, msg, n);
    fx_sha256_final(&h, d);
}

/* Both implementations (the SHA extensions where the CPU has them). */
static void check_text(int line, const char *msg, const char *want) {
    uint8_t d[FX_SHA256_BYTES];
    for (int ni = 0; ni < 2; ni++) {
        digest_with(msg, strlen(msg), ni, d);
        check_digest(line, d, want);
    }
}

TEST(sha256_fips_vectors) {
    /* FIPS 180-2 Appendix B.1 (one block), B.2 (448 bits: two blocks after
     * padding), B.3 (one million 'a'), and the empty message. */
    check_text(__LINE__, "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check_text(__LINE__, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
               "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    check_text(__LINE__, "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* the 896-bit message of the FIPS 180-4 example set */
    check_text(__LINE__,
               "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
               "mnopqrstnopqrstu",
               "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");

    /* one million 'a': once in one piece, once in 1000 updates of 1000 */
    size_t n = 1000000;
    char *a = malloc(n);
    REQUIRE(a);
    memset(a, 'a', n);
    uint8_t d[FX_SHA256_BYTES];
    for (int ni = 0; ni < 2; ni++) {
        digest_with(a, n, ni, d);
        check_digest(__LINE__, d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }
    fx_sha256 h;
    fx_sha256_init(&h);
    for (int i = 0; i < 1000; i++) fx_sha256_update(&h, a + 1000 * i, 1000);
    fx_sha256_final(&h, d);
    check_digest(__LINE__, d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

TEST(sha256_block_boundaries) {
    /* Messages of every length 0..299 (bytes (7i + n) mod 251) cover the
     * padding cases 55/56/63/64/65 mod 64; the digests are chained into one
     * SHA-256 whose value was computed with Python's hashlib. */
    fx_sha256 acc;
    fx_sha256_init(&acc);
    uint8_t msg[300], d[FX_SHA256_BYTES];
    for (int n = 0; n < 300; n++) {
        for (int i = 0; i < n; i++) msg[i] = (uint8_t)((i * 7 + n) % 251);
        fx_sha256_buf(msg, (size_t)n, d);
        fx_sha256_update(&acc, d, sizeof d);
    }
    fx_sha256_final(&acc, d);
    check_digest(__LINE__, d, "85a7b6ba443a050fc9fdf1b87b574d54a8573461c1cd4289890e21947a70fc31");
}

TEST(sha256_streaming_splits) {
    /* Any split of the input into updates gives the one-shot digest. */
    fx_test_rng rng;
    fx_test_rng_seed(&rng, 7);
    uint8_t msg[1000], whole[FX_SHA256_BYTES], parts[FX_SHA256_BYTES];
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)fx_test_rng_u64(&rng);
    for (int trial = 0; trial < 200; trial++) {
        size_t n = (size_t)(fx_test_rng_u64(&rng) % (sizeof msg + 1));
        fx_sha256_buf(msg, n, whole);
        fx_sha256 h;
        fx_sha256_init(&h);
        for (size_t pos = 0; pos < n;) {
            size_t take = (size_t)(fx_test_rng_u64(&rng) % 140);
            if (take > n - pos) take = n - pos;
            fx_sha256_update(&h, msg + pos, take);
            pos += take;
        }
        fx_sha256_final(&h, parts);
        CHECK_MSG(!memcmp(whole, parts, sizeof whole), "length %zu: split digest differs", n);
    }
}

TEST(sha256_extensions_match_portable) {
    /* Random messages of random lengths: the default implementation (SHA-NI
     * on CPUs that have it) equals the portable rounds. */
    fx_sha256 probe;
    fx_sha256_init(&probe);
    printf("    implementation: %s\n", probe.sha_ni ? "x86 SHA extensions vs portable" : "portable only (no SHA-NI)");
    fx_test_rng rng;
    fx_test_rng_seed(&rng, 99);
    static uint8_t msg[70000];
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)fx_test_rng_u64(&rng);
    for (int trial = 0; trial < 100; trial++) {
        size_t n = (size_t)(fx_test_rng_u64(&rng) % (trial < 50 ? 300 : sizeof msg));
        uint8_t a[FX_SHA256_BYTES], b[FX_SHA256_BYTES];
        digest_with(msg, n, 0, a);
        digest_with(msg, n, 1, b);
        CHECK_MSG(!memcmp(a, b, sizeof a), "length %zu: implementations differ", n);
    }
}
