/*
 * test_pubreq.c — the publish socket's request body and answer
 * (src/proto/pubreq.c): what is accepted, each refusal and its sentence,
 * the encoder read back by the parser, and a publisher's reading of the
 * server's answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/broker_url.h"
#include "m0/pubreq.h"

static int parse(struct m0_pubreq *r, const char *body)
{
    return m0_pubreq_parse(r, body, strlen(body));
}

static void test_accepts_the_four_members(void **state)
{
    (void)state;
    struct m0_pubreq r;
    assert_int_equal(parse(&r, "{\"channel\": \"news\", \"data\": \"a\\nb\\u0000c\\u00e9\", \"event\": \"msg\", "
                               "\"key\": \"order-42\"}"),
                     200);
    assert_int_equal(r.channel_len, 4);
    assert_string_equal(r.channel, "news");
    assert_int_equal(r.data_len, 7);                          /* a LF b NUL c é(2 bytes) */
    assert_memory_equal(r.data, "a\nb\0c\xc3\xa9", 7);
    assert_string_equal(r.event, "msg");
    assert_int_equal(r.key_len, 8);
    assert_string_equal(r.key, "order-42");
    m0_pubreq_free(&r);

    /* event and key are optional, or null; an empty event is one (EventSource: "message"). */
    assert_int_equal(parse(&r, "{\"data\": \"\", \"channel\": \"c\", \"event\": null, \"key\": null}"), 200);
    assert_null(r.event);
    assert_null(r.key);
    assert_int_equal(r.data_len, 0);
    m0_pubreq_free(&r);
    assert_int_equal(parse(&r, "  {\"channel\":\"c\",\"data\":\"d\",\"event\":\"\"}\n"), 200);
    assert_string_equal(r.event, "");
    m0_pubreq_free(&r);
}

struct refusal {
    const char *body;
    const char *err;           /* a part of the sentence */
};

static void test_refusals_name_the_member_and_the_rule(void **state)
{
    (void)state;
    static const struct refusal cases[] = {
        {"", "body is not a JSON object"},
        {"{", "body is not a JSON object"},
        {"[\"news\", \"d\"]", "body is not a JSON object"},
        {"\"news\"", "body is not a JSON object"},
        {"channel=news&data=d", "body is not a JSON object"},
        {"{\"channel\": \"news\", \"data\": \"d\"} {}", "body is not a JSON object"},
        {"{\"channel\": \"a\", \"channel\": \"b\", \"data\": \"d\"}", "duplicate"},
        {"{\"data\": \"d\"}", "channel: required"},
        {"{\"channel\": \"news\"}", "data: required"},
        {"{\"channel\": 1, \"data\": \"d\"}", "channel: want a string"},
        {"{\"channel\": null, \"data\": \"d\"}", "channel: want a string"},
        {"{\"channel\": \"news\", \"data\": null}", "data: want a string"},
        {"{\"channel\": \"news\", \"data\": [\"d\"]}", "data: want a string"},
        {"{\"channel\": \"news\", \"data\": \"d\", \"event\": 3}", "event: want a string or null"},
        {"{\"channel\": \"news\", \"data\": \"d\", \"key\": true}", "key: want a string or null"},
        {"{\"channel\": \"news\", \"data\": \"d\", \"id\": 7}", "id: event ids are the server's"},
        {"{\"channel\": \"news\", \"data\": \"d\", \"evnt\": \"x\"}", "unknown member 'evnt'"},
        {"{\"channel\": \"news\", \"data\": \"d\", \"a\\u0001b\": 1}", "unknown member 'a?b'"},
        {"{\"channel\": \"\", \"data\": \"d\"}", "channel: empty channel name"},
        {"{\"channel\": \"m0.x\", \"data\": \"d\"}", "channel: the m0. channel namespace is reserved"},
        {"{\"channel\": \"a\\tb\", \"data\": \"d\"}", "channel: channel names are printable ASCII"},
        {"{\"channel\": \"caf\\u00e9\", \"data\": \"d\"}", "channel: channel names are printable ASCII"},
        {"{\"channel\": \"a\\u0000\", \"data\": \"d\"}", "channel: channel names are printable ASCII"},
        {"{\"channel\": \"news\", \"data\": \"d\", \"event\": \"a\\nb\"}", "event: one line"},
        {"{\"channel\": \"news\", \"data\": \"d\", \"event\": \"a\\rb\"}", "event: one line"},
        {"{\"channel\": \"news\", \"data\": \"d\", \"event\": \"a\\u0000b\"}", "event: one line"},
        {"{\"channel\": \"news\", \"data\": \"\\ud800\"}", "body is not a JSON object"},   /* a lone surrogate */
        {"{\"channel\": \"news\", \"data\": \"\xff\"}", "body is not a JSON object"},      /* not UTF-8 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct m0_pubreq r;
        int st = parse(&r, cases[i].body);
        if (st != 400 || strstr(r.err, cases[i].err) == NULL)
            fail_msg("%s: %d %s (want 400 with '%s')", cases[i].body, st, r.err, cases[i].err);
        assert_null(r.channel);
        assert_null(r.data);
        m0_pubreq_free(&r);
    }
    /* A channel of 200 bytes is one; of 201, a 400. */
    char body[400];
    snprintf(body, sizeof body, "{\"channel\": \"%0200d\", \"data\": \"\"}", 0);
    struct m0_pubreq r;
    assert_int_equal(parse(&r, body), 200);
    m0_pubreq_free(&r);
    snprintf(body, sizeof body, "{\"channel\": \"%0201d\", \"data\": \"\"}", 0);
    assert_int_equal(parse(&r, body), 400);
    assert_non_null(strstr(r.err, "longer than 200 bytes"));
    m0_pubreq_free(&r);
}

static void test_the_size_limit(void **state)
{
    (void)state;
    size_t n = M0_PUBREQ_BODY_MAX + 1;
    char *big = malloc(n);
    memset(big, ' ', n);
    struct m0_pubreq r;
    assert_int_equal(m0_pubreq_parse(&r, big, n), 413);
    assert_non_null(strstr(r.err, "over the 262144-byte limit"));
    m0_pubreq_free(&r);
    /* At the limit: parsed (white space around a publish). */
    const char *p = "{\"channel\":\"c\",\"data\":\"d\"}";
    memcpy(big, p, strlen(p));
    assert_int_equal(m0_pubreq_parse(&r, big, n - 1), 200);
    m0_pubreq_free(&r);
    free(big);
    /* The connection's limits hold the same body (and never spill it). */
    assert_int_equal(m0_pubreq_limits.max_body, M0_PUBREQ_BODY_MAX);
    assert_true(m0_pubreq_limits.body_mem >= M0_PUBREQ_BODY_MAX);
}

static void test_encode_reads_back(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    char err[128];
    const char data[] = "line 1\r\nline \"2\"\0tail \xc3\xa9";
    assert_int_equal(m0_pubreq_encode(&b, "news", 4, data, sizeof data - 1, "ev", "k-1", err, sizeof err), M0_OK);
    struct m0_pubreq r;
    assert_int_equal(m0_pubreq_parse(&r, b.data, b.len), 200);
    assert_string_equal(r.channel, "news");
    assert_int_equal(r.data_len, sizeof data - 1);
    assert_memory_equal(r.data, data, sizeof data - 1);
    assert_string_equal(r.event, "ev");
    assert_string_equal(r.key, "k-1");
    m0_pubreq_free(&r);
    m0_buf_reset(&b);
    assert_int_equal(m0_pubreq_encode(&b, "c", 1, "", 0, NULL, NULL, err, sizeof err), M0_OK);
    assert_int_equal(b.len, strlen("{\"channel\":\"c\",\"data\":\"\"}"));
    assert_memory_equal(b.data, "{\"channel\":\"c\",\"data\":\"\"}", b.len);
    m0_buf_reset(&b);
    /* Not UTF-8: refused, out unchanged, the string named. */
    assert_int_equal(m0_pubreq_encode(&b, "c", 1, "\xff", 1, NULL, NULL, err, sizeof err), M0_ERR);
    assert_int_equal(b.len, 0);
    assert_non_null(strstr(err, "data: not UTF-8"));
    assert_int_equal(m0_pubreq_encode(&b, "c", 1, "d", 1, "\xc3", NULL, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "event: not UTF-8"));
    m0_buf_free(&b);
}

static void test_the_key_rule_is_the_brokers(void **state)
{
    (void)state;
    /* The parser types the key; its rule is broker_url.h's (pubsock.c applies it). */
    assert_int_equal(M0_BROKER_KEY_MAX, 200);
    assert_true(m0_broker_key_ok("order-42", 8));
    assert_false(m0_broker_key_ok("", 0));
    assert_false(m0_broker_key_ok("a\tb", 3));
}

static int answer(const char *resp, int *status, const char **body, size_t *blen, uint64_t *id)
{
    return m0_pubreq_answer(resp, strlen(resp), status, body, blen, id);
}

static void test_reads_the_servers_answers(void **state)
{
    (void)state;
    int st;
    const char *body;
    size_t blen;
    uint64_t id;
    assert_int_equal(answer("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 12\r\n\r\n"
                            "{\"id\": 417}\n", &st, &body, &blen, &id),
                     M0_OK);
    assert_int_equal(st, 200);
    assert_int_equal(id, 417);
    assert_int_equal(blen, 12);
    /* Without Content-Length: the rest; 1700000000000000 fits. */
    assert_int_equal(answer("HTTP/1.0 200 OK\r\n\r\n{\"id\":1700000000000000}", &st, &body, &blen, &id), M0_OK);
    assert_int_equal(id, 1700000000000000ull);
    assert_int_equal(answer("HTTP/1.1 400 Bad Request\r\nContent-Length: 17\r\n\r\nchannel: required", &st, &body,
                            &blen, &id),
                     M0_OK);
    assert_int_equal(st, 400);
    assert_int_equal(id, 0);
    assert_memory_equal(body, "channel: required", blen);
    /* Extra bytes past Content-Length are not the body. */
    assert_int_equal(answer("HTTP/1.1 503 X\r\nContent-Length: 2\r\n\r\nabcd", &st, &body, &blen, &id), M0_OK);
    assert_int_equal(blen, 2);

    static const char *const bad[] = {
        "",
        "HTTP/1.1 200 OK\r\n",                                           /* no end of head */
        "HTTP/1.1 200 OK\r\n\r\n{\"id\": 0}",                            /* a 200 without an id */
        "HTTP/1.1 200 OK\r\n\r\n{\"id\": \"7\"}",
        "HTTP/1.1 200 OK\r\n\r\n[7]",
        "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{\"id\": 7}",      /* short */
        "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n{\"id\": 7}",
        "HTTP/1.1 2x0 OK\r\n\r\n",
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "ICY 200 OK\r\n\r\n",
        "HTTP/1.1 099 X\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (answer(bad[i], &st, &body, &blen, &id) != M0_ERR)
            fail_msg("accepted %s", bad[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts_the_four_members),
        cmocka_unit_test(test_refusals_name_the_member_and_the_rule),
        cmocka_unit_test(test_the_size_limit),
        cmocka_unit_test(test_encode_reads_back),
        cmocka_unit_test(test_the_key_rule_is_the_brokers),
        cmocka_unit_test(test_reads_the_servers_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
