/*
 * response.c — response head serialization and C-generated error pages.
 *
 * RFC 9112 §6.3 decides the framing: a response that has no content
 * (1xx, 204, 304, or to HEAD) carries none; otherwise Content-Length when
 * the size is known, chunked to an HTTP/1.1 client when it is not, and
 * close-delimited to an HTTP/1.0 client. Pure and thread-safe.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "m0/response.h"

void m0_resp_init(struct m0_resp *rs)
{
    memset(rs, 0, sizeof *rs);
    rs->file_fd = -1;
}

void m0_resp_reset(struct m0_resp *rs)
{
    struct m0_buf out = rs->out;
    if (rs->file_fd != -1)
        close(rs->file_fd);
    m0_buf_reset(&out);
    if (out.cap > 256 * 1024)   /* a big response's buffer is not kept idle */
        m0_buf_free(&out);
    memset(rs, 0, sizeof *rs);
    rs->out = out;
    rs->file_fd = -1;
}

void m0_resp_free(struct m0_resp *rs)
{
    m0_resp_reset(rs);
    m0_buf_free(&rs->out);
}

/* The IANA HTTP Status Code Registry's permanent entries, with its phrases
 * (RFC 9110 §15 and the RFCs it cites: 102 RFC 2518, 103 RFC 8297, 207/423/
 * 424/507 RFC 4918, 208/508 RFC 5842, 226 RFC 3229, 425 RFC 8470, 428/429/
 * 431/511 RFC 6585, 451 RFC 7725, 506 RFC 2295, 510 RFC 2774). 306 and 418
 * are registered as "(Unused)", which is no phrase: they get none. */
const char *m0_status_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 102: return "Processing";
    case 103: return "Early Hints";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 207: return "Multi-Status";
    case 208: return "Already Reported";
    case 226: return "IM Used";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 305: return "Use Proxy";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 423: return "Locked";
    case 424: return "Failed Dependency";
    case 425: return "Too Early";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 506: return "Variant Also Negotiates";
    case 507: return "Insufficient Storage";
    case 508: return "Loop Detected";
    case 510: return "Not Extended";
    case 511: return "Network Authentication Required";
    /* RFC 9112 §4: the reason phrase may be empty; text for a code nobody
     * registered would be invented meaning. */
    default:  return "";
    }
}

int m0_status_bodiless(int status)
{
    return (status >= 100 && status < 200) || status == 204 || status == 304;
}

const char *m0_http_date(void)
{
    static __thread char cached[32];
    static __thread time_t cached_at = -1;
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char mons[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != cached_at) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        snprintf(cached, sizeof cached, "%s, %02d %s %04d %02d:%02d:%02d GMT",
                 days[tm.tm_wday], tm.tm_mday, mons[tm.tm_mon], tm.tm_year + 1900,
                 tm.tm_hour, tm.tm_min, tm.tm_sec);
        cached_at = ts.tv_sec;
    }
    return cached;
}

void m0_head_server_fields(struct m0_buf *b, int has_date, int has_server)
{
    if (!has_date) {
        m0_buf_puts(b, "Date: ");
        m0_buf_append(b, m0_http_date(), 29);
        m0_buf_puts(b, "\r\n");
    }
    if (!has_server)
        m0_buf_puts(b, "Server: m0serve\r\n");
}

/* The field every sized response carries, without printf (per request). */
static void content_length(struct m0_buf *b, uint64_t n)
{
    m0_buf_append(b, "Content-Length: ", 16);
    m0_buf_put_u64(b, n);
    m0_buf_append(b, "\r\n", 2);
}

enum m0_framing m0_head_finish(struct m0_buf *b, const struct m0_head_info *hi, int *keep)
{
    enum m0_framing f;
    int k = hi->keepalive && !hi->app_close;

    m0_head_server_fields(b, hi->has_date, hi->has_server);

    if (m0_status_bodiless(hi->status)) {
        f = M0_FRAME_NONE;
        /* A 304 or a HEAD may repeat the representation's length. */
        if (hi->content_length >= 0 && hi->status == 304)
            m0_buf_printf(b, "Content-Length: %lld\r\n", (long long)hi->content_length);
    } else if (hi->content_length >= 0) {
        f = hi->head ? M0_FRAME_NONE : M0_FRAME_LENGTH;
        content_length(b, (uint64_t)hi->content_length);
    } else if (hi->body_len > 0 || (hi->body_len == 0 && !hi->head)) {
        f = hi->head ? M0_FRAME_NONE : M0_FRAME_LENGTH;
        content_length(b, (uint64_t)hi->body_len);
    } else if (hi->head) {
        /* An empty body under HEAD says nothing about GET's length (Werkzeug
         * drops a streamed body for HEAD): RFC 9110 §8.6 forbids a
         * Content-Length that differs from GET's, so none is sent. */
        f = M0_FRAME_NONE;
    } else if (hi->http_minor >= 1) {
        f = M0_FRAME_CHUNKED;
        m0_buf_puts(b, "Transfer-Encoding: chunked\r\n");
    } else {
        f = M0_FRAME_CLOSE;
        k = 0;
    }

    if (!k)
        m0_buf_puts(b, "Connection: close\r\n");
    else if (hi->http_minor == 0)
        m0_buf_puts(b, "Connection: keep-alive\r\n");
    m0_buf_puts(b, "\r\n");
    *keep = k;
    return f;
}

size_t m0_error_response(struct m0_buf *b, int status, const char *reason, int close_conn, int head)
{
    char body[256];
    int n = snprintf(body, sizeof body, "%d %s: %s\n", status, m0_status_reason(status),
                     reason ? reason : m0_status_reason(status));
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof body)
        n = sizeof body - 1;
    m0_buf_printf(b, "HTTP/1.1 %d %s\r\nDate: ", status, m0_status_reason(status));
    m0_buf_append(b, m0_http_date(), 29);
    m0_buf_printf(b, "\r\nServer: m0serve\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %d\r\n%s\r\n",
                  n, close_conn ? "Connection: close\r\n" : "");
    if (head)
        return 0;
    m0_buf_append(b, body, (size_t)n);
    return (size_t)n;
}
