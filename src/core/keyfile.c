/*
 * keyfile.c — the secret files behind --grant-key-file and --grip-key-file
 * (see keyfile.h): one reading rule, one message shape.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "m0/keyfile.h"
#include "m0/types.h"

void m0_keyfile_free(void *p, size_t n)
{
    if (p == NULL)
        return;
    OPENSSL_cleanse(p, n);
    free(p);
}

char *m0_keyfile_read(const char *flag, const char *path, size_t max, size_t *n, char *err, size_t cap)
{
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd == -1) {
        snprintf(err, cap, "m0serve: error: %s: cannot open %s: %s", flag, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    const char *why = NULL;
    char toobig[48];
    if (max % 1024 == 0)
        snprintf(toobig, sizeof toobig, "larger than %zu KiB", max / 1024);
    else
        snprintf(toobig, sizeof toobig, "larger than %zu bytes", max);
    if (fstat(fd, &st) == -1)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if ((st.st_mode & 077) != 0) {
        snprintf(err, cap, "m0serve: error: %s: %s: group or other users have access (mode %04o): chmod 600 it",
                 flag, path, (unsigned)(st.st_mode & 07777));
        close(fd);
        return NULL;
    } else if (st.st_size < 0 || (size_t)st.st_size > max)
        why = toobig;
    char *buf = why == NULL ? malloc(max + 1) : NULL;
    size_t got_n = 0;
    if (why == NULL && buf == NULL)
        why = "out of memory";
    while (why == NULL) {
        ssize_t got = read(fd, buf + got_n, max + 1 - got_n);
        if (got == -1 && errno == EINTR)
            continue;
        if (got == -1)
            why = strerror(errno);
        else if (got == 0)
            break;
        else if ((got_n += (size_t)got) > max)
            why = toobig;               /* it grew since fstat */
    }
    close(fd);
    if (why != NULL) {
        snprintf(err, cap, "m0serve: error: %s: %s: %s", flag, path, why);
        m0_keyfile_free(buf, got_n);
        return NULL;
    }
    buf[got_n] = '\0';
    *n = got_n;
    return buf;
}

int m0_keyfile_grip(const char *path, unsigned char **key, size_t *len, char *err, size_t cap)
{
    size_t n;
    char *text = m0_keyfile_read("--grip-key-file", path, M0_GRIP_KEY_FILE_MAX, &n, err, cap);
    if (text == NULL)
        return M0_ERR;
    size_t l = 0;
    while (l < n && text[l] != '\r' && text[l] != '\n')
        l++;
    if (l == 0 || memchr(text, '\0', l) != NULL) {
        snprintf(err, cap, "m0serve: error: --grip-key-file: %s: %s", path,
                 l == 0 ? "the first line (the key) is empty" : "the key holds a NUL byte");
        m0_keyfile_free(text, n);
        return M0_ERR;
    }
    *key = malloc(l);
    if (*key == NULL) {
        snprintf(err, cap, "m0serve: error: --grip-key-file: %s: out of memory", path);
        m0_keyfile_free(text, n);
        return M0_ERR;
    }
    memcpy(*key, text, l);
    *len = l;
    m0_keyfile_free(text, n);
    return M0_OK;
}
