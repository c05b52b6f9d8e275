/*
 * test_proxy.c — --forwarded-allow-ips and the effective client of a
 * request (src/proto/proxy.c): trusted and untrusted peers, the rightmost
 * untrusted hop, spoofing attempts, RFC 7239 Forwarded, malformed input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "m0/http.h"
#include "m0/proxy.h"

/* A request with the given header lines ("Name: value"). */
static struct m0_req req;
static struct m0_hdr hdrs[16];

static const struct m0_req *with(const char *const *lines)
{
    memset(&req, 0, sizeof req);
    req.method = "GET";
    req.hdrs = hdrs;
    unsigned n = 0;
    for (; lines != NULL && lines[n] != NULL; n++) {
        const char *colon = strchr(lines[n], ':');
        hdrs[n].name = lines[n];
        hdrs[n].name_len = (uint32_t)(colon - lines[n]);
        hdrs[n].value = colon + 2;
        hdrs[n].value_len = (uint32_t)strlen(colon + 2);
    }
    req.nhdrs = n;
    return &req;
}

static struct m0_proxy_trust trust(const char *spec)
{
    struct m0_proxy_trust t;
    char err[200];
    assert_int_equal(m0_proxy_parse(&t, spec, err, sizeof err), M0_OK);
    return t;
}

static struct m0_client client(const struct m0_proxy_trust *t, const char *peer, const char *const *lines)
{
    struct m0_client c;
    m0_proxy_client(t, peer, 5555, with(lines), &c);
    return c;
}

static void test_parse(void **state)
{
    (void)state;
    char err[200];
    struct m0_proxy_trust t;
    assert_int_equal(m0_proxy_parse(&t, M0_PROXY_DEFAULT, err, sizeof err), M0_OK);
    assert_true(m0_proxy_trusted(&t, "127.0.0.1"));
    assert_true(m0_proxy_trusted(&t, "::1"));
    assert_true(m0_proxy_trusted(&t, "::ffff:127.0.0.1"));    /* dual-stack listener */
    assert_true(m0_proxy_trusted(&t, ""));                    /* unix peer */
    assert_false(m0_proxy_trusted(&t, "127.0.0.2"));
    assert_false(m0_proxy_trusted(&t, "10.0.0.1"));

    t = trust("10.0.0.0/8, 192.168.1.0/25,fd00::/8");
    assert_true(m0_proxy_trusted(&t, "10.200.3.4"));
    assert_true(m0_proxy_trusted(&t, "192.168.1.127"));
    assert_false(m0_proxy_trusted(&t, "192.168.1.128"));
    assert_true(m0_proxy_trusted(&t, "fd12::1"));
    assert_false(m0_proxy_trusted(&t, "fe80::1"));
    assert_false(m0_proxy_trusted(&t, ""));                   /* unix not listed */
    assert_false(m0_proxy_trusted(&t, "garbage"));

    t = trust("*");
    assert_true(m0_proxy_trusted(&t, "203.0.113.9"));
    assert_true(m0_proxy_trusted(&t, ""));
    t = trust("");
    assert_false(m0_proxy_trusted(&t, "127.0.0.1"));

    static const char *const bad[] = {"10.0.0.0/33", "fd00::/129", "example.com", "1.2.3.4/", "1.2.3", "/8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(m0_proxy_parse(&t, bad[i], err, sizeof err), M0_ERR);
        assert_non_null(strstr(err, "--forwarded-allow-ips"));
        assert_null(strchr(err, '\n'));
    }
}

static void test_untrusted_peer_is_ignored(void **state)
{
    (void)state;
    struct m0_proxy_trust t = trust(M0_PROXY_DEFAULT);
    static const char *const h[] = {"X-Forwarded-For: 1.2.3.4", "X-Forwarded-Proto: https",
                                    "Forwarded: for=5.6.7.8;proto=https", NULL};
    struct m0_client c = client(&t, "203.0.113.7", h);
    assert_string_equal(c.addr, "203.0.113.7");
    assert_int_equal(c.port, 5555);
    assert_int_equal(c.https, 0);
    assert_int_equal(c.forwarded, 0);
}

static void test_trusted_peer_rightmost_untrusted(void **state)
{
    (void)state;
    struct m0_proxy_trust t = trust("127.0.0.1,10.0.0.0/8");
    /* The client wrote 6.6.6.6; nginx appended the real address. */
    static const char *const spoof[] = {"X-Forwarded-For: 6.6.6.6, 198.51.100.4", NULL};
    struct m0_client c = client(&t, "127.0.0.1", spoof);
    assert_string_equal(c.addr, "198.51.100.4");
    assert_int_equal(c.port, 0);
    assert_int_equal(c.forwarded, 1);
    /* Two trusted proxies in front: skipped. */
    static const char *const chain[] = {"X-Forwarded-For: 6.6.6.6, 198.51.100.4, 10.1.1.1, 10.2.2.2", NULL};
    c = client(&t, "127.0.0.1", chain);
    assert_string_equal(c.addr, "198.51.100.4");
    /* Several field lines combine in order (RFC 9110 §5.3). */
    static const char *const lines[] = {"X-Forwarded-For: 6.6.6.6", "x-forwarded-for: 198.51.100.9, 10.0.0.3", NULL};
    c = client(&t, "127.0.0.1", lines);
    assert_string_equal(c.addr, "198.51.100.9");
    /* Every hop trusted: the leftmost. */
    static const char *const all[] = {"X-Forwarded-For: 10.9.9.9, 10.0.0.3", NULL};
    c = client(&t, "127.0.0.1", all);
    assert_string_equal(c.addr, "10.9.9.9");
    /* IPv6 hops, bracketed with a port, and v4:port. */
    static const char *const v6[] = {"X-Forwarded-For: [2001:db8::7]:4711", NULL};
    c = client(&t, "127.0.0.1", v6);
    assert_string_equal(c.addr, "2001:db8::7");
    assert_int_equal(c.port, 4711);
    static const char *const v4p[] = {"X-Forwarded-For: 198.51.100.4:8080", NULL};
    c = client(&t, "127.0.0.1", v4p);
    assert_string_equal(c.addr, "198.51.100.4");
    assert_int_equal(c.port, 8080);
}

static void test_star_trusts_every_hop(void **state)
{
    (void)state;
    struct m0_proxy_trust t = trust("*");
    static const char *const h[] = {"X-Forwarded-For: 6.6.6.6, 198.51.100.4", NULL};
    struct m0_client c = client(&t, "203.0.113.7", h);
    assert_string_equal(c.addr, "6.6.6.6");
}

static void test_garbage_stops_the_walk(void **state)
{
    (void)state;
    struct m0_proxy_trust t = trust("127.0.0.1,10.0.0.0/8");
    /* A hop that is not an address: the hop to its right is the client. */
    static const char *const h[] = {"X-Forwarded-For: 1.2.3.4, unknown, 10.0.0.5", NULL};
    struct m0_client c = client(&t, "127.0.0.1", h);
    assert_string_equal(c.addr, "10.0.0.5");
    /* Injected text never reaches REMOTE_ADDR verbatim. */
    static const char *const inj[] = {"X-Forwarded-For: 1.2.3.4\" \"evil", NULL};
    c = client(&t, "127.0.0.1", inj);
    assert_string_equal(c.addr, "127.0.0.1");
    static const char *const empty[] = {"X-Forwarded-For: , ,", NULL};
    c = client(&t, "127.0.0.1", empty);
    assert_string_equal(c.addr, "127.0.0.1");
    static const char *const zeros[] = {"X-Forwarded-For: 1.2.3.4:99999", NULL};
    c = client(&t, "127.0.0.1", zeros);
    assert_string_equal(c.addr, "127.0.0.1");
}

static void test_many_hops_keep_the_rightmost(void **state)
{
    (void)state;
    struct m0_proxy_trust t = trust("127.0.0.1");
    /* A client floods the header: the real hop on the right still wins. */
    static char big[4096];
    size_t n = (size_t)snprintf(big, sizeof big, "X-Forwarded-For: ");
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "6.6.6.%d, ", i % 250);
    snprintf(big + n, sizeof big - n, "198.51.100.4");
    const char *h[] = {big, NULL};
    struct m0_client c = client(&t, "127.0.0.1", h);
    assert_string_equal(c.addr, "198.51.100.4");
}

static void test_proto(void **state)
{
    (void)state;
    struct m0_proxy_trust t = trust(M0_PROXY_DEFAULT);
    static const char *const h[] = {"X-Forwarded-Proto: https", NULL};
    struct m0_client c = client(&t, "", h);       /* nginx over a unix socket */
    assert_int_equal(c.https, 1);
    assert_string_equal(c.addr, "");
    static const char *const list[] = {"X-Forwarded-Proto: http, HTTPS", NULL};
    c = client(&t, "127.0.0.1", list);
    assert_int_equal(c.https, 1);
    static const char *const junk[] = {"X-Forwarded-Proto: gopher", NULL};
    c = client(&t, "127.0.0.1", junk);
    assert_int_equal(c.https, 0);
}

static void test_forwarded_rfc7239(void **state)
{
    (void)state;
    struct m0_proxy_trust t = trust("127.0.0.1,203.0.113.43");
    /* RFC 7239 §4's examples. */
    static const char *const h[] = {"Forwarded: for=192.0.2.60;proto=https;by=203.0.113.43", NULL};
    struct m0_client c = client(&t, "127.0.0.1", h);
    assert_string_equal(c.addr, "192.0.2.60");
    assert_int_equal(c.https, 1);
    static const char *const q[] = {"Forwarded: For=\"[2001:db8:cafe::17]:4711\"", NULL};
    c = client(&t, "127.0.0.1", q);
    assert_string_equal(c.addr, "2001:db8:cafe::17");
    assert_int_equal(c.port, 4711);
    static const char *const chain[] = {"Forwarded: for=6.6.6.6;proto=http, for=192.0.2.43;proto=https, for=203.0.113.43",
                                        NULL};
    c = client(&t, "127.0.0.1", chain);
    assert_string_equal(c.addr, "192.0.2.43");
    assert_int_equal(c.https, 1);
    /* A comma inside a quoted string does not split elements. */
    static const char *const quoted[] = {"Forwarded: for=\"_a,b\";proto=https, for=198.51.100.1", NULL};
    c = client(&t, "127.0.0.1", quoted);
    assert_string_equal(c.addr, "198.51.100.1");
    /* Obfuscated node: nothing to name; the nearest proto still counts. */
    static const char *const hidden[] = {"Forwarded: for=_hidden;proto=https", NULL};
    c = client(&t, "127.0.0.1", hidden);
    assert_string_equal(c.addr, "127.0.0.1");
    assert_int_equal(c.https, 1);
    /* X-Forwarded-* wins when both are present (what our nginx sets). */
    static const char *const both[] = {"Forwarded: for=6.6.6.6", "X-Forwarded-For: 198.51.100.4", NULL};
    c = client(&t, "127.0.0.1", both);
    assert_string_equal(c.addr, "198.51.100.4");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_untrusted_peer_is_ignored),
        cmocka_unit_test(test_trusted_peer_rightmost_untrusted),
        cmocka_unit_test(test_star_trusts_every_hop),
        cmocka_unit_test(test_garbage_stops_the_walk),
        cmocka_unit_test(test_many_hops_keep_the_rightmost),
        cmocka_unit_test(test_proto),
        cmocka_unit_test(test_forwarded_rfc7239),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
