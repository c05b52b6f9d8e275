/*
 * master_keys.c — the key files across a SIGHUP reload (issue 18, issue 27
 * items 9 and 10): --grant-key-file and --grip-key-file are re-read when a
 * reload starts, so the new generation verifies, signs and publishes with
 * the files as they are now. A file that fails to load (keyfile.h's rule,
 * a malformed line) keeps the key in use, with one warning.
 *
 * The TLS certificate and key (master_tls.c) go the same way, through the
 * same three steps. The keys belong to a generation: the ones the serving workers started
 * with are kept until the new generation serves (commit), and put back when
 * it could not boot (restore) — a worker that later replaces one of the
 * serving workers (a crash, --max-requests) then gets the keys its
 * siblings verify with, never the keys of a generation that never served.
 * The master itself verifies and signs nothing: the keys are only used
 * after fork.
 *
 * Which key signs (docs/realtime.md "Rotation"): a worker signs grants with
 * the newest key of its own set that every live worker verifies with —
 * draining ones too, since a kept connection may still bring them a
 * grant — so a grant minted anywhere is accepted everywhere. A reload that
 * appends k2 to {k1} therefore has its workers sign with k1 while the old
 * ones live, and with k2 once the last of them has exited: the master
 * tells them ('K', control.h), and workers forked later start with k2.
 * Each worker's set is known here (w->keys), so repeated reloads, a failed
 * one and replacements (a crash, --max-requests) all follow the same rule.
 * When no key is shared (every key replaced at once) a worker signs with
 * its own last key, and the old workers refuse what the new ones mint
 * until they exit.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "m0/control.h"
#include "m0/grant.h"
#include "m0/keyfile.h"
#include "m0/log.h"

#include "master_int.h"

/* The grant key sets the live workers verify with, each once: *n of them
 * in a malloc'd array, or NULL when out of memory. */
static const struct m0_grant_keys **live_sets(const struct m0_master *m, size_t *n)
{
    const struct m0_grant_keys **v = malloc(((size_t)m->cap + 1) * sizeof *v);
    *n = 0;
    for (int i = 0; v != NULL && i < m->cap; i++) {
        const struct m0_grant_keys *k = m->w[i].pid != 0 ? m->w[i].keys : NULL;
        size_t j = 0;
        while (j < *n && v[j] != k)
            j++;
        if (k != NULL && j == *n)
            v[(*n)++] = k;
    }
    return v;
}

/* The index of k a worker holding k signs with, the live workers' sets
 * being v[0..n): the newest key they all verify, else k's last. */
static int signer(const struct m0_grant_keys *k, const struct m0_grant_keys *const *v, size_t n)
{
    int i = m0_grant_keys_newest_shared(k, v, n);
    return i >= 0 ? i : (int)m0_grant_keys_jwt(k)->n - 1;
}

/* Keep k until no live worker verifies with it (keys_settle frees it). */
static void retire(struct m0_master *m, struct m0_grant_keys *k)
{
    if (k == NULL)
        return;
    struct m0_grant_keys **v = realloc(m->old_keys, (size_t)(m->nold_keys + 1) * sizeof *v);
    if (v == NULL)
        return;         /* out of memory: k is kept for good, never freed under a worker's record */
    m->old_keys = v;
    v[m->nold_keys++] = k;
}

/* A reload's log line when its workers cannot sign with the file's last
 * key at once. */
static void say_signer(const struct m0_master *m, const struct m0_grant_keys *k, const char *path)
{
    size_t n;
    const struct m0_grant_keys **v = live_sets(m, &n);
    if (v == NULL)
        return;
    const struct m0_jwt_keys *set = m0_grant_keys_jwt(k);
    int i = m0_grant_keys_newest_shared(k, v, n);
    free(v);
    if (i < 0)
        m0_warn("SIGHUP: %s shares no key with the workers serving: until they have exited, they refuse the "
                "grants the new workers mint (docs/realtime.md \"Rotation\")", path);
    else if ((size_t)i + 1 < set->n)
        m0_info("SIGHUP: the new workers sign grants with %s, which the workers serving verify, until those have "
                "exited; then with %s", set->v[i].kid, set->v[set->n - 1].kid);
}

void m0_master_keys_reread(struct m0_master *m)
{
    struct m0_config *cfg = (struct m0_config *)m->cfg;
    char err[512];
    m0_master_keys_commit(m);           /* a previous reload's keys are the serving ones by now */
    m0_master_tls_reread(m);            /* and the TLS certificate (master_tls.c) */
    if (cfg->grant_keys != NULL) {
        struct m0_grant_keys *k = m0_grant_keys_load(cfg->grant_key_file, err, sizeof err);
        if (k == NULL) {
            m0_warn("SIGHUP: %s: the grant keys already loaded stay", err);
        } else {
            m->prev_grant_keys = cfg->grant_keys;
            cfg->grant_keys = k;
            m0_info("SIGHUP: grant keys re-read from %s", cfg->grant_key_file);
            say_signer(m, k, cfg->grant_key_file);
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
    m0_master_tls_commit(m);
    retire(m, m->prev_grant_keys);      /* the old workers verify with it until they exit */
    m->prev_grant_keys = NULL;
    m0_keyfile_free(m->prev_grip_key, m->prev_grip_key_len);
    m->prev_grip_key = NULL;
    m->prev_grip_key_len = 0;
}

void m0_master_keys_restore(struct m0_master *m)
{
    struct m0_config *cfg = (struct m0_config *)m->cfg;
    m0_master_tls_restore(m);
    if (m->prev_grant_keys != NULL) {
        retire(m, cfg->grant_keys);     /* the dismissed workers hold it until they are reaped */
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

void m0_master_keys_fork(struct m0_master *m)
{
    struct m0_config *cfg = (struct m0_config *)m->cfg;
    if (cfg->grant_keys == NULL)
        return;
    size_t n;
    const struct m0_grant_keys **v = live_sets(m, &n);
    cfg->grant_sign = (unsigned)signer(cfg->grant_keys, v, n);    /* out of memory (n 0): the last */
    free(v);
}

/* Tell w to sign with its key index from now on; 1 when the message went. */
static int tell_sign(struct m0_master_worker *w, int index)
{
    char msg[2] = {M0_CTL_SIGN, (char)index};
    ssize_t n;
    do
        n = send(w->ctl, msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n == -1 && errno == EINTR);
    return n == (ssize_t)sizeof msg;
}

void m0_master_keys_settle(struct m0_master *m)
{
    if (m->cfg->grant_keys == NULL)
        return;                         /* no --grant-key-file (never unset once loaded) */
    size_t n;
    const struct m0_grant_keys **v = live_sets(m, &n);
    if (v == NULL)
        return;                         /* out of memory: the next fork or exit settles */
    for (int i = 0; i < m->cap; i++) {
        struct m0_master_worker *w = &m->w[i];
        if (w->pid == 0 || w->keys == NULL || w->ctl == -1)
            continue;                   /* a worker that retired mints nothing new */
        int s = signer(w->keys, v, n);
        if (s != w->sign && tell_sign(w, s))
            w->sign = s;                /* not sent (its socket full): told at the next settle */
    }
    int kept = 0;
    for (int i = 0; i < m->nold_keys; i++) {
        size_t j = 0;
        while (j < n && v[j] != m->old_keys[i])
            j++;
        if (j < n)
            m->old_keys[kept++] = m->old_keys[i];
        else
            m0_grant_keys_free(m->old_keys[i]);
    }
    m->nold_keys = kept;
    free(v);
}
