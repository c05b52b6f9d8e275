/*
 * types.h — forward declarations, the closed status vocabulary and the few
 * attribute macros every module shares. Include this, then only the module
 * headers you call into.
 */
#ifndef M0_TYPES_H
#define M0_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Status vocabulary for I/O-shaped functions. Byte-count functions return
 * ssize_t >= 0 or one of these; constructors return a pointer or NULL. */
#define M0_OK     0
#define M0_ERR   -1
#define M0_AGAIN -2
#define M0_DONE  -3

/* Process exit statuses. */
#define M0_EXIT_OK        0
#define M0_EXIT_FAIL      1
#define M0_EXIT_USAGE     2   /* bad flag or value */
#define M0_EXIT_BOOT      3   /* worker: the app could not be loaded (internal to master/worker) */
#define M0_EXIT_ABANDONED 4   /* the graceful timeout ended requests still in flight */
#define M0_EXIT_CONFIG   78   /* EX_CONFIG: a configuration conflict */

/* The most event loops one worker process runs (--threads). */
#define M0_MAX_LOOPS 64

#define M0_LIKELY(x)   __builtin_expect(!!(x), 1)
#define M0_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define M0_UNUSED      __attribute__((unused))
#define M0_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct m0_buf;
struct m0_arena;
struct m0_config;
struct m0_req;
struct m0_resp;
struct m0_http;
struct m0_conn;
struct m0_loop;
struct m0_job;
struct m0_target;
struct m0_runner;
struct m0_pool;
struct m0_server;
struct m0_completion;
struct m0_channel_stat;

#endif
