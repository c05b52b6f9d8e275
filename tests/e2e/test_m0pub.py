"""m0pub's framing and argument checks, in-process (no server)."""

import sys

import pytest

from serverproc import REPO

sys.path.insert(0, str(REPO / "python"))
import m0pub  # noqa: E402


def test_frame_matches_the_sse_line_rules():
    assert m0pub.frame("hello", "message", 7) == b"id: 7\nevent: message\ndata: hello\n\n"
    assert m0pub.frame("a\nb\r\nc\rd") == b"data: a\ndata: b\ndata: c\ndata: d\n\n"
    assert m0pub.frame(b"caf\xc3\xa9") == "data: café\n\n".encode()
    assert m0pub.frame("", None, 1) == b"id: 1\ndata: \n\n"


@pytest.mark.parametrize("channel", ["", "m0.internal", "a\nb", "x" * 201, "caf\u00e9"])
def test_bad_channels_raise(channel):
    with pytest.raises(ValueError):
        m0pub.publish(channel, "x")


def test_bad_event_and_data_raise():
    with pytest.raises(ValueError):
        m0pub.publish("news", "x", event="two\nlines")
    with pytest.raises(TypeError):
        m0pub.publish("news", 42)
    with pytest.raises(TypeError):
        m0pub.publish(b"news", "x")


def test_frames_over_64kb_raise_even_outside_m0serve():
    m0pub.publish("news", "x" * 60000)          # fits: a no-op here
    with pytest.raises(ValueError, match="exceeds"):
        m0pub.publish("news", "x" * 70000)
