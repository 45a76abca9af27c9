//! Fuzzes the RESP request parser: any bytes, fed whole or split at a point
//! chosen by the input, must parse to the same requests and the same error,
//! without panicking, within the limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_server::resp::{Limits, Parser};

fn run(chunks: &[&[u8]], limits: Limits) -> (Vec<Vec<Vec<u8>>>, Option<String>) {
    let mut p = Parser::new(limits);
    let mut buf = Vec::new();
    let mut pos = 0;
    let mut got = Vec::new();
    for c in chunks {
        buf.extend_from_slice(c);
        loop {
            match p.next(&buf, &mut pos) {
                Ok(Some(args)) => {
                    // Arrays are bounded by max_args, inline requests by their size.
                    assert!(!args.is_empty() && args.len() <= limits.max_args.max(limits.max_inline));
                    got.push(args);
                }
                Ok(None) => break,
                Err(e) => return (got, Some(e.to_string())),
            }
        }
        assert!(pos <= buf.len());
    }
    (got, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, input)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_bulk: 256,
        max_args: 64,
        max_inline: 512,
    };
    let cut = (cut as usize * input.len()) / 255;
    let whole = run(&[input], limits);
    let split = run(&[&input[..cut], &input[cut..]], limits);
    assert_eq!(whole, split);
    let bytewise: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(whole, run(&bytewise, limits));
});
