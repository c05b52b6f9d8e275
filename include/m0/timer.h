/*
 * timer.h — the monotonic clock. The loop caches it once per wakeup
 * (m0_clock_update) and every timeout compares against the cached value.
 */
#ifndef M0_TIMER_H
#define M0_TIMER_H

#include "m0/types.h"

/* Monotonic milliseconds, read now. */
uint64_t m0_clock_ms(void);

/* Monotonic microseconds, read now (request durations for the access log). */
uint64_t m0_clock_us(void);

#endif
