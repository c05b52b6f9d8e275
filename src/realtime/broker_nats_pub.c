/*
 * broker_nats_pub.c — the NATS JetStream engine's process-wide part (see
 * broker_nats.h, docs/broker.md "NATS JetStream"): the connection
 * settings, the stream (one per prefix: PREFIX-events, subjects PREFIX.>,
 * replicated over the cluster), and the blocking publisher any thread but
 * a busy loop's may use (m0pub.publish in a view, `m0serve publish`, the
 * GRIP control port's and the publish socket's publisher threads).
 *
 * A publish is one JetStream publish: the frame on PREFIX.CHANNEL with the
 * headers Nats-Expected-Stream (only our stream may take it) and, with a
 * key, Nats-Msg-Id (the key's token: the stream's de-duplication window,
 * five minutes like Redis's key memory, makes a retry append once and
 * answer the first id). The answer is the stream's acknowledgement, sent
 * once the stream's quorum (2 of 3 with R3) stored the event; its sequence
 * is the event's global id. Outcomes: no answer within the timeout is
 * "unknown" (the stream may still store it: the retry with the key is
 * safe); "no responders" (no stream takes the subject) is "not published",
 * and the stream is made then and the publish sent once more; an error
 * answer is "not published".
 *
 * One connection per process, shared by its threads (libnats's connection
 * and JetStream context are thread-safe), made at the first use and kept
 * (libnats reconnects it to another server of the URL or of the cluster on
 * its own; a publish while it reconnects waits in libnats's buffer for up to
 * the timeout).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "m0/broker_pub.h"
#include "m0/log.h"
#include "m0/natsjs.h"
#include "broker_nats_pub.h"

/* Per process, written once by m0_broker_nats_init before forking. */
static char sprefix[M0_NATS_PREFIX_MAX + 1];
static char stream[M0_NATS_STREAM_MAX + 1];

const char *m0_nats_sprefix(void)
{
    return sprefix;
}

const char *m0_nats_stream(void)
{
    return stream;
}

int m0_broker_nats_init(const struct m0_broker_cfg *b, char *err, size_t cap)
{
    (void)err;
    (void)cap;
    /* Names only: libnats starts threads, and this process may fork. */
    m0_nats_names(b->prefix, sprefix, sizeof sprefix, stream, sizeof stream);
    return M0_OK;
}

void m0_nats_block_signals(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, old);
}

void m0_nats_restore_signals(const sigset_t *old)
{
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

const char *m0_nats_error(natsStatus s)
{
    const char *t = nats_GetLastError(NULL);
    if (t == NULL || t[0] == '\0')
        return natsStatus_GetText(s);
    if (t[0] == '(') {
        /* libnats begins its text with its source file and line: "(conn.c:2088): " */
        const char *close = strstr(t, "): ");
        if (close != NULL)
            t = close + 3;
    }
    return t;
}

natsOptions *m0_nats_options(char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    char urls[M0_BROKER_MAX_HOSTS][300];
    const char *servers[M0_BROKER_MAX_HOSTS];
    for (int i = 0; i < b->nhosts; i++) {
        const struct m0_hostport *h = &b->hosts[i];
        snprintf(urls[i], sizeof urls[i], strchr(h->host, ':') ? "nats://[%s]:%d" : "nats://%s:%d", h->host, h->port);
        servers[i] = urls[i];
    }
    natsOptions *o = NULL;
    natsStatus s = natsOptions_Create(&o);
    if (s == NATS_OK)
        s = natsOptions_SetServers(o, servers, b->nhosts);
    if (s == NATS_OK)
        s = natsOptions_SetTimeout(o, M0_BROKER_TIMEOUT_MS);
    if (s == NATS_OK)
        s = natsOptions_SetMaxReconnect(o, -1);     /* for ever: a cluster comes back */
    if (s == NATS_OK)
        s = natsOptions_SetReconnectWait(o, 250);
    if (s == NATS_OK)
        s = natsOptions_SetPingInterval(o, 2000);   /* a paused server is left after about 4-6 s */
    if (s == NATS_OK)
        s = natsOptions_SetMaxPingsOut(o, 2);
    if (s == NATS_OK)
        s = natsOptions_SetName(o, "m0serve");
    if (s == NATS_OK && b->username[0] != '\0')
        s = natsOptions_SetUserInfo(o, b->username, b->password);
    else if (s == NATS_OK && b->password[0] != '\0')
        s = natsOptions_SetToken(o, b->password);
    if (s != NATS_OK) {
        snprintf(err, cap, "broker %s: %s", b->shown, m0_nats_error(s));
        natsOptions_Destroy(o);
        return NULL;
    }
    return o;
}

/* ------------------------------------------------------------ the stream */

/* The stream this process wants (names point into static storage). */
static void wanted(jsStreamConfig *c, const char **subjects, int replicas)
{
    jsStreamConfig_Init(c);
    c->Name = stream;
    c->Subjects = subjects;
    c->SubjectsLen = 1;
    c->Retention = js_LimitsPolicy;
    c->MaxMsgsPerSubject = m0_broker->retention;     /* --broker-retention: a channel's history */
    c->MaxMsgs = m0_broker->backlog;                 /* --broker-backlog: the whole stream */
    c->Discard = js_DiscardOld;
    c->Storage = js_FileStorage;
    c->Replicas = replicas;
    c->Duplicates = M0_NATS_DUPLICATES_NS;
}

static int create(jsCtx *js, const char **subjects, char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    jsStreamConfig c;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    wanted(&c, subjects, b->replicas > 0 ? b->replicas : 3);
    natsStatus s = js_AddStream(&si, js, &c, NULL, &jerr);
    if (s != NATS_OK && jerr == JSStreamReplicasNotSupportedErr && b->replicas < 0) {
        /* One server, not a cluster: R1 is all there is (--broker-replicas
         * asked for more would be refused instead). */
        m0_warn("broker %s: the server is not clustered: stream %s is made with 1 replica (an event is on one "
                "machine)", b->shown, stream);
        c.Replicas = 1;
        jerr = 0;
        s = js_AddStream(&si, js, &c, NULL, &jerr);
    }
    jsStreamInfo_Destroy(si);
    if (s == NATS_OK || jerr == JSStreamNameExistErr)
        return M0_OK;            /* made here, or by another process meanwhile */
    snprintf(err, cap, "broker %s: stream %s could not be made: %s", b->shown, stream, m0_nats_error(s));
    return M0_ERR;
}

/* Bring the stream's limits to this process's settings (retention,
 * backlog, the window, and the replicas when they were given). */
static int reconcile(jsCtx *js, const jsStreamInfo *si, const char **subjects, char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    const jsStreamConfig *have = si->Config;
    int replicas = b->replicas > 0 ? b->replicas : (int)have->Replicas;
    int same_subjects = have->SubjectsLen == 1 && strcmp(have->Subjects[0], subjects[0]) == 0;
    if (have->MaxMsgsPerSubject == b->retention && have->MaxMsgs == b->backlog &&
        have->Duplicates == M0_NATS_DUPLICATES_NS && have->Replicas == replicas && same_subjects)
        return M0_OK;
    jsStreamConfig c = *have;
    c.Subjects = subjects;
    c.SubjectsLen = 1;
    c.MaxMsgsPerSubject = b->retention;
    c.MaxMsgs = b->backlog;
    c.Duplicates = M0_NATS_DUPLICATES_NS;
    c.Replicas = replicas;
    jsStreamInfo *out = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_UpdateStream(&out, js, &c, NULL, &jerr);
    jsStreamInfo_Destroy(out);
    if (s != NATS_OK) {
        snprintf(err, cap, "broker %s: stream %s could not be changed to this server's settings: %s", b->shown,
                 stream, m0_nats_error(s));
        return M0_ERR;
    }
    m0_info("broker %s: stream %s changed: %lld events per channel (--broker-retention), %lld in all "
            "(--broker-backlog), %d replicas (were %lld, %lld, %lld)", b->shown, stream, (long long)b->retention,
            (long long)b->backlog, replicas, (long long)have->MaxMsgsPerSubject, (long long)have->MaxMsgs,
            (long long)have->Replicas);
    return M0_OK;
}

static void fill(const jsStreamInfo *si, struct m0_nats_state *st)
{
    memset(st, 0, sizeof *st);
    st->first = si->State.FirstSeq;
    st->last = si->State.LastSeq;
    st->replicas = si->Config != NULL ? (int)si->Config->Replicas : 1;
    st->current = 1;
    st->standalone = si->Cluster == NULL;     /* one server, not a cluster: it leads */
    if (si->Cluster != NULL) {
        if (si->Cluster->Leader != NULL)
            snprintf(st->leader, sizeof st->leader, "%s", si->Cluster->Leader);
        else
            st->current = 0;
        for (int i = 0; i < si->Cluster->ReplicasLen; i++)
            if (si->Cluster->Replicas[i] != NULL && si->Cluster->Replicas[i]->Current)
                st->current++;
    }
}

int m0_nats_stream_state(jsCtx *js, int mode, struct m0_nats_state *st, char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    char subject[M0_NATS_PREFIX_MAX + 4];
    snprintf(subject, sizeof subject, "%s.>", sprefix);
    const char *subjects[] = {subject};
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, js, stream, NULL, &jerr);
    if (s == NATS_NOT_FOUND) {
        if (mode == M0_NATS_FIND)
            return M0_AGAIN;
        if (create(js, subjects, err, cap) != M0_OK)
            return M0_ERR;
        s = js_GetStreamInfo(&si, js, stream, NULL, &jerr);
    } else if (s == NATS_OK && mode == M0_NATS_RECONCILE) {
        if (reconcile(js, si, subjects, err, cap) != M0_OK) {
            jsStreamInfo_Destroy(si);
            return M0_ERR;
        }
    }
    if (s != NATS_OK) {
        snprintf(err, cap, "broker %s: stream %s: %s", b->shown, stream, m0_nats_error(s));
        return M0_ERR;
    }
    fill(si, st);
    jsStreamInfo_Destroy(si);
    return M0_OK;
}

/* ------------------------------------------------------------ publishing */

/* Per process: the publishers' connection (lock: made once, then only read;
 * a process forked from this one makes its own: pid). */
static pthread_mutex_t pub_lock = PTHREAD_MUTEX_INITIALIZER;
static natsConnection *pub_nc;
static jsCtx *pub_js;
static pid_t pub_pid;

/* The process's JetStream context, connected (made at the first call), or
 * NULL with err. */
static jsCtx *publisher(char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    pthread_mutex_lock(&pub_lock);
    if (pub_nc != NULL && (pub_pid != getpid() || natsConnection_IsClosed(pub_nc))) {
        /* Another process's (forked: its threads are not here, so it is
         * left as it is), or closed for good: a new one. */
        pub_nc = NULL;
        pub_js = NULL;
    }
    if (pub_nc == NULL) {
        sigset_t old;
        m0_nats_block_signals(&old);
        natsOptions *o = m0_nats_options(err, cap);
        natsConnection *nc = NULL;
        natsStatus s = o != NULL ? natsConnection_Connect(&nc, o) : NATS_ERR;
        if (o != NULL && s != NATS_OK)
            snprintf(err, cap, "broker %s unreachable: %s", b->shown, m0_nats_error(s));
        natsOptions_Destroy(o);
        jsOptions jo;
        jsOptions_Init(&jo);
        jo.Wait = M0_NATS_API_MS;
        jsCtx *js = NULL;
        if (s == NATS_OK && (s = natsConnection_JetStream(&js, nc, &jo)) != NATS_OK) {
            snprintf(err, cap, "broker %s: %s", b->shown, m0_nats_error(s));
            natsConnection_Destroy(nc);
        }
        m0_nats_restore_signals(&old);
        if (s == NATS_OK) {
            pub_nc = nc;
            pub_js = js;
            pub_pid = getpid();
        }
    }
    jsCtx *js = pub_js;
    pthread_mutex_unlock(&pub_lock);
    return js;
}

int m0_broker_nats_publish(const char *channel, size_t clen, const char *frame, size_t flen, const char *key,
                           size_t klen, const char *hint, uint64_t *id_out, char *err, size_t cap)
{
    const struct m0_broker_cfg *b = m0_broker;
    jsCtx *js = publisher(err, cap);
    if (js == NULL)
        return M0_ERR;
    struct m0_buf subject = {0}, msgid = {0};
    m0_nats_subject(&subject, sprefix, channel, clen);
    m0_buf_append(&subject, "", 1);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = M0_BROKER_TIMEOUT_MS;
    po.ExpectStream = stream;
    if (key != NULL) {
        m0_nats_token(&msgid, key, klen);
        m0_buf_append(&msgid, "", 1);
        po.MsgId = msgid.data;
    }
    sigset_t old;
    m0_nats_block_signals(&old);     /* libnats may start its reply thread from here */
    int rc = M0_ERR;
    for (int attempt = 0; attempt < 2; attempt++) {
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        natsStatus s = js_Publish(&pa, js, subject.data, frame, (int)flen, &po, &jerr);
        if (s == NATS_OK) {
            *id_out = pa->Sequence;
            jsPubAck_Destroy(pa);
            rc = M0_OK;
            break;
        }
        if (s == NATS_NO_RESPONDERS && attempt == 0) {
            /* Nobody took it: the stream has no leader now (an election
             * after a server was lost), or there is no stream yet (the
             * first publish ever, or it was deleted): then it is made and
             * the event sent once more. */
            struct m0_nats_state st;
            char why[300];
            int rc2 = m0_nats_stream_state(js, M0_NATS_FIND, &st, why, sizeof why);
            if (rc2 == M0_AGAIN && m0_nats_stream_state(js, M0_NATS_CREATE, &st, why, sizeof why) == M0_OK)
                continue;
            if (rc2 == M0_OK)
                snprintf(err, cap, "broker %s: stream %s took no event (no leader now: an election?): not "
                         "published", b->shown, stream);
            else
                snprintf(err, cap, "%s: not published", why);
            break;
        }
        if (s == NATS_NO_RESPONDERS) {
            snprintf(err, cap, "broker %s: no JetStream stream takes %s (nobody answered): not published", b->shown,
                     subject.data);
        } else if (jerr != 0 || s == NATS_INVALID_ARG || s == NATS_CONNECTION_CLOSED) {
            snprintf(err, cap, "broker %s refused the event: %s", b->shown, m0_nats_error(s));
        } else {
            snprintf(err, cap, "broker %s: %s, after the event was sent: it may have been published (outcome "
                     "unknown%s)", b->shown, s == NATS_TIMEOUT ? "no acknowledgement within the timeout"
                                                                  : m0_nats_error(s), hint);
            rc = M0_BROKER_UNKNOWN;
        }
        break;
    }
    m0_nats_restore_signals(&old);
    m0_buf_free(&subject);
    m0_buf_free(&msgid);
    return rc;
}

int m0_broker_nats_counter(uint64_t *out, char *err, size_t cap)
{
    *out = 0;
    jsCtx *js = publisher(err, cap);
    if (js == NULL)
        return M0_ERR;
    struct m0_nats_state st;
    sigset_t old;
    m0_nats_block_signals(&old);
    int rc = m0_nats_stream_state(js, M0_NATS_RECONCILE, &st, err, cap);
    m0_nats_restore_signals(&old);
    if (rc == M0_OK)
        *out = st.last;
    return rc;
}
