//! The `weft` command: put/get/delete/scan/check/stats/changes/checkpoint/
//! backup/bench/serve.
//!
//! Exit codes are part of the contract scripts rely on:
//! - 0: success;
//! - 1: `get` found no value, or an error (printed as `weft: <error>`);
//! - 2: `check` found corruption, or `backup restore` a corrupt backup file
//!   (printed as `corruption: FILE at offset N: reason`), or the command
//!   line was invalid (clap's usage error).
//!
//! Output goes through a locked, buffered stdout; a closed pipe
//! (`weft scan | head`) ends the command quietly instead of panicking.

mod args;
mod stats;

use std::ffi::OsStr;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use weft::{Db, Options, ReadOptions};

use args::{BackupAction, Cli, Command, ScanArgs, DEFAULT_DB};

/// Everything that can end a command early.
#[derive(Debug)]
enum CliError {
    Db(weft::Error),
    Bench(weft_bench::Error),
    Server(weft_server::Error),
    Io(io::Error),
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Db(e) => write!(f, "{e}"),
            CliError::Bench(e) => write!(f, "{e}"),
            CliError::Server(e) => write!(f, "{e}"),
            CliError::Io(e) => write!(f, "writing output: {e}"),
        }
    }
}

impl From<weft::Error> for CliError {
    fn from(e: weft::Error) -> Self {
        CliError::Db(e)
    }
}

impl From<weft_bench::Error> for CliError {
    fn from(e: weft_bench::Error) -> Self {
        match e {
            weft_bench::Error::Db(e) => CliError::Db(e),
            other => CliError::Bench(other),
        }
    }
}

impl From<weft_server::Error> for CliError {
    fn from(e: weft_server::Error) -> Self {
        match e {
            weft_server::Error::Db(e) => CliError::Db(e),
            other => CliError::Server(other),
        }
    }
}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        CliError::Io(e)
    }
}

type CliResult<T = ExitCode> = Result<T, CliError>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        // The reader went away: nothing left to say to anyone.
        Err(CliError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weft: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> CliResult {
    let db_dir = cli.db.clone();
    let dir = || db_dir.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
    match cli.command {
        Command::Put { key, value } => {
            let db = open(&dir(), true)?;
            db.put(bytes(&key), bytes(&value))?;
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Delete { key } => {
            let db = open(&dir(), true)?;
            db.delete(bytes(&key))?;
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::DeleteRange { start, end } => {
            let db = open(&dir(), true)?;
            db.delete_range(bytes(&start), bytes(&end))?;
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Get { key } => {
            let db = open_read_only(&dir())?;
            let value = db.get(bytes(&key))?;
            db.close()?;
            match value {
                Some(v) => {
                    let mut out = io::stdout().lock();
                    out.write_all(&v)?;
                    out.write_all(b"\n")?;
                    out.flush()?;
                    Ok(ExitCode::SUCCESS)
                }
                None => Ok(ExitCode::from(1)),
            }
        }
        Command::Scan(args) => {
            let db = open_read_only(&dir())?;
            let mut out = BufWriter::new(io::stdout().lock());
            scan(&db, &args, &mut out)?;
            out.flush()?;
            drop(out);
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check => check(&dir()),
        Command::Changes { from, limit } => {
            let db = open(&dir(), false)?;
            let mut out = BufWriter::new(io::stdout().lock());
            changes(&db, from, limit.unwrap_or(u64::MAX), &mut out)?;
            out.flush()?;
            drop(out);
            db.close()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Stats { json } => {
            let db = open_read_only(&dir())?;
            let s = db.stats();
            db.close()?;
            let text = if json {
                let mut t = serde_json::to_string_pretty(&stats::to_json(&s))
                    .map_err(|e| CliError::Io(io::Error::other(e)))?;
                t.push('\n');
                t
            } else {
                stats::to_table(&s)
            };
            let mut out = io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Checkpoint { dest } => {
            let db = open(&dir(), false)?;
            let info = db.checkpoint(&dest)?;
            db.close()?;
            let mut out = io::stdout().lock();
            writeln!(out, "sequence: {}", info.sequence)?;
            writeln!(
                out,
                "linked:   {} files, {} bytes",
                info.files_linked, info.bytes_linked
            )?;
            writeln!(
                out,
                "copied:   {} files, {} bytes",
                info.files_copied, info.bytes_copied
            )?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Backup { action } => backup(action, &dir()),
        Command::Bench(args) => {
            if let Some(args::BenchAction::Plot { files, out }) = &args.action {
                let (written, notes) = weft_bench::plot::plot(files, out)?;
                for n in notes {
                    eprintln!("weft: {n}");
                }
                let mut o = io::stdout().lock();
                for w in written {
                    writeln!(o, "{}", w.display())?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            let mut config = args.to_config(db_dir);
            // Printed with the results and stored in the JSON: a figure
            // without its command cannot be reproduced.
            config.command = std::env::args().collect();
            let mut out = io::stdout().lock();
            weft_bench::run(&config, &mut out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => serve(args, dir()),
    }
}

/// `weft serve`: binds, prints `listening on ADDR:PORT`, serves until
/// SIGINT/SIGTERM, then shuts down gracefully (a second signal exits at
/// once).
fn serve(args: args::ServeArgs, default_dir: PathBuf) -> CliResult {
    // Before any thread exists, so that every thread inherits the mask and
    // only the waiter below ever sees the signals.
    let signals = weft_server::signal::block_termination()?;
    let mut config = weft_server::Config::default();
    config.bind = args.bind;
    config.port = args.port;
    config.dir = args.dir.unwrap_or(default_dir);
    config.save_dir = args.save_dir;
    config.sync = args.sync;
    config.maxclients = args.maxclients;
    config.timeout = (args.timeout > 0).then(|| std::time::Duration::from_secs(args.timeout));
    config.max_bulk = args.max_bulk_len;
    config.max_query_buffer = args.max_query_buffer;
    if let Some(t) = args.threads {
        config.threads = t;
    }
    if let Some(us) = args.busy_poll_us {
        config.busy_poll = std::time::Duration::from_micros(us);
    }
    if let Some(m) = args.memtable {
        config.db_options = config.db_options.memtable(m);
    }
    config.requirepass = args.requirepass.filter(|p| !p.is_empty());
    config.masterauth = args.masterauth.filter(|p| !p.is_empty());
    if let Some(words) = args.replicaof {
        // `--replicaof HOST PORT`, or Redis's `--replicaof "HOST PORT"`.
        let words: Vec<&str> = words.iter().flat_map(|w| w.split_whitespace()).collect();
        let [host, port] = words[..] else {
            return Err(CliError::Server(weft_server::Error::Config(format!(
                "--replicaof takes HOST PORT, got {words:?}"
            ))));
        };
        let port: u16 = port.parse().map_err(|_| {
            CliError::Server(weft_server::Error::Config(format!(
                "--replicaof: bad port {port:?}"
            )))
        })?;
        config.replicaof = Some((host.to_string(), port));
    }
    config.databases = args.databases as usize;
    config.notify_keyspace_events = args.notify_keyspace_events.unwrap_or(0);
    let server = weft_server::Server::bind(config)?;
    let handle = server.shutdown_handle();
    {
        let mut out = io::stdout().lock();
        writeln!(out, "listening on {}", server.local_addr())?;
        out.flush()?;
    }
    std::thread::Builder::new()
        .name("weft-signals".into())
        .spawn(move || {
            if let Ok(sig) = signals.wait() {
                eprintln!("weft serve: signal {sig}, shutting down");
                handle.shutdown();
                if signals.wait().is_ok() {
                    eprintln!("weft serve: second signal, exiting now");
                    std::process::exit(130);
                }
            }
        })?;
    server.run()?;
    Ok(ExitCode::SUCCESS)
}

/// Opens the database. Read-only commands do not create one: a mistyped
/// `--db` should fail loudly, not print nothing from a fresh empty store.
fn open(dir: &Path, create: bool) -> Result<Db, weft::Error> {
    Db::open(dir, Options::default().create_if_missing(create))
}

/// Opens the database read-only, for the commands that only read (`get`,
/// `scan`, `stats`, `check`): they take no lock and write nothing, so they
/// work beside a running `weft serve` (or any writer) on the same
/// directory, reading the database as of the open, WAL included.
fn open_read_only(dir: &Path) -> Result<Db, weft::Error> {
    Db::open_read_only(dir, Options::default())
}

/// The raw bytes of an argument (any bytes on Unix, so binary keys work).
fn bytes(s: &OsStr) -> Vec<u8> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        s.as_bytes().to_vec()
    }
    #[cfg(not(unix))]
    {
        s.to_string_lossy().into_owned().into_bytes()
    }
}

/// The `[lower, upper)` window a scan covers: `--start`/`--end` intersected
/// with the range of `--prefix`. `None` bounds are open.
fn scan_bounds(args: &ScanArgs) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let mut lower = args.start.as_deref().map(bytes);
    let mut upper = args.end.as_deref().map(bytes);
    if let Some(p) = args.prefix.as_deref().map(bytes) {
        let p_upper = weft::prefix_successor(&p);
        lower = Some(match lower {
            Some(l) if l > p => l,
            _ => p,
        });
        upper = match (upper, p_upper) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    (lower, upper)
}

fn scan(db: &Db, args: &ScanArgs, out: &mut dyn Write) -> CliResult<()> {
    let (lower, upper) = scan_bounds(args);
    if let (Some(l), Some(u)) = (&lower, &upper) {
        if l >= u {
            return Ok(());
        }
    }
    let mut opts = ReadOptions::new();
    if let Some(l) = lower {
        opts = opts.lower_bound(l);
    }
    if let Some(u) = upper {
        opts = opts.upper_bound(u);
    }
    let mut it = db.iter(&opts)?;
    if args.reverse {
        it.seek_to_last()?;
    } else {
        it.seek_to_first()?;
    }
    let limit = args.limit.unwrap_or(u64::MAX);
    let mut printed = 0u64;
    while it.valid() && printed < limit {
        writeln!(
            out,
            "{}\t{}",
            it.key().escape_ascii(),
            it.value().escape_ascii()
        )?;
        printed += 1;
        if args.reverse {
            it.prev()?;
        } else {
            it.next()?;
        }
    }
    Ok(())
}

/// `weft changes`: up to `limit` batches of the change feed from `from`
/// (the durable limit: everything an open recovered is durable).
fn changes(db: &Db, from: u64, limit: u64, out: &mut dyn Write) -> CliResult<()> {
    use weft::KeyspaceOp;
    // Keyspace names by id: those the feed creates (and drops: a drop's
    // range delete follows its registry row's), then the live ones.
    let mut names: std::collections::HashMap<u32, String> = Default::default();
    let mut dropping: Option<String> = None;
    for group in db
        .changes_from(from, weft::FeedLimit::Durable)?
        .take(limit as usize)
    {
        let group = group?;
        writeln!(out, "batch {}-{}", group.first_seq(), group.last_seq())?;
        for (seq, op) in (group.first_seq()..).zip(group.ops()) {
            let op = op.keyspace_op();
            let dropped = dropping.take();
            let name = |names: &std::collections::HashMap<u32, String>, id: u32| {
                (names.get(&id).cloned())
                    .or_else(|| db.keyspace_name(id))
                    .unwrap_or_else(|| format!("#{id}"))
            };
            match op {
                KeyspaceOp::Put {
                    keyspace,
                    key,
                    value,
                } => writeln!(
                    out,
                    "{seq}\tput\t{}\t{}\t{}",
                    name(&names, keyspace),
                    key.escape_ascii(),
                    value.escape_ascii()
                )?,
                KeyspaceOp::Delete { keyspace, key } => writeln!(
                    out,
                    "{seq}\tdelete\t{}\t{}",
                    name(&names, keyspace),
                    key.escape_ascii()
                )?,
                KeyspaceOp::DeleteRange {
                    keyspace,
                    start,
                    end,
                } => {
                    if let Some(n) = dropped {
                        names.insert(keyspace, n);
                    }
                    writeln!(
                        out,
                        "{seq}\tdelete_range\t{}\t{}\t{}",
                        name(&names, keyspace),
                        start.escape_ascii(),
                        end.unwrap_or_default().escape_ascii()
                    )?
                }
                KeyspaceOp::Created { name, id, options } => {
                    names.insert(id, name.to_string());
                    writeln!(out, "{seq}\tcreate_keyspace\t{name}\t{id}\t{options}")?
                }
                KeyspaceOp::Dropped { name } => {
                    dropping = Some(name.to_string());
                    writeln!(out, "{seq}\tdrop_keyspace\t{name}")?
                }
                _ => writeln!(out, "{seq}\tregistry")?,
            }
        }
    }
    Ok(())
}

/// `weft backup ...`. A corrupt backup file found by `restore` exits 2,
/// as `check`'s corruption does.
fn backup(action: BackupAction, db_dir: &Path) -> CliResult {
    let mut out = io::stdout().lock();
    match action {
        BackupAction::Create { backup_dir } => {
            let backups = weft::BackupEngine::open(&backup_dir)?;
            let db = open(db_dir, false)?;
            let id = backups.create_backup(&db)?;
            db.close()?;
            let info = backups
                .list()?
                .into_iter()
                .find(|b| b.id == id)
                .ok_or_else(|| io::Error::other(format!("backup {id} is not listed")))?;
            writeln!(out, "id:       {id}")?;
            writeln!(out, "sequence: {}", info.sequence)?;
            writeln!(out, "files:    {} files, {} bytes", info.files, info.bytes)?;
            writeln!(
                out,
                "new:      {} files, {} bytes",
                info.new_files, info.new_bytes
            )?;
        }
        BackupAction::List { backup_dir } => {
            let backups = weft::BackupEngine::open(&backup_dir)?;
            writeln!(out, "id\tcreated\tsequence\tfiles\tbytes\tnew_bytes")?;
            for b in backups.list()? {
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    b.id, b.created_unix_secs, b.sequence, b.files, b.bytes, b.new_bytes
                )?;
            }
        }
        BackupAction::Restore {
            backup_dir,
            id,
            dest,
        } => {
            let backups = weft::BackupEngine::open(&backup_dir)?;
            match backups.restore(id, &dest) {
                Ok(()) => writeln!(out, "restored backup {id} into {}", dest.display())?,
                Err(e) => return failed(e),
            }
        }
        BackupAction::Delete { backup_dir, id } => {
            weft::BackupEngine::open(&backup_dir)?.delete(id)?;
        }
        BackupAction::Purge { backup_dir, keep } => {
            for id in weft::BackupEngine::open(&backup_dir)?.purge_old_backups(keep)? {
                writeln!(out, "deleted backup {id}")?;
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `weft check`: corruption (at open or during verification) exits 2 with
/// the file and offset; any other failure is an ordinary error.
fn check(dir: &Path) -> CliResult {
    let result = open_read_only(dir).and_then(|db| {
        let report = db.verify_checksums()?;
        db.close()?;
        Ok(report)
    });
    match result {
        Ok(r) => {
            let mut out = io::stdout().lock();
            writeln!(out, "files:  {}", r.files)?;
            writeln!(out, "blocks: {}", r.blocks)?;
            writeln!(out, "bytes:  {}", r.bytes)?;
            writeln!(out, "status: ok")?;
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => failed(e),
    }
}

/// How a command that met `e` ends: corruption exits 2 with the file and
/// offset (`weft check`, `weft backup restore`); any other failure is an
/// ordinary error.
fn failed(e: weft::Error) -> CliResult {
    match e {
        weft::Error::Corruption {
            file,
            offset,
            reason,
        } => {
            eprintln!(
                "corruption: {} at offset {offset}: {reason}",
                file.display()
            );
            Ok(ExitCode::from(2))
        }
        e => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_args(start: Option<&str>, end: Option<&str>, prefix: Option<&str>) -> ScanArgs {
        ScanArgs {
            start: start.map(Into::into),
            end: end.map(Into::into),
            prefix: prefix.map(Into::into),
            limit: None,
            reverse: false,
        }
    }

    #[test]
    fn bounds_without_prefix() {
        assert_eq!(scan_bounds(&scan_args(None, None, None)), (None, None));
        assert_eq!(
            scan_bounds(&scan_args(Some("b"), Some("d"), None)),
            (Some(b"b".to_vec()), Some(b"d".to_vec()))
        );
    }

    #[test]
    fn prefix_intersects_start_and_end() {
        assert_eq!(
            scan_bounds(&scan_args(None, None, Some("ab"))),
            (Some(b"ab".to_vec()), Some(b"ac".to_vec()))
        );
        assert_eq!(
            scan_bounds(&scan_args(Some("abc"), Some("zz"), Some("ab"))),
            (Some(b"abc".to_vec()), Some(b"ac".to_vec()))
        );
        assert_eq!(
            scan_bounds(&scan_args(Some("a"), Some("abm"), Some("ab"))),
            (Some(b"ab".to_vec()), Some(b"abm".to_vec()))
        );
    }
}
