/*
 * buf.h — byte buffers and the per-request bump arena.
 *
 * A struct m0_buf is a growable byte array with a read cursor. Its states:
 *   unallocated  data == NULL, len == off == cap == 0 (the all-zero struct);
 *   allocated    data != NULL, off <= len <= cap; bytes [off, len) are unread.
 * Allocation failure aborts the process (m0_xmalloc): every client-driven
 * size reaching these functions is bounded by a configured limit first.
 */
#ifndef M0_BUF_H
#define M0_BUF_H

#include "m0/types.h"

struct m0_buf {
    char  *data;
    size_t off;     /* read cursor: bytes before it are consumed */
    size_t len;     /* bytes written */
    size_t cap;     /* bytes allocated */
};

/* Allocate n bytes or abort with a log line. Never returns NULL. */
void *m0_xmalloc(size_t n);
/* The same, zeroed. */
void *m0_xcalloc(size_t n);
void *m0_xrealloc(void *p, size_t n);
char *m0_xstrndup(const char *s, size_t n);

/* Ensure room for n more bytes after len; returns a pointer to data + len. */
char *m0_buf_reserve(struct m0_buf *b, size_t n);
/* Append n bytes. */
void m0_buf_append(struct m0_buf *b, const void *p, size_t n);
/* Append a NUL-terminated string (without the NUL). */
void m0_buf_puts(struct m0_buf *b, const char *s);
/* Append printf-formatted text. */
void m0_buf_printf(struct m0_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append v in decimal (what "%llu" prints, without printf's cost: a
 * response head's status and Content-Length, per request). */
void m0_buf_put_u64(struct m0_buf *b, uint64_t v);
/* v in decimal into out (at least 21 bytes), NUL-terminated; its length. */
size_t m0_u64_dec(char *out, uint64_t v);
/* Its inverse: decimal digits p[0..n) (1..20 of them, nothing else: no
 * sign, no space) → *out. M0_OK, or M0_ERR (empty, not a digit, or above
 * UINT64_MAX). */
int m0_u64_parse(const char *p, size_t n, uint64_t *out);

/* Append s[0..n) as a JSON string (RFC 8259 §7): quotes around, '"' and '\\'
 * escaped, control bytes as \u00XX, other bytes as they are (the caller's
 * text is UTF-8 or ASCII). */
void m0_buf_json_str(struct m0_buf *b, const char *s, size_t n);
/* Unread bytes. */
static inline size_t m0_buf_unread(const struct m0_buf *b) { return b->len - b->off; }
/* Mark n unread bytes consumed; resets to empty when all are consumed. */
void m0_buf_consume(struct m0_buf *b, size_t n);
/* Move unread bytes to the front so the whole capacity is reusable. */
void m0_buf_compact(struct m0_buf *b);
/* Forget the contents, keep the allocation. */
static inline void m0_buf_reset(struct m0_buf *b) { b->off = b->len = 0; }
/* Release the allocation; the struct becomes unallocated. */
void m0_buf_free(struct m0_buf *b);

/*
 * Bump arena: request-lifetime strings (method, target, header spans).
 * m0_arena_reset() keeps the first block for the next request on the
 * connection; m0_arena_free() releases everything.
 */
struct m0_arena_block;
struct m0_arena {
    struct m0_arena_block *head;
    size_t used;    /* bytes handed out since the last reset */
};
/* n bytes, 8-aligned, valid until reset/free. Never NULL. */
void *m0_arena_alloc(struct m0_arena *a, size_t n);
/* Copy of s[0..n) plus a NUL terminator. */
char *m0_arena_strndup(struct m0_arena *a, const char *s, size_t n);
void m0_arena_reset(struct m0_arena *a);
void m0_arena_free(struct m0_arena *a);

/* Chunked transfer coding (RFC 9112 §7.1): append one chunk of n bytes
 * (n > 0) framed as "HEX\r\n...\r\n". */
void m0_buf_append_chunk(struct m0_buf *b, const void *p, size_t n);

#endif
