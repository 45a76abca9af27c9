"""Model tests: random operations on a database and on a Python dict must
agree, across reopens, snapshots, batches, range deletes, flushes and
compactions. A hypothesis state machine (shrinks a failure to a short
history) and a long seeded random run (more operations than hypothesis's
examples reach)."""

import random

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import weft

# Few distinct short keys, so that operations meet the same keys often.
KEYS = st.text(alphabet="abc", max_size=3).map(str.encode)
VALUES = st.binary(max_size=20)


def scan(model, start=None, stop=None, prefix=None, reverse=False):
    keys = sorted(
        k
        for k in model
        if (start is None or k >= start)
        and (stop is None or k < stop)
        and (prefix is None or k.startswith(prefix))
    )
    if reverse:
        keys.reverse()
    return [(k, model[k]) for k in keys]


class DbMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        import tempfile

        self.dir = tempfile.TemporaryDirectory()
        self.path = self.dir.name + "/db"
        self.db = weft.open(self.path, write_buffer_size=8192)
        self.model = {}
        self.snaps = []  # (Snapshot, dict as of it)

    def teardown(self):
        for snap, _ in self.snaps:
            snap.release()
        self.db.close()
        self.dir.cleanup()

    @rule(k=KEYS, v=VALUES)
    def put(self, k, v):
        self.db[k] = v
        self.model[k] = v

    @rule(k=KEYS)
    def delete(self, k):
        del self.db[k]
        self.model.pop(k, None)

    @rule(a=KEYS, b=KEYS)
    def delete_range(self, a, b):
        start, stop = min(a, b), max(a, b)
        self.db.delete_range(start, stop)
        for k in [k for k in self.model if start <= k < stop]:
            del self.model[k]

    @rule(ops=st.lists(st.tuples(KEYS, st.none() | VALUES), max_size=8), sync=st.booleans())
    def batch(self, ops, sync):
        b = weft.WriteBatch()
        for k, v in ops:
            if v is None:
                b.delete(k)
                self.model.pop(k, None)
            else:
                b.put(k, v)
                self.model[k] = v
        self.db.write(b, sync=sync)

    @rule(k=KEYS)
    def get(self, k):
        assert self.db.get(k) == self.model.get(k)
        assert (k in self.db) == (k in self.model)

    @rule(keys=st.lists(KEYS, max_size=6))
    def get_many(self, keys):
        assert self.db.get_many(keys) == [self.model.get(k) for k in keys]

    @rule(start=st.none() | KEYS, stop=st.none() | KEYS, reverse=st.booleans())
    def items(self, start, stop, reverse):
        got = list(self.db.items(start=start, stop=stop, reverse=reverse))
        assert got == scan(self.model, start, stop, reverse=reverse)

    @rule(prefix=KEYS, reverse=st.booleans())
    def prefix(self, prefix, reverse):
        got = list(self.db.items(prefix=prefix, reverse=reverse))
        assert got == scan(self.model, prefix=prefix, reverse=reverse)

    @precondition(lambda self: len(self.snaps) < 3)
    @rule()
    def take_snapshot(self):
        self.snaps.append((self.db.snapshot(), dict(self.model)))

    @precondition(lambda self: self.snaps)
    @rule(data=st.data())
    def read_snapshot(self, data):
        i = data.draw(st.integers(0, len(self.snaps) - 1))
        snap, model = self.snaps[i]
        assert list(snap.items()) == scan(model)
        k = data.draw(KEYS)
        assert self.db.get(k, snapshot=snap) == model.get(k)
        if data.draw(st.booleans()):
            snap.release()
            del self.snaps[i]

    @rule()
    def flush(self):
        self.db.flush()

    @rule()
    def compact(self):
        self.db.compact()

    @rule(flush=st.booleans())
    def reopen(self, flush):
        for snap, _ in self.snaps:
            snap.release()
        self.snaps = []
        self.db.close(flush=flush)
        self.db = weft.open(self.path, write_buffer_size=8192)

    @invariant()
    def same_contents(self):
        assert list(self.db.items()) == scan(self.model)


DbMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=40)
TestDbMachine = DbMachine.TestCase


def test_random_history_with_reopens_and_keyspaces(tmp_path):
    """20,000 seeded operations over two keyspaces, with reopens."""
    rng = random.Random(42)
    path = str(tmp_path / "db")
    db = weft.open(path, write_buffer_size=64 << 10)
    spaces = {"default": {}, "other": {}}

    def handle(name):
        return db if name == "default" else db.keyspace(name)

    def key():
        return b"%03d" % rng.randrange(400)

    for step in range(20_000):
        name = rng.choice(("default", "other"))
        ks, model = handle(name), spaces[name]
        op = rng.random()
        if op < 0.45:
            k, v = key(), rng.randbytes(rng.randrange(0, 300))
            ks[k] = v
            model[k] = v
        elif op < 0.6:
            k = key()
            ks.delete(k)
            model.pop(k, None)
        elif op < 0.62:
            a, b = sorted((key(), key()))
            ks.delete_range(a, b)
            for k in [k for k in model if a <= k < b]:
                del model[k]
        elif op < 0.9:
            k = key()
            assert ks.get(k) == model.get(k), (step, k)
        elif op < 0.99:
            a, b = sorted((key(), key()))
            rev = rng.random() < 0.5
            assert list(ks.items(start=a, stop=b, reverse=rev)) == scan(model, a, b, reverse=rev)
        elif op < 0.997:
            db.flush()
        else:
            db.close(flush=rng.random() < 0.5)
            db = weft.open(path, write_buffer_size=64 << 10)
    for name, model in spaces.items():
        assert list(handle(name).items()) == scan(model)
    db.close()


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)


@settings(max_examples=60)
@given(items=st.dictionaries(TEXT, TEXT, max_size=30), data=st.data())
def test_str_codec_keeps_python_order(tmp_path_factory, items, data):
    """UTF-8 keeps code-point order: a str-keyed database iterates in
    Python's sorted() order, and str bounds and prefixes select what the
    same comparisons select in Python."""
    path = str(tmp_path_factory.mktemp("str") / "db")
    with weft.open(path, codec="str") as db:
        with db.batch() as b:
            for k, v in items.items():
                b.put(k, v)
        assert list(db.items()) == sorted(items.items())
        start, stop = sorted((data.draw(TEXT), data.draw(TEXT)))
        assert list(db.keys(start=start, stop=stop, reverse=True)) == sorted(
            (k for k in items if start <= k < stop), reverse=True
        )
        prefix = data.draw(TEXT)
        assert list(db.keys(prefix=prefix)) == sorted(k for k in items if k.startswith(prefix))


def test_str_codec_refuses_unencodable_str(path):
    with weft.open(path, codec="str") as db:
        with pytest.raises(UnicodeEncodeError):
            db["\ud800"] = "lone surrogate"
        assert list(db.keys()) == []
