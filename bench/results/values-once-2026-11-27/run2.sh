#!/usr/bin/env bash
set -u
F="--benchmarks=fillrandom,overwrite --num=2000000 --key_size=16 --value_size=1024 --threads=1 --cache_size=67108864 --bloom_bits=10"
for r in 1 2 3; do
  for b in weft-ckpt weft-main; do
    rm -rf /tmp/vo-db; ./$b bench $F --db=/tmp/vo-db --values_in_wal=true > /work/bench-vo/ab-$b-$r.txt 2>&1
    echo "$b $r: $(grep -E '^(fillrandom|overwrite) ' ab-$b-$r.txt | awk '{print $1, $5}' | tr '\n' ' ') $(grep 'Process I/O' ab-$b-$r.txt | grep -o 'written [0-9.]* MiB') $(grep 'Write stalls' ab-$b-$r.txt | cut -c15-60)"
  done
done
rm -rf /tmp/vo-db
