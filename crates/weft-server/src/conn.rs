//! One client connection: read, run every complete request, write replies.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;

use crate::cmd::{self, Ctx, Session};
use crate::resp::{Args, Limits, Out, Parser};
use crate::Shared;

/// Bytes read per `read` call when no large bulk string is pending.
const READ_CHUNK: usize = 16 << 10;
/// Reply bytes that trigger a write even in the middle of a pipeline.
const OUT_HIGH_WATER: usize = 64 << 10;
/// Most bytes read ahead in one call while a large bulk string arrives.
const MAX_READ_CHUNK: usize = 4 << 20;

/// Most keys written by one coalesced group of SET/MSET requests.
const MAX_GROUP_KEYS: usize = 512;

fn flush_sets(
    shared: &Shared,
    session: &mut Session,
    out: &mut Out,
    sets: &mut Vec<Args>,
    keys: &mut usize,
) {
    if sets.is_empty() {
        return;
    }
    let mut ctx = Ctx {
        shared,
        session,
        out,
    };
    cmd::set_group(&mut ctx, sets);
    sets.clear();
    *keys = 0;
}

/// Serves `stream` until the client leaves, sends a malformed frame, idles
/// out, or the server shuts the read side down.
pub fn serve(shared: &Shared, mut stream: TcpStream, id: u64) {
    let limits = Limits {
        max_bulk: shared.config.max_bulk,
        ..Limits::default()
    };
    let max_held = shared
        .config
        .max_query_buffer
        .max(shared.config.max_bulk.saturating_add(64 << 10));
    let mut parser = Parser::new(limits);
    // buf[pos..end] holds unparsed bytes; buf[end..] is free space.
    let mut buf = vec![0u8; READ_CHUNK];
    let (mut pos, mut end) = (0usize, 0usize);
    let mut out = Out::default();
    let mut session = Session {
        id,
        ..Session::default()
    };
    // Plain SET/MSET requests waiting to be committed as one batch.
    let mut sets: Vec<Args> = Vec::new();
    let mut set_keys = 0usize;
    loop {
        let mut done = 0u64;
        let mut close = false;
        loop {
            match parser.next(&buf[..end], &mut pos) {
                Ok(Some(args)) => {
                    if cmd::is_plain_set(shared.config.max_bulk, &args) && set_keys < MAX_GROUP_KEYS
                    {
                        set_keys += args.len() / 2;
                        sets.push(args);
                        done += 1;
                        continue;
                    }
                    let mut ctx = Ctx {
                        shared,
                        session: &mut session,
                        out: &mut out,
                    };
                    if !sets.is_empty() {
                        cmd::set_group(&mut ctx, &sets);
                        sets.clear();
                        set_keys = 0;
                    }
                    if cmd::is_plain_set(shared.config.max_bulk, &args) {
                        // The group was full: this one starts the next.
                        set_keys = args.len() / 2;
                        sets.push(args);
                        done += 1;
                        continue;
                    }
                    cmd::dispatch(&mut ctx, &args);
                    done += 1;
                    if session.quit {
                        close = true;
                        break;
                    }
                    if out.buf.len() >= OUT_HIGH_WATER {
                        if stream.write_all(&out.buf).is_err() {
                            return;
                        }
                        out.buf.clear();
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    flush_sets(shared, &mut session, &mut out, &mut sets, &mut set_keys);
                    out.error(&e.to_string());
                    close = true;
                    break;
                }
            }
        }
        flush_sets(shared, &mut session, &mut out, &mut sets, &mut set_keys);
        if done > 0 {
            shared.counters.commands.fetch_add(done, Ordering::Relaxed);
        }
        if !out.buf.is_empty() {
            if stream.write_all(&out.buf).is_err() {
                return;
            }
            if out.buf.capacity() > 4 * OUT_HIGH_WATER {
                out.buf = Vec::new();
            } else {
                out.buf.clear();
            }
        }
        if close {
            linger_close(stream);
            return;
        }
        let unparsed = end - pos;
        if parser.held().saturating_add(unparsed) > max_held {
            out.error("ERR Protocol error: query buffer limit exceeded");
            let _ = stream.write_all(&out.buf);
            linger_close(stream);
            return;
        }
        // Make room: move unparsed bytes to the front, size the buffer for
        // a pending bulk string (bounded by the parser's limits), shrink it
        // back after a large request.
        if pos > 0 {
            buf.copy_within(pos..end, 0);
            end -= pos;
            pos = 0;
        }
        let want = parser.pending_bulk().map_or(READ_CHUNK, |n| {
            n.saturating_sub(end).clamp(READ_CHUNK, MAX_READ_CHUNK)
        });
        if buf.len() - end < want {
            buf.resize(end + want, 0);
        } else if end == 0 && buf.len() > 4 * MAX_READ_CHUNK {
            buf = vec![0u8; READ_CHUNK];
        }
        match stream.read(&mut buf[end..]) {
            Ok(0) => return,
            Ok(n) => end += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Idle timeout (WouldBlock/TimedOut) or a broken connection.
            Err(_) => return,
        }
    }
}

/// Closes after a final reply so that the client can read it: shuts our
/// side down, then discards what the client is still sending (bounded in
/// bytes and time). Closing with unread input would make the kernel send a
/// reset, which may destroy the reply before the client reads it.
fn linger_close(mut stream: TcpStream) {
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(200)));
    let mut sink = [0u8; 16 << 10];
    let mut left: usize = 4 << 20;
    while left > 0 {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}
