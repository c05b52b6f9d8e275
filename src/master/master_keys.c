/*
 * master_keys.c — the key files across a SIGHUP reload (issue 18, issue 27
 * items 9 and 10): --grant-key-file and --grip-key-file are re-read when a
 * reload starts, so the new generation verifies, signs and publishes with
 * the files as they are now. A file that fails to load (keyfile.h's rule,
 * a malformed line) keeps the key in use, with one warning.
 *
 * The keys belong to a generation: the ones the serving workers started
 * with are kept until the new generation serves (commit), and put back when
 * it could not boot (restore) — a worker that later replaces one of the
 * serving workers (a crash, --max-requests) then gets the keys its
 * siblings verify with, never the keys of a generation that never served.
 * The master itself verifies and signs nothing: the keys are only used
 * after fork.
 */
#include <stdlib.h>

#include "m0/grant.h"
#include "m0/keyfile.h"
#include "m0/log.h"

#include "master_int.h"

void m0_master_keys_reread(struct m0_master *m)
{
    struct m0_config *cfg = (struct m0_config *)m->cfg;
    char err[512];
    m0_master_keys_commit(m);           /* a previous reload's keys are the serving ones by now */
    if (cfg->grant_keys != NULL) {
        struct m0_grant_keys *k = m0_grant_keys_load(cfg->grant_key_file, err, sizeof err);
        if (k == NULL) {
            m0_warn("SIGHUP: %s: the grant keys already loaded stay", err);
        } else {
            m->prev_grant_keys = cfg->grant_keys;
            cfg->grant_keys = k;
            m0_info("SIGHUP: grant keys re-read from %s", cfg->grant_key_file);
        }
    }
    if (cfg->grip_key != NULL) {
        unsigned char *key;
        size_t len;
        if (m0_keyfile_grip(cfg->grip_key_file, &key, &len, err, sizeof err) != M0_OK) {
            m0_warn("SIGHUP: %s: the GRIP key already loaded stays", err);
        } else {
            m->prev_grip_key = cfg->grip_key;
            m->prev_grip_key_len = cfg->grip_key_len;
            cfg->grip_key = key;
            cfg->grip_key_len = len;
            m0_info("SIGHUP: GRIP key re-read from %s", cfg->grip_key_file);
        }
    }
}

void m0_master_keys_commit(struct m0_master *m)
{
    m0_grant_keys_free(m->prev_grant_keys);
    m->prev_grant_keys = NULL;
    m0_keyfile_free(m->prev_grip_key, m->prev_grip_key_len);
    m->prev_grip_key = NULL;
    m->prev_grip_key_len = 0;
}

void m0_master_keys_restore(struct m0_master *m)
{
    struct m0_config *cfg = (struct m0_config *)m->cfg;
    if (m->prev_grant_keys != NULL) {
        m0_grant_keys_free(cfg->grant_keys);
        cfg->grant_keys = m->prev_grant_keys;
        m->prev_grant_keys = NULL;
        m0_info("reload failed: the grant keys of the serving workers stay");
    }
    if (m->prev_grip_key != NULL) {
        m0_keyfile_free(cfg->grip_key, cfg->grip_key_len);
        cfg->grip_key = m->prev_grip_key;
        cfg->grip_key_len = m->prev_grip_key_len;
        m->prev_grip_key = NULL;
        m->prev_grip_key_len = 0;
        m0_info("reload failed: the GRIP key of the serving workers stays");
    }
}
