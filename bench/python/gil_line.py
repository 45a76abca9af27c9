"""Where the GIL line is for a single get (docs/DESIGN.md, "The Python binding").

Times `db.get` (releases the GIL around the engine's get) against
`db._get_holding_gil` (the same call, GIL held) on keys that all sit in
the memtable, the cheapest get there is: one thread (what the release and
re-take cost a get), and two threads each doing the same gets (what the
release buys, and what handing the GIL back and forth costs). Also times
`db.get_many` of 64 keys and a scan, for scale. Run with the package
installed (scripts/test-python builds it into the test venv):

    python bench/python/gil_line.py [--keys 100000] [--rounds 3]
"""

import argparse
import os
import random
import statistics
import tempfile
import threading
import time

import weft


def timed(fn, *args):
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def run_threads(n, target, args):
    threads = [threading.Thread(target=target, args=args) for _ in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--value-size", type=int, default=100)
    a = ap.parse_args()
    rng = random.Random(7)
    keys = [rng.randbytes(16) for _ in range(a.keys)]
    value = b"v" * a.value_size
    with tempfile.TemporaryDirectory() as d, weft.open(os.path.join(d, "db")) as db:
        for k in keys:
            db[k] = value
        probe = keys[:]
        rng.shuffle(probe)

        def loop(get):
            for k in probe:
                get(k)

        rows = {}
        for name, get in [("get (GIL released)", db.get), ("get (GIL held)", db._get_holding_gil)]:
            one = [timed(loop, get) for _ in range(a.rounds)]
            two = [run_threads(2, loop, (get,)) for _ in range(a.rounds)]
            rows[name] = (statistics.median(one), statistics.median(two))
        n = len(probe)
        print(f"{n} gets of {a.value_size}-byte values from the memtable, medians of {a.rounds}")
        for name, (one, two) in rows.items():
            print(f"  {name:20} 1 thread: {one / n * 1e9:7.0f} ns/get   "
                  f"2 threads: {2 * n / two:10,.0f} gets/s ({n / one:10,.0f} with 1)")
        rel, held = rows["get (GIL released)"][0], rows["get (GIL held)"][0]
        print(f"  release + re-take costs {(rel - held) / n * 1e9:.0f} ns per get "
              f"({(rel - held) / held * 100:.1f}% of the call)")

        batches = [probe[i:i + 64] for i in range(0, n, 64)]
        t = statistics.median(timed(lambda: [db.get_many(b) for b in batches]) for _ in range(a.rounds))
        print(f"  get_many of 64:      1 thread: {t / n * 1e9:7.0f} ns/key")
        t = statistics.median(timed(lambda: sum(1 for _ in db.items())) for _ in range(a.rounds))
        print(f"  items() scan:        1 thread: {t / n * 1e9:7.0f} ns/entry")


if __name__ == "__main__":
    main()
