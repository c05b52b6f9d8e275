/*
 * http.c — llhttp glue: spans into the request arena, limits, smuggling
 * defences, the two pause points (head complete, message complete).
 *
 * Implements the request side of RFC 9112: message framing (§6), the
 * Content-Length/Transfer-Encoding rules that defend against request
 * smuggling (§6.1, §6.3, §11.2), chunk extensions with BWS (§7.1.1), the
 * Host requirement (RFC 9110 §7.2, RFC 9112 §3.2), obs-fold rejection
 * (§5.2), 100-continue (RFC 9110 §10.1.1), and 501 for a method we do not
 * implement (RFC 9110 §9.1, §9.3.6 CONNECT, §15.6.2). Owned by whichever
 * thread owns the request (the loop while reading); pure logic with one
 * exception: a large body spills to an unlinked temporary file.
 *
 * Why the glue reads the method and the chunk-size lines itself.
 *
 * Debian 12 ships llhttp 8.1.0 (node-llhttp). Probed with LLHTTP_STRICT_MODE
 * and compared with every upstream release up to 9.4:
 *  - a method outside llhttp's table (QUERY before 9.2.0, "-BLARGH", "get",
 *    "GETX") is HPE_INVALID_METHOD at the first byte that leaves the table,
 *    often before the end of the token, so the error cannot tell a token we
 *    do not implement (501) from a request-line that is not well-formed
 *    (400). RTSP names (DESCRIBE...) fail later, at the version; PRI waits
 *    for an HTTP/2 preface. No release takes an arbitrary token: 9.2.0 only
 *    added QUERY to the table. CONNECT parses in every release, with any
 *    target ("/" too), and turns the connection into a tunnel.
 *  - BWS in a chunk extension ("5 ; a=b", "5;a = b") is HPE_INVALID_CHUNK_SIZE
 *    or HPE_STRICT in every release. 9.1.1 added a lenient flag for spaces
 *    after the size (which also admits "5 \r\n"); none exists for spaces
 *    after ";" or around "=". 8.1.0 has no lenient flag for chunk lines at
 *    all, and its LENIENT_HEADERS would undo header checks we rely on.
 * A newer llhttp fixes neither, and the npm registry has no generated C for
 * one (its "llhttp" package is 1.0.1, grammar sources only). So we keep
 * Debian's llhttp and hand it only what it already parses strictly:
 *  - read_method(): the glue reads the method token up to its SP. A method
 *    in llhttp's HTTP table goes to llhttp as is; any other token goes as
 *    the stand-in "GET", so llhttp still checks the rest of the request-line
 *    and the whole header section (target, version, Host, CL/TE framing,
 *    obs-fold), and the head ends in 501 instead of being served. Not a
 *    token, or not followed by SP: 400. Either way the body is never read
 *    and the connection closes (the error path).
 *  - read_chunk_line(): llhttp pauses at the end of each chunk and the glue
 *    feeds it the next chunk-size line without its BWS. A whitespace run is
 *    dropped only next to ";" or "=" outside a quoted-string, and is a 400
 *    anywhere else ("5 x", "1 0", "5 \r\n", " 5"). The size, the CRLF rules
 *    and the data length stay llhttp's: dropping a run beside ";" or "="
 *    cannot join two hex digits or move the end of the line. Two limits of
 *    8.1.0 remain, with or without BWS, both fixed in 9.1.3: an extension
 *    after an unquoted value ("5;a=1;b=2") and a quoted-pair in a quoted
 *    value are 400.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "m0/http.h"

#define H(p) ((struct m0_http *)(p)->data)

/* Record a rejection; llhttp stops with HPE_USER and the error is sticky. */
static int reject(struct m0_http *h, int status, const char *reason)
{
    if (h->status == 0) {
        h->status = status;
        h->reason = reason;
    }
    return HPE_USER;
}

static int over_head_limit(struct m0_http *h, size_t more)
{
    return h->field.len + h->value.len + more > h->lim->max_header_bytes;
}

static int on_message_begin(llhttp_t *p)
{
    H(p)->in_message = 1;
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    struct m0_http *h = H(p);
    if (h->field.len + n > h->lim->max_target)
        return reject(h, 414, "Request-target too long");
    m0_buf_append(&h->field, at, n);
    return 0;
}

static int valid_host(const char *v, size_t n);

/* RFC 9112 §3.2.3: authority-form = uri-host ":" port, the port required
 * (RFC 9110 §9.3.6); uri-host is a bracketed IP literal or a name or IPv4
 * address without ":" (RFC 3986 §3.2.2). No userinfo. */
static int authority_form(const char *t, size_t n)
{
    const char *colon = memrchr(t, ':', n);
    if (colon == NULL || colon == t || !valid_host(t, n))
        return 0;
    size_t hlen = (size_t)(colon - t), plen = n - hlen - 1;
    if (plen == 0 || plen > 5)
        return 0;
    for (size_t i = 0; i < plen; i++) {
        if (colon[1 + i] < '0' || colon[1 + i] > '9')
            return 0;
    }
    if (t[0] == '[')
        return hlen > 2 && t[hlen - 1] == ']' && memchr(t + 1, '[', hlen - 1) == NULL &&
               memchr(t + 1, ']', hlen - 2) == NULL;
    return memchr(t, ':', hlen) == NULL && memchr(t, '[', hlen) == NULL && memchr(t, ']', hlen) == NULL;
}

static int on_url_complete(llhttp_t *p)
{
    struct m0_http *h = H(p);
    struct m0_req *r = h->req;
    size_t n = h->field.len;
    const char *t = h->field.data ? h->field.data : "";

    r->target = m0_arena_strndup(&r->arena, t, n);
    r->target_len = (uint32_t)n;
    if (memchr(t, '#', n) != NULL)
        return reject(h, 400, "Fragment in the request-target");
    if (p->method == HTTP_CONNECT) {
        /* RFC 9112 §3.2.3: CONNECT takes the authority-form and nothing
         * else (llhttp takes any target). Refused at head end (501). */
        if (!authority_form(r->target, n))
            return reject(h, 400, "Invalid request-target for CONNECT");
        r->authority = r->target;
        r->authority_len = (uint32_t)n;
        r->path = r->query = "";
        m0_buf_reset(&h->field);
        return 0;
    }
    /* Origin-form is the norm. Absolute-form (RFC 9112 §3.2.2) is reduced to
     * its path, and its authority replaces Host (checked at head end);
     * asterisk-form is OPTIONS only. */
    const char *path = r->target;
    if (path[0] == '*') {
        if (n != 1)
            return reject(h, 400, "Invalid request-target");
        r->flags |= M0_REQ_ASTERISK;
    } else if (path[0] != '/') {
        size_t skip = strncasecmp(path, "http://", 7) == 0 ? 7 : strncasecmp(path, "https://", 8) == 0 ? 8 : 0;
        if (skip == 0)
            return reject(h, 400, "Invalid request-target");
        const char *auth = path + skip;
        size_t alen = strcspn(auth, "/?");
        if (alen == 0)
            return reject(h, 400, "Invalid request-target");
        r->authority = m0_arena_strndup(&r->arena, auth, alen);
        r->authority_len = (uint32_t)alen;
        path = auth + alen;
        if (*path != '/') {
            /* "http://h?x=1": the path is "/", the query stays */
            char *fixed = m0_arena_alloc(&r->arena, strlen(path) + 2);
            fixed[0] = '/';
            strcpy(fixed + 1, path);
            path = fixed;
        }
    }
    const char *q = strchr(path, '?');
    size_t plen = q ? (size_t)(q - path) : strlen(path);
    r->path = m0_arena_strndup(&r->arena, path, plen);
    r->path_len = (uint32_t)plen;
    r->query = q ? m0_arena_strndup(&r->arena, q + 1, strlen(q + 1)) : "";
    r->query_len = (uint32_t)strlen(r->query);
    m0_buf_reset(&h->field);
    return 0;
}

static int on_version_complete(llhttp_t *p)
{
    struct m0_http *h = H(p);
    /* Recorded now, not only once the head is complete: a request rejected
     * later in its head is logged with the version it was sent with. */
    h->req->http_major = (uint8_t)llhttp_get_http_major(p);
    h->req->http_minor = (uint8_t)llhttp_get_http_minor(p);
    if (llhttp_get_http_major(p) != 1 || llhttp_get_http_minor(p) > 1)
        return reject(h, 505, "HTTP version not supported");
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    struct m0_http *h = H(p);
    if (over_head_limit(h, n))
        return reject(h, 431, "Request header fields too large");
    m0_buf_append(&h->field, at, n);
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    struct m0_http *h = H(p);
    if (over_head_limit(h, n))
        return reject(h, 431, "Request header fields too large");
    m0_buf_append(&h->value, at, n);
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    struct m0_http *h = H(p);
    struct m0_req *r = h->req;
    const char *v = h->value.data ? h->value.data : "";
    size_t vn = h->value.len;

    if (h->headers_done) {
        /* A trailer field of a chunked body. RFC 9110 §6.5.1: never merged
         * into the header section (a client could otherwise smuggle
         * Content-Length or Authorization past a proxy that checked the
         * head). We do not expose trailers: drop it. */
        if (++h->trailers > h->lim->max_headers)
            return reject(h, 431, "Too many trailer fields");
        m0_buf_reset(&h->field);
        m0_buf_reset(&h->value);
        return 0;
    }

    if (r->nhdrs >= h->lim->max_headers)
        return reject(h, 431, "Too many request header fields");
    if (!m0_http_is_token(h->field.data, h->field.len))
        return reject(h, 400, "Invalid header field name");
    /* Trim optional whitespace; anything else that is not a field-value
     * byte (CR or LF left by an obs-fold, NUL) rejects the request. */
    while (vn > 0 && (v[0] == ' ' || v[0] == '\t')) {
        v++;
        vn--;
    }
    while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
        vn--;
    if (!m0_http_is_field_value(v, vn))
        return reject(h, 400, "Invalid header field value (obs-fold or control byte)");

    if (h->field.len >= 3 && strncasecmp(h->field.data, "m0-", 3) == 0) {
        /* M0-* fields instruct this server (README "Realtime"): one from a
         * client never reaches an application, so a plain HTTP request
         * cannot pass for a WebSocket message (M0-Channel, M0-Slot,
         * M0-Opcode) — Pushpin's rule for Grip-*. Dropped here, the one
         * place every runner's request comes from. */
        m0_buf_reset(&h->field);
        m0_buf_reset(&h->value);
        return 0;
    }
    if (h->field.len == 4 && strncasecmp(h->field.data, "host", 4) == 0) {
        if (h->host_seen)
            return reject(h, 400, "Duplicate Host header");
        h->host_seen = 1;
    }
    if (r->nhdrs == r->hdrs_cap) {
        unsigned cap = r->hdrs_cap ? r->hdrs_cap * 2 : 16;
        struct m0_hdr *n = m0_arena_alloc(&r->arena, cap * sizeof *n);
        if (r->nhdrs)
            memcpy(n, r->hdrs, r->nhdrs * sizeof *n);
        r->hdrs = n;
        r->hdrs_cap = cap;
    }
    struct m0_hdr *hd = &r->hdrs[r->nhdrs++];
    hd->name = m0_arena_strndup(&r->arena, h->field.data, h->field.len);
    hd->name_len = (uint32_t)h->field.len;
    hd->value = m0_arena_strndup(&r->arena, v, vn);
    hd->value_len = (uint32_t)vn;
    m0_buf_reset(&h->field);
    m0_buf_reset(&h->value);
    return 0;
}

/* RFC 9110 §7.2 / RFC 3986 §3.2.2-3.2.3: Host = uri-host [ ":" port ].
 * uri-host is a bracketed IP literal, or a reg-name or IPv4 address (the
 * characters those allow: no space, '/', '@', ':', '[' or ']'); port is
 * digits (possibly none). RFC 9112 §3.2: any other value is a 400. */
static int valid_host(const char *v, size_t n)
{
    static const char allowed[] = "-._~!$&'()*+,;=%";
    size_t i = 0, end = n;
    int literal = n > 0 && v[0] == '[';
    if (literal) {
        const char *close = memchr(v, ']', n);
        if (close == NULL || close == v + 1)
            return 0;
        end = (size_t)(close - v);
        i = 1;
    } else {
        const char *colon = memchr(v, ':', n);
        if (colon != NULL)
            end = (size_t)(colon - v);
    }
    for (; i < end; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            continue;
        if (c != 0 && (strchr(allowed, c) != NULL || (c == ':' && literal)))
            continue;
        return 0;
    }
    if (literal)
        end++;                               /* past the ']' */
    if (end == n)
        return 1;
    if (v[end] != ':')
        return 0;
    for (i = end + 1; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return 0;
    }
    return 1;
}

/* RFC 9112 §6.1, §7: the only transfer coding we decode is chunked; it
 * must come last and only once. Every Transfer-Encoding line counts.
 * Returns 0 (valid), 400 (chunked missing, repeated or not last) or 501
 * (a coding we do not implement before a final chunked). */
static int check_transfer_coding(const struct m0_req *r)
{
    int chunked = 0, unknown = 0, last_chunked = 0;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *hd = &r->hdrs[i];
        if (hd->name_len != 17 || strncasecmp(hd->name, "transfer-encoding", 17) != 0)
            continue;
        const char *p = hd->value, *end = hd->value + hd->value_len, *item;
        size_t len;
        while (m0_http_list_next(&p, end, &item, &len)) {
            last_chunked = len == 7 && strncasecmp(item, "chunked", 7) == 0;
            if (last_chunked)
                chunked++;
            else
                unknown = 1;
        }
    }
    if (chunked != 1 || !last_chunked)
        return 400;
    return unknown ? 501 : 0;
}

/* RFC 9110 §9.1, §15.6.2: a method we do not implement is 501 — one
 * llhttp does not know, or CONNECT (§9.3.6), a tunnel we never open. */
static const char *unimplemented(const struct m0_http *h)
{
    if (h->method_unknown)
        return "Method not implemented";
    if (h->parser.method == HTTP_CONNECT)
        return "CONNECT not implemented";
    return NULL;
}

/* The next bytes are a chunk-size line (RFC 9112 §7.1): read_chunk_line()
 * feeds it to llhttp. */
static void begin_chunk_line(struct m0_http *h)
{
    h->chunk_line = 1;
    h->ext_bws = h->ext_value = h->ext_quoted = h->ext_escaped = 0;
    h->ext_prev = 0;
    h->chunk_line_len = 0;
}


/* RFC 9112 §9.6: "close" among the Connection options ends the connection
 * after the response. llhttp's own token scan can miss it in a list that
 * holds other bytes ("\xff,(  ,close\t"); the list rules of RFC 9110
 * §5.6.1 (m0_http_list_has) decide, as they do everywhere else. */
static int connection_close(const struct m0_req *r)
{
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *hd = &r->hdrs[i];
        if (hd->name_len == 10 && strncasecmp(hd->name, "connection", 10) == 0 &&
            m0_http_list_has(hd->value, hd->value_len, "close"))
            return 1;
    }
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct m0_http *h = H(p);
    struct m0_req *r = h->req;

    /* r->method was set by read_method() */
    r->http_major = (uint8_t)llhttp_get_http_major(p);
    r->http_minor = (uint8_t)llhttp_get_http_minor(p);
    if (r->target == NULL)
        return reject(h, 400, "Missing request-target");
    /* llhttp reads a request-line without HTTP-version as HTTP/0.9 and goes
     * on to parse header lines; on_version_complete never ran. We speak
     * HTTP/1.x only (RFC 9112 §3: the version is required). */
    if (r->http_major != 1)
        return reject(h, 400, "Missing HTTP version");
    if (r->http_minor >= 1 && !h->host_seen)
        return reject(h, 400, "Missing Host header");
    const struct m0_hdr *host = m0_req_header(r, "host");
    if (host != NULL && !valid_host(host->value, host->value_len))
        return reject(h, 400, "Invalid Host header");
    if (r->authority != NULL && !valid_host(r->authority, r->authority_len))
        return reject(h, 400, "Invalid authority in the request-target");
    if ((r->flags & M0_REQ_ASTERISK) && p->method != HTTP_OPTIONS)
        return reject(h, 400, "Asterisk-form is for OPTIONS only");

    const struct m0_hdr *te = m0_req_header(r, "transfer-encoding");
    if (te != NULL && r->http_minor == 0)
        return reject(h, 400, "Transfer-Encoding in an HTTP/1.0 request");
    if (te != NULL) {
        int status = check_transfer_coding(r);
        if (status == 501)
            return reject(h, 501, "Unsupported transfer coding");
        if (status != 0)
            return reject(h, 400, "Transfer-Encoding must end with chunked, once");
    }
    if (p->flags & F_CHUNKED)
        r->flags |= M0_REQ_CHUNKED;
    else if (te != NULL)   /* llhttp catches this too; belt and braces */
        return reject(h, 400, "Transfer-Encoding must end with chunked");

    /* A well-formed method we do not implement: the head has passed every
     * syntax and framing check above; m0_http_feed() answers 501 once its
     * whitespace scan has passed over the whole head too. */
    if (unimplemented(h) != NULL) {
        h->headers_done = 1;
        return HPE_PAUSED;
    }

    if (p->flags & F_CONTENT_LENGTH) {
        r->content_length = (int64_t)p->content_length;
        if ((uint64_t)r->content_length > h->lim->max_body)
            return reject(h, 413, "Content too large");
    }

    const struct m0_hdr *ex = m0_req_header(r, "expect");
    if (ex != NULL) {
        if (strcasecmp(ex->value, "100-continue") != 0)
            return reject(h, 417, "Unsupported Expect value");
        if (r->http_minor >= 1)
            r->flags |= M0_REQ_EXPECT100;
    }
    if (llhttp_should_keep_alive(p) && !connection_close(r))
        r->flags |= M0_REQ_KEEPALIVE;
    if (p->method == HTTP_HEAD)
        r->flags |= M0_REQ_HEAD;
    if (p->upgrade)
        r->flags |= M0_REQ_UPGRADE;
    if (r->flags & M0_REQ_CHUNKED)
        begin_chunk_line(h);
    h->headers_done = 1;
    return HPE_PAUSED;
}

static int spill_open(void)
{
    const char *dir = getenv("TMPDIR");
    if (dir == NULL || dir[0] == '\0')
        dir = "/tmp";
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd == -1) {
        char path[4096];
        snprintf(path, sizeof path, "%s/m0serve-body-XXXXXX", dir);
        fd = mkostemp(path, O_CLOEXEC);
        if (fd != -1)
            unlink(path);
    }
    return fd;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct m0_http *h = H(p);
    struct m0_req *r = h->req;

    if (r->body_len + n > h->body_max)
        return reject(h, 413, "Content too large");
    size_t mem_room = r->body_len < h->lim->body_mem ? h->lim->body_mem - (size_t)r->body_len : 0;
    size_t to_mem = n < mem_room ? n : mem_room;
    m0_buf_append(&r->body, at, to_mem);
    if (to_mem < n) {
        if (r->body_fd == -1 && (r->body_fd = spill_open()) == -1)
            return reject(h, 500, "Cannot buffer the request body");
        const char *q = at + to_mem;
        size_t left = n - to_mem;
        while (left > 0) {
            ssize_t w = write(r->body_fd, q, left);
            if (w == -1) {
                if (errno == EINTR)
                    continue;
                return reject(h, 500, "Cannot buffer the request body");
            }
            q += w;
            left -= (size_t)w;
        }
    }
    r->body_len += n;
    return 0;
}

static int on_chunk_header(llhttp_t *p)
{
    H(p)->chunk_last = p->content_length == 0;
    return 0;
}

/* A chunk's data and its CRLF are done. Unless it was the last chunk, the
 * next chunk-size line follows: pause, so that m0_http_feed() gives it to
 * llhttp through read_chunk_line(). */
static int on_chunk_complete(llhttp_t *p)
{
    struct m0_http *h = H(p);
    if (h->chunk_last)
        return 0;
    h->chunk_paused = 1;
    return HPE_PAUSED;
}

static int on_message_complete(llhttp_t *p)
{
    struct m0_http *h = H(p);
    h->message_done = 1;
    return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_url_complete = on_url_complete,
    .on_version_complete = on_version_complete,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_chunk_header = on_chunk_header,
    .on_chunk_complete = on_chunk_complete,
    .on_message_complete = on_message_complete,
};

void m0_http_init(struct m0_http *h, struct m0_req *req, const struct m0_limits *lim)
{
    memset(h, 0, sizeof *h);
    h->req = req;
    h->lim = lim;
    h->body_max = lim->max_body;
    llhttp_init(&h->parser, HTTP_REQUEST, &settings);
    h->parser.data = h;
}

void m0_http_next(struct m0_http *h)
{
    /* A fresh parser per message also clears an upgrade pause. */
    llhttp_init(&h->parser, HTTP_REQUEST, &settings);
    h->parser.data = h;
    m0_buf_reset(&h->field);
    m0_buf_reset(&h->value);
    h->head_bytes = 0;
    h->status = 0;
    h->reason = NULL;
    h->in_message = h->headers_done = h->message_done = h->host_seen = 0;
    h->head_scanned = h->last_was_lf = h->last_was_sp = h->last_was_cr = h->start_line_done = h->start_seen = 0;
    h->method_done = h->method_unknown = 0;
    h->chunk_line = h->chunk_last = h->chunk_paused = 0;
    h->trailers = 0;
    h->body_max = h->lim->max_body;
    m0_req_reset(h->req);
}

void m0_http_cap_body(struct m0_http *h, uint64_t max)
{
    if (max < h->body_max)
        h->body_max = max;
}

void m0_http_free(struct m0_http *h)
{
    m0_buf_free(&h->field);
    m0_buf_free(&h->value);
}

static int map_error(struct m0_http *h, llhttp_errno_t e)
{
    if (e == HPE_USER && h->status != 0)
        return M0_ERR;
    switch (e) {
    case HPE_INVALID_VERSION:
        /* A well-formed version we do not speak (HTTP/2.0, HTTP/3.1) is 505;
         * anything else in that place is just malformed. */
        if (llhttp_get_http_major(&h->parser) >= 2)
            return reject(h, 505, "HTTP version not supported"), M0_ERR;
        return reject(h, 400, "Malformed HTTP version"), M0_ERR;
    case HPE_INVALID_METHOD:
        return reject(h, 400, "Invalid method"), M0_ERR;
    case HPE_INVALID_URL:
        return reject(h, 400, "Invalid request-target"), M0_ERR;
    case HPE_UNEXPECTED_CONTENT_LENGTH:
        return reject(h, 400, "Content-Length conflicts with Transfer-Encoding or repeats"), M0_ERR;
    case HPE_INVALID_CONTENT_LENGTH:
        return reject(h, 400, "Invalid Content-Length"), M0_ERR;
    case HPE_INVALID_TRANSFER_ENCODING:
        return reject(h, 400, "Invalid Transfer-Encoding"), M0_ERR;
    case HPE_INVALID_CHUNK_SIZE:
        return reject(h, 400, "Invalid chunk size"), M0_ERR;
    case HPE_INVALID_HEADER_TOKEN:
        return reject(h, 400, "Invalid header field"), M0_ERR;
    default:
        return reject(h, 400, "Malformed request"), M0_ERR;
    }
}

/* Whitespace llhttp tolerates and we do not, checked over head bytes only
 * (feed pauses when the head completes):
 *  - RFC 9112 §5.2: a header line that starts with SP or HTAB continues the
 *    previous one (obs-fold); llhttp folds it silently;
 *  - RFC 9112 §3: the request-line's elements are separated by a single SP;
 *    llhttp skips runs of them. We take the strict reading the RFC allows. */
static int bad_whitespace(struct m0_http *h, const char *p, size_t n);

/* RFC 9112 §2.2: every line of a header or trailer section ends in CRLF.
 * llhttp takes a bare LF as the empty line that ends either section (and
 * rejects it everywhere else); a recipient that reads the message otherwise
 * could be smuggled a request. Scans [p, p + n) with h->last_was_cr carried
 * across feeds; 1 when a LF without its CR is seen. */
static int bare_lf(struct m0_http *h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n' && !h->last_was_cr)
            return 1;
        h->last_was_cr = p[i] == '\r';
    }
    return 0;
}

static int bad_whitespace(struct m0_http *h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int sp = p[i] == ' ' || p[i] == '\t';
        if (sp && h->last_was_lf)
            return 1;
        if (!h->start_line_done) {
            if (p[i] == ' ' && h->last_was_sp)
                return 1;
            h->last_was_sp = p[i] == ' ';
            if (p[i] != '\r' && p[i] != '\n')
                h->start_seen = 1;     /* empty lines before it (§2.2) do not count */
            else if (p[i] == '\n' && h->start_seen)
                h->start_line_done = 1;
            continue;
        }
        if (bare_lf(h, p + i, 1))
            return 1;
        h->last_was_lf = (p[i] == '\n');
    }
    return 0;
}

/* Run llhttp over [at, at + len). *took: how many of those bytes it took
 * (all of them, or up to the pause or error). */
static llhttp_errno_t run(struct m0_http *h, const char *at, size_t len, size_t *took)
{
    llhttp_errno_t e = llhttp_execute(&h->parser, at, len);
    *took = len;
    if (e != HPE_OK) {
        const char *pos = llhttp_get_error_pos(&h->parser);
        if (pos != NULL && pos >= at && pos <= at + len)
            *took = (size_t)(pos - at);
    }
    return e;
}

/* The request methods llhttp parses as HTTP (its HTTP_METHOD_MAP: RFC 9110,
 * WebDAV and friends). Its RTSP names and PRI are not among them. */
#define M0_METHOD_NAME(num, name, string) #string,
static const char *const http_methods[] = {HTTP_METHOD_MAP(M0_METHOD_NAME)};
#undef M0_METHOD_NAME

static int known_method(const char *m, size_t n)
{
    for (size_t i = 0; i < sizeof http_methods / sizeof http_methods[0]; i++) {
        if (strlen(http_methods[i]) == n && memcmp(http_methods[i], m, n) == 0)
            return 1;
    }
    return 0;
}

/*
 * RFC 9112 §3: request-line = method SP request-target SP HTTP-version;
 * RFC 9110 §9.1: method = token, case-sensitive. Reads the method from
 * [p, p + n), across calls (its bytes wait in h->field), skipping the
 * empty lines before it (§2.2) as llhttp would. Once the SP after it is
 * here, sets r->method and hands llhttp the method, or the stand-in "GET"
 * for one it does not know (see the top of this file); the SP and what
 * follows are left to llhttp. *took: bytes used. Returns HPE_OK (method
 * done, or all bytes used and more needed) or an error (h->status set for
 * the 400 of a method that is not a token).
 */
static llhttp_errno_t read_method(struct m0_http *h, const char *p, size_t n, size_t *took)
{
    struct m0_req *r = h->req;
    size_t i = 0, start, t;

    if (h->field.len == 0) {
        while (i < n && (p[i] == '\r' || p[i] == '\n'))
            i++;
    }
    start = i;
    while (i < n && m0_http_is_tchar((unsigned char)p[i]))
        i++;
    *took = i;
    if (i > start)
        h->in_message = 1;       /* the request has begun (head timer, logs) */
    if (i == n) {
        m0_buf_append(&h->field, p + start, i - start);
        return HPE_OK;
    }
    if (p[i] != ' ' || (i == start && h->field.len == 0))
        return reject(h, 400, "Invalid method"), HPE_USER;

    m0_buf_append(&h->field, p + start, i - start);
    r->method = m0_arena_strndup(&r->arena, h->field.data, h->field.len);
    r->method_len = (uint32_t)h->field.len;
    m0_buf_reset(&h->field);
    h->method_done = 1;
    /* Known from here on, so that an error the head still earns (414, 431,
     * a bad field) goes out without content too (RFC 9110 §9.3.2). */
    if (r->method_len == 4 && memcmp(r->method, "HEAD", 4) == 0)
        r->flags |= M0_REQ_HEAD;
    h->method_unknown = !known_method(r->method, r->method_len);
    const char *m = h->method_unknown ? "GET" : r->method;
    llhttp_errno_t e = run(h, m, strlen(m), &t);
    if (e != HPE_OK)   /* a method from llhttp's own table: not expected */
        return reject(h, 400, "Invalid method"), HPE_USER;
    return HPE_OK;
}

/*
 * RFC 9112 §7.1, §7.1.1: chunk = chunk-size [ chunk-ext ] CRLF ...;
 * chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ),
 * chunk-ext-val = token / quoted-string. Feeds llhttp the chunk-size line in
 * [p, p + n) up to and including its LF, without the whitespace runs the
 * rule allows (next to ";" or "=", outside a quoted-string); llhttp checks
 * everything else. A run anywhere else is a 400. A run cut by the end of a
 * read is judged by the first byte after it. Clears h->chunk_line at the
 * LF. *took: bytes used. Returns HPE_OK or llhttp's error (HPE_USER with
 * h->status set for a misplaced run).
 */
static llhttp_errno_t read_chunk_line(struct m0_http *h, const char *p, size_t n, size_t *took)
{
    size_t i = 0, from = 0, t;
    llhttp_errno_t e;

    while (i < n) {
        char c = p[i];
        if (h->ext_quoted && c != '\r' && c != '\n') {
            /* quoted-string: whitespace is content; llhttp checks qdtext */
            if (h->ext_escaped)
                h->ext_escaped = 0;
            else if (c == '\\')
                h->ext_escaped = 1;
            else if (c == '"')
                h->ext_quoted = 0;
            h->ext_prev = c;
            i++;
            continue;
        }
        h->ext_quoted = 0;   /* CR or LF ends it: llhttp rejects the line */
        if (c == ' ' || c == '\t') {
            if (i > from && (e = run(h, p + from, i - from, &t)) != HPE_OK)
                return *took = from + t, e;
            while (i < n && (p[i] == ' ' || p[i] == '\t'))
                i++;
            h->ext_bws = 1;
            from = i;
            continue;
        }
        if (h->ext_bws) {
            h->ext_bws = 0;
            if (h->ext_prev == 0 || !(c == ';' || c == '=' || h->ext_prev == ';' || h->ext_prev == '='))
                return *took = i, reject(h, 400, "Invalid whitespace in a chunk-size line"), HPE_USER;
        }
        if (c == '=')
            h->ext_value = 1;
        else if (c == ';')
            h->ext_value = 0;
        else if (c == '"' && h->ext_value)
            h->ext_quoted = 1;   /* llhttp too opens a quoted-string anywhere in a value */
        h->ext_prev = c;
        i++;
        if (c == '\n') {
            h->chunk_line = 0;
            break;
        }
    }
    if (i > M0_CHUNK_LINE_MAX - h->chunk_line_len)
        return *took = i, reject(h, 400, "Chunk-size line too long"), HPE_USER;
    h->chunk_line_len += (uint32_t)i;
    if (i > from && (e = run(h, p + from, i - from, &t)) != HPE_OK)
        return *took = from + t, e;
    *took = i;
    return HPE_OK;
}

int m0_http_feed(struct m0_http *h, const char *p, size_t n, size_t *used)
{
    llhttp_errno_t e = HPE_OK;
    size_t consumed = 0, took;

    *used = 0;
    if (h->status != 0)
        return M0_ERR;
    if (llhttp_get_errno(&h->parser) == HPE_PAUSED)
        llhttp_resume(&h->parser);
    /* Each pass gives llhttp one stretch: the method, a chunk-size line, or
     * everything else up to a pause. */
    for (;;) {
        if (!h->method_done) {
            e = read_method(h, p + consumed, n - consumed, &took);
            consumed += took;
            if (e != HPE_OK || !h->method_done)
                break;
        } else if (h->chunk_line) {
            e = read_chunk_line(h, p + consumed, n - consumed, &took);
            consumed += took;
            if (e != HPE_OK || h->chunk_line)
                break;
        } else {
            e = run(h, p + consumed, n - consumed, &took);
            if (h->chunk_last && bare_lf(h, p + consumed, took))    /* the trailer section */
                return reject(h, 400, "Bare LF in the trailer section"), *used = consumed + took, M0_ERR;
            consumed += took;
            if (e != HPE_PAUSED || !h->chunk_paused)
                break;
            h->chunk_paused = 0;
            llhttp_resume(&h->parser);
            begin_chunk_line(h);
        }
    }
    if (h->in_message && !h->head_scanned && bad_whitespace(h, p, consumed))
        return reject(h, 400, "Invalid whitespace in the request head"), *used = consumed, M0_ERR;
    if (!h->head_scanned) {
        /* Head bytes, counted on the read that completes the head too (feed
         * pauses there, so consumed holds no body). */
        h->head_bytes += consumed;
        if (h->head_bytes > h->lim->max_header_bytes + h->lim->max_target)
            return reject(h, 431, "Request header fields too large"), *used = consumed, M0_ERR;
        if (h->headers_done && unimplemented(h) != NULL)
            return reject(h, 501, unimplemented(h)), *used = consumed, M0_ERR;
    }
    if (h->headers_done)
        h->head_scanned = 1;
    *used = consumed;
    switch (e) {
    case HPE_OK:
        return M0_AGAIN;
    case HPE_PAUSED:
        return h->message_done ? M0_DONE : M0_OK;
    case HPE_PAUSED_UPGRADE:
        h->message_done = 1;
        return M0_DONE;
    default:
        return map_error(h, e);
    }
}
