//! End-to-end tests of the `weft` binary: the command-line contract (exit
//! codes, output formats) that scripts and later checks rely on.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn weft_cmd(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weft"));
    c.arg("--db").arg(db);
    c
}

/// Runs `weft --db DB ARGS...`.
fn weft<S: AsRef<OsStr>>(db: &Path, args: &[S]) -> Output {
    weft_cmd(db)
        .args(args)
        .output()
        .expect("failed to run the weft binary")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns stdout.
#[track_caller]
fn ok<S: AsRef<OsStr>>(db: &Path, args: &[S]) -> String {
    let o = weft(db, args);
    assert!(
        o.status.success(),
        "weft {:?} failed with {:?}\nstdout:\n{}\nstderr:\n{}",
        args.iter()
            .map(|a| a.as_ref().to_owned())
            .collect::<Vec<_>>(),
        o.status.code(),
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    (dir, db)
}

#[test]
fn put_get_delete_and_exit_codes() {
    let (_t, db) = temp_db();
    assert_eq!(ok(&db, &["put", "greeting", "hello world"]), "");
    assert_eq!(ok(&db, &["get", "greeting"]), "hello world\n");

    // Overwrite.
    ok(&db, &["put", "greeting", "bonjour"]);
    assert_eq!(ok(&db, &["get", "greeting"]), "bonjour\n");

    // Absent key: exit 1, nothing on stdout, and it is not an error message.
    let o = weft(&db, &["get", "nope"]);
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    assert!(o.stdout.is_empty());

    assert_eq!(ok(&db, &["delete", "greeting"]), "");
    let o = weft(&db, &["get", "greeting"]);
    assert_eq!(o.status.code(), Some(1));
    // Deleting an absent key is not an error.
    ok(&db, &["delete", "greeting"]);

    // Empty value and keys that look like flags.
    ok(&db, &["put", "-dash", ""]);
    assert_eq!(ok(&db, &["get", "-dash"]), "\n");

    // A range delete: [b, d) goes, d stays; a reversed range is refused.
    for k in ["a", "b", "c", "d"] {
        ok(&db, &["put", k, "v"]);
    }
    assert_eq!(ok(&db, &["delete-range", "b", "d"]), "");
    assert_eq!(ok(&db, &["scan"]), "-dash\t\na\tv\nd\tv\n");
    let o = weft(&db, &["delete-range", "d", "b"]);
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(&o));
    assert!(stderr(&o).contains("past its end"), "{}", stderr(&o));
}

#[test]
fn get_prints_raw_value_bytes() {
    let (_t, db) = temp_db();
    ok(&db, &["put", "k", "tab\there"]);
    assert_eq!(ok(&db, &["get", "k"]), "tab\there\n");
}

#[cfg(unix)]
#[test]
fn scan_escapes_binary_keys_and_values() {
    use std::os::unix::ffi::OsStrExt;
    let (_t, db) = temp_db();
    let key = OsStr::from_bytes(b"k\t1\n\xff");
    let value = OsStr::from_bytes(b"v\"\\\x01\xfe\n");
    ok(&db, &[OsStr::new("put"), key, value]);
    ok(&db, &["put", "a", "plain"]);

    // get returns the raw bytes.
    let o = weft(&db, &[OsStr::new("get"), key]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, b"v\"\\\x01\xfe\n\n");

    let out = ok(&db, &["scan"]);
    assert_eq!(
        out,
        "a\tplain\n\
         k\\t1\\n\\xff\tv\\\"\\\\\\x01\\xfe\\n\n"
    );
    // Exactly what Rust's escape_ascii produces.
    let expected = format!(
        "{}\t{}\n",
        b"k\t1\n\xff".escape_ascii(),
        b"v\"\\\x01\xfe\n".escape_ascii()
    );
    assert!(out.ends_with(&expected), "{out:?} vs {expected:?}");
    // One line per pair, whatever the bytes.
    assert_eq!(out.lines().count(), 2);
}

fn keys_of(scan_output: &str) -> Vec<String> {
    scan_output
        .lines()
        .map(|l| l.split('\t').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn scan_bounds_prefix_limit_reverse() {
    let (_t, db) = temp_db();
    for k in ["c", "ab", "a", "ba", "abc", "b", "abd"] {
        ok(&db, &["put", k, &format!("v-{k}")]);
    }
    // Keys come out sorted with their values.
    let all = ok(&db, &["scan"]);
    assert_eq!(keys_of(&all), ["a", "ab", "abc", "abd", "b", "ba", "c"]);
    assert!(all.starts_with("a\tv-a\nab\tv-ab\n"), "{all}");

    let scan = |args: &[&str]| {
        let mut v = vec!["scan"];
        v.extend_from_slice(args);
        keys_of(&ok(&db, &v))
    };
    // --start inclusive, --end exclusive.
    assert_eq!(scan(&["--start", "ab", "--end", "b"]), ["ab", "abc", "abd"]);
    assert_eq!(scan(&["--start=abc"]), ["abc", "abd", "b", "ba", "c"]);
    assert_eq!(scan(&["--end", "ab"]), ["a"]);
    assert_eq!(scan(&["--start", "b", "--end", "b"]), Vec::<String>::new());
    assert_eq!(scan(&["--start", "c", "--end", "a"]), Vec::<String>::new());
    // --prefix, alone and intersected with bounds.
    assert_eq!(scan(&["--prefix", "ab"]), ["ab", "abc", "abd"]);
    assert_eq!(scan(&["--prefix", "b"]), ["b", "ba"]);
    assert_eq!(scan(&["--prefix", "abc"]), ["abc"]);
    assert_eq!(scan(&["--prefix", "zz"]), Vec::<String>::new());
    assert_eq!(scan(&["--prefix", "ab", "--start", "abc"]), ["abc", "abd"]);
    assert_eq!(scan(&["--prefix", "ab", "--end", "abd"]), ["ab", "abc"]);
    // --limit.
    assert_eq!(scan(&["--limit", "2"]), ["a", "ab"]);
    assert_eq!(scan(&["--limit=0"]), Vec::<String>::new());
    assert_eq!(scan(&["--limit", "100"]).len(), 7);
    // --reverse, with bounds, prefix and limit.
    assert_eq!(
        scan(&["--reverse"]),
        ["c", "ba", "b", "abd", "abc", "ab", "a"]
    );
    assert_eq!(scan(&["--reverse", "--limit", "2"]), ["c", "ba"]);
    assert_eq!(
        scan(&["--reverse", "--start", "ab", "--end", "ba"]),
        ["b", "abd", "abc", "ab"]
    );
    assert_eq!(scan(&["--reverse", "--prefix", "ab"]), ["abd", "abc", "ab"]);
    assert_eq!(
        scan(&["--reverse", "--prefix", "ab", "--limit", "1"]),
        ["abd"]
    );

    // Deleted keys disappear from scans.
    ok(&db, &["delete", "abc"]);
    assert_eq!(scan(&["--prefix", "ab"]), ["ab", "abd"]);
}

#[test]
fn stats_table_and_json() {
    let (_t, db) = temp_db();
    for i in 0..10 {
        ok(&db, &["put", &format!("key{i}"), "value"]);
    }
    let table = ok(&db, &["stats"]);
    assert!(table.contains("sequence"), "{table}");
    assert!(table.contains("write amplification"), "{table}");
    assert!(table.contains("partitions:"), "{table}");
    assert!(table.contains("space on disk"), "{table}");
    assert!(table.contains("live ≈"), "{table}");
    assert!(table.contains("background jobs"), "{table}");
    assert!(table.contains("index checkpoint"), "{table}");
    assert!(table.contains("of partition_size"), "{table}");

    let json = ok(&db, &["stats", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("stats --json is not JSON ({e}):\n{json}"));
    // Ten puts, each its own sequence number.
    assert!(v["sequence"].as_u64().unwrap() >= 10, "{json}");
    assert!(v["partitions"].is_array(), "{json}");
    for p in v["partitions"].as_array().unwrap() {
        assert!(p["lower"].is_string(), "{json}");
        assert!(p["upper"].is_string() || p["upper"].is_null(), "{json}");
        assert!(p["unsorted_tables"].is_u64() && p["sorted_bytes"].is_u64());
    }
    for field in [
        "user_bytes_written",
        "wal_bytes_written",
        "flush_bytes_written",
        "merge_bytes_written",
        "manifest_bytes_written",
    ] {
        assert!(v[field].is_u64(), "{field} in {json}");
    }
    assert!(v["block_cache"]["hits"].is_u64() && v["block_cache"]["misses"].is_u64());
    assert!(v.get("write_amplification").is_some());
    assert!(v["memtable_kind"].is_string(), "{json}");
    for kind in [
        "flush",
        "merge",
        "gc",
        "split",
        "consolidation",
        "index_checkpoint",
    ] {
        let job = &v["background_jobs"][kind];
        assert!(
            job["count"].is_u64() && job["bytes_written"].is_u64(),
            "{kind} in {json}"
        );
        assert!(
            job["queued"].is_f64() && job["running"].is_f64(),
            "{kind} in {json}"
        );
    }
    // The ten puts are in the WAL; the manifest and CURRENT exist.
    assert!(v["disk"]["wals"].as_u64().unwrap() > 0, "{json}");
    assert!(v["disk"]["manifest"].as_u64().unwrap() > 0, "{json}");
    assert!(v["live_bytes_estimate"].is_u64(), "{json}");
    assert!(v["partition_size"].as_u64().unwrap() > 0, "{json}");
    for p in v["partitions"].as_array().unwrap() {
        assert!(p["size_bytes"].is_u64(), "{json}");
    }
}

#[test]
fn check_clean_database() {
    let (_t, db) = temp_db();
    for i in 0..50 {
        ok(&db, &["put", &format!("k{i:03}"), &"x".repeat(i * 10)]);
    }
    let out = ok(&db, &["check"]);
    assert!(out.contains("status: ok"), "{out}");
    assert!(out.contains("files:"), "{out}");
}

#[test]
fn read_commands_do_not_create_a_database() {
    let (t, _) = temp_db();
    let missing = t.path().join("missing");
    for args in [&["get", "k"][..], &["scan"], &["stats"], &["check"]] {
        let o = weft(&missing, args);
        assert!(!o.status.success(), "{args:?} succeeded on a missing db");
        assert!(stderr(&o).starts_with("weft: "), "{args:?}: {}", stderr(&o));
    }
    assert!(!missing.join("CURRENT").exists());
}

#[test]
fn usage_errors_exit_2() {
    let (_t, db) = temp_db();
    for args in [
        &["frobnicate"][..],
        &["get"],
        &["put", "only-key"],
        &["scan", "--limit", "many"],
        &["bench", "--num=lots"],
        &["bench", "--memtable=btree"],
    ] {
        let o = weft(&db, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("error:"), "{args:?}: {}", stderr(&o));
    }
    // Nothing was created by failed parses.
    assert!(!db.exists());
}

#[test]
fn bench_unknown_benchmark_is_an_error() {
    let (_t, db) = temp_db();
    let o = weft(&db, &["bench", "--benchmarks=fillseq,nosuch", "--num=10"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("weft: unknown benchmark \"nosuch\""),
        "{}",
        stderr(&o)
    );
    assert!(!db.exists(), "nothing may be touched before names resolve");
}

#[test]
fn bench_refuses_to_wipe_foreign_directory() {
    let (t, _) = temp_db();
    let precious = t.path().join("notes.txt");
    std::fs::write(&precious, b"keep me").unwrap();
    let o = weft(t.path(), &["bench", "--num=10"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).starts_with("weft: "), "{}", stderr(&o));
    assert!(precious.exists());
}

/// A parsed db_bench result line.
#[derive(Debug)]
struct BenchLine {
    name: String,
    micros_per_op: f64,
    ops_per_sec: u64,
    seconds: f64,
    operations: u64,
    tail: String,
}

/// Parses `%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %ld operations;%s`.
fn parse_bench_line(line: &str) -> Option<BenchLine> {
    let (name, rest) = line.split_once(" : ")?;
    // %-12s: left-aligned, padded to at least 12 columns.
    if name.len() < 12 || name.starts_with(' ') {
        return None;
    }
    let (fields, tail) = rest.split_once(';')?;
    let f: Vec<&str> = fields.split_whitespace().collect();
    if f.len() != 8
        || f[1] != "micros/op"
        || f[3] != "ops/sec"
        || f[5] != "seconds"
        || f[7] != "operations"
    {
        return None;
    }
    // %11.3f: right-aligned in 11 columns with three decimals.
    let micros_field = &rest[..rest.find(" micros/op")?];
    if micros_field.len() < 11 || micros_field.split('.').nth(1)?.len() != 3 {
        return None;
    }
    if f[4].split('.').nth(1)?.len() != 3 {
        return None;
    }
    Some(BenchLine {
        name: name.trim_end().to_string(),
        micros_per_op: f[0].parse().ok()?,
        ops_per_sec: f[2].parse().ok()?,
        seconds: f[4].parse().ok()?,
        operations: f[6].parse().ok()?,
        tail: tail.to_string(),
    })
}

/// `(F of T found)` at the end of a read benchmark's tail.
fn found_of(tail: &str) -> Option<(u64, u64)> {
    let inner = tail.trim_end().strip_suffix(" found)")?;
    let inner = &inner[inner.rfind('(')? + 1..];
    let (f, t) = inner.split_once(" of ")?;
    Some((f.parse().ok()?, t.parse().ok()?))
}

fn bench_lines(out: &str) -> Vec<BenchLine> {
    out.lines().filter_map(parse_bench_line).collect()
}

#[test]
fn bench_prints_a_db_bench_line_per_benchmark() {
    let (_t, db) = temp_db();
    let out = ok(&db, &["bench", "--num=2000", "--seed=7"]);
    assert!(out.contains("Keys:       16 bytes each"), "{out}");
    assert!(out.contains("Values:     100 bytes each"), "{out}");
    assert!(out.contains("Entries:    2000"), "{out}");
    assert!(out.contains("Memtablerep: teks"), "{out}");

    let lines = bench_lines(&out);
    let names: Vec<_> = lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fillseq",
            "fillrandom",
            "overwrite",
            "readrandom",
            "readseq",
            "seekrandom"
        ],
        "{out}"
    );
    for l in &lines {
        assert!(l.micros_per_op >= 0.0 && l.seconds >= 0.0, "{l:?}");
        assert!(l.ops_per_sec > 0, "{l:?}");
    }
    for l in &lines[..3] {
        assert_eq!(l.operations, 2000, "{l:?}");
        // Writes move bytes: `;  %6.1f MB/s`.
        assert!(
            l.tail.starts_with(' ') && l.tail.ends_with(" MB/s"),
            "{l:?}"
        );
        assert_eq!(l.tail.len(), " xxxx.x MB/s".len(), "{l:?}");
    }
    let rr = &lines[3];
    assert_eq!(rr.operations, 2000);
    let (found, tried) = found_of(&rr.tail).unwrap_or_else(|| panic!("{rr:?}"));
    assert_eq!(tried, 2000);
    // fillrandom + overwrite wrote ~86% of 0..2000; random reads hit most.
    assert!(found > 1000 && found < 2000, "{rr:?}");
    // readseq sees every distinct key once, fewer than num (random fills).
    let rs = &lines[4];
    assert!(rs.operations > 1000 && rs.operations < 2000, "{rs:?}");
    let sr = &lines[5];
    assert_eq!(sr.operations, 2000);
    assert!(found_of(&sr.tail).is_some(), "{sr:?}");
}

#[test]
fn bench_fillseq_then_reads_find_everything() {
    let (_t, db) = temp_db();
    let out = ok(
        &db,
        &[
            "bench",
            "--benchmarks=fillseq,readrandom,readseq,seekrandom",
            "--num",
            "2000",
            "--reads=500",
            "--key_size=10",
            "--value_size=50",
            "--seek_nexts=2",
            "--threads=2",
            "--seed=3",
        ],
    );
    let lines = bench_lines(&out);
    assert_eq!(lines.len(), 4, "{out}");
    // Two threads each do the full count.
    assert_eq!(lines[0].operations, 4000, "{out}");
    assert_eq!(found_of(&lines[1].tail), Some((1000, 1000)), "{out}");
    assert_eq!(lines[2].operations, 1000, "{out}");
    assert_eq!(found_of(&lines[3].tail), Some((1000, 1000)), "{out}");
    assert!(lines[3].tail.contains(" MB/s "), "{out}");

    // Keys are db_bench's: 8 big-endian bytes then '0' padding.
    let scan = ok(&db, &["scan", "--limit", "2"]);
    let expected = format!(
        "{}\t",
        [&0u64.to_be_bytes()[..], b"00"].concat().escape_ascii()
    );
    assert!(scan.starts_with(&expected), "{scan}");
    let second = format!(
        "\n{}\t",
        [&1u64.to_be_bytes()[..], b"00"].concat().escape_ascii()
    );
    assert!(scan.contains(&second), "{scan}");

    // --use_existing_db keeps the data and skips fills, as db_bench does.
    let out = ok(
        &db,
        &[
            "bench",
            "--benchmarks=fillseq,readrandom",
            "--num=2000",
            "--reads=100",
            "--key_size=10",
            "--use_existing_db",
        ],
    );
    assert!(
        out.contains("fillseq      : skipped (--use_existing_db is true)"),
        "{out}"
    );
    let lines = bench_lines(&out);
    assert_eq!(lines.len(), 1, "{out}");
    assert_eq!(found_of(&lines[0].tail), Some((100, 100)), "{out}");
}

#[test]
fn bench_line_parser_accepts_db_bench_output() {
    // Guards the parser the tests above rely on, against real db_bench text.
    let l = parse_bench_line(
        "fillseq      :       2.500 micros/op 400000 ops/sec 2.500 seconds 1000000 operations;   44.3 MB/s",
    )
    .unwrap();
    assert_eq!(l.name, "fillseq");
    assert_eq!(l.operations, 1_000_000);
    assert_eq!(l.ops_per_sec, 400_000);
    let l = parse_bench_line(
        "readrandom   :       3.108 micros/op 321716 ops/sec 3.108 seconds 1000000 operations;   22.9 MB/s (632382 of 1000000 found)",
    )
    .unwrap();
    assert_eq!(found_of(&l.tail), Some((632_382, 1_000_000)));
    assert!(parse_bench_line("Keys:       16 bytes each").is_none());
}

#[test]
fn bench_compact_flushes_and_merges_everything() {
    let (t, db) = temp_db();
    let json = t.path().join("r.json");
    let args = |benchmarks: &str| {
        vec![
            "bench".to_string(),
            format!("--benchmarks={benchmarks}"),
            "--num=2000".into(),
            "--json".into(),
            json.to_str().unwrap().to_string(),
        ]
    };
    let end = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&db, &args);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        v["end"]["engine"].clone()
    };
    // Without it, 2000 small keys stay in the 64 MiB memtable.
    let e = end(args("fillrandom"));
    assert_eq!(e["flushes"], 0, "{e}");
    let e = end(args("fillrandom,compact"));
    assert!(e["flushes"].as_u64().unwrap() >= 1, "{e}");
    assert!(e["merges"].as_u64().unwrap() >= 1, "{e}");
    assert!(e["merge_bytes_written"].as_u64().unwrap() > 0, "{e}");
}

#[test]
fn bench_new_benchmarks_parse_as_db_bench_lines_and_plot() {
    let (t, db) = temp_db();
    let json = t.path().join("r.json");
    let out = ok(
        &db,
        &[
            "bench",
            "--benchmarks=fillrandom,readmissing,readreverse,readwhilewriting,deleterandom,compact,stats,ycsb_load,ycsb_a,ycsb_e",
            "--num=1500",
            "--record_count=1000",
            "--operation_count=400",
            "--field_count=2",
            "--field_length=50",
            "--seed=5",
            "--disable_wal",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    // Weft honours --disable_wal: no warning, and (checked below through
    // the JSON) the run is recorded with it.
    assert!(!out.contains("warning: --disable_wal ignored"), "{out}");
    assert!(out.contains("Machine:    "), "{out}");
    assert!(out.contains("Command:    "), "{out}");
    let lines = bench_lines(&out);
    let names: Vec<_> = lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fillrandom",
            "readmissing",
            "readreverse",
            "readwhilewriting",
            "deleterandom",
            "compact",
            "ycsb_load",
            "ycsb_a",
            "ycsb_e"
        ],
        "{out}"
    );
    assert_eq!(found_of(&lines[1].tail), Some((0, 1500)), "{out}");
    assert_eq!(lines[5].operations, 1);
    assert_eq!(lines[6].operations, 1000);
    assert_eq!(lines[7].operations, 400);
    assert!(out.contains("  READ "), "{out}");
    assert!(out.contains("  SCAN "), "{out}");

    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "weft-bench/1");
    assert_eq!(v["benchmarks"].as_array().unwrap().len(), 10);
    assert!(v["command"][0].as_str().unwrap().ends_with("weft"));
    assert_eq!(v["config"]["disable_wal"], true);
    assert!(v["end"]["engine"]["user_bytes_written"].as_u64().unwrap() > 0);
    assert_eq!(
        v["end"]["engine"]["wal_bytes_written"], 0,
        "--disable_wal wrote to the WAL"
    );

    let charts = t.path().join("charts");
    let o = weft(
        &db,
        &[
            "bench",
            "plot",
            json.to_str().unwrap(),
            "--out",
            charts.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(charts.join("throughput.png").exists());
    assert!(charts.join("latency-ycsb_a.png").exists());
}

/// `weft changes` prints the batches a hold kept, across the opens and
/// closes of each command; `weft stats` shows the hold; a sequence no
/// longer held is an error naming the oldest one held.
#[test]
fn changes_prints_the_held_batches() {
    let (_t, db) = temp_db();
    {
        let d = weft::Db::open(&db, weft::Options::default()).unwrap();
        d.hold_changes("cli", 1).unwrap();
        d.close().unwrap();
    }
    ok(&db, &["put", "a", "1"]);
    ok(&db, &["delete", "b\n"]);
    ok(&db, &["put", "c", "3"]);
    let out = ok(&db, &["changes", "--from", "1"]);
    assert_eq!(
        out,
        "batch 1-1\n1\tput\tdefault\ta\t1\nbatch 2-2\n2\tdelete\tdefault\tb\\n\n\
         batch 3-3\n3\tput\tdefault\tc\t3\n"
    );
    let out = ok(&db, &["changes", "--from", "2", "--limit", "1"]);
    assert_eq!(out, "batch 2-2\n2\tdelete\tdefault\tb\\n\n");
    // Keyspaces: names and their own keys, creates with their options,
    // drops naming the keyspace their range delete covers.
    {
        let d = weft::Db::open(&db, weft::Options::default()).unwrap();
        let opts = weft::KeyspaceOptions::new().sorted_compression(weft::Compression::Lz4);
        let logs = d.create_keyspace("logs", opts).unwrap();
        logs.put("k1", "v1").unwrap();
        logs.delete_range("a", "b").unwrap();
        d.drop_keyspace("logs").unwrap();
        d.close().unwrap();
    }
    let out = ok(&db, &["changes", "--from", "4"]);
    assert_eq!(
        out,
        "batch 4-5\n4\tcreate_keyspace\tlogs\t1\tsorted_compression=lz4\n5\tregistry\n\
         batch 6-6\n6\tput\tlogs\tk1\tv1\n\
         batch 7-7\n7\tdelete_range\tlogs\ta\tb\n\
         batch 8-9\n8\tdrop_keyspace\tlogs\n9\tdelete_range\tlogs\t\t\n"
    );
    let table = ok(&db, &["stats"]);
    assert!(table.contains("change feed holds: 1"), "{table}");
    assert!(table.contains("\"cli\""), "{table}");
    let json = ok(&db, &["stats", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["feed_holds"][0]["name"], "cli", "{json}");
    assert_eq!(v["feed_holds"][0]["sequence"], 1, "{json}");
    {
        let d = weft::Db::open(&db, weft::Options::default()).unwrap();
        d.drop_hold("cli").unwrap();
        d.close().unwrap();
    }
    // The open that serves this removes the WALs no hold needs any more.
    let o = weft(&db, &["changes", "--from", "1"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no longer holds sequence 1"),
        "{}",
        stderr(&o)
    );
}

/// `weft checkpoint DEST` copies the database as it is: the copy scans
/// the same, later writes stay in the source, and the sequence and what
/// was linked and copied are printed. A non-empty DEST and a missing
/// database are errors that create nothing.
#[test]
fn checkpoint_copies_the_database() {
    let (t, db) = temp_db();
    for i in 0..60 {
        ok(&db, &["put", &format!("k{i:03}"), &"v".repeat(i * 20)]);
    }
    let dest = t.path().join("copy");
    let out = ok(&db, &[OsStr::new("checkpoint"), dest.as_os_str()]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0], "sequence: 60", "{out}");
    assert!(
        lines[1].starts_with("linked:   ") && lines[1].ends_with(" bytes"),
        "{out}"
    );
    assert!(
        lines[2].starts_with("copied:   ") && lines[2].ends_with(" bytes"),
        "{out}"
    );
    let before = ok(&db, &["scan"]);
    ok(&db, &["put", "later", "x"]);
    assert_eq!(ok(&dest, &["scan"]), before);
    assert_eq!(weft(&dest, &["get", "later"]).status.code(), Some(1));
    let o = weft(&db, &[OsStr::new("checkpoint"), dest.as_os_str()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("weft: invalid argument") && stderr(&o).contains("not empty"),
        "{}",
        stderr(&o)
    );
    let missing = t.path().join("missing");
    let elsewhere = t.path().join("elsewhere");
    let o = weft(&missing, &[OsStr::new("checkpoint"), elsewhere.as_os_str()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!missing.exists() && !elsewhere.exists());
}

/// `weft backup create|list|restore|delete|purge`: backups restore the
/// state they were taken at, the second stores less than the first, a
/// corrupt backup file makes `restore` exit 2 naming it.
#[test]
fn backup_create_list_restore_delete() {
    let (t, db) = temp_db();
    let backups = t.path().join("backups");
    let b = backups.as_os_str();
    for i in 0..40 {
        ok(&db, &["put", &format!("k{i:03}"), &"first".repeat(60)]);
    }
    let first_scan = ok(&db, &["scan"]);
    let out = ok(&db, &[OsStr::new("backup"), OsStr::new("create"), b]);
    assert!(out.starts_with("id:       1\nsequence: 40\n"), "{out}");
    for i in 0..5 {
        ok(&db, &["put", &format!("k{i:03}"), "second"]);
    }
    let second_scan = ok(&db, &["scan"]);
    let out = ok(&db, &[OsStr::new("backup"), OsStr::new("create"), b]);
    assert!(out.starts_with("id:       2\nsequence: 45\n"), "{out}");

    // `list` needs no database.
    let none = t.path().join("no-db");
    let list = ok(&none, &[OsStr::new("backup"), OsStr::new("list"), b]);
    let rows: Vec<Vec<&str>> = list.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(
        rows[0],
        ["id", "created", "sequence", "files", "bytes", "new_bytes"]
    );
    assert_eq!(rows.len(), 3, "{list}");
    assert_eq!((rows[1][0], rows[1][2]), ("1", "40"));
    assert_eq!((rows[2][0], rows[2][2]), ("2", "45"));
    let num = |s: &str| s.parse::<u64>().unwrap();
    assert_eq!(num(rows[1][5]), num(rows[1][4]), "the first copies all");
    assert!(
        num(rows[2][5]) < num(rows[2][4]),
        "the second shares: {list}"
    );

    let restore = |id: &str, dest: &Path| {
        weft(
            &none,
            &[
                OsStr::new("backup"),
                OsStr::new("restore"),
                b,
                OsStr::new(id),
                dest.as_os_str(),
            ],
        )
    };
    let r1 = t.path().join("r1");
    assert!(restore("1", &r1).status.success());
    assert_eq!(ok(&r1, &["scan"]), first_scan);
    let r2 = t.path().join("r2");
    assert!(restore("2", &r2).status.success());
    assert_eq!(ok(&r2, &["scan"]), second_scan);

    ok(
        &none,
        &[
            OsStr::new("backup"),
            OsStr::new("delete"),
            b,
            OsStr::new("1"),
        ],
    );
    let list = ok(&none, &[OsStr::new("backup"), OsStr::new("list"), b]);
    assert_eq!(list.lines().count(), 2, "{list}");

    // Damage backup 2's largest file (every shared file is its own now):
    // restore exits 2 naming it.
    let shared = backups.join("shared");
    let victim = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[10] ^= 0x40;
    std::fs::write(&victim, bytes).unwrap();
    let r3 = t.path().join("r3");
    let o = restore("2", &r3);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with(&format!("corruption: {}", victim.display())),
        "{}",
        stderr(&o)
    );
    assert!(!r3.exists());

    let out = ok(
        &none,
        &[
            OsStr::new("backup"),
            OsStr::new("purge"),
            b,
            OsStr::new("--keep"),
            OsStr::new("0"),
        ],
    );
    assert_eq!(out, "deleted backup 2\n");
    assert!(!none.exists(), "no command here opened a database");
}

/// `weft stats` shows the counters over every open beside those of its
/// own open: a library session that flushed and merged, then two `weft
/// put` sessions (each close flushes its one write), add up in
/// `lifetime`, while the since-open counters of the `stats` command's own
/// open read 0.
#[test]
fn stats_shows_lifetime_counters_summed_over_every_open() {
    let (_t, db) = temp_db();
    let first = {
        let d = weft::Db::open(&db, weft::Options::default()).unwrap();
        for i in 0..100 {
            d.put(format!("k{i:03}"), "some value").unwrap();
        }
        d.compact().unwrap();
        let s = d.stats();
        d.close().unwrap();
        s
    };
    assert!(first.flushes >= 1 && first.merges >= 1, "{first:?}");
    ok(&db, &["put", "a", "1"]);
    let json = ok(&db, &["stats", "--json"]);
    let after_one: serde_json::Value = serde_json::from_str(&json).unwrap();
    ok(&db, &["put", "b", "2"]);
    let json = ok(&db, &["stats", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let life = &v["lifetime"];
    let num = |x: &serde_json::Value| x.as_u64().unwrap_or_else(|| panic!("{x} in {json}"));
    // Since this open (read-only, beside no writer): nothing written.
    assert_eq!(num(&v["flushes"]), 0, "{json}");
    assert_eq!(num(&v["merges"]), 0, "{json}");
    assert_eq!(num(&v["user_bytes_written"]), 0, "{json}");
    assert_eq!(num(&v["manifest_bytes_written"]), 0, "{json}");
    // Over every open: the library session, two puts, and this stats
    // (a read-only open saves no STATS, so the earlier stats left none).
    assert_eq!(num(&life["opens"]), 4, "{json}");
    assert_eq!(num(&life["restarts"]), 0, "{json}");
    assert_eq!(num(&life["flushes"]), first.flushes + 2, "{json}");
    assert_eq!(num(&life["merges"]), first.merges, "{json}");
    assert_eq!(
        num(&life["merge_bytes_written"]),
        first.merge_bytes_written,
        "{json}"
    );
    let put_bytes = num(&after_one["lifetime"]["user_bytes_written"]) - first.user_bytes_written;
    assert!(put_bytes > 0, "{json}");
    assert_eq!(
        num(&life["user_bytes_written"]),
        first.user_bytes_written + 2 * put_bytes,
        "{json}"
    );
    assert!(num(&life["manifest_bytes_written"]) > num(&v["manifest_bytes_written"]));
    assert_eq!(
        num(&life["background_jobs"]["merge"]["count"]),
        first.background_job(weft::JobKind::Merge).count,
        "{json}"
    );
    assert!(life["restart_reason"].is_null(), "{json}");

    let table = ok(&db, &["stats"]);
    assert!(
        table.contains("4 opens (this one included), 0 restarts"),
        "{table}"
    );
    assert!(
        table.contains("since open") && table.contains("lifetime"),
        "{table}"
    );
    let flushes: Vec<&str> = table
        .lines()
        .find(|l| l.trim_start().starts_with("flushes "))
        .unwrap_or_else(|| panic!("no flushes row in\n{table}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        flushes,
        ["flushes", "0", &(first.flushes + 2).to_string()],
        "{table}"
    );
    assert!(table.contains("background jobs (lifetime):"), "{table}");
}

#[test]
fn read_commands_work_beside_a_writer() {
    let (_t, db) = temp_db();
    let writer = weft::Db::open(&db, weft::Options::default()).unwrap();
    for i in 0..200 {
        writer
            .put(format!("k{i:03}"), format!("flushed {i}"))
            .unwrap();
    }
    writer.flush().unwrap();
    // Only in the writer's (mapped, zero-tailed) WAL.
    writer.put("wal", "only in the log").unwrap();
    assert_eq!(ok(&db, &["get", "wal"]), "only in the log\n");
    assert_eq!(ok(&db, &["get", "k007"]), "flushed 7\n");
    let scan = ok(&db, &["scan"]);
    assert_eq!(keys_of(&scan).len(), 201, "{scan}");
    let stats = ok(&db, &["stats", "--json"]);
    assert!(
        serde_json::from_str::<serde_json::Value>(&stats).is_ok(),
        "{stats}"
    );
    let check = ok(&db, &["check"]);
    assert!(check.contains("status: ok"), "{check}");
    // Writers still need the lock.
    let o = weft(&db, &["put", "x", "1"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("locked"), "{}", stderr(&o));
    writer.close().unwrap();
}
