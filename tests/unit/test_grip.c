/*
 * test_grip.c — GRIP instruction headers (src/proto/grip.c). The vectors marked
 * "captured" are the header sets django-eventstream 5.3.4 (its events view)
 * and django-grip 3.5.2 (set_hold_longpoll / set_hold_stream) emitted
 * behind GripMiddleware with GRIP_URL set, verbatim; the rest are Pushpin's
 * grammar and its error cases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/buf.h"
#include "m0/base64.h"
#include "m0/grip.h"

struct field {
    const char *name, *value;
};

/* Feed fields (ending with {NULL}) and finish; returns M0_OK or M0_ERR
 * with *why. */
static int feed(struct m0_grip *g, const struct field *f, const char **why)
{
    m0_grip_init(g);
    for (; f->name != NULL; f++) {
        if (m0_grip_field(g, f->name, strlen(f->name), f->value, strlen(f->value), why) != M0_OK)
            return M0_ERR;
    }
    return m0_grip_finish(g, why);
}

/* Only the error matters: the reason names what was wrong. */
static const char *refused(const struct field *f)
{
    struct m0_grip g = {0};
    const char *why = NULL;
    int r = feed(&g, f, &why);
    m0_grip_free(&g);
    assert_int_equal(r, M0_ERR);
    assert_non_null(why);
    return why;
}

static int span_is(const struct m0_grip *g, struct m0_grip_span s, const char *want)
{
    return s.len == strlen(want) && memcmp(m0_grip_str(g, s), want, s.len) == 0;
}

#define ES_LINK "/events/?link=next&recover=true&es-meta=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." \
                "eyJpc3MiOiJlcyIsImV4cCI6MTc5NjE1MTAwMywiY2hhbm5lbHMiOlsidGVzdCJdLCJ1c2VyIjoiYW5v" \
                "bnltb3VzIn0.23pk9aAjHtRqiufR-dGh6lxR3DAm8FO6PO-3CN66xdY"

/* captured: django-eventstream's events view, first connection. */
static const struct field es_first[] = {
    {"Content-Type", "text/event-stream"},
    {"Cache-Control", "no-cache"},
    {"X-Accel-Buffering", "no"},
    {"Grip-Hold", "stream"},
    {"Grip-Channel", "events-test; prev-id=0; filter=build-id; filter=skip-users, user-anonymous; "
                     "filter=require-sub"},
    {"Grip-Keep-Alive", "event: keep-alive\\ndata:\\n\\n; format=cstring; timeout=20"},
    {"Grip-Set-Meta", "id_format=\"test:%(events-test)s\", user=\"anonymous\""},
    {"Grip-Link", "<" ES_LINK ">; rel=next"},
    {NULL, NULL},
};

static void test_django_eventstream_stream_hold(void **state)
{
    (void)state;
    struct m0_grip g = {0};
    const char *why = NULL;
    assert_int_equal(feed(&g, es_first, &why), M0_OK);
    assert_null(why);
    assert_int_equal(g.hold, M0_GRIP_HOLD_STREAM);
    assert_int_equal(g.nchannels, 2);
    assert_true(span_is(&g, g.channels[0].name, "events-test"));
    assert_true(g.channels[0].has_prev_id);
    assert_true(span_is(&g, g.channels[0].prev_id, "0"));
    assert_int_equal(g.channels[0].filters, M0_GRIP_F_BUILD_ID | M0_GRIP_F_SKIP_USERS);
    assert_true(span_is(&g, g.channels[1].name, "user-anonymous"));
    assert_false(g.channels[1].has_prev_id);
    assert_int_equal(g.channels[1].filters, M0_GRIP_F_REQUIRE_SUB);
    assert_int_equal(g.ka_mode, M0_GRIP_KA_IDLE);
    assert_true(span_is(&g, g.ka_data, "event: keep-alive\ndata:\n\n"));
    assert_int_equal(g.ka_timeout, 20);
    size_t len = 0;
    const char *v = m0_grip_meta_get(&g, "id_format", 9, &len);
    assert_non_null(v);
    assert_int_equal(len, strlen("test:%(events-test)s"));
    assert_memory_equal(v, "test:%(events-test)s", len);
    v = m0_grip_meta_get(&g, "user", 4, &len);
    assert_non_null(v);
    assert_memory_equal(v, "anonymous", len);
    assert_null(m0_grip_meta_get(&g, "nope", 4, &len));
    assert_true(span_is(&g, g.next_link, ES_LINK));
    assert_int_equal(g.next_timeout, M0_GRIP_NEXT_TIMEOUT_DEFAULT);
    assert_int_equal(g.gone_link.len, 0);
    assert_int_equal(g.status, 0);
    assert_int_equal(g.timeout, M0_GRIP_TIMEOUT_DEFAULT);
    m0_grip_free(&g);
}

static void test_which_fields_are_stripped(void **state)
{
    (void)state;
    for (const struct field *f = es_first; f->name != NULL; f++)
        assert_int_equal(m0_grip_is_field(f->name, strlen(f->name)), strncmp(f->name, "Grip-", 5) == 0);
    assert_true(m0_grip_is_field("grip-sig", 8));
    assert_true(m0_grip_is_field("GRIP-Anything", 13));
    assert_true(m0_grip_is_field("Grip-", 5));
    assert_false(m0_grip_is_field("Grip", 4));
    assert_false(m0_grip_is_field("Gripe", 5));
    assert_false(m0_grip_is_field("X-Grip-Hold", 11));
}

/* captured: django-grip set_hold_longpoll(request, ["lp", Channel("lp2",
 * prev_id="7")], timeout=30). */
static void test_django_grip_longpoll(void **state)
{
    (void)state;
    static const struct field f[] = {
        {"Content-Type", "text/plain"},
        {"Grip-Hold", "response"},
        {"Grip-Channel", "lp, lp2; prev-id=7"},
        {"Grip-Timeout", "30"},
        {NULL, NULL},
    };
    struct m0_grip g = {0};
    const char *why = NULL;
    assert_int_equal(feed(&g, f, &why), M0_OK);
    assert_int_equal(g.hold, M0_GRIP_HOLD_RESPONSE);
    assert_int_equal(g.nchannels, 2);
    assert_true(span_is(&g, g.channels[0].name, "lp"));
    assert_false(g.channels[0].has_prev_id);
    assert_true(span_is(&g, g.channels[1].name, "lp2"));
    assert_true(span_is(&g, g.channels[1].prev_id, "7"));
    assert_int_equal(g.timeout, 30);
    assert_int_equal(g.ka_mode, M0_GRIP_KA_NONE);
    m0_grip_free(&g);
}

/* captured: set_hold_stream(request, "st", keep_alive_data=..., 20). */
static void test_django_grip_stream_keepalive(void **state)
{
    (void)state;
    static const struct field f[] = {
        {"Grip-Hold", "stream"},
        {"Grip-Channel", "st"},
        {"Grip-Keep-Alive", "event: keep-alive\\ndata:\\n\\n; format=cstring; timeout=20"},
        {NULL, NULL},
    };
    struct m0_grip g = {0};
    const char *why = NULL;
    assert_int_equal(feed(&g, f, &why), M0_OK);
    assert_int_equal(g.nchannels, 1);
    assert_true(span_is(&g, g.ka_data, "event: keep-alive\ndata:\n\n"));
    assert_int_equal(g.ka_timeout, 20);
    m0_grip_free(&g);
}

/* captured: django-grip 3.5.2 formats binary keep-alive data with
 * "%s" % b64encode(data), so Python 3 sends the bytes' repr. That is not
 * base64 (Pushpin would skip the quote characters and decode "bAQI=" into
 * other bytes); it is refused. The real base64 of the same bytes decodes. */
static void test_django_grip_base64_keepalive_repr_refused(void **state)
{
    (void)state;
    static const struct field repr[] = {
        {"Grip-Hold", "stream"},
        {"Grip-Channel", "st"},
        {"Grip-Keep-Alive", "b'AQI='; format=base64; timeout=15"},
        {NULL, NULL},
    };
    assert_string_equal(refused(repr), "failed to parse Grip-Keep-Alive base64 format");
    static const struct field ok[] = {
        {"Grip-Hold", "stream"},
        {"Grip-Channel", "st"},
        {"Grip-Keep-Alive", "AQI=; format=base64; timeout=15; mode=interval"},
        {NULL, NULL},
    };
    struct m0_grip g = {0};
    const char *why = NULL;
    assert_int_equal(feed(&g, ok, &why), M0_OK);
    assert_int_equal(g.ka_data.len, 2);
    assert_memory_equal(m0_grip_str(&g, g.ka_data), "\x01\x02", 2);
    assert_int_equal(g.ka_mode, M0_GRIP_KA_INTERVAL);
    assert_int_equal(g.ka_timeout, 15);
    m0_grip_free(&g);
}

/* Repeated and comma-separated Grip-Channel, per-channel parameters, the
 * keep-alive formats and defaults. */
static void test_channels_and_keepalive_grammar(void **state)
{
    (void)state;
    static const struct field f[] = {
        {"Grip-Hold", "response"},
        {"Grip-Channel", "apple; prev-id=item1; filter=skip-self"},
        {"grip-channel", " banana ;filter=var-subst , cherry; filter=mine; filter=build-id; x=y,,"},
        {"Grip-Channel", "quoted; prev-id=\"a;b,c\\\"d\""},
        {"Grip-Keep-Alive", "ping1\\n; timeout=10"},
        {NULL, NULL},
    };
    struct m0_grip g = {0};
    const char *why = NULL;
    assert_int_equal(feed(&g, f, &why), M0_OK);
    assert_int_equal(g.nchannels, 4);
    assert_true(span_is(&g, g.channels[0].name, "apple"));
    assert_true(span_is(&g, g.channels[0].prev_id, "item1"));
    assert_int_equal(g.channels[0].filters, M0_GRIP_F_SKIP_SELF);
    assert_true(span_is(&g, g.channels[1].name, "banana"));
    assert_int_equal(g.channels[1].filters, M0_GRIP_F_VAR_SUBST);
    assert_true(span_is(&g, g.channels[2].name, "cherry"));
    assert_int_equal(g.channels[2].filters, M0_GRIP_F_OTHER | M0_GRIP_F_BUILD_ID);
    assert_true(span_is(&g, g.channels[3].prev_id, "a;b,c\"d"));
    /* raw: the bytes as given, backslash and all */
    assert_true(span_is(&g, g.ka_data, "ping1\\n"));
    assert_int_equal(g.ka_timeout, 10);
    assert_int_equal(g.ka_mode, M0_GRIP_KA_IDLE);

    static const struct field cs[] = {
        {"Grip-Keep-Alive", "a\\\\b\\r\\n\\x41\\x7e; format=cstring"},
        {NULL, NULL},
    };
    assert_int_equal(feed(&g, cs, &why), M0_OK);
    assert_true(span_is(&g, g.ka_data, "a\\b\r\nA~"));
    assert_int_equal(g.ka_timeout, M0_GRIP_KEEPALIVE_DEFAULT);
    assert_int_equal(g.hold, M0_GRIP_HOLD_NONE);

    static const struct field b64[] = {
        {"Grip-Keep-Alive", "cGluZzMK; format=base64; timeout=0"},
        {NULL, NULL},
    };
    assert_int_equal(feed(&g, b64, &why), M0_OK);
    assert_true(span_is(&g, g.ka_data, "ping3\n"));
    assert_int_equal(g.ka_timeout, 1);     /* raised to 1 second, as Pushpin does */
    m0_grip_free(&g);
}

/* A channel named twice is one subscription; the later entry's parameters
 * win. The store keeps every span valid as it grows. */
static void test_duplicate_channel_and_many_channels(void **state)
{
    (void)state;
    struct m0_grip g = {0};
    const char *why = NULL;
    m0_grip_init(&g);
    const char *v = "a; prev-id=1, b, a; prev-id=2";
    assert_int_equal(m0_grip_field(&g, "Grip-Channel", 12, v, strlen(v), &why), M0_OK);
    assert_int_equal(g.nchannels, 2);
    assert_true(span_is(&g, g.channels[0].name, "a"));
    assert_true(span_is(&g, g.channels[0].prev_id, "2"));

    m0_grip_init(&g);
    char name[32], big[64 * 40];
    size_t k = 0;
    for (int i = 0; i < M0_GRIP_CHANNELS_MAX; i++)
        k += (size_t)snprintf(big + k, sizeof big - k, "%schannel-%03d; prev-id=%d", i ? ", " : "", i, i);
    assert_int_equal(m0_grip_field(&g, "Grip-Channel", 12, big, k, &why), M0_OK);
    assert_int_equal(g.nchannels, M0_GRIP_CHANNELS_MAX);
    for (int i = 0; i < M0_GRIP_CHANNELS_MAX; i++) {
        snprintf(name, sizeof name, "channel-%03d", i);
        assert_true(span_is(&g, g.channels[i].name, name));
    }
    assert_int_equal(m0_grip_field(&g, "Grip-Channel", 12, "one-more", 8, &why), M0_ERR);
    assert_string_equal(why, "more than 64 Grip-Channel entries");
    m0_grip_free(&g);
}

static void test_timeouts(void **state)
{
    (void)state;
    struct m0_grip g = {0};
    const char *why = NULL;
    static const struct field shortf[] = {
        {"Grip-Hold", "response"}, {"Grip-Channel", "c"}, {"Grip-Timeout", " 2 "}, {NULL, NULL}};
    assert_int_equal(feed(&g, shortf, &why), M0_OK);
    assert_int_equal(g.timeout, M0_GRIP_TIMEOUT_MIN);
    static const struct field huge[] = {
        {"Grip-Hold", "response"}, {"Grip-Channel", "c"}, {"Grip-Timeout", "99999999999999999999"},
        {NULL, NULL}};
    assert_int_equal(feed(&g, huge, &why), M0_OK);
    assert_int_equal(g.timeout, M0_GRIP_SECONDS_MAX);
    /* The first Grip-Timeout (and Grip-Hold) counts, as Pushpin reads them. */
    static const struct field twice[] = {
        {"Grip-Hold", "response"}, {"Grip-Hold", "bogus"}, {"Grip-Channel", "c"},
        {"Grip-Timeout", "70"}, {"Grip-Timeout", "x"}, {NULL, NULL}};
    assert_int_equal(feed(&g, twice, &why), M0_OK);
    assert_int_equal(g.hold, M0_GRIP_HOLD_RESPONSE);
    assert_int_equal(g.timeout, 70);
    m0_grip_free(&g);
    static const struct field neg[] = {{"Grip-Timeout", "-1"}, {NULL, NULL}};
    assert_string_equal(refused(neg), "failed to parse Grip-Timeout");
    static const struct field word[] = {{"Grip-Timeout", "soon"}, {NULL, NULL}};
    assert_string_equal(refused(word), "failed to parse Grip-Timeout");
    static const struct field empty[] = {{"Grip-Timeout", ""}, {NULL, NULL}};
    assert_string_equal(refused(empty), "failed to parse Grip-Timeout");
}

/* Grip-Status (django-grip turns a 304 into 200 + Grip-Status: 304). */
static void test_status(void **state)
{
    (void)state;
    struct m0_grip g = {0};
    const char *why = NULL;
    static const struct field s304[] = {{"Grip-Status", "304"}, {NULL, NULL}};
    assert_int_equal(feed(&g, s304, &why), M0_OK);
    assert_int_equal(g.status, 304);
    assert_int_equal(g.reason.len, 0);
    static const struct field s404[] = {{"Grip-Status", "404 Not Here Either"}, {NULL, NULL}};
    assert_int_equal(feed(&g, s404, &why), M0_OK);
    assert_int_equal(g.status, 404);
    assert_true(span_is(&g, g.reason, "Not Here Either"));
    m0_grip_free(&g);
    static const char *bad[] = {"99", "1000", "100", "600", "2x0", "", "abc OK"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct field f[] = {{"Grip-Status", bad[i]}, {NULL, NULL}};
        assert_string_equal(refused(f), "Grip-Status contains invalid status code");
    }
}

static void test_links(void **state)
{
    (void)state;
    struct m0_grip g = {0};
    const char *why = NULL;
    static const struct field f[] = {
        {"Grip-Link", "</next?a=1>; rel=next; timeout=30, <http://example.com/gone>; rel=gone"},
        {"Grip-Link", "</ignored>, </other>; rel=prev"},
        {NULL, NULL},
    };
    assert_int_equal(feed(&g, f, &why), M0_OK);
    assert_true(span_is(&g, g.next_link, "/next?a=1"));
    assert_int_equal(g.next_timeout, 30);
    assert_true(span_is(&g, g.gone_link, "http://example.com/gone"));
    m0_grip_free(&g);
    static const struct field nob[] = {{"Grip-Link", "/next; rel=next"}, {NULL, NULL}};
    assert_string_equal(refused(nob), "failed to parse Grip-Link value");
    static const struct field empty[] = {{"Grip-Link", "<>; rel=next"}, {NULL, NULL}};
    assert_string_equal(refused(empty), "failed to parse Grip-Link value");
    static const struct field sp[] = {{"Grip-Link", "</a b>; rel=next"}, {NULL, NULL}};
    assert_string_equal(refused(sp), "Grip-Link contains invalid link");
    static const struct field to[] = {{"Grip-Link", "</a>; rel=next; timeout=-5"}, {NULL, NULL}};
    assert_string_equal(refused(to), "failed to parse Grip-Link timeout value");
}

static void test_meta_and_expose(void **state)
{
    (void)state;
    struct m0_grip g = {0};
    const char *why = NULL;
    static const struct field f[] = {
        {"Grip-Set-Meta", "a=\"x, y\", b=\"q\\\"z\", plain=v1"},
        {"Grip-Set-Meta", "a=again, empty"},
        {"Grip-Expose-Headers", "Content-Type, X-Thing"},
        {NULL, NULL},
    };
    assert_int_equal(feed(&g, f, &why), M0_OK);
    assert_int_equal(g.nmeta, 4);
    size_t len;
    const char *v = m0_grip_meta_get(&g, "a", 1, &len);
    assert_int_equal(len, 5);
    assert_memory_equal(v, "again", 5);
    v = m0_grip_meta_get(&g, "b", 1, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(v, "q\"z", 3);
    v = m0_grip_meta_get(&g, "plain", 5, &len);
    assert_memory_equal(v, "v1", 2);
    v = m0_grip_meta_get(&g, "empty", 5, &len);
    assert_non_null(v);
    assert_int_equal(len, 0);
    assert_int_equal(g.nexpose, 2);
    assert_true(span_is(&g, g.expose[1], "X-Thing"));
    m0_grip_free(&g);
    static const struct field noname[] = {{"Grip-Set-Meta", "=v"}, {NULL, NULL}};
    assert_string_equal(refused(noname), "failed to parse Grip-Set-Meta");
    static const struct field badx[] = {{"Grip-Expose-Headers", "Not A Name"}, {NULL, NULL}};
    assert_string_equal(refused(badx), "Grip-Expose-Headers lists something that is not a field name");
}

/* What Pushpin answers with 502: each malformed value, with its reason. */
static void test_malformed_values(void **state)
{
    (void)state;
    static const struct {
        struct field f[4];
        const char *why;
    } cases[] = {
        {{{"Grip-Hold", "forever"}, {"Grip-Channel", "c"}, {NULL, NULL}},
         "Grip-Hold must be set to either 'response' or 'stream'"},
        {{{"Grip-Hold", "stream"}, {NULL, NULL}}, "Grip-Hold needs at least one Grip-Channel"},
        {{{"Grip-Hold", "stream"}, {"Grip-Channel", "c; prev-id=1"}, {NULL, NULL}},
         "a Grip-Channel of a stream hold gives prev-id but there is no Grip-Link rel=next to "
         "recover from"},
        {{{"Grip-Channel", "c; prev-id=\"open"}, {NULL, NULL}}, "failed to parse Grip-Channel"},
        {{{"Grip-Channel", "c; prev-id=\"x\" junk"}, {NULL, NULL}}, "failed to parse Grip-Channel"},
        {{{"Grip-Channel", "c; bad name=1"}, {NULL, NULL}}, "failed to parse Grip-Channel"},
        {{{"Grip-Channel", "m0.internal"}, {NULL, NULL}},
         "Grip-Channel names an invalid channel (1..200 bytes of printable ASCII, not m0.*)"},
        {{{"Grip-Channel", "; prev-id=1"}, {NULL, NULL}},
         "Grip-Channel names an invalid channel (1..200 bytes of printable ASCII, not m0.*)"},
        {{{"Grip-Channel", "c; filter=a; filter=b; filter=c; filter=d; filter=e; filter=f"}, {NULL, NULL}},
         "Grip-Channel has more than 5 filters on one channel"},
        {{{"Grip-Keep-Alive", "; timeout=5"}, {NULL, NULL}}, "Grip-Keep-Alive cannot be empty"},
        {{{"Grip-Keep-Alive", "x; format=hex"}, {NULL, NULL}},
         "Grip-Keep-Alive format must be raw, cstring or base64"},
        {{{"Grip-Keep-Alive", "x; mode=sometimes"}, {NULL, NULL}},
         "Grip-Keep-Alive mode must be idle or interval"},
        {{{"Grip-Keep-Alive", "x; timeout=soon"}, {NULL, NULL}},
         "failed to parse Grip-Keep-Alive timeout value"},
        {{{"Grip-Keep-Alive", "a\\tb; format=cstring"}, {NULL, NULL}},
         "failed to parse Grip-Keep-Alive cstring format"},
        {{{"Grip-Keep-Alive", "ab\\; format=cstring"}, {NULL, NULL}},
         "failed to parse Grip-Keep-Alive cstring format"},
        {{{"Grip-Keep-Alive", "\\x4; format=cstring"}, {NULL, NULL}},
         "failed to parse Grip-Keep-Alive cstring format"},
        {{{"Grip-Keep-Alive", "\\xg0; format=cstring"}, {NULL, NULL}},
         "failed to parse Grip-Keep-Alive cstring format"},
        {{{"Grip-Keep-Alive", "====; format=base64"}, {NULL, NULL}},
         "failed to parse Grip-Keep-Alive base64 format"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *why = refused(cases[i].f);
        if (strcmp(why, cases[i].why) != 0)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, why, cases[i].why);
    }
}

/* Not Grip-* fields change nothing; unknown Grip-* fields are ignored. */
static void test_other_fields_ignored(void **state)
{
    (void)state;
    struct m0_grip g = {0};
    const char *why = NULL;
    static const struct field f[] = {
        {"Content-Type", "text/plain"}, {"Channel", "not-grip"}, {"Grip-Future-Thing", "x;;;\"" },
        {NULL, NULL}};
    assert_int_equal(feed(&g, f, &why), M0_OK);
    assert_true(g.any);
    assert_int_equal(g.hold, M0_GRIP_HOLD_NONE);
    assert_int_equal(g.nchannels, 0);
    m0_grip_free(&g);
}

static void test_base64(void **state)
{
    (void)state;
    char out[16];
    assert_int_equal(m0_base64_decode("", 0, M0_B64_PAD, (unsigned char *)out, sizeof out), 0);
    assert_int_equal(m0_base64_decode("/wBiaW4=", 8, M0_B64_PAD, (unsigned char *)out, sizeof out), 5);
    assert_memory_equal(out, "\xff\x00" "bin", 5);
    assert_int_equal(m0_base64_decode("/wBiaW4", 7, M0_B64_PAD, (unsigned char *)out, sizeof out), 5);   /* unpadded */
    assert_int_equal(m0_base64_decode("AA==", 4, M0_B64_PAD, (unsigned char *)out, sizeof out), 1);
    assert_int_equal(m0_base64_decode("AA", 2, M0_B64_PAD, (unsigned char *)out, sizeof out), 1);
    assert_int_equal(m0_base64_decode("A", 1, M0_B64_PAD, (unsigned char *)out, sizeof out), -1);
    assert_int_equal(m0_base64_decode("AA=", 3, M0_B64_PAD, (unsigned char *)out, sizeof out), -1);
    assert_int_equal(m0_base64_decode("A=AA", 4, M0_B64_PAD, (unsigned char *)out, sizeof out), -1);
    assert_int_equal(m0_base64_decode("AA AA", 5, M0_B64_PAD, (unsigned char *)out, sizeof out), -1);
    assert_int_equal(m0_base64_decode("-_8=", 4, M0_B64_PAD, (unsigned char *)out, sizeof out), -1);   /* not url-safe */
    assert_int_equal(m0_base64_decode("AAAAAAAA", 8, M0_B64_PAD, (unsigned char *)out, 5), -1);       /* no room */
    assert_int_equal(m0_base64_decode("AAAAAAAA", 8, M0_B64_PAD, (unsigned char *)out, 6), 6);
}

static const char *lookup(void *ctx, const char *name, size_t nlen, size_t *vlen)
{
    (void)ctx;
    if (nlen == 11 && memcmp(name, "events-test", 11) == 0) {
        *vlen = 1;
        return "2";
    }
    if (nlen == 3 && memcmp(name, "a)b", 3) == 0) {
        *vlen = 2;
        return "ab";
    }
    return NULL;
}

static const char *rendered(struct m0_buf *b)
{
    m0_buf_append(b, "", 1);
    return b->data;
}

/* django-eventstream's id_format meta and its published content (the
 * build-id filter): "%I" becomes the rendered id, "%%" a '%'. */
static void test_templates(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    const char *why = NULL;
    assert_int_equal(m0_grip_render_id(&b, "test:%(events-test)s", 20, lookup, NULL, &why), M0_OK);
    assert_string_equal(rendered(&b), "test:2");
    m0_buf_reset(&b);
    assert_int_equal(m0_grip_render_id(&b, "%(a\\)b)s,100%%", 14, lookup, NULL, &why), M0_OK);
    assert_string_equal(rendered(&b), "ab,100%");
    m0_buf_reset(&b);
    assert_int_equal(m0_grip_render_id(&b, "%(other)s", 9, lookup, NULL, &why), M0_ERR);
    assert_string_equal(why, "id_format names a channel without a last id");
    assert_int_equal(m0_grip_render_id(&b, "%s", 2, lookup, NULL, &why), M0_ERR);
    assert_int_equal(m0_grip_render_id(&b, "%(x)I", 5, lookup, NULL, &why), M0_ERR);

    /* captured content: send_event("test", "message", {"text": "hello"}) */
    const char *content = "event: message\nid: %I\ndata: {\"text\": \"hello\"}\n\n";
    m0_buf_reset(&b);
    assert_int_equal(m0_grip_render_content(&b, content, strlen(content), "test:2", 6, &why), M0_OK);
    assert_string_equal(rendered(&b), "event: message\nid: test:2\ndata: {\"text\": \"hello\"}\n\n");
    m0_buf_reset(&b);
    assert_int_equal(m0_grip_render_content(&b, "50%% %(lit)I", 12, "x", 1, &why), M0_OK);
    assert_string_equal(rendered(&b), "50% lit");
    static const char *bad[] = {"%", "%Z", "%(open", "%(x)", "%1", "id: %I"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        m0_buf_reset(&b);
        assert_int_equal(m0_grip_render_content(&b, bad[i], strlen(bad[i]), NULL, 0, &why), M0_ERR);
        assert_non_null(why);
    }
    m0_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_django_eventstream_stream_hold),
        cmocka_unit_test(test_which_fields_are_stripped),
        cmocka_unit_test(test_django_grip_longpoll),
        cmocka_unit_test(test_django_grip_stream_keepalive),
        cmocka_unit_test(test_django_grip_base64_keepalive_repr_refused),
        cmocka_unit_test(test_channels_and_keepalive_grammar),
        cmocka_unit_test(test_duplicate_channel_and_many_channels),
        cmocka_unit_test(test_timeouts),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_links),
        cmocka_unit_test(test_meta_and_expose),
        cmocka_unit_test(test_malformed_values),
        cmocka_unit_test(test_other_fields_ignored),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_templates),
    };
    return cmocka_run_group_tests_name("grip", tests, NULL, NULL);
}
