#!/usr/bin/env bash
# Munks A/B (issue 37), YCSB A-F with Zipf-composite keys, 500k x 1 KiB, t=1,
# medians of 3: Weft with a 1 GiB munk budget, Weft without, both with
# 128 MiB partitions; RocksDB (crate 0.22) with its block cache raised by
# the munk budget (8 MiB + 1 GiB). WEFT must be built with --features rocksdb.
set -euo pipefail
OUT=${OUT:-$(dirname "$0")}
WEFT=${WEFT:?a weft binary built with --features rocksdb}
COMMON=(--bloom_bits=10 --partition_size=134217728)
export RECORDS=500000 OPS=200000 DIST=zipf-composite RUNS=3 THREADS=1
WEFT=$WEFT ENGINES=weft bench/ycsb "$OUT/weft-munks" -- "${COMMON[@]}" --munk_cache_size=1073741824
WEFT=$WEFT ENGINES=weft bench/ycsb "$OUT/weft-no-munks" -- "${COMMON[@]}"
WEFT=$WEFT ENGINES=rocksdb bench/ycsb "$OUT/rocksdb" -- --bloom_bits=10 --cache_size=1082130432
# Then, after the fenced search (79aeabe): the same Weft pair and RocksDB with
# OPS=1000000, so munk loads and rebalances amortize (results in long/).
#   RECORDS=500000 OPS=1000000 DIST=zipf-composite RUNS=3 THREADS=1 ENGINES=weft \
#     bench/ycsb long/weft-munks -- --bloom_bits=10 --partition_size=134217728 --munk_cache_size=1073741824
#   (and long/weft-no-munks without the munk flag; long/rocksdb with --cache_size=1082130432)
