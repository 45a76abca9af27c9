"""COMMAND INFO/DOCS as redis-py's helpers read them."""
from redis._parsers import CommandsParser


def test_command_is_parsed_by_redis_py(server):
    r = server.client()
    cmds = r.command()
    assert r.command_count() == len(cmds)
    get = cmds["get"]
    assert get["arity"] == 2
    assert "readonly" in get["flags"] and "fast" in get["flags"]
    assert (get["first_key_pos"], get["last_key_pos"], get["step_count"]) == (1, 1, 1)
    assert len(get["key_specifications"]) == 1
    assert "@read" in [c if isinstance(c, str) else c.decode() for c in get["acl_categories"]]
    # The cluster client's key extraction uses COMMAND (and GETKEYS).
    p = CommandsParser(r)
    assert p.get_keys(r, "MSET", "a", "1", "b", "2") == ["a", "b"]
    assert p.get_keys(r, "GET", "k") == ["k"]
    assert p.get_keys(r, "PUBLISH", "ch", "m") == ["ch"]
    keys = r.command_getkeys("MSET", "a", "1", "b", "2")
    assert [k if isinstance(k, str) else k.decode() for k in keys] == ["a", "b"]
    names = r.command_list(pattern="h*")
    assert b"hget" in names and b"get" not in names


def test_command_docs(server):
    for proto in (2, 3):
        r = server.client(protocol=proto)
        docs = r.execute_command("COMMAND DOCS", "get", "config")
        if isinstance(docs, list):  # RESP2: a flat list of pairs
            docs = dict(zip(docs[0::2], docs[1::2]))
            get = dict(zip(docs[b"get"][0::2], docs[b"get"][1::2]))
        else:
            get = docs[b"get"]
        assert get[b"summary"] == b"Get the value of a key"
        assert get[b"group"] == b"string"
        assert b"arguments" in get
        assert b"config" in docs
