"""Malformed requests, table-driven by tests/cases/requests.tsv.

Each case is sent raw on a fresh connection; the server must answer with the
listed status and then close the connection ("close") or serve a second,
valid request on it ("keep").  After a "close" response nothing else may
arrive: a request pipelined behind a refused one (or CONNECT's tunnel bytes)
is never served.  The file format (and its {repeat:N:TEXT}
syntax) is documented at the top of the table.
"""

import re

import pytest

from rawhttp import Conn
from serverproc import REPO

CASES_FILE = REPO / "tests" / "cases" / "requests.tsv"
REPEAT_RE = re.compile(r"\{repeat:(\d+):([^}]*)\}")
ESCAPE_RE = re.compile(r"\\(x[0-9A-Fa-f]{2}|.)", re.S)
ESCAPES = {"r": b"\r", "n": b"\n", "t": b"\t", "\\": b"\\"}
FOLLOW_UP = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"


def decode_raw(text):
    """The request bytes of a raw field: repeats first, then escapes."""
    text = REPEAT_RE.sub(lambda m: m.group(2) * int(m.group(1)), text)
    out, pos = bytearray(), 0
    for match in ESCAPE_RE.finditer(text):
        out += text[pos:match.start()].encode("utf-8")
        code = match.group(1)
        if code in ESCAPES:
            out += ESCAPES[code]
        elif len(code) == 3:
            out.append(int(code[1:], 16))
        else:
            raise ValueError("invalid escape \\%s" % code)
        pos = match.end()
    out += text[pos:].encode("utf-8")
    return bytes(out)


def load_cases():
    cases = []
    for number, line in enumerate(CASES_FILE.read_text("utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        assert len(fields) == 4, "%s:%d: expected 4 TAB-separated fields" % (CASES_FILE, number)
        name, status, close, raw = fields
        cases.append((name, int(status), close, decode_raw(raw)))
    return cases


CASES = load_cases()


@pytest.fixture(scope="module")
def server(start_module_server):
    return start_module_server("conformance:application", "--max-body", "1048576")


def test_case_table_is_well_formed():
    names = [name for name, _, _, _ in CASES]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z0-9_]+", name) for name in names)
    assert all(100 <= status <= 599 and close in ("close", "keep") for _, status, close, _ in CASES)


@pytest.mark.parametrize("status,close,raw", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_request(server, status, close, raw):
    with Conn(server.port, timeout=5) as conn:
        conn.send_tolerant(raw)
        response = conn.read_response()
        assert response.status == status
        if close == "close":
            assert conn.wait_closed(5), "connection still open 5 s after the response"
            assert not conn.buf, "bytes after the response: %r" % bytes(conn.buf[:80])
        else:
            conn.send(FOLLOW_UP)
            assert conn.read_response().status == 200
