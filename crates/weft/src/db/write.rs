//! The write path: sequence assignment, WAL append, memtable inserts, and
//! in-order publication of the visible sequence.
//!
//! Every writer does its own work, and holds a lock only for the part that
//! must be serial. Under the WAL lock it checks that no earlier writer
//! found the memtable full and that background work is not behind (else it
//! takes the slow path, `make_room`), takes consecutive sequences and a
//! ticket for its batch, pins the super version (whose memtable is this
//! WAL's) and appends the batch to the WAL as **one record** (so the batch
//! is atomic on recovery). Then, with no lock held, it inserts the batch into the
//! memtable — concurrently with every other writer — and publishes its
//! ticket (`db::publish`): the visible sequence covers only a prefix of
//! writes whose inserts are done, and the writer returns once it covers its
//! own. Sequences therefore become visible strictly in order: a reader
//! never sees a write without every write acknowledged before it (TeksDB's
//! "last committed sequence").
//!
//! This replaced LevelDB's group commit (a queue of writers whose leader
//! appended and inserted for the group): on a 16-core machine its queue
//! lock, hand-offs and the leader's serial inserts made 16 writers slower
//! than one (`bench/scaling`, `bench/RESULTS.md`). RocksDB's answer is
//! concurrent memtable inserts behind a group's WAL write; here the WAL
//! append itself is short (a copy into a mapped window and a checksum), so
//! each writer appends its own record.
//!
//! `sync` writes still share fdatasyncs: a sync writer syncs everything
//! appended so far under `wal_synced`, and those queued behind it find
//! their records already covered (group commit of syncs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::MutexGuard;

use arc_swap::Guard;

use super::conflict::{CommitCheck, CommitChecked};
use super::core::{
    background_behind, ActiveWal, Core, Counters, EngineState, ImmutableMemtable, SuperVersion,
};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::SequenceNumber;
use crate::memtable::{new_memtable, Memtable};
use crate::range_delete::RangeTombstone;
use crate::wal::LogWriter;

/// Operations of a batch up to which the writer asks the memtable to start
/// loading the keys' first lines ([`Memtable::prefetch`]) before its WAL
/// append. A lone writer's `fillrandom` (`teks`) spent a large share of
/// the writer thread in the hash probe, mostly waiting for the two
/// candidate buckets; the WAL copy and its checksum take longer than those
/// misses. Past this many keys the early lines would be evicted before use.
/// The profile's figures are in
/// `bench/journal/2026-11-27-03-figures-from-code-comments.md`.
const PREFETCH_MAX_OPS: usize = 32;

/// Times a writer spins on a held WAL lock before it blocks: a few
/// microseconds, about the time a writer on each of 16 cores ahead of it
/// takes to append.
const WAL_LOCK_SPINS: u32 = 1024;

/// The read watermark is advanced by a writer whose sequences cross a
/// multiple of this (so by about one write in this many): advancing reads
/// every reader stripe, too much work for every write.
const WATERMARK_EVERY: u64 = 16;

/// Inserts `batch` into `mem` at the sequences it was given (its range
/// deletes beside the versions, `crate::range_delete`).
fn insert_batch(mem: &dyn Memtable, batch: &WriteBatch, range_deletes_seen: &AtomicBool) {
    let first_seq = batch.sequence();
    for (i, op) in batch.iter().enumerate() {
        // The batch was validated before it was queued, so decoding
        // succeeds, and it holds no compressed value (the write path fills
        // the memtable from the batch it was given, not the WAL's).
        if let Ok(op) = op {
            debug_assert_eq!(op.codec, crate::compression::CODEC_NONE);
            let seq = first_seq + i as u64;
            match op.range_end {
                Some(end) => {
                    // Before the delete is visible: gets check from then on.
                    range_deletes_seen.store(true, Ordering::Release);
                    mem.range_tombstones().add(RangeTombstone {
                        start: op.key.to_vec(),
                        end: end.to_vec(),
                        seq,
                    });
                }
                None => mem.insert(op.key, seq, op.kind, op.value),
            }
        }
    }
}

/// What a writer holds between its WAL append and its publication.
struct Appended {
    /// The super version pinned under the WAL lock: its active memtable is
    /// the WAL's (rotation swaps both, and installs the super version,
    /// under that lock). A pin writes only this thread's debt slot, where
    /// an `Arc` clone of the memtable wrote its count, a line every writer
    /// shares.
    pinned: Guard<Arc<SuperVersion>>,
    /// The WAL (and so the memtable generation) it went to.
    wal_number: u64,
    /// The write's place in the publication order.
    ticket: u64,
    first: SequenceNumber,
    last: SequenceNumber,
    /// `(WAL number, end of the record)` when the write must be synced.
    sync_to: Option<(u64, u64)>,
}

impl Core {
    /// Applies `batch` (validated by the caller).
    pub(crate) fn write(
        &self,
        batch: WriteBatch,
        sync: bool,
        logged: bool,
        rotate: bool,
    ) -> Result<()> {
        self.write_checked(batch, sync, logged, rotate, None)
    }

    /// Applies `batch` as [`Core::write`] does; with a `check` (a
    /// transaction's commit), only if the check passes under the WAL lock,
    /// atomically with taking the batch's sequences
    /// ([`Core::check_commit_locked`]).
    pub(crate) fn write_checked(
        &self,
        mut batch: WriteBatch,
        sync: bool,
        logged: bool,
        rotate: bool,
        check: Option<&CommitCheck>,
    ) -> Result<()> {
        debug_assert!(logged || !sync, "a sync write must be logged");
        self.check_writable()?;
        if rotate {
            // A flush request: rotate now, even a memtable that is not full.
            self.make_room(true)?;
        }
        if batch.is_empty() {
            return Ok(());
        }
        let bytes = batch.approximate_size() as u64;
        let mut has_logged_puts = false;
        // The batch the memtable is filled from, when the WAL gets a
        // re-encoded one: its values as given, never compressed.
        let mut given = None;
        // Each value's keyspace decides (`crate::keyspace_options`); a
        // batch smaller than the smallest threshold of any keyspace holds
        // no value that large, and reads nothing more.
        let min_from = self.min_logged_from.load(Ordering::Acquire);
        if logged && batch.approximate_size() >= min_from {
            // On the writer's own thread, outside the WAL lock: `Db::put`
            // builds its batch logged already; a user's batch is copied
            // (and compressed, `Options::value_log_compression`).
            let settings = self.keyspace_settings.load();
            if let Some(logged) =
                batch.with_puts_logged_by(|key| settings.for_key(key).logged_put())
            {
                given = Some(std::mem::replace(&mut batch, logged));
            }
            has_logged_puts = batch.iter().flatten().any(|op| op.logged.is_some());
        }
        let appended = self.append(&mut batch, sync, logged, has_logged_puts, check)?;
        if !logged {
            // The unit tests' window between an unlogged write's sequence
            // and its insert (the close's flush must wait for it).
            crate::fault::pause_point("write.unlogged_appended", &self.dir);
        }
        if let Some(given) = given.as_mut() {
            given.set_sequence(appended.first);
        }
        let batch = given.unwrap_or(batch);
        let mem = &appended.pinned.mem;
        if !self.has_room(mem) {
            // Outside the WAL lock (a memtable's size reads lines every
            // insert writes): the next writer takes the slow path.
            self.full_memtable_wal
                .store(appended.wal_number, Ordering::Release);
        }
        let synced = match appended.sync_to {
            Some((number, end)) => self.sync_wal_through(number, end),
            None => Ok(()),
        };
        // A failed sync poisoned the store: the batch is not inserted (the
        // caller sees the error), but its sequences are still published so
        // that the writers after it are not left waiting.
        if synced.is_ok() {
            if let Some(rows) = &self.row_cache {
                // Before the insert, so before the write is visible: a
                // cached key is never older than a visible write
                // (`cache::row_cache`).
                rows.refresh_batch(&batch);
            }
            insert_batch(mem.as_ref(), &batch, &self.range_deletes_seen);
        }
        self.publish(appended.ticket, appended.first, appended.last);
        if synced.is_ok() {
            self.counters.user_bytes.add(bytes);
        }
        synced
    }

    /// How a logged write's value of the stored key `key` goes to the WAL
    /// (`Options::values_in_wal`, per keyspace): `(from, codec)`, or
    /// `None` when it stays in the batch.
    pub(crate) fn logged_put_for(
        &self,
        key: &[u8],
        logged: bool,
    ) -> Option<(usize, crate::Compression)> {
        if !logged || self.min_logged_from.load(Ordering::Acquire) == usize::MAX {
            return None;
        }
        self.keyspace_settings.load().for_key(key).logged_put()
    }

    /// Takes the batch's sequences and appends it to the WAL, under the WAL
    /// lock; goes to [`Core::make_room`] first whenever the memtable is
    /// full or background work is behind. A transaction's `check` runs
    /// under the same hold of the lock, just before the sequences are
    /// taken.
    fn append(
        &self,
        batch: &mut WriteBatch,
        sync: bool,
        logged: bool,
        has_logged_puts: bool,
        check: Option<&CommitCheck>,
    ) -> Result<Appended> {
        let ops = batch.len();
        let defer = self.options.manual_wal_flush && !sync;
        // The slow path slows a writer once at most; after it, only a full
        // memtable sends the writer back.
        let mut slowed = false;
        loop {
            let mut wal = self.lock_wal();
            let throttled = !slowed && self.writes_throttled.load(Ordering::Acquire);
            let full = self.full_memtable_wal.load(Ordering::Acquire) == wal.number;
            if throttled || full {
                drop(wal);
                self.make_room(false)?;
                slowed = true;
                continue;
            }
            self.check_writable()?;
            if let Some(check) = check {
                // A conflict returns here, before any sequence is taken.
                if let CommitChecked::Behind(handed_out) = self.check_commit_locked(check)? {
                    // Writes that took sequences are still inserting: wait
                    // for them with the lock released (a sync writer takes
                    // it before it publishes), then check again.
                    drop(wal);
                    self.wait_visible(handed_out);
                    continue;
                }
            }
            let first = self.last_seq.load(Ordering::Relaxed) + 1;
            let last = first + ops as u64 - 1;
            if last > crate::key::MAX_SEQUENCE {
                drop(wal);
                let e = Error::Poisoned("sequence numbers exhausted".into());
                self.poison(&e);
                return Err(e);
            }
            batch.set_sequence(first);
            let pinned = self.pin_super_version();
            if ops <= PREFETCH_MAX_OPS {
                // The hash kinds' bucket lines load while the record is
                // copied.
                for op in batch.iter().flatten() {
                    pinned.mem.prefetch(op.key);
                }
            }
            if logged {
                let ActiveWal {
                    writer,
                    has_logged_puts: wal_has_logged_puts,
                    ..
                } = &mut *wal;
                *wal_has_logged_puts |= has_logged_puts;
                // With `manual_wal_flush`, the record waits in the writer's
                // buffer for `Db::flush_wal` (a sync writes it anyway).
                let added = match defer {
                    true => writer.add_record_deferred(batch.encoded()),
                    false => writer.add_record(batch.encoded()),
                };
                match added {
                    Ok(n) => self.counters.wal_bytes.add(n),
                    Err(e) => {
                        // No sequence was taken: nothing to publish.
                        drop(wal);
                        self.poison(&e);
                        return Err(e);
                    }
                }
            }
            self.last_seq.store(last, Ordering::Relaxed);
            return Ok(Appended {
                wal_number: wal.number,
                ticket: self.publication.ticket(),
                pinned,
                first,
                last,
                sync_to: sync.then(|| (wal.number, wal.writer.size())),
            });
        }
    }

    /// Takes the WAL lock for an append: spins on it (reading, so the
    /// spinners do not take the line from the holder) before blocking.
    /// Appends hold it for a few hundred nanoseconds; with a writer on
    /// every core, blocking at once put most of them to sleep and made
    /// every unlock a futex wake-up, which took longer than the append.
    fn lock_wal(&self) -> MutexGuard<'_, ActiveWal> {
        for _ in 0..WAL_LOCK_SPINS {
            if !self.wal.is_locked() {
                if let Some(g) = self.wal.try_lock() {
                    return g;
                }
            }
            std::hint::spin_loop();
        }
        self.wal.lock()
    }

    /// True when `mem` can take another write without rotating.
    fn has_room(&self, mem: &Arc<dyn Memtable>) -> bool {
        mem.approximate_memory() < self.options.write_buffer_size && !mem.is_full()
    }

    /// Publishes the write's ticket, waits until its sequences are
    /// visible, and now and then advances the memtables' read watermark.
    fn publish(&self, ticket: u64, first: SequenceNumber, last: SequenceNumber) {
        self.publication.complete(ticket, last);
        self.publication.wait_visible(last);
        if (first - 1) / WATERMARK_EVERY != last / WATERMARK_EVERY {
            if let Some(w) = self.read_tracker.advance(last, || self.snapshots.oldest()) {
                self.pin_super_version().mem.set_read_watermark(w);
            }
        }
    }

    /// Makes every WAL record appended so far durable (`Db::sync_wal`),
    /// sharing the fdatasync with sync writers.
    pub(crate) fn sync_wal_all(&self) -> Result<()> {
        let (number, end) = {
            let wal = self.wal.lock();
            (wal.number, wal.writer.size())
        };
        self.sync_wal_through(number, end)
    }

    /// Makes every WAL record up to `end` of WAL `number` durable (and so
    /// every record of an earlier WAL), sharing the fdatasync with the
    /// other sync writers: whoever holds `wal_synced` syncs everything
    /// appended so far, and the writers queued on it find theirs covered.
    fn sync_wal_through(&self, number: u64, end: u64) -> Result<()> {
        let mut synced = self.wal_synced.lock();
        if *synced >= (number, end) {
            return Ok(());
        }
        let result = (|| {
            // Under the WAL lock every sequence up to `last_seq` has its
            // record appended (or was written without the WAL), in this WAL
            // or an older one: syncing all of them makes them durable.
            // This is taken first: a rotation after it closes only this
            // WAL or newer ones, which the handle (this WAL) and nothing
            // (newer ones hold no sequence up to `last`) need. Taken after
            // the closed WALs' sync, a rotation in between closed a WAL
            // that neither sync covered.
            let (number, size, handle, last) = {
                let mut wal = self.wal.lock();
                let handle = wal.writer.sync_handle();
                let last = self.last_seq.load(Ordering::Relaxed);
                (wal.number, wal.writer.size(), handle, last)
            };
            // The tests' window for a rotation between the two.
            crate::fault::pause_point("sync.wal_taken", &self.dir);
            // Earlier WALs first: a durable write implies every earlier one is.
            self.closed_wals.sync_through(number.saturating_sub(1))?;
            handle?
                .sync_data()
                .map_err(|e| Error::io("syncing the write-ahead log", e))?;
            Ok((number, size, last))
        })();
        match result {
            Ok((number, size, last)) => {
                *synced = (number, size);
                self.note_durable(last);
                Ok(())
            }
            Err(e) => {
                drop(synced);
                self.poison(&e);
                Err(e)
            }
        }
    }

    /// Ensures the active memtable can take a write; rotates it when full (or
    /// when `force`), slows writers when background work falls behind, and
    /// stalls them — never fails them — when it is far behind.
    fn make_room(&self, force: bool) -> Result<()> {
        let opts = &self.options;
        let mut slowed = false;
        let mut force = force;
        let mut st = self.state.lock();
        loop {
            self.check_writable()?;
            let unsorted = st.version.unsorted_tables();
            // Behind (see `background_behind`): one 1 ms pause per write.
            if background_behind(opts, &st) && !slowed && !force {
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
            let forced = force && st.mem.holds_writes();
            if !full && !forced {
                return Ok(());
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

    /// Writes every memtable to tables and waits until that is durable: the
    /// flush of a clean close (`Db::close`). Runs after `closed` is set, so
    /// no write takes a sequence any more (each checks it under the WAL
    /// lock), and it waits for the writes that took one to finish their
    /// inserts before it looks at the memtable. Only poisoning stops it:
    /// the background threads still run, and pick no more jobs once
    /// poisoned.
    pub(crate) fn flush_at_close(&self) -> Result<()> {
        let opts = &self.options;
        // The last sequence any write took (none takes one after `closed`,
        // checked under the WAL lock), and every write up to it inserted:
        // from here on, a memtable without writes really holds none.
        let last = {
            let _wal = self.wal.lock();
            self.last_seq.load(Ordering::Relaxed)
        };
        self.wait_visible(last);
        let mut st = self.state.lock();
        loop {
            self.check_poisoned()?;
            if !st.mem.holds_writes() {
                break;
            }
            // As a flush request's rotation: room in the immutable queue,
            // and no partition at the stop trigger (merges make room).
            if st.imms.len() >= opts.max_immutable_memtables
                || st.version.unsorted_tables() >= opts.unsorted_stop_tables
            {
                self.state_cv.wait(&mut st);
                continue;
            }
            self.rotate(&mut st)?;
            break;
        }
        let target = st.imm_created;
        while st.imm_flushed < target {
            self.check_poisoned()?;
            self.state_cv.wait(&mut st);
        }
        Ok(())
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
        let new_mem = new_memtable(self.options.memtable, self.options.write_buffer_size);
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
            let wal_size = wal.writer.size();
            let link = crate::wal::LogLink {
                previous: st.mem_wal,
                previous_size: wal_size,
            };
            if let Err(e) = writer.add_record(&link.encode()) {
                self.poison_holding_state(&e, st);
                return Err(e);
            }
            let active = ActiveWal {
                writer,
                number,
                has_logged_puts: false,
            };
            let old = std::mem::replace(&mut *wal, active);
            let wal_has_logged_puts = old.has_logged_puts;
            self.closed_wals.push(st.mem_wal, old.writer);
            // Writers take sequences under this lock: none up to this one
            // goes to the new memtable, none after it to the old.
            let last_sequence = self.last_seq.load(Ordering::Relaxed);
            let old = std::mem::replace(&mut st.mem, new_mem);
            let old_wal = std::mem::replace(&mut st.mem_wal, number);
            let first_sequence =
                std::mem::replace(&mut st.feed.active_first_seq, last_sequence + 1);
            st.imms.push_back(ImmutableMemtable {
                mem: old,
                wal_number: old_wal,
                made_immutable: Instant::now(),
                last_sequence,
                wal_size,
                wal_has_logged_puts,
                first_sequence,
            });
            st.imm_created += 1;
            // Published before the WAL lock is released: a writer that puts
            // into the new memtable (it takes it under this lock) and then
            // reads must pin a super version that holds it. Installed after
            // the lock, a writer's own acknowledged write could be missing
            // from its next scan (the 32-thread stress test caught it).
            self.install_super_version(st);
        }
        self.state_cv.notify_all();
        Ok(())
    }
}
