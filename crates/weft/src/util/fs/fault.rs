//! [`FaultFs`]: a file system for tests that fails chosen operations and
//! cuts the power (RocksDB's `FaultInjectionTestFS`, LevelDB's
//! `fault_injection_test`).
//!
//! It runs over real files in real directories, so everything above it —
//! mappings, `pread`, the lock file — works unchanged, and records what a
//! machine crash could take away:
//!
//! - per file written through it, how far it was written and how far a
//!   sync made it durable (a mapped file's stores are reported by its
//!   appender, see the parent module);
//! - every name created, renamed or removed since its directory was last
//!   fsynced (a removed or displaced file is kept aside so it can come
//!   back).
//!
//! A power cut happens at a chosen operation ([`FaultFs::cut_power_at`]) or
//! at once ([`FaultFs::cut_power_now`]): that operation and every later
//! one fails with `EIO`, as on a machine that stopped. Once the database
//! has been dropped, [`FaultFs::apply_power_loss`] turns the directory
//! into what the disk could hold after the cut:
//!
//! - the namespace operations not made durable by a directory fsync are
//!   undone, newest first, down to a random point (ext4's journal commits
//!   them in order, so a prefix of them may have reached the disk);
//! - each file keeps its synced bytes, plus a random prefix of the
//!   unsynced ones ending at a 512-byte sector boundary — a write in
//!   flight may be torn at any sector — and loses the rest: cut off, or
//!   read as zeros where blocks were reserved past it.
//!
//! Its syncs call no `fsync`: what they make durable is what it records,
//! and the machine under it does not crash, so a real sync would only make
//! the crash test slow.
//!
//! Injected errors ([`FaultFs::inject`]) fail the Nth operation of a kind
//! with `EIO` or `ENOSPC`, once or from then on; a short write stores the
//! first half of its bytes, then fails with `ENOSPC`.

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::real::{RealFile, RealFs};
use super::{parent_dir, FileSystem, WritableFile};

/// A kind of mutating operation, for choosing which one fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Creating a file or directory, or a hard link.
    Create,
    /// Appending to a file.
    Write,
    /// fsync or fdatasync of a file.
    Sync,
    /// Reserving blocks (`fallocate`).
    Allocate,
    /// Cutting a file (`ftruncate`).
    SetLen,
    /// Renaming.
    Rename,
    /// Removing a file or an empty directory.
    Remove,
    /// fsync of a directory.
    SyncDir,
}

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Fails with `EIO`, doing nothing.
    Eio,
    /// Fails with `ENOSPC`, doing nothing.
    NoSpace,
    /// On a write: stores the first half of the bytes, then fails with
    /// `ENOSPC`. On any other operation: as [`FaultKind::NoSpace`].
    ShortWrite,
}

/// Where a power cut happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerCut {
    /// The operation that found the power gone (1-based, counted from the
    /// last power loss applied).
    pub op: u64,
    /// Its kind.
    pub kind: OpKind,
    /// The file or directory it was on.
    pub path: PathBuf,
    /// What the thread was doing ([`activity`]): `"foreground"`, or the
    /// background job's name.
    pub activity: &'static str,
}

/// What [`FaultFs::apply_power_loss`] took away.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PowerLoss {
    /// Where the power was cut, if it was.
    pub cut: Option<PowerCut>,
    /// Namespace operations undone (not made durable by a directory fsync).
    pub names_undone: usize,
    /// Files that lost unsynced bytes.
    pub files_cut: usize,
    /// Of those, files that kept part of their unsynced bytes (a torn
    /// tail).
    pub files_torn: usize,
    /// Unsynced bytes lost over all files.
    pub bytes_lost: u64,
}

thread_local! {
    static ACTIVITY: Cell<&'static str> = const { Cell::new("foreground") };
}

/// Runs `f` labelled `name` (a background job's name), so a power cut
/// during it says where it struck ([`PowerCut::activity`]).
pub(crate) fn activity<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
    let before = ACTIVITY.with(|a| a.replace(name));
    let r = f();
    ACTIVITY.with(|a| a.set(before));
    r
}

/// A file system that injects faults and simulates power cuts; see the
/// module docs.
#[derive(Debug)]
pub struct FaultFs {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    real: RealFs,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    ops: u64,
    cut_at: Option<u64>,
    /// Cut at the Nth operation made during this activity from now on.
    cut_in: Option<(&'static str, u64)>,
    cut: Option<PowerCut>,
    injection: Option<Injection>,
    /// Operations of the injection's kind seen so far.
    matching: u64,
    files: HashMap<PathBuf, Arc<Mutex<Extent>>>,
    /// Namespace operations not yet made durable, oldest first.
    pending: Vec<NameOp>,
    rng: u64,
    /// Print every operation and power loss (`WEFT_FAULT_FS_TRACE`), for
    /// reading what led to a failure.
    trace: bool,
}

#[derive(Debug, Clone, Copy)]
struct Injection {
    on: OpKind,
    nth: u64,
    kind: FaultKind,
    sticky: bool,
}

/// How far a file was written, and how far a sync made it durable.
#[derive(Debug, Default)]
struct Extent {
    written: u64,
    durable: u64,
}

#[derive(Debug)]
enum NameOp {
    Create {
        path: PathBuf,
    },
    Rename {
        from: PathBuf,
        to: PathBuf,
        displaced: Option<PathBuf>,
    },
    Remove {
        path: PathBuf,
        aside: PathBuf,
    },
}

impl NameOp {
    fn dir(&self) -> &Path {
        match self {
            NameOp::Create { path } | NameOp::Remove { path, .. } => parent_dir(path),
            NameOp::Rename { to, .. } => parent_dir(to),
        }
    }
}

/// The name prefix of files set aside ([`Shared::set_aside`]).
const ASIDE_PREFIX: &str = ".weft-fault-aside-";

fn power_gone() -> io::Error {
    io::Error::other("simulated power cut: the machine is off")
}

impl FaultFs {
    /// A fault-free file system over the real one; `seed` drives the
    /// random choices of [`FaultFs::apply_power_loss`].
    pub fn new(seed: u64) -> Arc<FaultFs> {
        Arc::new(FaultFs {
            shared: Arc::new(Shared {
                real: RealFs,
                state: Mutex::new(State {
                    rng: seed ^ 0x9e37_79b9_7f4a_7c15,
                    trace: std::env::var_os("WEFT_FAULT_FS_TRACE").is_some(),
                    ..State::default()
                }),
            }),
        })
    }

    /// Mutating operations seen since the last power loss was applied.
    pub fn ops(&self) -> u64 {
        self.shared.state.lock().ops
    }

    /// Cuts the power at the `n`-th mutating operation from now on
    /// (counted as [`FaultFs::ops`] counts): it and all later ones fail.
    pub fn cut_power_at(&self, n: u64) {
        self.shared.state.lock().cut_at = Some(n);
    }

    /// Cuts the power at the `n`-th mutating operation (from now on) made
    /// during `activity` ([`PowerCut::activity`]: a background job's name,
    /// `"open"` for recovery, `"foreground"`), wherever the other threads
    /// are. Replaces [`FaultFs::cut_power_at`]'s aim.
    pub fn cut_power_in(&self, activity: &'static str, n: u64) {
        let mut st = self.shared.state.lock();
        st.cut_at = None;
        st.cut_in = Some((activity, n.max(1)));
    }

    /// Cuts the power now: every later mutating operation fails.
    pub fn cut_power_now(&self) {
        let mut st = self.shared.state.lock();
        if st.cut.is_none() {
            let op = st.ops;
            st.cut = Some(PowerCut {
                op,
                kind: OpKind::Write,
                path: PathBuf::new(),
                activity: "between operations",
            });
        }
    }

    /// Where the power was cut, once it was.
    pub fn power_cut(&self) -> Option<PowerCut> {
        self.shared.state.lock().cut.clone()
    }

    /// Fails the `nth` (1-based) operation of kind `on` from now on with
    /// `kind`; with `sticky`, every later one of that kind too (a disk that
    /// stays full) until [`FaultFs::clear_faults`].
    pub fn inject(&self, on: OpKind, nth: u64, kind: FaultKind, sticky: bool) {
        let mut st = self.shared.state.lock();
        st.injection = Some(Injection {
            on,
            nth,
            kind,
            sticky,
        });
        st.matching = 0;
    }

    /// Removes the injected fault.
    pub fn clear_faults(&self) {
        self.shared.state.lock().injection = None;
    }

    /// Turns the files into what a disk could hold after the power cut (see
    /// the module docs), and powers the machine back on: call it once
    /// every handle on the database is dropped. Without a cut, it is a cut
    /// now.
    pub fn apply_power_loss(&self) -> io::Result<PowerLoss> {
        let mut st = self.shared.state.lock();
        let mut loss = PowerLoss {
            cut: st.cut.take(),
            ..PowerLoss::default()
        };
        // Names: a random prefix of the pending operations reached the disk.
        let pending = std::mem::take(&mut st.pending);
        let keep = (st.next_random() % (pending.len() as u64 + 1)) as usize;
        let mut pending = pending.into_iter();
        for op in pending.by_ref().take(keep) {
            self.shared.commit(op);
        }
        let undone: Vec<NameOp> = pending.collect();
        if st.trace {
            eprintln!("fault-fs: power loss at {:?}; undoing {undone:?}", loss.cut);
        }
        loss.names_undone = undone.len();
        for op in undone.into_iter().rev() {
            self.shared.undo(&mut st, op)?;
        }
        // Contents: synced bytes stay, a sector-aligned prefix of the rest
        // may.
        let files = std::mem::take(&mut st.files);
        for (path, extent) in files {
            let Extent { written, durable } = *extent.lock();
            if written <= durable || !path.exists() {
                continue;
            }
            let keep_to = match st.next_random() % 2 {
                0 => durable,
                _ => {
                    let first = durable.div_ceil(512) * 512;
                    let sectors = written.saturating_sub(first) / 512;
                    (first + 512 * (st.next_random() % (sectors + 1))).min(written)
                }
            };
            let len = std::fs::metadata(&path)?.len();
            let file = std::fs::OpenOptions::new().write(true).open(&path)?;
            if len > written {
                // Blocks reserved past the data read as zeros after the cut.
                zero_range(&file, keep_to, written)?;
            } else {
                file.set_len(keep_to)?;
            }
            if st.trace {
                eprintln!(
                    "fault-fs: {} keeps {keep_to} of {written} bytes ({durable} synced)",
                    path.display()
                );
            }
            loss.files_cut += 1;
            loss.files_torn += usize::from(keep_to > durable);
            loss.bytes_lost += written - keep_to;
        }
        st.ops = 0;
        st.cut_at = None;
        st.cut_in = None;
        st.injection = None;
        Ok(loss)
    }

    fn handle(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }
}

/// Writes zeros over `[from, to)` of `file` (clamped to its length).
fn zero_range(file: &File, from: u64, to: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let to = to.min(len);
    let mut at = from;
    let zeros = [0u8; 4096];
    while at < to {
        let n = ((to - at) as usize).min(zeros.len());
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

impl State {
    /// splitmix64: the power loss's choices, reproducible from the seed.
    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// What [`Shared::begin`] lets an operation do.
enum Go {
    Run,
    /// Store the first half of the bytes, then fail with `ENOSPC`.
    Short,
}

impl Shared {
    /// Counts a mutating operation and decides its fate: the power is off,
    /// an injected fault, or run it.
    fn begin(&self, kind: OpKind, path: &Path) -> io::Result<Go> {
        let mut st = self.state.lock();
        if st.cut.is_some() {
            return Err(power_gone());
        }
        st.ops += 1;
        let activity = ACTIVITY.with(Cell::get);
        if st.trace {
            eprintln!(
                "fault-fs: op {} {kind:?} {} ({activity})",
                st.ops,
                path.display()
            );
        }
        let mut cut = st.cut_at.is_some_and(|n| st.ops >= n);
        if let Some((target, left)) = &mut st.cut_in {
            if *target == activity {
                *left -= 1;
                cut |= *left == 0;
            }
        }
        if cut {
            st.cut = Some(PowerCut {
                op: st.ops,
                kind,
                path: path.to_path_buf(),
                activity,
            });
            return Err(power_gone());
        }
        let Some(inj) = st.injection else {
            return Ok(Go::Run);
        };
        if inj.on != kind {
            return Ok(Go::Run);
        }
        st.matching += 1;
        let hit = st.matching == inj.nth || (inj.sticky && st.matching > inj.nth);
        match (hit, inj.kind) {
            (false, _) => Ok(Go::Run),
            (true, FaultKind::Eio) => Err(io::Error::from_raw_os_error(libc::EIO)),
            (true, FaultKind::ShortWrite) if kind == OpKind::Write => Ok(Go::Short),
            (true, _) => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
        }
    }

    /// Moves `path`, whose removal (or replacement) is not durable yet, to
    /// a hidden name in its directory (a rename within one file system
    /// always works; [`FaultFs::read_dir`] does not list it).
    fn set_aside(&self, st: &mut State, path: &Path) -> io::Result<PathBuf> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let aside = parent_dir(path).join(format!("{ASIDE_PREFIX}{}-{n}", std::process::id()));
        std::fs::rename(path, &aside)?;
        if let Some(extent) = st.files.remove(path) {
            st.files.insert(aside.clone(), extent);
        }
        Ok(aside)
    }

    /// A namespace operation reached the disk: a file set aside is gone.
    fn commit(&self, op: NameOp) {
        match op {
            NameOp::Create { .. }
            | NameOp::Rename {
                displaced: None, ..
            } => {}
            NameOp::Rename {
                displaced: Some(aside),
                ..
            }
            | NameOp::Remove { aside, .. } => {
                let _ = std::fs::remove_file(aside);
            }
        }
    }

    /// A namespace operation did not reach the disk: put it back.
    fn undo(&self, st: &mut State, op: NameOp) -> io::Result<()> {
        let mut move_back = |from: &Path, to: &Path| -> io::Result<()> {
            std::fs::rename(from, to)?;
            if let Some(extent) = st.files.remove(from) {
                st.files.insert(to.to_path_buf(), extent);
            }
            Ok(())
        };
        match op {
            NameOp::Create { path } => {
                match std::fs::remove_file(&path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
                st.files.remove(&path);
            }
            NameOp::Rename {
                from,
                to,
                displaced,
            } => {
                move_back(&to, &from)?;
                if let Some(aside) = displaced {
                    move_back(&aside, &to)?;
                }
            }
            NameOp::Remove { path, aside } => move_back(&aside, &path)?,
        }
        Ok(())
    }
}

impl FileSystem for FaultFs {
    fn create(&self, path: &Path, readable: bool) -> io::Result<Arc<dyn WritableFile>> {
        self.shared.begin(OpKind::Create, path)?;
        let mut st = self.shared.state.lock();
        if path.exists() {
            let aside = self.shared.set_aside(&mut st, path)?;
            st.pending.push(NameOp::Remove {
                path: path.to_path_buf(),
                aside,
            });
        }
        let file = self.shared.real.create_file(path, readable)?;
        let extent = Arc::new(Mutex::new(Extent::default()));
        st.files.insert(path.to_path_buf(), Arc::clone(&extent));
        st.pending.push(NameOp::Create {
            path: path.to_path_buf(),
        });
        Ok(Arc::new(FaultFile {
            shared: self.handle(),
            path: path.to_path_buf(),
            real: file,
            extent,
        }))
    }

    fn open(&self, path: &Path) -> io::Result<File> {
        self.shared.real.open(path)
    }

    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut paths = self.shared.real.read_dir(dir)?;
        paths.retain(|p| !super::file_name(p).starts_with(ASIDE_PREFIX));
        Ok(paths)
    }

    fn open_lock_file(&self, path: &Path) -> io::Result<File> {
        self.shared.real.open_lock_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.shared.begin(OpKind::Rename, from)?;
        let mut st = self.shared.state.lock();
        if !from.exists() {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        let displaced = match to.exists() {
            true => Some(self.shared.set_aside(&mut st, to)?),
            false => None,
        };
        std::fs::rename(from, to)?;
        if let Some(extent) = st.files.remove(from) {
            st.files.insert(to.to_path_buf(), extent);
        }
        st.pending.push(NameOp::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            displaced,
        });
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.shared.begin(OpKind::Remove, path)?;
        let mut st = self.shared.state.lock();
        if !path.is_file() {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        let aside = self.shared.set_aside(&mut st, path)?;
        st.pending.push(NameOp::Remove {
            path: path.to_path_buf(),
            aside,
        });
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.shared.begin(OpKind::Create, path)?;
        self.shared.real.create_dir_all(path)
    }

    /// A new name, as a create is: undone by a power loss unless its
    /// directory was fsynced. The bytes are the source's, durable as far
    /// as they were (the links the engine makes are of synced, immutable
    /// files).
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.shared.begin(OpKind::Create, to)?;
        let mut st = self.shared.state.lock();
        self.shared.real.hard_link(from, to)?;
        st.pending.push(NameOp::Create {
            path: to.to_path_buf(),
        });
        Ok(())
    }

    /// Counted as a removal; like `create_dir_all`, not undone by a power
    /// loss (directories are not tracked: only the files in them are).
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.shared.begin(OpKind::Remove, path)?;
        self.shared.real.remove_dir(path)
    }

    /// As a sync through a handle: everything written to the file so far
    /// is durable.
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.shared.begin(OpKind::Sync, path)?;
        if !path.is_file() {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        let st = self.shared.state.lock();
        if let Some(extent) = st.files.get(path) {
            let mut ext = extent.lock();
            ext.durable = ext.written;
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.shared.begin(OpKind::SyncDir, dir)?;
        if !dir.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        let mut st = self.shared.state.lock();
        let (durable, pending): (Vec<NameOp>, Vec<NameOp>) = std::mem::take(&mut st.pending)
            .into_iter()
            .partition(|op| op.dir() == dir);
        st.pending = pending;
        drop(st);
        for op in durable {
            self.shared.commit(op);
        }
        Ok(())
    }
}

/// A file of [`FaultFs`] open for writing.
#[derive(Debug)]
struct FaultFile {
    shared: Arc<Shared>,
    path: PathBuf,
    real: RealFile,
    extent: Arc<Mutex<Extent>>,
}

impl WritableFile for FaultFile {
    fn append(&self, parts: &[&[u8]]) -> io::Result<()> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        match self.shared.begin(OpKind::Write, &self.path)? {
            Go::Run => {
                let r = self.real.append(parts);
                // On a failure part of it may be in the file: count what is.
                let end = match &r {
                    Ok(()) => None,
                    Err(_) => Some(self.real.file.metadata()?.len()),
                };
                let mut ext = self.extent.lock();
                ext.written = end.unwrap_or(ext.written + total as u64);
                r
            }
            Go::Short => {
                let mut half = total / 2;
                for part in parts {
                    let n = part.len().min(half);
                    self.real.append(&[&part[..n]])?;
                    self.extent.lock().written += n as u64;
                    half -= n;
                }
                Err(io::Error::from_raw_os_error(libc::ENOSPC))
            }
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        self.shared.begin(OpKind::Sync, &self.path)?;
        let mut ext = self.extent.lock();
        ext.durable = ext.written;
        Ok(())
    }

    fn sync_all(&self) -> io::Result<()> {
        self.shared.begin(OpKind::Sync, &self.path)?;
        let mut ext = self.extent.lock();
        ext.durable = ext.written;
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.shared.begin(OpKind::Allocate, &self.path)?;
        self.real.allocate(offset, len)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.shared.begin(OpKind::SetLen, &self.path)?;
        self.real.set_len(len)?;
        let mut ext = self.extent.lock();
        ext.written = ext.written.min(len);
        ext.durable = ext.durable.min(len);
        Ok(())
    }

    fn note_mapped_stores(&self, end: u64) {
        // Stores after the power went out cannot become durable: no sync
        // runs any more, and the power loss drops them with the rest.
        let mut ext = self.extent.lock();
        ext.written = ext.written.max(end);
    }

    fn file(&self) -> &File {
        &self.real.file
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(p: &Path) -> Option<Vec<u8>> {
        std::fs::read(p).ok()
    }

    /// What a power loss may leave of a file with `synced` bytes synced and
    /// `all` written: its synced bytes, then a sector-aligned part of the
    /// rest (or all of it).
    fn is_allowed_remnant(got: &[u8], synced: usize, all: &[u8]) -> bool {
        got.len() >= synced
            && got.len() <= all.len()
            && all.starts_with(got)
            && (got.len() == synced || got.len().is_multiple_of(512) || got.len() == all.len())
    }

    #[test]
    fn a_power_loss_keeps_synced_bytes_and_may_tear_the_rest_at_a_sector() {
        let mut kept_all_unsynced = false;
        let mut tore = false;
        for seed in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let fs = FaultFs::new(seed);
            let p = dir.path().join("f");
            let f = fs.create(&p, false).unwrap();
            fs.sync_dir(dir.path()).unwrap();
            let all: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8 + 1).collect();
            f.append(&[&all[..700]]).unwrap();
            f.sync_data().unwrap();
            f.append(&[&all[700..]]).unwrap();
            drop(f);
            let loss = fs.apply_power_loss().unwrap();
            let got = contents(&p).expect("a synced name survives");
            assert!(
                is_allowed_remnant(&got, 700, &all),
                "seed {seed}: {} bytes",
                got.len()
            );
            tore |= got.len() > 700;
            kept_all_unsynced |= got.len() == 700;
            assert_eq!(loss.files_cut, 1);
        }
        assert!(
            tore && kept_all_unsynced,
            "both outcomes occur across seeds"
        );
    }

    #[test]
    fn names_not_made_durable_by_a_directory_fsync_can_be_undone() {
        let (mut created_lost, mut removed_back, mut renamed_back) = (false, false, false);
        for seed in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let fs = FaultFs::new(seed);
            // Durable: `old` with content, `victim`.
            for name in ["old", "victim"] {
                let f = fs.create(&d.join(name), false).unwrap();
                f.append(&[name.as_bytes()]).unwrap();
                f.sync_all().unwrap();
            }
            fs.sync_dir(d).unwrap();
            // Not durable: a new file, a removal, a rename over `old`.
            let f = fs.create(&d.join("new"), false).unwrap();
            f.append(&[b"new"]).unwrap();
            f.sync_all().unwrap();
            fs.remove_file(&d.join("victim")).unwrap();
            fs.rename(&d.join("new"), &d.join("old")).unwrap();
            let listed: Vec<_> = fs.read_dir(d).unwrap();
            assert_eq!(
                listed,
                vec![d.join("old")],
                "set-aside files are not listed"
            );
            let loss = fs.apply_power_loss().unwrap();
            let old = contents(&d.join("old"));
            let new = contents(&d.join("new"));
            let victim = contents(&d.join("victim"));
            // Undone newest first: the rename, then the removal, then the
            // creation.
            match loss.names_undone {
                0 => assert_eq!(
                    (&old, &new, &victim),
                    (&Some(b"new".to_vec()), &None, &None)
                ),
                1 => assert_eq!(
                    (&old, &new, &victim),
                    (&Some(b"old".to_vec()), &Some(b"new".to_vec()), &None)
                ),
                2 => assert_eq!(
                    (&old, &new, &victim),
                    (
                        &Some(b"old".to_vec()),
                        &Some(b"new".to_vec()),
                        &Some(b"victim".to_vec())
                    )
                ),
                3 => assert_eq!(
                    (&old, &new, &victim),
                    (&Some(b"old".to_vec()), &None, &Some(b"victim".to_vec()))
                ),
                n => panic!("only three operations were pending, {n} undone"),
            }
            renamed_back |= loss.names_undone >= 1;
            removed_back |= loss.names_undone >= 2;
            created_lost |= loss.names_undone == 3;
            let stray: Vec<_> = std::fs::read_dir(d).unwrap().flatten().collect();
            assert!(stray.len() <= 3, "nothing set aside is left behind");
        }
        assert!(created_lost && removed_back && renamed_back);
    }

    #[test]
    fn a_hard_link_is_a_new_name_that_a_power_loss_may_undo() {
        let (mut kept, mut undone) = (false, false);
        for seed in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let fs = FaultFs::new(seed);
            let f = fs.create(&d.join("a"), false).unwrap();
            f.append(&[b"bytes"]).unwrap();
            f.sync_all().unwrap();
            fs.sync_dir(d).unwrap();
            fs.hard_link(&d.join("a"), &d.join("b")).unwrap();
            let loss = fs.apply_power_loss().unwrap();
            assert_eq!(contents(&d.join("a")).unwrap(), b"bytes");
            match loss.names_undone {
                0 => assert_eq!(contents(&d.join("b")).unwrap(), b"bytes"),
                1 => assert_eq!(contents(&d.join("b")), None),
                n => panic!("one operation was pending, {n} undone"),
            }
            kept |= loss.names_undone == 0;
            undone |= loss.names_undone == 1;
        }
        assert!(kept && undone);
        // A directory fsync makes it durable.
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let fs = FaultFs::new(7);
        fs.create(&d.join("a"), false).unwrap().sync_all().unwrap();
        fs.hard_link(&d.join("a"), &d.join("b")).unwrap();
        fs.sync_dir(d).unwrap();
        assert_eq!(fs.apply_power_loss().unwrap().names_undone, 0);
        assert!(d.join("b").exists());
    }

    #[test]
    fn mapped_stores_count_as_written_and_a_sync_covers_them() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(1);
        let p = dir.path().join("m");
        let f = fs.create(&p, true).unwrap();
        fs.sync_dir(dir.path()).unwrap();
        if f.allocate(0, 8192).is_err() {
            return; // no fallocate here: the WAL writes with `write`
        }
        std::os::unix::fs::FileExt::write_all_at(f.file(), &[7u8; 1000], 0).unwrap();
        f.note_mapped_stores(1000);
        f.sync_data().unwrap();
        std::os::unix::fs::FileExt::write_all_at(f.file(), &[9u8; 3000], 1000).unwrap();
        f.note_mapped_stores(4000);
        drop(f);
        fs.apply_power_loss().unwrap();
        let got = contents(&p).unwrap();
        assert_eq!(got.len(), 8192, "reserved blocks stay, reading as zeros");
        assert!(got[..1000].iter().all(|&b| b == 7), "synced stores stay");
        let kept = got[1000..].iter().take_while(|&&b| b == 9).count();
        assert!(got[1000 + kept..].iter().all(|&b| b == 0));
        assert!(kept == 0 || kept == 3000 || (1000 + kept).is_multiple_of(512));
    }

    #[test]
    fn injected_faults_and_the_cut_fail_the_operations_they_name() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let fs = FaultFs::new(3);
        fs.inject(OpKind::Write, 2, FaultKind::ShortWrite, false);
        let f = fs.create(&d.join("a"), false).unwrap();
        f.append(&[b"0123"]).unwrap();
        let e = f.append(&[b"4567", b"89"]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(
            contents(&d.join("a")).unwrap(),
            b"0123456",
            "half the write landed"
        );
        f.append(&[b"x"]).unwrap();

        fs.inject(OpKind::Sync, 1, FaultKind::Eio, true);
        assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(
            f.sync_all().unwrap_err().raw_os_error(),
            Some(libc::EIO),
            "sticky"
        );
        fs.clear_faults();
        f.sync_data().unwrap();

        fs.inject(OpKind::Rename, 1, FaultKind::NoSpace, false);
        let e = fs.rename(&d.join("a"), &d.join("b")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert!(d.join("a").exists(), "a failed rename does nothing");

        let at = fs.ops() + 2;
        fs.cut_power_at(at);
        fs.remove_file(&d.join("a")).unwrap();
        assert!(fs.create(&d.join("c"), false).is_err(), "the power is out");
        assert!(f.append(&[b"y"]).is_err() && f.sync_data().is_err());
        let cut = fs.power_cut().expect("the cut happened");
        assert_eq!(
            (cut.op, cut.kind, cut.path),
            (at, OpKind::Create, d.join("c"))
        );
        let loss = fs.apply_power_loss().unwrap();
        assert_eq!(loss.cut.map(|c| c.op), Some(at));
        assert_eq!(fs.ops(), 0, "the machine is back on");
        fs.create(&d.join("c"), false).unwrap();
    }
}
