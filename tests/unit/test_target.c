/*
 * test_target.c — the mount table's prefix rule: the longest prefix that
 * matches on a segment boundary, the root as the empty prefix, nothing
 * when no mount claims the path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "m0/target.h"

static struct m0_targets ts;

static void add(const char *prefix)
{
    struct m0_target *t = m0_targets_next(&ts, prefix, strlen(prefix), M0_TARGET_WSGI);
    assert_non_null(t);
    m0_targets_commit(&ts);
}

static const char *match(const char *path)
{
    const struct m0_target *t = m0_target_match(&ts, path, strlen(path));
    return t == NULL ? NULL : t->prefix;
}

static void test_longest_segment_prefix(void **state)
{
    (void)state;
    memset(&ts, 0, sizeof ts);
    add("/app");
    add("/app/admin");
    add("/static");
    assert_string_equal(match("/app"), "/app");
    assert_string_equal(match("/app/"), "/app");
    assert_string_equal(match("/app/x/y"), "/app");
    assert_string_equal(match("/app/admin"), "/app/admin");
    assert_string_equal(match("/app/admin/users"), "/app/admin");
    assert_string_equal(match("/app/administrator"), "/app");   /* a segment boundary, not a string prefix */
    assert_null(match("/application"));
    assert_null(match("/ap"));
    assert_null(match("/"));
    assert_null(match(""));
    assert_null(match("/STATIC/a.css"));                      /* case-sensitive, as paths are */
    assert_null(match("/static%2Fa.css"));                    /* the raw path: %2F is not a boundary */
    assert_string_equal(match("/static/a.css"), "/static");
}

static void test_root_is_the_empty_prefix(void **state)
{
    (void)state;
    memset(&ts, 0, sizeof ts);
    add("/flask");
    add("");          /* added after a deeper mount: order does not matter */
    add("/static");
    assert_string_equal(match("/"), "");
    assert_string_equal(match("/anything/else"), "");
    assert_string_equal(match("/flaskx"), "");
    assert_string_equal(match("/flask"), "/flask");
    assert_string_equal(match("/flask/x"), "/flask");
    assert_string_equal(match("/static/"), "/static");
    assert_string_equal(match("*"), "");                      /* OPTIONS * goes to the root app */
}

static void test_table_full(void **state)
{
    (void)state;
    memset(&ts, 0, sizeof ts);
    char names[M0_MAX_TARGETS][16];
    for (unsigned i = 0; i < M0_MAX_TARGETS; i++) {
        snprintf(names[i], sizeof names[i], "/m%u", i);
        add(names[i]);
    }
    assert_null(m0_targets_next(&ts, "/x", 2, M0_TARGET_WSGI));
    assert_string_equal(match("/m31/x"), "/m31");
    assert_string_equal(m0_target_mode(&ts.t[0]), "loop");
    ts.t[0].kind = M0_TARGET_STATIC;
    assert_string_equal(m0_target_mode(&ts.t[0]), "sendfile");
    assert_string_equal(m0_target_kind_name(M0_TARGET_ASGI), "asgi");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_longest_segment_prefix),
        cmocka_unit_test(test_root_is_the_empty_prefix),
        cmocka_unit_test(test_table_full),
    };
    return cmocka_run_group_tests_name("target", tests, NULL, NULL);
}
