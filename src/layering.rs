//! Tests of the direction of dependencies, as `lib.rs` draws it: the
//! top level is layered ([`TOP_LEVEL`]: a module imports only modules
//! below it, with no exception); within and beside that order, the
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

/// The top-level modules `path` (`rest` after one `crate::`) names: one,
/// or each of a group (`crate::{feed::parse, slots::Slots}`).
fn top_modules(rest: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)];
    };
    // The first segment of each item at depth 1 of the group.
    let mut names = vec![ident(group)];
    let mut depth = 1;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 1 => break,
            '}' => depth -= 1,
            ',' if depth == 1 => names.push(ident(&group[i + 1..])),
            _ => {}
        }
    }
    names.retain(|n| !n.is_empty());
    names
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

/// The top-level modules in layers, bottom to top. A module may import
/// only modules listed before it (in a lower layer, or earlier in its own);
/// an import of one listed after it is upward and fails
/// [`the_top_level_imports_only_downward`], with no allowed exception.
/// The order is what the code does:
///
/// ```text
///  tests        order_round_trips, layering        (test-only, above all)
///  wiring       config → cli → runtime              flags → validated configs → threads
///  stages       feed → cluster → publish; order     cluster reads the feed's tick parser,
///                                                   the publisher hands off to the backbone;
///                                                   the order side imports none of them
///  services     logging → metrics → error, retry, dlq, net → admin, bridge
///  leaves       sys, tls, auth, idle, rate_limit,   the OS, settings, the limiter,
///               symbols, protocol → client,         the codecs (server, client),
///               slots, stale                        the rooms the stages share
///  vocabulary   model
/// ```
///
/// Config sits above the stages because it assembles their configs
/// (`order::config`, `cluster::role`, `publish::pending_order`); what the
/// OS layer needs of a flag lives in `sys/` (`sys::affinity::PinPlan`).
/// The client side sits beside the server's codec: the engine never uses
/// it, and the tests that pair it with the order gateway's writers live
/// above both (`order_round_trips`).
const TOP_LEVEL: &[(&str, &[&str])] = &[
    ("vocabulary", &["model"]),
    (
        "leaves",
        &[
            "sys",
            "tls",
            "auth",
            "idle",
            "rate_limit",
            "symbols",
            "protocol",
            "client",
            "slots",
            "stale",
        ],
    ),
    (
        "services",
        &[
            "logging", "metrics", "error", "retry", "dlq", "net", "admin", "bridge",
        ],
    ),
    ("stages", &["feed", "cluster", "publish", "order"]),
    ("wiring", &["config", "cli", "runtime"]),
    ("tests", &["order_round_trips", "layering"]),
];

/// [`TOP_LEVEL`] flattened, bottom first: a module's rank is its index.
fn ranks() -> Vec<&'static str> {
    TOP_LEVEL
        .iter()
        .flat_map(|(_, m)| m.iter().copied())
        .collect()
}

/// The Rust files of top-level module `m`: `src/m.rs` and the folder
/// `src/m/`, whichever exist.
fn module_places(m: &str) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    [format!("src/{m}.rs"), format!("src/{m}")]
        .into_iter()
        .filter(|rel| src.parent().expect("crate root").join(rel).exists())
        .collect()
}

/// The upward imports of the top level: `(file:line, importer, imported)`
/// for every `crate::` path (grouped ones too) of a module in `TOP_LEVEL`
/// that names a module listed after it.
fn upward_imports() -> Vec<(String, &'static str, String)> {
    let order = ranks();
    let mut bad = Vec::new();
    for (rank, &m) in order.iter().enumerate() {
        let places = module_places(m);
        let places: Vec<&str> = places.iter().map(String::as_str).collect();
        for (at, rest) in crate_paths(&places) {
            for target in top_modules(&rest) {
                match order.iter().position(|&o| o == target) {
                    Some(t) if t > rank => bad.push((at.clone(), m, target)),
                    _ => {}
                }
            }
        }
    }
    bad
}

#[test]
fn every_top_level_module_has_one_layer() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("lib.rs");
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.split("mod ").nth(1)?;
            (l.starts_with("mod ") || l.starts_with("pub mod ") || l.starts_with("pub(crate) mod "))
                .then(|| rest.trim_end_matches(';'))
        })
        .collect();
    let order = ranks();
    for m in &declared {
        assert_eq!(
            order.iter().filter(|o| *o == m).count(),
            1,
            "{m}: declared in lib.rs, so it needs one place in TOP_LEVEL"
        );
        assert!(!module_places(m).is_empty(), "{m}: no source found");
    }
    for m in &order {
        assert!(declared.contains(m), "{m}: in TOP_LEVEL but not in lib.rs");
    }
}

#[test]
fn the_top_level_imports_only_downward() {
    let bad = upward_imports();
    assert!(
        bad.is_empty(),
        "upward imports at the top level (importer below imported in TOP_LEVEL): {bad:#?}"
    );
}

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
    // Grouped paths name each of their modules.
    assert_eq!(
        top_modules("{feed::parse, slots::{Slots, Reader}, stale};"),
        ["feed", "slots", "stale"]
    );
    assert_eq!(top_modules("publish::routes::Routes;"), ["publish"]);
    // The layered check sees an import of the stages from the wiring.
    assert!(module_places("cli").len() == 2, "cli.rs and cli/");
}
