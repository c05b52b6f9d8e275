/*
 * fuzz_woh.c — libFuzzer driver for WebSocket-over-HTTP's codec
 * (include/m0/woh.h): the application/websocket-events bodies a view
 * answers, the "c:" control messages in them, the grip extension's
 * parameters and the Content-Type test. The whole input goes through each.
 *
 * 1. Events. m0_woh_next over the input, as m0_woh_well_formed walks a
 *    view's answer, must accept exactly what a reference decoder here
 *    accepts (a name line of [A-Z0-9_-]+, optionally a space and 1..8 hex
 *    digits, CRLF; then that many bytes and CRLF), with the same events:
 *    type, content (a span inside the input) and has_content; the offset
 *    strictly grows. The events of an accepted body (names this protocol
 *    defines), written again with m0_woh_put, decode to the same events.
 * 2. Control messages. Each TEXT event starting with "c:", and the whole
 *    input, go through m0_woh_control with one m0_woh_ctl reused (its
 *    buffers reset, never leaked). M0_OK: a known type; subscribe and
 *    unsubscribe have a non-empty channel, which JSON-encoded again parses
 *    to the same one; a keep-alive's opcode is text, binary, ping or pong
 *    and its timeout 1..7 days. M0_ERR: a reason is given.
 * 3. The grip extension: 1, 0 or M0_ERR; on 1 the prefix (written into a
 *    buffer of exactly M0_WOH_PREFIX_MAX bytes) is at most that long.
 * 4. m0_woh_is_content_type agrees with a reference.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "m0/buf.h"
#include "m0/woh.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz_woh: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                            \
            abort();                                                                   \
        }                                                                              \
    } while (0)

#define MAX_EVENTS 4096

struct ref_event {
    int type;
    size_t at, len;        /* content: input offset, bytes */
    int has_content;
};

static const char *const ref_names[] = {"", "OPEN", "TEXT", "BINARY", "PING", "PONG", "CLOSE", "DISCONNECT"};

static int ref_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The reference decoder: the events into ev (at most MAX_EVENTS, *k of
 * them); 1 for a well-formed body, 0 for one that is not. */
static int ref_decode(const char *p, size_t n, struct ref_event *ev, size_t *k)
{
    size_t at = 0;
    *k = 0;
    while (at < n) {
        size_t i = at;
        while (i < n && ((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '-' || p[i] == '_'))
            i++;
        if (i == at || i >= n)
            return 0;
        struct ref_event e = {0};
        for (size_t t = 1; t < sizeof ref_names / sizeof ref_names[0]; t++) {
            if (strlen(ref_names[t]) == i - at && memcmp(ref_names[t], p + at, i - at) == 0)
                e.type = (int)t;
        }
        if (p[i] == ' ') {
            size_t d = ++i;
            uint64_t len = 0;
            while (i < n && ref_hex(p[i]) >= 0)
                len = len * 16 + (uint64_t)ref_hex(p[i++]);
            if (i == d || i - d > 8 || n - i < 2 || p[i] != '\r' || p[i + 1] != '\n')
                return 0;
            i += 2;
            if (len > n - i || n - i - len < 2 || p[i + len] != '\r' || p[i + len + 1] != '\n')
                return 0;
            e.at = i;
            e.len = (size_t)len;
            e.has_content = 1;
            at = i + len + 2;
        } else {
            if (n - i < 2 || p[i] != '\r' || p[i + 1] != '\n')
                return 0;
            at = i + 2;
        }
        if (*k < MAX_EVENTS)
            ev[(*k)++] = e;
    }
    return 1;
}

static void control_ok(const char *p, size_t n, struct m0_woh_ctl *ctl)
{
    const char *why = (const char *)1;
    if (m0_woh_control(p, n, ctl, &why) != M0_OK) {
        CHECK(why != NULL && why != (const char *)1 && why[0] != '\0');
        return;
    }
    CHECK(why == NULL);
    CHECK(ctl->type >= M0_WOH_CTL_SUBSCRIBE && ctl->type <= M0_WOH_CTL_FLUSH_DELAYED);
    if (ctl->type == M0_WOH_CTL_SUBSCRIBE || ctl->type == M0_WOH_CTL_UNSUBSCRIBE) {
        CHECK(ctl->channel.len > 0);
        /* The channel as gripcontrol would write it again. */
        json_t *o = json_pack("{s:s, s:s%}", "type", ctl->type == M0_WOH_CTL_SUBSCRIBE ? "subscribe" : "unsubscribe",
                              "channel", ctl->channel.data, ctl->channel.len);
        CHECK(o != NULL);
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        CHECK(s != NULL);
        struct m0_woh_ctl again = {0};
        CHECK(m0_woh_control(s, strlen(s), &again, &why) == M0_OK);
        CHECK(again.type == ctl->type && again.channel.len == ctl->channel.len &&
              memcmp(again.channel.data, ctl->channel.data, ctl->channel.len) == 0);
        m0_woh_ctl_free(&again);
        free(s);
    } else if (ctl->type == M0_WOH_CTL_KEEP_ALIVE) {
        CHECK(ctl->opcode == 1 || ctl->opcode == 2 || ctl->opcode == 9 || ctl->opcode == 10);
        CHECK(ctl->timeout_s >= 1 && ctl->timeout_s <= 7 * 24 * 3600);
        CHECK(ctl->has_content || ctl->content.len == 0);
        CHECK(ctl->interval == 0 || ctl->interval == 1);
    }
}

static void events_ok(const char *p, size_t n, struct m0_woh_ctl *ctl)
{
    static struct ref_event ref[MAX_EVENTS];
    size_t k = 0;
    int ref_ok = ref_decode(p, n, ref, &k);
    size_t off = 0, got = 0, last = 0;
    int rc, defined_only = 1;
    struct m0_woh_event ev;
    struct m0_buf again = {0};
    while ((rc = m0_woh_next(p, n, &off, &ev)) == 1) {
        CHECK(off > last && off <= n);
        last = off;
        CHECK(ev.type >= M0_WOH_OTHER && ev.type <= M0_WOH_DISCONNECT);
        if (ev.has_content)
            CHECK(ev.content >= p && ev.content + ev.len <= p + n);
        else
            CHECK(ev.content == NULL && ev.len == 0);
        if (got < k) {
            CHECK((int)ev.type == ref[got].type && ev.has_content == ref[got].has_content);
            CHECK(!ev.has_content || (ev.content == p + ref[got].at && ev.len == ref[got].len));
        }
        got++;
        if (ev.type == M0_WOH_OTHER)
            defined_only = 0;
        else
            m0_woh_put(&again, ev.type, ev.has_content ? ev.content : NULL, ev.len);
        if (ev.type == M0_WOH_TEXT && ev.len >= 2 && ev.content[0] == 'c' && ev.content[1] == ':')
            control_ok(ev.content + 2, ev.len - 2, ctl);
    }
    CHECK(rc == 0 || rc == M0_ERR);
    CHECK((rc == 0) == ref_ok);
    if (rc == 0) {
        CHECK(off == n);
        if (k < MAX_EVENTS)
            CHECK(got == k);
    }
    if (rc == 0 && defined_only) {
        /* Written again, the same events. */
        size_t o1 = 0, o2 = 0;
        struct m0_woh_event a, b;
        const char *q = again.data != NULL ? again.data : "";
        for (;;) {
            int r1 = m0_woh_next(p, n, &o1, &a), r2 = m0_woh_next(q, again.len, &o2, &b);
            CHECK(r1 == r2 && r1 >= 0);
            if (r1 == 0)
                break;
            CHECK(a.type == b.type && a.has_content == b.has_content && a.len == b.len);
            CHECK(a.len == 0 || memcmp(a.content, b.content, a.len) == 0);
        }
        CHECK(o2 == again.len);
    }
    m0_buf_free(&again);
}

static void extension_ok(const char *p, size_t n)
{
    char *prefix = malloc(M0_WOH_PREFIX_MAX);      /* exact size: ASan sees a write past it */
    size_t plen = 99999;
    int r = m0_woh_grip_extension(p, n, prefix, &plen);
    CHECK(r == 1 || r == 0 || r == M0_ERR);
    if (r == 1)
        CHECK(plen <= M0_WOH_PREFIX_MAX);
    free(prefix);
}

static void content_type_ok(const char *p, size_t n)
{
    static const char ct[] = "application/websocket-events";
    size_t i = 0, l = sizeof ct - 1;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    int want = 0;
    if (n - i >= l && strncasecmp(p + i, ct, l) == 0) {
        i += l;
        while (i < n && (p[i] == ' ' || p[i] == '\t'))
            i++;
        want = i == n || p[i] == ';';
    }
    CHECK(m0_woh_is_content_type(p, n) == want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of its own size: ASan sees any read past the end. */
    char *p = malloc(size ? size : 1);
    memcpy(p, data, size);
    struct m0_woh_ctl ctl = {0};
    events_ok(p, size, &ctl);
    control_ok(p, size, &ctl);
    m0_woh_ctl_free(&ctl);
    extension_ok(p, size);
    content_type_ok(p, size);
    free(p);
    return 0;
}
