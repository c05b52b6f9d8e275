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

int m0_breply_u64(const char *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 20)
        return M0_ERR;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return M0_ERR;
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return M0_ERR;
        v = v * 10 + d;
    }
    *out = v;
    return M0_OK;
}

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
    return m0_breply_u64(r->str, dash ? (size_t)(dash - r->str) : r->len, &v) == M0_OK ? v : 0;
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
        ok = r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_STRING && m0_breply_u64(r->str, r->len, &v) == M0_OK);
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
             m0_breply_u64(r->element[0]->str, r->element[0]->len, &v) == M0_OK &&
             r->element[1]->type == REDIS_REPLY_INTEGER && r->element[2]->type == REDIS_REPLY_ARRAY;
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
