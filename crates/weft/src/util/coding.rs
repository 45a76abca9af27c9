//! Varints (LEB128, as LevelDB's `util/coding`): the integer encoding of
//! table blocks and handles, write batches, manifest edits and value
//! pointers. Decoders never trust their input: a truncated or overlong
//! varint is `None`, and the caller names the file and offset.

/// Appends `v` as a varint.
pub(crate) fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Appends `v` as a varint.
pub(crate) fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Decodes a varint of at most 64 bits at `src[pos..]`; returns the value
/// and the position after it. `None` if truncated or overlong.
#[inline]
pub(crate) fn get_varint64(src: &[u8], pos: usize) -> Option<(u64, usize)> {
    // Most varints in a block (shared and unshared key lengths, small value
    // lengths) are one byte.
    match src.get(pos) {
        Some(&b) if b < 0x80 => Some((u64::from(b), pos + 1)),
        _ => get_varint64_long(src, pos),
    }
}

fn get_varint64_long(src: &[u8], mut pos: usize) -> Option<(u64, usize)> {
    let mut result = 0u64;
    let mut shift = 0u32;
    while shift <= 63 {
        let byte = *src.get(pos)?;
        pos += 1;
        let bits = u64::from(byte & 0x7f);
        if shift == 63 && bits > 1 {
            return None;
        }
        result |= bits << shift;
        if byte & 0x80 == 0 {
            return Some((result, pos));
        }
        shift += 7;
    }
    None
}

/// Decodes a varint of at most 32 bits; `None` if truncated or too large.
#[inline]
pub(crate) fn get_varint32(src: &[u8], pos: usize) -> Option<(u32, usize)> {
    let (v, pos) = get_varint64(src, pos)?;
    Some((u32::try_from(v).ok()?, pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_garbage() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_varint64(&mut b, v);
            assert_eq!(get_varint64(&b, 0), Some((v, b.len())));
            assert_eq!(get_varint64(&b[..b.len() - 1], 0), None);
        }
        assert_eq!(get_varint64(&[0xff; 10], 0), None);
        assert_eq!(get_varint64(&[0xff; 11], 0), None);
        let mut b = Vec::new();
        put_varint64(&mut b, u32::MAX as u64 + 1);
        assert_eq!(get_varint32(&b, 0), None);
    }
}
