//! The one way every test binary reads the Argo CD fixtures of `tests/fixtures/argocd` (where each comes from:
//! its SOURCES.md): a file's path (for the command line), its bytes, its text, its JSON or YAML as a value, a YAML
//! file's documents, and the captured webhook bodies in file order.

#![allow(dead_code)] // each test binary reads the fixtures its own way

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The folder of the Argo CD fixtures.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/argocd")
}

/// The path of the fixture `rel` (e.g. `captured/021_remove_podinfo_1_1.json`), for a command that reads it.
pub fn fixture_path(rel: &str) -> PathBuf {
    fixtures().join(rel)
}

/// The bytes of the fixture `rel`, as they would be sent.
pub fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(fixture_path(rel)).unwrap_or_else(|e| panic!("fixture {rel}: {e}"))
}

/// The text of the fixture `rel`.
pub fn fixture_text(rel: &str) -> String {
    String::from_utf8(fixture(rel)).unwrap_or_else(|e| panic!("fixture {rel}: {e}"))
}

/// The JSON fixture `rel` as a value (a captured body, to edit before it is sent).
pub fn fixture_json(rel: &str) -> Value {
    serde_json::from_slice(&fixture(rel)).unwrap_or_else(|e| panic!("fixture {rel}: {e}"))
}

/// The YAML fixture `rel` (one document, as `kubectl get -o yaml` prints an object) as a value.
pub fn fixture_yaml(rel: &str) -> Value {
    serde_norway::from_str(&fixture_text(rel)).unwrap_or_else(|e| panic!("fixture {rel}: {e}"))
}

/// Each document of the YAML fixture `rel` (separated by `---`; one of only comments is none) as a value.
pub fn fixture_yaml_documents(rel: &str) -> Vec<Value> {
    (fixture_text(rel).split("\n---"))
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| serde_norway::from_str(d).unwrap_or_else(|e| panic!("fixture {rel}: {e}")))
        .collect()
}

/// The captured bodies (`captured/*.json`), each with its file name, in file-name order (the order Argo CD sent
/// them, except where a test says otherwise).
pub fn captured() -> Vec<(String, Vec<u8>)> {
    let dir = fixture_path("captured");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a folder entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no captured bodies in {}", dir.display());
    (names.into_iter())
        .map(|name| {
            let body = fixture(&format!("captured/{name}"));
            (name, body)
        })
        .collect()
}
