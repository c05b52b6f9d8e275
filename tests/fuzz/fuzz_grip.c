/*
 * fuzz_grip.c — libFuzzer driver for the GRIP instruction headers and
 * templates (include/m0/grip.h).
 *
 * 1. Fields. The input is lines ("\n"-separated) of "Name:value"; each goes
 *    to m0_grip_field (until the first error), then m0_grip_finish.
 *    Asserted on success: every span lies inside the store; a hold has a
 *    channel; channel names pass m0_sse_channel_error and are distinct;
 *    prev-ids, keep-alive data, links, meta fit their limits; timeouts are
 *    at least their minimums; a status is 0 or 200..599. On failure: a
 *    reason is given. m0_grip_is_field agrees with the "Grip-" prefix.
 * 2. Templates. The whole input goes through m0_grip_render_content and
 *    m0_grip_render_id (any outcome but a crash is fine; a success never
 *    shrinks "%%"-free input).
 * 3. Base64. The input's first 96 bytes, encoded by a reference encoder
 *    here, decode back to themselves (padded and unpadded).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "m0/buf.h"
#include "m0/base64.h"
#include "m0/grip.h"
#include "m0/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_grip: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                          \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static void span_ok(const struct m0_grip *g, struct m0_grip_span s, size_t max)
{
    CHECK((size_t)s.off + s.len <= g->store.len);
    CHECK(s.len <= max);
}

static void check_grip(const struct m0_grip *g)
{
    CHECK(g->nchannels <= M0_GRIP_CHANNELS_MAX);
    CHECK(g->hold == M0_GRIP_HOLD_NONE || g->nchannels >= 1);
    for (unsigned i = 0; i < g->nchannels; i++) {
        const struct m0_grip_channel *c = &g->channels[i];
        span_ok(g, c->name, M0_CHANNEL_MAX);
        CHECK(m0_sse_channel_error(m0_grip_str(g, c->name), c->name.len) == NULL);
        CHECK(c->nfilters <= M0_GRIP_FILTERS_MAX);
        if (c->has_prev_id)
            span_ok(g, c->prev_id, M0_GRIP_ID_MAX);
        for (unsigned j = 0; j < i; j++) {
            const struct m0_grip_channel *d = &g->channels[j];
            CHECK(d->name.len != c->name.len ||
                  memcmp(m0_grip_str(g, d->name), m0_grip_str(g, c->name), c->name.len) != 0);
        }
    }
    CHECK(g->timeout >= M0_GRIP_TIMEOUT_MIN && g->timeout <= M0_GRIP_SECONDS_MAX);
    if (g->ka_mode != M0_GRIP_KA_NONE) {
        CHECK(g->ka_data.len >= 1);
        span_ok(g, g->ka_data, M0_GRIP_KEEPALIVE_MAX);
        CHECK(g->ka_timeout >= 1 && g->ka_timeout <= M0_GRIP_SECONDS_MAX);
    }
    CHECK(g->status == 0 || (g->status >= 200 && g->status <= 599));
    span_ok(g, g->reason, 256);
    span_ok(g, g->next_link, M0_GRIP_LINK_MAX);
    span_ok(g, g->gone_link, M0_GRIP_LINK_MAX);
    if (g->next_link.len > 0)
        CHECK(g->next_timeout >= 0 && g->next_timeout <= M0_GRIP_SECONDS_MAX);
    CHECK(g->nmeta <= M0_GRIP_META_MAX);
    for (unsigned i = 0; i < g->nmeta; i++) {
        span_ok(g, g->meta[i].key, M0_GRIP_META_LEN_MAX);
        CHECK(g->meta[i].key.len >= 1);
        span_ok(g, g->meta[i].value, M0_GRIP_META_LEN_MAX);
    }
    CHECK(g->nexpose <= M0_GRIP_EXPOSE_MAX);
    for (unsigned i = 0; i < g->nexpose; i++)
        span_ok(g, g->expose[i], 1 << 20);
}

static void fields(const uint8_t *data, size_t size)
{
    struct m0_grip g = {0};
    m0_grip_init(&g);
    const char *p = (const char *)data, *end = p + size, *why = NULL;
    int ok = 1;
    while (p < end && ok) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl != NULL ? nl : end;
        const char *colon = memchr(p, ':', (size_t)(e - p));
        if (colon != NULL) {
            size_t nlen = (size_t)(colon - p);
            CHECK(m0_grip_is_field(p, nlen) == (nlen >= 5 && strncasecmp(p, "grip-", 5) == 0));
            why = NULL;
            if (m0_grip_field(&g, p, nlen, colon + 1, (size_t)(e - colon - 1), &why) != M0_OK) {
                CHECK(why != NULL && why[0] != '\0');
                ok = 0;
            } else {
                CHECK(why == NULL);
            }
        }
        p = e + (nl != NULL);
    }
    if (ok) {
        if (m0_grip_finish(&g, &why) == M0_OK)
            check_grip(&g);
        else
            CHECK(why != NULL && why[0] != '\0');
    }
    m0_grip_free(&g);
}

static const char *lookup(void *ctx, const char *name, size_t nlen, size_t *vlen)
{
    (void)ctx;
    if (nlen > 0 && name[0] == 'x')
        return NULL;
    *vlen = nlen;
    return name;
}

static void templates(const uint8_t *data, size_t size)
{
    struct m0_buf b = {0};
    const char *why = NULL;
    const char *s = (const char *)data;
    if (m0_grip_render_content(&b, s, size, "ID", 2, &why) == M0_OK) {
        if (memchr(s, '%', size) == NULL)
            CHECK(b.len == size && (size == 0 || memcmp(b.data, s, size) == 0));
    } else {
        CHECK(why != NULL);
    }
    m0_buf_reset(&b);
    if (m0_grip_render_id(&b, s, size, lookup, NULL, &why) != M0_OK)
        CHECK(why != NULL);
    m0_buf_free(&b);
}

static size_t ref_encode(const uint8_t *in, size_t n, char *out, int pad)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[k++] = tbl[v >> 18 & 63], out[k++] = tbl[v >> 12 & 63];
        out[k++] = tbl[v >> 6 & 63], out[k++] = tbl[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[k++] = tbl[v >> 18 & 63], out[k++] = tbl[v >> 12 & 63];
        if (pad)
            out[k++] = '=', out[k++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[k++] = tbl[v >> 18 & 63], out[k++] = tbl[v >> 12 & 63], out[k++] = tbl[v >> 6 & 63];
        if (pad)
            out[k++] = '=';
    }
    return k;
}

static void base64(const uint8_t *data, size_t size)
{
    size_t n = size < 96 ? size : 96;
    char enc[132];
    uint8_t dec[96];
    for (int pad = 0; pad <= 1; pad++) {
        size_t k = ref_encode(data, n, enc, pad);
        ssize_t got = m0_base64_decode(enc, k, M0_B64_PAD, (unsigned char *)dec, sizeof dec);
        CHECK(got == (ssize_t)n);
        CHECK(n == 0 || memcmp(dec, data, n) == 0);
    }
    /* Arbitrary input: never writes past cap. */
    uint8_t small[8];
    ssize_t got = m0_base64_decode((const char *)data, size, M0_B64_PAD, (unsigned char *)small, sizeof small);
    CHECK(got >= -1 && got <= (ssize_t)sizeof small);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fields(data, size);
    templates(data, size);
    base64(data, size);
    return 0;
}
