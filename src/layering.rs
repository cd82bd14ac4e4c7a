//! Tests of the direction of dependencies between folders: the vocabulary
//! (`model/`) imports no other engine module, and telemetry (`metrics/`)
//! imports no stage (`feed/`, `order/`, `publish/`). They read the sources,
//! so a new file in either folder is checked without being listed here.

use std::path::Path;

/// Every `crate::…` path written in the code (not the comments) of the
/// Rust files of `folder`, as `(file:line, path after "crate::")`.
fn crate_paths(folder: &str) -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("source folder") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                found.push((format!("{}:{}", path.display(), n + 1), rest.to_string()));
            }
        }
    }
    assert!(
        !found.is_empty() || folder == "src/model",
        "{folder}: no source read"
    );
    found
}

#[test]
fn model_imports_no_other_engine_module() {
    let bad: Vec<_> = crate_paths("src/model")
        .into_iter()
        .filter(|(_, p)| !p.starts_with("model::"))
        .collect();
    assert!(bad.is_empty(), "model/ must stay at the bottom: {bad:#?}");
}

#[test]
fn metrics_import_no_stage() {
    let bad: Vec<_> = crate_paths("src/metrics")
        .into_iter()
        .filter(|(_, p)| {
            ["feed::", "order::", "publish::"]
                .iter()
                .any(|s| p.starts_with(s))
        })
        .collect();
    assert!(bad.is_empty(), "metrics/ must not import a stage: {bad:#?}");
}

#[test]
fn the_check_sees_an_import() {
    // The scan itself works: metrics do import the model (and the line
    // splitting keeps code before a trailing comment).
    assert!(crate_paths("src/metrics")
        .iter()
        .any(|(_, p)| p.starts_with("model::")));
}
