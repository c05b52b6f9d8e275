/*
 * static_rules.c — the pure rules a static file request is judged by (see
 * static.h): the request path made a relative file name, Range (RFC 9110
 * §14), ETag and HTTP-date validators and the conditional request headers
 * (§8.8, §13, §5.6.7), Accept-Encoding (§12.5.3). No system calls: the
 * unit tests drive them directly; static.c applies them to files.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "m0/percent.h"
#include "m0/response.h"
#include "m0/static.h"

/* ====================================================== the pure rules */

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
                int b = m0_percent_byte(raw, n, j);
                if (b < 0) {
                    *why = "malformed percent-encoding";
                    return 400;
                }
                ch = (unsigned char)b;
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
    if (m0_req_header_count(r, "if-match", &k) != NULL) {
        if (!any_etag_match(r, "if-match", etag, elen, 0))
            return M0_COND_FAILED;
    } else if ((h = m0_req_header_count(r, "if-unmodified-since", &k)) != NULL && k == 1 &&
               m0_http_date_parse(h->value, h->value_len, &when) == M0_OK && mtime > when) {
        return M0_COND_FAILED;
    }
    /* Steps 3-4: the client's cached copy is still good. */
    if (m0_req_header_count(r, "if-none-match", &k) != NULL) {
        if (any_etag_match(r, "if-none-match", etag, elen, 1))
            return M0_COND_NOT_MODIFIED;
    } else if ((h = m0_req_header_count(r, "if-modified-since", &k)) != NULL && k == 1 &&
               m0_http_date_parse(h->value, h->value_len, &when) == M0_OK && mtime <= when) {
        return M0_COND_NOT_MODIFIED;
    }
    /* Step 5: a range of the representation the client has part of. */
    if ((h = m0_req_header_count(r, "if-range", &k)) != NULL) {
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

