/*
 * test_serve.c — the serving core over a socketpair, without Python: conn.c
 * (the transport, the one output queue, its flush and interest), h1.c
 * (parsing, the endpoint table, keep-alive, 100 Continue), hold.c (a held
 * stream's sends through the connection, --outbox-limit) and wshold.c (the
 * 101, ping/pong, the close handshake). The loop is real (epoll); the
 * client is the other end of an AF_UNIX socketpair, read and written
 * without blocking between passes of the loop. Every wait is bounded.
 *
 * Cases: pipelined requests answered in order (and HEAD without content);
 * a response larger than the socket takes waits for EPOLLOUT (partial
 * writes, EAGAIN) and arrives whole; a peer that closes mid-response frees
 * its slot; Expect: 100-continue, then the body; a held stream's bytes
 * queued on the connection and written on EPOLLOUT; a slow reader past
 * --outbox-limit doomed and closed; a WebSocket's pong and its 1008 close.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "m0/cli.h"
#include "m0/config.h"
#include "m0/conn.h"
#include "m0/endpoint.h"
#include "m0/grip_hold.h"
#include "m0/h1.h"
#include "m0/hold.h"
#include "m0/job.h"
#include "m0/loop.h"
#include "m0/rt.h"
#include "m0/server.h"
#include "m0/static_http.h"
#include "m0/timer.h"
#include "m0/wsframes.h"
#include "m0/wshold.h"

#define NSLOTS 16
#define BIG (1024 * 1024)

/* ------------------------------------------------------------ the rig */

struct rig {
    struct m0_config cfg;
    struct m0_server s;
    int peer;                   /* the client's end */
    int fd;                     /* the server's end */
    struct m0_buf got;          /* bytes the client read */
    int (*until)(struct rig *r);
    uint64_t deadline;
    int timed_out;
    int client_reads;           /* the client reads between passes */
};

static struct rig *the_rig;     /* for the endpoint (a test's one rig) */

static void read_peer(struct rig *r)
{
    for (;;) {
        char *dst = m0_buf_reserve(&r->got, 64 * 1024);
        ssize_t n = recv(r->peer, dst, r->got.cap - r->got.len, MSG_DONTWAIT);
        if (n <= 0)
            return;
        r->got.len += (size_t)n;
    }
}

/* Before every sleep: slots closed this pass go back, and the test's
 * condition is looked at (the loop polls every 2 ms meanwhile). */
static void tick(struct m0_loop *l, void *ctx)
{
    struct rig *r = ctx;
    m0_conn_close_doomed(&r->s);
    m0_conn_release_closed(&r->s);
    if (r->client_reads)
        read_peer(r);
    if (r->until != NULL && r->until(r)) {
        m0_loop_stop(l);
    } else if (m0_loop_now(l) >= r->deadline) {
        r->timed_out = 1;
        m0_loop_stop(l);
    } else {
        m0_loop_wake_at(l, m0_loop_now(l) + 2);
    }
}

/* Run the loop until cond holds (at most ms). */
static int run(struct rig *r, int (*cond)(struct rig *r), uint64_t ms)
{
    r->until = cond;
    r->timed_out = 0;
    r->deadline = m0_loop_now(r->s.loop) + ms;
    m0_loop_wake_at(r->s.loop, m0_loop_now(r->s.loop));
    assert_int_equal(m0_loop_run(r->s.loop), M0_OK);
    r->until = NULL;
    return !r->timed_out;
}

static struct m0_conn *conn(struct rig *r)
{
    return m0_conn_of(&r->s, 0);
}

static void send_peer(struct rig *r, const void *p, size_t n)
{
    assert_int_equal(send(r->peer, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void send_str(struct rig *r, const char *s)
{
    send_peer(r, s, strlen(s));
}

static size_t count(const struct m0_buf *b, const char *needle)
{
    size_t n = 0, k = strlen(needle);
    for (const char *p = b->data, *end = b->data + b->len; p != NULL && p + k <= end;) {
        p = memmem(p, (size_t)(end - p), needle, k);
        if (p != NULL) {
            n++;
            p += k;
        }
    }
    return n;
}

/* The test endpoint (endpoint.h): /t/small, /t/big, /t/echo (reads the
 * body), /t/sse (a hold with no channel), /t/ws (a WebSocket that only
 * listens, as a grant's). */
static int path_is(const struct m0_req *rq, const char *p)
{
    return rq->path_len == strlen(p) && memcmp(rq->path, p, rq->path_len) == 0;
}

static unsigned t_claims(struct m0_server *s, struct m0_conn *c)
{
    (void)s;
    const struct m0_req *rq = &c->job->req;
    if (rq->path_len < 3 || memcmp(rq->path, "/t/", 3) != 0)
        return 0;
    return M0_EP_CLAIMED | (path_is(rq, "/t/echo") ? M0_EP_READS_BODY : 0);
}

static int t_answer(struct m0_server *s, struct m0_conn *c, int head_only)
{
    struct m0_job *job = c->job;
    const struct m0_req *rq = &job->req;
    (void)head_only;
    if (path_is(rq, "/t/small")) {
        m0_conn_answer_body(s, c, 200, "text/plain", "hello\n", 6);
    } else if (path_is(rq, "/t/big")) {
        char *body = malloc(BIG);
        memset(body, 'x', BIG);
        m0_conn_answer_body(s, c, 200, "text/plain", body, BIG);
        free(body);
    } else if (path_is(rq, "/t/echo")) {
        char text[64];
        int n = snprintf(text, sizeof text, "n=%llu", (unsigned long long)rq->body_len);
        m0_conn_answer_body(s, c, 200, "text/plain", text, (size_t)n);
    } else if (path_is(rq, "/t/sse") || path_is(rq, "/t/ws")) {
        const char *why;
        int ws = path_is(rq, "/t/ws");
        m0_head_reset(&job->head);
        m0_head_status(&job->head, 200, NULL, 0);
        if (ws) {
            job->head.hold = M0_HOLD_WEBSOCKET;
            job->resp.status = 200;
            job->resp.flags |= M0_RESP_HOLD;
        } else {
            m0_head_add(&job->head, "Content-Type", 12, "text/event-stream", 17, &why);
            job->head.hold = M0_HOLD_STREAM;
            assert_int_equal(m0_job_commit(job, -1, 1), M0_OK);
        }
        m0_conn_set_state(s, c, M0_CONN_RUN);
        return M0_EP_AS_RUNNER;          /* the protocol takes the hold, as a view's */
    } else {
        m0_conn_error(s, c, 404, "no such test path");
    }
    return M0_EP_ANSWERED;
}

static const struct m0_endpoint t_endpoint = {
    .name = "test", .flags = M0_EP_CLAIMED | M0_EP_READS_BODY, .claims = t_claims, .answer = t_answer,
};

static int setup(void **state)
{
    struct rig *r = calloc(1, sizeof *r);
    struct m0_server *s = &r->s;
    m0_config_defaults(&r->cfg);
    r->cfg.outbox_limit = 64 * 1024;
    r->cfg.heartbeat = 0;
    s->cfg = &r->cfg;
    s->loop = m0_loop_new();
    assert_non_null(s->loop);
    s->slots.n = NSLOTS;
    s->slots.chunks = calloc(1, sizeof *s->slots.chunks);
    s->slots.jobs = calloc(NSLOTS, sizeof *s->slots.jobs);
    s->slots.active.next = s->slots.active.prev = &s->slots.active;
    s->timeouts = (struct m0_timeouts){.keepalive_ms = 5000, .header_ms = 5000, .body_ms = 5000, .write_ms = 5000};
    s->accept.reserve_fd = -1;
    s->proto[M0_CONN_PROTO_H1] = &m0_h1_conn_ops;
    s->proto[M0_CONN_PROTO_SSE] = &m0_sse_conn_ops;
    s->proto[M0_CONN_PROTO_WS] = &m0_ws_conn_ops;
    s->proto[M0_CONN_PROTO_GRIP] = &m0_grip_conn_ops;
    s->xprt[M0_XPRT_PLAIN] = &m0_xprt_plain;
    m0_loop_on_slot(s->loop, m0_conn_on_event, s);
    m0_loop_on_complete(s->loop, m0_conn_on_complete, s);
    m0_holds_init(s);
    s->run.env = (struct m0_runner_env){.loop = s->loop, .jobs = s->slots.jobs, .njobs = NSLOTS,
                                        .draining = &s->life.draining};
    m0_ext_register(s, &m0_ws_scratch_ext);
    m0_endpoint_add(s, &t_endpoint);
    m0_endpoint_add(s, &m0_unmounted_endpoint);
    m0_loop_add_hook(s->loop, tick, r);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    r->fd = sv[0];
    r->peer = sv[1];
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    assert_int_equal(m0_conn_take(s, sv[0], -1, &addr), M0_OK);
    assert_int_equal(conn(r)->state, M0_CONN_READ_HEAD);
    the_rig = r;
    *state = r;
    return 0;
}

static int teardown(void **state)
{
    struct rig *r = *state;
    struct m0_server *s = &r->s;
    m0_conn_close_all(s);
    m0_conn_release_closed(s);
    m0_ext_fini_all(s);
    m0_conn_job_cache_free(s);
    m0_holds_free(s);
    m0_conn_slots_free(s);
    m0_loop_free(s->loop);
    if (r->peer != -1)
        close(r->peer);
    m0_buf_free(&r->got);
    free(r);
    return 0;
}

/* --------------------------------------------------------------- cases */

static int four_answers(struct rig *r)
{
    return count(&r->got, "HTTP/1.1 ") >= 4 && conn(r)->state == M0_CONN_READ_HEAD;
}

/* Pipelined requests (RFC 9112 §9.3.2) are answered in the order they
 * came, each once the one before is out; HEAD gets the head alone. */
static void test_pipelined_requests_are_answered_in_order(void **state)
{
    struct rig *r = *state;
    r->client_reads = 1;
    send_str(r, "GET /t/small HTTP/1.1\r\nHost: a\r\n\r\n"
                "HEAD /t/small HTTP/1.1\r\nHost: a\r\n\r\n"
                "GET /nothing HTTP/1.1\r\nHost: a\r\n\r\n"
                "GET /t/small HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_true(run(r, four_answers, 3000));
    m0_buf_append(&r->got, "", 1);
    const char *p = r->got.data;
    const char *a = strstr(p, "HTTP/1.1 200"), *b = a ? strstr(a + 1, "HTTP/1.1 200") : NULL;
    const char *c404 = b ? strstr(b + 1, "HTTP/1.1 404") : NULL, *d = c404 ? strstr(c404 + 1, "HTTP/1.1 200") : NULL;
    assert_non_null(d);                                   /* 200, 200 (HEAD), 404, 200 in that order */
    assert_non_null(memmem(a, (size_t)(b - a), "hello\n", 6));
    assert_null(memmem(b, (size_t)(c404 - b), "hello\n", 6));   /* HEAD: no content */
    assert_non_null(strstr(d, "hello\n"));
    assert_int_equal(conn(r)->state, M0_CONN_READ_HEAD);        /* kept alive */
}

static int writing_with_epollout(struct rig *r)
{
    struct m0_conn *c = conn(r);
    return c->state == M0_CONN_WRITE && (c->events & EPOLLOUT) && m0_conn_queued(c) > 0;
}

static int all_of_big(struct rig *r)
{
    const char *eoh = memmem(r->got.data, r->got.len, "\r\n\r\n", 4);
    return eoh != NULL && r->got.len - (size_t)(eoh + 4 - r->got.data) == BIG &&
           conn(r)->state == M0_CONN_READ_HEAD;
}

/* A response larger than the socket takes: a partial write, EAGAIN, the
 * rest queued on the connection with EPOLLOUT armed; once the client
 * reads, the queue drains and the connection is kept. */
static void test_a_large_response_waits_for_epollout_and_arrives_whole(void **state)
{
    struct rig *r = *state;
    int small = 16 * 1024;
    setsockopt(r->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    send_str(r, "GET /t/big HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_true(run(r, writing_with_epollout, 3000));
    size_t left = m0_conn_queued(conn(r));
    assert_true(left > 0 && left < BIG);                  /* some of it went, the rest waits */
    r->client_reads = 1;
    assert_true(run(r, all_of_big, 5000));
    assert_false(conn(r)->events & EPOLLOUT);             /* nothing left to write */
}

static int big_then_small(struct rig *r)
{
    const char *eoh = memmem(r->got.data, r->got.len, "\r\n\r\n", 4);
    return eoh != NULL && count(&r->got, "HTTP/1.1 200") == 2 && memmem(eoh, r->got.len - (size_t)(eoh - r->got.data),
                                                                       "hello\n", 6) != NULL;
}

/* A request pipelined behind a response that had to wait for EPOLLOUT is
 * parsed once that response is out (RFC 9112 §9.3.2), not lost in c->in. */
static void test_a_request_pipelined_behind_a_large_response_waits_its_turn(void **state)
{
    struct rig *r = *state;
    int small = 16 * 1024;
    setsockopt(r->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    send_str(r, "GET /t/big HTTP/1.1\r\nHost: a\r\n\r\nGET /t/small HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_true(run(r, writing_with_epollout, 3000));
    assert_int_equal(count(&r->got, "HTTP/1.1"), 0);
    r->client_reads = 1;
    assert_true(run(r, big_then_small, 5000));
    const char *second = memmem(r->got.data + 1, r->got.len - 1, "HTTP/1.1 200", 12);
    assert_non_null(second);
    assert_int_equal((size_t)(second - r->got.data) - (size_t)((const char *)memmem(r->got.data, r->got.len, "\r\n\r\n", 4) + 4 - r->got.data), BIG);
    assert_int_equal(conn(r)->state, M0_CONN_READ_HEAD);
}

static int slot_closed(struct rig *r)
{
    return conn(r)->fd == -1;
}

/* A peer that closes while its response is being written: the write
 * fails, the slot is closed and given back. */
static void test_a_peer_that_closes_mid_response_frees_its_slot(void **state)
{
    struct rig *r = *state;
    int small = 16 * 1024;
    setsockopt(r->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    send_str(r, "GET /t/big HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_true(run(r, writing_with_epollout, 3000));
    char some[4096];
    assert_true(recv(r->peer, some, sizeof some, 0) > 0);  /* a little of it, then gone */
    close(r->peer);
    r->peer = -1;
    assert_true(run(r, slot_closed, 3000));
    assert_int_equal(r->s.slots.nactive, 0);
}

static int got_continue(struct rig *r)
{
    return memmem(r->got.data, r->got.len, "HTTP/1.1 100 Continue\r\n\r\n", 25) != NULL;
}

static int got_echo(struct rig *r)
{
    return memmem(r->got.data, r->got.len, "n=5", 3) != NULL;
}

/* Expect: 100-continue to an endpoint that reads the body (RFC 9110
 * §10.1.1): 100 Continue goes out at once, the body is read, then the
 * answer. */
static void test_expect_100_continue_then_the_body(void **state)
{
    struct rig *r = *state;
    r->client_reads = 1;
    send_str(r, "POST /t/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    assert_true(run(r, got_continue, 3000));
    assert_false(got_echo(r));
    send_str(r, "abcde");
    assert_true(run(r, got_echo, 3000));
}

static int held(struct rig *r)
{
    return conn(r)->state == M0_CONN_HELD;
}

static int queue_empty(struct rig *r)
{
    return m0_conn_queued(conn(r)) == 0 && !(conn(r)->events & EPOLLOUT);
}

/* A held stream sends through the connection's one queue: what the
 * socket does not take waits there, EPOLLOUT armed, and conn.c writes it
 * when the client reads — in order, the limit not reached. */
static void test_a_held_streams_bytes_wait_in_the_connections_queue(void **state)
{
    struct rig *r = *state;
    r->client_reads = 1;
    send_str(r, "GET /t/sse HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_true(run(r, held, 3000));
    assert_int_equal(conn(r)->proto, M0_CONN_PROTO_SSE);
    assert_null(conn(r)->job);                           /* a held stream keeps no job */
    r->client_reads = 0;
    int small = 8 * 1024;
    setsockopt(r->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    char chunk[4096];
    size_t sent = 0;
    for (int i = 0; i < 64 && m0_conn_queued(conn(r)) == 0; i++) {
        memset(chunk, 'a' + i % 26, sizeof chunk);
        m0_hold_send(&r->s, conn(r), chunk, sizeof chunk);
        sent += sizeof chunk;
    }
    assert_true(m0_conn_queued(conn(r)) > 0);              /* the socket is full: queued */
    assert_true(conn(r)->events & EPOLLOUT);
    assert_false(conn(r)->flags & C_DOOMED);
    r->client_reads = 1;
    assert_true(run(r, queue_empty, 3000));
    const char *eoh = memmem(r->got.data, r->got.len, "\r\n\r\n", 4);
    assert_non_null(eoh);
    size_t body = r->got.len - (size_t)(eoh + 4 - r->got.data);
    assert_int_equal(body, sent);                           /* every byte, once */
    for (size_t k = 0; k < sent; k += sizeof chunk)
        assert_int_equal(eoh[4 + k], 'a' + (int)(k / sizeof chunk) % 26);   /* in order */
    assert_int_equal(conn(r)->state, M0_CONN_HELD);
}

/* A slow reader: once more than --outbox-limit waits for it, the held
 * stream is doomed (the slow-client policy), counted, and closed after the
 * pass. */
static void test_a_slow_reader_past_the_outbox_limit_is_closed(void **state)
{
    struct rig *r = *state;
    r->client_reads = 1;
    send_str(r, "GET /t/sse HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_true(run(r, held, 3000));
    r->client_reads = 0;
    char chunk[8192];
    memset(chunk, 'e', sizeof chunk);
    int i;
    for (i = 0; i < 1000 && !(conn(r)->flags & C_DOOMED); i++)
        m0_hold_send(&r->s, conn(r), chunk, sizeof chunk);
    assert_true(conn(r)->flags & C_DOOMED);
    assert_true(m0_conn_queued(conn(r)) <= r->cfg.outbox_limit);   /* never queued past it */
    assert_int_equal(m0_rt_counters(r->s.rt)->slow_closed, 1);
    m0_conn_close_doomed(&r->s);
    assert_int_equal(conn(r)->fd, -1);
}

static int got_101(struct rig *r)
{
    return memmem(r->got.data, r->got.len, "\r\n\r\n", 4) != NULL && conn(r)->state == M0_CONN_HELD;
}

static int got_bytes(struct rig *r, const void *p, size_t n)
{
    return memmem(r->got.data, r->got.len, p, n) != NULL;
}

static int got_pong(struct rig *r)
{
    static const unsigned char pong[] = {0x8a, 0x02, 'h', 'i'};
    return got_bytes(r, pong, sizeof pong);
}

static int got_close_1008(struct rig *r)
{
    static const unsigned char close1008[] = {0x88, 0x1a, 0x03, 0xf0};   /* 1008 + "this socket only listens" */
    return got_bytes(r, close1008, sizeof close1008);
}

static void masked(struct rig *r, int op, const char *payload)
{
    unsigned char f[64];
    size_t n = strlen(payload);
    const unsigned char mask[4] = {1, 2, 3, 4};
    f[0] = (unsigned char)(0x80 | op);
    f[1] = (unsigned char)(0x80 | n);
    memcpy(f + 2, mask, 4);
    for (size_t i = 0; i < n; i++)
        f[6 + i] = (unsigned char)payload[i] ^ mask[i % 4];
    send_peer(r, f, 6 + n);
}

/* A WebSocket hold (RFC 6455): the 101 with the key's accept, a pong for a
 * ping, and — a socket that only listens — 1008 for a message. */
static void test_a_websocket_pongs_and_refuses_a_message_with_1008(void **state)
{
    struct rig *r = *state;
    r->client_reads = 1;
    send_str(r, "GET /t/ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    assert_true(run(r, got_101, 3000));
    assert_non_null(memmem(r->got.data, r->got.len, "HTTP/1.1 101 ", 13));
    assert_non_null(memmem(r->got.data, r->got.len, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", 28));   /* RFC 6455 §1.3 */
    assert_int_equal(conn(r)->proto, M0_CONN_PROTO_WS);
    masked(r, 0x9, "hi");
    assert_true(run(r, got_pong, 3000));
    masked(r, 0x1, "hello");
    assert_true(run(r, got_close_1008, 3000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pipelined_requests_are_answered_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_large_response_waits_for_epollout_and_arrives_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_request_pipelined_behind_a_large_response_waits_its_turn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_peer_that_closes_mid_response_frees_its_slot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expect_100_continue_then_the_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_held_streams_bytes_wait_in_the_connections_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_slow_reader_past_the_outbox_limit_is_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_websocket_pongs_and_refuses_a_message_with_1008, setup, teardown),
    };
    return cmocka_run_group_tests_name("serve", tests, NULL, NULL);
}
