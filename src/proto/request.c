/*
 * request.c — the parsed request (see http.h): header lookup, its
 * lifetime and the body the parser collected (in memory, then spilled to
 * a file); and the RFC 9110 field-syntax helpers (lists, tokens, field
 * values) the parser and the runners share. The parser itself is http.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "m0/http.h"
#include "m0/log_text.h"

const struct m0_hdr *m0_req_header(const struct m0_req *r, const char *name)
{
    size_t n = strlen(name);
    for (unsigned i = 0; i < r->nhdrs; i++) {
        if (r->hdrs[i].name_len == n && strncasecmp(r->hdrs[i].name, name, n) == 0)
            return &r->hdrs[i];
    }
    return NULL;
}

const struct m0_hdr *m0_req_header_count(const struct m0_req *r, const char *name, unsigned *count)
{
    size_t n = strlen(name);
    const struct m0_hdr *first = NULL;
    unsigned k = 0;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        if (r->hdrs[i].name_len == n && strncasecmp(r->hdrs[i].name, name, n) == 0) {
            if (first == NULL)
                first = &r->hdrs[i];
            k++;
        }
    }
    *count = k;
    return first;
}

void m0_req_init(struct m0_req *r)
{
    memset(r, 0, sizeof *r);
    r->content_length = -1;
    r->body_fd = -1;
}

void m0_req_reset(struct m0_req *r)
{
    struct m0_arena arena = r->arena;
    struct m0_buf body = r->body;

    m0_arena_reset(&arena);
    m0_buf_reset(&body);
    /* A large body's buffer is not kept on an idle connection. */
    if (body.cap > 64 * 1024)
        m0_buf_free(&body);
    if (r->body_fd != -1)
        close(r->body_fd);
    memset(r, 0, sizeof *r);
    r->arena = arena;
    r->body = body;
    r->content_length = -1;
    r->body_fd = -1;
}

void m0_req_free(struct m0_req *r)
{
    m0_arena_free(&r->arena);
    m0_buf_free(&r->body);
    if (r->body_fd != -1)
        close(r->body_fd);
    r->body_fd = -1;
}

ssize_t m0_req_body_read(const struct m0_req *r, uint64_t off, void *dst, size_t n)
{
    if (off >= r->body_len || n == 0)
        return 0;
    if (n > r->body_len - off)
        n = (size_t)(r->body_len - off);
    size_t done = 0;
    if (off < r->body.len) {
        size_t k = r->body.len - (size_t)off;
        if (k > n)
            k = n;
        memcpy(dst, r->body.data + off, k);
        done = k;
        off += k;
    }
    while (done < n) {
        ssize_t got = pread(r->body_fd, (char *)dst + done, n - done, (off_t)(off - r->body.len));
        if (got == -1) {
            if (errno == EINTR)
                continue;
            return M0_ERR;
        }
        if (got == 0)
            break;
        done += (size_t)got;
        off += (uint64_t)got;
    }
    return (ssize_t)done;
}

char *m0_req_body_whole(const struct m0_req *r, size_t *n)
{
    char *b = m0_xmalloc(r->body_len + 1);
    size_t got = 0;
    while (got < r->body_len) {
        ssize_t k = m0_req_body_read(r, got, b + got, r->body_len - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    if (got != r->body_len) {
        free(b);
        *n = 0;
        return NULL;
    }
    b[got] = '\0';
    *n = got;
    return b;
}

int m0_req_path_is(const struct m0_req *r, const char *path)
{
    size_t n = strlen(path);
    return r->path_len == n && memcmp(r->path, path, n) == 0;
}

int m0_http_list_next(const char **p, const char *end, const char **item, size_t *len)
{
    const char *s = *p;
    for (;;) {
        while (s < end && (*s == ' ' || *s == '\t' || *s == ','))
            s++;
        if (s >= end) {
            *p = s;
            return 0;
        }
        const char *e = s;
        while (e < end && *e != ',')
            e++;
        const char *t = e;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        *p = e;
        if (t > s) {
            *item = s;
            *len = (size_t)(t - s);
            return 1;
        }
        s = e;
    }
}

int m0_http_list_has(const char *v, size_t n, const char *token)
{
    const char *p = v, *item;
    size_t len, tl = strlen(token);
    while (m0_http_list_next(&p, v + n, &item, &len)) {
        if (len == tl && strncasecmp(item, token, tl) == 0)
            return 1;
    }
    return 0;
}

int m0_http_is_tchar(unsigned char c)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1;
    return c != 0 && strchr(extra, c) != NULL;
}

int m0_http_is_token(const char *p, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!m0_http_is_tchar((unsigned char)p[i]))
            return 0;
    }
    return 1;
}

int m0_http_is_field_value(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\r' || c == '\n' || c == '\0' || (c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

unsigned m0_http_query_param(const char *q, size_t n, const char *name, const char **val, size_t *vlen)
{
    size_t nl = strlen(name);
    unsigned count = 0;
    *val = NULL;
    *vlen = 0;
    const char *p = q, *end = q + n;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *pe = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(pe - p));
        const char *ne = eq ? eq : pe;
        if ((size_t)(ne - p) == nl && memcmp(p, name, nl) == 0) {
            if (count++ == 0) {
                *val = eq ? eq + 1 : pe;
                *vlen = eq ? (size_t)(pe - eq - 1) : 0;
            }
        }
        if (amp == NULL)
            break;
        p = amp + 1;
    }
    return count;
}

const char *m0_req_log(char *dst, size_t cap, const struct m0_req *r)
{
    return m0_log_request(dst, cap, r->method, r->method_len, r->target, r->target_len);
}
