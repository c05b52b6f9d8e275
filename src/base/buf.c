/*
 * buf.c — byte buffers, the per-request bump arena and chunk framing.
 *
 * Allocation failure is fatal here by policy (STYLE §9): every size a client
 * can drive is bounded by a limit before it reaches these functions, so an
 * allocator failure means the machine is out of memory, and a logged abort
 * is more honest than a half-handled path.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "m0/buf.h"

static void oom(size_t n)
{
    char msg[96];
    int len = snprintf(msg, sizeof msg, "m0serve: out of memory allocating %zu bytes\n", n);
    if (len > 0 && write(STDERR_FILENO, msg, (size_t)len) < 0) {
        /* nothing left to report it with */
    }
    abort();
}

void *m0_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (M0_UNLIKELY(p == NULL))
        oom(n);
    return p;
}

void *m0_xcalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (M0_UNLIKELY(p == NULL))
        oom(n);
    return p;
}

void *m0_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (M0_UNLIKELY(q == NULL))
        oom(n);
    return q;
}

char *m0_xstrndup(const char *s, size_t n)
{
    char *d = m0_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *m0_buf_reserve(struct m0_buf *b, size_t n)
{
    if (b->cap - b->len < n) {
        /* Reclaim consumed space before growing. */
        if (b->off > 0 && b->cap - (b->len - b->off) >= n) {
            m0_buf_compact(b);
        } else {
            size_t want = b->cap ? b->cap : 256;
            while (want - b->len < n)
                want *= 2;
            b->data = m0_xrealloc(b->data, want);
            b->cap = want;
        }
    }
    return b->data + b->len;
}

void m0_buf_append(struct m0_buf *b, const void *p, size_t n)
{
    if (n == 0)
        return;
    memcpy(m0_buf_reserve(b, n), p, n);
    b->len += n;
}

void m0_buf_puts(struct m0_buf *b, const char *s)
{
    m0_buf_append(b, s, strlen(s));
}

size_t m0_u64_dec(char *out, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

int m0_u64_parse(const char *p, size_t n, uint64_t *out)
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

void m0_buf_put_u64(struct m0_buf *b, uint64_t v)
{
    char d[21];
    m0_buf_append(b, d, m0_u64_dec(d, v));
}

void m0_buf_printf(struct m0_buf *b, const char *fmt, ...)
{
    va_list ap;
    char small[256];

    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        m0_buf_append(b, small, (size_t)n);
        return;
    }
    char *dst = m0_buf_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(dst, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void m0_buf_consume(struct m0_buf *b, size_t n)
{
    b->off += n;
    if (b->off >= b->len)
        b->off = b->len = 0;
}

void m0_buf_compact(struct m0_buf *b)
{
    if (b->off == 0)
        return;
    memmove(b->data, b->data + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
}

void m0_buf_free(struct m0_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->off = b->len = b->cap = 0;
}

void m0_buf_append_chunk(struct m0_buf *b, const void *p, size_t n)
{
    char head[24];
    int hn = snprintf(head, sizeof head, "%zx\r\n", n);
    char *dst = m0_buf_reserve(b, (size_t)hn + n + 2);
    memcpy(dst, head, (size_t)hn);
    memcpy(dst + hn, p, n);
    memcpy(dst + hn + n, "\r\n", 2);
    b->len += (size_t)hn + n + 2;
}

/* ------------------------------------------------------------------ arena */

struct m0_arena_block {
    struct m0_arena_block *next;
    size_t size;    /* usable bytes after the header */
    size_t used;
    /* data follows, max_align_t aligned */
    _Alignas(16) char data[];
};

#define ARENA_BLOCK 4096u

void *m0_arena_alloc(struct m0_arena *a, size_t n)
{
    n = (n + 7u) & ~(size_t)7u;
    struct m0_arena_block *blk = a->head;
    if (blk == NULL || blk->size - blk->used < n) {
        size_t size = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        struct m0_arena_block *nb = m0_xmalloc(sizeof *nb + size);
        nb->size = size;
        nb->used = 0;
        nb->next = blk;
        a->head = blk = nb;
    }
    void *p = blk->data + blk->used;
    blk->used += n;
    a->used += n;
    return p;
}

char *m0_arena_strndup(struct m0_arena *a, const char *s, size_t n)
{
    char *d = m0_arena_alloc(a, n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void m0_arena_reset(struct m0_arena *a)
{
    /* Keep only the oldest (first) block, which is the standard size, so a
     * request with huge headers does not pin its memory on an idle
     * keep-alive connection. */
    struct m0_arena_block *blk = a->head, *keep = NULL;
    while (blk != NULL) {
        struct m0_arena_block *next = blk->next;
        if (next == NULL && blk->size == ARENA_BLOCK) {
            keep = blk;
        } else {
            free(blk);
        }
        blk = next;
    }
    if (keep != NULL)
        keep->used = 0;
    a->head = keep;
    a->used = 0;
}

void m0_arena_free(struct m0_arena *a)
{
    struct m0_arena_block *blk = a->head;
    while (blk != NULL) {
        struct m0_arena_block *next = blk->next;
        free(blk);
        blk = next;
    }
    a->head = NULL;
    a->used = 0;
}

void m0_buf_json_str(struct m0_buf *b, const char *s, size_t n)
{
    m0_buf_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            m0_buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            m0_buf_printf(b, "\\u%04x", c);
        else
            m0_buf_append(b, &s[i], 1);
    }
    m0_buf_puts(b, "\"");
}
