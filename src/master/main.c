/*
 * main.c — parse the configuration, then run the master.
 * Exit statuses: 0 clean stop, 1 failure (including an application that
 * cannot be loaded), 2 a bad flag or value, 78 a virtualenv of another
 * Python (version, kind or build) than the one built in, or a --grant-key-file or
 * --grip-key-file refused (unreadable, open to other users, malformed:
 * or a --certfile/--keyfile OpenSSL cannot use:
 * the flag's syntax is right, the file it names is configuration —
 * keyfile.h, one rule for both).
 */
#include <stdio.h>
#include <stdlib.h>

#include "m0/broker_engine.h"
#include "m0/broker_url.h"
#include "m0/buf.h"
#include "m0/cli.h"
#include "m0/config.h"
#include "m0/grant.h"
#include "m0/keyfile.h"
#include "m0/log.h"
#include "m0/log_text.h"
#include "m0/master.h"
#include "m0/publish_cli.h"
#include "m0/pyrt.h"
#include <string.h>
#include "m0/static.h"
#include "m0/tls_server.h"

/* How the build linked libpython (the Makefile's LINK: static or shared,
 * and why); one line of --version. */
#ifndef M0_PY_LINK
#define M0_PY_LINK "unknown (built without the Makefile)"
#endif

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
        printf("libpython: %s\n", M0_PY_LINK);
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
    if (cfg.grip_key_file != NULL) {
        if (m0_keyfile_grip(cfg.grip_key_file, &cfg.grip_key, &cfg.grip_key_len, err, sizeof err) != M0_OK) {
            fprintf(stderr, "%s\n", err);
            return M0_EXIT_CONFIG;
        }
        if (cfg.grip_key_len < 32)
            fprintf(stderr, "m0serve: warning: --grip-key-file: the key has %zu bytes; PyJWT warns on HMAC keys "
                    "under 32\n", cfg.grip_key_len);
    }
    if (cfg.certfile != NULL) {
        /* Read here, as the user that started the server (a key only root
         * reads), before the first fork: every worker inherits the
         * context (tls_server.h). SIGHUP re-reads it as --user. */
        int usage;
        char line[200];
        cfg.tls = m0_tlsd_load(&cfg, NULL, err, sizeof err, &usage);
        if (cfg.tls == NULL) {
            fprintf(stderr, "%s\n", err);
            return usage ? M0_EXIT_USAGE : M0_EXIT_CONFIG;
        }
        m0_tlsd_describe(cfg.tls, line, sizeof line);
        m0_info("TLS 1.2 and 1.3 with the certificate %s", line);
    }
    /* Its value is a credential in every log line (log_text.h). */
    m0_log_secret_cookie(cfg.grant_cookie);
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
    if (m0_broker_engine_init(err, sizeof err) != M0_OK) {
        fprintf(stderr, "m0serve: error: --broker: %s\n", err);
        return M0_EXIT_USAGE;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    return m0_master_run(&cfg);
}
