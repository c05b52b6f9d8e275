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
#include "m0/response.h"
#include "m0/static.h"
#include "m0/target.h"

/* ============================================================ MIME types */

#define MIME_SLOTS 4096          /* open addressing; mime.types has ~1500 extensions */
#define MIME_EXT_MAX 16

struct mime_slot {
    char ext[MIME_EXT_MAX];      /* lower case, NUL-terminated; "" = free */
    const char *type;            /* Content-Type, charset included */
};

static struct mime_slot *mime_tab;     /* NULL until m0_mime_load succeeds */
static char *mime_text;                /* the table's strings */

/* Used when the file is absent or lacks an extension. */
static const struct {
    const char *ext, *type;
} mime_builtin[] = {
    {"html", "text/html; charset=utf-8"}, {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"}, {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"}, {"json", "application/json"},
    {"map", "application/json"}, {"txt", "text/plain; charset=utf-8"},
    {"xml", "application/xml"}, {"svg", "image/svg+xml"}, {"png", "image/png"},
    {"jpg", "image/jpeg"}, {"jpeg", "image/jpeg"}, {"gif", "image/gif"}, {"webp", "image/webp"},
    {"avif", "image/avif"}, {"ico", "image/vnd.microsoft.icon"}, {"wasm", "application/wasm"},
    {"woff", "font/woff"}, {"woff2", "font/woff2"}, {"ttf", "font/ttf"}, {"otf", "font/otf"},
    {"pdf", "application/pdf"}, {"webmanifest", "application/manifest+json"},
    {"gz", "application/gzip"}, {"zip", "application/zip"}, {"mp4", "video/mp4"},
    {"webm", "video/webm"}, {"mp3", "audio/mpeg"}, {"csv", "text/csv; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
};

static uint32_t mime_hash(const char *ext)
{
    uint32_t h = 2166136261u;             /* FNV-1a */
    for (; *ext; ext++) {
        h ^= (unsigned char)*ext;
        h *= 16777619u;
    }
    return h;
}

/* Lower-case the extension of name (n bytes) into ext; 0 when it has none
 * or it is too long. */
static int extension_of(const char *name, size_t n, char ext[MIME_EXT_MAX])
{
    size_t i = n;
    while (i > 0 && name[i - 1] != '.' && name[i - 1] != '/')
        i--;
    if (i == 0 || name[i - 1] != '.' || n - i == 0 || n - i >= MIME_EXT_MAX)
        return 0;
    for (size_t k = 0; k < n - i; k++)
        ext[k] = (char)tolower((unsigned char)name[i + k]);
    ext[n - i] = '\0';
    return 1;
}

/* Text is UTF-8 here unless the file says otherwise: the charset tells a
 * browser not to guess (WHATWG encoding sniffing) for text and scripts. */
static int wants_charset(const char *type, size_t n)
{
    return (n > 5 && strncasecmp(type, "text/", 5) == 0) ||
           (n == 22 && strncasecmp(type, "application/javascript", 22) == 0);
}

int m0_mime_load(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return M0_ERR;
    struct mime_slot *tab = calloc(MIME_SLOTS, sizeof *tab);
    size_t cap = 64 * 1024, used = 0;
    char *text = malloc(cap);
    if (tab == NULL || text == NULL) {
        free(tab);
        free(text);
        fclose(f);
        return M0_ERR;
    }
    char line[1024];
    unsigned count = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char *save = NULL, *type = strtok_r(line, " \t\r\n", &save);
        if (type == NULL || type[0] == '#')
            continue;
        size_t tl = strlen(type);
        size_t need = tl + sizeof "; charset=utf-8";
        const char *stored = NULL;
        char *ext;
        while ((ext = strtok_r(NULL, " \t\r\n", &save)) != NULL) {
            if (ext[0] == '#')
                break;
            char key[MIME_EXT_MAX];
            size_t el = strlen(ext);
            if (el == 0 || el >= MIME_EXT_MAX || count >= MIME_SLOTS / 2)
                continue;
            for (size_t k = 0; k <= el; k++)
                key[k] = (char)tolower((unsigned char)ext[k]);
            if (stored == NULL) {
                if (used + need > cap)
                    continue;     /* the arena is full: the rest keep the built-in types */
                stored = text + used;
                used += (size_t)snprintf(text + used, cap - used, "%s%s", type,
                                         wants_charset(type, tl) ? "; charset=utf-8" : "") + 1;
            }
            uint32_t h = mime_hash(key) & (MIME_SLOTS - 1);
            while (tab[h].ext[0] != '\0' && strcmp(tab[h].ext, key) != 0)
                h = (h + 1) & (MIME_SLOTS - 1);
            if (tab[h].ext[0] == '\0') {
                memcpy(tab[h].ext, key, el + 1);
                count++;
            }
            tab[h].type = stored;     /* a later line wins, as in most readers */
        }
    }
    fclose(f);
    free(mime_tab);
    free(mime_text);
    mime_tab = tab;
    mime_text = text;
    return M0_OK;
}

const char *m0_mime_type(const char *name, size_t n)
{
    char ext[MIME_EXT_MAX];
    if (!extension_of(name, n, ext))
        return "application/octet-stream";
    if (mime_tab != NULL) {
        uint32_t h = mime_hash(ext) & (MIME_SLOTS - 1);
        while (mime_tab[h].ext[0] != '\0') {
            if (strcmp(mime_tab[h].ext, ext) == 0)
                return mime_tab[h].type;
            h = (h + 1) & (MIME_SLOTS - 1);
        }
    }
    for (size_t i = 0; i < M0_ARRAY_LEN(mime_builtin); i++) {
        if (strcmp(mime_builtin[i].ext, ext) == 0)
            return mime_builtin[i].type;
    }
    return "application/octet-stream";
}

/* ====================================================== the pure rules */

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (unsigned char)tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int m0_static_path(const char *raw, size_t n, char *out, size_t cap, size_t *outlen, int *dir_slash,
                   const char **why)
{
    size_t o = 0;
    *dir_slash = 0;
    *outlen = 0;
    *why = NULL;
    if (cap == 0)
        return 404;
    out[0] = '\0';
    if (n == 0)
        return 0;                 /* the prefix itself: the root directory */
    if (raw[0] != '/') {
        *why = "not an absolute path";
        return 404;
    }
    for (size_t i = 1; i <= n;) {
        size_t seg = o, j = i;
        while (j < n && raw[j] != '/') {
            unsigned char ch = (unsigned char)raw[j];
            if (ch == '%') {
                int hi = j + 2 < n ? hexval((unsigned char)raw[j + 1]) : -1;
                int lo = j + 2 < n ? hexval((unsigned char)raw[j + 2]) : -1;
                if (hi < 0 || lo < 0) {
                    *why = "malformed percent-encoding";
                    return 400;
                }
                ch = (unsigned char)(hi * 16 + lo);
                if (ch == '/' || ch == '\\') {
                    *why = "encoded slash or backslash";
                    return 404;
                }
                j += 3;
            } else {
                if (ch == '\\') {
                    *why = "backslash";
                    return 404;
                }
                j++;
            }
            if (ch == '\0') {
                *why = "NUL byte";
                return 400;
            }
            if (ch < 0x20 || ch == 0x7f) {
                *why = "control byte";
                return 400;
            }
            if (o + 2 >= cap) {
                *why = "path too long";
                return 404;
            }
            out[o++] = (char)ch;
        }
        if (o == seg) {
            if (j == n) {         /* the path ends with '/' */
                *dir_slash = 1;
                break;
            }
            *why = "empty segment";
            return 404;
        }
        if (out[seg] == '.') {
            /* ".", "..", and dotfiles (.git, .env): never a public file. */
            *why = "dot-segment or dotfile";
            return 404;
        }
        if (j < n)
            out[o++] = '/';
        i = j + 1;
    }
    out[o] = '\0';
    *outlen = o;
    return 0;
}

static const char *skip_ows(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

/* Up to 19 decimal digits into *v; the digits consumed (0: none or too many). */
static size_t parse_u64(const char *p, const char *end, uint64_t *v)
{
    size_t k = 0;
    uint64_t x = 0;
    while (p + k < end && p[k] >= '0' && p[k] <= '9') {
        if (k == 19)
            return 0;
        x = x * 10 + (uint64_t)(p[k] - '0');
        k++;
    }
    *v = x;
    return k;
}

enum m0_range_verdict m0_range_parse(const char *v, size_t n, uint64_t len, struct m0_range *r)
{
    const char *p = v, *end = v + n;
    p = skip_ows(p, end);
    if (end - p < 6 || strncasecmp(p, "bytes=", 6) != 0)
        return M0_RANGE_WHOLE;            /* another unit: ignored (RFC 9110 §14.2) */
    p += 6;
    const char *spec = NULL, *spec_end = NULL;
    unsigned specs = 0;
    while (p < end) {                     /* 1#range-spec: empty elements allowed */
        const char *e = memchr(p, ',', (size_t)(end - p));
        if (e == NULL)
            e = end;
        const char *a = skip_ows(p, e), *b = e;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (a < b) {
            specs++;
            spec = a;
            spec_end = b;
        }
        p = e + (e < end);
    }
    if (specs != 1)
        return M0_RANGE_WHOLE;            /* none, or several: the whole file (static.h) */
    uint64_t first, last;
    size_t k;
    if (*spec == '-') {                   /* suffix-range */
        k = parse_u64(spec + 1, spec_end, &last);
        if (k == 0 || spec + 1 + k != spec_end)
            return M0_RANGE_WHOLE;
        if (last == 0)
            return M0_RANGE_UNSATISFIABLE;
        if (len == 0)
            return M0_RANGE_WHOLE;
        r->first = last >= len ? 0 : len - last;
        r->last = len - 1;
        return M0_RANGE_ONE;
    }
    k = parse_u64(spec, spec_end, &first);
    if (k == 0 || spec + k == spec_end || spec[k] != '-')
        return M0_RANGE_WHOLE;
    const char *q = spec + k + 1;
    if (q == spec_end) {
        last = UINT64_MAX;
    } else {
        k = parse_u64(q, spec_end, &last);
        if (k == 0 || q + k != spec_end || last < first)
            return M0_RANGE_WHOLE;        /* invalid: ignored */
    }
    if (first >= len)
        return M0_RANGE_UNSATISFIABLE;
    r->first = first;
    r->last = last >= len ? len - 1 : last;
    return M0_RANGE_ONE;
}

size_t m0_static_etag(char *out, size_t cap, const struct stat *st)
{
    unsigned long long ns = (unsigned long long)st->st_mtim.tv_sec * 1000000000ull +
                            (unsigned long long)st->st_mtim.tv_nsec;
    int n = snprintf(out, cap, "\"%llx-%llx-%llx\"", (unsigned long long)st->st_ino,
                     (unsigned long long)st->st_size, ns);
    return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}

int m0_etag_match(const char *v, size_t n, const char *etag, size_t elen, int weak)
{
    const char *p = v, *end = v + n;
    p = skip_ows(p, end);
    const char *b = end;
    while (b > p && (b[-1] == ' ' || b[-1] == '\t'))
        b--;
    if (b - p == 1 && *p == '*')
        return 1;                          /* the file exists */
    int etag_weak = elen >= 2 && etag[0] == 'W' && etag[1] == '/';
    const char *eo = etag_weak ? etag + 2 : etag;
    size_t eol = etag_weak ? elen - 2 : elen;
    while (p < end) {
        p = skip_ows(p, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p == end)
            break;
        int w = 0;
        if (end - p >= 2 && p[0] == 'W' && p[1] == '/') {
            w = 1;
            p += 2;
        }
        if (p == end || *p != '"')
            return 0;                      /* malformed: matches nothing */
        const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (q == NULL)
            return 0;
        size_t tl = (size_t)(q + 1 - p);
        if (tl == eol && memcmp(p, eo, tl) == 0 && (weak || (!w && !etag_weak)))
            return 1;
        p = skip_ows(q + 1, end);
        if (p < end && *p != ',')
            return 0;
    }
    return 0;
}

static int month_of(const char *p)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    for (int i = 0; i < 12; i++) {
        if (memcmp(p, months + 3 * i, 3) == 0)
            return i;
    }
    return -1;
}

/* d digits at p into *v. */
static int digits(const char *p, int d, int *v)
{
    int x = 0;
    for (int i = 0; i < d; i++) {
        if (p[i] < '0' || p[i] > '9')
            return M0_ERR;
        x = x * 10 + (p[i] - '0');
    }
    *v = x;
    return M0_OK;
}

/* "HH:MM:SS" at p. */
static int clock_of(const char *p, struct tm *tm)
{
    if (p[2] != ':' || p[5] != ':')
        return M0_ERR;
    if (digits(p, 2, &tm->tm_hour) || digits(p + 3, 2, &tm->tm_min) || digits(p + 6, 2, &tm->tm_sec))
        return M0_ERR;
    return tm->tm_hour > 23 || tm->tm_min > 59 || tm->tm_sec > 60 ? M0_ERR : M0_OK;
}

int m0_http_date_parse(const char *v, size_t n, time_t *out)
{
    char s[64];
    while (n > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n >= sizeof s || n < 24)
        return M0_ERR;
    memcpy(s, v, n);
    s[n] = '\0';
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *comma = strchr(s, ',');
    if (n == 29 && comma == s + 3) {
        /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
        if (s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' || strcmp(s + 25, " GMT") != 0)
            return M0_ERR;
        if (digits(s + 5, 2, &tm.tm_mday) || (tm.tm_mon = month_of(s + 8)) < 0 ||
            digits(s + 12, 4, &tm.tm_year) || clock_of(s + 17, &tm))
            return M0_ERR;
        tm.tm_year -= 1900;
    } else if (comma != NULL && comma > s + 3) {
        /* RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" */
        const char *d = comma + 1;
        if (strlen(d) != 23 || d[0] != ' ' || d[3] != '-' || d[7] != '-' || d[10] != ' ' ||
            strcmp(d + 19, " GMT") != 0)
            return M0_ERR;
        int yy;
        if (digits(d + 1, 2, &tm.tm_mday) || (tm.tm_mon = month_of(d + 4)) < 0 || digits(d + 8, 2, &yy) ||
            clock_of(d + 11, &tm))
            return M0_ERR;
        tm.tm_year = yy < 70 ? yy + 100 : yy;      /* §5.6.7: the nearest century, simplified */
    } else if (n == 24 && comma == NULL) {
        /* asctime: "Sun Nov  6 08:49:37 1994" */
        if (s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ')
            return M0_ERR;
        if ((tm.tm_mon = month_of(s + 4)) < 0)
            return M0_ERR;
        if (s[8] == ' ') {
            if (digits(s + 9, 1, &tm.tm_mday))
                return M0_ERR;
        } else if (digits(s + 8, 2, &tm.tm_mday)) {
            return M0_ERR;
        }
        if (clock_of(s + 11, &tm) || digits(s + 20, 4, &tm.tm_year))
            return M0_ERR;
        tm.tm_year -= 1900;
    } else {
        return M0_ERR;
    }
    if (tm.tm_mday < 1 || tm.tm_mday > 31)
        return M0_ERR;
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return M0_ERR;
    *out = t;
    return M0_OK;
}

void m0_http_date_format(time_t t, char *out, size_t cap)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char mons[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, cap, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday, mons[tm.tm_mon],
             tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* The first field line called name, or NULL; *count receives how many. */
static const struct m0_hdr *header(const struct m0_req *r, const char *name, unsigned *count)
{
    size_t nl = strlen(name);
    const struct m0_hdr *first = NULL;
    unsigned k = 0;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (h->name_len == nl && strncasecmp(h->name, name, nl) == 0) {
            if (first == NULL)
                first = h;
            k++;
        }
    }
    if (count != NULL)
        *count = k;
    return first;
}

/* Any field line called name whose list matches etag. */
static int any_etag_match(const struct m0_req *r, const char *name, const char *etag, size_t elen, int weak)
{
    size_t nl = strlen(name);
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (h->name_len == nl && strncasecmp(h->name, name, nl) == 0 &&
            m0_etag_match(h->value, h->value_len, etag, elen, weak))
            return 1;
    }
    return 0;
}

enum m0_cond_verdict m0_static_conditions(const struct m0_req *r, const char *etag, size_t elen, time_t mtime,
                                          int *use_range)
{
    unsigned k;
    time_t when;
    const struct m0_hdr *h;
    /* §13.2.2 steps 1-2: the state the client expects. */
    if (header(r, "if-match", &k) != NULL) {
        if (!any_etag_match(r, "if-match", etag, elen, 0))
            return M0_COND_FAILED;
    } else if ((h = header(r, "if-unmodified-since", &k)) != NULL && k == 1 &&
               m0_http_date_parse(h->value, h->value_len, &when) == M0_OK && mtime > when) {
        return M0_COND_FAILED;
    }
    /* Steps 3-4: the client's cached copy is still good. */
    if (header(r, "if-none-match", &k) != NULL) {
        if (any_etag_match(r, "if-none-match", etag, elen, 1))
            return M0_COND_NOT_MODIFIED;
    } else if ((h = header(r, "if-modified-since", &k)) != NULL && k == 1 &&
               m0_http_date_parse(h->value, h->value_len, &when) == M0_OK && mtime <= when) {
        return M0_COND_NOT_MODIFIED;
    }
    /* Step 5: a range of the representation the client has part of. */
    if ((h = header(r, "if-range", &k)) != NULL) {
        const char *p = skip_ows(h->value, h->value + h->value_len);
        size_t n = (size_t)(h->value + h->value_len - p);
        int same;
        if (k != 1)
            same = 0;
        else if (n > 0 && (*p == '"' || *p == 'W'))
            same = m0_etag_match(p, n, etag, elen, 0);
        else
            same = m0_http_date_parse(p, n, &when) == M0_OK && when == mtime;
        if (!same)
            *use_range = 0;
    }
    return M0_COND_PROCEED;
}

/* One Accept-Encoding element (a..b): its coding and q in thousandths;
 * M0_ERR when malformed (the element is then ignored). */
static int coding_element(const char *a, const char *b, const char **name, size_t *nlen, int *q)
{
    const char *semi = memchr(a, ';', (size_t)(b - a));
    const char *ne = semi ? semi : b;
    while (ne > a && (ne[-1] == ' ' || ne[-1] == '\t'))
        ne--;
    *name = a;
    *nlen = (size_t)(ne - a);
    *q = 1000;
    if (*nlen == 0)
        return M0_ERR;
    while (semi != NULL) {
        const char *p = skip_ows(semi + 1, b);
        if (p >= b)
            break;                 /* "gzip;" : an empty parameter */
        const char *next = memchr(p, ';', (size_t)(b - p));
        const char *pe = next ? next : b;
        while (pe > p && (pe[-1] == ' ' || pe[-1] == '\t'))
            pe--;
        if (pe - p >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            /* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) */
            const char *d = p + 2;
            if (d == pe || (*d != '0' && *d != '1'))
                return M0_ERR;
            int val = (*d - '0') * 1000, scale = 100;
            d++;
            if (d < pe) {
                if (*d != '.')
                    return M0_ERR;
                for (d++; d < pe; d++, scale /= 10) {
                    if (scale == 0 || *d < '0' || *d > '9')
                        return M0_ERR;
                    val += (*d - '0') * scale;
                }
            }
            if (val > 1000)
                return M0_ERR;
            *q = val;
        }
        semi = next;
    }
    return M0_OK;
}

size_t m0_accept_encoding(const struct m0_req *r, enum m0_coding order[3])
{
    /* q per coding in thousandths; -1: not named. */
    int q_br = -1, q_gzip = -1, q_id = -1, q_star = -1;
    int seen = 0;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        if (h->name_len != 15 || strncasecmp(h->name, "accept-encoding", 15) != 0)
            continue;
        seen = 1;
        const char *p = h->value, *end = h->value + h->value_len;
        while (p < end) {
            const char *e = memchr(p, ',', (size_t)(end - p));
            if (e == NULL)
                e = end;
            const char *a = skip_ows(p, e), *b = e;
            while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
                b--;
            const char *name;
            size_t nl;
            int q;
            if (a < b && coding_element(a, b, &name, &nl, &q) == M0_OK) {
                if (nl == 2 && strncasecmp(name, "br", 2) == 0)
                    q_br = q;
                else if ((nl == 4 && strncasecmp(name, "gzip", 4) == 0) ||
                         (nl == 6 && strncasecmp(name, "x-gzip", 6) == 0))
                    q_gzip = q;
                else if (nl == 8 && strncasecmp(name, "identity", 8) == 0)
                    q_id = q;
                else if (nl == 1 && name[0] == '*')
                    q_star = q;
            }
            p = e + (e < end);
        }
    }
    size_t k = 0;
    if (!seen) {
        order[k++] = M0_CODING_IDENTITY;
        return k;
    }
    /* Unnamed codings take "*"'s weight; identity is acceptable unless
     * excluded by name or by "*;q=0" (RFC 9110 §12.5.3). Left unnamed, it
     * is acceptable at the least preference: "br;q=0.5, gzip;q=0.8" ranks
     * the codings the client wants, it does not prefer raw bytes to them. */
    if (q_br < 0)
        q_br = q_star >= 0 ? q_star : 0;
    if (q_gzip < 0)
        q_gzip = q_star >= 0 ? q_star : 0;
    if (q_id < 0)
        q_id = q_star >= 0 ? q_star : 1;
    struct {
        enum m0_coding c;
        int q;
    } cand[3] = {{M0_CODING_BR, q_br}, {M0_CODING_GZIP, q_gzip}, {M0_CODING_IDENTITY, q_id}};
    /* A stable sort by q, descending: ties keep br, gzip, identity. */
    for (int i = 1; i < 3; i++) {
        for (int j = i; j > 0 && cand[j].q > cand[j - 1].q; j--) {
            __typeof__(cand[0]) t = cand[j];
            cand[j] = cand[j - 1];
            cand[j - 1] = t;
        }
    }
    int have_identity = 0;
    for (int i = 0; i < 3; i++) {
        if (cand[i].q > 0) {
            order[k++] = cand[i].c;
            have_identity |= cand[i].c == M0_CODING_IDENTITY;
        }
    }
    if (!have_identity)
        order[k++] = M0_CODING_IDENTITY;   /* last resort: never 406 */
    return k;
}

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

void m0_static_respond(const struct m0_static *st, const struct m0_req *r, size_t skip,
                       const struct m0_body_req *br, struct m0_head *h, struct m0_body *b, struct m0_buf *out,
                       struct m0_static_out *o)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    int get = r->method_len == 3 && memcmp(r->method, "GET", 3) == 0;
    if (!get && !(r->flags & M0_REQ_HEAD)) {
        plain(o, h, b, out, br, 405, "Allow: GET, HEAD\r\n", "static files answer GET and HEAD");
        return;
    }
    char rel[M0_STATIC_PATH_MAX + sizeof "index.html" + 4];
    size_t rlen;
    int dir_slash;
    const char *why;
    int status = m0_static_path(r->path + skip, r->path_len - skip, rel, M0_STATIC_PATH_MAX, &rlen, &dir_slash, &why);
    if (status != 0) {
        m0_debug("static %s: %d (%s)", r->path, status, why);
        plain(o, h, b, out, br, status, NULL, status == 404 ? "no such file" : why);
        return;
    }
    int fd = open_beneath(st, rel);
    if (fd == -1) {
        status = open_status(errno);
        plain(o, h, b, out, br, status, NULL, status == 404 ? "no such file" : strerror(errno));
        return;
    }
    struct stat sb;
    if (fstat(fd, &sb) == -1) {
        close(fd);
        plain(o, h, b, out, br, 404, NULL, "no such file");
        return;
    }
    if (S_ISDIR(sb.st_mode)) {
        close(fd);
        if (!st->index) {
            plain(o, h, b, out, br, 404, NULL, "no such file");
            return;
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
            plain(o, h, b, out, br, 301, loc.data, "see the directory's address with a trailing /");
            m0_buf_free(&loc);
            return;
        }
        memcpy(rel + rlen, "index.html", sizeof "index.html");
        rlen += sizeof "index.html" - 1;
        if ((fd = open_beneath(st, rel)) == -1 || fstat(fd, &sb) == -1) {
            if (fd != -1)
                close(fd);
            plain(o, h, b, out, br, 404, NULL, "no such file");
            return;
        }
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        plain(o, h, b, out, br, 404, NULL, "no such file");
        return;
    }
    const char *type = m0_mime_type(rel, rlen);

    /* A precompressed sibling the client prefers. Its age is not compared
     * with the file's: a checkout gives both arbitrary mtimes; keeping them
     * in step is the build step's job (as with nginx's gzip_static). */
    enum m0_coding order[3];
    size_t ncod = m0_accept_encoding(r, order);
    const char *encoding = NULL;
    for (size_t i = 0; i < ncod && order[i] != M0_CODING_IDENTITY; i++) {
        const char *ext = order[i] == M0_CODING_BR ? ".br" : ".gz";
        memcpy(rel + rlen, ext, 4);
        int sfd = open_beneath(st, rel);
        rel[rlen] = '\0';
        struct stat ss;
        if (sfd == -1)
            continue;
        if (fstat(sfd, &ss) == 0 && S_ISREG(ss.st_mode)) {
            close(fd);
            fd = sfd;
            sb = ss;
            encoding = order[i] == M0_CODING_BR ? "br" : "gzip";
            break;
        }
        close(sfd);
    }

    char etag[64];
    size_t elen = m0_static_etag(etag, sizeof etag, &sb);
    time_t mtime = sb.st_mtim.tv_sec;
    uint64_t size = (uint64_t)sb.st_size;
    int use_range = get;              /* Range is defined for GET only (RFC 9110 §14.2) */
    switch (m0_static_conditions(r, etag, elen, mtime, &use_range)) {
    case M0_COND_FAILED:
        close(fd);
        plain(o, h, b, out, br, 412, NULL, "the file is not in the state the request expects");
        return;
    case M0_COND_NOT_MODIFIED:
        close(fd);
        m0_head_reset(h);
        m0_head_status(h, 304, NULL, 0);
        file_fields(st, h, etag, mtime);
        m0_body_reset(b);
        m0_body_commit(b, out, h, br, -1, 0);
        o->status = 304;
        return;
    case M0_COND_PROCEED:
        break;
    }
    struct m0_range rg = {0, size ? size - 1 : 0};
    enum m0_range_verdict rv = M0_RANGE_WHOLE;
    unsigned nrange = 0;
    const struct m0_hdr *rh = use_range ? header(r, "range", &nrange) : NULL;
    if (rh != NULL && nrange == 1)
        rv = m0_range_parse(rh->value, rh->value_len, size, &rg);
    if (rv == M0_RANGE_UNSATISFIABLE) {
        close(fd);
        char extra[80];
        snprintf(extra, sizeof extra, "Content-Range: bytes */%llu\r\n", (unsigned long long)size);
        plain(o, h, b, out, br, 416, extra, "the range is outside the file");
        return;
    }
    uint64_t len = rv == M0_RANGE_ONE ? rg.last - rg.first + 1 : size;
    off_t off = rv == M0_RANGE_ONE ? (off_t)rg.first : 0;

    /* Small bodies are read now: one send for head and body. */
    char small[M0_STATIC_INLINE];
    int inline_body = !br->head && len > 0 && len <= sizeof small;
    if (inline_body) {
        size_t got = 0;
        while (got < len) {
            ssize_t n = pread(fd, small + got, (size_t)len - got, off + (off_t)got);
            if (n == -1 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        if (got < len) {
            close(fd);
            plain(o, h, b, out, br, 503, "Retry-After: 1\r\n", "the file changed while it was read");
            return;
        }
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
    m0_body_commit(b, out, h, br, (int64_t)len, 0);
    o->status = h->status;
    if (br->head || len == 0) {
        close(fd);
        return;
    }
    o->body_bytes = len;
    if (inline_body) {
        m0_body_emit(b, out, small, (size_t)len);
        close(fd);
        return;
    }
    b->sent = len;                    /* the file range is the body */
    o->fd = fd;
    o->off = off;
    o->len = len;
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
