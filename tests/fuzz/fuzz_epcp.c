/*
 * fuzz_epcp.c — libFuzzer driver for EPCP publish bodies
 * (include/m0/epcp.h): the whole input is a body for m0_epcp_parse.
 *
 * Asserted: the status is 200 or 400 (the size is the control port's to
 * bound); a 400 has an error text in Pushpin's wording and no items; a 200
 * has at most M0_EPCP_ITEMS_MAX items, each with a channel the bus takes
 * (m0_sse_channel_error), at least one format, every byte string NUL-terminated
 * at its length, http-response codes 200..599 and header names that are
 * tokens and values that are field values (so they can go on the wire),
 * ws-message ping/pong payloads of at most 125 bytes and text payloads
 * that are UTF-8. Each item of a 200 then goes through the bus frame
 * (include/m0/grip_item.h): it encodes exactly when it has a format a hold
 * takes, decodes back to the same formats, and every shorter prefix of
 * its frame is refused. m0_epcp_free always.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "m0/epcp.h"
#include "m0/grip_item.h"
#include "m0/http.h"
#include "m0/sse.h"
#include "m0/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_epcp: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                          \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static void bytes_ok(struct m0_epcp_bytes b)
{
    CHECK(b.len == 0 || b.p != NULL);
    if (b.p != NULL)
        CHECK(b.p[b.len] == '\0');
}

static void item_ok(const struct m0_epcp_item *it)
{
    CHECK(it->channel.len > 0);
    CHECK(m0_sse_channel_error(it->channel.p, it->channel.len) == NULL);
    bytes_ok(it->channel);
    bytes_ok(it->id);
    bytes_ok(it->prev_id);
    CHECK(it->has_id || it->id.p == NULL);
    CHECK(it->stream.present || it->response.present || it->ws.present);
    CHECK(it->nmeta <= M0_EPCP_META_MAX);
    for (unsigned i = 0; i < it->nmeta; i++) {
        bytes_ok(it->meta[i].name);
        bytes_ok(it->meta[i].value);
    }
    if (it->stream.present)
        bytes_ok(it->stream.content);
    const struct m0_epcp_response *r = &it->response;
    if (r->present && r->action == M0_EPCP_SEND) {
        CHECK(r->code >= 200 && r->code <= 599);
        bytes_ok(r->reason);
        bytes_ok(r->body);
        CHECK(r->reason.p == NULL || m0_http_is_field_value(r->reason.p, r->reason.len));
        CHECK(r->nheaders <= M0_EPCP_HEADERS_MAX);
        for (unsigned i = 0; i < r->nheaders; i++) {
            CHECK(m0_http_is_token(r->headers[i].name.p, r->headers[i].name.len));
            CHECK(m0_http_is_field_value(r->headers[i].value.p, r->headers[i].value.len));
        }
    }
    const struct m0_epcp_ws *w = &it->ws;
    if (w->present) {
        bytes_ok(w->content);
        bytes_ok(w->reason);
        if (w->action == M0_EPCP_SEND) {
            CHECK(w->type == M0_EPCP_WS_TEXT || w->type == M0_EPCP_WS_BINARY ||
                  w->type == M0_EPCP_WS_PING || w->type == M0_EPCP_WS_PONG);
            if (w->type == M0_EPCP_WS_PING || w->type == M0_EPCP_WS_PONG)
                CHECK(w->content.len <= 125);
            if (w->type == M0_EPCP_WS_TEXT)
                CHECK(m0_ws_utf8_valid(w->content.p, w->content.len));
        }
        if (w->action == M0_EPCP_CLOSE)
            CHECK(w->close_code >= -1 && w->close_code <= 65535);
    }
}

static int same(struct m0_grip_view v, struct m0_epcp_bytes b)
{
    return v.n == b.len && (b.len == 0 || memcmp(v.p, b.p, b.len) == 0);
}

/* The item through the bus frame and back. */
static void frame_ok(const struct m0_epcp_item *it)
{
    const struct m0_epcp_stream *st = &it->stream;
    int stream = st->present && st->action == M0_EPCP_SEND;
    int close = st->present && st->action == M0_EPCP_CLOSE;
    int response = it->response.present && it->response.action == M0_EPCP_SEND;
    int ws = it->ws.present && it->ws.action == M0_EPCP_SEND;
    struct m0_buf f = {0};
    int rc = m0_grip_item_encode(&f, it);
    CHECK((rc == M0_OK) == (stream || close || response || ws));
    if (rc != M0_OK) {
        m0_buf_free(&f);
        return;
    }
    static struct m0_grip_item d;
    CHECK(m0_grip_item_decode(f.data, f.len, &d) == M0_OK);
    CHECK(!!(d.flags & M0_GRIP_IT_STREAM) == stream);
    CHECK(!!(d.flags & M0_GRIP_IT_RESPONSE) == response);
    CHECK(!!(d.flags & M0_GRIP_IT_WS) == ws);
    if (stream)
        CHECK(same(d.content, st->content));
    if (ws) {
        CHECK(d.ws_opcode == (int)it->ws.type);
        CHECK(same(d.ws_content, it->ws.content));
    } else {
        CHECK(d.ws_opcode == 0 && d.ws_content.n == 0);
    }
    if (it->channel.len <= 0xffff)
        CHECK(same(d.channel, it->channel));
    for (size_t n = 0; n < f.len; n += 1 + n / 8)
        CHECK(m0_grip_item_decode(f.data, n, &d) == M0_ERR);
    m0_buf_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct m0_epcp_publish p;
    int st = m0_epcp_parse(&p, (const char *)data, size);
    CHECK(st == 200 || st == 400);
    if (st == 200) {
        CHECK(p.nitems <= M0_EPCP_ITEMS_MAX);
        for (unsigned i = 0; i < p.nitems; i++) {
            item_ok(&p.items[i]);
            frame_ok(&p.items[i]);
        }
    } else {
        CHECK(p.nitems == 0);
        CHECK(memchr(p.err, '\0', sizeof p.err) != NULL);
        if (st == 400)
            CHECK(strcmp(p.err, "Body is not valid JSON.") == 0 ||
                  strncmp(p.err, "Invalid format", 14) == 0);
    }
    m0_epcp_free(&p);
    return 0;
}
