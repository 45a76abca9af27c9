"""The blocking pops through redis-py, across two clients, RESP2 and RESP3:
a job queue (LPUSH/BRPOP), BLMOVE, BZPOPMIN, timeouts."""
import threading
import time

import pytest

from conftest import eventually


def blocked(c):
    return c.info("clients")["blocked_clients"]


@pytest.mark.parametrize("proto", [2, 3])
def test_a_job_queue_wakes_its_worker(server, proto):
    worker = server.client(protocol=proto)
    producer = server.client(protocol=proto)
    got = []
    t = threading.Thread(target=lambda: got.append(worker.brpop(["jobs"], 0)))
    t.start()
    eventually("worker blocked", lambda: blocked(producer) == 1)
    assert producer.lpush("jobs", "j1", "j2") == 2
    t.join(10)
    # redis-py answers a tuple under RESP2, a list under RESP3.
    assert [list(g) for g in got] == [[b"jobs", b"j1"]]
    assert producer.lrange("jobs", 0, -1) == [b"j2"]
    assert blocked(producer) == 0


@pytest.mark.parametrize("proto", [2, 3])
def test_blmove_and_bzpopmin_are_woken_from_another_client(server, proto):
    a = server.client(protocol=proto)
    b = server.client(protocol=proto)
    got = []
    t = threading.Thread(
        target=lambda: got.append(a.blmove("src", "dst", 0, "LEFT", "RIGHT")))
    t.start()
    eventually("a blocked", lambda: blocked(b) == 1)
    b.rpush("src", "x")
    t.join(10)
    assert got == [b"x"]
    assert b.lrange("dst", 0, -1) == [b"x"]

    got.clear()
    t = threading.Thread(target=lambda: got.append(a.bzpopmin("z", 0)))
    t.start()
    eventually("a blocked", lambda: blocked(b) == 1)
    b.zadd("z", {"m": 2.5, "n": 3})
    t.join(10)
    assert [list(g) for g in got] == [[b"z", b"m", 2.5]]


@pytest.mark.parametrize("proto", [2, 3])
def test_timeouts_answer_none(server, proto):
    c = server.client(protocol=proto)
    started = time.time()
    assert c.blpop(["none"], 0.2) is None
    assert c.bzpopmax(["none"], 0.2) is None
    assert c.blmpop(0.2, 1, "none", direction="LEFT") is None
    assert time.time() - started >= 0.6
