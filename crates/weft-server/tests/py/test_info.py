"""INFO as redis-py's info() parses it: every section present."""

SECTIONS = {
    "server": "redis_version",
    "clients": "connected_clients",
    "memory": "used_memory",
    "persistence": "rdb_changes_since_last_save",
    "stats": "total_commands_processed",
    "replication": "role",
    "cpu": "used_cpu_user",
    "errorstats": None,
    "commandstats": "cmdstat_get",
    "keyspace": "db0",
    "weft": "memtable_kind",
}


def test_info_everything_has_every_section(server):
    r = server.client()
    r.set("k", "v")
    r.get("k")
    try:
        r.hget("k", "f")  # WRONGTYPE: an errorstat
    except Exception:
        pass
    info = r.info("everything")
    for section, key in SECTIONS.items():
        if key:
            assert key in info, (section, key, sorted(info))
    # Each section on its own, as tools ask for them.
    for section, key in SECTIONS.items():
        part = r.info(section)
        assert part, section
        if key:
            assert key in part, (section, part)
    assert info["role"] == "master"
    assert info["connected_slaves"] == 0
    # Offsets are engine sequences (DESIGN "Replication"): past the SET,
    # and moving with each write.
    offset = info["master_repl_offset"]
    assert offset >= 1
    r.set("k2", "v")
    assert r.info("replication")["master_repl_offset"] > offset
    assert info["cmdstat_get"]["calls"] == 1
    assert set(info["cmdstat_get"]) == {
        "calls", "usec", "usec_per_call", "rejected_calls", "failed_calls"}
    assert info["cmdstat_hget"]["failed_calls"] == 1
    assert info["errorstat_WRONGTYPE"] == {"count": 1}
    assert info["db0"]["keys"] == 1
    assert isinstance(info["used_cpu_sys"], float)
    # The raw text has the section headers Redis has.
    conn = r.connection_pool.get_connection()
    conn.send_command("INFO", "everything")
    raw = conn.read_response().decode()
    r.connection_pool.release(conn)
    for header in ["# Server", "# Clients", "# Memory", "# Persistence",
                   "# Stats", "# Replication", "# CPU", "# Modules",
                   "# Errorstats", "# Cluster", "# Keyspace",
                   "# Commandstats", "# Weft"]:
        assert header in raw, header
    # INFO default leaves commandstats out.
    assert "cmdstat_get" not in r.info()
    assert "cmdstat_get" in r.info("all")


def test_client_list_and_config_through_redis_py(server):
    r = server.client()
    r.client_setname("py")
    clients = r.client_list()
    assert any(c["name"] == "py" for c in clients), clients
    assert r.client_info()["name"] == "py"
    assert r.config_get("maxclients") == {"maxclients": "10000"}
    assert r.config_set("slowlog-log-slower-than", 0)
    r.get("x")
    assert r.slowlog_len() >= 1
    log = r.slowlog_get(1)
    assert log[0]["command"].startswith(b"GET") or log[0]["command"].startswith(b"SLOWLOG")
    assert r.slowlog_reset()
    assert r.config_resetstat()
