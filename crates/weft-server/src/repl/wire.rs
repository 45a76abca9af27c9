//! The replication stream's frames, after the `+FULLRESYNC` or
//! `+CONTINUE` line (`docs/DESIGN.md` §1.11). Weft-to-Weft only: Redis's
//! stream is RDB then commands, this one is checkpoint files then the
//! engine's committed batches.
//!
//! A frame is a tag byte, a `u64be` length and that many bytes:
//!
//! | tag | payload |
//! |---|---|
//! | `F` | a checkpoint file: `u32be` name length, the name, then its bytes (the length counts both) |
//! | `E` | end of the checkpoint: `u64be` the sequence it was cut at |
//! | `G` | one committed batch: `u64be` its first sequence, then each operation: kind (`P` put, `D` delete, `R` range delete), `u32be` key length, key, `u32be` value (or range end) length, value |
//! | `H` | a heartbeat, once a second while idle: `u64be` the primary's offset |

use weft::ChangeOp;

/// A checkpoint file.
pub const FILE: u8 = b'F';
/// The end of a checkpoint.
pub const END: u8 = b'E';
/// A batch.
pub const GROUP: u8 = b'G';
/// A heartbeat.
pub const HEARTBEAT: u8 = b'H';

/// Bytes of a frame's header.
pub const HEADER: usize = 9;

/// Most bytes a `G` frame may hold: a batch is bounded by the engine's
/// limits well below this; a length past it is a damaged stream.
pub const MAX_GROUP: u64 = 4 << 30;

/// Appends a frame header.
pub fn header(out: &mut Vec<u8>, tag: u8, len: u64) {
    out.push(tag);
    out.extend_from_slice(&len.to_be_bytes());
}

/// Appends a `u64` frame (`E`, `H`).
pub fn u64_frame(out: &mut Vec<u8>, tag: u8, v: u64) {
    header(out, tag, 8);
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends a `G` frame of the batch whose first operation has sequence
/// `first` and whose operations are `ops`.
pub fn group(out: &mut Vec<u8>, first: u64, ops: &[ChangeOp]) {
    let len: usize = 8 + ops
        .iter()
        .map(|op| {
            9 + match op {
                ChangeOp::Put { key, value } => key.len() + value.len(),
                ChangeOp::Delete { key } => key.len(),
                ChangeOp::DeleteRange { start, end } => start.len() + end.len(),
            }
        })
        .sum::<usize>();
    header(out, GROUP, len as u64);
    out.extend_from_slice(&first.to_be_bytes());
    for op in ops {
        let (kind, a, b): (u8, &[u8], &[u8]) = match op {
            ChangeOp::Put { key, value } => (b'P', key, value),
            ChangeOp::Delete { key } => (b'D', key, &[]),
            ChangeOp::DeleteRange { start, end } => (b'R', start, end),
        };
        out.push(kind);
        out.extend_from_slice(&(a.len() as u32).to_be_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(&(b.len() as u32).to_be_bytes());
        out.extend_from_slice(b);
    }
}

/// Decodes a `G` frame's payload: the first sequence and the operations;
/// `None` if it does not parse.
pub fn decode_group(p: &[u8]) -> Option<(u64, Vec<ChangeOp>)> {
    let first = u64::from_be_bytes(*p.first_chunk::<8>()?);
    let mut rest = &p[8..];
    let mut ops = Vec::new();
    let take = |rest: &mut &[u8]| -> Option<Vec<u8>> {
        let n = u32::from_be_bytes(*rest.first_chunk::<4>()?) as usize;
        let v = rest.get(4..4 + n)?.to_vec();
        *rest = &rest[4 + n..];
        Some(v)
    };
    while let Some((&kind, tail)) = rest.split_first() {
        rest = tail;
        let a = take(&mut rest)?;
        let b = take(&mut rest)?;
        ops.push(match kind {
            b'P' => ChangeOp::Put { key: a, value: b },
            b'D' => ChangeOp::Delete { key: a },
            b'R' => ChangeOp::DeleteRange { start: a, end: b },
            _ => return None,
        });
    }
    (!ops.is_empty()).then_some((first, ops))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_round_trip() {
        let ops = vec![
            ChangeOp::Put {
                key: b"mk".to_vec(),
                value: b"v".to_vec(),
            },
            ChangeOp::Delete { key: b"".to_vec() },
            ChangeOp::DeleteRange {
                start: b"a".to_vec(),
                end: b"b".to_vec(),
            },
        ];
        let mut out = Vec::new();
        group(&mut out, 42, &ops);
        assert_eq!(out[0], GROUP);
        let len = u64::from_be_bytes(out[1..9].try_into().unwrap()) as usize;
        assert_eq!(len, out.len() - HEADER);
        assert_eq!(decode_group(&out[HEADER..]), Some((42, ops)));
        assert_eq!(decode_group(&out[HEADER..out.len() - 1]), None);
    }
}
