#!/usr/bin/env bash
# A/B of values_in_wal in one binary, plus db_bench, 2M x 1 KiB fill+overwrite, 1 thread.
set -u
W=/work/bench-vo/weft-main
F="--benchmarks=fillrandom,overwrite --num=2000000 --key_size=16 --value_size=1024 --threads=1 --cache_size=67108864 --bloom_bits=10"
for r in 1 2 3; do
  for mode in true false; do
    rm -rf /tmp/vo-db; $W bench $F --db=/tmp/vo-db --values_in_wal=$mode --json=/work/bench-vo/weft-$mode-$r.json > /work/bench-vo/weft-$mode-$r.txt 2>&1
    echo "$mode $r: $(grep -E '^(fillrandom|overwrite) ' /work/bench-vo/weft-$mode-$r.txt | awk '{print $1, $5}' | tr '\n' ' ')"
  done
  rm -rf /tmp/vo-rdb; /opt/weft-db-bench/db_bench $F --db=/tmp/vo-rdb --compression_type=none > /work/bench-vo/rocks-$r.txt 2>&1
  echo "rocks $r: $(grep -E '^(fillrandom|overwrite) ' /work/bench-vo/rocks-$r.txt | awk '{print $1, $5}' | tr '\n' ' ')"
done
