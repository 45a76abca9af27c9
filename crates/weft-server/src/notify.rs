//! Keyspace notifications (Redis's `notify-keyspace-events`): a write
//! publishes `__keyspace@<db>__:<key>` (payload: the event's name) and
//! `__keyevent@<db>__:<event>` (payload: the key) to whoever subscribes,
//! with Redis 7.0's event names, in the order Redis raises them.
//!
//! # Where events are raised
//!
//! * A command's own events (`set`, `lpush`, `del`, `rename_from`, ...)
//!   are raised by its handler after its write, through
//!   [`crate::cmd::Ctx::notify`]: the messages join the connection's
//!   deliveries ([`crate::deliver`]), which go out before its reply.
//! * `expired` (a writer that finds a key past its deadline deletes it)
//!   and `new` (a write that creates a key) are noted in the
//!   [`crate::keyspace::Batch`] that does it, and become *pending* on the
//!   writing thread once that batch is written ([`defer`]): a batch that
//!   is never written raises nothing. A command's own event publishes the
//!   pending ones Redis would have raised before it ([`publish_pending`]);
//!   the rest go out after the command.
//! * The background expirer's `expired` are published by the expirer
//!   thread, each while it still holds the key's stripe lock, straight to
//!   the subscribers' mailboxes ([`post_pending`]).
//!
//! # Cost when off
//!
//! The flags are kept twice: as set (for `CONFIG GET`) and as *effective*
//! flags, zero unless `K` or `E` is set (without either Redis publishes
//! nothing). Every place that could raise an event first makes one relaxed
//! load of the effective flags and one branch on `flags & class`; nothing
//! is allocated, formatted or looked up unless a class is on. The plain
//! `SET` fast path (`conn.rs`) is not taken while any class is on, since it
//! raises nothing.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::deliver::{ClientRef, Delivery};
use crate::pubsub::Hub;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (`del`, `expire`, `rename_from`, ...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: a key deleted at its deadline (`expired`).
pub const EXPIRED: u32 = 1 << 8;
/// `e`: a key evicted for memory (`evicted`; Weft never evicts).
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands (Weft has no streams).
pub const STREAM: u32 = 1 << 10;
/// `m`: key misses (accepted; not raised: DESIGN §1.8).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module key types (Weft has none).
pub const MODULE: u32 = 1 << 12;
/// `n`: a key created (`new`; not part of `A`, as in Redis).
pub const NEW: u32 = 1 << 13;
/// `A`: `g$lshzxetd`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Parses a `notify-keyspace-events` value as Redis does: each byte one
/// class letter, in any order and repeated at will; any other byte makes
/// the whole value invalid (`None`).
pub fn parse(s: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for &c in s {
        flags |= match c {
            b'A' => ALL,
            b'g' => GENERIC,
            b'$' => STRING,
            b'l' => LIST,
            b's' => SET,
            b'h' => HASH,
            b'z' => ZSET,
            b'x' => EXPIRED,
            b'e' => EVICTED,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b't' => STREAM,
            b'm' => KEY_MISS,
            b'd' => MODULE,
            b'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The error Redis's `CONFIG SET` gives for a bad letter.
pub const INVALID: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// Writes flags as Redis 7.0's `CONFIG GET` does: `A` for all of `ALL`
/// (then `n` is not shown, as in Redis 7.0), else the letters in Redis's
/// order; then `K`, `E`, `m`.
pub fn format(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (class, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & class != 0 {
                s.push(c);
            }
        }
    }
    for (class, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & class != 0 {
            s.push(c);
        }
    }
    s
}

/// The server's `notify-keyspace-events` setting.
#[derive(Debug, Default)]
pub struct Flags {
    /// As set (`CONFIG GET`).
    set: AtomicU32,
    /// What raising looks at: `set`, or zero when neither `K` nor `E` is
    /// on.
    effective: AtomicU32,
}

impl Flags {
    /// Starts with `flags` (from [`parse`]).
    pub fn new(flags: u32) -> Flags {
        let f = Flags::default();
        f.store(flags);
        f
    }

    /// Changes the setting (`CONFIG SET notify-keyspace-events`).
    pub fn store(&self, flags: u32) {
        self.set.store(flags, Ordering::Relaxed);
        let on = flags & (KEYSPACE | KEYEVENT) != 0;
        self.effective
            .store(if on { flags } else { 0 }, Ordering::Relaxed);
    }

    /// The setting as set.
    pub fn get(&self) -> u32 {
        self.set.load(Ordering::Relaxed)
    }

    /// The effective flags: zero when nothing is published.
    #[inline]
    pub fn effective(&self) -> u32 {
        self.effective.load(Ordering::Relaxed)
    }

    /// True when an event of `class` is published.
    #[inline]
    pub fn wants(&self, class: u32) -> bool {
        self.effective() & class != 0
    }
}

/// One event to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The key's database.
    pub db: usize,
    /// Its class (one of the constants).
    pub class: u32,
    /// Redis's name for it.
    pub name: &'static str,
    /// The key.
    pub key: Vec<u8>,
}

thread_local! {
    /// Events of batches this thread wrote that are not published yet.
    static PENDING: RefCell<Vec<Event>> = const { RefCell::new(Vec::new()) };
}

/// Makes `events` pending on this thread: their batch has been written.
pub fn defer(events: impl IntoIterator<Item = Event>) {
    PENDING.with(|p| p.borrow_mut().extend(events));
}

/// Takes this thread's pending events, in order.
pub fn take_pending() -> Vec<Event> {
    PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()))
}

/// Publishes `ev` under `flags` (effective): the keyspace message, then
/// the keyevent message, as Redis orders them. Pushes the deliveries onto
/// `out`.
pub fn publish(hub: &Hub, flags: u32, ev: &Event, out: &mut Vec<(ClientRef, Delivery)>) {
    if flags & ev.class == 0 {
        return;
    }
    if flags & KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{}__:", ev.db).into_bytes();
        channel.extend_from_slice(&ev.key);
        hub.publish(&channel, ev.name.as_bytes(), out);
    }
    if flags & KEYEVENT != 0 {
        let channel = format!("__keyevent@{}__:{}", ev.db, ev.name);
        hub.publish(channel.as_bytes(), &ev.key, out);
    }
}

/// Publishes this thread's pending events, and after them `then`, onto
/// `out` (dropping them when notifications were turned off meanwhile).
///
/// Without `then` every pending event goes. With `then`, on key `k`, the
/// pending events go that Redis would have raised before it: every one up
/// to the last that concerns `k` (its `new`: Redis creates a key just
/// before it raises the command's event on it), and every `expired` (Redis
/// raises those at the lookups that start a command); the others stay
/// pending for a later event of the command or its end. So `MSET a 1 b 2`
/// raises `new a, set a, new b, set b`, and `SMOVE s d m` raises `srem s`
/// before `new d, sadd d`, as Redis does.
pub fn publish_pending(
    hub: &Hub,
    flags: &Flags,
    then: Option<&Event>,
    out: &mut Vec<(ClientRef, Delivery)>,
) {
    let f = flags.effective();
    let mut pending = take_pending();
    if let Some(ev) = then {
        let upto = pending
            .iter()
            .rposition(|p| p.db == ev.db && p.key == ev.key)
            .map_or(0, |i| i + 1);
        let mut later = pending.split_off(upto);
        later.retain(|p| {
            let now = p.class == EXPIRED;
            if now {
                pending.push(p.clone());
            }
            !now
        });
        if !later.is_empty() {
            defer(later);
        }
    }
    for ev in &pending {
        publish(hub, f, ev, out);
    }
    if let Some(ev) = then {
        publish(hub, f, ev, out);
    }
}

/// For a thread that is no connection (the background expirer): publishes
/// its pending events and posts the messages to the subscribers' loops,
/// one batch per loop.
pub fn post_pending(shared: &crate::Shared) {
    let mut out = Vec::new();
    publish_pending(&shared.hub, &shared.store.notify, None, &mut out);
    if out.is_empty() {
        return;
    }
    // Stable: each loop's messages keep their order.
    out.sort_by_key(|(to, _)| to.loop_ix);
    let mut rest = &mut out[..];
    while let Some(first) = rest.first() {
        let target = first.0.loop_ix;
        let n = rest
            .iter()
            .take_while(|(to, _)| to.loop_ix == target)
            .count();
        let (batch, tail) = rest.split_at_mut(n);
        shared.postal.post_all(
            target as usize,
            batch.iter_mut().map(|(to, what)| crate::deliver::Post {
                slot: to.slot,
                id: to.id,
                what: std::mem::replace(what, Delivery::Kill),
            }),
        );
        rest = tail;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_print_as_redis_7_0_does() {
        let cases: [(&[u8], &str); 8] = [
            (b"", ""),
            (b"KEA", "AKE"),
            (b"AKEn", "AKE"),
            (b"g$lshzxetdnmKE", "AKEm"),
            (b"KEg$", "g$KE"),
            (b"AAKKgg", "AK"),
            (b"Ex", "xE"),
            (b"nlK", "lnK"),
        ];
        for (s, shown) in cases {
            let f = parse(s).unwrap_or(u32::MAX);
            assert_eq!(format(f), shown, "{:?}", String::from_utf8_lossy(s));
        }
        assert_eq!(parse(b"KEQ"), None);
        assert_eq!(parse(b"k"), None);
        assert_eq!(parse(b" "), None);
    }

    #[test]
    fn nothing_is_effective_without_k_or_e() {
        let f = Flags::new(ALL);
        assert_eq!(f.get(), ALL);
        assert!(!f.wants(GENERIC));
        f.store(ALL | KEYEVENT);
        assert!(f.wants(GENERIC) && f.wants(EXPIRED) && !f.wants(NEW));
        f.store(0);
        assert_eq!(f.effective(), 0);
    }
}
