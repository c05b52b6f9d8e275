/*
 * test_epcp.c — EPCP publish bodies (src/proto/epcp.c). The vectors marked
 * "captured" are the bodies gripcontrol 4.4.0 / pubcontrol 3.5.0 POSTed to
 * {control}/publish/, verbatim: django-eventstream's send_event, and
 * GripPubControl's publish_http_stream / publish_http_response / publish
 * with WebSocketMessageFormat. The rest are Pushpin's accepted shapes and
 * the 400s it answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/epcp.h"
#include "m0/sse.h"
#include "m0/grip.h"

static int parse(struct m0_epcp_publish *p, const char *body)
{
    return m0_epcp_parse(p, body, strlen(body));
}

static int bytes_are(struct m0_epcp_bytes b, const char *want, size_t n)
{
    return b.len == n && memcmp(b.p, want, n) == 0 && b.p[n] == '\0';
}

#define IS(b, s) bytes_are((b), (s), sizeof(s) - 1)

/* captured: send_event("test", "message", {"text": "hello"}) with storage. */
static void test_django_eventstream_send_event(void **state)
{
    (void)state;
    struct m0_epcp_publish p;
    assert_int_equal(parse(&p, "{\"items\": [{\"id\": \"1\", \"prev-id\": \"0\", \"http-stream\": "
                               "{\"content-filters\": [\"build-id\"], \"content\": \"event: message\\nid: "
                               "%I\\ndata: {\\\"text\\\": \\\"hello\\\"}\\n\\n\"}, \"channel\": "
                               "\"events-test\"}]}"),
                     200);
    assert_int_equal(p.nitems, 1);
    const struct m0_epcp_item *it = &p.items[0];
    assert_true(IS(it->channel, "events-test"));
    assert_true(it->has_id && IS(it->id, "1"));
    assert_true(it->has_prev_id && IS(it->prev_id, "0"));
    assert_true(it->stream.present);
    assert_int_equal(it->stream.action, M0_EPCP_SEND);
    assert_true(IS(it->stream.content, "event: message\nid: %I\ndata: {\"text\": \"hello\"}\n\n"));
    assert_true(it->stream.has_filters);
    assert_int_equal(it->stream.filters, M0_GRIP_F_BUILD_ID);
    assert_false(it->response.present);
    assert_false(it->ws.present);
    assert_int_equal(it->nmeta, 0);
    m0_epcp_free(&p);
}

/* captured: publish_http_stream plain, with id/prev-id, binary, close. */
static void test_gripcontrol_http_stream(void **state)
{
    (void)state;
    struct m0_epcp_publish p;
    assert_int_equal(parse(&p, "{\"items\": [{\"http-stream\": {\"content\": \"data: one\\n\\n\"}, "
                               "\"channel\": \"st\"}]}"),
                     200);
    assert_true(IS(p.items[0].stream.content, "data: one\n\n"));
    assert_false(p.items[0].has_id);
    assert_false(p.items[0].has_prev_id);
    assert_false(p.items[0].stream.has_filters);
    m0_epcp_free(&p);

    assert_int_equal(parse(&p, "{\"items\": [{\"id\": \"2\", \"prev-id\": \"1\", \"http-stream\": "
                               "{\"content\": \"data: two\\n\\n\"}, \"channel\": \"st\"}]}"),
                     200);
    assert_true(IS(p.items[0].id, "2") && IS(p.items[0].prev_id, "1"));
    m0_epcp_free(&p);

    assert_int_equal(parse(&p, "{\"items\": [{\"http-stream\": {\"content-bin\": \"/wBiaW4=\"}, "
                               "\"channel\": \"st\"}]}"),
                     200);
    assert_true(bytes_are(p.items[0].stream.content, "\xff\x00" "bin", 5));
    m0_epcp_free(&p);

    assert_int_equal(parse(&p, "{\"items\": [{\"http-stream\": {\"action\": \"close\"}, "
                               "\"channel\": \"st\"}]}"),
                     200);
    assert_int_equal(p.items[0].stream.action, M0_EPCP_CLOSE);
    assert_int_equal(p.items[0].stream.content.len, 0);
    m0_epcp_free(&p);
}

/* captured: publish_http_response with a body, and with code, reason,
 * headers (an object) and id/prev-id. */
static void test_gripcontrol_http_response(void **state)
{
    (void)state;
    struct m0_epcp_publish p;
    assert_int_equal(parse(&p, "{\"items\": [{\"http-response\": {\"body\": \"hello longpoll\\n\"}, "
                               "\"channel\": \"lp\"}]}"),
                     200);
    const struct m0_epcp_response *r = &p.items[0].response;
    assert_true(r->present);
    assert_int_equal(r->code, 200);
    assert_int_equal(r->reason.len, 0);
    assert_int_equal(r->nheaders, 0);
    assert_true(IS(r->body, "hello longpoll\n"));
    m0_epcp_free(&p);

    assert_int_equal(parse(&p, "{\"items\": [{\"id\": \"8\", \"prev-id\": \"7\", \"http-response\": "
                               "{\"code\": 201, \"reason\": \"Made\", \"headers\": {\"Content-Type\": "
                               "\"text/plain\", \"X-A\": \"1\"}, \"body\": \"made\\n\"}, \"channel\": "
                               "\"lp\"}]}"),
                     200);
    r = &p.items[0].response;
    assert_int_equal(r->code, 201);
    assert_true(IS(r->reason, "Made"));
    assert_int_equal(r->nheaders, 2);
    assert_true(IS(r->headers[0].name, "Content-Type"));
    assert_true(IS(r->headers[0].value, "text/plain"));
    assert_true(IS(r->headers[1].name, "X-A"));
    assert_true(IS(r->headers[1].value, "1"));
    assert_true(IS(r->body, "made\n"));
    m0_epcp_free(&p);

    /* headers as a list of pairs (Pushpin takes both; repeats survive) */
    assert_int_equal(parse(&p, "{\"items\": [{\"channel\": \"lp\", \"http-response\": {\"headers\": "
                               "[[\"Set-Cookie\", \"a=1\"], [\"Set-Cookie\", \"b=2\"]], "
                               "\"body-bin\": \"aGk=\", \"body\": \"ignored\"}}]}"),
                     200);
    r = &p.items[0].response;
    assert_int_equal(r->nheaders, 2);
    assert_true(IS(r->headers[1].value, "b=2"));
    assert_true(IS(r->body, "hi"));    /* body-bin wins */
    m0_epcp_free(&p);
}

/* captured: several formats on one item; ws-message binary and close; a
 * non-blocking batch of three items in one request. */
static void test_gripcontrol_multi_ws_batch(void **state)
{
    (void)state;
    struct m0_epcp_publish p;
    assert_int_equal(parse(&p, "{\"items\": [{\"id\": \"m1\", \"http-stream\": {\"content\": \"s\\n\"}, "
                               "\"http-response\": {\"body\": \"r\\n\"}, \"ws-message\": {\"content\": "
                               "\"w\"}, \"channel\": \"multi\"}]}"),
                     200);
    const struct m0_epcp_item *it = &p.items[0];
    assert_true(it->stream.present && it->response.present && it->ws.present);
    assert_true(IS(it->stream.content, "s\n"));
    assert_true(IS(it->response.body, "r\n"));
    assert_true(IS(it->ws.content, "w"));
    assert_int_equal(it->ws.type, M0_EPCP_WS_TEXT);
    m0_epcp_free(&p);

    assert_int_equal(parse(&p, "{\"items\": [{\"ws-message\": {\"content-bin\": \"AAE=\"}, "
                               "\"channel\": \"ws\"}]}"),
                     200);
    assert_int_equal(p.items[0].ws.type, M0_EPCP_WS_BINARY);
    assert_true(bytes_are(p.items[0].ws.content, "\x00\x01", 2));
    m0_epcp_free(&p);

    assert_int_equal(parse(&p, "{\"items\": [{\"ws-message\": {\"action\": \"close\", \"code\": 1001, "
                               "\"reason\": \"bye\"}, \"channel\": \"ws\"}]}"),
                     200);
    assert_int_equal(p.items[0].ws.action, M0_EPCP_CLOSE);
    assert_int_equal(p.items[0].ws.close_code, 1001);
    assert_true(IS(p.items[0].ws.reason, "bye"));
    m0_epcp_free(&p);

    assert_int_equal(parse(&p, "{\"items\": [{\"http-stream\": {\"content\": \"data: 0\\n\\n\"}, "
                               "\"channel\": \"batch\"}, {\"http-stream\": {\"content\": \"data: "
                               "1\\n\\n\"}, \"channel\": \"batch\"}, {\"http-stream\": {\"content\": "
                               "\"data: 2\\n\\n\"}, \"channel\": \"batch\"}]}"),
                     200);
    assert_int_equal(p.nitems, 3);
    assert_true(IS(p.items[2].stream.content, "data: 2\n\n"));
    m0_epcp_free(&p);
}

/* Shapes Pushpin also takes: formats inside "formats", meta, no-seq,
 * hint/refresh actions, ws types, an empty items list, NUL in content. */
static void test_other_accepted_shapes(void **state)
{
    (void)state;
    struct m0_epcp_publish p;
    assert_int_equal(parse(&p, "{\"items\": [{\"channel\": \"c\", \"formats\": {\"http-stream\": "
                               "{\"content\": \"x\"}, \"ws-message\": {\"type\": \"ping\"}}, "
                               "\"http-response\": {\"body\": \"not read: formats is given\"}, "
                               "\"meta\": {\"skip_users\": \"1,2\", \"require_sub\": \"events-a\"}, "
                               "\"no-seq\": true, \"unknown\": [1, 2]}]}"),
                     200);
    const struct m0_epcp_item *it = &p.items[0];
    assert_true(it->stream.present);
    assert_false(it->response.present);
    assert_int_equal(it->ws.type, M0_EPCP_WS_PING);
    assert_int_equal(it->ws.content.len, 0);
    assert_int_equal(it->nmeta, 2);
    assert_true(IS(it->meta[0].name, "skip_users") && IS(it->meta[0].value, "1,2"));
    assert_true(IS(it->meta[1].name, "require_sub") && IS(it->meta[1].value, "events-a"));
    assert_true(it->no_seq);
    m0_epcp_free(&p);

    assert_int_equal(parse(&p, "{\"items\": [{\"channel\": \"c\", \"http-stream\": {\"action\": "
                               "\"hint\"}, \"http-response\": {\"action\": \"refresh\"}, "
                               "\"ws-message\": {\"action\": \"send\", \"content\": \"a\\u0000b\"}}]}"),
                     200);
    assert_int_equal(p.items[0].stream.action, M0_EPCP_HINT);
    assert_int_equal(p.items[0].response.action, M0_EPCP_REFRESH);
    assert_true(bytes_are(p.items[0].ws.content, "a\0b", 3));
    m0_epcp_free(&p);

    assert_int_equal(parse(&p, "{\"items\": []}"), 200);
    assert_int_equal(p.nitems, 0);
    m0_epcp_free(&p);
}

static void test_refused_bodies(void **state)
{
    (void)state;
    static const struct {
        const char *body, *err;
    } cases[] = {
        {"{\"items\": [", "Body is not valid JSON."},
        {"", "Body is not valid JSON."},
        {"[1]", "Invalid format."},
        {"{\"item\": []}", "Invalid format: object does not contain 'items'"},
        {"{\"items\": {}}", "Invalid format: object contains 'items' with wrong type"},
        {"{\"items\": [3]}", "Invalid format: item 0: publish item object is not an object"},
        {"{\"items\": [{\"http-stream\": {\"content\": \"x\"}}]}",
         "Invalid format: item 0: publish item object does not contain 'channel'"},
        {"{\"items\": [{\"channel\": 5, \"http-stream\": {\"content\": \"x\"}}]}",
         "Invalid format: item 0: publish item object contains 'channel' with wrong type"},
        {"{\"items\": [{\"channel\": \"\", \"http-stream\": {\"content\": \"x\"}}]}",
         "Invalid format: item 0: publish item object contains 'channel' with invalid value"},
        /* A name the bus does not carry is the client's error, with the rule
         * it breaks (issue 27 item 13: it was "413 Item too large."). */
        {"{\"items\": [{\"channel\": \"m0.health\", \"http-stream\": {\"content\": \"x\"}}]}",
         "Invalid format: item 0: publish item object contains 'channel' with invalid value: the m0. channel "
         "namespace is reserved"},
        {"{\"items\": [{\"channel\": \"ok\", \"http-stream\": {\"content\": \"x\"}}, "
         "{\"channel\": \"a\\tb\", \"http-stream\": {\"content\": \"x\"}}]}",
         "Invalid format: item 1: publish item object contains 'channel' with invalid value: channel names are "
         "printable ASCII"},
        {"{\"items\": [{\"channel\": \"caf\\u00e9\", \"ws-message\": {\"content\": \"x\"}}]}",
         "Invalid format: item 0: publish item object contains 'channel' with invalid value: channel names are "
         "printable ASCII"},
        {"{\"items\": [{\"channel\": \"c\", \"http-stream\": {\"content\": \"x\"}}, "
         "{\"channel\": \"c\", \"id\": 2, \"http-stream\": {\"content\": \"x\"}}]}",
         "Invalid format: item 1: publish item object contains 'id' with wrong type"},
        {"{\"items\": [{\"channel\": \"c\", \"prev-id\": null, \"http-stream\": {\"content\": \"x\"}}]}",
         "Invalid format: item 0: publish item object contains 'prev-id' with wrong type"},
        {"{\"items\": [{\"channel\": \"c\"}]}", "Invalid format: item 0: no formats specified"},
        {"{\"items\": [{\"channel\": \"c\", \"formats\": []}]}",
         "Invalid format: item 0: publish item object contains 'formats' with wrong type"},
        {"{\"items\": [{\"channel\": \"c\", \"http-stream\": \"x\"}]}",
         "Invalid format: item 0: 'http-stream' is not an object"},
        {"{\"items\": [{\"channel\": \"c\", \"http-stream\": {}}]}",
         "Invalid format: item 0: 'http-stream' does not contain 'content' or 'content-bin'"},
        {"{\"items\": [{\"channel\": \"c\", \"http-stream\": {\"content\": 1}}]}",
         "Invalid format: item 0: 'http-stream' contains 'content' with wrong type"},
        {"{\"items\": [{\"channel\": \"c\", \"http-stream\": {\"content-bin\": \"b'AQI='\"}}]}",
         "Invalid format: item 0: 'http-stream' contains 'content-bin' that is not base64"},
        {"{\"items\": [{\"channel\": \"c\", \"http-stream\": {\"action\": \"explode\"}}]}",
         "Invalid format: item 0: 'http-stream' contains 'action' with unknown value"},
        {"{\"items\": [{\"channel\": \"c\", \"http-stream\": {\"content\": \"x\", "
         "\"content-filters\": \"build-id\"}}]}",
         "Invalid format: item 0: 'http-stream' contains 'content-filters' with wrong type"},
        {"{\"items\": [{\"channel\": \"c\", \"http-response\": {\"code\": \"200\", \"body\": \"\"}}]}",
         "Invalid format: item 0: 'http-response' contains 'code' with wrong type"},
        {"{\"items\": [{\"channel\": \"c\", \"http-response\": {\"code\": 1000, \"body\": \"\"}}]}",
         "Invalid format: item 0: 'http-response' contains 'code' with invalid value"},
        {"{\"items\": [{\"channel\": \"c\", \"http-response\": {\"code\": 101, \"body\": \"\"}}]}",
         "Invalid format: item 0: 'http-response' contains 'code' with invalid value"},
        {"{\"items\": [{\"channel\": \"c\", \"http-response\": {\"code\": 200}}]}",
         "Invalid format: item 0: 'http-response' does not contain 'body', 'body-bin', or 'body-patch'"},
        {"{\"items\": [{\"channel\": \"c\", \"http-response\": {\"body-patch\": []}}]}",
         "Invalid format: item 0: 'http-response' contains 'body-patch', which this server does not "
         "support"},
        {"{\"items\": [{\"channel\": \"c\", \"http-response\": {\"body\": \"\", \"headers\": "
         "{\"Bad Name\": \"v\"}}}]}",
         "Invalid format: item 0: headers contains a name that is not a field name"},
        {"{\"items\": [{\"channel\": \"c\", \"http-response\": {\"body\": \"\", \"headers\": "
         "[[\"X-Split\", \"a\\r\\nInjected: 1\"]]}}]}",
         "Invalid format: item 0: headers contains a value with CR, LF, NUL or another control byte"},
        {"{\"items\": [{\"channel\": \"c\", \"http-response\": {\"body\": \"\", \"headers\": "
         "[[\"X\"]]}}]}",
         "Invalid format: item 0: headers contains list with wrong number of elements"},
        {"{\"items\": [{\"channel\": \"c\", \"http-response\": {\"body\": \"\", \"headers\": \"X: y\"}}]}",
         "Invalid format: item 0: 'http-response' contains 'headers' with wrong type"},
        {"{\"items\": [{\"channel\": \"c\", \"http-response\": {\"body\": \"\", \"reason\": "
         "\"OK\\nX: y\"}}]}",
         "Invalid format: item 0: 'http-response' contains 'reason' with invalid value"},
        {"{\"items\": [{\"channel\": \"c\", \"ws-message\": {\"type\": \"fax\", \"content\": \"x\"}}]}",
         "Invalid format: item 0: 'ws-message' contains 'type' with unknown value"},
        {"{\"items\": [{\"channel\": \"c\", \"ws-message\": {}}]}",
         "Invalid format: item 0: 'ws-message' does not contain 'content' or 'content-bin'"},
        {"{\"items\": [{\"channel\": \"c\", \"ws-message\": {\"action\": \"close\", \"code\": 70000}}]}",
         "Invalid format: item 0: 'ws-message' contains 'code' with invalid value"},
        {"{\"items\": [{\"channel\": \"c\", \"http-stream\": {\"content\": \"x\"}, \"meta\": "
         "{\"user\": 7}}]}",
         "Invalid format: item 0: 'meta' contains 'user' with wrong type"},
        {"{\"items\": [{\"channel\": \"c\", \"http-stream\": {\"content\": \"x\"}, \"no-seq\": 1}]}",
         "Invalid format: item 0: publish item object contains 'no-seq' with wrong type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct m0_epcp_publish p;
        int st = parse(&p, cases[i].body);
        if (st != 400 || strcmp(p.err, cases[i].err) != 0)
            fail_msg("case %zu: %d \"%s\", want 400 \"%s\"", i, st, p.err, cases[i].err);
        assert_int_equal(p.nitems, 0);
        m0_epcp_free(&p);
    }
}

/* A ping's payload is a control frame's (RFC 6455 §5.5: at most 125). */
static void test_ws_control_payload_limit(void **state)
{
    (void)state;
    char body[512];
    char pad[127];
    memset(pad, 'p', 126);
    pad[126] = '\0';
    snprintf(body, sizeof body,
             "{\"items\": [{\"channel\": \"c\", \"ws-message\": {\"type\": \"ping\", \"content\": \"%s\"}}]}",
             pad);
    struct m0_epcp_publish p;
    assert_int_equal(parse(&p, body), 400);
    m0_epcp_free(&p);
    pad[125] = '\0';
    snprintf(body, sizeof body,
             "{\"items\": [{\"channel\": \"c\", \"ws-message\": {\"type\": \"ping\", \"content\": \"%s\"}}]}",
             pad);
    assert_int_equal(parse(&p, body), 200);
    m0_epcp_free(&p);
}

/* A channel of M0_CHANNEL_MAX bytes passes; one more is a 400 naming the
 * rule, never the bus's later refusal (issue 27 item 13). */
static void test_channel_length(void **state)
{
    (void)state;
    char name[M0_CHANNEL_MAX + 2], body[512];
    struct m0_epcp_publish p;
    memset(name, 'c', sizeof name - 1);
    name[M0_CHANNEL_MAX] = '\0';
    snprintf(body, sizeof body, "{\"items\": [{\"channel\": \"%s\", \"http-stream\": {\"content\": \"x\"}}]}", name);
    assert_int_equal(parse(&p, body), 200);
    assert_int_equal(p.items[0].channel.len, M0_CHANNEL_MAX);
    m0_epcp_free(&p);
    name[M0_CHANNEL_MAX] = 'c';
    name[M0_CHANNEL_MAX + 1] = '\0';
    snprintf(body, sizeof body, "{\"items\": [{\"channel\": \"%s\", \"http-stream\": {\"content\": \"x\"}}]}", name);
    assert_int_equal(parse(&p, body), 400);
    assert_string_equal(p.err, "Invalid format: item 0: publish item object contains 'channel' with invalid value: "
                               "channel name longer than 200 bytes");
    assert_int_equal(p.nitems, 0);
    m0_epcp_free(&p);
}

static void test_limits(void **state)
{
    (void)state;
    struct m0_epcp_publish p;
    /* No size limit of its own: the control port bounds the body before
     * reading it (--grip-max-body), and a larger flag must be honoured. */
    const char *doc = "{\"items\": [{\"channel\": \"c\", \"http-stream\": {\"content\": \"x\"}}]}";
    size_t n = 2 * 1024 * 1024, dl = strlen(doc);
    char *big = malloc(n);
    memset(big, ' ', n);
    memcpy(big + n - dl, doc, dl);
    assert_int_equal(m0_epcp_parse(&p, big, n), 200);
    assert_int_equal(p.nitems, 1);
    m0_epcp_free(&p);
    free(big);

    /* Item count: M0_EPCP_ITEMS_MAX pass, one more is refused. */
    const char *one = "{\"channel\":\"c\",\"http-stream\":{\"content\":\"x\"}},";
    size_t olen = strlen(one);
    char *body = malloc(16 + (M0_EPCP_ITEMS_MAX + 1) * olen);
    for (int count = M0_EPCP_ITEMS_MAX; count <= M0_EPCP_ITEMS_MAX + 1; count++) {
        size_t k = 0;
        memcpy(body, "{\"items\":[", 10);
        k = 10;
        for (int i = 0; i < count; i++, k += olen)
            memcpy(body + k, one, olen);
        body[k - 1] = ']';
        body[k++] = '}';
        int st = m0_epcp_parse(&p, body, k);
        if (count == M0_EPCP_ITEMS_MAX) {
            assert_int_equal(st, 200);
            assert_int_equal(p.nitems, M0_EPCP_ITEMS_MAX);
        } else {
            assert_int_equal(st, 400);
            assert_string_equal(p.err, "Invalid format: more than 1000 items");
        }
        m0_epcp_free(&p);
    }
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_django_eventstream_send_event),
        cmocka_unit_test(test_gripcontrol_http_stream),
        cmocka_unit_test(test_gripcontrol_http_response),
        cmocka_unit_test(test_gripcontrol_multi_ws_batch),
        cmocka_unit_test(test_other_accepted_shapes),
        cmocka_unit_test(test_refused_bodies),
        cmocka_unit_test(test_ws_control_payload_limit),
        cmocka_unit_test(test_channel_length),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests_name("epcp", tests, NULL, NULL);
}
