//! Tests of the direction of dependencies, as `lib.rs` draws it: the
//! vocabulary (`model/`) imports no other engine module; telemetry and the
//! OS (`metrics/`, `admin/`, `sys/`) and the connection kit (`net/`) import
//! no stage; the market-data side and the order side import nothing of each
//! other. They read the sources (folders recursively), so a new file is
//! checked without being listed here.

use std::path::{Path, PathBuf};

/// The Rust files at `rel` (a file, or a folder walked recursively).
fn rust_files(rel: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let mut files = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        if p.is_dir() {
            for entry in std::fs::read_dir(&p).expect("source folder") {
                todo.push(entry.expect("dir entry").path());
            }
        } else if p.extension().is_some_and(|e| e == "rs") {
            files.push(p);
        }
    }
    assert!(!files.is_empty(), "{rel}: no source read");
    files
}

/// Every `crate::…` path written in the code (not the comments) of the
/// Rust files at each of `places`, as `(file:line, path after "crate::")`.
fn crate_paths(places: &[&str]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for path in places.iter().flat_map(|p| rust_files(p)) {
        let text = std::fs::read_to_string(&path).expect("source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                found.push((format!("{}:{}", path.display(), n + 1), rest.to_string()));
            }
        }
    }
    found
}

/// The paths of `places` that start with one of `forbidden`.
fn imports_of(places: &[&str], forbidden: &[&str]) -> Vec<(String, String)> {
    crate_paths(places)
        .into_iter()
        .filter(|(_, p)| {
            forbidden
                .iter()
                .any(|m| p.starts_with(&format!("{m}::")) || p.starts_with(&format!("{m};")))
        })
        .collect()
}

const STAGES: &[&str] = &["feed", "order", "publish"];

#[test]
fn model_imports_no_other_engine_module() {
    let bad: Vec<_> = crate_paths(&["src/model"])
        .into_iter()
        .filter(|(_, p)| !p.starts_with("model::"))
        .collect();
    assert!(bad.is_empty(), "model/ must stay at the bottom: {bad:#?}");
}

#[test]
fn telemetry_and_the_os_import_no_stage() {
    let bad = imports_of(&["src/metrics", "src/admin", "src/sys"], STAGES);
    assert!(
        bad.is_empty(),
        "metrics/admin/sys must not import a stage: {bad:#?}"
    );
}

#[test]
fn the_connection_kit_imports_no_stage_and_no_codec() {
    let mut forbidden = STAGES.to_vec();
    forbidden.extend(["protocol", "client", "slots", "symbols"]);
    let bad = imports_of(&["src/net"], &forbidden);
    assert!(bad.is_empty(), "net/ sits below the ports: {bad:#?}");
}

#[test]
fn market_data_and_orders_import_nothing_of_each_other() {
    let md = ["src/feed", "src/publish", "src/slots.rs", "src/symbols.rs"];
    let orders = ["src/order", "src/bridge", "src/retry"];
    let bad = imports_of(&md, &["order", "bridge", "retry"]);
    assert!(
        bad.is_empty(),
        "market data imports the order side: {bad:#?}"
    );
    let bad = imports_of(&orders, &["feed", "publish", "slots", "symbols"]);
    assert!(
        bad.is_empty(),
        "the order side imports market data: {bad:#?}"
    );
}

/// The backbone (`cluster/`) sits beside the stages: it may use the shared
/// layers, the slots and symbols (an edge writes its own), the stale flags
/// and the feed's tick parser, never the publisher, the order side nor the
/// runtime; the market-data stages reach it only through the publisher's
/// hand-offs (outbox, interest board).
#[test]
fn the_backbone_imports_no_order_side_and_is_reached_only_by_the_publisher() {
    let bad = imports_of(
        &["src/cluster"],
        &["order", "bridge", "retry", "runtime", "admin"],
    );
    assert!(bad.is_empty(), "cluster/ imports too much: {bad:#?}");
    let bad: Vec<_> = crate_paths(&["src/cluster"])
        .into_iter()
        .filter(|(_, p)| {
            p.starts_with("publish::") || (p.starts_with("feed::") && !p.starts_with("feed::parse"))
        })
        .collect();
    assert!(bad.is_empty(), "cluster/ uses a stage's state: {bad:#?}");
    let bad: Vec<_> = crate_paths(&["src/feed", "src/slots.rs", "src/symbols.rs"])
        .into_iter()
        .filter(|(_, p)| p.starts_with("cluster::"))
        .collect();
    assert!(
        bad.is_empty(),
        "only the publisher hands off to the backbone: {bad:#?}"
    );
}

/// TLS settings (`tls.rs`) are a leaf like `config`: the flags build them,
/// the kit and the admin endpoint use them, and they import no engine
/// module; the client side (`client/tls.rs`) is the tools', never the
/// engine's.
#[test]
fn tls_settings_are_a_leaf_and_the_engine_uses_no_client_tls() {
    let bad: Vec<_> = crate_paths(&["src/tls.rs"]).into_iter().collect();
    assert!(bad.is_empty(), "tls.rs imports an engine module: {bad:#?}");
    let engine = [
        "src/net",
        "src/publish",
        "src/order",
        "src/admin",
        "src/feed",
    ];
    let bad: Vec<_> = crate_paths(&engine)
        .into_iter()
        .filter(|(_, p)| p.starts_with("client::tls"))
        .collect();
    assert!(bad.is_empty(), "the engine uses the client's TLS: {bad:#?}");
}

#[test]
fn the_check_sees_an_import() {
    // The scan itself works: it walks subfolders (order/gateway/…), finds
    // the imports there, and keeps code before a trailing comment.
    assert!(imports_of(&["src/metrics"], &["model"]).len() > 1);
    assert!(!imports_of(&["src/order"], &["net"]).is_empty());
    assert!(!imports_of(&["src/feed", "src/publish"], &["slots"]).is_empty());
}
