/*
 * nofile.c — raising the descriptor limit at start (nofile.h).
 */
#include <stdio.h>
#include <sys/resource.h>

#include "m0/log.h"
#include "m0/nofile.h"

/* The kernel's ceiling for a process's descriptors (fs.nr_open): what an
 * unlimited hard limit means in practice. */
static rlim_t nr_open(void)
{
    FILE *f = fopen("/proc/sys/fs/nr_open", "re");
    unsigned long v = 0;
    if (f != NULL) {
        if (fscanf(f, "%lu", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v > 0 ? (rlim_t)v : (rlim_t)1048576;
}

long m0_nofile_raise(long max_connections)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        m0_log_errno("getrlimit(RLIMIT_NOFILE)");
        return -1;
    }
    rlim_t hard = rl.rlim_max == RLIM_INFINITY ? nr_open() : rl.rlim_max;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur < hard) {
        struct rlimit want = {.rlim_cur = hard, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &want) == 0)
            rl.rlim_cur = hard;
        else
            m0_log_errno("setrlimit(RLIMIT_NOFILE, %lu)", (unsigned long)hard);
    }
    unsigned long need = (unsigned long)max_connections + M0_NOFILE_RESERVE;
    if (rl.rlim_cur < need)
        m0_warn("descriptor limit %lu (hard) is below the %lu that --max-connections %ld needs: "
                "a worker refuses connections beyond about %lu (raise the hard limit: ulimit -Hn, LimitNOFILE=)",
                (unsigned long)rl.rlim_cur, need, max_connections,
                rl.rlim_cur > M0_NOFILE_RESERVE ? (unsigned long)rl.rlim_cur - M0_NOFILE_RESERVE : 0UL);
    return (long)rl.rlim_cur;
}
