/*
 * test_natsjs.c — what m0serve reads and writes of NATS JetStream itself
 * (natsjs.h): channel names as subject tokens (every byte a subject or the
 * JetStream API's JSON cannot carry escaped, one spelling per name), the
 * stream's names from the broker prefix, a message's subject back to its
 * channel, and the message-get answer a resume reads.
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
#include "m0/natsjs.h"

static char *token(const char *s)
{
    static char out[1024];
    struct m0_buf b = {0};
    m0_nats_token(&b, s, strlen(s));
    snprintf(out, sizeof out, "%.*s", (int)b.len, b.data);
    m0_buf_free(&b);
    return out;
}

static void test_tokens_escape_what_a_subject_cannot_carry(void **state)
{
    (void)state;
    assert_string_equal(token("news"), "news");
    assert_string_equal(token("room_1-b"), "room_1-b");
    assert_string_equal(token("a.b"), "a%2Eb");                 /* a second token */
    assert_string_equal(token("*"), "%2A");                    /* wildcards */
    assert_string_equal(token(">"), "%3E");
    assert_string_equal(token("a b\t"), "a%20b%09");           /* white space ends a subject */
    assert_string_equal(token("user:42/x"), "user%3A42%2Fx");
    assert_string_equal(token("%"), "%25");                    /* the escape itself */
    assert_string_equal(token("\"\\"), "%22%5C");              /* the API's JSON */
    /* Every byte: the token is of [A-Za-z0-9_%-] only, and decodes back. */
    char all[256], back[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    struct m0_buf b = {0};
    m0_nats_token(&b, all, sizeof all);
    for (size_t i = 0; i < b.len; i++) {
        char c = b.data[i];
        assert_true((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '%');
    }
    size_t n = 0;
    assert_int_equal(m0_nats_untoken(b.data, b.len, back, sizeof back, &n), M0_OK);
    assert_int_equal(n, 256);
    assert_memory_equal(back, all, 256);
    m0_buf_free(&b);
}

static void test_untoken_takes_one_spelling_only(void **state)
{
    (void)state;
    char out[64];
    size_t n;
    assert_int_equal(m0_nats_untoken("a%2Eb", 5, out, sizeof out, &n), M0_OK);
    assert_int_equal(n, 3);
    assert_memory_equal(out, "a.b", 3);
    const char *bad[] = {"", "a%2eb", "%41", "a.b", "a%2", "a%", "a%G0", "a*", "a>", "a b", "%2", "x\x01"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(m0_nats_untoken(bad[i], strlen(bad[i]), out, sizeof out, &n), M0_ERR);
    assert_int_equal(m0_nats_untoken("abcd", 4, out, 3, &n), M0_ERR);     /* no room */
}

static void test_names_of_a_prefix(void **state)
{
    (void)state;
    char sp[M0_NATS_PREFIX_MAX + 1], st[M0_NATS_STREAM_MAX + 1];
    m0_nats_names("m0:", sp, sizeof sp, st, sizeof st);
    assert_string_equal(sp, "m0");
    assert_string_equal(st, "m0-events");
    m0_nats_names("app.v1", sp, sizeof sp, st, sizeof st);
    assert_string_equal(sp, "app%2Ev1");
    assert_string_equal(st, "app%2Ev1-events");
    m0_nats_names(":", sp, sizeof sp, st, sizeof st);             /* a lone ':' is kept */
    assert_string_equal(sp, "%3A");
    char longest[64];
    memset(longest, '.', 63);
    longest[63] = '\0';
    m0_nats_names(longest, sp, sizeof sp, st, sizeof st);
    assert_int_equal(strlen(sp), 189);
    assert_int_equal(strlen(st), 196);
}

static void test_subjects_and_their_channels(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    m0_nats_subject(&b, "m0", "a.b c", 5);
    assert_int_equal(b.len, strlen("m0.a%2Eb%20c"));
    assert_memory_equal(b.data, "m0.a%2Eb%20c", b.len);
    char ch[256];
    size_t n;
    assert_int_equal(m0_nats_channel(b.data, b.len, "m0", ch, sizeof ch, &n), M0_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(ch, "a.b c", 5);
    m0_buf_free(&b);
    /* another prefix, no token, two tokens, a reserved or unprintable name */
    const char *notours[] = {"m1.news", "m0news", "m0.", "m0.a.b", "m0.m0%2Einternal", "m0.%0A", "m0.%7F",
                             "m0.caf%C3%A9", "m0.a%2eb"};
    for (size_t i = 0; i < sizeof notours / sizeof notours[0]; i++)
        assert_int_equal(m0_nats_channel(notours[i], strlen(notours[i]), "m0", ch, sizeof ch, &n), M0_ERR);
    assert_int_equal(m0_nats_channel("m0.%2E", 6, "m0", ch, sizeof ch, &n), M0_OK);      /* "." is a name */
    assert_int_equal(n, 1);
}

static void test_numbers(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(m0_u64_parse("18446744073709551615", 20, &v), M0_OK);
    assert_true(v == UINT64_MAX);
    assert_int_equal(m0_u64_parse("18446744073709551616", 20, &v), M0_ERR);
    assert_int_equal(m0_u64_parse("", 0, &v), M0_ERR);
    assert_int_equal(m0_u64_parse("-1", 2, &v), M0_ERR);
    assert_int_equal(m0_u64_parse("1 ", 2, &v), M0_ERR);
    assert_int_equal(m0_u64_parse("007", 3, &v), M0_OK);
    assert_int_equal(v, 7);
}

static int got(const char *json, size_t max, struct m0_nats_got *g)
{
    return m0_nats_msg_get_reply(json, strlen(json), max, g);
}

static void test_message_get_answers(void **state)
{
    (void)state;
    struct m0_nats_got g = {0};
    assert_int_equal(got("{\"type\":\"io.nats.jetstream.api.v1.stream_msg_get_response\",\"message\":"
                         "{\"subject\":\"m0.news\",\"seq\":5,\"hdrs\":\"TkFUUy8xLjANCg0K\",\"data\":\"aGVsbG8=\","
                         "\"time\":\"2026-01-01T00:00:00Z\"}}", 100, &g), M0_OK);
    assert_int_equal(g.seq, 5);
    assert_int_equal(g.subject.len, 7);
    assert_memory_equal(g.subject.data, "m0.news", 7);
    assert_int_equal(g.data.len, 5);
    assert_memory_equal(g.data.data, "hello", 5);
    /* no data: an empty payload */
    assert_int_equal(got("{\"message\":{\"subject\":\"m0.x\",\"seq\":1}}", 100, &g), M0_OK);
    assert_int_equal(g.data.len, 0);
    /* no such message */
    assert_int_equal(got("{\"error\":{\"code\":404,\"err_code\":10037,\"description\":\"no message found\"}}", 100,
                         &g), M0_AGAIN);
    /* another error: its code and text, control bytes made harmless */
    assert_int_equal(got("{\"error\":{\"code\":503,\"err_code\":10008,\"description\":\"down\\nnow\"}}", 100, &g),
                     M0_ERR);
    assert_int_equal(g.code, 503);
    assert_int_equal(g.err_code, 10008);
    assert_string_equal(g.why, "down?now");
    assert_int_equal(got("{\"error\":{\"code\":500,\"description\":\"\"}}", 100, &g), M0_ERR);
    assert_string_equal(g.why, "an error answer (500)");        /* never an empty reason */
    /* not an answer */
    const char *bad[] = {"", "[]", "nope", "{}", "{\"message\":1}", "{\"message\":{\"seq\":1}}",
                         "{\"message\":{\"subject\":\"m0.x\",\"seq\":0}}",
                         "{\"message\":{\"subject\":\"m0.x\",\"seq\":-3}}",
                         "{\"message\":{\"subject\":\"m0.x\",\"seq\":1.5}}",
                         "{\"message\":{\"subject\":\"\",\"seq\":1}}",
                         "{\"message\":{\"subject\":\"m0.x\",\"seq\":1,\"data\":\"*\"}}",
                         "{\"message\":{\"subject\":\"m0.x\",\"seq\":1,\"data\":7}}",
                         "{\"message\":{\"subject\":\"m0.x\",\"seq\":1,\"seq\":2}}",
                         "{\"error\":{\"code\":\"x\"}}", "{\"error\":7}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(got(bad[i], 100, &g), M0_ERR);
        assert_true(g.why[0] != '\0');
    }
    /* a payload over the limit */
    assert_int_equal(got("{\"message\":{\"subject\":\"m0.x\",\"seq\":1,\"data\":\"aGVsbG8=\"}}", 4, &g), M0_ERR);
    assert_int_equal(got("{\"message\":{\"subject\":\"m0.x\",\"seq\":1,\"data\":\"aGVsbG8=\"}}", 5, &g), M0_OK);
    m0_buf_free(&g.subject);
    m0_buf_free(&g.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_escape_what_a_subject_cannot_carry),
        cmocka_unit_test(test_untoken_takes_one_spelling_only),
        cmocka_unit_test(test_names_of_a_prefix),
        cmocka_unit_test(test_subjects_and_their_channels),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_message_get_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
