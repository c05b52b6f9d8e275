/*
 * test_metrics.c — the exposition writer (src/core/metrics_text.c): both
 * formats' naming of counters, histogram buckets cumulative with +Inf equal
 * to _count, label escaping, only configured mounts rendered, OpenMetrics's
 * "# EOF"; Accept negotiation; the label helpers; the flags' rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/cli.h"
#include "m0/config.h"
#include "m0/metrics_text.h"

static uint64_t cells[M0_MX_NCELLS];

static char *render(int om, const char *mount1)
{
    struct m0_mx_proc procs[2] = {{.worker = -1, .cpu_seconds = 1.5, .resident_bytes = 4096, .open_fds = 7,
                                   .max_fds = 1024, .start_time = 1700000000.25},
                                  {.worker = 0, .cpu_seconds = 2, .resident_bytes = 8192, .open_fds = 9}};
    struct m0_mx_view v = {.v = cells, .version = "0.1.0", .python = "3.11.2", .workers = 2,
                           .procs = procs, .nprocs = 2};
    v.mounts[0] = "/";
    v.mounts[1] = mount1;
    v.mounts[M0_MX_MOUNTS - 1] = "none";
    struct m0_buf b = {0};
    m0_mx_render(&b, &v, om);
    m0_buf_append(&b, "", 1);
    return b.data;
}

static void fill(void)
{
    memset(cells, 0, sizeof cells);
    cells[M0_MX_REQ(0, 0, 1)] = 7;          /* / GET 2xx */
    cells[M0_MX_REQ(1, 2, 4)] = 2;          /* mount 1 POST 5xx */
    cells[M0_MX_HIST(0, 0)] = 3;            /* <= 5 ms */
    cells[M0_MX_HIST(0, 5)] = 2;            /* <= 250 ms */
    cells[M0_MX_HIST(0, M0_MX_NBUCKETS - 1)] = 2;   /* over 10 s */
    cells[M0_MX_SUM_US(0)] = 25500000;
    cells[M0_MX_HELD_SSE] = 4;
    cells[M0_MX_HELD_WS] = 1;
    cells[M0_MX_EXIT_SIGNAL] = 1;
    cells[M0_MX_ACCEPTED] = 11;
}

static void test_text_format(void **state)
{
    (void)state;
    fill();
    char *t = render(0, "/api");
    assert_non_null(strstr(t, "# TYPE m0serve_requests_total counter\n"));
    assert_non_null(strstr(t, "m0serve_requests_total{mount=\"/\",method=\"GET\",status=\"2xx\"} 7\n"));
    assert_non_null(strstr(t, "m0serve_requests_total{mount=\"/api\",method=\"POST\",status=\"5xx\"} 2\n"));
    /* zero cells make no series */
    assert_null(strstr(t, "method=\"PUT\""));
    /* cumulative buckets; +Inf equals _count; the sum in seconds */
    assert_non_null(strstr(t, "m0serve_request_duration_seconds_bucket{mount=\"/\",le=\"0.005\"} 3\n"));
    assert_non_null(strstr(t, "m0serve_request_duration_seconds_bucket{mount=\"/\",le=\"0.1\"} 3\n"));
    assert_non_null(strstr(t, "m0serve_request_duration_seconds_bucket{mount=\"/\",le=\"0.25\"} 5\n"));
    assert_non_null(strstr(t, "m0serve_request_duration_seconds_bucket{mount=\"/\",le=\"10\"} 5\n"));
    assert_non_null(strstr(t, "m0serve_request_duration_seconds_bucket{mount=\"/\",le=\"+Inf\"} 7\n"));
    assert_non_null(strstr(t, "m0serve_request_duration_seconds_count{mount=\"/\"} 7\n"));
    assert_non_null(strstr(t, "m0serve_request_duration_seconds_sum{mount=\"/\"} 25.500000\n"));
    assert_non_null(strstr(t, "m0serve_held_streams{kind=\"sse\"} 4\n"));
    assert_non_null(strstr(t, "m0serve_held_streams{kind=\"websocket\"} 1\n"));
    assert_non_null(strstr(t, "m0serve_worker_exits_total{cause=\"signal\"} 1\n"));
    assert_non_null(strstr(t, "m0serve_connections_accepted_total 11\n"));
    assert_non_null(strstr(t, "# TYPE m0serve_build_info gauge\n"));
    assert_non_null(strstr(t, "m0serve_build_info{version=\"0.1.0\",python=\"3.11.2\",free_threaded=\"false\"} 1\n"));
    assert_non_null(strstr(t, "process_cpu_seconds_total{process=\"master\"} 1.50\n"));
    assert_non_null(strstr(t, "process_resident_memory_bytes{process=\"worker\",worker=\"0\"} 8192\n"));
    assert_non_null(strstr(t, "process_max_fds{process=\"master\"} 1024\n"));
    assert_null(strstr(t, "process_max_fds{process=\"worker\""));     /* unknown: not written */
    assert_null(strstr(t, "# EOF"));
    /* mount indices without a mount are skipped entirely */
    assert_null(strstr(t, "mount=\"(null)\""));
    /* every sample line's family was declared before it */
    assert_null(strstr(t, "\n\n"));
    free(t);
}

static void test_openmetrics_format(void **state)
{
    (void)state;
    fill();
    char *t = render(1, "/api");
    assert_non_null(strstr(t, "# TYPE m0serve_requests counter\n"));
    assert_non_null(strstr(t, "# HELP m0serve_requests Requests"));
    assert_null(strstr(t, "# TYPE m0serve_requests_total"));
    assert_non_null(strstr(t, "m0serve_requests_total{mount=\"/\",method=\"GET\",status=\"2xx\"} 7\n"));
    assert_non_null(strstr(t, "# TYPE m0serve_build info\n"));
    assert_non_null(strstr(t, "m0serve_build_info{"));
    assert_non_null(strstr(t, "# TYPE process_cpu_seconds counter\n"));
    assert_non_null(strstr(t, "# TYPE m0serve_request_duration_seconds histogram\n"));
    size_t n = strlen(t);
    assert_true(n > 6);
    assert_string_equal(t + n - 6, "# EOF\n");
    assert_int_equal(strstr(t, "# EOF") - t, (long)(n - 6));   /* only once, last */
    free(t);
}

static void test_label_escaping(void **state)
{
    (void)state;
    fill();
    char *t = render(0, "/a\"b\\c\nd");
    assert_non_null(strstr(t, "mount=\"/a\\\"b\\\\c\\nd\""));
    free(t);
}

static void test_accept(void **state)
{
    (void)state;
#define OM(s) m0_mx_wants_openmetrics(s, strlen(s))
    /* what Prometheus 2.x sends */
    assert_true(OM("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                   "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"));
    assert_true(OM("application/openmetrics-text"));
    assert_true(OM("Application/OpenMetrics-Text ; version=1.0.0"));
    assert_false(OM(""));
    assert_false(OM("*/*"));
    assert_false(OM("text/plain"));
    assert_false(OM("application/openmetrics-text;q=0"));
    assert_false(OM("text/plain;q=1, application/openmetrics-text;q=0.5"));
    assert_true(OM("text/plain;q=0.2, application/openmetrics-text;q=0.5"));
    assert_false(OM("application/openmetrics-textual"));
    assert_false(OM(",,;;q=,"));
#undef OM
}

static void test_helpers(void **state)
{
    (void)state;
    assert_int_equal(m0_mx_method_index("GET"), 0);
    assert_int_equal(m0_mx_method_index("PATCH"), 8);
    assert_int_equal(m0_mx_method_index("BREW"), M0_MX_METHODS - 1);
    assert_int_equal(m0_mx_method_index(NULL), M0_MX_METHODS - 1);
    assert_int_equal(m0_mx_bucket(0), 0);
    assert_int_equal(m0_mx_bucket(5000), 0);        /* le is inclusive */
    assert_int_equal(m0_mx_bucket(5001), 1);
    assert_int_equal(m0_mx_bucket(10000000), M0_MX_NBUCKETS - 2);
    assert_int_equal(m0_mx_bucket(10000001), M0_MX_NBUCKETS - 1);
}

static void test_flags(void **state)
{
    (void)state;
    char host[64], err[256];
    int port;
    const char *path;
    assert_int_equal(m0_mx_addr_split("127.0.0.1:9100", host, sizeof host, &port, &path), M0_OK);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 9100);
    assert_null(path);
    assert_int_equal(m0_mx_addr_split("[::1]:0", host, sizeof host, &port, &path), M0_OK);
    assert_string_equal(host, "::1");
    assert_int_equal(m0_mx_addr_split(":9100", host, sizeof host, &port, &path), M0_OK);
    assert_string_equal(host, "0.0.0.0");
    assert_int_equal(m0_mx_addr_split("unix:/run/m.sock", host, sizeof host, &port, &path), M0_OK);
    assert_string_equal(path, "/run/m.sock");
    assert_int_equal(m0_mx_addr_split("localhost", host, sizeof host, &port, &path), M0_ERR);
    assert_int_equal(m0_mx_addr_split("h:99999", host, sizeof host, &port, &path), M0_ERR);
    assert_int_equal(m0_mx_addr_split("h:", host, sizeof host, &port, &path), M0_ERR);
    assert_int_equal(m0_mx_addr_split("::1:80", host, sizeof host, &port, &path), M0_ERR);
    assert_int_equal(m0_mx_addr_split("unix:", host, sizeof host, &port, &path), M0_ERR);

    struct m0_config cfg;
    m0_config_defaults(&cfg);
    assert_int_equal(m0_metrics_check_flags(&cfg, err, sizeof err), M0_OK);
    cfg.metrics_path = "metrics";
    assert_int_equal(m0_metrics_check_flags(&cfg, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "--metrics-path"));
    cfg.metrics_path = "/m?x";
    assert_int_equal(m0_metrics_check_flags(&cfg, err, sizeof err), M0_ERR);
    cfg.metrics_path = "";
    assert_int_equal(m0_metrics_check_flags(&cfg, err, sizeof err), M0_OK);
    cfg.metrics_bind = "nowhere";
    assert_int_equal(m0_metrics_check_flags(&cfg, err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "--metrics-bind"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_format),
        cmocka_unit_test(test_openmetrics_format),
        cmocka_unit_test(test_label_escaping),
        cmocka_unit_test(test_accept),
        cmocka_unit_test(test_helpers),
        cmocka_unit_test(test_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
