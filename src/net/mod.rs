//! The connection kit: the TCP plumbing of the engine's three ports (feed,
//! subscribers, orders), written once below them, TLS included (the
//! subscriber and order ports; the admin endpoint uses [`Stream`] too).
//!
//! A port's event loop is a *handler* over this kit. The kit owns what every
//! port does the same way; the handler owns only its protocol and its stage
//! (the feed: parse, intern, slot write; the gateway: orders and replies;
//! the publisher: RESP commands, subscriptions, its conflating output).
//!
//! | piece | file | owns |
//! |---|---|---|
//! | [`Listener`] | `listener.rs` | the accept loop, the per-port limit and its refusal line, `TCP_NODELAY`/`SO_SNDBUF`, the accepted/refused/open counters, the port's TLS ([`Listener::with_tls`]) |
//! | [`Conns`], [`Conn`], [`ConnId`] | `conns.rs` | the slab of open sockets, registered in the poller under `Token(key)`; ids that survive slab reuse |
//! | [`Stream`], [`TlsPort`] | `stream.rs` | a connection's bytes, plaintext or TLS (rustls): one `Read`/`Write` for every handler, the raw TCP socket still reachable, plaintext on a TLS port refused with the port's line |
//! | [`AuthGate`] | `auth_gate.rs` | the token, the queue of authentication deadlines and its expiry, the `AUTH <token>` first-line step |
//! | [`LineReader`] | `lines.rs` | the bounded read buffer with line hand-off (feed, orders) |
//! | [`ReadBuf`] | `read_buf.rs` | the bounded read buffer with frame hand-off (RESP) |
//! | [`WriteBuf`] | `write_buf.rs` | the bounded write buffer: high-water mark, non-blocking flush |
//! | [`TurnLists`], [`KeyList`] | `fairness.rs` | ready/turn fairness; the flush and attention lists |
//! | [`LoopCtx`] | `loop_ctx.rs` | the poller, counters, recorder, clock and stop flag a loop thread holds |
//! | [`GuestLoop`] | `guest.rs` | a loop run inside another's thread (the feed in the publisher's, when the engine has one core) |
//!
//! Buffers are [`bytes::BytesMut`], allocated per connection once; nothing
//! here allocates per message. Socket idioms below this (`accept_one`,
//! `poll_events`) stay in [`crate::sys::net`], which the admin endpoint and
//! the tools share.
//!
//! # A handler
//!
//! A handler keeps a [`Listener`], a `Conns<S>` of its own per-connection
//! state `S`, an [`AuthGate`], a [`TurnLists`] and a [`LoopCtx`], and runs
//! this turn:
//!
//! 1. wait: `ctx.wait(&mut events, timeout, "feed")`, with a zero timeout
//!    while `turns.has_ready()`;
//! 2. `turns.begin()`; for each event: [`LISTENER`] → `listener.accept_all`
//!    (its closure builds `S` and calls `auth.arm(id, now)`), a connection
//!    → `turns.reported(key)` (and, for a writable event, mark it for flush
//!    on a [`KeyList`]);
//! 3. `while let Some(key) = turns.next_in_turn()`: read the connection at most
//!    `READS_PER_TURN` times; if it may hold more, `turns.again(key)`; then
//!    `turns.end()`;
//! 4. `while let Some(id) = auth.next_expired(now)`: if
//!    `conns.get_live(id)` is still not `authed`, answer and close it;
//! 5. flush what was marked; flush the recorder.
//!
//! ```ignore
//! for ev in events.iter() {
//!     match ev.token() {
//!         LISTENER => {
//!             let (auth, clock) = (&mut self.auth, self.ctx.clock);
//!             let authed = !auth.required();
//!             self.listener.accept_all(self.ctx.registry(), &mut self.conns,
//!                 counters, authed, |id| { auth.arm(id, clock.now_ns()); MyState::new() });
//!         }
//!         WAKER => {}
//!         Token(key) => self.turns.reported(key),
//!     }
//! }
//! while let Some(key) = self.turns.next_in_turn() {
//!     let Some(conn) = self.conns.get_mut(key) else { continue };
//!     // read conn.stream into conn.state's LineReader / ReadBuf, handle it,
//!     // append replies to a WriteBuf; self.turns.again(key) if not drained
//! }
//! self.turns.end();
//! ```
//!
//! Three handlers use it: the feed (`feed/ingest.rs`), the order gateway
//! (`order/gateway/conns.rs`) and the publisher (`publish/`). Read the feed
//! and the gateway first: the feed writes straight to its socket (it only
//! ever answers `AUTH`), the gateway appends replies to a [`WriteBuf`] per
//! connection, marks the connection on a [`KeyList`] and flushes the list
//! twice a turn: after reading (the answers of the lines read) and at the
//! end (`ACK`s and the workers' replies).
//!
//! # The publisher, the RESP handler
//!
//! The publisher (`publish/publisher.rs` for the loop) speaks RESP and
//! differs from the two line handlers where its protocol does:
//!
//! * **Port** (`publish/publisher.rs`, `publish/intake.rs`): its
//!   [`PortPolicy`] refuses with Redis's `-ERR max number of clients
//!   reached\r\n` and logs refusals, sets `sndbuf` from `--sub-sndbuf`,
//!   wants `READABLE | WRITABLE`; [`Listener::local_addr`] gives `INFO`'s
//!   address. Each admitted
//!   connection gets the publisher's own client id (`CLIENT ID`, from 1)
//!   and its deadline armed with [`AuthGate::arm`].
//! * **Input** (`publish/input.rs`): a [`ReadBuf`] per session, served on
//!   its readable event until `WouldBlock` (no [`TurnLists`]: the session's
//!   output mark is its limit); complete commands are parsed from
//!   `filled()` and `consume`d; `BufferFull` is a command larger than the
//!   64 KiB buffer, answered as a protocol error before the close.
//! * **Auth**: `AUTH`/`HELLO … AUTH` are RESP commands, checked against
//!   [`AuthGate::token`]; the handler mirrors the result in
//!   [`Conn::authed`]. Expiry is still [`AuthGate::next_expired`]
//!   (`publish/intake.rs`).
//! * **Output** (`publish/flush.rs`): a conflating buffer
//!   (`publish/outbuf.rs`) on top of a [`WriteBuf`]
//!   ([`WriteBuf::room_for`] to append in place,
//!   [`WriteBuf::write_counted`] for its per-write figures): past
//!   `--sub-hwm` it keeps one pending value per symbol instead of only
//!   pausing reads. A [`KeyList`] flush list is walked as a snapshot
//!   (`take`/`restore`: nothing is marked during the walk).
//! * **Slow subscribers** (`publish/delivery.rs`, the revisit): a second
//!   [`KeyList`], the attention list, walked in place with
//!   [`KeyList::key`] and [`KeyList::swap_remove`] (a key marked during
//!   the walk is visited in the same walk); a session drained under half
//!   its mark gets the latest value of each symbol it missed, then its
//!   input is read again.
//!
//! # Invariants
//!
//! * **Bounds.** A port holds at most `max_conns` connections; the next
//!   is refused with the port's line and counted. Read buffers have a fixed
//!   size; a write buffer past its mark stops its connection being read.
//! * **Fairness** (the line handlers, through [`TurnLists`]). A connection
//!   is served at most once per turn, at most `READS_PER_TURN` reads; one
//!   put back is served next turn without a new event.
//! * **Ids.** A [`ConnId`] names one connection for the engine's life (slab
//!   key + generation); anything that outlives a connection (a deadline, an
//!   order's reply) finds it through [`Conns::get_live`] or not at all.
//! * **Time** comes from the loop's clock as `now_ns` arguments, so tests
//!   drive deadlines without waiting.

mod auth_gate;
mod conns;
mod fairness;
mod guest;
pub mod lines;
mod listener;
mod loop_ctx;
mod read_buf;
mod stream;
#[cfg(test)]
pub(crate) mod test_util;
mod write_buf;

pub(crate) use auth_gate::{AuthGate, AuthStep};
pub(crate) use conns::{Conn, ConnId, Conns};
pub(crate) use fairness::{KeyList, TurnLists};
pub(crate) use guest::GuestLoop;
pub(crate) use lines::{LineEvent, LineReader};
pub(crate) use listener::{ConnCounters, Listener, PortPolicy, LISTENER};
pub(crate) use loop_ctx::LoopCtx;
pub(crate) use read_buf::{ReadBuf, ReadOutcome};
pub(crate) use stream::{Stream, TlsPort};
pub(crate) use write_buf::{Flushed, WriteBuf};
