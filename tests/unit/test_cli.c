/*
 * test_cli.c — flag and M0_* variable parsing: one line naming a bad flag,
 * environment under argv, bind address forms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/config.h"

static int parse(struct m0_config *cfg, char *err, int argc, char **argv)
{
    m0_config_defaults(cfg);
    return m0_config_parse(cfg, argc, argv, err, 256);
}

static void test_unknown_flag_is_named(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    char *argv[] = {"m0serve", "app:app", "--wrokers", "2"};
    assert_int_equal(parse(&cfg, err, 4, argv), M0_ERR);
    assert_non_null(strstr(err, "--wrokers"));
    assert_null(strchr(err, '\n'));
}

static void test_bad_value_is_named(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    char *argv[] = {"m0serve", "app:app", "--workers", "zero"};
    assert_int_equal(parse(&cfg, err, 4, argv), M0_ERR);
    assert_non_null(strstr(err, "--workers"));
    char *argv2[] = {"m0serve", "app:app", "--max-body=12Q"};
    assert_int_equal(parse(&cfg, err, 3, argv2), M0_ERR);
    assert_non_null(strstr(err, "--max-body"));
}

static void test_environment_then_argv(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    setenv("M0_WORKERS", "3", 1);
    setenv("M0_MAX_BODY", "2m", 1);
    char *argv[] = {"m0serve", "app:app"};
    assert_int_equal(parse(&cfg, err, 2, argv), M0_OK);
    assert_int_equal(cfg.workers, 3);
    assert_int_equal(cfg.limits.max_body, 2 * 1024 * 1024);
    char *argv2[] = {"m0serve", "app:app", "--workers", "5"};
    assert_int_equal(parse(&cfg, err, 4, argv2), M0_OK);
    assert_int_equal(cfg.workers, 5);
    setenv("M0_WORKERS", "-1", 1);
    assert_int_equal(parse(&cfg, err, 2, argv), M0_ERR);
    assert_non_null(strstr(err, "M0_WORKERS"));
    unsetenv("M0_WORKERS");
    unsetenv("M0_MAX_BODY");
}

static void test_bind_forms(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256], *host, *path;
    int port;
    char *argv[] = {"m0serve", "app", "--host", "0.0.0.0", "--port", "9000"};
    assert_int_equal(parse(&cfg, err, 6, argv), M0_OK);
    assert_int_equal(m0_config_bind_parts(&cfg, &host, &port, &path, err, sizeof err), M0_OK);
    assert_string_equal(host, "0.0.0.0");
    assert_int_equal(port, 9000);
    assert_null(path);
    char *argv2[] = {"m0serve", "app", "--bind", "unix:/tmp/m0.sock"};
    assert_int_equal(parse(&cfg, err, 4, argv2), M0_OK);
    assert_int_equal(m0_config_bind_parts(&cfg, &host, &port, &path, err, sizeof err), M0_OK);
    assert_string_equal(path, "/tmp/m0.sock");
    char *argv3[] = {"m0serve", "app", "--bind", "nonsense"};
    assert_int_equal(parse(&cfg, err, 4, argv3), M0_ERR);
    assert_non_null(strstr(err, "--bind"));
    char *argv4[] = {"m0serve"};
    assert_int_equal(parse(&cfg, err, 1, argv4), M0_ERR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_flag_is_named),
        cmocka_unit_test(test_bad_value_is_named),
        cmocka_unit_test(test_environment_then_argv),
        cmocka_unit_test(test_bind_forms),
    };
    return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
