"""Pub/sub and AUTH through redis-py, RESP2 and RESP3."""
import time

import pytest
import redis

from conftest import eventually


def next_message(p, timeout=10.0):
    """The next message, skipping subscription replies (for which
    get_message returns None)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        msg = p.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if msg is not None:
            return msg
    raise AssertionError("no message")


@pytest.mark.parametrize("proto", [2, 3])
def test_channels_and_patterns(server, proto):
    sub = server.client(protocol=proto)
    pub = server.client(protocol=proto)
    p = sub.pubsub()
    p.subscribe("news")
    p.psubscribe("n*")
    eventually("subscribed", lambda: pub.pubsub_numsub("news") == [(b"news", 1)]
               and pub.pubsub_numpat() == 1)
    assert pub.publish("news", "hello") == 2
    got = [next_message(p), next_message(p)]
    kinds = sorted((m["type"], m["channel"], m["data"], m["pattern"]) for m in got)
    assert kinds == [("message", b"news", b"hello", None),
                     ("pmessage", b"news", b"hello", b"n*")]
    assert pub.pubsub_channels() == [b"news"]
    p.unsubscribe("news")
    p.punsubscribe("n*")
    eventually("unsubscribed", lambda: pub.publish("news", "x") == 0)
    p.close()


def test_auth(server_with_password):
    s = server_with_password
    with pytest.raises(redis.AuthenticationError):
        s.client().get("k")
    with pytest.raises(redis.AuthenticationError):
        s.client(password="wrong").get("k")
    r = s.client(password="py-secret")
    assert r.set("k", "v")
    assert s.client(password="py-secret", protocol=3).get("k") == b"v"
