#!/usr/bin/env bash
# fillrandom then reads in one process, values_in_wal on/off in one binary, and db_bench.
set -u
W=/work/bench-vo/weft-reads
F="--benchmarks=fillrandom,readrandom,seekrandom --num=2000000 --reads=200000 --seek_nexts=10 --key_size=16 --value_size=1024 --threads=1 --cache_size=67108864 --bloom_bits=10"
for r in 1 2 3; do
  for mode in true false; do
    rm -rf /tmp/vr; $W bench $F --db=/tmp/vr --values_in_wal=$mode > /work/bench-vo/reads-$mode-$r.txt 2>&1
    echo "$mode $r: $(grep -E '^(fillrandom|readrandom|seekrandom) ' /work/bench-vo/reads-$mode-$r.txt | awk '{print $1, $5}' | tr '\n' ' ')"
  done
  rm -rf /tmp/vr; /opt/weft-db-bench/db_bench $F --db=/tmp/vr --compression_type=none > /work/bench-vo/reads-rocks-$r.txt 2>&1
  echo "rocks $r: $(grep -E '^(fillrandom|readrandom|seekrandom) ' /work/bench-vo/reads-rocks-$r.txt | awk '{print $1, $5}' | tr '\n' ' ')"
done
rm -rf /tmp/vr
