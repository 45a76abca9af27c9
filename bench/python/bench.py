"""Weft against rocksdict, plyvel and lmdb, from Python, in one harness.

The same data for every store (N random 16-byte keys, 100-byte random
values, from one seed), the same process layout (each store, thread count
and round in a fresh process of its own, on a fresh directory), three
phases timed in that process:

  put   N individual puts in random key order (each store's default
        durability: logged, not fsynced; lmdb: one write transaction per
        put with sync and metasync off),
  get   N gets of the same keys in another random order (lmdb: one read
        transaction per thread for the whole phase, its fast path),
  scan  a full scan of every (key, value) pair, per thread.

`--settle` compacts each store, untimed, between the puts and the reads
(without it the reads run while the puts' flushes and compactions finish).

With T threads, the puts and gets are split between the threads and each
thread scans the whole store; figures are total operations per second.
Every store runs with its defaults but for what makes the comparison fair:
rocksdict in raw mode (bytes in and out, not its pickling default), lmdb
with a map large enough and no syncing. Medians of the rounds.

    bench/python/run [--keys 1000000] [--rounds 3] [--threads 1,2]
                     [--stores weft,rocksdict,plyvel,lmdb] [--dir DIR]

(bench/python/run makes the venv with the pinned stores and builds weft
into it; this file runs in it.)
"""

import argparse
import importlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

STORES = ["weft", "rocksdict", "plyvel", "lmdb"]
PHASES = ["put", "get", "scan"]


# --- the stores -----------------------------------------------------------------


class Weft:
    def __init__(self, path):
        import weft

        self.db = weft.open(path)

    def putter(self):
        return self.db.put

    def getter(self):
        return self.db.get

    def scan(self):
        n = 0
        for _ in self.db.items():
            n += 1
        return n

    def settle(self):
        self.db.compact()

    def close(self):
        self.db.close()


class RocksDict:
    def __init__(self, path):
        from rocksdict import Options, Rdict

        self.db = Rdict(path, options=Options(raw_mode=True))

    def putter(self):
        return self.db.put

    def getter(self):
        return self.db.get

    def scan(self):
        n = 0
        for _ in self.db.items():
            n += 1
        return n

    def settle(self):
        self.db.compact_range(None, None)

    def close(self):
        self.db.close()


class Plyvel:
    def __init__(self, path):
        import plyvel

        self.db = plyvel.DB(path, create_if_missing=True)

    def putter(self):
        return self.db.put

    def getter(self):
        return self.db.get

    def scan(self):
        n = 0
        for _ in self.db.iterator():
            n += 1
        return n

    def settle(self):
        self.db.compact_range()

    def close(self):
        self.db.close()


class Lmdb:
    def __init__(self, path):
        import lmdb

        self.env = lmdb.open(path, map_size=16 << 30, sync=False, metasync=False)
        self.local = threading.local()

    def putter(self):
        env = self.env

        def put(k, v):
            with env.begin(write=True) as txn:
                txn.put(k, v)

        return put

    def getter(self):
        txn = self.env.begin()
        self.local.txn = txn  # kept alive (and its snapshot) for the phase
        return txn.get

    def scan(self):
        n = 0
        with self.env.begin() as txn:
            for _ in txn.cursor():
                n += 1
        return n

    def settle(self):
        self.env.sync(True)

    def close(self):
        self.env.close()


IMPLS = {"weft": Weft, "rocksdict": RocksDict, "plyvel": Plyvel, "lmdb": Lmdb}
MODULES = {"weft": "weft", "rocksdict": "rocksdict", "plyvel": "plyvel", "lmdb": "lmdb"}


# --- one run, in its own process ---------------------------------------------------


def data(n, seed):
    rng = random.Random(seed)
    raw_keys = rng.randbytes(16 * n)
    keys = [raw_keys[i * 16 : (i + 1) * 16] for i in range(n)]
    raw_values = rng.randbytes(100 * 1024)
    values = [raw_values[(i % 1000) * 100 : (i % 1000) * 100 + 100] for i in range(n)]
    probe = keys[:]
    rng.shuffle(probe)
    return keys, values, probe


def in_threads(t, work, shares):
    threads = [threading.Thread(target=work, args=(shares[i],)) for i in range(t)]
    start = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - start


def run_one(store, threads, n, seed, path, settle):
    keys, values, probe = data(n, seed)
    s = IMPLS[store](path)
    out = {}
    pairs = list(zip(keys, values))
    put_shares = [pairs[i::threads] for i in range(threads)]

    def put_work(share):
        put = s.putter()
        for k, v in share:
            put(k, v)

    out["put"] = n / in_threads(threads, put_work, put_shares)
    if settle:
        # Background work the puts left (flushes, compactions) done before
        # the reads, untimed: reads of a settled store.
        s.settle()

    get_shares = [probe[i::threads] for i in range(threads)]
    missing = [0]

    def get_work(share):
        get = s.getter()
        miss = 0
        for k in share:
            if get(k) is None:
                miss += 1
        missing[0] += miss

    out["get"] = n / in_threads(threads, get_work, get_shares)
    if missing[0]:
        raise SystemExit(f"{store}: {missing[0]} keys missing")

    counts = []

    def scan_work(_):
        counts.append(s.scan())

    out["scan"] = threads * n / in_threads(threads, scan_work, [None] * threads)
    if any(c != n for c in counts):
        raise SystemExit(f"{store}: scans counted {counts}, expected {n}")
    s.close()
    return out


# --- the driver -------------------------------------------------------------------


def available(store):
    try:
        importlib.import_module(MODULES[store])
        return True
    except ImportError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--stores", default=",".join(STORES))
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--dir", default=None, help="where the databases go (default: a temp dir)")
    ap.add_argument("--json", default=None, help="also write the medians here")
    ap.add_argument("--settle", action="store_true",
                    help="compact each store (untimed) between the puts and the reads")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.one:
        store, threads, path = a.one.split(":", 2)
        print(json.dumps(run_one(store, int(threads), a.keys, a.seed, path, a.settle)))
        return

    stores = [s for s in a.stores.split(",") if s]
    skipped = [s for s in stores if not available(s)]
    for s in skipped:
        print(f"# {s}: not installed here, left out", file=sys.stderr)
    stores = [s for s in stores if s not in skipped]
    thread_counts = [int(t) for t in a.threads.split(",")]
    base = a.dir or tempfile.mkdtemp(prefix="weft-pybench-")
    results = {}
    for threads in thread_counts:
        for rnd in range(a.rounds):
            # Stores interleaved within a round, so that a slow spell of the
            # machine does not fall on one store's rounds only.
            for store in stores:
                path = os.path.join(base, f"{store}-{threads}-{rnd}")
                shutil.rmtree(path, ignore_errors=True)
                cmd = [sys.executable, __file__, "--keys", str(a.keys), "--seed", str(a.seed),
                       "--one", f"{store}:{threads}:{path}"] + (["--settle"] if a.settle else [])
                r = subprocess.run(cmd, capture_output=True, text=True)
                shutil.rmtree(path, ignore_errors=True)
                if r.returncode != 0:
                    raise SystemExit(f"{store} failed:\n{r.stderr}")
                figures = json.loads(r.stdout.strip().splitlines()[-1])
                results.setdefault((store, threads), []).append(figures)
                print(f"# {store:9} threads={threads} round {rnd + 1}: "
                      + "  ".join(f"{p} {figures[p]:>10,.0f}/s" for p in PHASES), file=sys.stderr)
    if not a.dir:
        shutil.rmtree(base, ignore_errors=True)

    medians = {
        f"{s}/{t}": {p: statistics.median(r[p] for r in runs) for p in PHASES}
        for (s, t), runs in results.items()
    }
    print(f"\n{a.keys:,} keys of 16 B, values of 100 B; operations per second, "
          f"medians of {a.rounds}; ratio = weft / the store (above 1: weft is faster)"
          + ("; stores compacted between puts and reads" if a.settle else "") + "\n")
    print("| phase | threads | " + " | ".join(stores) + " | "
          + " | ".join(f"weft ÷ {s}" for s in stores if s != "weft") + " |")
    print("|---|---:|" + "---:|" * (2 * len(stores) - ("weft" in stores)))
    for p in PHASES:
        for t in thread_counts:
            row = [medians[f"{s}/{t}"][p] for s in stores]
            ratios = []
            if "weft" in stores:
                w = medians[f"weft/{t}"][p]
                ratios = [f"{w / medians[f'{s}/{t}'][p]:.2f}×" for s in stores if s != "weft"]
            print(f"| {p} | {t} | " + " | ".join(f"{v:,.0f}" for v in row) + " | "
                  + " | ".join(ratios) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"keys": a.keys, "rounds": a.rounds, "medians": medians}, f, indent=1)


if __name__ == "__main__":
    main()
