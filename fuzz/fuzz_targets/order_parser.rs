//! Fuzz the order-line parser (`order::gateway::codec`): never panics; an
//! accepted `NEW` re-encodes (through the client side's encoder,
//! `client::orders`) to a line that parses to the same order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickfan::client::orders::new_order_line;
use tickfan::order::gateway::codec::{parse_request, Request};

fuzz_target!(|data: &[u8]| {
    if let Ok(Request::New(o)) = parse_request(data) {
        let line = new_order_line(o.id, o.symbol, o.side, o.qty, o.ttl);
        let again = parse_request(line.trim_end().as_bytes()).expect("re-encoded order parses");
        assert_eq!(again, Request::New(o));
    }
});
