/*
 * static.h — static files served by the event loop without Python
 * (DESIGN capability 10: --static PREFIX=DIR).
 *
 * One struct m0_static per static mount and worker: the directory, opened
 * once at worker start as an O_PATH|O_DIRECTORY descriptor, and the policy
 * flags. A request is answered in three steps, all on the loop thread:
 *
 *   1. the path after the prefix is checked and percent-decoded once
 *      (m0_static_path): traversal, encoded slashes, NUL, backslashes and
 *      dot-segments are refused before any system call;
 *   2. the file is opened beneath the root: openat2(RESOLVE_BENEATH |
 *      RESOLVE_NO_MAGICLINKS) where the kernel has it (symlinks that stay
 *      inside the root are followed, any that leaves it is refused), else
 *      a component-by-component walk with openat(O_NOFOLLOW) (no symlink
 *      is followed at all);
 *   3. the response is decided (m0_static_respond): conditional requests
 *      (RFC 9110 §13), Range (§14), a precompressed sibling (§12.5.3),
 *      and the head is written through the body encoder (body.h); the body
 *      is a file range the connection sends with sendfile(2) under the
 *      normal write path, so a slow reader costs no memory. Files up to
 *      M0_STATIC_INLINE bytes are read into the head's buffer instead (one
 *      send for both, and a snapshot of the file at that instant).
 *
 * Where: the pure rules of steps 1 and 3 (path, ranges, validators,
 * conditions, Accept-Encoding) are src/http/static_rules.c, the Content-Type
 * table src/http/mime.c; opening and answering are src/http/static.c.
 *
 * Policy (documented in the README, "Static files"):
 *   - GET and HEAD only; anything else is 405 with Allow: GET, HEAD.
 *   - A directory is 404 unless index is on (--static-index): then
 *     DIR/index.html answers "DIR/", and "DIR" is redirected (301) to it.
 *   - Dotfiles (a segment starting with '.') are never served: .git, .env.
 *   - ETag: "<inode>-<size>-<mtime in ns>", in hex: a strong validator in
 *     practice (RFC 9110 §8.8.1): any write changes mtime, a replacement
 *     changes the inode; two writes of the same size within one mtime tick
 *     of the filesystem are the only change it can miss.
 *   - Last-Modified from mtime; If-Match / If-Unmodified-Since → 412,
 *     If-None-Match (weak comparison) / If-Modified-Since → 304, If-Range
 *     (strong comparison, or the exact Last-Modified date).
 *   - Range: one byte range → 206 with Content-Range; an unsatisfiable one
 *     → 416 with Content-Range: bytes * /LEN; several ranges → the whole
 *     file, 200 (RFC 9110 §14.2 lets a server ignore Range; multipart/
 *     byteranges costs more than it saves); a malformed one → ignored.
 *   - Precompressed siblings: FILE.br and FILE.gz are served for FILE when
 *     Accept-Encoding prefers them (q-values honoured; br before gzip at
 *     equal q) and they are regular files (regenerating them with FILE is
 *     the build step's job; their mtimes are not compared, a checkout sets
 *     them in any order); every answer carries Vary: Accept-Encoding.
 *   - Cache-Control: public, max-age=S with --static-max-age S; none else.
 *   - A file replaced (rename) while it is being sent: the response is the
 *     old file's bytes, whole — the open descriptor pins the old inode. A
 *     file truncated in place while being sent: the connection is closed
 *     short of its Content-Length (the client sees the truncation).
 *
 * The opens, fstat and small reads happen on the loop thread: a file that
 * is not in the page cache stalls the loop for one disk read, as nginx
 * does without aio. Static trees are small and hot; a cold multi-gigabyte
 * archive is better behind a proxy.
 *
 * Loop thread only, except the pure functions, which any thread may call.
 */
#ifndef M0_STATIC_H
#define M0_STATIC_H

#include <sys/stat.h>
#include <time.h>

#include "m0/types.h"
#include "m0/body.h"
#include "m0/buf.h"
#include "m0/http.h"

struct m0_config;

/* Files up to this size are copied into the response buffer (one send). */
#define M0_STATIC_INLINE (16 * 1024)

/* Longest decoded relative path handled (longer: 404). */
#define M0_STATIC_PATH_MAX 4096

/* How paths are opened beneath the root. */
enum m0_static_resolver {
    M0_RESOLVE_OPENAT2,   /* openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) */
    M0_RESOLVE_WALK,      /* openat(O_NOFOLLOW) component by component */
};

struct m0_static {
    int root_fd;                     /* O_PATH | O_DIRECTORY | O_CLOEXEC */
    const char *dir;                 /* as configured, for logs */
    long max_age;                    /* Cache-Control max-age in seconds; -1: none */
    int index;                       /* a directory serves its index.html */
    enum m0_static_resolver resolver;
};

/* The resolver this kernel allows: openat2 is probed once (it may be
 * missing, ENOSYS, or refused by a seccomp filter, EPERM); the walk
 * otherwise. M0_STATIC_RESOLVER=walk in the environment forces the walk
 * (tests use it to cover both). */
enum m0_static_resolver m0_static_probe(void);
const char *m0_static_resolver_name(enum m0_static_resolver r);

/* Open dir as a static root with the given policy. Returns a new struct
 * (free with m0_static_close), or NULL with one line in err. */
struct m0_static *m0_static_open(const char *dir, long max_age, int index, enum m0_static_resolver resolver,
                                 char *err, size_t cap);
void m0_static_close(struct m0_static *st);

/* Worker start: load the MIME table, open every --static mount of cfg and
 * add it to the target table (target.h). Returns M0_OK, or M0_ERR after
 * logging one line naming the mount. */
int m0_static_add_targets(const struct m0_config *cfg);

/* Master, before forking: every --static DIR must be a directory we can
 * open; M0_OK or M0_ERR with one line in err naming the flag. */
int m0_static_check_config(const struct m0_config *cfg, char *err, size_t cap);

/* ------------------------------------------------------------ MIME types */

/* ------------------------------------------------------- the pure rules */

/* A byte range (inclusive bounds). */
struct m0_range {
    uint64_t first, last;
};

enum m0_range_verdict {
    M0_RANGE_WHOLE,          /* no usable Range: send the whole representation (200) */
    M0_RANGE_ONE,            /* one satisfiable range: 206 */
    M0_RANGE_UNSATISFIABLE,  /* 416 */
};

/* The outcome of the preconditions (RFC 9110 §13.2.2), in its order. */
enum m0_cond_verdict {
    M0_COND_PROCEED,         /* answer normally (Range: see *use_range) */
    M0_COND_NOT_MODIFIED,    /* 304 (GET and HEAD) */
    M0_COND_FAILED,          /* 412 */
};

/* Content codings m0serve can serve precompressed. */
enum m0_coding { M0_CODING_IDENTITY, M0_CODING_GZIP, M0_CODING_BR };

/* ---------------------------------------------------------- the answer */

/* What the connection sends after the head m0_static_respond wrote. */
struct m0_static_out {
    int status;                /* for the access log */
    int fd;                    /* -1, or the file whose range follows the head (caller closes) */
    off_t off;
    uint64_t len;              /* file bytes to send */
    uint64_t body_bytes;       /* body bytes of the response (log) */
};

/*
 * Answer request r (its path after the mount's skip bytes of prefix) from
 * st: appends the complete head (and a small body) to out through h and b
 * (reset here), and leaves the file range, if any, in *o. br says how the
 * request frames the answer (keep-alive, HEAD, version). Never fails: a
 * problem becomes a 4xx/5xx answer.
 */
void m0_static_respond(const struct m0_static *st, const struct m0_req *r, size_t skip,
                       const struct m0_body_req *br, struct m0_head *h, struct m0_body *b, struct m0_buf *out,
                       struct m0_static_out *o);

/* A short text/plain answer generated in C (404 for an unmounted path,
 * 405, 416...): status, the optional header line extra (one or more
 * "Name: value\r\n"), and a one-line body naming reason. Keeps the
 * connection when br allows it. Returns the body's length. */
size_t m0_static_plain(struct m0_head *h, struct m0_body *b, struct m0_buf *out, const struct m0_body_req *br,
                       int status, const char *extra, const char *reason);

#include "m0/mime.h"

#include "m0/static_rules.h"

#endif
