"""Keyspace notifications through redis-py: CONFIG SET and the
--notify-keyspace-events flag, the events of common writes on the
__keyspace@0__ and __keyevent@0__ channels (RESP2 and RESP3 pushes), and
expired keys, as a cache-invalidation client would use them."""
import time

import pytest
import redis

from conftest import Server, eventually


def messages(p, n, timeout=10.0):
    """The next `n` messages, skipping subscription replies."""
    got = []
    deadline = time.time() + timeout
    while len(got) < n:
        assert time.time() < deadline, f"only {got}"
        msg = p.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if msg is not None:
            got.append((msg["channel"], msg["data"]))
    return got


@pytest.mark.parametrize("proto", [2, 3])
def test_writes_raise_redis_events(server, proto):
    r = server.client(protocol=proto)
    assert r.config_get("notify-keyspace-events") == {
        "notify-keyspace-events": ""}
    assert r.config_set("notify-keyspace-events", "KEA")
    assert r.config_get("notify-keyspace-events") == {
        "notify-keyspace-events": "AKE"}
    with pytest.raises(redis.ResponseError, match="Invalid event class"):
        r.config_set("notify-keyspace-events", "KEQ")
    p = server.client(protocol=proto).pubsub()
    p.psubscribe("__keyevent@0__:*")
    p.subscribe("__keyspace@0__:user:1")
    eventually("subscribed", lambda: r.pubsub_numpat() == 1 and r.pubsub_numsub(
        "__keyspace@0__:user:1") == [(b"__keyspace@0__:user:1", 1)])
    r.set("user:1", "ann", ex=100)
    r.hset("h", mapping={"a": 1})
    r.lpush("q", "job")
    r.rpop("q")
    r.delete("user:1", "h")
    want_events = [
        (b"__keyspace@0__:user:1", b"set"),
        (b"__keyevent@0__:set", b"user:1"),
        (b"__keyspace@0__:user:1", b"expire"),
        (b"__keyevent@0__:expire", b"user:1"),
        (b"__keyevent@0__:hset", b"h"),
        (b"__keyevent@0__:lpush", b"q"),
        (b"__keyevent@0__:rpop", b"q"),
        (b"__keyevent@0__:del", b"q"),
        (b"__keyspace@0__:user:1", b"del"),
        (b"__keyevent@0__:del", b"user:1"),
        (b"__keyevent@0__:del", b"h"),
    ]
    assert messages(p, len(want_events)) == want_events
    p.close()


def test_transaction_events_follow_exec(server):
    r = server.client()
    r.config_set("notify-keyspace-events", "E$g")
    p = server.client().pubsub()
    p.psubscribe("__keyevent@*")
    eventually("subscribed", lambda: r.pubsub_numpat() == 1)
    with r.pipeline(transaction=True) as tx:
        tx.incr("n").incr("n").expire("n", 100)
        assert tx.execute() == [1, 2, True]
    assert messages(p, 3) == [
        (b"__keyevent@0__:incrby", b"n"),
        (b"__keyevent@0__:incrby", b"n"),
        (b"__keyevent@0__:expire", b"n"),
    ]
    p.close()


def test_expired_keys_from_the_flag():
    s = Server("--notify-keyspace-events", "Ex")
    try:
        r = s.client()
        assert r.config_get("notify-keyspace-events") == {
            "notify-keyspace-events": "xE"}
        p = s.client().pubsub()
        p.subscribe("__keyevent@0__:expired")
        eventually("subscribed", lambda: r.pubsub_numsub(
            "__keyevent@0__:expired") == [(b"__keyevent@0__:expired", 1)])
        r.set("session", "v", px=50)  # no event: only x is on
        # The background expirer, unprompted.
        assert messages(p, 1) == [(b"__keyevent@0__:expired", b"session")]
        # A write finding its key expired.
        r.set("cart", "v", px=1)
        time.sleep(0.01)
        r.set("cart", "w")
        assert messages(p, 1) == [(b"__keyevent@0__:expired", b"cart")]
        p.close()
    finally:
        s.stop()


def test_a_bad_flag_is_refused_at_start():
    with pytest.raises(AssertionError):
        Server("--notify-keyspace-events", "KEQ")
