//! Fuzz the line reader (`net::lines`, under the feed and the order gateway)
//! with arbitrary bytes in arbitrary read sizes: never panics, never grows,
//! never yields a line longer than the limit.
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;
use tickfan::net::lines::{LineEvent, LineReader};

struct Chunks<'a> {
    data: &'a [u8],
    sizes: &'a [u8],
    i: usize,
}

impl Read for Chunks<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = self.sizes.get(self.i).map_or(7, |s| *s as usize + 1);
        self.i += 1;
        let n = want.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fuzz_target!(|input: (&[u8], &[u8])| {
    let (data, sizes) = input;
    let max = 64;
    let mut r = LineReader::new(max, 256);
    let cap = r.capacity();
    let mut src = Chunks { data, sizes, i: 0 };
    loop {
        match r.read_from(&mut src) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => break,
        }
        while let Some(ev) = r.next_line() {
            match ev {
                LineEvent::Line(l) => assert!(l.len() <= max),
                LineEvent::TooLong { prefix, .. } => assert!(prefix.len() <= max),
            }
        }
        assert_eq!(r.capacity(), cap);
    }
    let _ = r.take_partial();
});
