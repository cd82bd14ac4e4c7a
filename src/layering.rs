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

/// The thread folders of the order path and the venue side under the lane
/// workers; `msg` is their floor, `wiring` the one place above them.
const ORDER_FOLDERS: &[&str] = &["gateway", "lanes", "journal", "fills", "venue"];

/// The module path of a source file under `src/` (`src/order/gateway/mod.rs`
/// → `order::gateway`, `src/order/gateway/ledger.rs` →
/// `order::gateway::ledger`).
fn module_of(file: &Path) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rel = file.strip_prefix(&src).expect("a file under src/");
    let mut segs: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    segs
}

/// The identifier-and-`::` path that starts `text`, with each `{…}` group
/// expanded (`a::{b, c::d}` → `a::b`, `a::c::d`); `self` in a group is its
/// parent. Stops at the first character that is not part of a path.
fn expand_path(text: &str) -> Vec<String> {
    let head: String = text
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    let rest = &text[head.len()..];
    if !head.ends_with("::") || !rest.starts_with('{') {
        return vec![head.trim_end_matches(':').to_string()];
    }
    // The group: split its items at top-level commas.
    let (mut depth, mut items, mut start) = (0usize, Vec::new(), 1usize);
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    items.push(&rest[start..i]);
                    break;
                }
            }
            ',' if depth == 1 => {
                items.push(&rest[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for item in items {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        for tail in expand_path(item) {
            if tail == "self" {
                out.push(head.trim_end_matches(':').to_string());
            } else {
                out.push(format!("{head}{tail}"));
            }
        }
    }
    out
}

/// The inline modules (`mod tests { … }`) open at each byte of `code`, by
/// brace depth; string and character literals are skipped so their braces
/// do not count. Returns, per byte, the names of the inline modules around
/// it, outermost first.
fn inline_modules(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let (mut depth, mut open): (usize, Vec<(usize, String)>) = (0, Vec::new());
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let names: Vec<String> = open.iter().map(|(_, n)| n.clone()).collect();
        match bytes[i] {
            b'"' => {
                let mut j = i + 1;
                while j < bytes.len() && bytes[j] != b'"' {
                    j += if bytes[j] == b'\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(bytes.len());
                out.extend(std::iter::repeat_n(names, end - i));
                i = end;
                continue;
            }
            b'\'' if bytes.get(i + 2) == Some(&b'\'') => {
                out.extend(std::iter::repeat_n(names, 3));
                i += 3;
                continue;
            }
            b'{' => {
                depth += 1;
                let before = code[..i].trim_end();
                let word = before
                    .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next();
                let head = before[..before.len() - word.map_or(0, str::len)].trim_end();
                if let Some(name) = word.filter(|w| !w.is_empty() && head.ends_with("mod")) {
                    open.push((depth, name.to_string()));
                }
            }
            b'}' => {
                if open.last().is_some_and(|(d, _)| *d == depth) {
                    open.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        out.push(names);
        i += 1;
    }
    out
}

/// Every path into the crate written in the code (not the comments) of
/// `text`, a file of module `module` (`["order", "gateway", "ledger"]`),
/// resolved to a module path from the crate root: `crate::…` as written,
/// `super::…` against the module it is written in (inline `mod tests { … }`
/// included), with `use` groups expanded, also across lines. As `(line,
/// path)`.
fn paths_in(text: &str, module: &[String]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut code = String::new();
    let mut line_at = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let kept = line.split("//").next().unwrap_or("");
        line_at.extend(std::iter::repeat_n(n + 1, kept.len() + 1));
        code.push_str(kept);
        code.push('\n');
    }
    let inline = inline_modules(&code);
    for start in ["crate::", "super::"] {
        for (at, _) in code.match_indices(start) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            // A `use` group may span lines: read it without whitespace.
            let flat: String = code[at..]
                .chars()
                .take(2000)
                .filter(|c| !c.is_whitespace())
                .collect();
            let mut here = module.to_vec();
            here.extend(inline.get(at).cloned().unwrap_or_default());
            for p in expand_path(&flat) {
                let mut segs: Vec<&str> = p.split("::").collect();
                let mut base: Vec<String> = Vec::new();
                if segs[0] == "crate" {
                    segs.remove(0);
                } else {
                    let ups = segs.iter().take_while(|s| **s == "super").count();
                    base = here[..here.len().saturating_sub(ups)].to_vec();
                    segs.drain(..ups);
                }
                base.extend(segs.iter().map(|s| s.to_string()));
                found.push((line_at.get(at).copied().unwrap_or(0), base.join("::")));
            }
        }
    }
    found
}

/// [`paths_in`] over the Rust files at `places`, as `(file:line, path)`.
fn resolved_paths(places: &[&str]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for path in places.iter().flat_map(|p| rust_files(p)) {
        let text = std::fs::read_to_string(&path).expect("source file");
        for (line, p) in paths_in(&text, &module_of(&path)) {
            found.push((format!("{}:{line}", path.display()), p));
        }
    }
    found
}

/// The order folder (`order::<folder>`) a resolved path reaches, if any.
fn order_folder(path: &str) -> Option<&str> {
    let mut segs = path.split("::");
    (segs.next() == Some("order")).then_some(())?;
    segs.next()
}

/// Each thread folder of the order path (the gateway, the lanes, the
/// journal, the fills) and the venue side imports no sibling folder and not
/// the wiring: what they exchange is on the floor (`order/msg/`), and the
/// wiring connects them. The one downward edge is the lanes' use of the
/// venue side (a worker's bridge call), through `venue/mod.rs`'s surface
/// (its files are private modules, so a deeper path does not compile).
#[test]
fn order_thread_folders_import_no_sibling() {
    let mut bad = Vec::new();
    for folder in ORDER_FOLDERS {
        let place = format!("src/order/{folder}");
        for (at, p) in resolved_paths(&[&place]) {
            let Some(target) = order_folder(&p) else {
                continue;
            };
            let sibling = ORDER_FOLDERS.contains(&target) && target != *folder;
            let allowed = *folder == "lanes" && target == "venue";
            if (sibling && !allowed) || target == "wiring" {
                bad.push((at, p));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "an order thread folder imports a sibling (put what they share on order/msg/): {bad:#?}"
    );
}

/// The floor (`order/msg/`) and the settings (`order/config.rs`) sit
/// below every order folder: they import none of them, nor the wiring.
#[test]
fn the_order_floor_and_settings_import_no_order_folder() {
    let bad: Vec<_> = resolved_paths(&["src/order/msg", "src/order/config.rs"])
        .into_iter()
        .filter(|(at, p)| {
            order_folder(p).is_some_and(|t| {
                ORDER_FOLDERS.contains(&t)
                    || t == "wiring"
                    || (t == "msg" && at.contains("config.rs"))
            })
        })
        .collect();
    assert!(
        bad.is_empty(),
        "order/msg/ and order/config.rs must stay below the threads: {bad:#?}"
    );
}

#[test]
fn the_order_check_resolves_relative_and_grouped_paths() {
    // Groups expand, `super::` from a folder's file reaches its siblings,
    // and the wiring is seen to import every folder.
    assert_eq!(
        expand_path("crate::order::{lanes::{pool,routing::split},msg::order::Order};"),
        [
            "crate::order::lanes::pool",
            "crate::order::lanes::routing::split",
            "crate::order::msg::order::Order"
        ]
    );
    // `super::` counts the inline module it is written in; braces in
    // strings do not open one.
    let text = "use super::dedup::Dedup;\n\
        const X: &str = \"mod x {\";\n\
        #[cfg(test)]\n\
        mod tests {\n    use super::*;\n    use super::super::super::lanes::pool;\n\
            use crate::order::{\n        fills::x,\n        msg::y,\n    };\n    \
            fn f() { let _ = '{'; }\n}\n\
        use super::{codec, status::Phase};\n";
    let module = ["order", "gateway", "ledger"].map(String::from);
    let mut got = paths_in(text, &module);
    got.sort();
    let want = [
        (1, "order::gateway::dedup::Dedup"),
        (5, "order::gateway::ledger"),
        (6, "order::lanes::pool"),
        (7, "order::fills::x"),
        (7, "order::msg::y"),
        (13, "order::gateway::codec"),
        (13, "order::gateway::status::Phase"),
    ]
    .map(|(line, p)| (line, p.to_string()));
    assert_eq!(got, want);
    let wiring = resolved_paths(&["src/order/wiring.rs"]);
    for folder in ORDER_FOLDERS.iter().chain(&["msg"]) {
        assert!(
            wiring.iter().any(|(_, p)| order_folder(p) == Some(folder)),
            "the wiring's import of order::{folder} is not seen"
        );
    }
    let gateway = resolved_paths(&["src/order/gateway"]);
    assert!(gateway
        .iter()
        .any(|(_, p)| p.starts_with("order::gateway::dedup")));
}
