"""Every engine error reaches Python as its own class under weft.Error,
with the variant's fields as attributes; bad input loses nothing."""

import errno
import os

import pytest

import weft

CLASSES = [
    "IoError",
    "CorruptionError",
    "InvalidArgumentError",
    "PoisonedError",
    "LockedError",
    "UnsupportedError",
    "ChangesReleasedError",
    "ClosedError",
    "ReadOnlyError",
    "ConflictError",
]


def test_hierarchy():
    assert issubclass(weft.Error, Exception)
    for name in CLASSES:
        cls = getattr(weft, name)
        assert issubclass(cls, weft.Error), name
        assert cls.__module__ == "weft" and cls.__doc__
    assert issubclass(weft.InvalidArgumentError, ValueError)
    assert issubclass(weft.IoError, OSError)


def _fill_and_flush(path):
    with weft.open(path) as db:
        for i in range(2000):
            db[b"key%05d" % i] = b"value%05d" % i
        # Into the SortedStore: an open reads only its tables' footers and
        # indexes (an UnsortedStore table may be read whole to rebuild its
        # hash index).
        db.compact()


def _tables(path):
    return sorted(f for f in os.listdir(path) if f.endswith(".sst"))


def test_corrupt_table_raises_corruption_error_with_file_and_offset(path):
    _fill_and_flush(path)
    table = os.path.join(path, _tables(path)[0])
    size = os.path.getsize(table)
    with open(table, "r+b") as f:
        # Flip bytes in the middle of the data blocks.
        f.seek(size // 3)
        chunk = f.read(64)
        f.seek(size // 3)
        f.write(bytes(b ^ 0xFF for b in chunk))
    with weft.open(path) as db:
        with pytest.raises(weft.CorruptionError) as info:
            db.check()
        e = info.value
        assert os.path.samefile(e.file, table)
        assert isinstance(e.offset, int) and 0 <= e.offset < size
        assert e.reason and str(e.offset) in str(e)
        # Reads of the damaged region report it too, and never wrong data.
        bad = []
        for i in range(2000):
            try:
                v = db.get(b"key%05d" % i)
            except weft.CorruptionError as c:
                assert os.path.samefile(c.file, table)
                bad.append(i)
                continue
            assert v == b"value%05d" % i
        assert bad
        with pytest.raises(weft.CorruptionError):
            list(db.items())


def test_corrupt_manifest_fails_open_with_corruption_error(path):
    _fill_and_flush(path)
    manifest = [f for f in os.listdir(path) if f.startswith("MANIFEST-")][0]
    p = os.path.join(path, manifest)
    with open(p, "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0x55
        f.seek(0)
        f.write(data)
    with pytest.raises(weft.CorruptionError) as info:
        weft.open(path)
    assert os.path.basename(info.value.file) == manifest


def test_locked_directory(path):
    with weft.open(path):
        with pytest.raises(weft.LockedError) as info:
            weft.open(path)
        assert info.value.path.endswith("LOCK")
        assert "locked" in str(info.value)
    weft.open(path).close()  # released


def test_locked_by_another_process(path):
    import subprocess
    import sys

    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, weft; db = weft.open(sys.argv[1]); "
         "print('open', flush=True); sys.stdin.read()", path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout.readline() == b"open\n"
        with pytest.raises(weft.LockedError):
            weft.open(path)
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def test_oversize_key_and_value_lose_nothing(db):
    db[b"kept"] = b"1"
    big_key = b"k" * (weft.MAX_KEY_SIZE + 1)
    with pytest.raises(weft.InvalidArgumentError, match="exceeds the limit"):
        db[big_key] = b"v"
    with pytest.raises(weft.InvalidArgumentError):
        db.get(big_key)
    with pytest.raises(weft.InvalidArgumentError):
        db.delete(big_key)
    with pytest.raises(weft.InvalidArgumentError):
        db.get_many([b"kept", big_key])
    db[b"k" * weft.MAX_KEY_SIZE] = b"max is fine"
    assert db[b"kept"] == b"1"
    assert db[b"k" * weft.MAX_KEY_SIZE] == b"max is fine"
    ks = db.keyspace("ks")
    with pytest.raises(weft.InvalidArgumentError):
        ks[b"k" * weft.MAX_KEY_SIZE] = b"keyspaces take a prefix"


def test_closed_error(path):
    db = weft.open(path)
    db.close()
    for call in (lambda: db[b"k"], lambda: db.put(b"k", b"v"), db.flush, lambda: db.items()):
        with pytest.raises(weft.ClosedError):
            call()


def test_read_only_and_missing_database(path):
    with pytest.raises(weft.InvalidArgumentError):
        weft.open(path, read_only=True)
    weft.open(path).close()
    with weft.open(path, read_only=True) as db:
        with pytest.raises(weft.ReadOnlyError) as info:
            db.put(b"k", b"v")
        assert info.value.operation
        with pytest.raises(weft.ReadOnlyError):
            db.checkpoint(path + "-copy")


def test_io_error_carries_errno(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"not a directory")
    with pytest.raises(weft.IoError) as info:
        weft.open(str(blocker / "db"))
    assert isinstance(info.value, OSError)
    assert info.value.errno in (errno.ENOTDIR, errno.EEXIST, errno.ENOENT)
    assert info.value.context


def _crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def test_unsupported_format_version(path):
    """A manifest from a newer store format: UnsupportedError, nothing
    changed. Its first record's first field is the format version (tag 12,
    DESIGN §2.8); raised to 99, the record re-framed (§2.3)."""
    weft.open(path).close()
    manifest = os.path.join(path, [f for f in os.listdir(path) if f.startswith("MANIFEST-")][0])
    with open(manifest, "rb") as f:
        data = bytearray(f.read())
    length = int.from_bytes(data[4:8], "little")
    assert data[8] == 12 and data[9] < 0x80  # tag 12, a one-byte varint
    data[9] = 99
    data[0:4] = _masked(_crc32c(bytes(data[4 : 8 + length]))).to_bytes(4, "little")
    with open(manifest, "wb") as f:
        f.write(data)
    before = sorted(os.listdir(path))
    with pytest.raises(weft.UnsupportedError) as info:
        weft.open(path)
    e = info.value
    assert e.found == 99 and e.supported < 99
    assert os.path.samefile(e.path, manifest) or e.path.startswith(path)
    assert "newer Weft" in str(e)
    assert sorted(os.listdir(path)) == before


def test_bad_input_keeps_database_usable(db):
    for bad in ("str", 1, None, bytearray(b"x"), memoryview(b"x")):
        with pytest.raises(TypeError):
            db[bad] = b"v"
        with pytest.raises(TypeError):
            db[b"k"] = bad
    db[b"k"] = b"v"
    assert db[b"k"] == b"v"
