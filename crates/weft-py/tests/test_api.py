"""The API of the `weft` module, call by call (issue 42's list)."""

import os
import pickle

import pytest

import weft


# --- open, options, close ------------------------------------------------------


def test_open_creates_and_context_manager_closes(path):
    with weft.open(path) as db:
        assert isinstance(db, weft.Db) and isinstance(db, weft.Keyspace)
        assert not db.closed and not db.read_only
        assert db.path == path
        db[b"k"] = b"v"
    assert db.closed
    with pytest.raises(weft.ClosedError):
        db[b"k"]
    # The lock was released: it opens again, with the data.
    with weft.open(path) as db:
        assert db[b"k"] == b"v"


def test_close_is_idempotent_and_closes_every_handle(path):
    db = weft.open(path)
    ks = db.keyspace("other")
    it = db.items()
    db.close()
    db.close()
    with pytest.raises(weft.ClosedError):
        ks.put(b"a", b"b")
    with pytest.raises(weft.ClosedError):
        db.put(b"a", b"b")
    del it


def test_close_without_flush_keeps_logged_writes(path):
    db = weft.open(path)
    db.put(b"logged", b"1")
    db.close(flush=False)
    with weft.open(path) as db:
        assert db[b"logged"] == b"1"


def test_open_options_typed(path):
    with weft.open(
        path,
        write_buffer_size=1 << 20,
        block_size=8192,
        block_cache_size=1 << 20,
        memtable="skiplist",
        compression="lz4",
        sorted_compression="zstd:5",
        bloom_bits_per_key=12,
        mmap_reads=False,
        min_blob_size=64,
        gc_garbage_ratio=0.25,
        stats_save_interval=0.5,
        background_jobs=2,
    ) as db:
        db[b"a"] = b"b" * 1000
        db.compact()
        assert db[b"a"] == b"b" * 1000
        assert db.stats()["memtable_kind"] == "skiplist"


def test_open_rejects_unknown_option(path):
    with pytest.raises(TypeError, match="unexpected keyword argument 'write_bufer_size'"):
        weft.open(path, write_bufer_size=1 << 20)
    with pytest.raises(TypeError):
        weft.open(path, 4096)  # options are keyword-only
    assert not os.path.exists(path)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"write_buffer_size": "64MiB"},
        {"write_buffer_size": 1.5},
        {"mmap_reads": 1},
        {"memtable": 3},
        {"gc_garbage_ratio": "half"},
        {"codec": b"str"},
        {"read_only": "yes"},
    ],
)
def test_open_rejects_wrong_types(path, kwargs):
    with pytest.raises(TypeError) as info:
        weft.open(path, **kwargs)
    # The argument is named (a note on Python >= 3.11, where notes exist).
    name = next(iter(kwargs))
    if hasattr(info.value, "__notes__"):
        assert any(name in n for n in info.value.__notes__)


@pytest.mark.parametrize(
    "kwargs, exception",
    [
        ({"write_buffer_size": -1}, ValueError),
        ({"memtable": "btree"}, ValueError),
        ({"compression": "gzip"}, ValueError),
        ({"codec": "json"}, ValueError),
        ({"key_codec": "utf8"}, ValueError),
        ({"stats_save_interval": -1.0}, ValueError),
        # Refused by the engine's own validation: InvalidArgumentError, a ValueError.
        ({"write_buffer_size": 100}, weft.InvalidArgumentError),
        ({"gc_garbage_ratio": 2.0}, weft.InvalidArgumentError),
        ({"background_jobs": 1}, weft.InvalidArgumentError),
    ],
)
def test_open_rejects_bad_values(path, kwargs, exception):
    with pytest.raises(exception) as info:
        weft.open(path, **kwargs)
    assert isinstance(info.value, ValueError)


def test_error_if_exists_and_create_if_missing(path):
    with pytest.raises(weft.InvalidArgumentError):
        weft.open(path, create_if_missing=False)
    weft.open(path).close()
    with pytest.raises(weft.Error):
        weft.open(path, error_if_exists=True)


def test_open_takes_pathlike(tmp_path):
    with weft.open(tmp_path / "db") as db:
        db[b"a"] = b"b"
    assert (tmp_path / "db" / "CURRENT").exists()


# --- dict-like access ----------------------------------------------------------


def test_dict_like(db):
    db[b"a"] = b"1"
    db[b"b"] = b"2"
    assert db[b"a"] == b"1"
    assert b"a" in db and b"zz" not in db
    assert db.get(b"a") == b"1"
    assert db.get(b"zz") is None
    assert db.get(b"zz", b"default") == b"default"
    with pytest.raises(KeyError) as info:
        db[b"zz"]
    assert info.value.args == (b"zz",)
    del db[b"a"]
    assert b"a" not in db
    del db[b"never"]  # no KeyError: see Keyspace's docstring
    assert list(db) == [b"b"]
    with pytest.raises(TypeError):
        len(db)


def test_empty_keys_and_values(db):
    db[b""] = b""
    assert db[b""] == b""
    assert list(db.items()) == [(b"", b"")]


def test_put_delete_with_options(db):
    db.put(b"k", b"v", sync=True)
    db.put(b"w", b"x", disable_wal=True)
    assert db[b"k"] == b"v" and db[b"w"] == b"x"
    db.delete(b"k", sync=True)
    assert b"k" not in db
    with pytest.raises(weft.InvalidArgumentError, match="sync and disable_wal"):
        db.put(b"k", b"v", sync=True, disable_wal=True)


def test_get_many_and_list_indexing(db):
    for k in (b"a", b"b", b"c"):
        db[k] = k.upper()
    assert db.get_many([b"a", b"x", b"c"]) == [b"A", None, b"C"]
    assert db.get_many(k for k in (b"b",)) == [b"B"]
    assert db[[b"c", b"a", b"nope"]] == [b"C", b"A", None]
    assert db.get_many([]) == []
    with pytest.raises(TypeError):
        db.get_many([b"a", "str-key"])


def test_keys_must_match_codec(db):
    with pytest.raises(TypeError, match="key must be bytes"):
        db["str"] = b"v"
    with pytest.raises(TypeError, match="value must be bytes"):
        db[b"k"] = 12
    with pytest.raises(TypeError):
        db.get(bytearray(b"k"))
    with pytest.raises(TypeError):
        db.items(start="a")


def test_delete_range(db):
    for i in range(100):
        db[b"user:%03d" % i] = b"x"
    db[b"visits"] = b"7"
    db.delete_range(b"user:", b"user;")
    assert list(db.keys()) == [b"visits"]
    db.delete_range(b"a", b"a")  # empty
    with pytest.raises(weft.InvalidArgumentError):
        db.delete_range(b"z", b"a")


# --- codecs --------------------------------------------------------------------


def test_str_codec(path):
    with weft.open(path, codec="str") as db:
        assert db.key_codec == "str" and db.value_codec == "str"
        db["héllo"] = "wörld"
        db["b"] = "2"
        assert db["héllo"] == "wörld"
        assert list(db.items()) == [("b", "2"), ("héllo", "wörld")]
        assert list(db.keys(prefix="h")) == ["héllo"]
        with pytest.raises(TypeError, match="key must be str"):
            db[b"bytes"] = "v"
    # The same bytes under the bytes codec: UTF-8.
    with weft.open(path) as db:
        assert db["héllo".encode()] == "wörld".encode()


def test_str_codec_reports_undecodable_bytes(path):
    with weft.open(path) as db:
        db[b"k"] = b"\xff\xfe"
    with weft.open(path, key_codec="str", value_codec="str") as db:
        with pytest.raises(UnicodeDecodeError):
            db["k"]


def test_pickle_codec(path):
    with weft.open(path, codec="pickle") as db:
        db[("tuple", 1)] = {"a": [1, 2, 3]}
        db[42] = None
        assert db[("tuple", 1)] == {"a": [1, 2, 3]}
        assert 42 in db and db[42] is None
        assert dict(db.items()) == {("tuple", 1): {"a": [1, 2, 3]}, 42: None}
        with pytest.raises(ValueError, match="prefix"):
            db.items(prefix="x")
        with pytest.raises(weft.InvalidArgumentError):
            db.delete_range(1, 2)
    with weft.open(path) as db:
        assert pickle.loads(db[pickle.dumps(42)]) is None


def test_mixed_codecs(path):
    with weft.open(path, key_codec="str", value_codec="pickle") as db:
        db["k"] = [1, 2]
        assert db["k"] == [1, 2]
        assert (db.key_codec, db.value_codec) == ("str", "pickle")
    with weft.open(path, codec="str", value_codec="bytes") as db:
        assert db["k"] == pickle.dumps([1, 2])


# --- iteration -----------------------------------------------------------------


@pytest.fixture
def abc(db):
    for k in (b"a", b"ab", b"abc", b"b", b"ba", b"c"):
        db[k] = k * 2
    return db


def test_items_keys_values(abc):
    assert list(abc.keys()) == [b"a", b"ab", b"abc", b"b", b"ba", b"c"]
    assert list(abc.values())[:2] == [b"aa", b"abab"]
    assert list(abc.items())[0] == (b"a", b"aa")
    assert list(abc.keys(reverse=True)) == [b"c", b"ba", b"b", b"abc", b"ab", b"a"]


def test_items_bounds(abc):
    assert list(abc.keys(start=b"ab", stop=b"b")) == [b"ab", b"abc"]
    assert list(abc.keys(start=b"ab", stop=b"b", reverse=True)) == [b"abc", b"ab"]
    assert list(abc.keys(start=b"b")) == [b"b", b"ba", b"c"]
    assert list(abc.keys(stop=b"ab")) == [b"a"]
    assert list(abc.keys(prefix=b"ab")) == [b"ab", b"abc"]
    assert list(abc.keys(prefix=b"b", reverse=True)) == [b"ba", b"b"]
    assert list(abc.keys(prefix=b"a", start=b"ab", stop=b"abc")) == [b"ab"]
    assert list(abc.keys(prefix=b"zz")) == []
    assert list(abc.keys(start=b"c", stop=b"a")) == []
    assert list(abc.keys(prefix=b"\xff")) == []


def test_iterators_are_python_iterators(abc):
    it = abc.items()
    assert iter(it) is it
    assert next(it) == (b"a", b"aa")
    assert next(it) == (b"ab", b"abab")
    assert len(list(it)) == 4
    with pytest.raises(StopIteration):
        next(it)


def test_iterator_reads_one_snapshot(db):
    for i in range(5000):
        db[b"%05d" % i] = b"old"
    it = db.items()
    first = next(it)
    # Writes after the iterator began, in and beyond its first batch.
    for i in range(5000):
        db[b"%05d" % i] = b"new"
    db.delete_range(b"02000", b"03000")
    db[b"99999"] = b"late"
    db.flush()
    rest = list(it)
    assert first == (b"00000", b"old")
    assert len(rest) == 4999
    assert all(v == b"old" for _, v in rest)


def test_long_scan_crosses_batches(db):
    n = 20_000
    with db.batch() as b:
        for i in range(n):
            b.put(b"%06d" % i, b"v%06d" % i)
    got = list(db.items())
    assert len(got) == n
    assert got[12345] == (b"012345", b"v012345")
    assert [k for k in db.keys(reverse=True)] == [b"%06d" % i for i in reversed(range(n))]


def test_raw_iterator(abc):
    it = abc.iter()
    assert not it.valid()
    with pytest.raises(weft.InvalidArgumentError):
        it.key()
    it.seek(b"ab")
    assert it.valid() and it.key() == b"ab" and it.value() == b"abab"
    it.next()
    assert it.item() == (b"abc", b"abcabc")
    it.prev()
    it.prev()
    assert it.key() == b"a"
    it.prev()
    assert not it.valid()
    it.seek_for_prev(b"bb")
    assert it.key() == b"ba"
    it.seek_for_prev(b"b")
    assert it.key() == b"b"
    it.seek(b"bb")
    assert it.key() == b"c"
    it.next()
    assert not it.valid()
    with pytest.raises(weft.InvalidArgumentError):
        it.next()
    it.seek_to_last()
    assert it.key() == b"c"
    it.seek_to_first()
    assert it.key() == b"a"
    it.seek(b"zzz")
    assert not it.valid()


def test_raw_iterator_bounds(abc):
    it = abc.iter(prefix=b"ab")
    it.seek_to_first()
    keys = []
    while it.valid():
        keys.append(it.key())
        it.next()
    assert keys == [b"ab", b"abc"]
    it = abc.iter(start=b"b", stop=b"c")
    it.seek_to_last()
    assert it.key() == b"ba"


# --- snapshots -----------------------------------------------------------------


def test_snapshot(db):
    db[b"k"] = b"old"
    db[b"gone"] = b"x"
    snap = db.snapshot()
    db[b"k"] = b"new"
    db[b"added"] = b"y"
    del db[b"gone"]
    db.flush()
    assert snap[b"k"] == b"old"
    assert snap.get(b"added") is None and b"added" not in snap
    assert snap[[b"k", b"gone"]] == [b"old", b"x"]
    assert list(snap.keys()) == [b"gone", b"k"]
    assert list(snap) == [b"gone", b"k"]
    assert db.get(b"k", snapshot=snap) == b"old"
    assert db.get_many([b"k", b"added"], snapshot=snap) == [b"old", None]
    assert list(db.items(snapshot=snap)) == [(b"gone", b"x"), (b"k", b"old")]
    it = snap.iter()
    it.seek_to_first()
    assert it.key() == b"gone"
    assert snap.sequence < db.stats()["sequence"]
    assert db.stats()["live_snapshots"] == 1
    snap.release()
    assert db.stats()["live_snapshots"] == 0
    with pytest.raises(weft.ClosedError):
        snap[b"k"]
    with pytest.raises(weft.ClosedError):
        db.get(b"k", snapshot=snap)


def test_snapshot_context_manager(db):
    db[b"k"] = b"1"
    with db.snapshot() as snap:
        db[b"k"] = b"2"
        assert snap[b"k"] == b"1"
    assert "released" in repr(snap)
    with pytest.raises(weft.ClosedError):
        snap.get(b"k")


def test_snapshot_in_keyspace(db):
    ks = db.keyspace("ks")
    ks[b"a"] = b"1"
    snap = db.snapshot()
    ks[b"a"] = b"2"
    ks[b"b"] = b"3"
    assert ks.get(b"a", snapshot=snap) == b"1"
    assert ks.get_many([b"a", b"b"], snapshot=snap) == [b"1", None]
    assert list(ks.items(snapshot=snap)) == [(b"a", b"1")]


# --- batches -------------------------------------------------------------------


def test_write_batch(db):
    db[b"old"] = b"x"
    b = weft.WriteBatch()
    b.put(b"a", b"1")
    b.put(b"b", b"2")
    b.delete(b"old")
    b.delete_range(b"c", b"d")
    assert len(b) == 4 and b.approximate_size > 0
    db.write(b, sync=True)
    assert len(b) == 0  # write() takes the contents
    assert list(db.items()) == [(b"a", b"1"), (b"b", b"2")]
    b.put(b"x", b"y")
    b.clear()
    db.write(b)
    assert b"x" not in db


def test_batch_context_manager(db):
    with db.batch(sync=True) as b:
        b.put(b"a", b"1")
        b.put(b"b", b"2")
        assert b"a" not in db  # nothing before the block ends
    assert db[b"a"] == b"1" and db[b"b"] == b"2"


def test_batch_context_manager_discards_on_exception(db):
    with pytest.raises(RuntimeError):
        with db.batch() as b:
            b.put(b"a", b"1")
            raise RuntimeError("boom")
    assert b"a" not in db


def test_unbound_batch_is_not_a_context_manager():
    with pytest.raises(weft.InvalidArgumentError, match="db.batch"):
        with weft.WriteBatch():
            pass


def test_batch_codecs_and_keyspaces(path):
    with weft.open(path, codec="str") as db:
        users = db.keyspace("users")
        b = weft.WriteBatch(codec="str")
        b.put("42", "alice", keyspace=users)
        b.put("top", "level")
        with pytest.raises(TypeError):
            b.put(b"bytes", "x")
        db.write(b)
        assert users["42"] == "alice" and db["top"] == "level" and "42" not in db
        with db.batch() as b:
            b.delete("42", keyspace=users)
            b.delete_range("a", "z")
        assert "42" not in users and list(db.keys()) == []


def test_invalid_batch_is_refused_whole(db):
    b = weft.WriteBatch()
    b.put(b"ok", b"1")
    b.put(b"k" * (weft.MAX_KEY_SIZE + 1), b"v")
    with pytest.raises(weft.InvalidArgumentError):
        db.write(b)
    assert b"ok" not in db


# --- maintenance and stats -----------------------------------------------------


def test_flush_compact_check_stats(db):
    for i in range(2000):
        db[b"%05d" % i] = os.urandom(100)
    s = db.stats()
    assert isinstance(s, dict)
    assert s["user_bytes_written"] > 200_000
    assert s["flushes"] == 0
    db.flush()
    db.compact()
    s = db.stats()
    assert s["flushes"] >= 1 and s["tables"] >= 1
    assert s["lifetime"]["opens"] == 1
    assert s["disk"]["total"] > 0
    assert isinstance(s["partitions"], list) and s["partitions"][0]["lower"] == b""
    assert set(s["background_jobs"]) >= {"flush", "merge"}
    assert isinstance(s["block_cache"]["hits"], int)
    report = db.check()
    assert report["files"] >= 1 and report["blocks"] >= 1 and report["bytes"] > 0
    db.sync_wal()
    db.flush_wal()


def test_checkpoint(db, tmp_path):
    for i in range(100):
        db[b"%03d" % i] = b"v"
    db.flush()
    db[b"after-flush"] = b"w"
    info = db.checkpoint(str(tmp_path / "copy"))
    assert info["sequence"] == db.stats()["sequence"]
    db[b"after-checkpoint"] = b"x"
    with weft.open(tmp_path / "copy") as copy:
        assert copy[b"after-flush"] == b"w"
        assert b"after-checkpoint" not in copy
        assert sum(1 for _ in copy.keys()) == 101
    with pytest.raises(weft.Error):
        db.checkpoint(str(tmp_path / "copy"))  # exists


# --- transactions --------------------------------------------------------------


def test_transaction_commit_and_own_reads(db):
    db[b"balance"] = b"10"
    txn = db.transaction()
    assert txn.get_for_update(b"balance") == b"10"
    txn[b"balance"] = b"7"
    txn.put(b"log", b"paid 3")
    assert txn[b"balance"] == b"7" and b"log" in txn
    assert db[b"balance"] == b"10"
    assert txn.items() == [(b"balance", b"7"), (b"log", b"paid 3")]
    assert txn.items(start=b"c", reverse=True) == [(b"log", b"paid 3")]
    txn.commit()
    assert db[b"balance"] == b"7" and db[b"log"] == b"paid 3"
    with pytest.raises(weft.InvalidArgumentError, match="already committed"):
        txn.put(b"x", b"y")


def test_transaction_conflict(db):
    db[b"k"] = b"0"
    txn = db.transaction()
    txn.get_for_update(b"k")
    txn.put(b"k", b"mine")
    db[b"k"] = b"theirs"
    with pytest.raises(weft.ConflictError) as info:
        txn.commit()
    assert info.value.key == b"k" and info.value.keyspace == "default"
    assert db[b"k"] == b"theirs"


def test_transaction_context_manager(db):
    with db.transaction(sync=True) as txn:
        txn[b"a"] = b"1"
        del txn[b"nothing"]
    assert db[b"a"] == b"1"
    with pytest.raises(KeyError):
        with db.transaction() as txn:
            txn[b"b"] = b"2"
            txn[b"missing"]
    assert b"b" not in db
    with pytest.raises(weft.ConflictError):
        with db.transaction() as txn:
            txn[b"a"] = b"mine"
            db[b"a"] = b"theirs"
    assert db[b"a"] == b"theirs"
    with db.transaction() as txn:
        txn[b"c"] = b"3"
        txn.rollback()
    assert b"c" not in db


def test_transact_retries_conflicts(db):
    db[b"n"] = b"0"
    runs = []

    def increment(txn):
        runs.append(1)
        n = int(txn.get_for_update(b"n"))
        if len(runs) == 1:
            db[b"n"] = b"100"  # another writer gets in first, once
        txn[b"n"] = str(n + 1).encode()
        return n + 1

    assert db.transact(increment) == 101
    assert len(runs) == 2 and db[b"n"] == b"101"


def test_transaction_across_keyspaces(db):
    users = db.keyspace("users")
    by_name = db.keyspace("by_name", codec="str")
    with db.transaction() as txn:
        txn.put(b"42", b"alice", keyspace=users)
        txn.put("alice", "42", keyspace=by_name)
        txn[b"42"] = b"default keyspace"
        assert txn.get(b"42", keyspace=users) == b"alice"
        assert txn.items(keyspace=by_name) == [("alice", "42")]
        assert users.get(b"42") is None  # not before the commit
    assert users[b"42"] == b"alice" and by_name["alice"] == "42"
    assert db[b"42"] == b"default keyspace"

    txn = db.transaction()
    assert txn.get_for_update(b"42", keyspace=users) == b"alice"
    txn.delete(b"42", keyspace=users)
    users[b"42"] = b"bob"  # another writer, same key, same keyspace
    with pytest.raises(weft.ConflictError) as info:
        txn.commit()
    assert (info.value.key, info.value.keyspace) == (b"42", "users")
    assert users[b"42"] == b"bob"

    txn = db.transaction()
    txn.put(b"42", b"x", keyspace=users)
    db[b"42"] = b"same key, other keyspace: no conflict"
    txn.commit()
    assert users[b"42"] == b"x"


def test_transact_gives_up_and_propagates(db):
    def always_conflicts(txn):
        txn.put(b"k", b"mine")
        db.put(b"k", b"theirs")

    with pytest.raises(weft.ConflictError):
        db.transact(always_conflicts, max_attempts=3)

    def fails(txn):
        txn.put(b"k2", b"x")
        raise LookupError("no")

    with pytest.raises(LookupError):
        db.transact(fails)
    assert b"k2" not in db


# --- keyspaces -----------------------------------------------------------------


def test_keyspaces(path):
    with weft.open(path, codec="str") as db:
        users = db.keyspace("users")
        assert users.name == "users" and db.name == "default"
        users["42"] = "alice"
        db["42"] = "the answer"
        assert users["42"] == "alice" and db["42"] == "the answer"
        assert users.get_many(["42", "x"]) == ["alice", None]
        users.put("43", "bob", sync=True)
        assert list(users.items()) == [("42", "alice"), ("43", "bob")]
        assert list(users.keys(start="43")) == ["43"]
        users.delete("43", sync=True)
        users.delete_range("0", "9", sync=True)
        assert list(users.keys()) == []
        users["44"] = "carol"
        assert db.keyspaces() == ["default", "users"]
        db.keyspace("tmp")["x"] = "y"
        assert db.keyspaces() == ["default", "tmp", "users"]
        tmp = db.keyspace("tmp")
        db.drop_keyspace("tmp")
        with pytest.raises(weft.InvalidArgumentError, match="dropped"):
            tmp["x"]
        assert db.keyspace("tmp").get("x") is None
        with pytest.raises(weft.InvalidArgumentError):
            db.drop_keyspace("default")
    with weft.open(path, codec="str") as db:
        assert db.keyspace("users")["44"] == "carol"
        raw = db.keyspace("users", codec="bytes")
        assert raw[b"44"] == b"carol"
        objects = db.keyspace("objects", value_codec="pickle")
        assert (objects.key_codec, objects.value_codec) == ("str", "pickle")
        objects["k"] = {"any": ["object"]}
        assert objects["k"] == {"any": ["object"]}
        with pytest.raises(ValueError):
            db.keyspace("x", codec="yaml")


# --- read-only -----------------------------------------------------------------


def test_read_only_beside_a_writer(path):
    with weft.open(path) as writer:
        writer[b"k"] = b"v1"
        with weft.open(path, read_only=True) as reader:
            assert reader.read_only
            assert reader[b"k"] == b"v1"
            writer[b"k"] = b"v2"
            assert reader[b"k"] == b"v1"
            reader.refresh()
            assert reader[b"k"] == b"v2"
            with pytest.raises(weft.ReadOnlyError) as info:
                reader[b"x"] = b"y"
            assert info.value.operation
            with pytest.raises(weft.ReadOnlyError):
                reader.flush()
        with pytest.raises(weft.InvalidArgumentError):
            writer.refresh()


def test_repr(path):
    with weft.open(path) as db:
        assert "weft.Db" in repr(db)
        assert "weft.Keyspace" in repr(db.keyspace("x"))
        assert "weft.WriteBatch" in repr(db.batch())
        assert "weft.Transaction" in repr(db.transaction())
