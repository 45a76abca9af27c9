"""Transactions and databases through redis-py: pipeline(transaction=True),
watch(), WatchError, transaction(), SELECT through the client's db."""
import pytest
import redis


@pytest.mark.parametrize("proto", [2, 3])
def test_transactional_pipeline_sees_its_own_writes(server, proto):
    r = server.client(protocol=proto)
    with r.pipeline(transaction=True) as p:
        p.incr("n").incr("n").rpush("l", "a", "b").lrange("l", 0, -1).get("n")
        assert p.execute() == [1, 2, 2, [b"a", b"b"], b"2"]
    assert r.get("n") == b"2"


@pytest.mark.parametrize("proto", [2, 3])
def test_an_error_inside_exec_is_a_reply(server, proto):
    r = server.client(protocol=proto)
    r.rpush("list", "x")
    with r.pipeline(transaction=True) as p:
        p.set("a", 1).incr("list").incr("a")
        res = p.execute(raise_on_error=False)
    assert res[0] is True
    assert isinstance(res[1], redis.ResponseError)
    assert res[2] == 2


def test_a_queuing_error_aborts(server):
    r = server.client()
    with r.pipeline(transaction=True) as p:
        p.set("x", 1)
        p.execute_command("NOSUCHCOMMAND")
        with pytest.raises(redis.ResponseError):
            p.execute()
    assert r.get("x") is None


@pytest.mark.parametrize("proto", [2, 3])
def test_watch_conflict_from_a_second_client(server, proto):
    r = server.client(protocol=proto)
    other = server.client(protocol=proto)
    r.set("balance", 10)
    with r.pipeline() as p:
        p.watch("balance")
        cur = int(p.get("balance"))
        other.set("balance", 100)
        p.multi()
        p.set("balance", cur - 3)
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("balance") == b"100"
    # Without the other write it goes through.
    with r.pipeline() as p:
        p.watch("balance")
        cur = int(p.get("balance"))
        p.multi()
        p.set("balance", cur - 3)
        assert p.execute() == [True]
    assert r.get("balance") == b"97"


def test_transaction_helper_retries_until_the_watch_holds(server):
    r = server.client()
    other = server.client()
    r.set("c", 0)
    tries = []

    def body(pipe):
        cur = int(pipe.get("c"))
        tries.append(cur)
        if len(tries) == 1:
            other.incr("c")  # a conflict on the first try
        pipe.multi()
        pipe.set("c", cur + 10)

    r.transaction(body, "c")
    assert tries == [0, 1]
    assert r.get("c") == b"11"


def test_databases_through_the_client(server):
    zero = server.client()
    three = server.client(db=3)
    three.set("k", "three")
    assert zero.get("k") is None
    zero.set("k", "zero")
    assert three.get("k") == b"three"
    assert three.dbsize() == 1
    assert zero.move("k", 5)
    five = server.client(db=5)
    assert five.get("k") == b"zero"
    info = zero.info("keyspace")
    assert info["db3"]["keys"] == 1 and info["db5"]["keys"] == 1
    assert "db0" not in info
    assert zero.config_get("databases") == {"databases": "16"}
    three.flushdb()
    assert three.dbsize() == 0 and five.dbsize() == 1
    zero.flushall()
    assert five.dbsize() == 0
