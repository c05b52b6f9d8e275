/*
 * bench/hold_client.c — hold N SSE streams or WebSockets with one epoll
 * loop, and measure the server holding them (bench/realtime.sh, bench/ws.sh).
 *
 * The Python clients (sse_hold.py, ws_clients.py) stop being the limit
 * somewhere past 10,000 sockets: this one keeps ~40 bytes per connection
 * and reads every socket with one recvmsg() per wakeup, so 100,000 held
 * connections cost the client a few MB and its read lag stays small.
 *
 * Phases, each optional after the first:
 *   1. open:   N connections (at most --batch connecting at once), spread
 *              over --sources 127.0.0.x source addresses (bind() with
 *              IP_BIND_ADDRESS_NO_PORT before connect(), so each address
 *              has its own 28k ephemeral ports toward the server); each
 *              must answer 200 text/event-stream (sse), 101 (ws), or just
 *              connect (raw: bench/fanout_floor.c);
 *   2. settle: --settle s reading; then the worker's VmRSS (--rss-pid) and,
 *              optionally, GET --health-path;
 *   3. events: --events E published through GET --publish-path?n=1&seq=K
 *              every --interval s (or, with --no-publish, sent by the server
 *              on its own: the floor program); every (event, stream)
 *              delivery is timed twice: client clock right after the
 *              recvmsg() that completed it, and the kernel's receive
 *              timestamp of the data (SO_TIMESTAMPNS), each minus the "t"
 *              (CLOCK_REALTIME seconds) the publisher put in the event.
 *              The worker's CPU (utime + stime of /proc/PID/stat) over the
 *              phase gives CPU per delivered event;
 *   4. churn:  --churn R for --churn-seconds D: R disconnects and R
 *              connects a second (a fraction --abrupt of the disconnects
 *              with SO_LINGER 0, i.e. an RST; the others a FIN, or a close
 *              frame then FIN for a WebSocket); then the worker's RSS and
 *              descriptor count again, against their values before churn;
 *   5. --hold-seconds s with everything open (to inspect the server), then
 *      close all and print one JSON object on stdout.
 *
 * The JSON keys of sse_hold.py are kept (opened, rss_*_kb, latency_ms,
 * kernel_latency_ms, deliveries, ...), so bench/realtime.sh summarizes both
 * the same way. Build: cc -O2 -o build/bench/hold_client bench/hold_client.c
 * (bench/realtime.sh does it; `make bench-tools` too).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

enum proto { P_SSE, P_WS, P_RAW };
enum cstate { ST_IDLE, ST_CONNECT, ST_HEAD, ST_OPEN, ST_CLOSED };
enum chunkst { CS_SIZE, CS_EXT, CS_DATA, CS_CRLF, CS_DONE };

struct conn {
    int fd;
    uint8_t st;          /* enum cstate */
    uint8_t chunked;     /* the body is chunked (a peer server; m0serve closes-delimits) */
    uint8_t cst;         /* enum chunkst */
    uint8_t churned;     /* opened by the churn phase */
    uint32_t got;        /* events (seq >= 0) received */
    uint32_t chunk_left;
    uint32_t blen, bcap; /* partial head / event / frame */
    char *buf;
};

struct pub {             /* one publish request in flight */
    int fd;
    int seq;
    double t_sent;
    size_t rlen;
    char resp[64];
};

#define MAX_PUBS 64
#define TAG_PUB (1ull << 62)

/* ------------------------------------------------------------ settings */

static struct {
    const char *host;
    int port;
    long n;
    const char *path;
    const char *header;  /* --header "Name: value": one more request field (sse/ws), e.g. Last-Event-ID */
    enum proto proto;
    int sources;
    int batch;
    int rss_pid;
    const char *health_path;
    const char *publish_path;
    int events;
    double interval;
    double settle;
    double drain;
    double wait;
    double churn;
    double churn_seconds;
    double abrupt;
    double hold_seconds;
    int kernel_ts;
    int verbose;
} A = {
    .host = "127.0.0.1", .path = "/events", .proto = P_SSE, .sources = 8, .batch = 512,
    .publish_path = "/publish", .events = 20, .interval = 0.2, .settle = 1.0, .drain = 10.0,
    .wait = 120.0, .abrupt = 0.5, .churn_seconds = 10.0, .kernel_ts = 1,
};

/* --------------------------------------------------------------- state */

static struct conn *C;
static int ep = -1;
static struct sockaddr_in dst;
static long nopen, noutstanding, ncomplete;   /* OPEN; CONNECT+HEAD; OPEN with every event */
static long next_open;                        /* initial open: next index */
static long *reopen;                          /* churn: indices to open again (a stack) */
static long nreopen;
static int want_events;                       /* a stream is complete at this many events */
static int phase_churn;

static float *lat, *klat;                     /* ms per delivery */
static size_t nlat, nklat, cap_lat, cap_klat;
static double *ev_first, *ev_last, *ev_t;     /* per seq: first/last client read, publish time */
static long *ev_count;

static struct pub pubs[MAX_PUBS];
static int pubs_sent;
static double *pub_rtt;
static int npub_rtt;
static char pub_errors[5][96];
static int npub_errors;

#define MAX_ERR_KINDS 32
static struct { char kind[40]; long n; } errs[MAX_ERR_KINDS];
static int nerrs;
static long lost_open;                        /* OPEN streams that ended */
static long churn_closed, churn_closed_abrupt, churn_opened, churn_failed;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL) {
        fprintf(stderr, "hold_client: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return q;
}

static void err_count(const char *kind)
{
    for (int i = 0; i < nerrs; i++) {
        if (strcmp(errs[i].kind, kind) == 0) {
            errs[i].n++;
            return;
        }
    }
    if (nerrs < MAX_ERR_KINDS) {
        snprintf(errs[nerrs].kind, sizeof errs[nerrs].kind, "%s", kind);
        errs[nerrs++].n = 1;
    }
}

static void err_errno(const char *what, int e)
{
    char k[40];
    const char *name = strerrorname_np(e);
    snprintf(k, sizeof k, "%s:%s", what, name ? name : "?");
    err_count(k);
}

/* ---------------------------------------------------------- /proc reads */

static long rss_kb(int pid)
{
    char path[64], line[256];
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtol(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

/* utime + stime of every thread of pid, in ms; -1 when unreadable. */
static double cpu_ms(int pid)
{
    char path[64], buf[1024];
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    /* After ") ": field 3 (state) ... utime is field 14, stime 15. */
    unsigned long long ut = 0, st = 0;
    int field = 2;
    for (char *tok = strtok(p + 1, " "); tok != NULL; tok = strtok(NULL, " ")) {
        field++;
        if (field == 14)
            ut = strtoull(tok, NULL, 10);
        else if (field == 15) {
            st = strtoull(tok, NULL, 10);
            break;
        }
    }
    return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

static long fd_count(int pid)
{
    char path[64];
    if (pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* --------------------------------------------------------- blocking GET */

/* GET target on host:port (Connection: close), bounded by timeout_s.
 * Returns the status (0: no answer); the body (malloc'd, NUL-terminated)
 * in *body when body != NULL. */
static int http_get(const char *target, double timeout_s, char **body)
{
    if (body)
        *body = NULL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd == -1)
        return 0;
    struct timeval tv = {.tv_sec = (time_t)timeout_s, .tv_usec = (suseconds_t)((timeout_s - (long)timeout_s) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&dst, sizeof dst) == -1) {
        close(fd);
        return 0;
    }
    char req[512];
    int rn = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n", target, A.host,
                      A.port);
    if (send(fd, req, (size_t)rn, MSG_NOSIGNAL) != rn) {
        close(fd);
        return 0;
    }
    size_t len = 0, cap = 4096;
    char *data = xrealloc(NULL, cap);
    for (;;) {
        if (cap - len < 2048)
            data = xrealloc(data, cap *= 2);
        ssize_t r = recv(fd, data + len, cap - len - 1, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    data[len] = '\0';
    int status = 0;
    if (len > 12 && strncmp(data, "HTTP/1.", 7) == 0)
        status = atoi(data + 9);
    if (body) {
        char *b = strstr(data, "\r\n\r\n");
        if (b != NULL) {
            b += 4;
            memmove(data, b, strlen(b) + 1);
            *body = data;
            return status;
        }
    }
    free(data);
    return status;
}

/* ------------------------------------------------------------- streams */

static void buf_append(struct conn *c, const char *p, size_t n)
{
    if (c->blen + n > c->bcap) {
        size_t want = c->bcap ? c->bcap : 256;
        while (want < c->blen + n)
            want *= 2;
        c->buf = xrealloc(c->buf, want);
        c->bcap = (uint32_t)want;
    }
    memcpy(c->buf + c->blen, p, n);
    c->blen += (uint32_t)n;
}

static void buf_consume(struct conn *c, size_t n)
{
    if (n >= c->blen) {
        /* Nothing partial left: give the buffer back, so 100,000 idle
         * streams keep none. */
        free(c->buf);
        c->buf = NULL;
        c->blen = c->bcap = 0;
        return;
    }
    memmove(c->buf, c->buf + n, c->blen - n);
    c->blen -= (uint32_t)n;
}

static void record(float **arr, size_t *n, size_t *cap, float v)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 1 << 16;
        *arr = xrealloc(*arr, *cap * sizeof **arr);
    }
    (*arr)[(*n)++] = v;
}

static int find_number(const char *p, size_t n, const char *key, double *out)
{
    size_t kl = strlen(key);
    const char *k = memmem(p, n, key, kl);
    if (k == NULL)
        return 0;
    const char *v = k + kl;
    char tmp[40];
    size_t i = 0;
    while (v < p + n && (*v == ' ' || *v == ':'))
        v++;
    while (v < p + n && i < sizeof tmp - 1 && (isdigit((unsigned char)*v) || *v == '.' || *v == '-' || *v == 'e' ||
                                               *v == 'E' || *v == '+'))
        tmp[i++] = *v++;
    tmp[i] = '\0';
    if (i == 0)
        return 0;
    *out = strtod(tmp, NULL);
    return 1;
}

/* One event's text (SSE event or WebSocket text frame): time it when it
 * carries a publish time "t" and a "seq" >= 0. */
static void on_event(struct conn *c, const char *p, size_t n, double t_read, double t_kernel)
{
    double t, seq = 0;
    if (!find_number(p, n, "\"t\"", &t))
        return;                     /* a comment, a heartbeat, ": hi" */
    find_number(p, n, "\"seq\"", &seq);
    if (seq < 0)
        return;                     /* the script's warm-up publish */
    record(&lat, &nlat, &cap_lat, (float)((t_read - t) * 1000.0));
    if (t_kernel > 0)
        record(&klat, &nklat, &cap_klat, (float)((t_kernel - t) * 1000.0));
    long s = (long)seq;
    if (s < A.events) {
        if (ev_count[s] == 0 || t_read < ev_first[s])
            ev_first[s] = t_read;
        if (t_read > ev_last[s])
            ev_last[s] = t_read;
        ev_t[s] = t;
        ev_count[s]++;
    }
    c->got++;
    if (want_events > 0 && c->got == (uint32_t)want_events)
        ncomplete++;
}

static void conn_close(long i, int abrupt)
{
    struct conn *c = &C[i];
    if (c->fd != -1) {
        if (abrupt) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        close(c->fd);           /* also leaves the epoll set */
    }
    if (c->st == ST_CONNECT || c->st == ST_HEAD)
        noutstanding--;
    if (c->st == ST_OPEN) {
        nopen--;
        if (want_events > 0 && c->got >= (uint32_t)want_events)
            ncomplete--;
    }
    free(c->buf);
    c->buf = NULL;
    c->blen = c->bcap = 0;
    c->fd = -1;
    c->st = ST_CLOSED;
}

/* The stream failed or ended (not by us). */
static void conn_fail(long i, const char *kind)
{
    struct conn *c = &C[i];
    if (c->st == ST_OPEN)
        lost_open++;
    if (c->churned && c->st != ST_OPEN)
        churn_failed++;
    err_count(kind);
    conn_close(i, 0);
}

static void send_ws_frame(int fd, int opcode, const char *payload, size_t n)
{
    unsigned char f[2 + 4 + 125];
    if (n > 125)
        n = 125;
    f[0] = (unsigned char)(0x80 | opcode);
    f[1] = (unsigned char)(0x80 | n);
    memset(f + 2, 0, 4);                /* mask key 0: the payload goes as is */
    memcpy(f + 6, payload, n);
    if (send(fd, f, 6 + n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* the close that follows, or the next read, notices */
    }
}

/* Body bytes of an open stream (de-chunked already): split into events. */
static void on_body(long i, const char *p, size_t n, double t_read, double t_kernel)
{
    struct conn *c = &C[i];
    if (A.proto == P_WS) {
        if (c->blen == 0) {
            /* Common case: whole frames in this read; parse in place. */
        }
        buf_append(c, p, n);
        size_t off = 0;
        while (c->blen - off >= 2) {
            const unsigned char *h = (const unsigned char *)c->buf + off;
            int op = h[0] & 0x0f;
            uint64_t len = h[1] & 0x7f;
            size_t hl = 2;
            if (len == 126) {
                if (c->blen - off < 4)
                    break;
                len = ((uint64_t)h[2] << 8) | h[3];
                hl = 4;
            } else if (len == 127) {
                if (c->blen - off < 10)
                    break;
                len = 0;
                for (int k = 0; k < 8; k++)
                    len = (len << 8) | h[2 + k];
                hl = 10;
            }
            if (h[1] & 0x80)
                hl += 4;                  /* a server never masks; tolerate it */
            if (c->blen - off < hl + len)
                break;
            const char *pl = c->buf + off + hl;
            if (op == 1 || op == 2 || op == 0)
                on_event(c, pl, (size_t)len, t_read, t_kernel);
            else if (op == 9)
                send_ws_frame(c->fd, 0xA, pl, (size_t)len);   /* ping → pong */
            else if (op == 8) {
                send_ws_frame(c->fd, 0x8, pl, len >= 2 ? 2 : 0);
                conn_fail(i, "ws_close_from_server");
                return;
            }
            off += hl + (size_t)len;
        }
        buf_consume(c, off);
        return;
    }
    /* SSE (and the floor's raw frames): events end at a blank line. */
    const char *data = p;
    size_t len = n;
    if (c->blen > 0) {
        buf_append(c, p, n);
        data = c->buf;
        len = c->blen;
    }
    size_t off = 0;
    for (;;) {
        const char *e = memmem(data + off, len - off, "\n\n", 2);
        if (e == NULL)
            break;
        on_event(c, data + off, (size_t)(e - (data + off)), t_read, t_kernel);
        off = (size_t)(e - data) + 2;
    }
    if (data == c->buf) {
        buf_consume(c, off);
    } else if (off < len) {
        buf_append(c, data + off, len - off);
    }
}

/* De-chunk (RFC 9112 §7.1) what arrived, then on_body. */
static void on_chunked(long i, const char *p, size_t n, double t_read, double t_kernel)
{
    struct conn *c = &C[i];
    char out[65536];
    size_t on = 0;
    for (size_t k = 0; k < n && c->st == ST_OPEN; k++) {
        char ch = p[k];
        switch (c->cst) {
        case CS_SIZE:
            if (isxdigit((unsigned char)ch))
                c->chunk_left = c->chunk_left * 16 + (uint32_t)(isdigit((unsigned char)ch) ? ch - '0' : (tolower(ch) - 'a' + 10));
            else if (ch == ';')
                c->cst = CS_EXT;
            else if (ch == '\n')
                c->cst = c->chunk_left ? CS_DATA : CS_DONE;
            break;
        case CS_EXT:
            if (ch == '\n')
                c->cst = c->chunk_left ? CS_DATA : CS_DONE;
            break;
        case CS_DATA: {
            size_t take = n - k < c->chunk_left ? n - k : c->chunk_left;
            if (take > sizeof out - on)
                take = sizeof out - on;
            memcpy(out + on, p + k, take);
            on += take;
            c->chunk_left -= (uint32_t)take;
            k += take - 1;
            if (c->chunk_left == 0)
                c->cst = CS_CRLF;
            if (on == sizeof out) {
                on_body(i, out, on, t_read, t_kernel);
                on = 0;
            }
            break;
        }
        case CS_CRLF:
            if (ch == '\n')
                c->cst = CS_SIZE;
            break;
        case CS_DONE:
            break;
        }
    }
    if (on > 0 && c->st == ST_OPEN)
        on_body(i, out, on, t_read, t_kernel);
}

static void became_open(long i)
{
    struct conn *c = &C[i];
    c->st = ST_OPEN;
    noutstanding--;
    nopen++;
    if (c->churned)
        churn_opened++;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = (uint64_t)i};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void on_head(long i, double t_read, double t_kernel)
{
    struct conn *c = &C[i];
    char *end = memmem(c->buf, c->blen, "\r\n\r\n", 4);
    if (end == NULL) {
        if (c->blen > 16384)
            conn_fail(i, "head_too_long");
        return;
    }
    size_t hl = (size_t)(end - c->buf) + 4;
    int status = c->blen > 12 && strncmp(c->buf, "HTTP/1.", 7) == 0 ? atoi(c->buf + 9) : 0;
    int want = A.proto == P_WS ? 101 : 200;
    if (status != want) {
        char k[40];
        snprintf(k, sizeof k, "status:%d", status);
        conn_fail(i, k);
        return;
    }
    /* Header names are case-insensitive (RFC 9110 §5.1). */
    for (size_t k = 0; k < hl; k++)
        c->buf[k] = (char)tolower((unsigned char)c->buf[k]);
    if (A.proto == P_SSE && memmem(c->buf, hl, "text/event-stream", 17) == NULL) {
        conn_fail(i, "not_event_stream");
        return;
    }
    c->chunked = memmem(c->buf, hl, "transfer-encoding: chunked", 26) != NULL;
    c->cst = CS_SIZE;
    c->chunk_left = 0;
    became_open(i);
    size_t rest = c->blen - hl;
    if (rest > 0) {
        char *tmp = xrealloc(NULL, rest);
        memcpy(tmp, c->buf + hl, rest);
        buf_consume(c, c->blen);
        if (c->chunked)
            on_chunked(i, tmp, rest, t_read, t_kernel);
        else
            on_body(i, tmp, rest, t_read, t_kernel);
        free(tmp);
    } else {
        buf_consume(c, c->blen);
    }
}

static void start_connect(long i)
{
    struct conn *c = &C[i];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        err_errno("socket", errno);
        if (c->churned)
            churn_failed++;
        c->st = ST_CLOSED;
        return;
    }
    int one = 1;
    if (A.kernel_ts)
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    if (A.sources > 1) {
        /* 127.0.0.1 + (i mod sources): the port is chosen at connect(), per
         * 4-tuple, so every source address has the whole ephemeral range. */
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        struct sockaddr_in src = {.sin_family = AF_INET};
        src.sin_addr.s_addr = htonl(0x7f000001u + (uint32_t)(i % A.sources));
        if (bind(fd, (struct sockaddr *)&src, sizeof src) == -1) {
            err_errno("bind", errno);
            close(fd);
            if (c->churned)
                churn_failed++;
            c->st = ST_CLOSED;
            return;
        }
    }
    if (connect(fd, (struct sockaddr *)&dst, sizeof dst) == -1 && errno != EINPROGRESS) {
        err_errno("connect", errno);
        close(fd);
        if (c->churned)
            churn_failed++;
        c->st = ST_CLOSED;
        return;
    }
    c->fd = fd;
    c->st = ST_CONNECT;
    c->got = 0;
    noutstanding++;
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = (uint64_t)i};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == -1) {
        err_errno("epoll_ctl", errno);
        conn_close(i, 0);
    }
}

static void on_connected(long i)
{
    struct conn *c = &C[i];
    int soerr = 0;
    socklen_t sl = sizeof soerr;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (soerr != 0) {
        err_errno("connect", soerr);
        conn_fail(i, "connect_failed");
        return;
    }
    if (A.proto == P_RAW) {
        c->cst = CS_SIZE;
        became_open(i);
        return;
    }
    char req[8192];
    int n;
    const char *hx = A.header ? A.header : "", *hend = A.header ? "\r\n" : "";
    if (A.proto == P_WS)
        n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s%s\r\n",
                     A.path, A.host, A.port, hx, hend);
    else
        n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%d\r\nAccept: text/event-stream\r\n%s%s\r\n",
                     A.path, A.host, A.port, hx, hend);
    if (n <= 0 || (size_t)n >= sizeof req) {
        conn_fail(i, "request_too_long");
        return;
    }
    if (send(c->fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        conn_fail(i, "send_request");
        return;
    }
    c->st = ST_HEAD;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = (uint64_t)i};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void on_readable(long i)
{
    struct conn *c = &C[i];
    char data[65536];
    union {
        char b[CMSG_SPACE(sizeof(struct timespec)) + 64];
        struct cmsghdr align;
    } cbuf;
    struct iovec iov = {.iov_base = data, .iov_len = sizeof data};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b, .msg_controllen = sizeof cbuf.b};
    ssize_t r = recvmsg(c->fd, &mh, MSG_DONTWAIT);
    if (r == -1) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return;
        err_errno("recv", errno);
        conn_fail(i, c->st == ST_OPEN ? "lost_open" : "lost_head");
        return;
    }
    if (r == 0) {
        conn_fail(i, c->st == ST_OPEN ? "eof_open" : "eof_head");
        return;
    }
    double t_read = now_real(), t_kernel = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(cm), sizeof ts);
            t_kernel = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
        }
    }
    if (c->st == ST_HEAD) {
        buf_append(c, data, (size_t)r);
        on_head(i, t_read, t_kernel);
    } else if (c->st == ST_OPEN) {
        if (c->chunked)
            on_chunked(i, data, (size_t)r, t_read, t_kernel);
        else
            on_body(i, data, (size_t)r, t_read, t_kernel);
    }
}

/* ------------------------------------------------------------ publishing */

static void pub_start(int seq)
{
    int slot = -1;
    for (int k = 0; k < MAX_PUBS; k++) {
        if (pubs[k].fd == -1) {
            slot = k;
            break;
        }
    }
    if (slot == -1) {
        if (npub_errors < 5)
            snprintf(pub_errors[npub_errors++], sizeof pub_errors[0], "seq %d: %d requests in flight", seq, MAX_PUBS);
        return;
    }
    struct pub *p = &pubs[slot];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);    /* blocking connect on loopback: immediate */
    if (fd == -1 || connect(fd, (struct sockaddr *)&dst, sizeof dst) == -1) {
        if (npub_errors < 5)
            snprintf(pub_errors[npub_errors++], sizeof pub_errors[0], "seq %d: connect: %s", seq, strerror(errno));
        if (fd != -1)
            close(fd);
        return;
    }
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s%sn=1&seq=%d HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n",
                     A.publish_path, strchr(A.publish_path, '?') ? "&" : "?", seq, A.host, A.port);
    p->t_sent = now_mono();
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return;
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    p->fd = fd;
    p->seq = seq;
    p->rlen = 0;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = TAG_PUB | (uint64_t)slot};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    pubs_sent++;
}

static void pub_readable(int slot)
{
    struct pub *p = &pubs[slot];
    char tmp[4096];
    ssize_t r = recv(p->fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (r > 0) {
        size_t take = (size_t)r < sizeof p->resp - 1 - p->rlen ? (size_t)r : sizeof p->resp - 1 - p->rlen;
        memcpy(p->resp + p->rlen, tmp, take);
        p->rlen += take;
        return;
    }
    if (r == -1 && (errno == EAGAIN || errno == EINTR))
        return;
    p->resp[p->rlen] = '\0';
    int status = p->rlen > 12 ? atoi(p->resp + 9) : 0;
    if (status != 200 && npub_errors < 5)
        snprintf(pub_errors[npub_errors++], sizeof pub_errors[0], "seq %d: status %d", p->seq, status);
    pub_rtt = xrealloc(pub_rtt, (size_t)(npub_rtt + 1) * sizeof *pub_rtt);
    pub_rtt[npub_rtt++] = (now_mono() - p->t_sent) * 1000.0;
    close(p->fd);
    p->fd = -1;
}

static int pubs_in_flight(void)
{
    int n = 0;
    for (int k = 0; k < MAX_PUBS; k++)
        n += pubs[k].fd != -1;
    return n;
}

/* --------------------------------------------------------------- driving */

static void feed_connects(void)
{
    while (noutstanding < A.batch) {
        long i;
        if (nreopen > 0)
            i = reopen[--nreopen];
        else if (next_open < A.n && !phase_churn)
            i = next_open++;
        else
            break;
        start_connect(i);
    }
}

/* One epoll round, at most timeout_ms. */
static void pump(int timeout_ms)
{
    static struct epoll_event evs[1024];
    feed_connects();
    int n = epoll_wait(ep, evs, 1024, timeout_ms);
    for (int k = 0; k < n; k++) {
        uint64_t d = evs[k].data.u64;
        if (d & TAG_PUB) {
            pub_readable((int)(d & 0xffff));
            continue;
        }
        long i = (long)d;
        struct conn *c = &C[i];
        if (c->fd == -1)
            continue;
        if (c->st == ST_CONNECT) {
            on_connected(i);
            continue;
        }
        on_readable(i);
    }
    feed_connects();
}

static void run_for(double seconds)
{
    double end = now_mono() + seconds;
    for (double t = now_mono(); t < end; t = now_mono())
        pump((int)((end - t) * 1000) + 1 > 50 ? 50 : (int)((end - t) * 1000) + 1);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_pct(const char *name, float *v, size_t n)
{
    if (n == 0) {
        printf("\"%s\": {\"p50\": null, \"p90\": null, \"p99\": null, \"max\": null, \"min\": null, \"samples\": 0}", name);
        return;
    }
    qsort(v, n, sizeof *v, cmp_float);
#define PCT(p) ((double)v[(size_t)((double)(n - 1) * (p) / 100.0 + 0.5)])
    printf("\"%s\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"max\": %.3f, \"min\": %.3f, \"samples\": %zu}", name,
           PCT(50), PCT(90), PCT(99), (double)v[n - 1], (double)v[0], n);
#undef PCT
}

static void json_long(const char *k, long v)
{
    if (v < 0)
        printf(", \"%s\": null", k);
    else
        printf(", \"%s\": %ld", k, v);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hold_client --port P [-n N] [--proto sse|ws|raw] [--path /events] [--header NAME:VALUE] [--host 127.0.0.1]\n"
            "       [--sources K] [--batch B] [--rss-pid PID] [--health-path /health]\n"
            "       [--publish-path /publish | --no-publish] [--events E] [--interval S] [--settle S]\n"
            "       [--drain S] [--wait S] [--churn RATE] [--churn-seconds S] [--abrupt FRACTION]\n"
            "       [--hold-seconds S] [--no-kernel-timestamps] [-v]\n"
            "Holds N streams, prints one JSON object (see the comment at the top of bench/hold_client.c).\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"host", 1, 0, 'H'},          {"port", 1, 0, 'p'},          {"streams", 1, 0, 'n'},
        {"path", 1, 0, 'P'},          {"proto", 1, 0, 'x'},         {"sources", 1, 0, 's'},
        {"batch", 1, 0, 'b'},         {"rss-pid", 1, 0, 'r'},       {"health-path", 1, 0, 'h'},
        {"publish-path", 1, 0, 'u'},  {"no-publish", 0, 0, 'N'},    {"events", 1, 0, 'e'},
        {"interval", 1, 0, 'i'},      {"settle", 1, 0, 'S'},        {"drain", 1, 0, 'd'},
        {"wait", 1, 0, 'w'},          {"churn", 1, 0, 'c'},         {"churn-seconds", 1, 0, 'C'},
        {"abrupt", 1, 0, 'a'},        {"hold-seconds", 1, 0, 'o'},  {"no-kernel-timestamps", 0, 0, 'K'},
        {"verbose", 0, 0, 'v'},       {"header", 1, 0, 'X'},       {"help", 0, 0, '?'},          {0, 0, 0, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "n:v", opts, NULL)) != -1) {
        switch (o) {
        case 'H': A.host = optarg; break;
        case 'p': A.port = atoi(optarg); break;
        case 'n': A.n = atol(optarg); break;
        case 'P': A.path = optarg; break;
        case 'X': A.header = optarg; break;
        case 'x':
            if (strcmp(optarg, "sse") == 0) A.proto = P_SSE;
            else if (strcmp(optarg, "ws") == 0) A.proto = P_WS;
            else if (strcmp(optarg, "raw") == 0) A.proto = P_RAW;
            else { fprintf(stderr, "hold_client: --proto: sse, ws or raw, not %s\n", optarg); return 2; }
            break;
        case 's': A.sources = atoi(optarg); break;
        case 'b': A.batch = atoi(optarg); break;
        case 'r': A.rss_pid = atoi(optarg); break;
        case 'h': A.health_path = optarg; break;
        case 'u': A.publish_path = optarg; break;
        case 'N': A.publish_path = NULL; break;
        case 'e': A.events = atoi(optarg); break;
        case 'i': A.interval = atof(optarg); break;
        case 'S': A.settle = atof(optarg); break;
        case 'd': A.drain = atof(optarg); break;
        case 'w': A.wait = atof(optarg); break;
        case 'c': A.churn = atof(optarg); break;
        case 'C': A.churn_seconds = atof(optarg); break;
        case 'a': A.abrupt = atof(optarg); break;
        case 'o': A.hold_seconds = atof(optarg); break;
        case 'K': A.kernel_ts = 0; break;
        case 'v': A.verbose = 1; break;
        default: usage(stderr); return 2;
        }
    }
    if (A.port <= 0 || A.port > 65535 || A.n <= 0 || A.sources < 1 || A.sources > 250 || A.batch < 1 ||
        A.events < 0 || A.abrupt < 0 || A.abrupt > 1) {
        usage(stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);

    /* One descriptor per stream: take the hard limit. */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < A.n + 64)
        fprintf(stderr, "hold_client: warning: RLIMIT_NOFILE is %llu, too low for %ld streams; opens will fail\n",
                (unsigned long long)rl.rlim_cur, A.n);

    dst.sin_family = AF_INET;
    dst.sin_port = htons((uint16_t)A.port);
    if (inet_pton(AF_INET, A.host, &dst.sin_addr) != 1) {
        fprintf(stderr, "hold_client: --host must be an IPv4 address: %s\n", A.host);
        return 2;
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    C = calloc((size_t)A.n, sizeof *C);
    reopen = calloc((size_t)A.n, sizeof *reopen);
    ev_first = calloc((size_t)A.events + 1, sizeof *ev_first);
    ev_last = calloc((size_t)A.events + 1, sizeof *ev_last);
    ev_t = calloc((size_t)A.events + 1, sizeof *ev_t);
    ev_count = calloc((size_t)A.events + 1, sizeof *ev_count);
    if (ep == -1 || C == NULL || reopen == NULL || !ev_first || !ev_last || !ev_t || !ev_count) {
        fprintf(stderr, "hold_client: setup failed\n");
        return 1;
    }
    for (long i = 0; i < A.n; i++)
        C[i].fd = -1;
    for (int k = 0; k < MAX_PUBS; k++)
        pubs[k].fd = -1;

    /* ---- 1. open (the floor may start sending before the events phase) */
    want_events = A.events;
    long rss_before = rss_kb(A.rss_pid), fds_before = fd_count(A.rss_pid);
    double t0 = now_mono();
    double last_progress = t0;
    long last_done = -1;
    while (next_open < A.n || noutstanding > 0) {
        pump(50);
        long done = next_open - noutstanding;
        if (done != last_done) {
            last_done = done;
            last_progress = now_mono();
        } else if (now_mono() - last_progress > 30) {
            err_count("open_stalled_30s");
            break;
        }
        if (A.verbose && (done % 10000) == 0)
            fprintf(stderr, "hold_client: %ld/%ld open\n", nopen, A.n);
    }
    double open_s = now_mono() - t0;
    long opened = nopen;

    /* ---- 2. settle, RSS, health */
    run_for(A.settle);
    long rss_held = rss_kb(A.rss_pid), fds_held = fd_count(A.rss_pid);
    char *health = NULL;
    if (A.health_path != NULL) {
        int st = http_get(A.health_path, 10, &health);
        if (st != 200 || health == NULL || health[0] != '{') {
            free(health);
            health = NULL;
        }
    }

    /* ---- 3. events */
    long open_before_events = nopen;
    double cpu0 = cpu_ms(A.rss_pid), cpu1 = cpu0;
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    if (A.events > 0) {
        double start = now_mono(), end_wait = start + A.wait, last_delivery = start;
        size_t seen = nlat;
        int k = 0;
        for (;;) {
            double t = now_mono();
            if (A.publish_path != NULL && k < A.events && t >= start + k * A.interval) {
                pub_start(k);
                k++;
            }
            pump(5);
            t = now_mono();
            if (nlat != seen) {
                seen = nlat;
                last_delivery = t;
            }
            if (ncomplete >= nopen && (A.publish_path == NULL || k >= A.events) && pubs_in_flight() == 0)
                break;
            if (A.publish_path != NULL && k >= A.events && t > start + (A.events - 1) * A.interval + A.drain)
                break;
            if (A.publish_path == NULL && nlat > 0 && t - last_delivery > A.drain)
                break;
            if (t > end_wait)
                break;
        }
        cpu1 = cpu_ms(A.rss_pid);
        /* Let the remaining publishes answer, bounded. */
        for (double e = now_mono() + 5; pubs_in_flight() > 0 && now_mono() < e;)
            pump(20);
    }
    getrusage(RUSAGE_SELF, &ru1);
    long rss_after_events = rss_kb(A.rss_pid);
    long open_after_events = nopen;
    long missing = 0;
    for (long i = 0; i < A.n; i++)
        missing += C[i].st == ST_OPEN && C[i].got < (uint32_t)A.events;

    /* ---- 4. churn */
    long rss_before_churn = -1, rss_after_churn = -1, fds_before_churn = -1, fds_after_churn = -1;
    long open_after_churn = -1;
    double churn_s = 0;
    if (A.churn > 0 && A.churn_seconds > 0) {
        want_events = 0;
        rss_before_churn = rss_kb(A.rss_pid);
        fds_before_churn = fd_count(A.rss_pid);
        phase_churn = 1;
        double start = now_mono(), last = start, quota = 0;
        while (now_mono() - start < A.churn_seconds) {
            pump(5);
            double t = now_mono();
            quota += (t - last) * A.churn;
            last = t;
            while (quota >= 1) {
                quota -= 1;
                long i = (long)(next_rand() % (uint64_t)A.n), probes = 0;
                while (C[i].st != ST_OPEN && probes++ < A.n)
                    i = (i + 1) % A.n;
                if (C[i].st != ST_OPEN)
                    break;
                int abrupt = (double)(next_rand() % 10000) / 10000.0 < A.abrupt;
                if (!abrupt && A.proto == P_WS)
                    send_ws_frame(C[i].fd, 0x8, "\x03\xe8", 2);     /* 1000, then FIN */
                conn_close(i, abrupt);
                churn_closed++;
                churn_closed_abrupt += abrupt;
                C[i].churned = 1;
                reopen[nreopen++] = i;
            }
        }
        churn_s = now_mono() - start;
        /* Everything reopened, then settle: RSS and descriptors back? */
        for (double e = now_mono() + 30; (nreopen > 0 || noutstanding > 0) && now_mono() < e;)
            pump(20);
        run_for(A.settle + 1.0);
        rss_after_churn = rss_kb(A.rss_pid);
        fds_after_churn = fd_count(A.rss_pid);
        open_after_churn = nopen;
    }

    /* ---- 5. hold, close, report */
    if (A.hold_seconds > 0)
        run_for(A.hold_seconds);
    for (long i = 0; i < A.n; i++) {
        if (C[i].fd != -1)
            conn_close(i, 0);
    }

    printf("{\"requested\": %ld, \"opened\": %ld, \"open_seconds\": %.3f, \"proto\": \"%s\", \"sources\": %d", A.n, opened,
           open_s, A.proto == P_WS ? "ws" : A.proto == P_RAW ? "raw" : "sse", A.sources);
    json_long("rss_before_kb", rss_before);
    json_long("rss_held_kb", rss_held);
    json_long("rss_after_events_kb", rss_after_events);
    json_long("fds_before", fds_before);
    json_long("fds_held", fds_held);
    if (rss_before >= 0 && rss_held >= 0 && opened > 0)
        printf(", \"rss_per_stream_bytes\": %ld", (rss_held - rss_before) * 1024 / opened);
    else
        printf(", \"rss_per_stream_bytes\": null");
    long deliveries = (long)nlat;
    printf(", \"deliveries\": %ld, \"deliveries_expected\": %ld", deliveries, open_before_events * A.events);
    printf(", \"streams_missing_events\": %ld, \"streams_lost_during_events\": %ld", missing,
           open_before_events - open_after_events);
    printf(", ");
    print_pct("latency_ms", lat, nlat);
    printf(", ");
    print_pct("kernel_latency_ms", klat, nklat);
    /* Span: per event, last minus first client read. */
    double *spans = calloc((size_t)A.events + 1, sizeof *spans);
    int nspans = 0;
    for (int k = 0; k < A.events; k++) {
        if (ev_count[k] > 0)
            spans[nspans++] = (ev_last[k] - ev_first[k]) * 1000.0;
    }
    qsort(spans, (size_t)nspans, sizeof *spans, cmp_double);
    if (nspans)
        printf(", \"fanout_span_ms_p50\": %.3f", spans[nspans / 2]);
    else
        printf(", \"fanout_span_ms_p50\": null");
    if (pub_rtt != NULL)
        qsort(pub_rtt, (size_t)npub_rtt, sizeof *pub_rtt, cmp_double);
    printf(", \"publish\": {\"sent\": %d, \"request_ms_p50\": ", pubs_sent);
    if (npub_rtt)
        printf("%.3f", pub_rtt[npub_rtt / 2]);
    else
        printf("null");
    printf(", \"errors\": [");
    for (int k = 0; k < npub_errors; k++)
        printf("%s\"%s\"", k ? ", " : "", pub_errors[k]);
    printf("]}");
    if (cpu0 >= 0 && cpu1 >= 0 && A.events > 0) {
        printf(", \"worker_cpu_ms\": %.1f", cpu1 - cpu0);
        if (deliveries > 0)
            printf(", \"cpu_us_per_delivery\": %.3f", (cpu1 - cpu0) * 1000.0 / (double)deliveries);
        else
            printf(", \"cpu_us_per_delivery\": null");
    }
    double client_cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1000.0 +
                        (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1000.0;
    printf(", \"client_cpu_ms_events\": %.1f", client_cpu);
    if (A.churn > 0) {
        printf(", \"churn\": {\"rate\": %.0f, \"seconds\": %.2f, \"closed\": %ld, \"closed_abrupt\": %ld, \"reopened\": %ld, "
               "\"failed\": %ld",
               A.churn, churn_s, churn_closed, churn_closed_abrupt, churn_opened, churn_failed);
        json_long("open_after", open_after_churn);
        json_long("rss_before_kb", rss_before_churn);
        json_long("rss_after_kb", rss_after_churn);
        json_long("fds_before", fds_before_churn);
        json_long("fds_after", fds_after_churn);
        printf("}");
    }
    printf(", \"streams_lost\": %ld, \"errors\": {", lost_open);
    for (int k = 0; k < nerrs; k++)
        printf("%s\"%s\": %ld", k ? ", " : "", errs[k].kind, errs[k].n);
    printf("}");
    if (health != NULL)
        printf(", \"health\": %s", health);
    printf("}\n");
    free(health);
    free(spans);
    return 0;
}
