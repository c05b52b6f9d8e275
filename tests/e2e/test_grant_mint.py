"""Signed stream grants, the Python side and the flags (issue 18): m0pub.grant
tokens decode with PyJWT and PyJWT's tokens pass m0pub.verify_grant (the C
verifier's rules, also checked on PyJWT vectors in tests/unit/test_jwt.c);
the refusals; grant_url and the Django, Flask and FastAPI helpers; the
server's --grant-* flags (exit 2, a refused key file exit 78), the key file
and grant path it hands its workers, and a ?token= never in the access log.

PyJWT is not in requirements/test.txt yet: the tests that need it skip
without it."""

import base64
import hashlib
import hmac
import http.client
import json
import os
import re
import signal
import sys
import threading
import time

import pytest

import rawhttp
from serverproc import APPS_DIR, REPO, run_to_exit, wait_for
from sse import SSEStream

sys.path.insert(0, str(REPO / "python"))
import m0pub  # noqa: E402

K1 = "k1-secret-0123456789abcdefghijklmnop"
K2 = "k2-secret-ZYXWVUTSRQPONMLKJIHGFEDCBA98"
NOW = 1700000000


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "grant.keys"
    path.write_text("# rotated keys: the last one signs\nk1 %s\n\nk2\t%s\n" % (K1, K2))
    path.chmod(0o600)
    return path


def b64(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def raw_token(header, payload, key):
    signing = b64(header.encode()) + "." + b64(payload.encode())
    return signing + "." + b64(hmac.new(key.encode(), signing.encode(), hashlib.sha256).digest())


def pyjwt():
    return pytest.importorskip("jwt")


# ------------------------------------------------------------------- minting

def test_grant_decodes_with_pyjwt(key_file):
    jwt = pyjwt()
    tok = m0pub.grant(["news", "chat", "news"], ttl=120, sub="alice", key_file=key_file)
    assert jwt.get_unverified_header(tok) == {"alg": "HS256", "typ": "JWT", "kid": "k2"}   # the newest key
    claims = jwt.decode(tok, K2, algorithms=["HS256"])
    assert claims["channels"] == ["news", "chat"]          # a repeat dropped
    assert claims["exp"] - claims["iat"] == 120
    assert claims["sub"] == "alice"
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(tok, K1, algorithms=["HS256"])
    tok = m0pub.grant("news", kid="k1", key_file=key_file)       # one channel as a str
    assert jwt.get_unverified_header(tok)["kid"] == "k1"
    claims = jwt.decode(tok, K1, algorithms=["HS256"])
    assert claims["channels"] == ["news"] and "sub" not in claims
    assert claims["exp"] - claims["iat"] == m0pub.GRANT_TTL


def test_grant_round_trips_through_verify_grant(key_file):
    tok = m0pub.grant(["a", "b"], ttl=60, sub="s", key_file=key_file, now=NOW)
    claims = m0pub.verify_grant(tok, key_file=key_file, now=NOW + 59)
    assert claims == {"channels": ["a", "b"], "exp": NOW + 60, "iat": NOW, "sub": "s"}
    assert m0pub.verify_grant(tok, key_file=key_file, now=NOW + 60 + 29)   # the 30 s leeway
    with pytest.raises(m0pub.GrantError, match="token expired"):
        m0pub.verify_grant(tok, key_file=key_file, now=NOW + 60 + 30)


def test_the_key_file_env_variable(key_file, monkeypatch):
    monkeypatch.setenv("M0_GRANT_KEY_FILE", str(key_file))
    tok = m0pub.grant(["news"])
    assert m0pub.verify_grant(tok)["channels"] == ["news"]
    monkeypatch.delenv("M0_GRANT_KEY_FILE")
    with pytest.raises(m0pub.GrantError, match="M0_GRANT_KEY_FILE"):
        m0pub.grant(["news"])


def test_a_rotated_file_is_read_again(key_file):
    m0pub.grant("news", key_file=key_file)
    key_file.write_text("k3 %s\n" % ("k3-" + "z" * 40))
    tok = m0pub.grant("news", key_file=key_file)
    assert json.loads(base64.urlsafe_b64decode(tok.split(".")[0] + "=="))["kid"] == "k3"


@pytest.mark.parametrize("kwargs, match", [
    (dict(channels=[]), "at least one channel"),
    (dict(channels=["c%d" % i for i in range(33)]), "at most 32"),
    (dict(channels=["m0.internal"]), "reserved"),
    (dict(channels=["caf\u00e9"]), "printable ASCII"),
    (dict(channels=["x" * 201]), "1..200 bytes"),
    (dict(channels=["ok"], ttl=0), "ttl"),
    (dict(channels=["ok"], ttl=True), "ttl"),
    (dict(channels=["ok"], sub=7), "sub"),
    (dict(channels=["ok"], kid="k9"), "no key 'k9'"),
])
def test_grant_refuses_bad_arguments(key_file, kwargs, match):
    with pytest.raises(ValueError, match=match):
        m0pub.grant(key_file=key_file, **kwargs)
    with pytest.raises(TypeError):
        m0pub.grant([b"bytes"], key_file=key_file)


@pytest.mark.parametrize("text, mode, match", [
    ("k1 %s\n" % K1, 0o644, r"group or other users have access \(mode 0644\): chmod 600 it"),
    ("k1 %s\n" % K1, 0o640, "chmod 600"),
    ("k1 short\n", 0o600, ":1: the secret is shorter than 32 bytes"),
    ("k1 %s\nk1 %s\n" % (K1, K2), 0o600, ":2: the kid is given twice"),
    ("# nothing\n", 0o600, "no key"),
    ("k1\n", 0o600, ":1: want KID SECRET"),
])
def test_key_file_refusals_match_the_server(tmp_path, text, mode, match):
    path = tmp_path / "keys"
    path.write_text(text)
    path.chmod(mode)
    with pytest.raises(m0pub.GrantError, match=match):
        m0pub.grant("news", key_file=path)
    # The server refuses the same file, with the same words, exit 78.
    code, err = run_to_exit(["grant_app:application", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0",
                             "--grant-key-file", str(path)])
    assert code == 78, err
    assert len(err.strip().splitlines()) == 1 and re.search(match, err), err
    assert "secret-" not in err


# ------------------------------------------------------- PyJWT -> verify_grant

def test_pyjwt_tokens_pass_verify_grant(key_file):
    jwt = pyjwt()
    claims = {"channels": ["news"], "exp": NOW + 600, "sub": "bob"}
    for kid, key in (("k1", K1), ("k2", K2)):
        tok = jwt.encode(claims, key, algorithm="HS256", headers={"kid": kid})
        assert m0pub.verify_grant(tok, key_file=key_file, now=NOW)["sub"] == "bob"


def test_pyjwt_refusals(key_file, tmp_path):
    jwt = pyjwt()
    good = {"channels": ["news"], "exp": NOW + 600}

    def refused(tok, match, **kw):
        with pytest.raises(m0pub.GrantError, match=match):
            m0pub.verify_grant(tok, key_file=kw.get("key_file", key_file), now=NOW)

    k1 = {"kid": "k1"}
    refused(jwt.encode(good, None, algorithm="none", headers=k1), r"algorithm \(HS256 only\)")
    refused(jwt.encode(good, K1 * 2, algorithm="HS384", headers=k1), "HS256 only")
    refused(raw_token('{"alg":"RS256","kid":"k1"}', json.dumps(good), K1), "HS256 only")
    refused(jwt.encode(good, K2, algorithm="HS256", headers=k1), "invalid token signature")   # another kid's key
    refused(jwt.encode(good, K1, algorithm="HS256", headers={"kid": "k9"}), "invalid token signature")
    refused(jwt.encode(good, K1, algorithm="HS256"), "invalid token signature")   # no kid, two keys
    refused(jwt.encode(dict(good, exp=NOW - 31), K1, algorithm="HS256", headers=k1), "token expired")
    refused(jwt.encode(dict(good, nbf=NOW + 31), K1, algorithm="HS256", headers=k1), "not yet valid")
    refused(jwt.encode({"channels": ["news"]}, K1, algorithm="HS256", headers=k1), "no exp claim")
    refused(jwt.encode(dict(good, channels="news"), K1, algorithm="HS256", headers=k1), "not a list")
    refused(jwt.encode(dict(good, channels=["m0.x"]), K1, algorithm="HS256", headers=k1), "invalid channel")
    refused(jwt.encode(dict(good, channels=[]), K1, algorithm="HS256", headers=k1), "no channel")
    refused(raw_token('{"alg":"HS256","kid":"k1"}', '{"channels":["a"],"exp":%d,"exp":%d}' % (NOW + 9, NOW + 9), K1),
            "malformed token claims")
    refused(raw_token('{"alg":"HS256","alg":"HS256","kid":"k1"}', json.dumps(good), K1), "malformed token header")
    refused(jwt.encode(dict(good, pad="x" * 4000), K1, algorithm="HS256", headers=k1), "too large")
    tok = jwt.encode(good, K1, algorithm="HS256", headers=k1)
    refused(tok + "=", "malformed token")
    refused(tok.replace(".", "+", 1), "malformed token")
    # A flipped byte in each of the three parts.
    h, p, s = tok.split(".")
    for i, part in enumerate((h, p, s)):
        flipped = part[:3] + ("A" if part[3] != "A" else "B") + part[4:]
        refused(".".join([h, p, s][:i] + [flipped] + [h, p, s][i + 1:]), "malformed|signature|algorithm|header")
    # The file's only key verifies a token without kid.
    one = tmp_path / "one"
    one.write_text("k1 %s\n" % K1)
    one.chmod(0o600)
    assert m0pub.verify_grant(jwt.encode(good, K1, algorithm="HS256"), key_file=one, now=NOW)


# ------------------------------------------------------------------ grant_url

def test_grant_url_and_the_framework_helpers(key_file, monkeypatch):
    jwt = pyjwt()
    monkeypatch.setenv("M0_GRANT_KEY_FILE", str(key_file))
    monkeypatch.setenv("M0_GRANT_PATH", "/rt")
    url = m0pub.grant_url(["news"], sub="alice")
    assert url.startswith("/rt/sse?token=")
    assert jwt.decode(url.split("token=")[1], K2, algorithms=["HS256"])["sub"] == "alice"
    assert m0pub.grant_url("news", ws=True, prefix="/live/").startswith("/live/ws?token=")
    monkeypatch.delenv("M0_GRANT_PATH")
    with pytest.raises(m0pub.GrantError, match="grant path"):
        m0pub.grant_url("news")
    monkeypatch.setenv("M0_GRANT_PATH", "/rt")

    import flask
    from m0serve.flask import grant_url as flask_url
    app = flask.Flask(__name__)
    with app.test_request_context("/page", base_url="https://example.com:8443/app"):
        assert flask_url("news").startswith("/rt/sse?token=")
        assert flask_url("news", external=True).startswith("https://example.com:8443/rt/sse?token=")
        assert flask_url("news", ws=True, external=True).startswith("wss://example.com:8443/rt/ws?token=")

    from starlette.requests import Request
    from m0serve.fastapi import grant_url as fastapi_url
    req = Request({"type": "http", "method": "GET", "scheme": "http", "server": ("example.com", 8000),
                   "path": "/api/page", "root_path": "/api", "query_string": b"", "headers": [(b"host", b"example.com:8000")]})
    assert fastapi_url("news", request=req).startswith("http://example.com:8000/rt/sse?token=")   # not under root_path
    assert fastapi_url("news", request=req, ws=True).startswith("ws://example.com:8000/rt/ws?token=")
    assert fastapi_url("news").startswith("/rt/sse?token=")

    from django.conf import settings
    if not settings.configured:
        settings.configure(ALLOWED_HOSTS=["example.com"])
    from django.test import RequestFactory
    from m0serve.django import grant_url as django_url
    req = RequestFactory().get("/page", HTTP_HOST="example.com", secure=True)
    assert django_url("news", request=req).startswith("https://example.com/rt/sse?token=")
    assert django_url(["news"], request=req, ws=True, sub="x").startswith("wss://example.com/rt/ws?token=")
    tok = django_url("news", kid="k1").split("token=")[1]
    assert jwt.decode(tok, K1, algorithms=["HS256"])["channels"] == ["news"]


# ------------------------------------------------------------- the server side

def test_bad_grant_flags_are_one_line():
    base = ["grant_app:application", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0"]
    for args, want in ((["--grant-path", "/rt"], "m0serve: error: --grant-path: needs --grant-key-file"),
                       (["--realtime", "--grant-path", "/rt"], "m0serve: error: --grant-path: needs --grant-key-file"),
                       (["--grant-cookie", "g"], "m0serve: error: --grant-cookie: needs --grant-path"),
                       (["--grant-cors-origin", "*"], "m0serve: error: --grant-cors-origin: invalid value '*'"),
                       (["--grant-key-file", "/no/such/keys"], "m0serve: error: --grant-key-file: cannot open")):
        code, err = run_to_exit(base + args)
        assert len(err.strip().splitlines()) == 1 and err.startswith(want), (args, err)
        assert code == (78 if "/no/such" in args[-1] else 2), (args, code, err)


@pytest.mark.parametrize("flag", ["--grant-key-file", "--grip-key-file"])
def test_one_rule_for_both_key_files(tmp_path, flag):
    """Issue 27 item 20: --grant-key-file and --grip-key-file are refused by
    one rule (keyfile.h) with one message shape and one exit status, 78: the
    flag's syntax is right, the file it names is configuration."""
    base = ["grant_app:application", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0", "--realtime"]
    key = tmp_path / "keys"
    key.write_text("k1 %s\n" % K1)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    cases = [(0o640, key, "group or other users have access (mode 0640): chmod 600 it"),
             (0o604, key, "group or other users have access (mode 0604): chmod 600 it"),
             (0o620, key, "group or other users have access (mode 0620): chmod 600 it"),
             (0o610, key, "group or other users have access (mode 0610): chmod 600 it"),
             (None, fifo, "not a regular file"),
             (None, tmp_path, "not a regular file")]
    for mode, path, why in cases:
        if mode is not None:
            path.chmod(mode)
        code, err = run_to_exit(base + [flag, str(path)])
        assert (code, err.strip()) == (78, "m0serve: error: %s: %s: %s" % (flag, path, why)), (mode, path)
    code, err = run_to_exit(base + [flag, str(tmp_path / "missing")])
    assert code == 78 and err.strip() == "m0serve: error: %s: cannot open %s: No such file or directory" % (
        flag, tmp_path / "missing")


def test_workers_mint_with_the_servers_key_file_and_no_token_is_logged(start_server, key_file):
    jwt = pyjwt()
    server = start_server("grant_app:application", "--realtime", "--grant-key-file", str(key_file),
                          "--grant-path", "/rt/", "--access-log")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/url")
    url = conn.getresponse().read().decode()
    assert url.startswith("/rt/sse?token="), url
    tok = url.split("token=")[1]
    claims = jwt.decode(tok, K2, algorithms=["HS256"])
    assert claims["channels"] == ["news", "chat"] and claims["sub"] == "alice"
    # A path outside the grant path goes to the app as ever; the access log
    # has the request, never the token (test_grants.py: the grant path's own).
    conn.request("GET", "/anything?a=1&token=%s&b=2" % tok)
    conn.getresponse().read()
    line = server.stdout.wait_for(re.compile(r'"GET /anything\?.*'), 5)
    assert line, server.stdout.text()
    assert "/anything?a=1&token=REDACTED&b=2 HTTP/1.1" in line.group(0)
    assert tok not in server.stdout.text() and tok.split(".")[2] not in server.stdout.text()


# ------------------------------------------------------------ key rotation

def _kid(tok):
    return json.loads(base64.urlsafe_b64decode(tok.split(".")[0] + "=="))["kid"]


class MintLoad:
    """Clients that each, in a loop, ask the app for a grant URL (a fresh
    connection) and subscribe with it (another one): every outcome is
    recorded as (phase, mint kid, status)."""

    def __init__(self, port, clients=4):
        self.port = port
        self.phase = "start"
        self.results = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(clients)]
        for t in self.threads:
            t.start()

    def _one(self):
        phase = self.phase
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("GET", "/url")
        url = conn.getresponse().read().decode()
        conn.close()
        with SSEStream(self.port, url) as s:
            status = s.status
        with self.lock:
            self.results.append((phase, _kid(url.split("token=")[1]), status))

    def _run(self):
        while not self.stop.is_set():
            try:
                self._one()
            except Exception as e:      # noqa: BLE001 -- recorded, judged by the test
                with self.lock:
                    self.results.append((self.phase, None, repr(e)))

    def enter(self, phase, at_least=20, timeout=30):
        """Switch to phase and wait until at_least pairs completed in it."""
        self.phase = phase
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                done = sum(1 for r in self.results if r[0] == phase)
            if done >= at_least:
                return
            assert time.monotonic() < deadline, (phase, done)
            time.sleep(0.02)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(15)

    def of(self, phase):
        with self.lock:
            return [r for r in self.results if r[0] == phase]


def _resigned(url, kid, key):
    """url with its grant signed again with key, as kid (the claims kept)."""
    head, tok = url.split("token=")
    h, payload, _ = tok.split("&")[0].split(".")
    header = json.loads(base64.urlsafe_b64decode(h + "=="))
    header["kid"] = kid
    payload = base64.urlsafe_b64decode(payload + "==").decode()
    rest = tok[len(tok.split("&")[0]):]
    return head + "token=" + raw_token(json.dumps(header, separators=(",", ":")), payload, key) + rest


def _secret(n):
    return "k%d-secret-%s" % (n, "0123456789abcdefghijklmnopqrstuv")


def _wait_lines(stream, regex, count, timeout=15):
    """Wait until count lines of stream match regex."""
    deadline = time.monotonic() + timeout
    while True:
        found = sum(1 for line in stream.text().splitlines() if regex.search(line))
        if found >= count:
            return found
        assert time.monotonic() < deadline, (regex.pattern, found, stream.text()[-3000:])
        time.sleep(0.02)


def test_rotation_under_load_with_a_failing_reload(start_server, tmp_path):
    """Issue 27 item 9: a grant minted by a worker is signed with a key the
    serving workers accept. The new key is added to the file while the
    workers know only k1, and the reload fails: every grant minted goes on
    being accepted (the workers sign with the k1 they verify with, not with
    the file's new last line). A worker that then replaces a serving one
    gets the serving generation's keys, not the failed reload's: it signs
    with k1 and refuses a grant signed with k2 (the signer alone would not
    show it: the successor would sign with k1 anyway, the newest key its
    sibling verifies). Then
    reloads that succeed, each appending a key: the new workers sign with
    the previous key while an old worker lives (one still serving, or
    draining with a kept connection, refuses the new key) and with the new
    one once every old worker has exited (each says so) -- never a 401,
    over six overlaps."""
    path = tmp_path / "keys"
    path.write_text("k1 %s\n" % K1)
    path.chmod(0o600)
    fail = tmp_path / "fail"
    server = start_server("grant_app:application", "--realtime", "--grant-key-file", str(path),
                          "--grant-path", "/rt", workers=2, env={"GRANT_APP_FAIL": str(fail)})
    load = MintLoad(server.port)
    last = 7
    try:
        load.enter("before")
        # The operator adds k2 (as the last line); the reload fails.
        load.phase = "failing"
        old = set(server.worker_pids())
        lines = ["k1 %s" % K1, "k2 %s" % K2]
        path.write_text("\n".join(lines) + "\n")
        fail.write_text("x")
        server.signal(signal.SIGHUP)
        assert server.stderr.wait_for(re.compile(r"reload failed"), 30), server.stderr.text()
        load.enter("failed")
        # A serving worker dies and is replaced: its successor must sign
        # with the keys its sibling (still k1 only) verifies with.
        fail.unlink()
        load.phase = "replacing"
        victim = sorted(old)[0]
        os.kill(victim, signal.SIGKILL)
        server.wait_workers(lambda pids: victim not in pids and len(pids) == 2 and len(set(pids) & old) == 1)
        load.enter("replaced", at_least=40)
        # ... and verifies with them: a grant signed with the failed reload's
        # k2 is refused by the successor as by its sibling (each asked on a
        # connection that /url showed to be that worker's).
        (successor,) = set(server.worker_pids()) - old
        forged = _resigned(_mint(server.port)[1], "k2", K2)
        asked = set()
        deadline = time.monotonic() + 15
        while asked != set(server.worker_pids()):
            with rawhttp.Conn(server.port, timeout=10) as conn:
                pid = int(conn.request("GET", "/url").header("X-Pid"))
                conn.send(rawhttp.build_request("GET", forged, host="127.0.0.1:%d" % server.port))
                _, status, _, _ = conn.read_head()
                assert status == 401, (pid, pid == successor, status)
                asked.add(pid)
            assert time.monotonic() < deadline, asked
        # Reloads that succeed: k2 (already in the file), then k3..k7.
        for n in range(2, last + 1):
            if n > 2:
                lines.append("k%d %s" % (n, _secret(n)))
                path.write_text("\n".join(lines) + "\n")
            load.phase = "reloading-%d" % n
            old = set(server.worker_pids())
            server.signal(signal.SIGHUP)
            server.wait_workers(lambda pids: len(pids) == 2 and not (set(pids) & old))
            _wait_lines(server.stderr, re.compile(r"worker signs grants with key k%d from now on" % n), 2)
            # Rotated means the old workers are gone, not only unlisted: one
            # still draining may take a connection queued on its socket and
            # answer it 503 (seen once on a fresh machine).
            wait_for(lambda: not any(os.path.exists("/proc/%d" % p) for p in old), 15, "the old workers' exit")
            load.enter("rotated-%d" % n, at_least=10)
    finally:
        load.close()
    # Never a 401: every grant minted is accepted by every worker. Otherwise
    # every answer is 200, but for two that say nothing of the keys: SIGKILL
    # drops the connections the victim held (closed), and a subscription an
    # old worker accepted just before it began to drain is told 503 (it holds
    # nothing new: retry) -- with the grant verified first.
    assert not [r for r in load.results if r[2] == 401], len(load.results)
    bad = [r for r in load.results if r[2] != 200 and not (r[0] == "replacing" and r[1] is None)
           and not (r[0].startswith("reloading") and r[2] == 503)]
    assert not bad, (bad[:5], len(bad), len(load.results))
    for phase in ("before", "failed", "replaced"):
        assert {r[1] for r in load.of(phase)} == {"k1"}, phase
    for n in range(2, last + 1):
        assert {r[1] for r in load.of("reloading-%d" % n)} <= {"k%d" % (n - 1), "k%d" % n}, n
        assert load.of("reloading-%d" % n), n
        assert {r[1] for r in load.of("rotated-%d" % n)} == {"k%d" % n}, n


def _mint(port):
    """(pid of the worker that answered, the grant URL) of one GET /url."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/url")
        resp = conn.getresponse()
        return int(resp.getheader("X-Pid")), resp.read().decode()
    finally:
        conn.close()


def test_an_old_worker_accepts_what_the_new_ones_mint_until_it_exits(start_server, tmp_path):
    """Issue 27 item 9, the overlap: after a reload that appends k2 to {k1},
    an old worker draining with a view in flight (--graceful-timeout) lives
    on beside the new one and verifies with k1 only -- its kept connection
    still brings it a request. Every grant the new worker mints meanwhile is
    signed with k1, and the old worker accepts it (a draining worker answers
    a valid grant 503, not held; a refused one is 401). Once it has exited
    the new worker signs with k2 (and says so)."""
    path = tmp_path / "keys"
    path.write_text("k1 %s\n" % K1)
    path.chmod(0o600)
    gate = tmp_path / "gate"
    server = start_server("grant_app:application", "--realtime", "--grant-key-file", str(path),
                          "--grant-path", "/rt", "--graceful-timeout", "60", env={"GRANT_APP_GATE": str(gate)})
    (old,) = server.worker_pids()
    held = rawhttp.Conn(server.port, timeout=30)
    held.send(rawhttp.build_request("GET", "/block", host="127.0.0.1:%d" % server.port))
    _, status, _, headers = held.read_head()            # the view runs, its head promised keep-alive
    assert status == 200 and ("X-Pid", str(old)) in headers, headers
    path.write_text("k1 %s\nk2 %s\n" % (K1, K2))
    server.signal(signal.SIGHUP)
    assert server.stderr.wait_for(re.compile(r"SIGHUP: the new workers sign grants with k1, .* then with k2"), 10)
    deadline = time.monotonic() + 15
    while True:                                           # until the new worker serves
        pid, url = _mint(server.port)
        if pid != old:
            break
        assert time.monotonic() < deadline
    minted = []
    for _ in range(30):
        pid, url = _mint(server.port)
        assert pid != old
        minted.append(url)
    assert {_kid(u.split("token=")[1]) for u in minted} == {"k1"}
    with SSEStream(server.port, minted[-1]) as s:
        assert s.status == 200                             # the new worker accepts them
    assert old in server.worker_pids()
    # The old worker, still alive: the view ends, and the kept connection's
    # next request is the last grant minted.
    gate.write_text("go")
    assert held._read_chunked() == b"started\nreleased\n"
    resp = held.request("GET", minted[-1])
    assert resp.status == 503, resp                     # accepted, not held (it drains); 401: refused
    assert resp.header("Connection") == "close"
    held.close()
    server.wait_workers(lambda pids: old not in pids)
    assert server.stderr.wait_for(re.compile(r"worker signs grants with key k2 from now on"), 10), \
        server.stderr.text()
    for _ in range(10):
        pid, url = _mint(server.port)
        assert _kid(url.split("token=")[1]) == "k2"
        with SSEStream(server.port, url) as s:
            assert s.status == 200


def test_replacing_every_key_at_once_warns(start_server, tmp_path):
    """A file with no key in common with the serving workers' cannot rotate
    seamlessly: the SIGHUP says so, and the new workers sign with its last
    key at once (nothing they could sign with is known to the old ones)."""
    path = tmp_path / "keys"
    path.write_text("k1 %s\n" % K1)
    path.chmod(0o600)
    server = start_server("grant_app:application", "--realtime", "--grant-key-file", str(path),
                          "--grant-path", "/rt")
    (old,) = server.worker_pids()
    path.write_text("k3 %s\n" % _secret(3))
    server.signal(signal.SIGHUP)
    assert server.stderr.wait_for(re.compile(r"SIGHUP: .*keys shares no key with the workers serving: until "
                                             r"they have exited, they refuse the grants the new workers mint"), 10)
    server.wait_workers(lambda pids: pids and old not in pids)
    pid, url = _mint(server.port)
    assert pid != old and _kid(url.split("token=")[1]) == "k3"
    with SSEStream(server.port, url) as s:
        assert s.status == 200
    assert "worker signs grants with key" not in server.stderr.text()


def test_grant_path_implies_realtime_as_grip_key_file_does(start_server, key_file):
    """One rule for the flags that need held streams (issue 27 item 20):
    --grip-key-file implies --realtime, and so does --grant-path; a server
    started without --realtime holds a grant's stream."""
    server = start_server("grant_app:application", "--grant-key-file", str(key_file), "--grant-path", "/rt")
    assert "realtime=on" in server.banner, server.banner
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/url")
    url = conn.getresponse().read().decode()
    assert url.startswith("/rt/sse?token="), url
    conn.close()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", url)
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
    conn.close()
