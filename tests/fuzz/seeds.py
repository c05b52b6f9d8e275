#!/usr/bin/python3
"""seeds.py — write the seed inputs of the fuzz drivers (tests/fuzz/fuzz_*.c).

    /usr/bin/python3 tests/fuzz/seeds.py OUTDIR

writes OUTDIR/<driver>/seed-NNN-<name> in each driver's input layout (see
the comment at the top of each driver). `make fuzz-seeds` runs it and
`make fuzz-merge FUZZ=<driver>` folds the seeds, minimized, into the
committed corpus tests/fuzz/corpus/<driver>/. The http seeds are the rows of
tests/cases/requests.tsv (decoded as tests/unit/cases.c decodes them) plus
chunked bodies, pipelined requests, 100-continue, upgrades and spills.
"""

import json
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "..", "cases", "requests.tsv")

# fuzz_http: byte 0 the limits (two bits each: target, head bytes, header
# count, body), byte 1 body_mem (bits 0-1) and read sizes (bits 2-3), then a
# 4-byte seed of the read sizes.
BIG_LIMITS = 0xFF          # 8192, 16384, 100 headers, 1 MiB body
SMALL_LIMITS = 0x95        # target 32, head bytes 128, 2 headers, body 300


def http_prefix(limits=BIG_LIMITS, body_mem=3, reads=2, seed=0x01020304):
    return bytes([limits, body_mem | reads << 2]) + struct.pack("<I", seed)


def decode_case(raw):
    """requests.tsv raw field: {repeat:N:TEXT} first, then the escapes."""
    raw = re.sub(r"\{repeat:(\d+):([^}]*)\}", lambda m: m.group(2) * int(m.group(1)), raw)
    out, i = bytearray(), 0
    while i < len(raw):
        c = raw[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        e = raw[i + 1]
        if e == "x":
            out.append(int(raw[i + 2:i + 4], 16))
            i += 4
            continue
        out += {"r": b"\r", "n": b"\n", "t": b"\t", "\\": b"\\"}[e]
        i += 2
    return bytes(out)


def http_seeds():
    seeds = {}
    with open(CASES, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            name, _status, _close, raw = line.split("\t", 3)
            body = decode_case(raw)
            if len(body) > 2048:
                continue          # limit cases: the small limits below reach them
            seeds["tsv-" + name] = http_prefix() + body
    get = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"
    post = b"POST /p?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
    chunked = (b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"3\r\nabc\r\n5;ext=1\r\ndefgh\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n")
    more = {
        "pipelined": get + post + chunked + b"HEAD /h HTTP/1.1\r\nHost: a\r\n\r\n",
        "pipelined-bytewise": (get + post, http_prefix(reads=0)),
        "chunked-spill": (chunked, http_prefix(body_mem=1, reads=1)),
        "cl-spill": (b"PUT /u HTTP/1.1\r\nHost: a\r\nContent-Length: 40\r\n\r\n" + b"z" * 40,
                     http_prefix(body_mem=1, reads=1)),
        "cl-no-mem": (post, http_prefix(body_mem=0, reads=3)),
        "expect-continue": b"PUT /u HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\ndata",
        "upgrade": (b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
                    b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58"),
        "origin": (b"GET /rt/ws HTTP/1.1\r\nHost: [::1]:8000\r\nOrigin: https://[::1]:8000\r\n\r\n"
                   b"GET /rt/sse HTTP/1.1\r\nHost: a\r\nOrigin: http://a:80\r\n\r\n"),
        "options-asterisk": b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
        "absolute-query": b"GET http://example.com:8080?x=1 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
        "http10-keepalive": b"GET /k HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + get,
        "leading-crlf": b"\r\n\r\n" + get,
        "connection-list": b"GET / HTTP/1.1\r\nHost: [::1]:80\r\nConnection: keep-alive, Upgrade\r\n\r\n",
        "te-list": b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        "small-target": (b"GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\nHost: a\r\n\r\n",
                         http_prefix(SMALL_LIMITS)),
        "small-headers": (b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", http_prefix(SMALL_LIMITS)),
        "small-head-bytes": (b"GET / HTTP/1.1\r\nHost: a\r\nX-Long: " + b"v" * 150 + b"\r\n\r\n",
                             http_prefix(SMALL_LIMITS)),
        "small-body": (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 301\r\n\r\n" + b"b" * 301,
                       http_prefix(SMALL_LIMITS)),
        "small-chunked": (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                          b"12c\r\n" + b"c" * 300 + b"\r\n1\r\nd\r\n0\r\n\r\n", http_prefix(SMALL_LIMITS)),
        "too-many-trailers": (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                              b"0\r\nT1: a\r\nT2: b\r\nT3: c\r\n\r\n", http_prefix(SMALL_LIMITS)),
    }
    for name, v in more.items():
        body, prefix = v if isinstance(v, tuple) else (v, http_prefix())
        seeds[name] = prefix + body
    return seeds


def bus_hold(slot, gen, last_id, pid, channel):
    return (b"M0h\0" + struct.pack("<HH", len(channel), 0) + struct.pack("<QII", last_id, slot, gen)
            + channel + struct.pack("<I", pid))


def bus_seeds():
    frame = b"id: 7\nevent: message\ndata: hello\n\n"
    return {
        "hold": bus_hold(17, 3, 42, 4242, b"news"),
        "hold-empty-channel": bus_hold(0, 0, 0, 1, b""),
        "hold-max": bus_hold(0xFFFFFFFF, 0xFFFFFFFF, 2**64 - 1, 0xFFFFFFFF, b"room:42"),
        "publish": b"M0p\0" + struct.pack("<HH", 4, 0) + struct.pack("<QII", 7, 0, 0) + b"news" + frame,
        "publish-no-payload": b"M0p\0" + struct.pack("<HH", 2, 0) + struct.pack("<QII", 1, 0, 0) + b"c1",
        # byte 3 = 1: the driver stretches it one byte past the payload bound
        "publish-stretched-over": b"M0p\1" + struct.pack("<HH", 4, 0) + struct.pack("<QII", 9, 0, 0) + b"news",
        "channel-overrun": b"M0h\0" + struct.pack("<HH", 300, 0) + struct.pack("<QII", 1, 2, 3) + b"abc",
    }


def sse_event(id_=None, name=None, data=b""):
    flags = (1 if id_ is not None else 0) | (2 if name is not None else 0)
    out = bytes([flags])
    if id_ is not None:
        out += struct.pack("<Q", id_)
    if name is not None:
        out += bytes([len(name)]) + name
    return out + struct.pack("<H", len(data)) + data


def sse_seeds():
    return {
        "one": sse_event(7, b"message", b"hello"),
        "lines": sse_event(None, None, b"a\nb\r\nc\rd\r\n\n"),
        "two": sse_event(1, None, b"") + sse_event(None, b"", b" leading space") + sse_event(2**64 - 1, b"x:y", b"\0z"),
        "last-id-max": b"18446744073709551615",
        "last-id-over": b"18446744073709551616",
        "last-id-wrap": b"30000000000000000000",
        "last-id-long": b"000000000000000000001",
        "last-id-small": b"12",
        "last-id-junk": b"12a",
    }


def op_sub(slot, chan, how):
    return bytes([0, slot, chan, how])


def op_pub(chan, gap=0, pad=0):
    return bytes([2, chan, gap, pad])


def registry_seeds():
    # header: journal events (byte 0 % 8), journal bytes index, floor (and
    # bit 3: free with fan-outs pending); opcodes mod 9
    fanout = bytes([3])
    budget = lambda b: bytes([5, b])
    cap = lambda c: bytes([6, c])
    drain = bytes([7])
    unsub = lambda s: bytes([1, s])
    floor = lambda d: bytes([4, d])
    burst = lambda k: bytes([8, k])
    return {
        "fanout": bytes([5, 6, 0]) + op_sub(1, 0, 0) + op_sub(2, 0, 0) + op_sub(3, 1, 0) + op_pub(0) + op_pub(1)
        + op_pub(0, 1),
        "resume": bytes([5, 6, 0]) + op_pub(0) + op_pub(0) + op_pub(1) + op_pub(0) + op_sub(4, 0, 3) + op_sub(5, 0, 1 | 2 << 2),
        "gap-short-journal": bytes([2, 6, 0]) + op_pub(2) + op_pub(2) + op_pub(2) + op_pub(2) + op_sub(9, 2, 3),
        "gap-floor": bytes([5, 6, 5]) + op_pub(0) + op_sub(1, 0, 3) + floor(2) + op_sub(2, 0, 3),
        "no-journal": bytes([0, 0, 0]) + op_pub(3, 2) + op_sub(10, 3, 1 | 11 << 2) + op_pub(3),
        "budget-slices": bytes([5, 6, 0]) + budget(1) + op_sub(1, 0, 0) + op_sub(2, 0, 0) + op_sub(3, 0, 0)
        + op_pub(0) + op_pub(0) + fanout + unsub(2) + fanout + op_sub(2, 0, 0) + fanout + drain,
        "journal-cap": bytes([7, 7, 0]) + cap(2) + op_pub(0, 0, 50) + op_pub(1, 0, 50) + op_pub(2, 0, 50)
        + op_sub(1, 0, 3) + op_sub(2, 1, 3) + op_sub(3, 2, 3),
        "big-frame": bytes([5, 1, 0]) + op_sub(1, 0, 0) + op_pub(0, 0, 200) + unsub(1) + op_sub(1, 0, 3),
        "ahead": bytes([5, 6, 0]) + op_pub(0) + op_sub(1, 0, 2 | 3 << 2) + op_pub(0) + op_pub(0, 3),
        "free-pending": bytes([5, 6, 8]) + budget(1) + op_sub(1, 0, 0) + op_sub(2, 0, 0) + op_pub(0) + op_pub(0),
        # 512 new channels per burst: the hash table grows past 2048.
        "grow": bytes([5, 6, 0]) + op_sub(1, 0, 0) + op_pub(0) + burst(3) * 5 + op_pub(0) + op_sub(2, 0, 3),
    }


# fuzz_jwt: flags (the signer's kid), a 2-byte position, then a token or a
# claims text. The tokens are tests/unit/jwt_vectors.h's (PyJWT's, mostly).
VECTORS = os.path.join(HERE, "..", "unit", "jwt_vectors.h")


def jwt_prefix(mode=0, pos=0):
    return bytes([mode]) + struct.pack("<H", pos)


def jwt_seeds():
    with open(VECTORS) as f:
        text = f.read()
    seeds = {}
    for name, tok in re.findall(r'\{"(\w+)",\s*"([^"]*)"\}', text):
        seeds["tok-" + name] = jwt_prefix(0, len(tok) // 2) + tok.encode()
    now = 1700000000
    claims = {
        "grant": '{"channels":["news","chat"],"exp":%d,"sub":"alice"}' % (now + 60),
        "times": '{"channels":["a"],"exp":%d.5,"nbf":%d,"iat":%d}' % (now, now - 30, now + 30),
        "no-exp": '{"channels":["a"]}',
        "bad-channel": '{"channels":["m0.x","\\u0001"],"exp":%d}' % (now + 1),
        "dup": '{"exp":1,"exp":2}',
        "nested": '{"exp":%d,"channels":[["a"]],"x":{"y":[1,2.5e3,null,true]}}' % (now + 5),
        "unicode": '{"exp":%d,"sub":"\\u00e9\\ud83d\\ude00","channels":["caf\\u00e9"]}' % (now + 5),
    }
    for i, (name, c) in enumerate(sorted(claims.items())):
        seeds["claims-" + name] = jwt_prefix(i % 4, 7 * i) + c.encode()
    seeds["b64-padded"] = jwt_prefix() + b"Zm9vYg=="
    seeds["b64-bits"] = jwt_prefix() + b"Zh"
    return seeds


def resp(*items):
    """RESP2 for nested Python values: bytes -> bulk, int -> integer, None -> nil,
    list -> array, ("+", text) status, ("-", text) error."""
    out = b""
    for v in items:
        if isinstance(v, tuple):
            out += v[0].encode() + v[1].encode() + b"\r\n"
        elif isinstance(v, bytes):
            out += b"$%d\r\n%s\r\n" % (len(v), v)
        elif isinstance(v, int):
            out += b":%d\r\n" % v
        elif v is None:
            out += b"$-1\r\n"
        else:
            out += b"*%d\r\n" % len(v) + resp(*v)
    return out


def broker_seeds():
    # fuzz_broker: byte 0 waiting commands (bits 0-2), one more after every
    # Nth reply (bits 3-4), guard off (bit 5); byte 1 the read size; RESP.
    entry = [b"17-0", [b"c", b"news", b"f", b"data: hi\n\n", b"s", b"0"]]
    xread = [[b"m0:log", [entry, [b"18-0", [b"c", b"room", b"f", b"data: x\n\n"]]]]]
    return {
        "hello": bytes([3, 63]) + resp(("+", "OK"), ("+", "OK"), ("+", "PONG")),
        "pong-twice": bytes([1, 63]) + resp(("+", "PONG"), ("+", "PONG")),
        "xread": bytes([2, 7]) + resp(None, xread),
        "resume": bytes([1, 63]) + resp([b"20", 1, [entry]]),
        "counter": bytes([2, 2]) + resp(b"1712345678901234", None),
        "errors": bytes([2, 63]) + resp(("-", "WRONGPASS invalid username-password pair"),
                                        ("-", "NOAUTH Authentication required.")),
        "maxclients": bytes([0, 63]) + resp(("-", "ERR max number of clients reached")),
        "unsolicited": bytes([0, 5]) + resp([b"m0:log", []]),
        "more-later": bytes([1 | 1 << 3, 9]) + resp(("+", "PONG"), 1, b"7", None, xread),
        "unguarded": bytes([0x20, 63]) + resp(("+", "PONG"), xread),
        "big-array": bytes([1, 63]) + b"*99999999\r\n",
        "deep": bytes([1, 63]) + b"*1\r\n" * 9 + b":1\r\n",
        "bad-type": bytes([1, 63]) + b"?what\r\n",
        # Sentinel and ROLE (redis+sentinel://)
        "role-master": bytes([1, 63]) + resp([b"master", 12, [[b"127.0.0.1", b"6380", b"12"]]]),
        "role-replica": bytes([1, 63]) + resp([b"slave", b"127.0.0.1", 6379, b"connected", 12]),
        "master-addr": bytes([2, 63]) + resp([b"10.0.0.5", b"6379"], None),
        "replicas": bytes([1, 31]) + resp([[b"name", b"127.0.0.1:6380", b"ip", b"127.0.0.1", b"port", b"6380",
                                             b"flags", b"slave", b"master-link-status", b"ok",
                                             b"role-reported", b"slave"],
                                            [b"ip", b"127.0.0.1", b"port", b"6381", b"flags",
                                             b"slave,s_down,disconnected", b"master-link-status", b"err"]]),
        "subscribed": bytes([1 | 1 << 3, 63]) + resp([b"subscribe", b"+switch-master", 1],
                                                     [b"message", b"+switch-master",
                                                      b"m0 127.0.0.1 6379 127.0.0.1 6380"],
                                                     [b"message", b"+sdown", b"master m0 127.0.0.1 6380"]),
        "pushed-unguarded": bytes([0x20, 63]) + resp([b"message", b"+odown", b"master m0 10.0.0.1 7000 #quorum 2/2"],
                                                     [b"message", b"-odown", b"slave 127.0.0.1:1 127.0.0.1 1 @ m0"]),
    }


# GRIP header sets, one "Name:value" per line (fuzz_grip.c). The first
# ones are what django-eventstream 5.3.4 and django-grip 3.5.2 emit.
ES_LINK = (b"</events/?link=next&recover=true&es-meta=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
           b"eyJpc3MiOiJlcyIsImV4cCI6MTc5NjE1MTAwMywiY2hhbm5lbHMiOlsidGVzdCJdLCJ1c2VyIjoiYW5vbnltb3VzIn0."
           b"23pk9aAjHtRqiufR-dGh6lxR3DAm8FO6PO-3CN66xdY>; rel=next")


def grip_seeds():
    lines = lambda *ls: b"\n".join(ls)
    return {
        "eventstream": lines(b"Content-Type:text/event-stream", b"Grip-Hold:stream",
                             b"Grip-Channel:events-test; prev-id=0; filter=build-id; filter=skip-users, "
                             b"user-anonymous; filter=require-sub",
                             b"Grip-Keep-Alive:event: keep-alive\\ndata:\\n\\n; format=cstring; timeout=20",
                             b'Grip-Set-Meta:id_format="test:%(events-test)s", user="anonymous"',
                             b"Grip-Link:" + ES_LINK),
        "longpoll": lines(b"Grip-Hold:response", b"Grip-Channel:lp, lp2; prev-id=7", b"Grip-Timeout:30"),
        "keepalive-b64": lines(b"Grip-Hold:stream", b"Grip-Channel:st",
                               b"Grip-Keep-Alive:b'AQI='; format=base64; timeout=15"),
        "keepalive-interval": lines(b"Grip-Keep-Alive:cGluZzMK; format=base64; mode=interval; timeout=3"),
        "status-link": lines(b"Grip-Status:404 Not Here", b"Grip-Link:</n>; rel=next; timeout=9, </g>; rel=gone",
                             b"Grip-Expose-Headers:Content-Type, X-A"),
        "quoted": lines(b'Grip-Channel:a; prev-id="x,y;\\"z", b', b'Grip-Set-Meta:k="v, w", e'),
        "template": b"event: message\nid: %I\ndata: 100%% %(test:%(x)s)I\n\n",
    }


# EPCP publish bodies (fuzz_epcp.c): what gripcontrol 4.4.0 and pubcontrol
# 3.5.0 send, and Pushpin's other shapes.
def epcp_seeds():
    return {
        "send-event": b'{"items": [{"id": "1", "prev-id": "0", "http-stream": {"content-filters": ["build-id"], '
                      b'"content": "event: message\\nid: %I\\ndata: {\\"text\\": \\"hello\\"}\\n\\n"}, '
                      b'"channel": "events-test"}]}',
        "stream-bin": b'{"items": [{"http-stream": {"content-bin": "/wBiaW4="}, "channel": "st"}]}',
        "stream-close": b'{"items": [{"http-stream": {"action": "close"}, "channel": "st"}]}',
        "response": b'{"items": [{"id": "8", "prev-id": "7", "http-response": {"code": 201, "reason": "Made", '
                    b'"headers": {"Content-Type": "text/plain", "X-A": "1"}, "body": "made\\n"}, "channel": "lp"}]}',
        "response-pairs": b'{"items": [{"channel": "lp", "http-response": {"headers": [["Set-Cookie", "a=1"]], '
                          b'"body-bin": "aGk="}}]}',
        "multi": b'{"items": [{"id": "m1", "http-stream": {"content": "s\\n"}, "http-response": {"body": "r\\n"}, '
                 b'"ws-message": {"content": "w"}, "channel": "multi"}]}',
        "ws": b'{"items": [{"ws-message": {"content-bin": "AAE="}, "channel": "ws"}, {"ws-message": {"action": '
              b'"close", "code": 1001, "reason": "bye"}, "channel": "ws"}, {"channel": "p", "ws-message": '
              b'{"type": "ping"}}]}',
        "ws-text-bin": b'{"items": [{"channel": "t", "ws-message": {"type": "text", "content-bin": "w6k="}}, '
                       b'{"channel": "t", "ws-message": {"type": "text", "content-bin": "/w=="}}]}',
        "formats-meta": b'{"items": [{"channel": "c", "formats": {"http-stream": {"content": "x"}}, "meta": '
                        b'{"skip_users": "1,2"}, "no-seq": true}]}',
        "bad": b'{"items": [{"channel": "c", "http-response": {"code": 1000}}]}',
    }


# Publish socket bodies and answers (fuzz_pubreq.c): what m0pub and
# `m0serve publish` send, and what the server answers.
def pubreq_seeds():
    return {
        "publish": b'{"channel":"news","data":"hello"}',
        "publish-all": b'{"channel": "orders", "data": "a\\nb\\u0000c\\u00e9", "event": "msg", "key": "k-42"}',
        "nulls": b'{"channel":"c","data":"","event":null,"key":null}',
        "id": b'{"channel":"c","data":"d","id":7}',
        "unknown": b'{"channel":"c","data":"d","evnt":"x"}',
        "dup": b'{"channel":"a","channel":"b","data":"d"}',
        "reserved": b'{"channel":"m0.x","data":"d"}',
        "event-lf": b'{"channel":"c","data":"d","event":"a\\nb"}',
        "answer-200": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n"
                      b'{"id": 417}\n',
        "answer-400": b"HTTP/1.1 400 Bad Request\r\nContent-Length: 17\r\n\r\nchannel: required",
        "answer-503": b"HTTP/1.1 503 Service Unavailable\r\n\r\nDraining",
    }


# fuzz_nats: byte 0 the payload limit (255: 64 KiB), then the bytes read as a
# message get's answer, a subject under "m0", a token and a number.
def nats_seeds():
    import base64
    import json

    def get(seq, subject, data=None, hdrs=None):
        m = {"subject": subject, "seq": seq, "time": "2026-01-01T00:00:00Z"}
        if data is not None:
            m["data"] = base64.b64encode(data).decode()
        if hdrs is not None:
            m["hdrs"] = base64.b64encode(hdrs).decode()
        return json.dumps({"type": "io.nats.jetstream.api.v1.stream_msg_get_response", "message": m}).encode()
    seeds = {
        "get-event": b"\xff" + get(7, "m0.news", b"event: e\ndata: hi\n\n"),
        "get-escaped": b"\xff" + get(8, "m0.user%3A42%2Fa%2Eb", b"data: x\n\n", b"NATS/1.0\r\nNats-Msg-Id: k\r\n\r\n"),
        "get-grip": b"\xff" + get(9, "m0.g", b"\x00G\x01item"),
        "get-empty": b"\x10" + get(1, "m0.x"),
        "get-large": b"\x04" + get(2, "m0.x", b"hello"),
        "get-none": b"\xff" + b'{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":'
                                b'{"code":404,"err_code":10037,"description":"no message found"}}',
        "get-unavailable": b"\xff" + b'{"error":{"code":503,"err_code":10008,"description":"JetStream system '
                                     b'temporarily unavailable"}}',
        "get-reserved": b"\xff" + get(3, "m0.m0%2Einternal", b"x"),
        "get-two-tokens": b"\xff" + get(4, "m0.a.b", b"x"),
        "subject": b"\x00m0.a%2Eb%20c",
        "subject-lower": b"\x00m0.a%2eb",
        "subject-plain-escaped": b"\x00m0.%41",
        "number": b"\x0018446744073709551615",
        "number-over": b"\x0018446744073709551616",
    }
    return seeds


def woh_seeds():
    """fuzz_woh: application/websocket-events bodies as django-grip's
    WebSocketContext writes them (and as m0serve posts them), control
    messages, the grip extension's values, Content-Types."""
    def ev(name, content=None):
        if content is None:
            return name.encode() + b"\r\n"
        return b"%s %x\r\n" % (name.encode(), len(content)) + content + b"\r\n"

    def ctl(obj):
        return ev("TEXT", b"c:" + json.dumps(obj).encode())
    return {
        "open": ev("OPEN"),
        "open-subscribe": ev("OPEN") + ctl({"type": "subscribe", "channel": "test"}),
        "echo": ev("TEXT", b"m:hello") + ev("TEXT", b"m:") + ev("BINARY", b"m:\x00\xff"),
        "posted": ev("TEXT", b"hello") + ev("PING") + ev("PING", b"p") + ev("CLOSE", b"\x03\xe8bye"),
        "close-zero": ev("CLOSE", b"\x00\x00"),
        "disconnect": ev("DISCONNECT"),
        "pong-other": ev("PONG") + ev("X-FUTURE", b"?") + ev("OPEN"),
        "upper-hex": b"TEXT A\r\n0123456789\r\n",
        "cut-short": b"TEXT 10\r\nabc\r\n",
        "no-crlf": b"TEXT 3\r\nabcOPEN\r\n",
        "nine-digits": b"TEXT 000000003\r\nabc\r\n",
        "lower-name": b"open\r\n",
        "chat": ev("OPEN") + ctl({"type": "subscribe", "channel": "room-1"}) +
                ctl({"type": "unsubscribe", "channel": "room-0"}) + ctl({"type": "detach"}),
        "keep-alive": ctl({"type": "keep-alive", "content": "ka", "timeout": 1, "mode": "interval"}) +
                      ctl({"type": "keep-alive", "content-bin": "AAE=", "message-type": "ping"}) +
                      ctl({"type": "keep-alive"}),
        "ctl-others": ctl({"type": "set-meta", "name": "a", "value": "b"}) + ctl({"type": "session", "id": "s"}) +
                      ctl({"type": "send-delayed", "message": {}}) + ctl({"type": "flush-delayed"}),
        "ctl-bad": ctl({"type": "subscribe"}) + ctl({"type": "nope"}) + ev("TEXT", b"c:[1]") +
                   ev("TEXT", b"c:{\"type\":\"keep-alive\",\"timeout\":-1}"),
        "ctl-json": b'{"type": "subscribe", "channel": "news"}',
        "ext-grip": b"grip",
        "ext-prefix": b'permessage-deflate, grip; message-prefix="m\\":"; x=1',
        "ext-empty-prefix": b"grip; message-prefix=",
        "ext-long": b"grip; message-prefix=" + b"p" * 40,
        "ext-unterminated": b'grip; message-prefix="abc',
        "content-type": b"application/websocket-events; charset=utf-8",
        "content-type-ows": b" Application/WebSocket-Events ",
    }


def client_hello(minimum=None, maximum=None, ciphers=None):
    """A ClientHello as Python's ssl (OpenSSL) sends it, or None when this
    OpenSSL will not offer what was asked."""
    import ssl
    import warnings
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            if ciphers:
                ctx.set_ciphers(ciphers)
            if minimum:
                ctx.minimum_version = minimum
            if maximum:
                ctx.maximum_version = maximum
        inb, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(inb, outb, server_hostname="localhost")
        obj.do_handshake()
    except ssl.SSLWantReadError:
        return outb.read()
    except ssl.SSLError:
        return None
    return None


def tls_seeds():
    """fuzz_tls: byte 0 the mode (bit 0 a real handshake first, 1 TLS 1.2,
    2 plaintext after it, 3 resume, 4 renegotiate; 5-7 the pieces' seed),
    then the bytes: ClientHellos whole and cut short, older versions
    offered, plain HTTP, an SSLv2-format hello, forged and truncated
    records after a handshake, requests as plaintext."""
    import ssl
    out = {}
    v = ssl.TLSVersion
    hellos = {"hello13": client_hello(), "hello12": client_hello(maximum=v.TLSv1_2),
              "hello10": client_hello(minimum=v.TLSv1, maximum=v.TLSv1_1, ciphers="DEFAULT:@SECLEVEL=0")}
    for name, h in hellos.items():
        if h is None:
            continue
        out[name] = b"\x00" + h
        out[name + "-pieces"] = b"\xe0" + h
        for cut in (1, 5, 9, len(h) // 2, len(h) - 1):
            out["%s-cut%d" % (name, cut)] = b"\x00" + h[:cut]
        out[name + "-twice"] = b"\x00" + h + h
    out["plain-http"] = b"\x00GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    out["sslv2-hello"] = b"\x00\x80\x2e\x01\x00\x02\x00\x15\x00\x00\x00\x10" + bytes(range(21)) + bytes(16)
    out["alert"] = b"\x00\x15\x03\x03\x00\x02\x02\x28"
    request = b"GET /pid HTTP/1.1\r\nHost: localhost\r\n\r\n"
    for mode, name in ((0x05, "13"), (0x07, "12")):
        out["plaintext" + name] = bytes([mode]) + request * 2
        out["plaintext%s-resumed" % name] = bytes([mode | 8]) + request
    forged = b"\x17\x03\x03\x00\x20" + bytes(32)
    for mode, name in ((0x01, "13"), (0x03, "12")):
        out["forged" + name] = bytes([mode]) + forged
        out["truncated" + name] = bytes([mode]) + b"\x17\x03\x03\x01\x00" + bytes(40)
        out["oversized" + name] = bytes([mode]) + b"\x17\x03\x03\x48\x01" + bytes(64)
        out["ccs" + name] = bytes([mode]) + b"\x14\x03\x03\x00\x01\x01"
        out["close-notify" + name] = bytes([mode]) + b"\x15\x03\x03\x00\x02\x01\x00"
    out["renegotiate12"] = b"\x13" + forged
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: seeds.py OUTDIR")
    for driver, seeds in (("http", http_seeds()), ("bus", bus_seeds()), ("sse", sse_seeds()),
                          ("registry", registry_seeds()), ("broker", broker_seeds()), ("grip", grip_seeds()),
                          ("epcp", epcp_seeds()), ("jwt", jwt_seeds()),
                          ("pubreq", pubreq_seeds()), ("nats", nats_seeds()), ("woh", woh_seeds()),
                          ("tls", tls_seeds())):
        d = os.path.join(sys.argv[1], driver)
        os.makedirs(d, exist_ok=True)
        for i, (name, data) in enumerate(sorted(seeds.items())):
            with open(os.path.join(d, "seed-%03d-%s" % (i, name)), "wb") as f:
                f.write(data)
        print("  SEEDS   %s: %d" % (d, len(seeds)))


if __name__ == "__main__":
    main()
