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

#include "m0/cli.h"
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

/* --threads N: event loops per worker, 1..M0_MAX_LOOPS (default 1); the
 * GIL build's refusal is main.c's (exit 78, tests/e2e/test_habits.py). */
static void test_threads_flag(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    char *argv[] = {"m0serve", "app:app"};
    assert_int_equal(parse(&cfg, err, 2, argv), M0_OK);
    assert_int_equal(cfg.loops, 1);
    char *argv2[] = {"m0serve", "app:app", "--threads", "4", "--workers", "2"};
    assert_int_equal(parse(&cfg, err, 6, argv2), M0_OK);
    assert_int_equal(cfg.loops, 4);
    assert_int_equal(cfg.workers, 2);
    char *argv3[] = {"m0serve", "app:app", "--threads", "65"};
    assert_int_equal(parse(&cfg, err, 4, argv3), M0_ERR);
    assert_non_null(strstr(err, "--threads"));
    char *argv4[] = {"m0serve", "app:app", "--threads=0"};
    assert_int_equal(parse(&cfg, err, 3, argv4), M0_ERR);
    assert_non_null(strstr(err, "--threads"));
}

/* GRIP (issue 19): the key implies --realtime; the control port needs the
 * key and is refused with --broker (one line naming the flag). */
static void test_grip_flags(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    char *argv[] = {"m0serve", "app:app", "--grip-key-file", "/k", "--grip-control", "127.0.0.1:5561"};
    assert_int_equal(parse(&cfg, err, 6, argv), M0_OK);
    assert_int_equal(cfg.realtime, 1);
    assert_string_equal(cfg.grip_control, "127.0.0.1:5561");
    assert_int_equal(cfg.grip_listener, -1);
    char *argv2[] = {"m0serve", "app:app", "--grip-control", "127.0.0.1:5561"};
    assert_int_equal(parse(&cfg, err, 4, argv2), M0_ERR);
    assert_non_null(strstr(err, "--grip-control"));
    assert_null(strchr(err, '\n'));
    char *argv3[] = {"m0serve", "app:app", "--grip-key-file", "/k", "--grip-control", "127.0.0.1:5561",
                     "--broker", "redis://127.0.0.1:6379"};
    assert_int_equal(parse(&cfg, err, 8, argv3), M0_OK);     /* publishes go through the broker */
    assert_string_equal(cfg.grip_control, "127.0.0.1:5561");
    assert_string_equal(cfg.broker, "redis://127.0.0.1:6379");
    char *argv4[] = {"m0serve", "app:app"};
    assert_int_equal(parse(&cfg, err, 2, argv4), M0_OK);
    assert_int_equal(cfg.realtime, 0);
    assert_null(cfg.grip_key_file);
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
    char err[256];
    struct m0_bind_parts b, b2;
    char *argv[] = {"m0serve", "app", "--host", "0.0.0.0", "--port", "9000"};
    assert_int_equal(parse(&cfg, err, 6, argv), M0_OK);
    assert_int_equal(m0_config_bind_parts(&cfg, &b, err, sizeof err), M0_OK);
    assert_string_equal(b.host, "0.0.0.0");
    assert_int_equal(b.port, 9000);
    assert_null(b.path);
    char *argv2[] = {"m0serve", "app", "--bind", "unix:/tmp/m0.sock"};
    assert_int_equal(parse(&cfg, err, 4, argv2), M0_OK);
    assert_int_equal(m0_config_bind_parts(&cfg, &b2, err, sizeof err), M0_OK);
    assert_string_equal(b2.path, "/tmp/m0.sock");
    /* Each result is the caller's own: the second call left the first alone. */
    assert_string_equal(b.host, "0.0.0.0");
    assert_int_equal(b.port, 9000);
    assert_null(b2.host);
    char *argv3[] = {"m0serve", "app", "--bind", "nonsense"};
    assert_int_equal(parse(&cfg, err, 4, argv3), M0_ERR);
    assert_non_null(strstr(err, "--bind"));
    char *argv4[] = {"m0serve"};
    assert_int_equal(parse(&cfg, err, 1, argv4), M0_ERR);
    /* Two --bind: both listened on (gunicorn's -b), the first names the server. */
    char *argv5[] = {"m0serve", "app", "--bind", "127.0.0.1:1", "--bind", "http://127.0.0.1:2"};
    assert_int_equal(parse(&cfg, err, 6, argv5), M0_OK);
    assert_int_equal(cfg.nbinds, 2);
    assert_string_equal(cfg.bind, "127.0.0.1:1");
    assert_string_equal(cfg.binds[1], "http://127.0.0.1:2");
    /* The same address twice: refused in one line naming it. */
    char *argv6[] = {"m0serve", "app", "--bind", "127.0.0.1:1", "--bind", "127.0.0.1:1"};
    assert_int_equal(parse(&cfg, err, 6, argv6), M0_ERR);
    assert_non_null(strstr(err, "--bind"));
    assert_non_null(strstr(err, "given twice"));
}

static void test_mounts(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    char *argv[] = {"m0serve", "site", "--mount", "/flask/=flaskapp:app", "--static=/static=./s",
                    "--mount", "/api=api.main:app"};
    assert_int_equal(parse(&cfg, err, 7, argv), M0_OK);
    assert_int_equal(cfg.nmounts, 4);
    assert_string_equal(cfg.mounts[0].prefix, "");           /* the positional app is the root mount */
    assert_string_equal(cfg.mounts[0].spec, "site");
    assert_int_equal(cfg.mounts[0].kind, M0_MOUNT_APP);
    assert_string_equal(cfg.mounts[1].prefix, "/flask");     /* trailing '/' dropped */
    assert_int_equal(cfg.mounts[1].prefix_len, 6);
    assert_string_equal(cfg.mounts[1].spec, "flaskapp:app");
    assert_string_equal(cfg.mounts[2].prefix, "/static");
    assert_string_equal(cfg.mounts[2].spec, "./s");
    assert_int_equal(cfg.mounts[2].kind, M0_MOUNT_STATIC);
    assert_string_equal(cfg.mounts[3].spec, "api.main:app");
    assert_string_equal(cfg.app, "site");

    /* No positional app: --mount / is the root; a server of static files only is fine. */
    char *argv2[] = {"m0serve", "--mount", "/=site"};
    assert_int_equal(parse(&cfg, err, 3, argv2), M0_OK);
    assert_string_equal(cfg.app, "site");
    assert_int_equal(cfg.mounts[0].prefix_len, 0);
    char *argv3[] = {"m0serve", "--static", "/s=dir"};
    assert_int_equal(parse(&cfg, err, 3, argv3), M0_OK);
    assert_null(cfg.app);
    assert_int_equal(cfg.nmounts, 1);
}

static void test_bad_mounts_are_named(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    static const char *const bad[] = {
        "flask=flaskapp:app", "/flask", "/flask=", "//x=a", "/a//b=a", "/a/../b=a", "/./a=a",
        "/a%2Fb=a", "/a,b=a", "/a b=a", "=a",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"m0serve", "app", "--mount", (char *)bad[i]};
        assert_int_equal(parse(&cfg, err, 4, argv), M0_ERR);
        assert_non_null(strstr(err, "--mount"));
        assert_null(strchr(err, '\n'));
    }
    /* Twice the same prefix, the root included. */
    char *argv[] = {"m0serve", "app", "--mount", "/a=x", "--static", "/a/=d"};
    assert_int_equal(parse(&cfg, err, 6, argv), M0_ERR);
    assert_non_null(strstr(err, "--static"));
    char *argv2[] = {"m0serve", "app", "--mount", "/=x"};
    assert_int_equal(parse(&cfg, err, 4, argv2), M0_ERR);
    assert_non_null(strstr(err, "twice"));
    /* Nothing to serve at all. */
    char *argv3[] = {"m0serve", "--static-index"};
    assert_int_equal(parse(&cfg, err, 2, argv3), M0_ERR);
    char *argv4[] = {"m0serve", "app", "--static-max-age", "-1"};
    assert_int_equal(parse(&cfg, err, 4, argv4), M0_ERR);
    assert_non_null(strstr(err, "--static-max-age"));
}

static void test_mount_lists_in_the_environment(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    setenv("M0_MOUNTS", " /flask=flaskapp:app , /api=api:app,", 1);
    setenv("M0_STATIC", "/static=/srv/static", 1);
    char *argv[] = {"m0serve", "site"};
    assert_int_equal(parse(&cfg, err, 2, argv), M0_OK);
    assert_int_equal(cfg.nmounts, 4);
    assert_string_equal(cfg.mounts[1].prefix, "/flask");
    assert_string_equal(cfg.mounts[1].spec, "flaskapp:app");
    assert_string_equal(cfg.mounts[2].spec, "api:app");
    assert_string_equal(cfg.mounts[3].spec, "/srv/static");
    /* The command line wins: one --mount replaces M0_MOUNTS, M0_STATIC stays. */
    char *argv2[] = {"m0serve", "site", "--mount", "/x=x:app"};
    assert_int_equal(parse(&cfg, err, 4, argv2), M0_OK);
    assert_int_equal(cfg.nmounts, 3);
    assert_string_equal(cfg.mounts[1].prefix, "/static");
    assert_string_equal(cfg.mounts[2].prefix, "/x");
    setenv("M0_MOUNTS", "/ok=a,bad", 1);
    assert_int_equal(parse(&cfg, err, 2, argv), M0_ERR);
    assert_non_null(strstr(err, "M0_MOUNTS"));
    /* A factory call's commas (in its parentheses, brackets or quotes)
     * stay in its item (issue 27 item 16). */
    setenv("M0_MOUNTS", "/a=api:make('x,y', n=(1, 2)),/b=b:f(\"q\\\",)\", [3, 4]), /c=c:app", 1);
    assert_int_equal(parse(&cfg, err, 2, argv), M0_OK);
    assert_int_equal(cfg.nmounts, 5);
    assert_string_equal(cfg.mounts[1].spec, "api:make('x,y', n=(1, 2))");
    assert_string_equal(cfg.mounts[2].spec, "b:f(\"q\\\",)\", [3, 4])");
    assert_string_equal(cfg.mounts[3].spec, "c:app");
    unsetenv("M0_MOUNTS");
    unsetenv("M0_STATIC");
}

/* gunicorn's short flags where the option means the same: -w 2, -w2, -b. */
static void test_gunicorn_short_flags(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    char *argv[] = {"m0serve", "app:app", "-w", "3", "-b", "0.0.0.0:9001", "-u", "www", "-g", "web", "-p", "/run/m0.pid",
                    "-m", "007"};
    assert_int_equal(parse(&cfg, err, 14, argv), M0_OK);
    assert_int_equal(cfg.workers, 3);
    assert_true(cfg.workers_explicit);
    assert_string_equal(cfg.bind, "0.0.0.0:9001");
    assert_string_equal(cfg.user, "www");
    assert_string_equal(cfg.group, "web");
    assert_string_equal(cfg.pid_file, "/run/m0.pid");
    assert_int_equal(cfg.umask, 07);
    char *glued[] = {"m0serve", "app:app", "-w2", "-b127.0.0.1:0"};
    assert_int_equal(parse(&cfg, err, 4, glued), M0_OK);
    assert_int_equal(cfg.workers, 2);
    assert_string_equal(cfg.bind, "127.0.0.1:0");
    /* A bad value names the long flag. */
    char *bad[] = {"m0serve", "app:app", "-w", "0"};
    assert_int_equal(parse(&cfg, err, 4, bad), M0_ERR);
    assert_non_null(strstr(err, "--workers: invalid value '0'"));
    char *none[] = {"m0serve", "app:app", "-w"};
    assert_int_equal(parse(&cfg, err, 3, none), M0_ERR);
    assert_non_null(strstr(err, "--workers: expected a value"));
    char *version[] = {"m0serve", "-v"};
    assert_int_equal(parse(&cfg, err, 2, version), M0_OK);
    assert_true(cfg.show_version);
}

/* --max-workers: SIGTTIN's ceiling, the metrics' sizing (issue 27 item 12):
 * 64 or --workers when more; never fewer than --workers. */
static void test_max_workers(void **state)
{
    (void)state;
    struct m0_config cfg;
    char err[256];
    char *dflt[] = {"m0serve", "app:app", "-w", "3"};
    assert_int_equal(parse(&cfg, err, 4, dflt), M0_OK);
    assert_int_equal(cfg.max_workers, M0_MAX_WORKERS_DEFAULT);
    char *many[] = {"m0serve", "app:app", "-w", "100"};
    assert_int_equal(parse(&cfg, err, 4, many), M0_OK);
    assert_int_equal(cfg.max_workers, 100);
    char *given[] = {"m0serve", "app:app", "-w", "2", "--max-workers", "8"};
    assert_int_equal(parse(&cfg, err, 6, given), M0_OK);
    assert_int_equal(cfg.max_workers, 8);
    char *fewer[] = {"m0serve", "app:app", "-w", "4", "--max-workers", "3"};
    assert_int_equal(parse(&cfg, err, 6, fewer), M0_ERR);
    assert_string_equal(err, "m0serve: error: --max-workers: 3 is fewer than --workers 4");
    char *zero[] = {"m0serve", "app:app", "--max-workers", "0"};
    assert_int_equal(parse(&cfg, err, 4, zero), M0_ERR);
}

/* An unknown flag is answered with the nearest known one, on one line. */
static void test_unknown_flag_gets_the_nearest(void **state)
{
    (void)state;
    static const struct {
        const char *given, *want;
    } cases[] = {
        {"--worker", "unrecognized option '--worker'; did you mean '--workers'?"},
        {"--wrokers", "unrecognized option '--wrokers'; did you mean '--workers'?"},
        {"--acces-log", "did you mean '--access-log'?"},
        {"--max-bdy", "did you mean '--max-body'?"},
        {"--graceful", "did you mean '--graceful-timeout'?"},
        {"--verison", "did you mean '--version'?"},
        {"--chdir", "did you mean '--app-dir'?"},
        {"--thread", "did you mean '--threads'?"},
        {"--keep-alive", "did you mean '--timeout-keep-alive'?"},
        {"-t", "unrecognized option '-t'; m0serve has no worker timeout"},
        {"-k", "unrecognized option '-k'; m0serve has one kind of worker"},
        {"-D", "stays in the foreground"},
        /* Habits of uvicorn and Granian users (issue 27 item 17): what m0serve
         * does instead, never a near spelling of another meaning. */
        {"--proxy-headers", "from the peers in --forwarded-allow-ips"},
        {"--preload", "nothing to preload"},
        {"--root-path", "--mount PREFIX=MODULE:ATTR"},
        {"--url-path-prefix", "--mount PREFIX=MODULE:ATTR"},
        {"--timeout-graceful-shutdown", "did you mean '--graceful-timeout'?"},
        {"--uds", "did you mean '--bind unix:PATH'?"},
        {"--fd", "LISTEN_FDS"},
        {"--statsd-host", "--metrics-bind"},
        /* TLS's flags and their aliases are real: a key with no certificate says what is missing. */
        {"--ssl-keyfile", "--keyfile: needs --certfile"},
        {"--keyfile", "--keyfile: needs --certfile"},
        {"--limit-max-requests", "did you mean '--max-requests'?"},
        {"--limit-concurrency", "did you mean '--max-connections'?"},
        {"--worker-connections", "did you mean '--max-connections'?"},
        {"--ws-max-size", "did you mean '--ws-max-message'?"},
        {"--interface", "did you mean '--protocol'?"},
        {"--reload-dir", "takes no paths"},
        {"--access-log-fmt", "did you mean '--access-log-format'?"},
        {"--pid-file", "did you mean '--pid'?"},
        {"--workers-max-rss", "did you mean '--worker-max-rss'?"},
        {"--runtime-threads", "did you mean '--threads'?"},
        {"--uds-permissions", "did you mean '--umask'?"},
        {"--http2-max-frame-size", "HTTP/1.1"},
        /* Slips still get the flag they slipped from ... */
        {"--accesslog", "did you mean '--access-log'?"},
        {"--grcaeful-timout", "did you mean '--graceful-timeout'?"},
        {"--max-header", "did you mean '--max-headers'?"},
        /* ... and a near spelling of another meaning gets none. */
        {"--boot-path", "--mount PREFIX=MODULE:ATTR"},        /* --root-path's slip, not --grant-path's */
        {"--mac-headers", "did you mean '--max-headers'?"},
        /* A slip of another server's flag gets that flag's answer. */
        {"--proxy-header", "from the peers in --forwarded-allow-ips"},
        {"--prelaod", "nothing to preload"},
        {"--timeout-graceful", "unrecognized option '--timeout-graceful' (see --help)"},
        /* Three edits, all in one word (grip/grant): a near spelling, not a near meaning. */
        {"--grip-path", "unrecognized option '--grip-path' (see --help)"},
        {"--zzzzzz", "unrecognized option '--zzzzzz' (see --help)"},
        {"-x", "unrecognized option '-x' (see --help)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct m0_config cfg;
        char err[256];
        char *argv[] = {"m0serve", "app:app", (char *)cases[i].given, "2"};
        assert_int_equal(parse(&cfg, err, 4, argv), M0_ERR);
        if (strstr(err, cases[i].want) == NULL)
            fail_msg("%s: got \"%s\", want \"%s\"", cases[i].given, err, cases[i].want);
        assert_null(strchr(err, '\n'));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_flag_is_named),
        cmocka_unit_test(test_bad_value_is_named),
        cmocka_unit_test(test_threads_flag),
        cmocka_unit_test(test_max_workers),
        cmocka_unit_test(test_environment_then_argv),
        cmocka_unit_test(test_bind_forms),
        cmocka_unit_test(test_mounts),
        cmocka_unit_test(test_bad_mounts_are_named),
        cmocka_unit_test(test_mount_lists_in_the_environment),
        cmocka_unit_test(test_gunicorn_short_flags),
        cmocka_unit_test(test_unknown_flag_gets_the_nearest),
        cmocka_unit_test(test_grip_flags),
    };
    return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
