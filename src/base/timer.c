/*
 * timer.c — monotonic clock helper. Timeouts themselves are deadlines kept
 * on each connection and checked by the periodic sweep (conn.c, from serve.c's hook).
 */
#include <time.h>

#include "m0/timer.h"

uint64_t m0_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t m0_clock_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}
