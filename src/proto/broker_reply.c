/*
 * broker_reply.c — the broker's reply guard and reply shapes (see
 * broker_reply.h). Pure: hiredis's reader and reply objects only.
 *
 * Why in the reader: hiredis pairs each reply with the oldest waiting
 * callback after its reader produced it, and asserts when there is none.
 * The reader calls its object functions as it parses (a scalar when it is
 * complete, an array at its header), and a top-level reply is parsed only
 * after the previous one was handed to its callback, so "how many commands
 * wait now" at that call is exactly whether this reply was asked for. A
 * create function that returns NULL makes the reader fail, and hiredis
 * disconnects on a failed reader: the one clean exit hiredis offers.
 */
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "m0/broker_reply.h"
#include "m0/buf.h"

/* The largest array accepted: the replay script returns at most retention
 * + 1 entries (retention is at most 10,000,000); hiredis allocates an
 * array's element vector from its header, before any element arrives. */
#define MAX_ELEMENTS (1 << 24)

static struct m0_reply_guard *guard_of(const redisReadTask *t)
{
    while (t->parent != NULL)
        t = t->parent;
    return t->privdata;         /* the root task carries the reader's privdata */
}

static const char *type_name(int type)
{
    switch (type) {
    case REDIS_REPLY_STRING: return "a bulk string";
    case REDIS_REPLY_ARRAY: return "an array";
    case REDIS_REPLY_INTEGER: return "an integer";
    case REDIS_REPLY_NIL: return "a nil";
    case REDIS_REPLY_STATUS: return "a status";
    case REDIS_REPLY_ERROR: return "an error";
    default: return "a reply";
    }
}

/* A top-level reply may begin only while a command waits for it. Returns
 * 1 when it may; else trips g (text: an error's message, shown printable). */
static int admit(struct m0_reply_guard *g, const redisReadTask *t, const char *str, size_t len)
{
    if (t->parent != NULL || g->pending(g->ctx) > 0)
        return 1;
    g->tripped = 1;
    if (t->type == REDIS_REPLY_ERROR && str != NULL) {
        char text[96];
        size_t n = 0;
        for (size_t i = 0; i < len && n + 1 < sizeof text; i++)
            text[n++] = str[i] >= 0x20 && str[i] < 0x7f ? str[i] : '?';
        text[n] = '\0';
        snprintf(g->why, sizeof g->why, "an error reply with no command waiting: %s", text);
    } else {
        snprintf(g->why, sizeof g->why, "%s reply with no command waiting for it", type_name(t->type));
    }
    return 0;
}

static void *wrap_string(const redisReadTask *t, char *str, size_t len)
{
    struct m0_reply_guard *g = guard_of(t);
    return admit(g, t, str, len) ? g->inner->createString(t, str, len) : NULL;
}

static void *wrap_array(const redisReadTask *t, int elements)
{
    struct m0_reply_guard *g = guard_of(t);
    if (!admit(g, t, NULL, 0))
        return NULL;
    if (elements > MAX_ELEMENTS) {
        g->tripped = 1;
        snprintf(g->why, sizeof g->why, "an array of %d elements (at most %d)", elements, MAX_ELEMENTS);
        return NULL;
    }
    return g->inner->createArray(t, elements);
}

static void *wrap_integer(const redisReadTask *t, long long v)
{
    struct m0_reply_guard *g = guard_of(t);
    return admit(g, t, NULL, 0) ? g->inner->createInteger(t, v) : NULL;
}

static void *wrap_nil(const redisReadTask *t)
{
    struct m0_reply_guard *g = guard_of(t);
    return admit(g, t, NULL, 0) ? g->inner->createNil(t) : NULL;
}

void m0_reply_guard_install(struct m0_reply_guard *g, redisReader *r, m0_reply_pending_fn *pending, void *ctx)
{
    if (r->fn != &g->fns)
        g->inner = r->fn;
    g->fns = *g->inner;         /* whatever else the table holds passes through */
    g->fns.createString = wrap_string;
    g->fns.createArray = wrap_array;
    g->fns.createInteger = wrap_integer;
    g->fns.createNil = wrap_nil;
    g->pending = pending;
    g->ctx = ctx;
    g->tripped = 0;
    g->why[0] = '\0';
    r->fn = &g->fns;
    r->privdata = g;
}

/* ---------------------------------------------------------------- shapes */

int m0_breply_entry_ok(const redisReply *e)
{
    return e != NULL && e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
           e->element[0]->type == REDIS_REPLY_STRING && e->element[1]->type == REDIS_REPLY_ARRAY;
}

uint64_t m0_breply_entry_id(const redisReply *r)
{
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        return 0;
    const char *dash = memchr(r->str, '-', r->len);
    uint64_t v;
    return m0_u64_parse(r->str, dash ? (size_t)(dash - r->str) : r->len, &v) == M0_OK ? v : 0;
}

const redisReply *m0_breply_field(const redisReply *fields, const char *name)
{
    if (fields == NULL || fields->type != REDIS_REPLY_ARRAY)
        return NULL;
    size_t n = strlen(name);
    for (size_t i = 0; i + 1 < fields->elements; i += 2) {
        const redisReply *k = fields->element[i];
        if (k->type == REDIS_REPLY_STRING && k->len == n && memcmp(k->str, name, n) == 0)
            return fields->element[i + 1]->type == REDIS_REPLY_STRING ? fields->element[i + 1] : NULL;
    }
    return NULL;
}

static int is_status(const redisReply *r, const char *text)
{
    size_t n = strlen(text);
    return r->type == REDIS_REPLY_STATUS && r->len == n && memcmp(r->str, text, n) == 0;
}

enum m0_breply m0_breply_classify(const redisReply *r, enum m0_bcmd cmd)
{
    if (r == NULL)
        return M0_BREPLY_UNEXPECTED;
    if (r->type == REDIS_REPLY_ERROR)
        return M0_BREPLY_ERROR;
    int ok = 0;
    uint64_t v;
    switch (cmd) {
    case M0_BCMD_STATUS:
        ok = is_status(r, "OK");
        break;
    case M0_BCMD_PING:
        ok = is_status(r, "PONG");
        break;
    case M0_BCMD_COUNTER:
        ok = r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_STRING && m0_u64_parse(r->str, r->len, &v) == M0_OK);
        break;
    case M0_BCMD_INTEGER:
        ok = r->type == REDIS_REPLY_INTEGER;
        break;
    case M0_BCMD_XREAD:
        ok = r->type == REDIS_REPLY_NIL || r->type == REDIS_REPLY_ARRAY;
        for (size_t k = 0; ok && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
            const redisReply *kv = r->element[k];
            ok = kv->type == REDIS_REPLY_ARRAY && kv->elements == 2 && kv->element[0]->type == REDIS_REPLY_STRING &&
                 kv->element[1]->type == REDIS_REPLY_ARRAY;
        }
        break;
    case M0_BCMD_RESUME:
        ok = r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->type == REDIS_REPLY_STRING &&
             m0_u64_parse(r->element[0]->str, r->element[0]->len, &v) == M0_OK &&
             r->element[1]->type == REDIS_REPLY_INTEGER && r->element[2]->type == REDIS_REPLY_ARRAY;
        break;
    case M0_BCMD_ROLE: {
        struct m0_role role;
        ok = m0_breply_role(r, &role) == M0_OK;
        break;
    }
    case M0_BCMD_ADDR: {
        struct m0_hostport a;
        ok = m0_breply_addr(r, &a) != M0_ERR;
        break;
    }
    case M0_BCMD_REPLICAS:
        ok = r->type == REDIS_REPLY_ARRAY;
        break;
    }
    return ok ? M0_BREPLY_OK : M0_BREPLY_UNEXPECTED;
}

int m0_breply_auth_failed(const char *str, size_t len)
{
    static const char *const prefixes[] = {"NOAUTH", "WRONGPASS", "ERR invalid password", "INVALIDPASS"};
    for (size_t i = 0; i < M0_ARRAY_LEN(prefixes); i++) {
        size_t n = strlen(prefixes[i]);
        if (len >= n && memcmp(str, prefixes[i], n) == 0)
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------- Sentinel and ROLE */

static int is_str(const redisReply *r)
{
    return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS;
}

static int same(const redisReply *r, const char *text)
{
    size_t n = strlen(text);
    return is_str(r) && r->len == n && memcmp(r->str, text, n) == 0;
}

/* A host (printable, no spaces, fits) and a port 1..65535 → *out. */
static int take_addr(const char *host, size_t hlen, uint64_t port, struct m0_hostport *out)
{
    if (hlen == 0 || hlen >= sizeof out->host || port == 0 || port > 65535)
        return M0_ERR;
    for (size_t i = 0; i < hlen; i++)
        if (host[i] <= 0x20 || host[i] >= 0x7f)
            return M0_ERR;
    memcpy(out->host, host, hlen);
    out->host[hlen] = '\0';
    out->port = (int)port;
    return M0_OK;
}

static int port_of(const redisReply *r, uint64_t *port)
{
    if (r->type == REDIS_REPLY_INTEGER) {
        *port = r->integer > 0 ? (uint64_t)r->integer : 0;
        return M0_OK;
    }
    return is_str(r) ? m0_u64_parse(r->str, r->len, port) : M0_ERR;
}

int m0_breply_role(const redisReply *r, struct m0_role *out)
{
    memset(out, 0, sizeof *out);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !is_str(r->element[0]))
        return M0_ERR;
    if (same(r->element[0], "master")) {
        out->kind = M0_ROLE_PRIMARY;
        return M0_OK;
    }
    if (!same(r->element[0], "slave")) {
        out->kind = M0_ROLE_OTHER;
        return M0_OK;
    }
    uint64_t port;
    if (r->elements < 4 || !is_str(r->element[1]) || port_of(r->element[2], &port) != M0_OK ||
        !is_str(r->element[3]) || take_addr(r->element[1]->str, r->element[1]->len, port, &out->primary) != M0_OK)
        return M0_ERR;
    out->kind = M0_ROLE_REPLICA;
    out->linked = same(r->element[3], "connected");
    return M0_OK;
}

int m0_breply_addr(const redisReply *r, struct m0_hostport *out)
{
    if (r == NULL)
        return M0_ERR;
    if (r->type == REDIS_REPLY_NIL)
        return M0_AGAIN;
    uint64_t port;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !is_str(r->element[0]) ||
        port_of(r->element[1], &port) != M0_OK)
        return M0_ERR;
    return take_addr(r->element[0]->str, r->element[0]->len, port, out);
}

/* The value of field name in a flat [field, value, ...] array, or NULL. */
static const redisReply *flat_field(const redisReply *a, const char *name)
{
    for (size_t i = 0; i + 1 < a->elements; i += 2)
        if (same(a->element[i], name))
            return is_str(a->element[i + 1]) ? a->element[i + 1] : NULL;
    return NULL;
}

static int has_flag(const redisReply *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (size_t i = 0; i + n <= flags->len; i++) {
        if ((i == 0 || flags->str[i - 1] == ',') && memcmp(flags->str + i, flag, n) == 0 &&
            (i + n == flags->len || flags->str[i + n] == ','))
            return 1;
    }
    return 0;
}

size_t m0_breply_replicas(const redisReply *r, struct m0_hostport *out, size_t max)
{
    size_t n = 0;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < r->elements && n < max; i++) {
            const redisReply *e = r->element[i];
            if (e->type != REDIS_REPLY_ARRAY)
                continue;
            const redisReply *ip = flat_field(e, "ip"), *port = flat_field(e, "port"), *flags = flat_field(e, "flags");
            const redisReply *link = flat_field(e, "master-link-status");
            uint64_t p;
            if (ip == NULL || port == NULL || flags == NULL || port_of(port, &p) != M0_OK)
                continue;
            if (has_flag(flags, "s_down") || has_flag(flags, "o_down") || has_flag(flags, "disconnected"))
                continue;
            const redisReply *role = flat_field(e, "role-reported");
            if (role != NULL && same(role, "master"))
                continue;              /* an old primary back, not converted yet */
            int ok = link != NULL && same(link, "ok");
            if (ok != (pass == 0))
                continue;              /* linked ones first */
            if (take_addr(ip->str, ip->len, p, &out[n]) == M0_OK)
                n++;
        }
    }
    return n;
}

enum m0_push m0_breply_push(const redisReply *r, const redisReply **channel, const redisReply **payload)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3 || !is_str(r->element[0]) ||
        !is_str(r->element[1]))
        return M0_PUSH_BAD;
    if (same(r->element[0], "subscribe") && r->element[2]->type == REDIS_REPLY_INTEGER)
        return M0_PUSH_CONFIRM;
    if (same(r->element[0], "message") && is_str(r->element[2])) {
        *channel = r->element[1];
        *payload = r->element[2];
        return M0_PUSH_MESSAGE;
    }
    return M0_PUSH_BAD;
}

/* The k-th space-separated word of p (n bytes): its start and length, or
 * NULL. */
static const char *word(const char *p, size_t n, unsigned k, size_t *len)
{
    size_t i = 0;
    for (unsigned w = 0;; w++) {
        while (i < n && p[i] == ' ')
            i++;
        if (i == n)
            return NULL;
        size_t start = i;
        while (i < n && p[i] != ' ')
            i++;
        if (w == k) {
            *len = i - start;
            return p + start;
        }
    }
}

static int word_is(const char *p, size_t n, unsigned k, const char *text)
{
    size_t len;
    const char *w = word(p, n, k, &len);
    return w != NULL && len == strlen(text) && memcmp(w, text, len) == 0;
}

static int chan_is(const char *c, size_t n, const char *text)
{
    return n == strlen(text) && memcmp(c, text, n) == 0;
}

enum m0_sentinel_event m0_sentinel_event(const char *channel, size_t clen, const char *payload, size_t plen,
                                         const char *master, struct m0_hostport *to)
{
    if (chan_is(channel, clen, "+switch-master")) {
        /* NAME OLD-IP OLD-PORT NEW-IP NEW-PORT */
        size_t hl, pl;
        const char *h = word(payload, plen, 3, &hl), *p = word(payload, plen, 4, &pl);
        uint64_t port;
        if (!word_is(payload, plen, 0, master) || h == NULL || p == NULL || m0_u64_parse(p, pl, &port) != M0_OK ||
            take_addr(h, hl, port, to) != M0_OK)
            return M0_SEV_NONE;
        return M0_SEV_SWITCH;
    }
    /* TYPE NAME IP PORT ...: only the primary (type "master") named master. */
    size_t hl, pl;
    const char *h = word(payload, plen, 2, &hl), *p = word(payload, plen, 3, &pl);
    uint64_t port;
    if (!word_is(payload, plen, 0, "master") || !word_is(payload, plen, 1, master) || h == NULL || p == NULL ||
        m0_u64_parse(p, pl, &port) != M0_OK || take_addr(h, hl, port, to) != M0_OK)
        return M0_SEV_NONE;
    if (chan_is(channel, clen, "+sdown") || chan_is(channel, clen, "+odown"))
        return M0_SEV_DOWN;
    if (chan_is(channel, clen, "-sdown") || chan_is(channel, clen, "-odown"))
        return M0_SEV_UP;
    return M0_SEV_NONE;
}
