/*
 * fuzz_nats.c — libFuzzer driver for what the NATS engine reads from the
 * broker by itself (include/m0/natsjs.h; the client protocol is libnats's):
 * the answer of a message get ($JS.API.STREAM.MSG.GET, a resume reads a
 * channel's history with it), a delivered message's subject (which the
 * worker turns back into a channel), and the subject tokens and numbers.
 *
 * Input: byte 0 — the payload limit of the message get (0..255 bytes, and
 * 64 KiB when it is 255); the rest, taken whole, as each of: the JSON of a
 * message get's answer; a subject under the prefix "m0"; a token; a number.
 *
 * Asserted:
 *  - a message-get answer gives OK only with a sequence >= 1, a subject and
 *    a payload within the limit; AGAIN only for a 404 with err_code 10037;
 *    ERR always with a reason; nothing leaks (the buffers are the caller's,
 *    reused from input to input);
 *  - a subject (a message get's, or the input) gives a channel only when it
 *    is a valid channel name (m0_sse_channel_error) and the subject is
 *    exactly "m0." and that channel's token: one spelling per name, so an
 *    event cannot come in under two subjects;
 *  - untoken is the inverse of token: whatever it takes, token gives back
 *    byte for byte, and the token of any bytes untokens to them;
 *  - m0_u64_parse agrees with a 128-bit reference.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/buf.h"
#include "m0/natsjs.h"
#include "m0/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "fuzz_nats: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                    \
        }                                                                               \
    } while (0)

static struct m0_nats_got got;      /* reused, as a resume reuses its own */

/* A subject under "m0": a channel only as the rules say. */
static void subject(const char *s, size_t n)
{
    char ch[256];
    size_t clen = 0;
    if (m0_nats_channel(s, n, "m0", ch, sizeof ch, &clen) != M0_OK)
        return;
    CHECK(clen >= 1 && clen <= sizeof ch);
    CHECK(m0_sse_channel_error(ch, clen) == NULL);
    struct m0_buf again = {0};
    m0_nats_subject(&again, "m0", ch, clen);
    CHECK(again.len == n && memcmp(again.data, s, n) == 0);
    m0_buf_free(&again);
}

static void tokens(const char *s, size_t n)
{
    char out[4096];
    size_t len = 0;
    if (n <= sizeof out && m0_nats_untoken(s, n, out, sizeof out, &len) == M0_OK) {
        CHECK(len >= 1 && len <= n);
        struct m0_buf b = {0};
        m0_nats_token(&b, out, len);
        CHECK(b.len == n && memcmp(b.data, s, n) == 0);
        m0_buf_free(&b);
    }
    if (n > 1024)
        return;
    struct m0_buf t = {0};
    m0_nats_token(&t, s, n);
    CHECK(t.len >= n && t.len <= 3 * n);
    if (n > 0) {
        char *back = malloc(n);
        CHECK(back != NULL);
        CHECK(m0_nats_untoken(t.data, t.len, back, n, &len) == M0_OK);
        CHECK(len == n && memcmp(back, s, n) == 0);
        free(back);
    }
    m0_buf_free(&t);
}

static void number(const char *s, size_t n)
{
    uint64_t v = 0;
    int rc = m0_u64_parse(s, n, &v);
    int ok = n >= 1 && n <= 20;
    unsigned __int128 ref = 0;
    for (size_t i = 0; ok && i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            ok = 0;
        else
            ref = ref * 10 + (unsigned)(s[i] - '0');
    }
    ok = ok && ref <= UINT64_MAX;
    CHECK(rc == (ok ? M0_OK : M0_ERR));
    if (ok)
        CHECK(v == (uint64_t)ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t max = data[0] == 255 ? 65536 : data[0];
    const char *s = (const char *)data + 1;
    size_t n = size - 1;

    int rc = m0_nats_msg_get_reply(s, n, max, &got);
    if (rc == M0_OK) {
        CHECK(got.seq >= 1);
        CHECK(got.subject.len >= 1);
        CHECK(got.data.len <= max);
        subject(got.subject.data, got.subject.len);
    } else if (rc == M0_AGAIN) {
        CHECK(got.code == 404 && got.err_code == 10037);
    } else {
        CHECK(rc == M0_ERR);
        CHECK(got.why[0] != '\0');
        for (const char *c = got.why; *c; c++)
            CHECK((unsigned char)*c >= 0x20 && (unsigned char)*c != 0x7f);
    }
    if (got.data.cap > 1 << 20)
        m0_buf_free(&got.data);

    subject(s, n);
    tokens(s, n);
    number(s, n);
    return 0;
}
