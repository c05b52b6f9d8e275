/*
 * bench/fanout_floor.c — the floor a fan-out is compared with: a bare C
 * epoll loop that accepts N connections and then, E times, send()s one small
 * frame to every one of them, timing each pass.
 *
 * No HTTP, no parsing, no per-connection state but the descriptor: what one
 * core pays the kernel to put one small frame on N loopback TCP sockets
 * (on loopback each send() also runs the receiver's TCP input, so the pass
 * costs about N × one send). bench/hold_client.c --proto raw holds the
 * connections and times the deliveries exactly as it does a server's: each
 * frame is an SSE-shaped event "data: {"t": T, "seq": K}\n\n" whose T is the
 * CLOCK_REALTIME at the start of the pass, as rt_app.py's "t" is the time of
 * the publish. Before the passes every socket gets one ": hi" comment, as a
 * held stream gets its head and first body before any event.
 *
 *   fanout_floor --port P -n N [--events 20] [--interval 0.2] [--settle 1]
 *                [--accept-timeout 60] [--uring [--uring-depth 1024]]
 *
 * --uring: the same passes through io_uring instead (raw syscalls, no
 * liburing): IORING_OP_SEND of the one frame to every socket, --uring-depth
 * SQEs submitted (and reaped) per io_uring_enter, the sockets registered as
 * fixed files — whether batching the sends beats one send() per socket.
 * MSG_DONTWAIT makes a full socket complete with -EAGAIN (a failed send)
 * instead of waiting in the kernel.
 *
 * After the last pass it waits (bounded) for the client to hang up and
 * prints one JSON object: the pass durations (p50, p99, max, in ms), sends
 * and failed sends, its CPU per send, and its own RSS per connection (the
 * kernel's socket memory is not in it).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

static long rss_kb(void)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    long kb = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtol(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

static double cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* ---- io_uring, by hand: one ring, the sockets as fixed files. */
struct ring {
    int fd;
    unsigned entries;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
};

static int ring_init(struct ring *r, unsigned entries, const int *fds, unsigned nfds)
{
    struct io_uring_params pr;
    memset(&pr, 0, sizeof pr);
    pr.flags = IORING_SETUP_CQSIZE;
    pr.cq_entries = entries * 2;
    r->fd = (int)syscall(__NR_io_uring_setup, entries, &pr);
    if (r->fd < 0)
        return -1;
    r->entries = pr.sq_entries;
    size_t sqlen = pr.sq_off.array + pr.sq_entries * sizeof(unsigned);
    size_t cqlen = pr.cq_off.cqes + pr.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(NULL, sqlen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    char *cq = mmap(NULL, cqlen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
    r->sqes = mmap(NULL, pr.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED)
        return -1;
    r->sq_head = (unsigned *)(sq + pr.sq_off.head);
    r->sq_tail = (unsigned *)(sq + pr.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + pr.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + pr.sq_off.array);
    r->cq_head = (unsigned *)(cq + pr.cq_off.head);
    r->cq_tail = (unsigned *)(cq + pr.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + pr.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + pr.cq_off.cqes);
    return (int)syscall(__NR_io_uring_register, r->fd, IORING_REGISTER_FILES, fds, nfds) < 0 ? -1 : 0;
}

/* One pass: the frame to every socket, depth SQEs per io_uring_enter.
 * Adds to *sends and *failed. */
static void ring_pass(struct ring *r, long got, const char *frame, int fl, long *sends, long *failed)
{
    for (long i = 0; i < got;) {
        unsigned tail = *r->sq_tail, k = 0;
        for (; k < r->entries && i < got; k++, i++) {
            unsigned idx = (tail + k) & *r->sq_mask;
            struct io_uring_sqe *q = &r->sqes[idx];
            memset(q, 0, sizeof *q);
            q->opcode = IORING_OP_SEND;
            q->flags = IOSQE_FIXED_FILE;
            q->fd = (int)i;
            q->addr = (uint64_t)(uintptr_t)frame;
            q->len = (unsigned)fl;
            q->msg_flags = MSG_NOSIGNAL | MSG_DONTWAIT;
            r->sq_array[idx] = idx;
        }
        __atomic_store_n(r->sq_tail, tail + k, __ATOMIC_RELEASE);
        while (syscall(__NR_io_uring_enter, r->fd, k, k, IORING_ENTER_GETEVENTS, NULL, 0) < 0 && errno == EINTR) {
        }
        unsigned head = *r->cq_head, ctail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
        for (; head != ctail; head++) {
            (*sends)++;
            *failed += r->cqes[head & *r->cq_mask].res != fl;
        }
        __atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"port", 1, 0, 'p'},     {"streams", 1, 0, 'n'}, {"events", 1, 0, 'e'},          {"interval", 1, 0, 'i'},
        {"settle", 1, 0, 's'},   {"accept-timeout", 1, 0, 't'}, {"help", 0, 0, 'h'},     {"uring", 0, 0, 'u'},
        {"uring-depth", 1, 0, 'd'}, {0, 0, 0, 0},
    };
    int port = 0, events = 20, uring = 0;
    unsigned depth = 1024;
    long n = 0;
    double interval = 0.2, settle = 1.0, accept_timeout = 60;
    int o;
    while ((o = getopt_long(argc, argv, "n:", opts, NULL)) != -1) {
        switch (o) {
        case 'p': port = atoi(optarg); break;
        case 'n': n = atol(optarg); break;
        case 'e': events = atoi(optarg); break;
        case 'i': interval = atof(optarg); break;
        case 's': settle = atof(optarg); break;
        case 't': accept_timeout = atof(optarg); break;
        case 'u': uring = 1; break;
        case 'd': depth = (unsigned)atoi(optarg); break;
        default:
            fprintf(stderr, "usage: fanout_floor --port P -n N [--events E] [--interval S] [--settle S] "
                            "[--accept-timeout S] [--uring [--uring-depth D]]\n");
            return 2;
        }
    }
    if (port <= 0 || port > 65535 || n <= 0 || events <= 0 || depth == 0 || depth > 4096) {
        fprintf(stderr, "fanout_floor: --port and -n are required (positive), --events > 0, --uring-depth 1..4096\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) == -1 || listen(lfd, 4096) == -1) {
        fprintf(stderr, "fanout_floor: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
        return 1;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    int *fds = malloc((size_t)n * sizeof *fds);
    double *pass = calloc((size_t)events, sizeof *pass);
    if (fds == NULL || pass == NULL)
        return 1;
    long rss0 = rss_kb();

    /* ---- accept N (the client's connects complete in the backlog) */
    long got = 0;
    double deadline = now_mono() + accept_timeout;
    struct epoll_event evs[256];
    while (got < n && now_mono() < deadline) {
        int k = epoll_wait(ep, evs, 256, 100);
        for (int j = 0; j < k; j++) {
            if (evs[j].data.fd != lfd)
                continue;
            for (;;) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd == -1)
                    break;
                /* As m0serve does: a small frame leaves at once. */
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                fds[got++] = fd;
                if (got == n)
                    break;
            }
        }
    }
    long rss_held = rss_kb();
    /* Every socket has sent once before the timed passes, as a held m0serve
     * stream has sent its head and first comment: a socket's first send()
     * costs more than the next ones. The client ignores the comment. */
    for (long i = 0; i < got; i++) {
        if (send(fds[i], ": hi\n\n", 6, MSG_NOSIGNAL | MSG_DONTWAIT) != 6) {
            /* counted by the passes if it persists */
        }
    }
    sleep_s(settle);

    struct ring ring;
    memset(&ring, 0, sizeof ring);
    if (uring && ring_init(&ring, depth, fds, (unsigned)got) != 0) {
        fprintf(stderr, "fanout_floor: io_uring unavailable: %s\n", strerror(errno));
        return 1;
    }

    /* ---- E passes: one send() per connection each */
    long sends = 0, failed = 0;
    double cpu0 = cpu_ms(), start = now_mono();
    for (int e = 0; e < events; e++) {
        sleep_s(start + e * interval - now_mono());
        char frame[96];
        double t = now_real();
        int fl = snprintf(frame, sizeof frame, "data: {\"t\": %.6f, \"seq\": %d}\n\n", t, e);
        double p0 = now_mono();
        if (uring) {
            ring_pass(&ring, got, frame, fl, &sends, &failed);
        } else {
            for (long i = 0; i < got; i++) {
                ssize_t w = send(fds[i], frame, (size_t)fl, MSG_NOSIGNAL | MSG_DONTWAIT);
                sends++;
                failed += w != fl;
            }
        }
        pass[e] = (now_mono() - p0) * 1000.0;
    }
    double cpu = cpu_ms() - cpu0;

    /* ---- wait (bounded) for the client to hang up, then report */
    for (long i = 0; i < got; i++) {
        struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = fds[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &cev);
    }
    long closed = 0;
    deadline = now_mono() + 60;
    while (closed < got && now_mono() < deadline) {
        int k = epoll_wait(ep, evs, 256, 200);
        for (int j = 0; j < k; j++) {
            int fd = evs[j].data.fd;
            if (fd == lfd)
                continue;
            char sink[512];
            ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
            if (r == 0 || (r == -1 && errno != EAGAIN && errno != EINTR)) {
                close(fd);      /* leaves the epoll set */
                closed++;
            }
        }
    }
    double sorted[4096];
    int ns = events < 4096 ? events : 4096;
    memcpy(sorted, pass, (size_t)ns * sizeof *sorted);
    qsort(sorted, (size_t)ns, sizeof *sorted, cmp_double);
    printf("{\"accepted\": %ld, \"uring\": %d, \"events\": %d, \"sends\": %ld, \"failed_sends\": %ld, "
           "\"pass_ms\": {\"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f, \"min\": %.3f}, "
           "\"cpu_ms\": %.1f, \"cpu_us_per_send\": %.3f, \"rss_before_kb\": %ld, \"rss_held_kb\": %ld, "
           "\"rss_per_conn_bytes\": %ld, \"client_closed\": %ld}\n",
           got, uring, events, sends, failed, sorted[(ns - 1) * 50 / 100], sorted[(ns - 1) * 99 / 100], sorted[ns - 1],
           sorted[0], cpu, sends ? cpu * 1000.0 / (double)sends : 0.0, rss0, rss_held,
           got ? (rss_held - rss0) * 1024 / got : 0, closed);
    return 0;
}
