//! Tests of the benchmark driver: runs, medians, reports, the database
//! directory it may wipe.

use super::*;

fn small(dir: &Path, benchmarks: &[&str]) -> BenchConfig {
    BenchConfig {
        benchmarks: benchmarks.iter().map(|s| s.to_string()).collect(),
        db: dir.join("db"),
        num: 500,
        seed: 9,
        write_buffer_size: 64 << 10,
        progress: false,
        ..BenchConfig::default()
    }
}

fn line_of<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{name:<12} : ")))
        .unwrap_or_else(|| panic!("no {name} line in\n{out}"))
}

/// `--writes` caps each thread's writes (db_bench's meaning), so that
/// `bench/scaling` can give every thread count the same total work.
#[test]
fn writes_caps_the_writes_of_each_thread() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small(dir.path(), &["fillrandom", "overwrite", "deleterandom"]);
    cfg.threads = 4;
    cfg.writes = Some(30);
    let res = run(&cfg, &mut Vec::new()).unwrap();
    for r in &res {
        assert_eq!(r.summary.as_ref().unwrap().done, 120, "{}", r.name);
    }
}

#[test]
fn db_bench_additions_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small(
        dir.path(),
        &[
            "fillseq",
            "readmissing",
            "readreverse",
            "readwhilewriting",
            "deleterandom",
            "readrandom",
            "stats",
        ],
    );
    cfg.threads = 2;
    cfg.histogram = true;
    let mut out = Vec::new();
    let res = run(&cfg, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    // Every key was written by each of 2 threads; none is ever missing.
    assert!(
        line_of(&out, "readmissing").ends_with("(0 of 1000 found)"),
        "{out}"
    );
    let rev = res.iter().find(|r| r.name == "readreverse").unwrap();
    // Each thread scans the 500 keys backwards.
    assert_eq!(rev.summary.as_ref().unwrap().done, 1000);
    assert!(line_of(&out, "readwhilewriting").ends_with("(1000 of 1000 found)"));
    let rww = res.iter().find(|r| r.name == "readwhilewriting").unwrap();
    assert_eq!(rww.summary.as_ref().unwrap().done, 1000);
    // After deleting random keys some reads miss.
    let rr = line_of(&out, "readrandom");
    assert!(!rr.ends_with("(1000 of 1000 found)"), "{rr}");
    assert!(out.contains("Microseconds per delete:"), "{out}");
    assert!(out.contains("stats        : weft engine statistics"));
    assert!(out.contains("Engine stats: write-amp"));
    assert!(out.contains("Process I/O:"));
    // Weft's own end lines: its background jobs, its space against live
    // data (next to what the full scan found), its partitions' sizes.
    let end_line = |label: &str| {
        out.lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} line in\n{out}"))
    };
    assert!(end_line("Background:").contains("flush"), "{out}");
    assert!(out.contains("index checkpoint"), "{out}");
    let space = end_line("Weft space:");
    assert!(
        space.contains("live ≈") && space.contains("by full scan live"),
        "{out}"
    );
    assert!(
        end_line("Partitions:").contains("of partition_size"),
        "{out}"
    );
    assert!(out.contains("\"background_jobs\""), "{out}");
}

#[test]
fn ycsb_end_to_end_with_json() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small(
        dir.path(),
        &[
            "ycsb_load",
            "ycsb_a",
            "ycsb_b",
            "ycsb_c",
            "ycsb_d",
            "ycsb_e",
            "ycsb_f",
            "ycsb_p",
        ],
    );
    cfg.record_count = Some(400);
    cfg.operation_count = Some(300);
    cfg.field_count = 4;
    cfg.field_length = 25;
    cfg.max_scan_length = 10;
    cfg.threads = 2;
    cfg.runs = 3;
    let json_path = dir.path().join("r.json");
    cfg.json = Some(json_path.clone());
    let mut out = Vec::new();
    run(&cfg, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("-- medians of 3 runs (by ops/sec) --"),
        "{out}"
    );
    for name in ["ycsb_a", "ycsb_b", "ycsb_c", "ycsb_d", "ycsb_f"] {
        let l = line_of(&out, name);
        // Every record was loaded, so every read finds its key (D reads
        // only acknowledged keys or in-flight ones; with 2 threads a
        // rare miss is possible, so D only checks the shape).
        assert!(l.contains(" found)"), "{l}");
        if name != "ycsb_d" {
            let (f, t) = l.rsplit_once('(').unwrap().1.split_once(" of ").unwrap();
            assert_eq!(f, t.trim_end_matches(" found)"), "{l}");
        }
    }
    let report = json::parse(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(report.runs, 3);
    assert_eq!(report.benchmarks.len(), 8);
    let by = |n: &str| report.benchmarks.iter().find(|b| b.name == n).unwrap();
    assert_eq!(by("ycsb_load").ops, 400);
    assert_eq!(by("ycsb_a").ops, 300);
    assert_eq!(by("ycsb_a").runs_ops_per_sec.len(), 3);
    let a = &by("ycsb_a").latency_us;
    assert!(a.contains_key("read") && a.contains_key("update"), "{a:?}");
    assert!(by("ycsb_e").latency_us.contains_key("scan"));
    assert!(by("ycsb_e").latency_us.contains_key("insert"));
    assert!(by("ycsb_f").latency_us.contains_key("read_modify_write"));
    assert!(by("ycsb_p").latency_us.contains_key("update"));
    let r = &a["read"];
    assert!(r.p50 <= r.p95 && r.p95 <= r.p99 && r.p99 <= r.p999 && r.p999 <= r.max);
    let end = report.end.unwrap();
    // 400 records of 16 + 100 bytes plus D/E inserts.
    assert!(end.live_bytes.unwrap() >= 400 * 116, "{end:?}");
    assert!(end.io.wchar > 0);
    assert_eq!(report.engine, "weft");
    assert_eq!(report.schema, json::SCHEMA);
}

#[test]
fn every_distribution_runs() {
    for d in dist::DistributionKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = small(dir.path(), &["ycsb_load", "ycsb_c"]);
        cfg.record_count = Some(300);
        cfg.operation_count = Some(200);
        cfg.distribution = Some(d);
        let mut out = Vec::new();
        run(&cfg, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(
            line_of(&out, "ycsb_c").ends_with("(200 of 200 found)"),
            "{d}: {out}"
        );
    }
}

#[test]
fn unknown_engine_fails_before_touching_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small(dir.path(), &["fillseq"]);
    cfg.engine = "leveldb".into();
    let err = run(&cfg, &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("not in this build"), "{err}");
    assert!(!dir.path().join("db").exists());
}

#[test]
fn store_knobs_reach_weft_options() {
    let mut cfg = BenchConfig {
        cache_size: 12345,
        bloom_bits: Some(7),
        ..BenchConfig::default()
    };
    cfg.store.partition_size = Some(1 << 20);
    cfg.store.unsorted_limit = Some(1 << 21);
    cfg.store.min_blob_size = Some(64);
    cfg.store.scan_merge_limit = Some(3);
    cfg.store.gc_garbage_ratio = Some(0.25);
    cfg.store.gc_min_garbage_bytes = Some(99);
    cfg.store.row_cache_size = Some(1 << 22);
    cfg.store.munk_cache_size = Some(1 << 23);
    let o = engine::weft_options(&cfg);
    assert_eq!(o.block_cache_size, 12345);
    assert_eq!(o.bloom_bits_per_key, 7);
    assert_eq!(o.partition_size, 1 << 20);
    assert_eq!(o.unsorted_limit, 1 << 21);
    assert_eq!(o.min_blob_size, 64);
    assert_eq!(o.scan_merge_limit, 3);
    assert_eq!(o.gc_garbage_ratio, 0.25);
    assert_eq!(o.gc_min_garbage_bytes, 99);
    assert_eq!(o.row_cache_size, 1 << 22);
    assert_eq!(o.munk_cache_size, 1 << 23);
    // Unset knobs keep the engine's defaults.
    let d = engine::weft_options(&BenchConfig::default());
    assert_eq!(d.partition_size, weft::Options::default().partition_size);
    assert_eq!(
        d.bloom_bits_per_key,
        weft::Options::default().bloom_bits_per_key
    );
}

#[test]
fn unknown_benchmark_fails_before_touching_disk() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let cfg = BenchConfig {
        benchmarks: vec!["fillseq".into(), "fillsqe".into()],
        db: db.clone(),
        ..BenchConfig::default()
    };
    let mut out = Vec::new();
    let err = run(&cfg, &mut out).unwrap_err();
    assert!(matches!(err, Error::UnknownBenchmark(ref n, _) if n == "fillsqe"));
    assert!(!db.exists());
    assert!(out.is_empty());
}

#[test]
fn wipe_refuses_foreign_directories() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("thesis.tex"), b"precious").unwrap();
    assert!(matches!(wipe_db_dir(dir.path()), Err(Error::Config(_))));
    assert!(dir.path().join("thesis.tex").exists());
}

#[test]
fn wipe_clears_a_database_directory() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["CURRENT", "MANIFEST-000001", "000002.log", "000003.sst"] {
        std::fs::write(dir.path().join(f), b"x").unwrap();
    }
    std::fs::create_dir(dir.path().join("vlog")).unwrap();
    wipe_db_dir(dir.path()).unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // Missing and empty directories are fine.
    wipe_db_dir(dir.path()).unwrap();
    wipe_db_dir(&dir.path().join("missing")).unwrap();
}

/// readrandomwriterandom mixes reads and writes by `--readwritepercent`,
/// and with `--transactions` runs them in transactions (grouped by
/// `--ops_per_transaction`) that find what the plain run finds.
#[test]
fn readrandomwriterandom_plain_and_in_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let mut found = Vec::new();
    for (transactions, group) in [(false, 1), (true, 1), (true, 3)] {
        let mut cfg = small(dir.path(), &["fillseq", "readrandomwriterandom"]);
        cfg.threads = 2;
        cfg.readwritepercent = 70;
        cfg.transactions = transactions;
        cfg.ops_per_transaction = group;
        let mut out = Vec::new();
        let res = run(&cfg, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let r = res
            .iter()
            .find(|r| r.name == "readrandomwriterandom")
            .unwrap();
        let s = r.summary.as_ref().unwrap();
        assert_eq!(s.done, 1000, "{out}");
        let line = out
            .lines()
            .find(|l| l.starts_with("readrandomwriterandom :"))
            .unwrap_or_else(|| panic!("no line in\n{out}"));
        // fillseq wrote every key: every read finds one. About 70% reads.
        let tail = line.rsplit('(').next().unwrap();
        let (hits, reads) = tail.split_once(" of ").unwrap();
        let reads: u64 = reads.split_whitespace().next().unwrap().parse().unwrap();
        assert_eq!(hits.parse::<u64>().unwrap(), reads, "{line}");
        assert!((600..=800).contains(&reads), "{line}");
        found.push(reads);
    }
    // The same seeds draw the same operations, grouped or not.
    assert!(found.windows(2).all(|w| w[0] == w[1]), "{found:?}");
}

/// `--keyspaces=N` spreads the keys over N keyspaces: every read finds
/// what the fill wrote (each key lives in the keyspace it hashes to), the
/// keyspaces all hold some, and the default keyspace holds none.
#[test]
fn keyspaces_spread_the_keys_and_reads_find_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = small(dir.path(), &["fillseq", "readrandom"]);
    cfg.keyspaces = 4;
    cfg.threads = 2;
    let mut out = Vec::new();
    run(&cfg, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(
        line_of(&out, "readrandom").ends_with("(1000 of 1000 found)"),
        "{out}"
    );
    let db = weft::Db::open(&cfg.db, weft::Options::default()).unwrap();
    assert_eq!(db.keyspaces().len(), 5, "{:?}", db.keyspaces());
    let mut total = 0;
    for i in 0..4 {
        let n = db
            .keyspace(&format!("bench{i}"))
            .unwrap()
            .range::<&[u8], _>(..)
            .unwrap()
            .count();
        assert!(n > 50, "keyspace bench{i} holds {n} of 500 keys");
        total += n;
    }
    assert_eq!(total, 500);
    assert_eq!(db.range::<&[u8], _>(..).unwrap().count(), 0);
    // Another engine refuses the flag.
    let mut other = cfg.clone();
    other.engine = "rocksdb".into();
    assert!(other.validate().is_err());
}
