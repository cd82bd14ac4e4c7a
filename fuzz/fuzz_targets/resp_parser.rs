//! Fuzz the subscriber command parser: never panics, argument ranges stay
//! inside the input, and progress is always made on errors.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickfan::protocol::resp::{parse_command, Limits, Parsed};

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_args: 64,
        max_bulk_len: 4096,
        max_inline_len: 1024,
    };
    let mut args = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let input = &data[pos..];
        match parse_command(input, &mut args, &limits) {
            Parsed::Incomplete => break,
            Parsed::Command { consumed } => {
                assert!(consumed > 0 && consumed <= input.len());
                assert!(args.len() <= limits.max_args);
                for r in &args {
                    assert!(r.start <= r.end && r.end <= consumed);
                }
                pos += consumed;
            }
            Parsed::Error { consumed, .. } => {
                assert!(consumed > 0 && consumed <= input.len());
                pos += consumed;
            }
        }
    }
});
