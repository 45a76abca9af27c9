//! Pub/sub: who listens to which channel and pattern, and the messages.
//!
//! # Many cores
//!
//! The channel registry is split in [`SHARDS`] shards by a hash of the
//! channel name; each shard is an immutable map behind an [`ArcSwap`],
//! replaced whole (copy-on-write, under the shard's writer lock) by
//! `SUBSCRIBE`/`UNSUBSCRIBE`. A `PUBLISH` loads the shard's current map
//! (arc-swap's load writes only thread-local state) and looks the channel
//! up: a publish to a channel nobody listens to writes no shared cache
//! line. Patterns are one copy-on-write list, matched in full on every
//! publish as Redis does (`O(patterns)`); with no pattern subscribed that
//! is one load and an empty check.
//!
//! A subscribe copies its shard's map: `O(channels / SHARDS)` per
//! subscribe. That suits the common shapes (many publishes, few
//! subscription changes); a server churning through millions of channel
//! subscriptions a second would want a concurrent map instead.
//!
//! # Delivery
//!
//! A publish encodes the message once per form (one for the channel's
//! subscribers, one per matching pattern) and posts an `Arc` of it to each
//! subscriber ([`crate::deliver`]); each receiver writes the RESP2 (`*`) or
//! RESP3 (`>`) header itself. A receiver drops a message for a
//! subscription it no longer holds, so no message follows the reply to
//! its `UNSUBSCRIBE`.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::deliver::{ClientRef, Delivery};

/// Channel registry shards.
pub const SHARDS: usize = 64;

type Subscribers = Arc<[ClientRef]>;
type ChannelMap = HashMap<Box<[u8]>, Subscribers>;

struct Shard {
    map: ArcSwap<ChannelMap>,
    write: Mutex<()>,
}

/// A message as published: what its receivers append after the array or
/// push header.
#[derive(Debug)]
pub struct Message {
    /// True for a `pmessage` (from a pattern subscription).
    pub pattern: bool,
    /// The subscription that matched: the channel, or the pattern.
    pub via: Box<[u8]>,
    /// Elements after the header (3 for `message`, 4 for `pmessage`).
    pub len: u8,
    /// The encoded elements.
    pub body: Vec<u8>,
}

fn put_bulk(v: &mut Vec<u8>, b: &[u8]) {
    v.push(b'$');
    v.extend_from_slice(b.len().to_string().as_bytes());
    v.extend_from_slice(b"\r\n");
    v.extend_from_slice(b);
    v.extend_from_slice(b"\r\n");
}

impl Message {
    fn channel(channel: &[u8], payload: &[u8]) -> Message {
        let mut body = Vec::with_capacity(channel.len() + payload.len() + 32);
        put_bulk(&mut body, b"message");
        put_bulk(&mut body, channel);
        put_bulk(&mut body, payload);
        Message {
            pattern: false,
            via: channel.into(),
            len: 3,
            body,
        }
    }

    fn pattern(pattern: &[u8], channel: &[u8], payload: &[u8]) -> Message {
        let mut body = Vec::with_capacity(pattern.len() + channel.len() + payload.len() + 40);
        put_bulk(&mut body, b"pmessage");
        put_bulk(&mut body, pattern);
        put_bulk(&mut body, channel);
        put_bulk(&mut body, payload);
        Message {
            pattern: true,
            via: pattern.into(),
            len: 4,
            body,
        }
    }

    /// Appends the message as a RESP3 push or a RESP2 array.
    pub fn write_to(&self, out: &mut Vec<u8>, resp3: bool) {
        out.push(if resp3 { b'>' } else { b'*' });
        out.push(b'0' + self.len);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
    }
}

/// The registry of channel and pattern subscriptions.
pub struct Hub {
    shards: Box<[Shard]>,
    patterns: ArcSwap<Vec<(Box<[u8]>, Subscribers)>>,
    pattern_write: Mutex<()>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            shards: (0..SHARDS)
                .map(|_| Shard {
                    map: ArcSwap::from_pointee(HashMap::new()),
                    write: Mutex::new(()),
                })
                .collect(),
            patterns: ArcSwap::from_pointee(Vec::new()),
            pattern_write: Mutex::new(()),
        }
    }
}

fn shard_of(channel: &[u8]) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    channel.hash(&mut h);
    (h.finish() as usize) % SHARDS
}

/// `list` with `who` added (if absent).
fn with(list: Option<&Subscribers>, who: ClientRef) -> Subscribers {
    let mut v: Vec<ClientRef> = list.map_or_else(Vec::new, |l| l.to_vec());
    if !v.iter().any(|c| c.id == who.id) {
        v.push(who);
    }
    v.into()
}

/// `list` without client `id`; `None` when it becomes empty.
fn without(list: &Subscribers, id: u64) -> Option<Subscribers> {
    let v: Vec<ClientRef> = list.iter().copied().filter(|c| c.id != id).collect();
    (!v.is_empty()).then(|| v.into())
}

impl Hub {
    /// Adds `who` to `channel`'s subscribers.
    pub fn subscribe(&self, channel: &[u8], who: ClientRef) {
        let shard = &self.shards[shard_of(channel)];
        let _w = shard.write.lock();
        let mut map = ChannelMap::clone(&shard.map.load());
        let list = with(map.get(channel), who);
        map.insert(channel.into(), list);
        shard.map.store(Arc::new(map));
    }

    /// Removes client `id` from `channel`'s subscribers.
    pub fn unsubscribe(&self, channel: &[u8], id: u64) {
        let shard = &self.shards[shard_of(channel)];
        let _w = shard.write.lock();
        let cur = shard.map.load();
        let Some(list) = cur.get(channel) else {
            return;
        };
        let mut map = ChannelMap::clone(&cur);
        match without(list, id) {
            Some(l) => map.insert(channel.into(), l),
            None => map.remove(channel),
        };
        shard.map.store(Arc::new(map));
    }

    /// Adds `who` to `pattern`'s subscribers.
    pub fn psubscribe(&self, pattern: &[u8], who: ClientRef) {
        let _w = self.pattern_write.lock();
        let mut v = Vec::clone(&self.patterns.load());
        match v.iter_mut().find(|(p, _)| &**p == pattern) {
            Some((_, subs)) => *subs = with(Some(subs), who),
            None => v.push((pattern.into(), with(None, who))),
        }
        self.patterns.store(Arc::new(v));
    }

    /// Removes client `id` from `pattern`'s subscribers.
    pub fn punsubscribe(&self, pattern: &[u8], id: u64) {
        let _w = self.pattern_write.lock();
        let cur = self.patterns.load();
        if !cur.iter().any(|(p, _)| &**p == pattern) {
            return;
        }
        let v: Vec<(Box<[u8]>, Subscribers)> = cur
            .iter()
            .filter_map(|(p, subs)| {
                if &**p == pattern {
                    without(subs, id).map(|s| (p.clone(), s))
                } else {
                    Some((p.clone(), subs.clone()))
                }
            })
            .collect();
        self.patterns.store(Arc::new(v));
    }

    /// Publishes `payload` on `channel`: pushes one delivery per receiving
    /// subscription onto `out` and returns their number (a client
    /// subscribed to the channel and to a matching pattern counts, and
    /// receives, twice, as in Redis).
    pub fn publish(
        &self,
        channel: &[u8],
        payload: &[u8],
        out: &mut Vec<(ClientRef, Delivery)>,
    ) -> usize {
        let mut n = 0;
        {
            let map = self.shards[shard_of(channel)].map.load();
            if let Some(subs) = map.get(channel) {
                let m = Arc::new(Message::channel(channel, payload));
                for &c in subs.iter() {
                    out.push((c, Delivery::Message(Arc::clone(&m))));
                }
                n += subs.len();
            }
        }
        let pats = self.patterns.load();
        for (p, subs) in pats.iter() {
            if crate::glob::matches(p, channel) {
                let m = Arc::new(Message::pattern(p, channel, payload));
                for &c in subs.iter() {
                    out.push((c, Delivery::Message(Arc::clone(&m))));
                }
                n += subs.len();
            }
        }
        n
    }

    /// Channels with at least one subscriber matching `pattern` (all when
    /// `None`), sorted.
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Box<[u8]>> {
        let mut v: Vec<Box<[u8]>> = Vec::new();
        for s in self.shards.iter() {
            for ch in s.map.load().keys() {
                if pattern.is_none_or(|p| crate::glob::matches(p, ch)) {
                    v.push(ch.clone());
                }
            }
        }
        v.sort();
        v
    }

    /// Subscribers of `channel`.
    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.shards[shard_of(channel)]
            .map
            .load()
            .get(channel)
            .map_or(0, |s| s.len())
    }

    /// Patterns with at least one subscriber.
    pub fn numpat(&self) -> usize {
        self.patterns.load().len()
    }

    /// Channels with at least one subscriber.
    pub fn numchannels(&self) -> usize {
        self.shards.iter().map(|s| s.map.load().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: u64) -> ClientRef {
        ClientRef {
            loop_ix: 0,
            slot: id as u32,
            id,
        }
    }

    #[test]
    fn channels_and_patterns_reach_their_subscribers() {
        let hub = Hub::default();
        hub.subscribe(b"news", c(1));
        hub.subscribe(b"news", c(2));
        hub.subscribe(b"news", c(2));
        hub.psubscribe(b"n*", c(2));
        hub.psubscribe(b"x*", c(3));
        let mut out = Vec::new();
        assert_eq!(hub.publish(b"news", b"hi", &mut out), 3);
        let ids: Vec<u64> = out.iter().map(|(c, _)| c.id).collect();
        assert_eq!(ids, vec![1, 2, 2]);
        let Delivery::Message(m) = &out[2].1 else {
            panic!("not a message")
        };
        let mut b = Vec::new();
        m.write_to(&mut b, true);
        assert_eq!(
            b,
            b">4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        out.clear();
        assert_eq!(hub.publish(b"other", b"hi", &mut out), 0);
        assert!(out.is_empty());
        assert_eq!(hub.numsub(b"news"), 2);
        assert_eq!(hub.numpat(), 2);
        hub.unsubscribe(b"news", 1);
        hub.unsubscribe(b"news", 2);
        hub.punsubscribe(b"n*", 2);
        assert_eq!(hub.numsub(b"news"), 0);
        assert_eq!(hub.numpat(), 1);
        assert!(hub.channels(None).is_empty());
        assert_eq!(hub.publish(b"news", b"hi", &mut out), 0);
    }
}
