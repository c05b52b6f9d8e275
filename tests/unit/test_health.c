/*
 * test_health.c — the /health JSON (src/http/health_json.c).
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
#include "m0/health_json.h"
#include "m0/registry.h"

static void test_health_json(void **state)
{
    (void)state;
    struct m0_buf b = {0};
    struct m0_health h = {.pid = 9, .worker = 1, .connections = 3, .held_streams = 2,
                          .pool_threads = 4, .pool_busy = 1, .events_published = 5, .events_received = 7};
    struct m0_channel_stat top[] = {{.name = "a\"b", .len = 3, .subscribers = 2}};
    m0_health_render(&b, &h, top, 1);
    m0_buf_append(&b, "", 1);
    assert_non_null(strstr(b.data, "\"held_streams\": 2"));
    assert_non_null(strstr(b.data, "\"idle\": 3"));
    /* What the worker's application published, and what its bus gave it. */
    assert_non_null(strstr(b.data, "\"events_published\": 5, \"events_received\": 7"));
    assert_non_null(strstr(b.data, "{\"channel\": \"a\\\"b\", \"subscribers\": 2}"));
    m0_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_json),
    };
    return cmocka_run_group_tests_name("health", tests, NULL, NULL);
}
