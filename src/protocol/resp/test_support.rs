//! Helpers shared by the unit tests of the RESP codec's files.

use super::encode::{append_array_header, append_bulk};
use super::errors::ProtocolError;
use super::parse::{parse_command, Limits, Parsed};

/// Parses `input` with the default limits: the verdict and each argument's bytes.
pub(super) fn parse(input: &[u8]) -> (Parsed, Vec<Vec<u8>>) {
    parse_with(input, &Limits::default())
}

/// As [`parse`], with `limits`.
pub(super) fn parse_with(input: &[u8], limits: &Limits) -> (Parsed, Vec<Vec<u8>>) {
    let mut args = Vec::new();
    let p = parse_command(input, &mut args, limits);
    (p, args.iter().map(|r| input[r.clone()].to_vec()).collect())
}

/// `args` encoded as a multibulk request.
pub(super) fn multibulk(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    append_array_header(&mut out, args.len());
    for a in args {
        append_bulk(&mut out, a);
    }
    out
}

/// What `f` appends to an empty buffer.
pub(super) fn reply(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut out = Vec::new();
    f(&mut out);
    out
}

/// The parser's error verdict.
pub(super) fn err(consumed: usize, error: ProtocolError) -> Parsed {
    Parsed::Error { consumed, error }
}
