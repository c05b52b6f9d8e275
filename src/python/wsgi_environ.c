/*
 * wsgi_environ.c — the WSGI environ (PEP 3333 "environ Variables"): a per-target
 * template (wsgi.*, SERVER_*, SCRIPT_NAME) copied per request, plus the
 * request's method, path, query, protocol, peer and headers. Header names
 * become CGI keys through a small cache of interned strings.
 */
#include "m0/wsgi.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "m0/config.h"
#include "m0/grip.h"
#include "m0/grip_item.h"
#include "m0/percent.h"
#include "m0/target.h"

static PyObject *s_REQUEST_METHOD, *s_PATH_INFO, *s_QUERY_STRING, *s_CONTENT_TYPE, *s_CONTENT_LENGTH,
    *s_SERVER_PROTOCOL, *s_REMOTE_ADDR, *s_REMOTE_PORT, *s_wsgi_input, *s_HTTP_1_1, *s_HTTP_1_0,
    *s_empty, *s_GET, *s_POST, *s_HEAD, *s_HTTP_HOST, *s_url_scheme, *s_https;

static const struct {
    PyObject **slot;
    const char *text;
} interned[] = {
    {&s_REQUEST_METHOD, "REQUEST_METHOD"}, {&s_PATH_INFO, "PATH_INFO"},
    {&s_QUERY_STRING, "QUERY_STRING"}, {&s_CONTENT_TYPE, "CONTENT_TYPE"},
    {&s_CONTENT_LENGTH, "CONTENT_LENGTH"}, {&s_SERVER_PROTOCOL, "SERVER_PROTOCOL"},
    {&s_REMOTE_ADDR, "REMOTE_ADDR"}, {&s_REMOTE_PORT, "REMOTE_PORT"}, {&s_wsgi_input, "wsgi.input"},
    {&s_HTTP_1_1, "HTTP/1.1"}, {&s_HTTP_1_0, "HTTP/1.0"}, {&s_empty, ""},
    {&s_GET, "GET"}, {&s_POST, "POST"}, {&s_HEAD, "HEAD"}, {&s_HTTP_HOST, "HTTP_HOST"},
    {&s_url_scheme, "wsgi.url_scheme"}, {&s_https, "https"},
};

/* Environ keys for header names seen before: "user-agent" → HTTP_USER_AGENT.
 * Bounded, filled first come first served; misses build the key. Per
 * process (per interpreter, like the keys themselves), shared by every
 * thread that builds an environ: on a free-threaded build they run at
 * once. An entry is written whole before the count that covers it is
 * published (release), so a reader (acquire) scans only complete entries
 * without a lock; writers append under key_cache_lock, checking again
 * for a twin another thread added meanwhile. An entry is never changed
 * or removed, and its key is immortal (interned, with the cache's own
 * reference). */
#define KEY_CACHE 64
static struct {
    char name[40];
    uint32_t len;
    PyObject *key;
} key_cache[KEY_CACHE];
static _Atomic unsigned key_cache_n;
static pthread_mutex_t key_cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The cached key of h's name among the first n entries (a new
 * reference), or NULL. */
static PyObject *key_cached(const struct m0_hdr *h, unsigned from, unsigned n)
{
    for (unsigned i = from; i < n; i++) {
        if (key_cache[i].len == h->name_len && strncasecmp(key_cache[i].name, h->name, h->name_len) == 0)
            return Py_NewRef(key_cache[i].key);
    }
    return NULL;
}

/* Remember k for h's name when there is room (and no twin was added by
 * another thread since this one looked). */
static void key_remember(const struct m0_hdr *h, PyObject *k, unsigned seen)
{
    if (h->name_len >= sizeof key_cache[0].name)
        return;
    pthread_mutex_lock(&key_cache_lock);
    unsigned n = atomic_load_explicit(&key_cache_n, memory_order_relaxed);
    PyObject *twin = key_cached(h, seen, n);
    if (twin == NULL && n < KEY_CACHE) {
        memcpy(key_cache[n].name, h->name, h->name_len);
        key_cache[n].len = h->name_len;
        key_cache[n].key = Py_NewRef(k);
        atomic_store_explicit(&key_cache_n, n + 1, memory_order_release);
    }
    Py_XDECREF(twin);
    pthread_mutex_unlock(&key_cache_lock);
}

static PyObject *header_key(const struct m0_hdr *h)
{
    unsigned n = atomic_load_explicit(&key_cache_n, memory_order_acquire);
    PyObject *hit = key_cached(h, 0, n);
    if (hit != NULL)
        return hit;
    char small[5 + 256];
    char *key = h->name_len <= 256 ? small : m0_xmalloc(5 + h->name_len);
    memcpy(key, "HTTP_", 5);
    for (uint32_t i = 0; i < h->name_len; i++) {
        char ch = h->name[i];
        key[5 + i] = ch == '-' ? '_' : (char)toupper((unsigned char)ch);
    }
    PyObject *k = PyUnicode_FromStringAndSize(key, 5 + h->name_len);
    if (key != small)
        free(key);
    if (k == NULL)
        return NULL;
    PyUnicode_InternInPlace(&k);
    if (n < KEY_CACHE)
        key_remember(h, k, n);
    return k;
}

static int set_str(PyObject *d, PyObject *key, const char *s, size_t n)
{
    PyObject *v = PyUnicode_DecodeLatin1(s, (Py_ssize_t)n, NULL);
    if (v == NULL)
        return -1;
    int rc = PyDict_SetItem(d, key, v);
    Py_DECREF(v);
    return rc;
}

/* The request's field lines as HTTP_* keys, CONTENT_TYPE and
 * CONTENT_LENGTH (PEP 3333, CGI 1.1 §4.1.18); *have_cl says whether the
 * request had a Content-Length. 0, or -1 with an exception set. */
static int add_headers(PyObject *env, const struct m0_req *r, const struct m0_target *t, int own, int *have_cl)
{
    int grip = t != NULL && t->grip_key != NULL;
    for (unsigned i = 0; i < r->nhdrs; i++) {
        const struct m0_hdr *h = &r->hdrs[i];
        /* GRIP: a client's Grip-* fields never reach the application (a
         * forged Grip-Sig or Grip-Last would steer it), as Pushpin strips
         * them from a client it does not trust; a request the server made
         * itself (own: a next link's Grip-Last, job.h) keeps its own. */
        if (grip && !own && m0_grip_is_field(h->name, h->name_len))
            continue;
        if (h->name_len == 12 && strncasecmp(h->name, "content-type", 12) == 0) {
            if (set_str(env, s_CONTENT_TYPE, h->value, h->value_len) == -1)
                return -1;
            continue;
        }
        if (h->name_len == 14 && strncasecmp(h->name, "content-length", 14) == 0) {
            *have_cl = 1;
            if (set_str(env, s_CONTENT_LENGTH, h->value, h->value_len) == -1)
                return -1;
            continue;
        }
        /* A header whose name has '_' would collide with its '-' twin after
         * the CGI transform; drop it rather than let a client spoof one
         * (the choice nginx and gunicorn make). */
        if (memchr(h->name, '_', h->name_len) != NULL)
            continue;
        PyObject *key = header_key(h);
        if (key == NULL)
            return -1;
        PyObject *prev = PyDict_GetItemWithError(env, key);   /* borrowed */
        PyObject *val;
        if (prev != NULL) {
            /* Repeated field lines combine with ", " (RFC 9110 §5.3);
             * Cookie lines with "; " (RFC 6265 §5.4). */
            int cookie = h->name_len == 6 && strncasecmp(h->name, "cookie", 6) == 0;
            PyObject *more = PyUnicode_DecodeLatin1(h->value, h->value_len, NULL);
            val = more ? PyUnicode_FromFormat(cookie ? "%U; %U" : "%U, %U", prev, more) : NULL;
            Py_XDECREF(more);
        } else if (PyErr_Occurred()) {
            val = NULL;
        } else {
            val = PyUnicode_DecodeLatin1(h->value, h->value_len, NULL);
        }
        int rc = val ? PyDict_SetItem(env, key, val) : -1;
        Py_XDECREF(val);
        Py_DECREF(key);
        if (rc == -1)
            return -1;
    }
    if (grip) {
        /* The proxy's signature (grip_item.h): django-grip's middleware
         * verifies it with the same key and knows a GRIP proxy is in front. */
        size_t n = 0;
        const char *sig = m0_grip_sig_cached(t->grip_key, t->grip_key_len, (int64_t)time(NULL), &n);
        PyObject *v = sig != NULL ? PyUnicode_DecodeLatin1(sig, (Py_ssize_t)n, NULL) : NULL;
        int rc = v != NULL ? PyDict_SetItemString(env, "HTTP_GRIP_SIG", v) : sig != NULL ? -1 : 0;
        Py_XDECREF(v);
        if (rc == -1)
            return -1;
    }
    return 0;
}

/* A TLS listener's request (job.h struct m0_job_tls): mod_ssl's variables,
 * which Django, Flask and WebOb middlewares read: HTTPS=on, SSL_PROTOCOL,
 * SSL_CIPHER, and with a verified client certificate SSL_CLIENT_S_DN (RFC
 * 4514), SSL_CLIENT_CERT (PEM) and SSL_CLIENT_VERIFY=SUCCESS (else NONE). */
static int tls_environ(PyObject *env, const struct m0_job_tls *t)
{
    int peer = t->dn_len > 0;
    PyObject *v = Py_BuildValue("{s:s,s:s,s:s,s:s}", "HTTPS", "on", "SSL_PROTOCOL", t->protocol, "SSL_CIPHER",
                                t->cipher_name, "SSL_CLIENT_VERIFY", peer ? "SUCCESS" : "NONE");
    int rc = v != NULL ? PyDict_Update(env, v) : -1;
    Py_XDECREF(v);
    if (rc == 0 && peer) {
        v = Py_BuildValue("{s:s#,s:s}", "SSL_CLIENT_S_DN", t->peer, (Py_ssize_t)t->dn_len, "SSL_CLIENT_CERT",
                          t->peer + t->dn_len + 1);
        rc = v != NULL ? PyDict_Update(env, v) : -1;
        Py_XDECREF(v);
    }
    return rc;
}

PyObject *m0_environ_build(struct m0_job *job, PyObject *template, PyObject *input)
{
    const struct m0_req *r = &job->req;
    PyObject *env = PyDict_Copy(template);
    if (env == NULL)
        return NULL;

    PyObject *method = strcmp(r->method, "GET") == 0 ? s_GET : strcmp(r->method, "POST") == 0 ? s_POST
                       : strcmp(r->method, "HEAD") == 0 ? s_HEAD : NULL;
    if (method != NULL ? PyDict_SetItem(env, s_REQUEST_METHOD, method) : set_str(env, s_REQUEST_METHOD, r->method, r->method_len))
        goto fail;
    char small[1024];
    /* A mount's prefix is SCRIPT_NAME (in the template); PATH_INFO is the
     * rest of the path (PEP 3333, CGI 1.1 §4.1.5, §4.1.13). */
    size_t skip = job->target != NULL ? job->target->prefix_len : 0;
    char *path = r->path_len < sizeof small ? small : m0_xmalloc(r->path_len + 1);
    size_t plen = m0_percent_decode(r->path + skip, r->path_len - skip, path);
    int rc = set_str(env, s_PATH_INFO, path, plen);
    if (path != small)
        free(path);
    if (rc == -1)
        goto fail;
    if (r->query_len == 0 ? PyDict_SetItem(env, s_QUERY_STRING, s_empty) : set_str(env, s_QUERY_STRING, r->query, r->query_len))
        goto fail;
    if (PyDict_SetItem(env, s_SERVER_PROTOCOL, r->http_minor ? s_HTTP_1_1 : s_HTTP_1_0) == -1)
        goto fail;
    /* The client, after proxy headers from a trusted peer (proxy.h). */
    if (set_str(env, s_REMOTE_ADDR, job->remote_addr, strlen(job->remote_addr)) == -1)
        goto fail;
    if (job->https && PyDict_SetItem(env, s_url_scheme, s_https) == -1)
        goto fail;
    if (job->tls.version != 0 && tls_environ(env, &job->tls) == -1)
        goto fail;
    char port[8];
    int pn = (int)m0_u64_dec(port, job->remote_port);     /* printf cost more than the rest of this */
    if (set_str(env, s_REMOTE_PORT, port, (size_t)pn) == -1)
        goto fail;

    int have_cl = 0;
    if (add_headers(env, r, job->target, job->grip_own, &have_cl) == -1)
        goto fail;
    /* A chunked body has no Content-Length on the wire; it is fully received
     * and decoded by now, so tell frameworks (which read CONTENT_LENGTH
     * bytes) its real size. */
    if (!have_cl && (r->flags & M0_REQ_CHUNKED)) {
        int cn = snprintf(small, sizeof small, "%llu", (unsigned long long)r->body_len);
        if (set_str(env, s_CONTENT_LENGTH, small, (size_t)cn) == -1)
            goto fail;
    }
    /* RFC 9112 §3.2.2: an absolute-form target's authority replaces Host. */
    if (r->authority != NULL && set_str(env, s_HTTP_HOST, r->authority, r->authority_len) == -1)
        goto fail;
    if (PyDict_SetItem(env, s_wsgi_input, input) == -1)
        goto fail;
    return env;
fail:
    Py_DECREF(env);
    return NULL;
}


PyObject *m0_environ_template(const struct m0_target *t, const struct m0_config *cfg, int multithread)
{
    for (size_t i = 0; i < M0_ARRAY_LEN(interned); i++) {
        if (*interned[i].slot == NULL && (*interned[i].slot = PyUnicode_InternFromString(interned[i].text)) == NULL)
            return NULL;
    }
    struct m0_bind_parts b;
    char err[256];
    if (m0_config_bind_parts(cfg, &b, err, sizeof err) != M0_OK) {
        PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    PyObject *m = PyImport_ImportModule("m0");
    if (m == NULL)
        return NULL;
    PyObject *errors = PyObject_GetAttrString(m, "errors");
    Py_DECREF(m);
    if (errors == NULL)
        return NULL;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%d", cfg->bound_port ? cfg->bound_port : b.port);
    PyObject *tpl = Py_BuildValue(
        "{s:(ii),s:s,s:O,s:O,s:O,s:O,s:O,s:O,s:s,s:s,s:s,s:s#}",
        "wsgi.version", 1, 0,
        "wsgi.url_scheme", "http",
        "wsgi.errors", errors,
        "wsgi.multithread", multithread ? Py_True : Py_False,
        "wsgi.multiprocess", cfg->workers > 1 ? Py_True : Py_False,
        "wsgi.run_once", Py_False,
        "wsgi.input_terminated", Py_True,
        "wsgi.file_wrapper", (PyObject *)&m0_FileWrapperType,
        "SERVER_NAME", b.path ? "localhost" : b.host,
        "SERVER_PORT", b.path ? "" : portstr,
        "SERVER_SOFTWARE", "m0serve/" M0_VERSION,     /* as gunicorn's "gunicorn/X.Y" */
        "SCRIPT_NAME", t->prefix, (Py_ssize_t)t->prefix_len);
    Py_DECREF(errors);
    return tpl;
}
