#!/usr/bin/env bash
# lz4 on both engines, Weft's tables left uncompressed (values only).
set -u
cd /work/main
OUT=/work/bench-comp/suite-$(git rev-parse --short HEAD)
COMMON="--benchmarks=fillrandom,readrandom,seekrandom,readseq,overwrite --key_size=16 \
        --seek_nexts=10 --bloom_bits=10 --cache_size=67108864 --reads=1000000"
bench/compare --runs 3 --memtable teks --weft target/release/weft \
  --db_bench-flag --cache_size=134217728 \
  --weft-flag --sorted_compression=none --weft-flag --unsorted_compression=none \
  --json-dir "$OUT/lz4-values" -- \
  $COMMON --num=5000000 --value_size=256 --threads=1 --compression_type=lz4 \
  > "$OUT/lz4-values.txt" 2>&1
echo done > "$OUT/DONE2"
