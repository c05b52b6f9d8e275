/*
 * fuzz_broker.c — libFuzzer driver for what the broker's connections take
 * from Redis (include/m0/broker_reply.h): hiredis's own reply reader with
 * the reply guard installed, then every reply through the shape checks and
 * decoders the worker uses (src/realtime/broker.c).
 *
 * Input: byte 0 — bits 0-2: commands waiting at the start (0..7); bits 3-4:
 * one more command is sent after every 1st/2nd/3rd reply (0: never); bit 5:
 * the guard is left out (to check the checks themselves see every reply).
 * Byte 1: the read size (1..64 bytes, as a socket may cut them). The rest:
 * what "the broker" sends, fed to the reader piece by piece, each reply
 * taken as hiredis takes it (redisReaderGetReply) as long as it gives one.
 *
 * Asserted:
 *  - with the guard, a reply comes out only while a command waits for it
 *    (hiredis's own assert in redisProcessCallbacks, which aborted the
 *    worker); a reply that starts with none waiting fails the reader, with
 *    a reason, and the reader stays failed; the guard trips for nothing
 *    else than that or an oversized array;
 *  - every decoder copes with every reply: m0_breply_classify for each
 *    command, and for the shapes it accepts the entry walk (entry_ok,
 *    entry_id, field) the worker does; m0_u64_parse agrees with a 128-bit
 *    reference; m0_breply_auth_failed on every error text;
 *  - the Sentinel and ROLE readers (a sentinel is a broker too): ROLE,
 *    get-master-addr-by-name and SENTINEL replicas give only addresses of
 *    printable bytes without spaces and ports 1..65535; a pushed reply is a
 *    confirmation or a message with string channel and payload, and every
 *    message's payload, read as each Sentinel event for a few master
 *    names, gives an address of the same kind or nothing;
 *  - nothing leaks (the reader is freed with a partial reply in it; ASan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "m0/broker_reply.h"
#include "m0/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz_broker: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                            \
            abort();                                                                   \
        }                                                                              \
    } while (0)

struct run {
    size_t pending;            /* commands waiting for a reply */
};

static size_t pending_of(void *ctx)
{
    return ((struct run *)ctx)->pending;
}

/* Unguarded runs: every reply is admitted, but arrays stay capped (what
 * hiredis would allocate for "*999999999" is not the adapter's to test). */
static size_t always_pending(void *ctx)
{
    (void)ctx;
    return 1;
}

/* Decimal digits, 1..20 of them, at most UINT64_MAX. */
static int ref_u64(const char *p, size_t n, uint64_t *out)
{
    if (n == 0 || n > 20)
        return M0_ERR;
    unsigned __int128 v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return M0_ERR;
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    if (v > UINT64_MAX)
        return M0_ERR;
    *out = (uint64_t)v;
    return M0_OK;
}

static void check_u64(const char *p, size_t n)
{
    uint64_t a = 0, b = 0;
    int ra = m0_u64_parse(p, n, &a), rb = ref_u64(p, n, &b);
    CHECK(ra == rb);
    CHECK(ra != M0_OK || a == b);
}

/* The worker's walk over entries: take_entry and finish_resume. */
static uint64_t walk_entries(const redisReply *entries)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < entries->elements; i++) {
        const redisReply *e = entries->element[i];
        if (!m0_breply_entry_ok(e))
            continue;
        sum += m0_breply_entry_id(e->element[0]);
        const char *names[] = {"c", "f", "s", ""};
        for (size_t k = 0; k < M0_ARRAY_LEN(names); k++) {
            const redisReply *v = m0_breply_field(e->element[1], names[k]);
            if (v != NULL) {
                CHECK(v->type == REDIS_REPLY_STRING);
                sum += v->len;
                if (v->len > 0)
                    sum += (unsigned char)v->str[v->len - 1];   /* ASan: the bytes are there */
            }
        }
    }
    return sum;
}

/* Every reply, strings inside included, through what may see it. */
static void visit(const redisReply *r, int depth)
{
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        check_u64(r->str, r->len);
        m0_breply_entry_id(r);
    } else if (r->type == REDIS_REPLY_ERROR) {
        m0_breply_auth_failed(r->str, r->len);
    } else if (r->type == REDIS_REPLY_ARRAY) {
        m0_breply_entry_ok(r);
        m0_breply_field(r, "f");
        for (size_t i = 0; i < r->elements && depth < 8; i++)
            visit(r->element[i], depth + 1);
    }
}

/* An address a reader gave: what a connection may be pointed at. */
static void check_addr(const struct m0_hostport *a)
{
    size_t n = strnlen(a->host, sizeof a->host);
    CHECK(n > 0 && n < sizeof a->host);
    for (size_t i = 0; i < n; i++)
        CHECK(a->host[i] > 0x20 && a->host[i] < 0x7f);
    CHECK(a->port >= 1 && a->port <= 65535);
}

/* The Sentinel side: ROLE, the primary's address, the replicas, pushes
 * and the events they carry. */
static void sentinel(const redisReply *r)
{
    struct m0_role role;
    if (m0_breply_role(r, &role) == M0_OK && role.kind == M0_ROLE_REPLICA)
        check_addr(&role.primary);
    struct m0_hostport a;
    int rc = m0_breply_addr(r, &a);
    CHECK(rc == M0_OK || rc == M0_AGAIN || rc == M0_ERR);
    if (rc == M0_OK)
        check_addr(&a);
    struct m0_hostport list[4];
    size_t n = m0_breply_replicas(r, list, M0_ARRAY_LEN(list));
    CHECK(n <= M0_ARRAY_LEN(list));
    for (size_t i = 0; i < n; i++)
        check_addr(&list[i]);
    const redisReply *ch = NULL, *payload = NULL;
    if (m0_breply_push(r, &ch, &payload) == M0_PUSH_MESSAGE) {
        CHECK(ch != NULL && payload != NULL);
        static const char *const masters[] = {"m0", "mymaster", "", "a b"};
        static const char *const channels[] = {"+switch-master", "+sdown", "-sdown", "+odown", "-odown"};
        for (size_t m = 0; m < M0_ARRAY_LEN(masters); m++) {
            /* the channel as pushed, and as each event the worker knows */
            for (size_t c = 0; c <= M0_ARRAY_LEN(channels); c++) {
                const char *cs = c < M0_ARRAY_LEN(channels) ? channels[c] : ch->str;
                size_t cl = c < M0_ARRAY_LEN(channels) ? strlen(channels[c]) : ch->len;
                struct m0_hostport to;
                enum m0_sentinel_event ev = m0_sentinel_event(cs, cl, payload->str, payload->len, masters[m], &to);
                if (ev != M0_SEV_NONE)
                    check_addr(&to);
            }
        }
    }
}

static void decode(const redisReply *r)
{
    static const enum m0_bcmd cmds[] = {M0_BCMD_STATUS, M0_BCMD_PING, M0_BCMD_COUNTER, M0_BCMD_INTEGER,
                                        M0_BCMD_XREAD, M0_BCMD_RESUME, M0_BCMD_ROLE, M0_BCMD_ADDR,
                                        M0_BCMD_REPLICAS};
    volatile uint64_t sink = 0;
    for (size_t i = 0; i < M0_ARRAY_LEN(cmds); i++) {
        enum m0_breply k = m0_breply_classify(r, cmds[i]);
        CHECK(k == M0_BREPLY_OK || k == M0_BREPLY_ERROR || k == M0_BREPLY_UNEXPECTED);
        CHECK((k == M0_BREPLY_ERROR) == (r->type == REDIS_REPLY_ERROR));
        if (k != M0_BREPLY_OK)
            continue;
        uint64_t v = 0;
        switch (cmds[i]) {
        case M0_BCMD_COUNTER:
            CHECK(r->type == REDIS_REPLY_NIL || m0_u64_parse(r->str, r->len, &v) == M0_OK);
            break;
        case M0_BCMD_XREAD:
            if (r->type == REDIS_REPLY_ARRAY)
                for (size_t j = 0; j < r->elements; j++)
                    sink += walk_entries(r->element[j]->element[1]);
            break;
        case M0_BCMD_RESUME:
            CHECK(m0_u64_parse(r->element[0]->str, r->element[0]->len, &v) == M0_OK);
            sink += v + (uint64_t)r->element[1]->integer + walk_entries(r->element[2]);
            break;
        default:
            break;
        }
    }
    (void)sink;
    visit(r, 0);
    sentinel(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    struct run run = {.pending = data[0] & 7};
    unsigned every = (data[0] >> 3) & 3;
    int guarded = !(data[0] & 0x20);
    size_t piece = 1 + data[1] % 64;
    data += 2;
    size -= 2;

    redisReader *rd = redisReaderCreate();
    CHECK(rd != NULL);
    struct m0_reply_guard g;
    m0_reply_guard_install(&g, rd, guarded ? pending_of : always_pending, &run);
    unsigned replies = 0;
    int failed = 0;
    for (size_t off = 0; off < size && !failed; off += piece) {
        size_t n = size - off < piece ? size - off : piece;
        if (redisReaderFeed(rd, (const char *)data + off, n) != REDIS_OK)
            break;
        for (;;) {
            void *reply = NULL;
            if (redisReaderGetReply(rd, &reply) != REDIS_OK) {
                failed = 1;
                if (guarded && g.tripped)
                    CHECK(g.why[0] != '\0');
                /* Sticky: a failed reader gives nothing more. */
                void *again = NULL;
                CHECK(redisReaderGetReply(rd, &again) != REDIS_OK && again == NULL);
                break;
            }
            if (reply == NULL)
                break;                      /* wants more bytes */
            if (guarded) {
                CHECK(!g.tripped);
                CHECK(run.pending > 0);     /* what hiredis asserts */
            }
            if (run.pending > 0)
                run.pending--;
            decode(reply);
            freeReplyObject(reply);
            replies++;
            if (every != 0 && replies % every == 0)
                run.pending++;
        }
    }
    if (guarded && g.tripped)
        CHECK(failed && (run.pending == 0 || strstr(g.why, "elements") != NULL));
    redisReaderFree(rd);
    return 0;
}
