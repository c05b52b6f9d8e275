/*
 * fuzz_pubreq.c — libFuzzer driver for the publish socket's decoders
 * (include/m0/pubreq.h): the whole input is a request body for
 * m0_pubreq_parse, and also an answer for m0_pubreq_answer.
 *
 * Asserted for the body: the status is 200, 400 or 413; 413 exactly when
 * the body is over M0_PUBREQ_BODY_MAX; a 400 or 413 has an error sentence
 * and no fields; a 200 has a channel that passes the channel rules, data
 * NUL-terminated at its length, an event of one line without NUL (or
 * none), a key NUL-terminated at its length (or none) -- and the encoder
 * writes those fields back into a body that parses to the same ones.
 * For the answer: M0_OK gives a status of 100..999 and a body inside the
 * input; a 200 always has an id > 0. m0_pubreq_free always.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/pubreq.h"
#include "m0/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz_pubreq: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                            \
            abort();                                                                   \
        }                                                                              \
    } while (0)

static int same(const char *a, size_t an, const char *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

static void request_ok(const char *p, size_t n)
{
    struct m0_pubreq r;
    int st = m0_pubreq_parse(&r, p, n);
    CHECK(st == 200 || st == 400 || st == 413);
    CHECK((st == 413) == (n > M0_PUBREQ_BODY_MAX));
    if (st != 200) {
        CHECK(r.err[0] != '\0' && memchr(r.err, '\0', sizeof r.err) != NULL);
        CHECK(r.channel == NULL && r.data == NULL && r.event == NULL && r.key == NULL);
        m0_pubreq_free(&r);
        return;
    }
    CHECK(r.channel != NULL && m0_sse_channel_error(r.channel, r.channel_len) == NULL);
    CHECK(r.channel[r.channel_len] == '\0');
    CHECK(r.data != NULL && r.data[r.data_len] == '\0');
    if (r.event != NULL)
        CHECK(strpbrk(r.event, "\r\n") == NULL);
    if (r.key != NULL)
        CHECK(r.key[r.key_len] == '\0' && strlen(r.key) == r.key_len);
    struct m0_buf b = {0};
    char err[128];
    CHECK(m0_pubreq_encode(&b, r.channel, r.channel_len, r.data, r.data_len, r.event, r.key, err, sizeof err) ==
          M0_OK);
    struct m0_pubreq again;
    if (b.len <= M0_PUBREQ_BODY_MAX) {       /* escapes may make it longer than the input */
        CHECK(m0_pubreq_parse(&again, b.data, b.len) == 200);
        CHECK(same(again.channel, again.channel_len, r.channel, r.channel_len));
        CHECK(same(again.data, again.data_len, r.data, r.data_len));
        CHECK((again.event == NULL) == (r.event == NULL));
        CHECK(r.event == NULL || strcmp(again.event, r.event) == 0);
        CHECK((again.key == NULL) == (r.key == NULL));
        CHECK(r.key == NULL || same(again.key, again.key_len, r.key, r.key_len));
        m0_pubreq_free(&again);
    }
    m0_buf_free(&b);
    m0_pubreq_free(&r);
}

static void answer_ok(const char *p, size_t n)
{
    int st;
    const char *body;
    size_t blen;
    uint64_t id;
    if (m0_pubreq_answer(p, n, &st, &body, &blen, &id) != M0_OK)
        return;
    CHECK(st >= 100 && st <= 999);
    CHECK(body >= p && body + blen <= p + n);
    CHECK(st != 200 || id > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of its own size: ASan sees any read past the end. */
    char *p = malloc(size ? size : 1);
    memcpy(p, data, size);
    request_ok(p, size);
    answer_ok(p, size);
    free(p);
    return 0;
}
