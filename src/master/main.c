/*
 * main.c — parse the configuration, then run the master.
 * Exit statuses: 0 clean stop, 1 failure (including an application that
 * cannot be loaded), 2 a bad flag or value, 78 a virtualenv of another
 * Python (version, kind or build) than the one built in, or a --grant-key-file refused
 * (unreadable, open to other users, malformed: its contents are
 * configuration, not a flag's syntax).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "m0/broker_url.h"
#include "m0/buf.h"
#include "m0/config.h"
#include "m0/grant.h"
#include "m0/log.h"
#include "m0/master.h"
#include "m0/publish_cli.h"
#include "m0/pyrt.h"
#include <string.h>
#include "m0/static.h"

/* --grip-key-file: the first line (without its line end) is the key, its
 * bytes as given (gripcontrol's key= string, UTF-8). Refused when another
 * user can read the file, when it cannot be read, or when the line is
 * empty. Returns M0_OK or M0_ERR with a one-line message in err. */
static int grip_key_load(struct m0_config *cfg, char *err, size_t cap)
{
    const char *path = cfg->grip_key_file;
    FILE *f = fopen(path, "re");
    struct stat st;
    if (f == NULL || fstat(fileno(f), &st) == -1) {
        snprintf(err, cap, "m0serve: error: --grip-key-file: cannot read '%s': %s", path, strerror(errno));
        if (f != NULL)
            fclose(f);
        return M0_ERR;
    }
    if (st.st_mode & (S_IRGRP | S_IROTH)) {
        snprintf(err, cap, "m0serve: error: --grip-key-file: '%s' is readable by other users (chmod 600 it)", path);
        fclose(f);
        return M0_ERR;
    }
    char line[4096];
    size_t n = 0;
    if (fgets(line, sizeof line, f) != NULL)
        n = strcspn(line, "\r\n");
    fclose(f);
    if (n == 0) {
        snprintf(err, cap, "m0serve: error: --grip-key-file: '%s': the first line (the key) is empty", path);
        return M0_ERR;
    }
    cfg->grip_key = m0_xmalloc(n);
    memcpy(cfg->grip_key, line, n);
    cfg->grip_key_len = n;
    if (n < 32)
        fprintf(stderr, "m0serve: warning: --grip-key-file: the key has %zu bytes; PyJWT warns on HMAC keys under 32\n", n);
    return M0_OK;
}

int main(int argc, char **argv)
{
    struct m0_config cfg;
    char err[512];

    /* Subcommands come first; anything else is MODULE[:ATTR] [options]. */
    if (argc > 1 && strcmp(argv[1], "publish") == 0)
        return m0_publish_main(argc - 1, argv + 1);
    m0_config_defaults(&cfg);
    if (m0_config_parse(&cfg, argc, argv, err, sizeof err) != M0_OK) {
        fprintf(stderr, "%s\n", err);
        return M0_EXIT_USAGE;
    }
    if (cfg.show_help) {
        m0_config_usage();
        return M0_EXIT_OK;
    }
    if (cfg.show_version) {
        printf("m0serve %s (Python %s%s, built for %s)\n", M0_VERSION, m0_py_version(),
               m0_py_free_threaded() ? " free-threaded" : "", m0_py_built_for());
        return M0_EXIT_OK;
    }
    if (cfg.loops > 1 && !m0_py_free_threaded()) {
        /* One interpreter lock would run the loops' Python one at a time:
         * N loops would cost N times the threads for one loop's speed. */
        fprintf(stderr, "m0serve: error: --threads %ld: several event loops in one process need a free-threaded "
                "CPython (this m0serve embeds Python %s with the GIL); use --workers %ld for processes, or "
                "--blocking-threads N for handler threads (gunicorn's --threads)\n", cfg.loops, m0_py_version(),
                cfg.loops);
        return M0_EXIT_CONFIG;
    }
    if (m0_static_check_config(&cfg, err, sizeof err) != M0_OK) {
        fprintf(stderr, "%s\n", err);
        return M0_EXIT_USAGE;
    }
    if (cfg.grant_key_file != NULL) {
        /* Read here, as the user that started the server; the workers
         * inherit the keys. The application's m0pub.grant() finds the same
         * file through M0_GRANT_KEY_FILE, made absolute. */
        cfg.grant_keys = m0_grant_keys_load(cfg.grant_key_file, err, sizeof err);
        if (cfg.grant_keys == NULL) {
            fprintf(stderr, "%s\n", err);
            return M0_EXIT_CONFIG;
        }
        char *abs = realpath(cfg.grant_key_file, NULL);
        setenv("M0_GRANT_KEY_FILE", abs != NULL ? abs : cfg.grant_key_file, 1);
        free(abs);
    }
    if (cfg.grip_key_file != NULL && grip_key_load(&cfg, err, sizeof err) != M0_OK) {
        fprintf(stderr, "%s\n", err);
        return M0_EXIT_USAGE;
    }
    /* m0pub.grant_url() builds PREFIX/sse and PREFIX/ws from it ("/": the root). */
    if (cfg.grant_path != NULL)
        setenv("M0_GRANT_PATH", cfg.grant_path[0] ? cfg.grant_path : "/", 1);
    if (m0_py_check_env(err, sizeof err) != M0_OK) {
        fprintf(stderr, "%s\n", err);
        return M0_EXIT_CONFIG;
    }
    /* Process-wide, before binding: a unix socket's mode is 0777 less it. */
    if (cfg.umask >= 0)
        umask((mode_t)cfg.umask);
    m0_config_resolve(&cfg);
    if (m0_broker_configure(&cfg) != M0_OK) {
        fprintf(stderr, "m0serve: error: --broker: invalid value '%s'\n", cfg.broker);
        return M0_EXIT_USAGE;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    return m0_master_run(&cfg);
}
