/*
 * test_broker.c — the broker URL forms (redis://, unix://), their errors,
 * the masked form shown in logs and /health, and the key prefix rule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/broker_url.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_forms),
        cmocka_unit_test(test_unix_forms),
        cmocka_unit_test(test_bad_urls),
        cmocka_unit_test(test_prefix_rule),
        cmocka_unit_test(test_configure_from_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
