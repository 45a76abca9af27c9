"""kill -9 of a child Python process writing with sync=True: every write
it acknowledged (printed after the call returned) survives, and what the
database holds is a prefix of the child's history (DESIGN §4.3)."""

import os
import random
import signal
import subprocess
import sys
import time

import weft

CHILD = r"""
import sys, weft
path, round_ = sys.argv[1], int(sys.argv[2])
db = weft.open(path, write_buffer_size=64 << 10)
ks = db.keyspace("crash")
i = 0
while True:
    key = b"r%d-%08d" % (round_, i)
    if i % 5 == 4:
        # An atomic batch across keyspaces: both or neither.
        with db.batch(sync=True) as b:
            b.put(key, b"batch")
            b.put(key, b"batch", keyspace=ks)
    elif i % 7 == 6:
        with db.transaction(sync=True) as t:
            t.put(key, b"txn")
    else:
        db.put(key, b"v%08d" % i, sync=True)
    # Acknowledged: the call returned.
    sys.stdout.write("%d\n" % i)
    sys.stdout.flush()
    i += 1
"""


def _expected(i):
    if i % 5 == 4:
        return b"batch"
    if i % 7 == 6:
        return b"txn"
    return b"v%08d" % i


def _run_and_kill(path, round_, acks_before_kill):
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, path, str(round_)],
        stdout=subprocess.PIPE,
    )
    acked = -1
    try:
        while acked < acks_before_kill:
            line = child.stdout.readline()
            assert line, f"the child exited early ({child.wait()})"
            acked = int(line)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        # Lines written before the kill were acknowledged too.
        rest = child.stdout.read()
        child.wait()
    for line in rest.split():
        acked = int(line)
    return acked


def test_kill_9_keeps_every_acknowledged_sync_write(tmp_path):
    path = str(tmp_path / "db")
    rng = random.Random(int(os.environ.get("WEFT_CRASH_SEED", "9")))
    deadline = time.monotonic() + 60
    for round_ in range(5):
        acked = _run_and_kill(path, round_, rng.randrange(20, 400))
        with weft.open(path) as db:
            ks = db.keyspace("crash")
            keys = list(db.keys(prefix=b"r%d-" % round_))
            # A prefix of the history, at least every acknowledged write.
            assert len(keys) >= acked + 1, (round_, acked, len(keys))
            assert keys == [b"r%d-%08d" % (round_, i) for i in range(len(keys))]
            # At most the one write in flight past the last acknowledgement.
            assert len(keys) <= acked + 2
            for i, k in enumerate(keys):
                assert db[k] == _expected(i), (round_, i)
                assert (k in ks) == (i % 5 == 4), (round_, i)
            # Earlier rounds' data is all still there.
            for r in range(round_):
                assert next(db.keys(prefix=b"r%d-" % r), None) is not None
        if time.monotonic() > deadline:
            break


def test_exit_without_close_keeps_writes(tmp_path):
    """A process that ends without close(): its writes are in the WAL and
    the next open replays them; the exit neither hangs on the engine's
    threads nor leaves the directory locked."""
    path = str(tmp_path / "db")
    code = (
        "import sys, weft\n"
        "db = weft.open(sys.argv[1])\n"
        "db.keyspace('ks')[b'a'] = b'1'\n"
        "for i in range(1000):\n"
        "    db[b'%04d' % i] = b'v'\n"
    )
    subprocess.run([sys.executable, "-c", code, path], check=True, timeout=60)
    with weft.open(path) as db:
        assert sum(1 for _ in db.keys()) == 1000
        assert db.keyspace("ks")[b"a"] == b"1"
