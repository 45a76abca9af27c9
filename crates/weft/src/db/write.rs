//! The write path: group commit, sequence assignment, WAL append, memtable
//! inserts, and in-order publication of the visible sequence.
//!
//! Writers queue up (LevelDB's design). The writer at the front is the
//! *leader*: it takes the queue's head as a group, makes room in the memtable
//! (rotating it, or waiting for flush), gives the group consecutive sequences,
//! appends the whole group to the WAL as **one record** (so the group is
//! atomic on recovery) and fsyncs once if any member asked for `sync`. Then
//! the memtable inserts run — concurrently on the members' own threads when
//! the group is large enough to pay for the wake-ups. Only when every insert
//! of the group is done does the leader publish the group's last sequence as
//! visible, acknowledge the members, and hand leadership to the next writer.
//! Sequences therefore become visible strictly in order: a reader never sees
//! a write without every write acknowledged before it (TeksDB's "last
//! committed sequence").

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::core::{share_error, ActiveWal, Core, Counters, EngineState, ImmutableMemtable};
use super::write_queue::{spin_until, InsertJob, Writer, WriterState};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::memtable::{new_memtable, Memtable};
use crate::wal::LogWriter;

/// Largest group the leader assembles (bytes of batches).
const MAX_GROUP_BYTES: usize = 1 << 20;
/// Average operations per member above which members insert in parallel.
/// Chosen by measurement (2 threads, 16 B keys, 256 B values, single-put
/// batches): letting every multi-member group insert in parallel put fewer
/// keys per second than the leader inserting small batches itself — the
/// hand-off costs more than one skiplist insert. Large batches amortise it.
/// The figures are in `bench/journal/2026-11-21-01-skiplist-baseline.md`.
const PARALLEL_INSERT_MIN_OPS: usize = 32;
/// Operations of a group up to which the leader asks the memtable to start
/// loading the keys' first lines ([`Memtable::prefetch`]) before the WAL
/// append. A lone writer's `fillrandom` (`teks`) spent a large share of
/// the writer thread in the hash probe, mostly waiting for the two
/// candidate buckets; the WAL copy and its checksum take longer than those
/// misses. Past this many keys the early lines would be evicted before use.
/// The profile's figures are in
/// `bench/journal/2026-11-27-03-figures-from-code-comments.md`.
const PREFETCH_MAX_OPS: usize = 32;

/// The writers a leader commits together: the queue's head, in order.
///
/// A lone writer (the common case of one thread, and of every write an idle
/// queue takes) needs no vector: in a profile of a lone writer's
/// `fillrandom` the allocator took a large share of the writer thread's
/// time, and a group vector plus two per-group vectors were three of its
/// allocations per put.
enum Group {
    One(Arc<Writer>),
    Many(Vec<Arc<Writer>>),
}

impl Group {
    fn members(&self) -> &[Arc<Writer>] {
        match self {
            Group::One(w) => std::slice::from_ref(w),
            Group::Many(v) => v,
        }
    }
}

/// Inserts `batch` into `mem` at the sequences the leader gave it.
fn insert_batch(mem: &dyn Memtable, batch: &WriteBatch) {
    let first_seq = batch.sequence();
    for (i, op) in batch.iter().enumerate() {
        // The batch was validated before it was queued, so decoding succeeds.
        if let Ok(op) = op {
            mem.insert(op.key, first_seq + i as u64, op.kind, op.value);
        }
    }
}

impl Core {
    /// Applies `batch` (validated by the caller) through the queue.
    pub(crate) fn write(
        &self,
        batch: WriteBatch,
        sync: bool,
        logged: bool,
        rotate: bool,
    ) -> Result<()> {
        debug_assert!(logged || !sync, "a sync write must be logged");
        self.check_writable()?;
        let w = Arc::new(Writer {
            bytes: batch.approximate_size(),
            batch: Mutex::new(batch),
            sync,
            logged,
            rotate,
            state: Mutex::new(WriterState::Pending),
            signalled: AtomicBool::new(false),
            cv: Condvar::new(),
        });
        let mut q = self.queue.lock();
        q.push_back(Arc::clone(&w));
        loop {
            let st = std::mem::replace(&mut *w.state.lock(), WriterState::Pending);
            match st {
                WriterState::Done(None) => return Ok(()),
                WriterState::Done(Some(e)) => return Err(e),
                WriterState::Insert { mem, job } => {
                    drop(q);
                    insert_batch(mem.as_ref(), &w.batch.lock());
                    job.finish_one();
                    q = self.queue.lock();
                }
                WriterState::Pending => {
                    if q.front().is_some_and(|f| Arc::ptr_eq(f, &w)) {
                        break;
                    }
                    w.signalled.store(false, Ordering::Relaxed);
                    drop(q);
                    spin_until(|| w.signalled.load(Ordering::Acquire));
                    q = self.queue.lock();
                    // Checked under the lock the signaller holds: no lost wake-up.
                    if !w.signalled.load(Ordering::Acquire) {
                        w.cv.wait(&mut q);
                    }
                }
            }
        }

        // Leader: take a group from the head of the queue.
        let mut joining = q.iter().skip(1);
        let group = match joining.next() {
            Some(second) if !w.rotate && !second.rotate => {
                let mut members = vec![Arc::clone(&w)];
                let mut bytes = w.bytes;
                for m in std::iter::once(second).chain(joining) {
                    if m.rotate || bytes + m.bytes > MAX_GROUP_BYTES {
                        break;
                    }
                    bytes += m.bytes;
                    members.push(Arc::clone(m));
                }
                Group::Many(members)
            }
            _ => Group::One(Arc::clone(&w)),
        };
        drop(q);
        let group = group.members();

        let result = self.commit_group(group);
        if result.is_ok() {
            let bytes: usize = group.iter().map(|m| m.bytes).sum();
            Counters::add(&self.counters.user_bytes, bytes as u64);
        }

        let mut q = self.queue.lock();
        for m in group {
            let front = q.pop_front();
            debug_assert!(
                front.is_some_and(|f| Arc::ptr_eq(&f, m)),
                "group is the queue's head"
            );
            if !Arc::ptr_eq(m, &w) {
                *m.state.lock() = WriterState::Done(result.as_ref().err().map(share_error));
                m.signal();
            }
        }
        if let Some(next) = q.front() {
            next.signal();
        }
        result
    }

    fn commit_group(&self, group: &[Arc<Writer>]) -> Result<()> {
        self.check_writable()?;
        let mem = self.make_room(group[0].rotate)?;
        let ops: usize = group.iter().map(|m| m.batch.lock().len()).sum();
        if ops == 0 {
            return Ok(());
        }

        // Sequences: each batch carries its first in its header, which is
        // where the WAL record and the inserts take it from. A small
        // group's keys are announced to the memtable on the way, so that a
        // hash kind's bucket misses load while the WAL record is written.
        let first = self.last_seq.load(Ordering::Relaxed) + 1;
        let mut next = first;
        for m in group {
            let mut b = m.batch.lock();
            b.set_sequence(next);
            next += b.len() as u64;
            if ops <= PREFETCH_MAX_OPS {
                for op in b.iter().flatten() {
                    mem.prefetch(op.key);
                }
            }
        }
        let last = next - 1;
        if last > crate::key::MAX_SEQUENCE {
            let e = Error::Poisoned("sequence numbers exhausted".into());
            self.poison(&e);
            return Err(e);
        }

        // One WAL record for the whole group. Batches written with
        // `disable_wal` are left out; a group that mixes both logs each
        // logged batch as its own record (a record's batches get contiguous
        // sequences on replay, and the unlogged ones leave gaps).
        let sync = group.iter().any(|m| m.sync);
        let logged = group.iter().filter(|m| m.logged).count();
        // With `manual_wal_flush`, the record waits in the writer's buffer
        // for `Db::flush_wal` (a sync writes it anyway).
        let defer = self.options.manual_wal_flush && !sync;
        let wal_result = if logged == 0 {
            Ok(())
        } else {
            let mut wal = self.wal.lock();
            let mut add = |payload: &[u8]| match defer {
                true => wal.writer.add_record_deferred(payload),
                false => wal.writer.add_record(payload),
            };
            let r = if group.len() == 1 {
                add(group[0].batch.lock().encoded())
            } else if logged < group.len() {
                group.iter().filter(|m| m.logged).try_fold(0, |sum, m| {
                    Ok::<_, Error>(sum + add(m.batch.lock().encoded())?)
                })
            } else {
                let mut all = group[0].batch.lock().clone();
                for m in &group[1..] {
                    all.append(&m.batch.lock());
                }
                add(all.encoded())
            };
            r.and_then(|n| {
                Counters::add(&self.counters.wal_bytes, n);
                if sync {
                    // Earlier WALs first: a durable write implies every
                    // earlier one is.
                    self.closed_wals.sync_all()?;
                    wal.writer.sync()?;
                }
                Ok(())
            })
        };
        if let Err(e) = wal_result {
            self.poison(&e);
            return Err(e);
        }
        self.last_seq.store(last, Ordering::Relaxed);

        // Memtable inserts.
        if group.len() > 1 && ops / group.len() >= PARALLEL_INSERT_MIN_OPS {
            let job = Arc::new(InsertJob {
                remaining: AtomicUsize::new(group.len() - 1),
                lock: Mutex::new(()),
                cv: Condvar::new(),
            });
            {
                let _q = self.queue.lock();
                for m in &group[1..] {
                    *m.state.lock() = WriterState::Insert {
                        mem: Arc::clone(&mem),
                        job: Arc::clone(&job),
                    };
                    m.signal();
                }
            }
            insert_batch(mem.as_ref(), &group[0].batch.lock());
            job.wait();
        } else {
            for m in group {
                insert_batch(mem.as_ref(), &m.batch.lock());
            }
        }

        // Publish: every sequence up to `last` is complete.
        debug_assert_eq!(self.visible_seq.load(Ordering::Relaxed), first - 1);
        self.visible_seq.store(last, Ordering::Release);
        if let Some(w) = self.read_tracker.advance(last, || self.snapshots.oldest()) {
            mem.set_read_watermark(w);
        }
        Ok(())
    }

    /// Ensures the active memtable can take a write; rotates it when full (or
    /// when `force`), slows writers when background work falls behind, and
    /// stalls them — never fails them — when it is far behind.
    fn make_room(&self, force: bool) -> Result<Arc<dyn Memtable>> {
        let opts = &self.options;
        let mut slowed = false;
        let mut force = force;
        let mut st = self.state.lock();
        loop {
            self.check_writable()?;
            let unsorted = st.version.unsorted_tables();
            // As RocksDB (which slows writes only with more than three
            // memtables): one flush in progress is the steady state of a
            // write-heavy load, and a 1 ms pause per write group while it
            // runs stopped a lone writer for the whole flush, a large part
            // of a 1 KiB fill's time. Slow down only when a queue of three
            // or more is one short of full, so a stall still has warning.
            let memtables_behind = opts.max_immutable_memtables >= 3
                && st.imms.len() + 1 >= opts.max_immutable_memtables;
            let behind = memtables_behind || unsorted >= opts.unsorted_slowdown_tables;
            if behind && !slowed && !force {
                slowed = true;
                Counters::add(&self.counters.slowdowns, 1);
                let start = Instant::now();
                MutexGuard::unlocked(&mut st, || std::thread::sleep(Duration::from_millis(1)));
                self.count_stall_time(start);
                continue;
            }
            // Too many UnsortedStore tables stalls every write, not only
            // rotations (as RocksDB's level-0 stop trigger): otherwise short
            // sessions, each recovering its WAL into one more table, could
            // outrun merges forever. A flush request never waits here: it
            // adds no table until the stall is over anyway.
            if unsorted >= opts.unsorted_stop_tables && !force {
                self.stall(&mut st);
                continue;
            }
            let full = st.mem.approximate_memory() >= opts.write_buffer_size || st.mem.is_full();
            let forced = force && !st.mem.is_empty();
            if !full && !forced {
                return Ok(Arc::clone(&st.mem));
            }
            if st.imms.len() >= opts.max_immutable_memtables
                || unsorted >= opts.unsorted_stop_tables
            {
                self.stall(&mut st);
                continue;
            }
            self.rotate(&mut st)?;
            force = false;
        }
    }

    /// Waits for background work to change the engine state (a flush or a
    /// merge done), counting the stall and its time.
    fn stall(&self, st: &mut MutexGuard<'_, EngineState>) {
        Counters::add(&self.counters.stalls, 1);
        let start = Instant::now();
        self.state_cv.wait(st);
        self.count_stall_time(start);
    }

    /// Adds the time since `start` to the writers' stall time.
    fn count_stall_time(&self, start: Instant) {
        let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        Counters::add(&self.counters.stall_micros, micros);
    }

    /// Makes the active memtable immutable and starts a new one with a new WAL.
    fn rotate(&self, st: &mut EngineState) -> Result<()> {
        let number = st.new_file_number();
        let path = crate::filename::wal_path(&self.dir, number);
        let writer = match LogWriter::create_mapped(&*self.fs, &path) {
            Ok(w) => w,
            Err(e) => {
                self.poison_holding_state(&e, st);
                return Err(e);
            }
        };
        crate::fault::crash_point("rotate.new_wal_created");
        {
            let mut wal = self.wal.lock();
            // The old WAL's records reach the OS before any write lands in
            // the new one, so a process crash keeps a prefix; its fdatasync
            // is left to the flush thread (see `ClosedWals`).
            if let Err(e) = wal.writer.flush_buffer() {
                self.poison_holding_state(&e, st);
                return Err(e);
            }
            // The new WAL starts by saying where the old one ends, so that
            // recovery can tell when the old one lost its last records
            // (`LogLink`).
            let mut writer = writer;
            let link = crate::wal::LogLink {
                previous: st.mem_wal,
                previous_size: wal.writer.size(),
            };
            if let Err(e) = writer.add_record(&link.encode()) {
                self.poison_holding_state(&e, st);
                return Err(e);
            }
            let old = std::mem::replace(&mut *wal, ActiveWal { writer });
            self.closed_wals.push(st.mem_wal, old.writer);
        }
        let old = std::mem::replace(
            &mut st.mem,
            new_memtable(self.options.memtable, self.options.write_buffer_size),
        );
        let old_wal = std::mem::replace(&mut st.mem_wal, number);
        st.imms.push_back(ImmutableMemtable {
            mem: old,
            wal_number: old_wal,
            made_immutable: Instant::now(),
        });
        st.imm_created += 1;
        self.install_super_version(st);
        self.state_cv.notify_all();
        Ok(())
    }
}
