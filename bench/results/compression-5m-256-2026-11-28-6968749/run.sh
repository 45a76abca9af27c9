#!/usr/bin/env bash
# The 5M x 256 B storage suite with compression none, lz4, zstd on both
# engines (issue 38's targets), medians of 3, on this machine.
set -u
cd /work/main
OUT=/work/bench-comp/suite-$(git rev-parse --short HEAD)
mkdir -p "$OUT"
COMMON="--benchmarks=fillrandom,readrandom,seekrandom,readseq,overwrite --key_size=16 \
        --seek_nexts=10 --bloom_bits=10 --cache_size=67108864 --reads=1000000"
for c in none lz4 zstd; do
  bench/compare --runs 3 --memtable teks --weft target/release/weft \
    --db_bench-flag --cache_size=134217728 --json-dir "$OUT/$c" -- \
    $COMMON --num=5000000 --value_size=256 --threads=1 --compression_type=$c \
    > "$OUT/$c.txt" 2>&1
done
echo done > "$OUT/DONE"
