/*
 * test_notify.c — sd_notify(3) datagrams (src/core/notify.c): path and abstract
 * sockets, the environment consumed, the watchdog interval and its pid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "m0/notify.h"

static int listen_at(const char *name, int abstract)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(sun.sun_path + (abstract ? 1 : 0), name, n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    if (!abstract)
        unlink(name);
    assert_int_equal(bind(fd, (struct sockaddr *)&sun, len), 0);
    return fd;
}

static void expect(int fd, const char *want)
{
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_string_equal(buf, want);
}

static void test_path_socket(void **state)
{
    (void)state;
    char path[64], err[200];
    snprintf(path, sizeof path, "/tmp/m0-notify-test-%d.sock", (int)getpid());
    int fd = listen_at(path, 0);
    setenv("NOTIFY_SOCKET", path, 1);
    setenv("WATCHDOG_USEC", "3000000", 1);
    unsetenv("WATCHDOG_PID");
    assert_int_equal(m0_notify_init(err, sizeof err), M0_OK);
    assert_true(m0_notify_enabled());
    assert_null(getenv("NOTIFY_SOCKET"));      /* workers and the app do not inherit it */
    assert_null(getenv("WATCHDOG_USEC"));
    assert_int_equal(m0_notify_watchdog_usec(), 3000000);
    assert_int_equal(m0_notify("READY=1\nSTATUS=%d workers", 2), M0_OK);
    expect(fd, "READY=1\nSTATUS=2 workers");
    close(fd);
    unlink(path);
}

static void test_abstract_socket_and_foreign_watchdog(void **state)
{
    (void)state;
    char name[64], at[66], err[200];
    snprintf(name, sizeof name, "m0-notify-test-%d", (int)getpid());
    snprintf(at, sizeof at, "@%s", name);
    int fd = listen_at(name, 1);
    setenv("NOTIFY_SOCKET", at, 1);
    setenv("WATCHDOG_USEC", "3000000", 1);
    setenv("WATCHDOG_PID", "1", 1);            /* someone else's watchdog */
    assert_int_equal(m0_notify_init(err, sizeof err), M0_OK);
    assert_int_equal(m0_notify_watchdog_usec(), 0);
    assert_int_equal(m0_notify("STOPPING=1"), M0_OK);
    expect(fd, "STOPPING=1");
    close(fd);
}

static void test_off_and_bad(void **state)
{
    (void)state;
    char err[200];
    unsetenv("NOTIFY_SOCKET");
    setenv("WATCHDOG_USEC", "1000", 1);
    assert_int_equal(m0_notify_init(err, sizeof err), M0_OK);
    assert_false(m0_notify_enabled());
    assert_int_equal(m0_notify_watchdog_usec(), 0);
    assert_int_equal(m0_notify("READY=1"), M0_OK);     /* a no-op */
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    assert_int_equal(m0_notify_init(err, sizeof err), M0_ERR);
    assert_non_null(strstr(err, "NOTIFY_SOCKET"));
    assert_false(m0_notify_enabled());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_socket),
        cmocka_unit_test(test_abstract_socket_and_foreign_watchdog),
        cmocka_unit_test(test_off_and_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
