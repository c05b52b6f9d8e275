/*
 * static.c — static files answered by the loop (see static.h for the
 * policy and the RFC sections).
 *
 * Why the rules are checked on the decoded path before any system call,
 * and the file is still opened beneath a directory descriptor: the first
 * refuses what is never a file name here (an encoded '/', "..", NUL), so
 * no decoding trick reaches the kernel; the second makes the kernel, not
 * our string handling, the judge of where a symlink leads.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "m0/config.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/response.h"
#include "m0/static.h"
#include "m0/target.h"

/* ====================================================== roots and opens */

enum m0_static_resolver m0_static_probe(void)
{
    const char *force = getenv("M0_STATIC_RESOLVER");
    if (force != NULL && strcmp(force, "walk") == 0)
        return M0_RESOLVE_WALK;
#ifdef SYS_openat2
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof how);
    if (fd != -1) {
        close(fd);
        return M0_RESOLVE_OPENAT2;
    }
#endif
    return M0_RESOLVE_WALK;
}

const char *m0_static_resolver_name(enum m0_static_resolver r)
{
    return r == M0_RESOLVE_OPENAT2 ? "openat2" : "openat-walk";
}

struct m0_static *m0_static_open(const char *dir, long max_age, int index, enum m0_static_resolver resolver,
                                 char *err, size_t cap)
{
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd == -1) {
        snprintf(err, cap, "cannot open the directory %s: %s", dir, strerror(errno));
        return NULL;
    }
    struct m0_static *st = m0_xmalloc(sizeof *st);
    st->root_fd = fd;
    st->dir = dir;
    st->max_age = max_age;
    st->index = index;
    st->resolver = resolver;
    return st;
}

void m0_static_close(struct m0_static *st)
{
    if (st == NULL)
        return;
    if (st->root_fd != -1)
        close(st->root_fd);
    free(st);
}

#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)   /* a FIFO never blocks the loop */

/* Open rel (decoded, no empty or dot segment, may end with '/'; "" is the
 * root) beneath st's root. A descriptor, or -1 with errno set. */
static int open_beneath(const struct m0_static *st, const char *rel)
{
    if (rel[0] == '\0')
        return openat(st->root_fd, ".", OPEN_FLAGS | O_DIRECTORY);
#ifdef SYS_openat2
    if (st->resolver == M0_RESOLVE_OPENAT2) {
        struct open_how how = {.flags = OPEN_FLAGS, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
        int fd;
        do
            fd = (int)syscall(SYS_openat2, st->root_fd, rel, &how, sizeof how);
        while (fd == -1 && errno == EAGAIN);   /* a concurrent rename raced the lookup: retry */
        return fd;
    }
#endif
    /* The walk: every directory O_PATH|O_DIRECTORY|O_NOFOLLOW (a symlink
     * there is ENOTDIR), the last component O_NOFOLLOW (ELOOP). */
    int dir = st->root_fd;
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        char name[NAME_MAX + 1];
        if (len > NAME_MAX) {
            if (dir != st->root_fd)
                close(dir);
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        int last = slash == NULL || slash[1] == '\0';
        int fd = last ? openat(dir, name, OPEN_FLAGS | O_NOFOLLOW)
                      : openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        if (dir != st->root_fd)
            close(dir);
        if (fd == -1 || last) {
            errno = saved;
            return fd;
        }
        dir = fd;
        p = slash + 1;
    }
}

/* ============================================================ answers */

static void line(struct m0_head *h, const char *name, const char *value)
{
    m0_buf_puts(&h->lines, name);
    m0_buf_puts(&h->lines, ": ");
    m0_buf_puts(&h->lines, value);
    m0_buf_puts(&h->lines, "\r\n");
}

size_t m0_static_plain(struct m0_head *h, struct m0_body *b, struct m0_buf *out, const struct m0_body_req *br,
                       int status, const char *extra, const char *reason)
{
    char body[256];
    int n = snprintf(body, sizeof body, "%d %s%s%s\n", status, m0_status_reason(status), reason ? ": " : "",
                     reason ? reason : "");
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof body)
        n = sizeof body - 1;
    m0_head_reset(h);
    m0_head_status(h, status, NULL, 0);
    line(h, "Content-Type", "text/plain; charset=utf-8");
    if (extra != NULL)
        m0_buf_puts(&h->lines, extra);
    m0_body_reset(b);
    m0_body_commit(b, out, h, br, n, 0);
    m0_body_emit(b, out, body, (size_t)n);
    return br->head ? 0 : (size_t)n;
}

static void plain(struct m0_static_out *o, struct m0_head *h, struct m0_body *b, struct m0_buf *out,
                  const struct m0_body_req *br, int status, const char *extra, const char *reason)
{
    o->status = status;
    o->body_bytes = m0_static_plain(h, b, out, br, status, extra, reason);
}

/* The validators and caching fields every answer about a file carries
 * (200, 206, 304 — RFC 9110 §15.4.5 asks a 304 for the same ones). */
static void file_fields(const struct m0_static *st, struct m0_head *h, const char *etag, time_t mtime)
{
    /* The same few files answer most requests: their date is formatted once. */
    static __thread char date[40];
    static __thread time_t date_of = (time_t)-1;
    if (mtime != date_of) {
        m0_http_date_format(mtime, date, sizeof date);
        date_of = mtime;
    }
    line(h, "Last-Modified", date);
    line(h, "ETag", etag);
    if (st->max_age >= 0)
        m0_buf_printf(&h->lines, "Cache-Control: public, max-age=%ld\r\n", st->max_age);
    line(h, "Vary", "Accept-Encoding");
}

static int open_status(int err)
{
    switch (err) {
    case EACCES:
    case EPERM:
        return 403;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
        return 503;
    default:
        return 404;      /* ENOENT, ENOTDIR, ELOOP (a symlink), EXDEV (out of the root), ... */
    }
}

/* Where an answer goes: the response's head, body encoder, output and
 * outcome, and the request's framing. */
struct answer {
    struct m0_head *h;
    struct m0_body *b;
    struct m0_buf *out;
    const struct m0_body_req *br;
    struct m0_static_out *o;
};

static void refuse(const struct answer *a, int status, const char *extra, const char *why)
{
    plain(a->o, a->h, a->b, a->out, a->br, status, extra, why);
}

/* The regular file the path names under the mount (rel: its relative name,
 * *rlen bytes, room for an index and a coding suffix): its descriptor and
 * *sb, or -1 when it was answered otherwise (404, 400, a directory's 301). */
static int find_file(const struct m0_static *st, const struct m0_req *r, size_t skip, const struct answer *a,
                     char *rel, size_t *rlen, struct stat *sb)
{
    int dir_slash;
    const char *why;
    int status = m0_static_path(r->path + skip, r->path_len - skip, rel, M0_STATIC_PATH_MAX, rlen, &dir_slash, &why);
    if (status != 0) {
        m0_debug("static %s: %d (%s)", M0_LOG_TARGET(r->path, r->path_len), status, why);
        refuse(a, status, NULL, status == 404 ? "no such file" : why);
        return -1;
    }
    int fd = open_beneath(st, rel);
    if (fd == -1) {
        status = open_status(errno);
        refuse(a, status, NULL, status == 404 ? "no such file" : strerror(errno));
        return -1;
    }
    if (fstat(fd, sb) == -1) {
        close(fd);
        refuse(a, 404, NULL, "no such file");
        return -1;
    }
    if (S_ISDIR(sb->st_mode)) {
        close(fd);
        if (!st->index) {
            refuse(a, 404, NULL, "no such file");
            return -1;
        }
        if (!dir_slash) {
            /* DIR/index.html's relative links need "DIR/" in the address. */
            struct m0_buf loc = {0};
            m0_buf_puts(&loc, "Location: ");
            m0_buf_append(&loc, r->path, r->path_len);
            m0_buf_puts(&loc, "/");
            if (r->query_len > 0) {
                m0_buf_puts(&loc, "?");
                m0_buf_append(&loc, r->query, r->query_len);
            }
            m0_buf_append(&loc, "\r\n", 3);      /* with its NUL: extra is a C string */
            refuse(a, 301, loc.data, "see the directory's address with a trailing /");
            m0_buf_free(&loc);
            return -1;
        }
        memcpy(rel + *rlen, "index.html", sizeof "index.html");
        *rlen += sizeof "index.html" - 1;
        if ((fd = open_beneath(st, rel)) == -1 || fstat(fd, sb) == -1) {
            if (fd != -1)
                close(fd);
            refuse(a, 404, NULL, "no such file");
            return -1;
        }
    }
    if (!S_ISREG(sb->st_mode)) {
        close(fd);
        refuse(a, 404, NULL, "no such file");
        return -1;
    }
    return fd;
}

/* A precompressed sibling of rel the client prefers (*fd and *sb become
 * its): its Content-Encoding, or NULL for the file itself. Its age is not
 * compared with the file's: a checkout gives both arbitrary mtimes; keeping
 * them in step is the build step's job (as with nginx's gzip_static). */
static const char *precompressed(const struct m0_static *st, const struct m0_req *r, char *rel, size_t rlen, int *fd,
                                 struct stat *sb)
{
    enum m0_coding order[3];
    size_t ncod = m0_accept_encoding(r, order);
    for (size_t i = 0; i < ncod && order[i] != M0_CODING_IDENTITY; i++) {
        const char *ext = order[i] == M0_CODING_BR ? ".br" : ".gz";
        memcpy(rel + rlen, ext, 4);
        int sfd = open_beneath(st, rel);
        rel[rlen] = '\0';
        struct stat ss;
        if (sfd == -1)
            continue;
        if (fstat(sfd, &ss) == 0 && S_ISREG(ss.st_mode)) {
            close(*fd);
            *fd = sfd;
            *sb = ss;
            return order[i] == M0_CODING_BR ? "br" : "gzip";
        }
        close(sfd);
    }
    return NULL;
}

/* Read n bytes of fd at off into dst. 1 when they were all there. */
static int read_whole(int fd, char *dst, size_t n, off_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, dst + got, n - got, off + (off_t)got);
        if (r == -1 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got == n;
}

/* Answer the open file fd (*sb; Content-Type type, Content-Encoding
 * encoding or none): the conditionals, one Range (GET only), then the
 * head, a small body read now or the file range for the write path. fd is
 * the answer's (closed here, or handed over in a->o). */
static void answer_file(const struct m0_static *st, const struct m0_req *r, const struct answer *a, int fd,
                        const struct stat *sb, const char *type, const char *encoding, int get)
{
    struct m0_head *h = a->h;
    struct m0_body *b = a->b;
    const struct m0_body_req *br = a->br;
    char etag[64];
    size_t elen = m0_static_etag(etag, sizeof etag, sb);
    time_t mtime = sb->st_mtim.tv_sec;
    uint64_t size = (uint64_t)sb->st_size;
    int use_range = get;              /* Range is defined for GET only (RFC 9110 §14.2) */
    switch (m0_static_conditions(r, etag, elen, mtime, &use_range)) {
    case M0_COND_FAILED:
        close(fd);
        refuse(a, 412, NULL, "the file is not in the state the request expects");
        return;
    case M0_COND_NOT_MODIFIED:
        close(fd);
        m0_head_reset(h);
        m0_head_status(h, 304, NULL, 0);
        file_fields(st, h, etag, mtime);
        m0_body_reset(b);
        m0_body_commit(b, a->out, h, br, -1, 0);
        a->o->status = 304;
        return;
    case M0_COND_PROCEED:
        break;
    }
    struct m0_range rg = {0, size ? size - 1 : 0};
    enum m0_range_verdict rv = M0_RANGE_WHOLE;
    unsigned nrange = 0;
    const struct m0_hdr *rh = use_range ? m0_req_header_count(r, "range", &nrange) : NULL;
    if (rh != NULL && nrange == 1)
        rv = m0_range_parse(rh->value, rh->value_len, size, &rg);
    if (rv == M0_RANGE_UNSATISFIABLE) {
        close(fd);
        char extra[80];
        snprintf(extra, sizeof extra, "Content-Range: bytes */%llu\r\n", (unsigned long long)size);
        refuse(a, 416, extra, "the range is outside the file");
        return;
    }
    uint64_t len = rv == M0_RANGE_ONE ? rg.last - rg.first + 1 : size;
    off_t off = rv == M0_RANGE_ONE ? (off_t)rg.first : 0;

    /* Small bodies are read now: one send for head and body. */
    char small[M0_STATIC_INLINE];
    int inline_body = !br->head && len > 0 && len <= sizeof small;
    if (inline_body && !read_whole(fd, small, (size_t)len, off)) {
        close(fd);
        refuse(a, 503, "Retry-After: 1\r\n", "the file changed while it was read");
        return;
    }

    m0_head_reset(h);
    m0_head_status(h, rv == M0_RANGE_ONE ? 206 : 200, NULL, 0);
    line(h, "Content-Type", type);
    if (encoding != NULL)
        line(h, "Content-Encoding", encoding);
    file_fields(st, h, etag, mtime);
    line(h, "Accept-Ranges", "bytes");
    if (rv == M0_RANGE_ONE)
        m0_buf_printf(&h->lines, "Content-Range: bytes %llu-%llu/%llu\r\n", (unsigned long long)rg.first,
                      (unsigned long long)rg.last, (unsigned long long)size);
    m0_body_reset(b);
    m0_body_commit(b, a->out, h, br, (int64_t)len, 0);
    a->o->status = h->status;
    if (br->head || len == 0) {
        close(fd);
        return;
    }
    a->o->body_bytes = len;
    if (inline_body) {
        m0_body_emit(b, a->out, small, (size_t)len);
        close(fd);
        return;
    }
    b->sent = len;                    /* the file range is the body */
    a->o->fd = fd;
    a->o->off = off;
    a->o->len = len;
}

void m0_static_respond(const struct m0_static *st, const struct m0_req *r, size_t skip,
                       const struct m0_body_req *br, struct m0_head *h, struct m0_body *b, struct m0_buf *out,
                       struct m0_static_out *o)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    const struct answer a = {.h = h, .b = b, .out = out, .br = br, .o = o};
    int get = r->method_len == 3 && memcmp(r->method, "GET", 3) == 0;
    if (!get && !(r->flags & M0_REQ_HEAD)) {
        refuse(&a, 405, "Allow: GET, HEAD\r\n", "static files answer GET and HEAD");
        return;
    }
    char rel[M0_STATIC_PATH_MAX + sizeof "index.html" + 4];
    size_t rlen;
    struct stat sb;
    int fd = find_file(st, r, skip, &a, rel, &rlen, &sb);
    if (fd == -1)
        return;
    const char *type = m0_mime_type(rel, rlen);
    const char *encoding = precompressed(st, r, rel, rlen, &fd, &sb);
    answer_file(st, r, &a, fd, &sb, type, encoding, get);
}

/* ======================================================== configuration */

int m0_static_check_config(const struct m0_config *cfg, char *err, size_t cap)
{
    for (unsigned i = 0; i < cfg->nmounts; i++) {
        const struct m0_mount *m = &cfg->mounts[i];
        if (m->kind != M0_MOUNT_STATIC)
            continue;
        int fd = open(m->spec, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd == -1) {
            snprintf(err, cap, "m0serve: error: --static %s=%s: %s", m->prefix_len ? m->prefix : "/", m->spec,
                     errno == ENOTDIR ? "not a directory" : strerror(errno));
            return M0_ERR;
        }
        close(fd);
    }
    return M0_OK;
}

int m0_static_add_targets(const struct m0_config *cfg)
{
    int any = 0;
    for (unsigned i = 0; i < cfg->nmounts; i++)
        any |= cfg->mounts[i].kind == M0_MOUNT_STATIC;
    if (!any)
        return M0_OK;
    if (m0_mime_load("/etc/mime.types") != M0_OK)
        m0_info("static files: /etc/mime.types not readable; using the built-in MIME types");
    enum m0_static_resolver resolver = m0_static_probe();
    for (unsigned i = 0; i < cfg->nmounts; i++) {
        const struct m0_mount *m = &cfg->mounts[i];
        if (m->kind != M0_MOUNT_STATIC)
            continue;
        char err[512];
        struct m0_static *st = m0_static_open(m->spec, cfg->static_max_age, cfg->static_index, resolver, err,
                                              sizeof err);
        if (st == NULL) {
            m0_error("--static %s: %s", m->prefix_len ? m->prefix : "/", err);
            return M0_ERR;
        }
        struct m0_target *t = m0_targets_next(&m0_targets, m->prefix, m->prefix_len, M0_TARGET_STATIC);
        if (t == NULL) {
            m0_static_close(st);
            m0_error("--static %s: the mount table is full", m->prefix);
            return M0_ERR;
        }
        t->spec = t->resolved = m->spec;
        t->files = st;
        m0_targets_commit(&m0_targets);
    }
    return M0_OK;
}
