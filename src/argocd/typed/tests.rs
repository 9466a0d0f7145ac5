//! The typed reader agrees with the tolerant one: the same snapshot for every body it takes, and no answer (so the
//! tolerant reader's error is given) for every body the tolerant reader refuses or reads differently.

use super::parse;
use crate::argocd::{PayloadError, Snapshot, from_value};

fn tolerant(text: &str) -> Result<Snapshot, PayloadError> {
    from_value(&serde_json::from_str(text).expect("JSON"))
}

/// Whatever the typed reader answers, the tolerant reader answers too.
fn assert_agrees(text: &str) {
    if let Some(typed) = parse(text) {
        assert_eq!(Ok(typed), tolerant(text), "{text}");
    }
}

fn fixtures(dir: &str) -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/argocd")
        .join(dir);
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| (p.display().to_string(), std::fs::read_to_string(&p).expect("fixture")))
        .collect();
    out.sort();
    out
}

#[test]
fn every_captured_body_is_read_typed_to_the_same_snapshot() {
    let bodies = fixtures("captured");
    assert!(bodies.len() >= 20);
    for (name, text) in bodies {
        let typed = parse(&text).unwrap_or_else(|| panic!("{name}: the typed reader should take it"));
        assert_eq!(Ok(typed), tolerant(&text), "{name}");
    }
}

#[test]
fn both_readers_read_when_the_application_was_created() {
    let text = fixtures("captured")
        .into_iter()
        .find(|(name, _)| name.ends_with("003.json"))
        .expect("003")
        .1;
    let when = chrono::DateTime::parse_from_rfc3339("2025-10-02T15:32:45Z").expect("a time");
    assert_eq!(parse(&text).and_then(|s| s.created_at), Some(when.into()));
    assert_eq!(tolerant(&text).ok().and_then(|s| s.created_at), Some(when.into()));
    let unreadable = text.replace(
        "\"creationTimestamp\": \"2025-10-02T15:32:45Z\"",
        "\"creationTimestamp\": \"soon\"",
    );
    assert_ne!(unreadable, text, "the fixture names its creation time");
    assert_eq!(
        tolerant(&unreadable).ok().map(|s| s.created_at),
        Some(None),
        "a time that does not read is left out"
    );
    let wrong_type = text.replace(
        "\"creationTimestamp\": \"2025-10-02T15:32:45Z\"",
        "\"creationTimestamp\": 5",
    );
    assert_eq!(
        parse(&wrong_type),
        None,
        "the typed reader leaves a wrong type to the tolerant one"
    );
    let refused = tolerant(&wrong_type).expect_err("a number is not a time");
    assert!(refused.to_string().contains("metadata.creationTimestamp"), "{refused}");
}

#[test]
fn the_captured_applications_read_bare_agree_too() {
    for (name, text) in fixtures("objects") {
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let bare = if v.get("app").is_some() {
            v["app"].to_string()
        } else {
            text.clone()
        };
        assert_agrees(&bare);
        assert!(parse(&bare).is_some() || tolerant(&bare).is_err(), "{name}");
    }
}

#[test]
fn shapes_the_tolerant_reader_refuses_get_no_typed_answer() {
    for text in [
        r#"{"app":null,"metadata":{"name":"x"}}"#,
        r#"{"app":[],"metadata":{"name":"x"}}"#,
        r#"{"app":{"metadata":["x"]}}"#,
        r#"{"app":{"metadata":{"name":"x"},"spec":{"destination":["a","b","c"]}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":[]}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"resources":{"a":1}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"sync":{"revisions":[null]}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"summary":{"images":[1]}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"summary":{"images":"ghcr.io/a:1"}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"operationState":{"startedAt":"yesterday"}}}}"#,
        r#"{"app":{"metadata":{"name":"x","annotations":{"notified.notifications.argoproj.io":1}}}}"#,
        r#"{"app":{"metadata":{"name":"x","labels":{"team":null}}}}"#,
        r#"{"app":{"metadata":{"name":"X"}}}"#,
        r#"{"app":{"metadata":{"name":""}}}"#,
        r#"{"app":{"kind":"Deployment","metadata":{"name":"x"}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"health":{"status":"<no value>"}}}}"#,
        r#"{"metadata":null,"status":{}}"#,
        r#"{"timestamp":1}"#,
    ] {
        assert!(parse(text).is_none(), "{text}");
        assert!(tolerant(text).is_err(), "{text}");
    }
}

#[test]
fn odd_but_valid_shapes_agree_or_defer() {
    for text in [
        // The tolerant reader is lenient here; the typed one defers to it.
        r#"{"app":{"metadata":{"name":"x"},"spec":{"syncPolicy":{"automated":true}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"resources":[{"status":"Synced","name":5}]}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"history":[1,2]}}}"#,
        r#"{"timestamp":5,"app":{"metadata":{"name":"x"}}}"#,
        r#"{"context":"x","app":{"metadata":{"name":"x"}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"spec":{"sources":[],"source":{"repoURL":"r"}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"spec":{"sources":[{"repoURL":"a"}],"source":"junk"}}}"#,
        // Both take these, to the same snapshot.
        r#"{"app":{"metadata":{"name":"x","namespace":null,"labels":null},"spec":null,"status":null}}"#,
        r#"{"app":{"metadata":{"name":"x","labels":{"a":"1","a":"2"}}}}"#,
        r#"{"app":{"metadata":{"name":"x\u0061"},"status":{"sync":{"status":"Out\u004ffSync"}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"operationState":{"retryCount":"3","operation":{"retry":{"limit":2.5}}}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"operationState":{"retryCount":4,"operation":{"retry":{"limit":7}}}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"sync":{"revision":"","revisions":["a","a",""]}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"summary":{"images":["a:1","a:1","","b@sha256:0"]}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"summary":{"images":null,"externalURLs":["https://x"]}}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"summary":null}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"summary":[]}}}"#,
        r#"{"app":{"metadata":{"name":"x"},"status":{"reconciledAt":"2025-01-01T00:00:00Z","health":{"lastTransitionTime":"2025-01-02T00:00:00Z"}}}}"#,
        r#"{"timestamp":"not a time","context":{"argocdUrl":"https://cd/"},"app":{"metadata":{"name":"x"}}}"#,
        r#"{"metadata":{"name":"x"},"timestamp":"2025-01-01T00:00:00Z"}"#,
        r#"{"status":{},"metadata":{"name":"x","deletionTimestamp":"2025-01-01T00:00:00Z"}}"#,
    ] {
        assert_agrees(text);
    }
    let both = r#"{"app":{"metadata":{"name":"x","namespace":null,"labels":null},"spec":null,"status":null}}"#;
    assert!(parse(both).is_some(), "null where an object may be is read typed");
}

#[test]
fn images_are_read_each_once_without_empties_and_capped_the_same_by_both() {
    let text = r#"{"app":{"metadata":{"name":"x"},"status":{"summary":{"images":["a:1","a:1","","b@sha256:0"]}}}}"#;
    assert_eq!(tolerant(text).expect("valid").images, ["a:1", "b@sha256:0"]);
    let many: Vec<String> = (0..250).map(|k| format!("r/app{k}:1")).collect();
    let text = serde_json::json!({"app": {"metadata": {"name": "x"}, "status": {"summary": {"images": many}}}});
    assert_agrees(&text.to_string());
    let snap = crate::argocd::parse_body(text.to_string().as_bytes(), 64).expect("valid");
    assert_eq!(snap.images.len(), crate::argocd::caps::MAX_IMAGES);
    assert!(
        (snap.conditions.iter()).any(|c| c.r#type == crate::argocd::caps::TRUNCATED && c.message.contains("images")),
        "{:?}",
        snap.conditions
    );
}

/// Every JSON pointer in `v`, depth first.
fn pointers(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, child) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(child, p, out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(child, p, out);
            }
        }
        _ => {}
    }
}

#[test]
fn any_value_of_a_captured_body_replaced_by_another_type_still_agrees() {
    use serde_json::json;
    let replacements = [
        json!(null),
        json!(1),
        json!(2.5),
        json!("s"),
        json!(""),
        json!([]),
        json!({}),
        json!(true),
    ];
    for (name, text) in fixtures("captured").into_iter().take(8) {
        let original: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let mut paths = Vec::new();
        pointers(&original, String::new(), &mut paths);
        for (i, path) in paths.iter().enumerate() {
            let replacement = &replacements[i % replacements.len()];
            let mut v = original.clone();
            if let Some(slot) = v.pointer_mut(path) {
                *slot = replacement.clone();
            }
            let text = v.to_string();
            if let Some(typed) = parse(&text) {
                assert_eq!(Ok(typed), tolerant(&text), "{name}: {path} = {replacement}");
            }
        }
    }
}

/// An envelope's `app` is read with the envelope's own shape: keys of an envelope inside it (`app`, `timestamp`,
/// `context`, of any type and nested) change nothing, as in the tolerant reader, which does not read them.
#[test]
fn envelope_keys_inside_an_envelopes_app_are_not_read() {
    let cases = [
        r#"{"timestamp":"2025-01-01T00:00:00Z","app":{"app":{"metadata":{"name":"inner"}},"timestamp":"x","metadata":{"name":"outer"}}}"#,
        r#"{"app":{"timestamp":5,"context":[],"metadata":{"name":"outer"}}}"#,
        r#"{"app":{"app":{"app":{"app":{"metadata":{"name":"deep"}}}},"metadata":{"name":"outer"}}}"#,
    ];
    for text in cases {
        assert_agrees(text);
        let snap = crate::argocd::parse_body(text.as_bytes(), 64).expect(text);
        assert_eq!(snap.app.name, "outer", "{text}");
    }
    assert!(parse(cases[0]).is_some(), "a string timestamp inside is read typed");
}
