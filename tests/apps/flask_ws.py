"""A Flask app gating a WebSocket with m0serve.flask's helpers (issue 10).

/ws: GET approves a socket on channel "flask-room"; each message comes back
as a POST and is answered upper-cased (text) or reversed (binary).
/ws/log: each message is logged to stderr ("flask-ws: got TEXT"), slowly
(10 ms a view), nothing answered.
"""
import sys
import time

from flask import Flask, Response

from m0serve.flask import hold_websocket_response, is_websocket_message, websocket_message, websocket_route

app = Flask(__name__)


@websocket_route(app, "/ws")
def ws():
    message = websocket_message()
    if message is None:
        return hold_websocket_response("flask-room")
    assert is_websocket_message() and message.channel == "flask-room"
    if message.opcode == "text":
        return message.payload.upper()
    # A reply is a text frame when it is UTF-8, unless M0-Opcode says binary.
    return Response(message.payload[::-1], headers={"M0-Opcode": "binary"})


@websocket_route(app, "/ws/log")
def ws_log():
    message = websocket_message()
    if message is None:
        return hold_websocket_response("flask-log")
    time.sleep(0.01)
    sys.stderr.write("flask-ws: got %s\n" % message.payload)
    sys.stderr.flush()
    return ""
