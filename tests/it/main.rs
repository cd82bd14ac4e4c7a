//! Integration tests: one binary, every test over real loopback sockets
//! against an engine started on ephemeral ports.
//!
//! Modules, by behaviour:
//! - `fanout`: ticks in → latest value per symbol out; snapshot; patterns; unsubscribe
//! - `poison`: bad lines dead-lettered and counted while good ones flow
//! - `feed_conflation`: a flood fills the feed's reads: the newest line per symbol of each read applied, the rest counted as conflated, poison still poison
//! - `shutdown`: SIGTERM ends an ingest and an edge whose NATS server is gone (exit 0); a venue that never answers is cut at the stop deadline (exit 4) with every ACKed order journaled and known after a restart; a venue that answers: exit 0, every order ended in the journal
//! - `slow_subscriber`: a subscriber that never reads does not hold up the others
//! - `sub_control`: `TICKFAN.THROTTLE` caps per symbol and per byte (simulated window clock), never reorders; `TICKFAN.SINCE` fills a gap exactly or names the oldest held seq; bad input

//! - `freshness`: a reader with a small receive buffer at a fixed byte rate is paced by its drain rate (`--sub-max-lag`); a normal subscriber gets everything; a reader with the OS-default receive buffer holds far less than that buffer in its own kernel (its advertised window counted)
//! - `flush_gap`: `--sub-flush-gap`: updates within the gap of the last flush go out together (at most two values of a symbol per flush), the last value always arrives, an update right after a flush is not held for a later one
//! - `keeping_up`: a reader that stops reading for 200 ms is paced, and once it reads at full speed again is let go and gets every update
//! - `protocol`: replies byte for byte like a real `redis-server` (RESP2 and RESP3); `redis-cli` drives the engine
//! - `clients`: redis-py, ioredis and node-redis with their default options: subscribe, snapshot, live, reconnect
//! - `recorded_data`: the real recorded ticks in `../shared/data/`, every line accounted for
//! - `cli`: flags, exit codes, clap's errors, help headings, the banner, JSON logs
//! - `cluster`: the NATS backbone: 3 real `nats-server`s, ingests and edges; last values, globs, `kill -9` of a server / an edge / the active ingest of an A/B pair, garbage on the backbone
//! - `one_host`: the one-host scale-out example of the book (`docs/src/scale-out.md`) as written: nats-server, an ingest and an edge in one working directory (default `--data-dir`); only the ingest takes orders and locks it; a replayed tick reaches the edge's subscriber
//! - `partition`: one edge partitioned from the NATS cluster (network namespaces, root): stale, still serving, recovered
//! - `data_dir`: one engine per `--data-dir`: a second one on it exits 2 with one line naming the directory, the holder's pid and the flag; the first keeps serving
//! - `cli_env`: `TICKFAN_<FLAG>` variables; command line > environment > `--config` file > default
//! - `tools`: gen, replay, subscribe, report and demo as an operator runs them
//! - `replay_formats`: replay of vendor files (Databento's DBN samples, a Tardis quotes sample): quotes the engine takes, refusals naming the schema, `--format`/`--ts`/`--symbol-map`/`--speed`, bad input named and skipped or stopped at, memory flat on a stream from a pipe
//! - `tool_flags`: `--to localhost:PORT`, zero durations refused, `--bridge` errors that name the key and its forms
//! - `tools_token`: replay, subscribe and orders with `--token-file` against a secured engine (and a Redis with `requirepass`)
//! - `vs_redis`: the benchmark's tool modes against a real `redis-server` and the raw forwarder
//! - `orders_acct`: per-account ordering (`acct=`): one key's orders in admission order, one at a time (retries, restart), other keys pass, cancel of a follower, bad acct, full key table
//! - `orders_admission`: bounded queue and SYSTEM_BUSY under overload (answered while the journal sync is held), malformed lines, duplicates; a 25,000-order burst on one connection does not hold another's PING
//! - `orders_capacity`: elastic workers grow under a backlog and shrink after idle (a log line per step, the capacity interval line); a venue's `max_inflight` never exceeded; capacity gauges; bad bounds
//! - `orders_retry`: transient → delayed retry (simulated clock), permanent → DLQ, deadlines
//! - `orders_dlq`: DLQ file across a restart (and a `kill -9`, in `--data-dir` by default), replay on command (its record on disk first), answers at shutdown (deadline)
//! - `orders_venue`: the venue's exec_log across a restart (an id executes once); leases: a hung venue never holds a worker, late answers discarded
//! - `orders_crash`: STATUS after a `kill -9` restart; five `kill -9`s in a row then SIGTERM: every ACKed id terminal, DUPLICATE, executed at most once; a recovered order back to its venue, fill numbers continuing
//! - `orders_journal`: ACK after durable; `kill -9` and restart (re-queued, still duplicates); journal full
//! - `journal_faults`: a full disk (`ENOSPC` on a write or a sync): `SYSTEM_BUSY journal_full`, never an ACK, `/health` degraded, alert, orders taken again once a probe finds room, nothing ACKed lost across a restart (injected, and on a real tmpfs); a stalled sync: the queue bounded, ticks flowing, one terminal reply per order
//! - `orders_tool`: `tickfan orders` against a running engine
//! - `orders_lanes`: small orders never wait behind a large one; no lane starves; chunking
//! - `orders_status`: `STATUS <id>` from any connection, after the sender left, past the retention, malformed
//! - `orders_control`: CANCEL (queued, retry wait, at a bridge, across a restart), the kill switch (halt, resume, cancel=queued, --start-halted), the retry quota
//! - `orders_sequencing`: out-of-order and duplicated fills in order once; the gap timer
//! - `faults`: misbehaving peers (10 MB lines, idle peers, floods, vanishing and trickling subscribers)
//! - `accounting`: after mixed traffic every tick, update and order is counted exactly once
//! - `sigstop`: `tickfan serve` stopped 5.5 s (`SIGSTOP`) under load and continued: subscribers catch up to the latest values, every order ends exactly once, it goes on serving
//! - `health`: a thread that panics or stalls: `/health` 503 naming it; the binary exits 3 with one line
//! - `admin`: `/metrics` (parsed as Prometheus text), `/report`, `/health`, `/dlq`, alerts; stalled clients cannot freeze it
//! - `metrics`: `promtool check metrics` on a live scrape, `process_*`, series bounded under reconnect loops; a repeating warning written once per 10 s and counted in `tickfan_warnings_total{kind}`
//! - `deploy`: `deploy/` — the example config is the default and names every flag; `systemd-analyze verify`; `promtool` on the alert rules
//! - `readme_flags`: the book's table of `serve` flags (`docs/src/flags.md`) is `serve --help` (headings, flags, values, defaults); every chapter is in the book's SUMMARY.md; every relative link of the README and the book reaches a file and a heading; every command block of the README is in the book too
//! - `docs_commands`: every shell block of the README and the book (`docs/src/`) is run (`docs_run`: scratch directory, free ports), run by a named test, or says why not; every tickfan command in them parses with the binary's own parser (`docs_shell`: the lines cut into commands and words)
//! - `report`: exact intervals in the histogram logs at a steady rate; `report.html` in a headless browser; the demo's freshness headline shows a stalled reader that delivered latency hides
//! - `security`: tokens on every port, per-client limits (connections, subscriptions, order rate), own replies only
//! - `tls`: TLS on the subscriber, order and admin ports: redis-cli `--tls`, redis-py `ssl=True`, ioredis and node-redis with TLS, `tickfan subscribe --tls-ca`; an order over TLS; `/metrics` over https through promtool; mutual TLS; plaintext on a TLS port refused with the port's line; bad TLS flags exit 2

mod accounting;
mod admin;
mod cli;
mod cli_env;
mod clients;
mod cluster;
mod data_dir;
mod deploy;
mod docs_commands;
mod docs_run;
mod docs_shell;
mod fanout;
mod faults;
mod feed_conflation;
mod feed_thread;
mod flush_gap;
mod freshness;
mod health;
mod journal_faults;
mod keeping_up;
mod metrics;
mod nats_servers;
mod one_host;
mod orders_acct;
mod orders_admission;
mod orders_capacity;

mod orders_control;
mod orders_crash;
mod orders_dlq;
mod orders_journal;
mod orders_lanes;
mod orders_retry;
mod orders_sequencing;
mod orders_status;
mod orders_tool;
mod orders_venue;
mod partition;
mod poison;
mod protocol;
mod readme_flags;
mod recorded_data;
mod replay_formats;
mod report;
mod security;
mod shutdown;
mod sigstop;
mod slow_subscriber;
mod sub_control;
mod tls;
mod tool_flags;
mod tools;
mod tools_token;
mod util;
mod vs_redis;

// The binary's `tools/` (not a test module): its one clap parser,
// `tools::cli`, parses the docs' command lines in `docs_commands`.
#[allow(dead_code)] // reason: only `cli` is used here, the rest is the binary's
#[path = "../../tools/mod.rs"]
mod binary_tools;
