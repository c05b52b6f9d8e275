/*
 * test_broker.c — the broker URL forms (redis://, rediss://, redis+sentinel://,
 * unix://, nats://), their errors, --broker-replicas, --broker-min-replicas and the TLS flags,
 * the masked form shown in logs and /health, the key prefix rule, the
 * publish key rule, and the reply guard, shapes and Sentinel/ROLE readers
 * (broker_reply.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <hiredis/hiredis.h>

#include "m0/broker_pub.h"
#include "m0/broker_reply.h"
#include "m0/broker_url.h"
#include "m0/cli.h"
#include "m0/config.h"

static void test_tcp_forms(void **state)
{
    (void)state;
    struct m0_broker_cfg b;
    char err[160];
    assert_int_equal(m0_broker_parse_url("redis://127.0.0.1:6380/2", &b, err, sizeof err), M0_OK);
    assert_string_equal(b.host, "127.0.0.1");
    assert_int_equal(b.port, 6380);
    assert_int_equal(b.db, 2);
    assert_int_equal(b.is_unix, 0);
    assert_string_equal(b.password, "");
    assert_int_equal(m0_broker_parse_url("redis://redis.internal", &b, err, sizeof err), M0_OK);
    assert_string_equal(b.host, "redis.internal");
    assert_int_equal(b.port, 6379);
    assert_int_equal(b.db, 0);
    assert_int_equal(m0_broker_parse_url("redis://:s3cret@h:7000/", &b, err, sizeof err), M0_OK);
    assert_string_equal(b.password, "s3cret");
    assert_null(strstr(b.shown, "s3cret"));         /* never shown */
    assert_non_null(strstr(b.shown, "***"));
    assert_int_equal(m0_broker_parse_url("redis://user:pw@h", &b, err, sizeof err), M0_OK);
    assert_string_equal(b.password, "pw");
    assert_string_equal(b.username, "user");            /* an ACL user: AUTH user pw */
    assert_string_equal(b.shown, "redis://user:***@h:6379/0");
    assert_int_equal(m0_broker_parse_url("redis://:pw@h", &b, err, sizeof err), M0_OK);
    assert_string_equal(b.username, "");
    assert_int_equal(m0_broker_parse_url("redis://[::1]:7001/3", &b, err, sizeof err), M0_OK);
    assert_string_equal(b.host, "::1");
    assert_int_equal(b.port, 7001);
    assert_int_equal(b.db, 3);
}

static void test_unix_forms(void **state)
{
    (void)state;
    struct m0_broker_cfg b;
    char err[160];
    assert_int_equal(m0_broker_parse_url("unix:///run/redis/redis.sock", &b, err, sizeof err), M0_OK);
    assert_int_equal(b.is_unix, 1);
    assert_string_equal(b.path, "/run/redis/redis.sock");
    assert_int_equal(m0_broker_parse_url("unix:///tmp/r.sock?db=4", &b, err, sizeof err), M0_OK);
    assert_string_equal(b.path, "/tmp/r.sock");
    assert_int_equal(b.db, 4);
}

static void test_bad_urls(void **state)
{
    (void)state;
    struct m0_broker_cfg b;
    char err[160];
    const char *bad[] = {"", "http://h:1", "redis://", "redis://:6379", "redis://h:0", "redis://h:70000",
                         "redis://h:12x", "redis://h/db", "redis://[::1", "redis://@h", "unix://relative.sock",
                         "unix://", "unix:///x?dbx=1", "redis://h\x01st"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        assert_int_equal(m0_broker_parse_url(bad[i], &b, err, sizeof err), M0_ERR);
        assert_true(err[0] != '\0');
        assert_null(strchr(err, '\n'));
    }
}

static void test_prefix_rule(void **state)
{
    (void)state;
    assert_true(m0_broker_prefix_ok("m0:"));
    assert_true(m0_broker_prefix_ok("app{1}:"));
    assert_false(m0_broker_prefix_ok(""));
    assert_false(m0_broker_prefix_ok("has space"));
    char longp[80];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    assert_false(m0_broker_prefix_ok(longp));
}

static void test_configure_from_flags(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    char *argv[] = {"m0serve", "app:app", "--broker", "redis://h:1/1", "--broker-prefix", "x:",
                    "--broker-retention", "50"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 8, argv, err, sizeof err), M0_OK);
    assert_int_equal(m0_broker_configure(&cfg), M0_OK);
    assert_non_null(m0_broker);
    assert_string_equal(m0_broker->prefix, "x:");
    assert_int_equal(m0_broker->retention, 50);
    assert_int_equal(m0_broker->backlog, M0_BROKER_BACKLOG_DEFAULT);
    char *bad[] = {"m0serve", "app:app", "--broker", "redis://h:1/1", "--broker-retention", "0"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 6, bad, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "--broker-retention"));
}

static size_t waiting(void *ctx)
{
    return *(size_t *)ctx;
}

/* Feed bytes, take replies while the count of waiting commands allows:
 * returns how many came out; *failed when the reader failed. */
static int take(redisReader *r, size_t *pending, const char *bytes, int *failed)
{
    int n = 0;
    *failed = 0;
    assert_int_equal(redisReaderFeed(r, bytes, strlen(bytes)), REDIS_OK);
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(r, &reply) != REDIS_OK) {
            *failed = 1;
            return n;
        }
        if (reply == NULL)
            return n;
        freeReplyObject(reply);
        if (*pending > 0)
            (*pending)--;
        n++;
    }
}

static void test_guard_refuses_a_reply_nobody_asked_for(void **state)
{
    (void)state;
    size_t pending = 1;
    int failed;
    struct m0_reply_guard g;
    redisReader *r = redisReaderCreate();
    m0_reply_guard_install(&g, r, waiting, &pending);
    /* One PING waits; the broker answers it twice. */
    assert_int_equal(take(r, &pending, "+PONG\r\n+PONG\r\n", &failed), 1);
    assert_true(failed);
    assert_true(g.tripped);
    assert_non_null(strstr(g.why, "a status reply with no command waiting"));
    redisReaderFree(r);

    /* An error with nothing waiting is quoted (maxclients). */
    pending = 0;
    r = redisReaderCreate();
    m0_reply_guard_install(&g, r, waiting, &pending);
    assert_int_equal(take(r, &pending, "-ERR max number of clients reached\r\n", &failed), 0);
    assert_true(failed && g.tripped);
    assert_non_null(strstr(g.why, "ERR max number of clients reached"));
    redisReaderFree(r);

    /* Replies that were asked for pass, in pieces, arrays whole. */
    pending = 2;
    r = redisReaderCreate();
    m0_reply_guard_install(&g, r, waiting, &pending);
    assert_int_equal(take(r, &pending, "*2\r\n$1\r\na\r\n", &failed), 0);
    assert_false(failed);
    assert_int_equal(take(r, &pending, ":5\r\n$-1\r\n", &failed), 2);
    assert_false(failed || g.tripped);
    /* An array header bigger than any reply the broker sends. */
    pending = 1;
    assert_int_equal(take(r, &pending, "*2000000000\r\n", &failed), 0);
    assert_true(failed && g.tripped);
    assert_non_null(strstr(g.why, "elements"));
    redisReaderFree(r);
}

static redisReply *parse(const char *bytes)
{
    redisReader *r = redisReaderCreate();
    void *reply = NULL;
    assert_int_equal(redisReaderFeed(r, bytes, strlen(bytes)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(r, &reply), REDIS_OK);
    assert_non_null(reply);
    redisReaderFree(r);
    return reply;
}

static void test_reply_shapes(void **state)
{
    (void)state;
    struct {
        const char *bytes;
        enum m0_bcmd cmd;
        enum m0_breply want;
    } cases[] = {
        {"+OK\r\n", M0_BCMD_STATUS, M0_BREPLY_OK},
        {"+PONG\r\n", M0_BCMD_STATUS, M0_BREPLY_UNEXPECTED},
        {"+PONG\r\n", M0_BCMD_PING, M0_BREPLY_OK},
        {"-NOAUTH Authentication required.\r\n", M0_BCMD_PING, M0_BREPLY_ERROR},
        {"$-1\r\n", M0_BCMD_COUNTER, M0_BREPLY_OK},
        {"$3\r\n123\r\n", M0_BCMD_COUNTER, M0_BREPLY_OK},
        {"$3\r\nabc\r\n", M0_BCMD_COUNTER, M0_BREPLY_UNEXPECTED},
        {"+PONG\r\n", M0_BCMD_COUNTER, M0_BREPLY_UNEXPECTED},
        {":1\r\n", M0_BCMD_INTEGER, M0_BREPLY_OK},
        {"$-1\r\n", M0_BCMD_XREAD, M0_BREPLY_OK},
        {"*1\r\n*2\r\n$1\r\nk\r\n*0\r\n", M0_BCMD_XREAD, M0_BREPLY_OK},
        {"*1\r\n:1\r\n", M0_BCMD_XREAD, M0_BREPLY_UNEXPECTED},
        {"+PONG\r\n", M0_BCMD_XREAD, M0_BREPLY_UNEXPECTED},
        {"*3\r\n$2\r\n20\r\n:1\r\n*0\r\n", M0_BCMD_RESUME, M0_BREPLY_OK},
        {"*3\r\n$2\r\nxx\r\n:1\r\n*0\r\n", M0_BCMD_RESUME, M0_BREPLY_UNEXPECTED},
        {"*2\r\n$2\r\n20\r\n:1\r\n", M0_BCMD_RESUME, M0_BREPLY_UNEXPECTED},
    };
    for (size_t i = 0; i < M0_ARRAY_LEN(cases); i++) {
        redisReply *r = parse(cases[i].bytes);
        assert_int_equal(m0_breply_classify(r, cases[i].cmd), cases[i].want);
        freeReplyObject(r);
    }
    assert_int_equal(m0_breply_classify(NULL, M0_BCMD_PING), M0_BREPLY_UNEXPECTED);

    redisReply *e = parse("*2\r\n$4\r\n17-0\r\n*4\r\n$1\r\nc\r\n$4\r\nnews\r\n$1\r\nf\r\n:3\r\n");
    assert_true(m0_breply_entry_ok(e));
    assert_int_equal(m0_breply_entry_id(e->element[0]), 17);
    assert_non_null(m0_breply_field(e->element[1], "c"));
    assert_null(m0_breply_field(e->element[1], "f"));    /* not a string */
    assert_null(m0_breply_field(e->element[1], "s"));
    freeReplyObject(e);

    uint64_t v;
    assert_int_equal(m0_u64_parse("18446744073709551615", 20, &v), M0_OK);
    assert_true(v == UINT64_MAX);
    assert_int_equal(m0_u64_parse("18446744073709551616", 20, &v), M0_ERR);
    assert_int_equal(m0_u64_parse("", 0, &v), M0_ERR);
    assert_int_equal(m0_u64_parse("1a", 2, &v), M0_ERR);

    const char *wrong = "WRONGPASS invalid username-password pair or user is disabled.";
    assert_true(m0_breply_auth_failed(wrong, strlen(wrong)));
    assert_true(m0_breply_auth_failed("NOAUTH Authentication required.", 31));
    assert_true(m0_breply_auth_failed("ERR invalid password", 20));
    assert_false(m0_breply_auth_failed("ERR max number of clients reached", 33));
}

static void test_sentinel_and_tls_forms(void **state)
{
    (void)state;
    struct m0_broker_cfg b;
    char err[160];
    assert_int_equal(m0_broker_parse_url("redis+sentinel://:pw@a:1,b,[::1]:3/mym/2", &b, err, sizeof err), M0_OK);
    assert_true(b.sentinel && !b.tls && !b.is_unix);
    assert_string_equal(b.engine, "redis");
    assert_int_equal(b.nhosts, 3);
    assert_string_equal(b.hosts[0].host, "a");
    assert_int_equal(b.hosts[0].port, 1);
    assert_string_equal(b.hosts[1].host, "b");
    assert_int_equal(b.hosts[1].port, 26379);          /* a sentinel's default port */
    assert_string_equal(b.hosts[2].host, "::1");
    assert_int_equal(b.hosts[2].port, 3);
    assert_string_equal(b.master, "mym");
    assert_int_equal(b.db, 2);
    assert_string_equal(b.password, "pw");
    assert_string_equal(b.shown, "redis+sentinel://:***@a:1,b:26379,[::1]:3/mym/2");
    assert_int_equal(m0_broker_parse_url("rediss://cache.example:6380/1", &b, err, sizeof err), M0_OK);
    assert_true(b.tls && !b.sentinel);
    assert_string_equal(b.host, "cache.example");
    assert_int_equal(b.port, 6380);
    assert_string_equal(b.shown, "rediss://cache.example:6380/1");
    assert_int_equal(m0_broker_parse_url("rediss+sentinel://s1/m", &b, err, sizeof err), M0_OK);
    assert_true(b.tls && b.sentinel);
    assert_string_equal(b.master, "m");
    assert_int_equal(b.db, 0);
    const char *bad[] = {"redis+sentinel://a:1", "redis+sentinel://a:1/", "redis://a:1,b:2", "rediss://a,b/0",
                         "redis+sentinel://a:1/m/x", "redis+sentinel://a:1,,b/m", "redis+sentinel://a:0/m",
                         "redis+sentinel:///m", "rediss://", "redis+sentinel://a/m\x01"};
    for (size_t i = 0; i < M0_ARRAY_LEN(bad); i++) {
        err[0] = '\0';
        assert_int_equal(m0_broker_parse_url(bad[i], &b, err, sizeof err), M0_ERR);
        assert_true(err[0] != '\0');
    }
}

static void test_min_replicas_and_tls_flags(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    char *sentinel[] = {"m0serve", "app:app", "--broker", "redis+sentinel://s:1/m"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 4, sentinel, err, sizeof err), M0_OK);
    assert_int_equal(m0_broker_configure(&cfg), M0_OK);
    assert_int_equal(m0_broker->min_replicas, 1);       /* Sentinel: one replica by default */
    char *plain[] = {"m0serve", "app:app", "--broker", "redis://h:1"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 4, plain, err, sizeof err), M0_OK);
    assert_int_equal(m0_broker_configure(&cfg), M0_OK);
    assert_int_equal(m0_broker->min_replicas, 0);
    char *none[] = {"m0serve", "app:app", "--broker", "redis+sentinel://s:1/m", "--broker-min-replicas", "0"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 6, none, err, sizeof err), M0_OK);
    assert_int_equal(m0_broker_configure(&cfg), M0_OK);
    assert_int_equal(m0_broker->min_replicas, 0);
    char *tls_on_plain[] = {"m0serve", "app:app", "--broker", "redis://h:1", "--broker-ca-certs", "/ca.pem"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 6, tls_on_plain, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "--broker-ca-certs"));
    char *key_alone[] = {"m0serve", "app:app", "--broker", "rediss://h:1", "--broker-keyfile", "/k.pem"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 6, key_alone, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "--broker-keyfile"));
    char *ok[] = {"m0serve", "app:app", "--broker", "rediss+sentinel://s/m", "--broker-ca-certs", "/ca.pem",
                  "--broker-certfile", "/c.pem", "--broker-keyfile", "/k.pem"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 10, ok, err, sizeof err), M0_OK);
    assert_int_equal(m0_broker_configure(&cfg), M0_OK);
    assert_string_equal(m0_broker->ca_certs, "/ca.pem");
    assert_string_equal(m0_broker->keyfile, "/k.pem");
}

static void test_sentinel_replies(void **state)
{
    (void)state;
    struct m0_role role;
    redisReply *r = parse("*3\r\n$6\r\nmaster\r\n:12\r\n*0\r\n");
    assert_int_equal(m0_breply_role(r, &role), M0_OK);
    assert_int_equal(role.kind, M0_ROLE_PRIMARY);
    assert_int_equal(m0_breply_classify(r, M0_BCMD_ROLE), M0_BREPLY_OK);
    freeReplyObject(r);
    r = parse("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n:12\r\n");
    assert_int_equal(m0_breply_role(r, &role), M0_OK);
    assert_int_equal(role.kind, M0_ROLE_REPLICA);
    assert_string_equal(role.primary.host, "127.0.0.1");
    assert_int_equal(role.primary.port, 6379);
    assert_true(role.linked);
    freeReplyObject(r);
    r = parse("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$4\r\nsync\r\n:-1\r\n");
    assert_int_equal(m0_breply_role(r, &role), M0_OK);
    assert_false(role.linked);
    freeReplyObject(r);
    r = parse("*5\r\n$5\r\nslave\r\n$5\r\na b c\r\n:6379\r\n$9\r\nconnected\r\n:1\r\n");   /* no spaces */
    assert_int_equal(m0_breply_role(r, &role), M0_ERR);
    assert_int_equal(m0_breply_classify(r, M0_BCMD_ROLE), M0_BREPLY_UNEXPECTED);
    freeReplyObject(r);
    r = parse("+PONG\r\n");
    assert_int_equal(m0_breply_role(r, &role), M0_ERR);
    freeReplyObject(r);

    struct m0_hostport a;
    r = parse("*2\r\n$8\r\n10.0.0.5\r\n$4\r\n6379\r\n");
    assert_int_equal(m0_breply_addr(r, &a), M0_OK);
    assert_string_equal(a.host, "10.0.0.5");
    assert_int_equal(a.port, 6379);
    freeReplyObject(r);
    r = parse("$-1\r\n");
    assert_int_equal(m0_breply_addr(r, &a), M0_AGAIN);          /* the sentinel does not know the name */
    assert_int_equal(m0_breply_classify(r, M0_BCMD_ADDR), M0_BREPLY_OK);
    freeReplyObject(r);
    const char *bad_addr[] = {"*2\r\n$8\r\n10.0.0.5\r\n$1\r\n0\r\n", "*2\r\n$8\r\n10.0.0.5\r\n$5\r\n70000\r\n",
                              "*1\r\n$8\r\n10.0.0.5\r\n", "*2\r\n$0\r\n\r\n$4\r\n6379\r\n", ":5\r\n"};
    for (size_t i = 0; i < M0_ARRAY_LEN(bad_addr); i++) {
        r = parse(bad_addr[i]);
        assert_int_equal(m0_breply_addr(r, &a), M0_ERR);
        freeReplyObject(r);
    }

    /* Replicas: usable ones only, linked first. */
    r = parse("*4\r\n"
              "*8\r\n$2\r\nip\r\n$1\r\na\r\n$4\r\nport\r\n$1\r\n1\r\n$5\r\nflags\r\n$5\r\nslave\r\n"
              "$18\r\nmaster-link-status\r\n$3\r\nerr\r\n"
              "*8\r\n$2\r\nip\r\n$1\r\nb\r\n$4\r\nport\r\n$1\r\n2\r\n$5\r\nflags\r\n$12\r\nslave,s_down\r\n"
              "$18\r\nmaster-link-status\r\n$2\r\nok\r\n"
              "*8\r\n$2\r\nip\r\n$1\r\nc\r\n$4\r\nport\r\n$1\r\n3\r\n$5\r\nflags\r\n$5\r\nslave\r\n"
              "$18\r\nmaster-link-status\r\n$2\r\nok\r\n"
              "*10\r\n$2\r\nip\r\n$1\r\nd\r\n$4\r\nport\r\n$1\r\n4\r\n$5\r\nflags\r\n$5\r\nslave\r\n"
              "$18\r\nmaster-link-status\r\n$3\r\nerr\r\n$13\r\nrole-reported\r\n$6\r\nmaster\r\n");
    struct m0_hostport list[4];
    assert_int_equal(m0_breply_replicas(r, list, 4), 2);
    assert_string_equal(list[0].host, "c");
    assert_string_equal(list[1].host, "a");
    assert_int_equal(m0_breply_replicas(r, list, 1), 1);
    freeReplyObject(r);

    const redisReply *ch, *payload;
    r = parse("*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n");
    assert_int_equal(m0_breply_push(r, &ch, &payload), M0_PUSH_CONFIRM);
    freeReplyObject(r);
    r = parse("*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$32\r\nm0 127.0.0.1 6379 127.0.0.1 6380\r\n");
    assert_int_equal(m0_breply_push(r, &ch, &payload), M0_PUSH_MESSAGE);
    struct m0_hostport to;
    assert_int_equal(m0_sentinel_event(ch->str, ch->len, payload->str, payload->len, "m0", &to), M0_SEV_SWITCH);
    assert_string_equal(to.host, "127.0.0.1");
    assert_int_equal(to.port, 6380);
    assert_int_equal(m0_sentinel_event(ch->str, ch->len, payload->str, payload->len, "other", &to), M0_SEV_NONE);
    freeReplyObject(r);
    r = parse("+OK\r\n");
    assert_int_equal(m0_breply_push(r, &ch, &payload), M0_PUSH_BAD);
    freeReplyObject(r);

    const char *down = "master m0 10.0.0.1 7000 #quorum 2/2";
    assert_int_equal(m0_sentinel_event("+odown", 6, down, strlen(down), "m0", &to), M0_SEV_DOWN);
    assert_string_equal(to.host, "10.0.0.1");
    assert_int_equal(to.port, 7000);
    assert_int_equal(m0_sentinel_event("-sdown", 6, down, strlen(down), "m0", &to), M0_SEV_UP);
    const char *replica = "slave 127.0.0.1:1 127.0.0.1 1 @ m0 10.0.0.1 7000";
    assert_int_equal(m0_sentinel_event("+sdown", 6, replica, strlen(replica), "m0", &to), M0_SEV_NONE);
    assert_int_equal(m0_sentinel_event("+sdown", 6, "master m0", 9, "m0", &to), M0_SEV_NONE);
    assert_int_equal(m0_sentinel_event("+switch-master", 14, "m0 a 1 b", 8, "m0", &to), M0_SEV_NONE);
}

static void test_publish_key_rule(void **state)
{
    (void)state;
    assert_true(m0_broker_key_ok("order-42-shipped", 16));
    assert_true(m0_broker_key_ok("with space", 10));
    assert_false(m0_broker_key_ok("", 0));
    assert_false(m0_broker_key_ok("tab\there", 8));
    assert_false(m0_broker_key_ok("\xc3\xa9", 2));
    char big[M0_BROKER_KEY_MAX + 1];
    memset(big, 'k', sizeof big);
    assert_true(m0_broker_key_ok(big, M0_BROKER_KEY_MAX));
    assert_false(m0_broker_key_ok(big, M0_BROKER_KEY_MAX + 1));
}

static void test_nats_url_forms_and_flags(void **state)
{
    (void)state;
    struct m0_broker_cfg b;
    char err[256];
    assert_int_equal(m0_broker_parse_url("nats://10.0.0.1,10.0.0.2:4223,[::1]:5000", &b, err, sizeof err), M0_OK);
    assert_string_equal(b.engine, "nats");
    assert_int_equal(b.nhosts, 3);
    assert_int_equal(b.hosts[0].port, 4222);                /* NATS's default port */
    assert_int_equal(b.hosts[1].port, 4223);
    assert_string_equal(b.hosts[2].host, "::1");
    assert_string_equal(b.shown, "nats://10.0.0.1:4222,10.0.0.2:4223,[::1]:5000");   /* no path */
    assert_int_equal(m0_broker_parse_url("nats://u:pw@h", &b, err, sizeof err), M0_OK);
    assert_string_equal(b.username, "u");
    assert_string_equal(b.shown, "nats://u:***@h:4222");
    assert_int_equal(m0_broker_parse_url("nats://tok@h", &b, err, sizeof err), M0_OK);
    assert_string_equal(b.username, "");                     /* a token alone */
    assert_string_equal(b.password, "tok");
    assert_int_equal(m0_broker_parse_url("nats://h:4222/0", &b, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "no path"));
    assert_int_equal(m0_broker_parse_url("nats://h:0", &b, err, sizeof err), M0_ERR);
    assert_int_equal(m0_broker_parse_url("nats://", &b, err, sizeof err), M0_ERR);
    struct m0_config cfg;
    char *nats[] = {"m0serve", "app:app", "--broker", "nats://h", "--broker-replicas", "5"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 6, nats, err, sizeof err), M0_OK);
    assert_int_equal(m0_broker_configure(&cfg), M0_OK);
    assert_int_equal(m0_broker->replicas, 5);
    assert_int_equal(m0_broker->min_replicas, 0);
    char *dflt[] = {"m0serve", "app:app", "--broker", "nats://h"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 4, dflt, err, sizeof err), M0_OK);
    assert_int_equal(m0_broker_configure(&cfg), M0_OK);
    assert_int_equal(m0_broker->replicas, -1);              /* 3, or 1 on a server without clustering */
    char *on_redis[] = {"m0serve", "app:app", "--broker", "redis://h", "--broker-replicas", "3"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 6, on_redis, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "--broker-replicas"));
    char *wait_on_nats[] = {"m0serve", "app:app", "--broker", "nats://h", "--broker-min-replicas", "1"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 6, wait_on_nats, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "--broker-min-replicas"));
    char *tls_on_nats[] = {"m0serve", "app:app", "--broker", "nats://h", "--broker-ca-certs", "/ca.pem"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 6, tls_on_nats, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "--broker-ca-certs"));
    char *too_many[] = {"m0serve", "app:app", "--broker", "nats://h", "--broker-replicas", "6"};
    m0_config_defaults(&cfg);
    assert_int_equal(m0_config_parse(&cfg, 6, too_many, err, sizeof err), M0_ERR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_forms),
        cmocka_unit_test(test_unix_forms),
        cmocka_unit_test(test_bad_urls),
        cmocka_unit_test(test_prefix_rule),
        cmocka_unit_test(test_configure_from_flags),
        cmocka_unit_test(test_guard_refuses_a_reply_nobody_asked_for),
        cmocka_unit_test(test_reply_shapes),
        cmocka_unit_test(test_publish_key_rule),
        cmocka_unit_test(test_sentinel_and_tls_forms),
        cmocka_unit_test(test_min_replicas_and_tls_flags),
        cmocka_unit_test(test_sentinel_replies),
        cmocka_unit_test(test_nats_url_forms_and_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
