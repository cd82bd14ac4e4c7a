//! Unit tests of the fan-out step over plain buffers (no socket): who gets
//! which frame, the per-subscriber conflation, the exact accounting, and a
//! property test against a simple model.

use super::*;
use crate::model::decimal::Decimal;
use crate::model::tick::Quote;
use crate::protocol::resp::framing::Proto;

fn value(seq: u64) -> SlotValue {
    SlotValue {
        quote: Quote {
            ts_ns: 1_701_388_800_000_000_000 + seq,
            bid: Decimal::new(108_512, 5),
            ask: Decimal::new(108_515, 5),
            bid_qty: Decimal::new(1_000_000, 0),
            ask_qty: Decimal::new(1_500_000, 0),
        },
        seq,
        recv_wall_ns: 7,
        recv_mono_ns: 5,
    }
}

/// A received frame: its first byte (`*` or `>`), kind, channel (and
/// pattern) and the payload's sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Frame {
    first: u8,
    parts: Vec<Vec<u8>>,
}

impl Frame {
    fn kind(&self) -> &[u8] {
        &self.parts[0]
    }
    fn channel(&self) -> &[u8] {
        &self.parts[self.parts.len() - 2]
    }
    fn seq(&self) -> u64 {
        let payload = std::str::from_utf8(&self.parts[self.parts.len() - 1]).unwrap();
        payload.split(',').nth(6).unwrap().parse().unwrap()
    }
}

/// Parses a run of RESP arrays/pushes of bulk strings.
fn frames(mut b: &[u8]) -> Vec<Frame> {
    fn line(b: &mut &[u8]) -> Vec<u8> {
        let end = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let l = b[..end].to_vec();
        *b = &b[end + 2..];
        l
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let head = line(&mut b);
        let first = head[0];
        assert!(first == b'*' || first == b'>', "not a frame: {head:?}");
        let n: usize = std::str::from_utf8(&head[1..]).unwrap().parse().unwrap();
        let parts = (0..n)
            .map(|_| {
                let h = line(&mut b);
                assert_eq!(h[0], b'$');
                let len: usize = std::str::from_utf8(&h[1..]).unwrap().parse().unwrap();
                let v = b[..len].to_vec();
                assert_eq!(&b[len..len + 2], b"\r\n");
                b = &b[len + 2..];
                v
            })
            .collect();
        out.push(Frame { first, parts });
    }
    out
}

/// Writes everything a buffer holds; returns the bytes.
fn drain(buf: &mut SubscriberBuffer) -> Vec<u8> {
    let mut got = Vec::new();
    let (_, blocked) = buf.write_to(&mut got, |_| {}).unwrap();
    assert!(!blocked);
    got
}

/// The length of one `message` frame of EURUSD with `value(seq)`.
fn frame_len(seq: u64) -> usize {
    let mut f = Fanout::new(1);
    f.learn(b"EURUSD");
    f.encode(0, b"EURUSD", &value(seq));
    crate::protocol::resp::MESSAGE_PREFIX.len() + f.latest()[0].len()
}

#[test]
fn the_fast_subscriber_gets_every_update_and_the_slow_one_the_latest_later() {
    let mut routes = Routes::new();
    routes.add_symbol(0, b"EURUSD");
    routes.subscribe(0, b"EURUSD"); // fast
    routes.subscribe(1, b"EURUSD"); // slow: room for two frames
    let mut fan = Fanout::new(4);
    fan.learn(b"EURUSD");
    let mut outs = PlainOutlets::new(2, 1 << 20, 4);
    outs.buffers[1] = SubscriberBuffer::new(2 * frame_len(9) + 1, 4);
    let mut fast = Vec::new();
    let (mut published, mut conflated) = (0u64, 0u64);
    // Slot values as the publisher takes them: 1..=3, then 5 (4 was
    // overwritten in the slot), 6, 9.
    for seq in [1, 2, 3, 5, 6, 9] {
        let p = fan
            .publish(0, &value(seq), &routes, &mut outs, seq)
            .unwrap();
        published += 1;
        conflated += p.conflated;
        fast.extend(drain(&mut outs.buffers[0]));
    }
    assert_eq!(published + conflated, 9, "accounting is exact");
    assert_eq!(conflated, 3);
    let got: Vec<u64> = frames(&fast).iter().map(Frame::seq).collect();
    assert_eq!(got, vec![1, 2, 3, 5, 6, 9], "the fast one got every update");
    // The slow one holds two frames, asked for room before the third, and
    // marked the symbol pending once.
    assert!(outs.slow[1] && !outs.slow[0]);
    assert!(outs.room_asked[1] >= 1);
    assert_eq!(outs.buffers[1].stats.conflations, 4);
    assert_eq!(outs.buffers[1].stats.slow_episodes, 1);
    let mut slow = drain(&mut outs.buffers[1]);
    assert_eq!(fan.refill(1, &mut outs.buffers[1], &routes), 1);
    slow.extend(drain(&mut outs.buffers[1]));
    let got: Vec<u64> = frames(&slow).iter().map(Frame::seq).collect();
    assert_eq!(
        got,
        vec![1, 2, 9],
        "the slow one got the latest value later"
    );
    assert_eq!(outs.buffers[1].pending_len(), 0);
}

#[test]
fn a_throttled_subscriber_gets_one_update_per_window_the_latest_when_it_opens() {
    let mut routes = Routes::new();
    routes.add_symbol(0, b"EURUSD");
    routes.add_symbol(1, b"GBPUSD");
    routes.subscribe(0, b"EURUSD"); // uncapped
    routes.subscribe(1, b"EURUSD"); // one update per second, channel…
    let mut matched = Vec::new();
    routes.psubscribe(1, b"EUR*", &mut matched); // …and pattern
    routes.subscribe(1, b"GBPUSD");
    let mut fan = Fanout::new(4);
    fan.learn(b"EURUSD");
    fan.learn(b"GBPUSD");
    let mut outs = PlainOutlets::new(2, 1 << 20, 4);
    outs.throttles[1].set_rate(1.0, 0);
    let mut capped = Vec::new();
    let mut held = 0;
    for seq in 1..=5 {
        outs.window_now_ns = seq * 1_000_000; // all inside window 0
        let p = fan
            .publish(0, &value(seq), &routes, &mut outs, seq)
            .unwrap();
        held += p.delivered.throttled;
        fan.publish(1, &value(seq), &routes, &mut outs, seq);
        capped.extend(drain(&mut outs.buffers[1]));
    }
    assert_eq!(frames(&drain(&mut outs.buffers[0])).len(), 5, "uncapped");
    let got: Vec<(Vec<u8>, u64)> = frames(&capped)
        .iter()
        .map(|f| (f.kind().to_vec(), f.seq()))
        .collect();
    // Both deliveries of EURUSD's first update go together; GBPUSD has its
    // own window.
    assert_eq!(
        got,
        vec![
            (b"message".to_vec(), 1),
            (b"pmessage".to_vec(), 1),
            (b"message".to_vec(), 1)
        ]
    );
    assert_eq!(held, 1, "held once, then conflated while pending");
    assert!(outs.slow[1], "put on the attention list");
    assert_eq!(
        outs.buffers[1].stats.slow_episodes, 0,
        "a hold is not a slow episode"
    );
    // Still inside the window: the refill sends nothing.
    let t = (&mut outs.throttles[1], 999_000_000);
    assert_eq!(
        fan.refill_ordered(
            1,
            &mut outs.buffers[1],
            &routes,
            PendingOrder::Fifo,
            0,
            Some(t)
        ),
        0
    );
    // The window opened: the latest value of each symbol, both routes.
    let t = (&mut outs.throttles[1], 1_000_000_000);
    assert_eq!(
        fan.refill_ordered(
            1,
            &mut outs.buffers[1],
            &routes,
            PendingOrder::Fifo,
            0,
            Some(t)
        ),
        3
    );
    let got: Vec<u64> = frames(&drain(&mut outs.buffers[1]))
        .iter()
        .map(Frame::seq)
        .collect();
    assert_eq!(got, vec![5, 5, 5]);
    // And that used the new window: the next update is held again.
    outs.window_now_ns = 1_500_000_000;
    let p = fan.publish(0, &value(6), &routes, &mut outs, 6).unwrap();
    assert_eq!(p.delivered.throttled, 1);
    assert_eq!(outs.buffers[1].buffered(), 0);
}

#[test]
fn a_value_taken_already_is_not_published_again() {
    let mut routes = Routes::new();
    routes.add_symbol(0, b"EURUSD");
    routes.subscribe(0, b"EURUSD");
    let mut fan = Fanout::new(1);
    fan.learn(b"EURUSD");
    let mut outs = PlainOutlets::new(1, 1 << 20, 1);
    assert!(fan.publish(0, &value(4), &routes, &mut outs, 0).is_some());
    assert_eq!(fan.publish(0, &value(4), &routes, &mut outs, 0), None);
    assert_eq!(fan.publish(0, &value(3), &routes, &mut outs, 0), None);
    assert_eq!(frames(&drain(&mut outs.buffers[0])).len(), 1);
}

#[test]
fn each_subscription_gets_one_frame_of_one_encoding() {
    let mut routes = Routes::new();
    routes.add_symbol(0, b"EURUSD");
    routes.add_symbol(1, b"USDJPY");
    let mut m = Vec::new();
    routes.subscribe(0, b"EURUSD");
    routes.psubscribe(0, b"EUR*", &mut m); // channel + pattern
    routes.psubscribe(1, b"EUR*", &mut m); // pattern only
    routes.psubscribe(1, b"*USD", &mut m); // a second matching pattern
    let mut fan = Fanout::new(2);
    fan.learn(b"EURUSD");
    fan.learn(b"USDJPY");
    let mut outs = PlainOutlets::new(2, 1 << 20, 2);
    let p = fan.publish(0, &value(1), &routes, &mut outs, 0).unwrap();
    assert_eq!(p.delivered.frames, 4);
    fan.publish(1, &value(1), &routes, &mut outs, 0).unwrap();
    let a = frames(&drain(&mut outs.buffers[0]));
    let b = frames(&drain(&mut outs.buffers[1]));
    let kinds = |fs: &[Frame]| -> Vec<(Vec<u8>, Vec<u8>)> {
        fs.iter()
            .map(|f| (f.kind().to_vec(), f.channel().to_vec()))
            .collect()
    };
    // Redis sends a client one frame per matching subscription: `message`
    // for the channel, `pmessage` for each pattern.
    assert_eq!(
        kinds(&a),
        vec![
            (b"message".to_vec(), b"EURUSD".to_vec()),
            (b"pmessage".to_vec(), b"EURUSD".to_vec()),
        ]
    );
    assert_eq!(
        kinds(&b),
        vec![
            (b"pmessage".to_vec(), b"EURUSD".to_vec()),
            (b"pmessage".to_vec(), b"EURUSD".to_vec()),
        ]
    );
    assert_eq!(
        (a[1].parts[1].as_slice(), b[1].parts[1].as_slice()),
        (&b"EUR*"[..], &b"*USD"[..])
    );
    // The tail is the same bytes for everyone: encoded once.
    assert!(a
        .iter()
        .chain(&b)
        .all(|f| f.parts.last() == a[0].parts.last()));
}

#[test]
fn resp2_and_resp3_subscribers_differ_only_in_the_prefix() {
    let mut routes = Routes::new();
    routes.add_symbol(0, b"EURUSD");
    let mut m = Vec::new();
    routes.subscribe(0, b"EURUSD");
    routes.subscribe(1, b"EURUSD");
    routes.psubscribe(1, b"EUR*", &mut m);
    routes.set_proto(1, Proto::Resp3);
    let mut fan = Fanout::new(1);
    fan.learn(b"EURUSD");
    let mut outs = PlainOutlets::new(2, 1 << 20, 1);
    fan.publish(0, &value(1), &routes, &mut outs, 0).unwrap();
    let r2 = drain(&mut outs.buffers[0]);
    let r3 = drain(&mut outs.buffers[1]);
    assert!(r2.starts_with(b"*3\r\n$7\r\nmessage\r\n"));
    assert!(r3.starts_with(b">3\r\n$7\r\nmessage\r\n"));
    assert_eq!(
        &r2[1..],
        &r3[1..r2.len()],
        "same frame after the first byte"
    );
    let f3 = frames(&r3);
    assert_eq!(f3.len(), 2);
    assert_eq!((f3[1].first, f3[1].kind()), (b'>', &b"pmessage"[..]));
}

#[test]
fn a_subscriber_without_room_is_asked_to_make_room_only_past_the_mark() {
    let mut routes = Routes::new();
    routes.add_symbol(0, b"EURUSD");
    routes.subscribe(0, b"EURUSD");
    let mut fan = Fanout::new(1);
    fan.learn(b"EURUSD");
    let mut outs = PlainOutlets::new(1, frame_len(1) + 1, 1);
    fan.publish(0, &value(1), &routes, &mut outs, 0).unwrap();
    assert_eq!(outs.room_asked[0], 0);
    fan.publish(0, &value(2), &routes, &mut outs, 0).unwrap();
    assert_eq!(outs.room_asked[0], 1);
    // Pending now: later offers only count, they ask for no room.
    fan.publish(0, &value(3), &routes, &mut outs, 0).unwrap();
    assert_eq!(outs.room_asked[0], 1);
}

mod model {
    //! Property: whatever the interleaving of updates and partial drains,
    //! (1) `published + conflated` equals the last sequence number taken
    //! per symbol, (2) no subscriber ever receives an older value of a
    //! symbol after a newer one, (3) once drained and refilled, each
    //! subscriber's last frame of each symbol carries that symbol's latest
    //! value, and (4) a subscriber with room gets every published update.

    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Step {
        /// Symbol, how many slot writes before the take (≥ 1).
        Update(u8, u8),
        /// Subscriber, bytes its socket takes now.
        Drain(u8, u16),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0u8..3, 1u8..4).prop_map(|(s, n)| Step::Update(s, n)),
            1 => (0u8..3, 0u16..400).prop_map(|(s, n)| Step::Drain(s, n)),
        ]
    }

    /// A socket that takes `room` bytes.
    struct Socket<'a> {
        got: &'a mut Vec<u8>,
        room: usize,
    }

    impl std::io::Write for Socket<'_> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            let n = b.len().min(self.room);
            self.room -= n;
            self.got.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    proptest! {
        #[test]
        fn fanout_matches_the_model(steps in proptest::collection::vec(step(), 1..120)) {
            const NAMES: [&[u8]; 3] = [b"EURUSD", b"GBPUSD", b"USDJPY"];
            let mut routes = Routes::new();
            let mut fan = Fanout::new(3);
            for (i, n) in NAMES.iter().enumerate() {
                routes.add_symbol(i as SymbolId, n);
                fan.learn(n);
            }
            // 0: everything, room for all; 1: everything, small; 2: pattern *USD, small.
            let mut m = Vec::new();
            for n in NAMES {
                routes.subscribe(0, n);
                routes.subscribe(1, n);
            }
            routes.psubscribe(2, b"*USD", &mut m);
            let mut outs = PlainOutlets::new(3, 1 << 20, 3);
            let small = 2 * frame_len(100) + 10;
            outs.buffers[1] = SubscriberBuffer::new(small, 3);
            outs.buffers[2] = SubscriberBuffer::new(small, 3);
            let mut got = vec![Vec::new(); 3];
            let mut slot_seq = [0u64; 3];
            let (mut published, mut conflated) = ([0u64; 3], [0u64; 3]);
            let mut taken = vec![Vec::new(); 3];
            for s in steps {
                match s {
                    Step::Update(sym, writes) => {
                        let sym = sym as usize;
                        slot_seq[sym] += writes as u64;
                        let p = fan
                            .publish(sym as SymbolId, &value(slot_seq[sym]), &routes, &mut outs, 0)
                            .expect("a newer value is always published");
                        published[sym] += 1;
                        conflated[sym] += p.conflated;
                        taken[sym].push(slot_seq[sym]);
                    }
                    Step::Drain(sub, room) => {
                        let sub = sub as usize;
                        let mut sock = Socket { got: &mut got[sub], room: room as usize };
                        outs.buffers[sub].write_to(&mut sock, |_| {}).unwrap();
                        if outs.buffers[sub].buffered() <= outs.buffers[sub].hwm() / 2 {
                            fan.refill(sub, &mut outs.buffers[sub], &routes);
                        }
                    }
                }
            }
            for (sub, bytes) in got.iter_mut().enumerate() {
                loop {
                    bytes.extend(drain(&mut outs.buffers[sub]));
                    fan.refill(sub, &mut outs.buffers[sub], &routes);
                    if outs.buffers[sub].buffered() == 0 {
                        break;
                    }
                }
            }
            for sym in 0..3 {
                prop_assert_eq!(published[sym] + conflated[sym], slot_seq[sym]);
            }
            for (sub, bytes) in got.iter().enumerate() {
                let mut last = [0u64; 3];
                let mut seen: [Vec<u64>; 3] = Default::default();
                for f in frames(bytes) {
                    let sym = NAMES.iter().position(|n| *n == f.channel()).unwrap();
                    prop_assert!(f.seq() > last[sym], "sub {} got {} after {}", sub, f.seq(), last[sym]);
                    last[sym] = f.seq();
                    seen[sym].push(f.seq());
                }
                for sym in 0..3 {
                    let wants = sub != 2 || NAMES[sym].ends_with(b"USD");
                    let latest = if wants { slot_seq[sym] } else { 0 };
                    prop_assert_eq!(last[sym], latest, "sub {} symbol {}", sub, sym);
                    if sub == 0 {
                        prop_assert_eq!(&seen[sym], &taken[sym]);
                    }
                }
            }
        }
    }
}
