/*
 * asgi_tls.c — scope["extensions"]["tls"] (see asgi_tls.h).
 *
 * The scope template's extensions dict is shared by every request of a
 * mount (asgi.c copies the template shallowly): a TLS request gets a copy
 * with "tls" added, never the shared one changed.
 */
#include <Python.h>

#include "m0/asgi_tls.h"
#include "m0/job.h"

int m0_asgi_tls_scope(PyObject *scope, const struct m0_job *job)
{
    const struct m0_job_tls *t = &job->tls;
    if (t->version == 0)
        return 0;
    PyObject *ext = PyDict_GetItemString(scope, "extensions");     /* borrowed */
    ext = ext != NULL && PyDict_Check(ext) ? PyDict_Copy(ext) : PyDict_New();
    if (ext == NULL)
        return -1;
    /* client_cert_name: RFC 4514; client_cert_error: a certificate that
     * failed verification never gets this far (the handshake refused it). */
    PyObject *tls = Py_BuildValue("{s:s,s:[],s:O,s:O,s:i,s:i}", "server_cert", t->server_pem, "client_cert_chain",
                                  "client_cert_name", Py_None, "client_cert_error", Py_None, "tls_version",
                                  (int)t->version, "cipher_suite", (int)t->cipher);
    int rc = tls != NULL ? 0 : -1;
    if (rc == 0 && t->dn_len > 0) {
        PyObject *name = PyUnicode_DecodeUTF8(t->peer, t->dn_len, "replace");
        PyObject *pem = PyUnicode_FromString(t->peer + t->dn_len + 1);
        PyObject *chain = PyDict_GetItemString(tls, "client_cert_chain");
        if (name == NULL || pem == NULL || PyList_Append(chain, pem) == -1 ||
            PyDict_SetItemString(tls, "client_cert_name", name) == -1)
            rc = -1;
        Py_XDECREF(name);
        Py_XDECREF(pem);
    }
    if (rc == 0 && (PyDict_SetItemString(ext, "tls", tls) == -1 || PyDict_SetItemString(scope, "extensions", ext) == -1))
        rc = -1;
    Py_XDECREF(tls);
    Py_DECREF(ext);
    return rc;
}
