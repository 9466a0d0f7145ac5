//! How much Herald keeps of one Application: every text it stores (messages, labels, sources, resources'
//! names and messages) is cut at a bound with a visible note saying so and how long it was, and the lists that
//! grow with the Application (resources, the last sync's resources, conditions, labels) keep their first entries
//! and say, in one extra condition, how many were left out. A body of any size thus becomes a state of bounded
//! size: in memory, in the database, in every answer and message made of it.

use std::collections::BTreeMap;

use super::{Condition, HealthStatus, Operation, ResourceStatus, Snapshot};

/// A message (health, operation, condition, a resource's): enough for any error Argo CD writes.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// Any other text (a label value, a resource's kind, name or status, a source's repository or path, a revision).
pub const MAX_FIELD_BYTES: usize = 512;
/// `status.resources` not in sync, and `operationState.syncResult.resources`, each.
pub const MAX_RESOURCES: usize = 1000;
pub const MAX_CONDITIONS: usize = 50;
pub const MAX_LABELS: usize = 64;
/// Sources of a multi-source Application.
pub const MAX_SOURCES: usize = 20;
/// Images of `status.summary.images` (an Application running more is told about its first ones).
pub const MAX_IMAGES: usize = 200;
/// A whole state, as stored and answered: past it, the resource lists are halved until it fits.
pub const MAX_SNAPSHOT_BYTES: usize = 1 << 20;
/// The condition type that says what was left out.
pub const TRUNCATED: &str = "HeraldTruncated";

/// Cuts `s` to at most `max` bytes (at a character boundary) followed by `… (truncated, N bytes)`, N being its
/// length before.
pub fn cut(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let total = s.len();
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str(&format!("… (truncated, {total} bytes)"));
}

fn cut_opt(s: &mut Option<String>, max: usize) {
    if let Some(s) = s {
        cut(s, max);
    }
}

/// Keeps the first `max` of `v`; says how many were left out in `notes`.
fn first<T>(v: &mut Vec<T>, max: usize, what: &str, notes: &mut Vec<String>) {
    if v.len() > max {
        // The readers keep one item past the cap (never the whole list, which a hostile body makes huge): more than
        // `max` is what is known.
        notes.push(format!("more than {max} {what}: only the first {max} are kept"));
        v.truncate(max);
    }
}

fn cut_labels(labels: &mut BTreeMap<String, String>, notes: &mut Vec<String>) {
    if labels.len() > MAX_LABELS {
        notes.push(format!(
            "{} labels: only the first {MAX_LABELS} by name are kept",
            labels.len()
        ));
        while labels.len() > MAX_LABELS {
            labels.pop_last();
        }
    }
    // Keys are Kubernetes label names (at most 317 bytes); a longer one is dropped rather than cut into another.
    let before = labels.len();
    labels.retain(|k, _| k.len() <= MAX_FIELD_BYTES);
    if labels.len() < before {
        notes.push(format!(
            "{} labels with a name over {MAX_FIELD_BYTES} bytes are left out",
            before - labels.len()
        ));
    }
    labels.values_mut().for_each(|v| cut(v, MAX_FIELD_BYTES));
}

/// Bounds every field and list of `snap` (see the module's comment).
pub fn bound(snap: &mut Snapshot) {
    let mut notes = Vec::new();
    cut(&mut snap.project, MAX_FIELD_BYTES);
    cut_opt(&mut snap.uid, MAX_FIELD_BYTES);
    for part in [
        &mut snap.destination.server,
        &mut snap.destination.name,
        &mut snap.destination.namespace,
    ] {
        cut_opt(part, MAX_FIELD_BYTES);
    }
    cut_labels(&mut snap.labels, &mut notes);
    // A known word is Argo CD's own and short: only an unknown one can be long.
    for word in [snap.sync_status.other_mut(), snap.health_status.other_mut()]
        .into_iter()
        .flatten()
    {
        cut(word, MAX_FIELD_BYTES);
    }
    cut_opt(&mut snap.health_message, MAX_MESSAGE_BYTES);
    first(&mut snap.revisions, MAX_SOURCES, "revisions", &mut notes);
    snap.revisions.iter_mut().for_each(|r| cut(r, MAX_FIELD_BYTES));
    cut_opt(&mut snap.previous_revision, MAX_FIELD_BYTES);
    first(&mut snap.images, MAX_IMAGES, "images", &mut notes);
    snap.images.iter_mut().for_each(|i| cut(i, MAX_FIELD_BYTES));
    first(&mut snap.sources, MAX_SOURCES, "sources", &mut notes);
    for s in &mut snap.sources {
        cut(&mut s.repo_url, MAX_FIELD_BYTES);
        for part in [&mut s.path, &mut s.chart, &mut s.target_revision] {
            cut_opt(part, MAX_FIELD_BYTES);
        }
    }
    first(&mut snap.resources, MAX_RESOURCES, "resources out of sync", &mut notes);
    snap.resources.iter_mut().for_each(bound_resource);
    if let Some(op) = &mut snap.operation {
        bound_operation(op, &mut notes);
    }
    first(&mut snap.conditions, MAX_CONDITIONS, "conditions", &mut notes);
    for c in &mut snap.conditions {
        cut(&mut c.r#type, MAX_FIELD_BYTES);
        cut(&mut c.message, MAX_MESSAGE_BYTES);
    }
    fit(snap, &mut notes);
    if !notes.is_empty() {
        snap.conditions.push(Condition {
            r#type: TRUNCATED.into(),
            message: format!("the Application is larger than Herald keeps: {}", notes.join("; ")),
        });
    }
}

/// One resource out of sync: its names, unknown words and health message cut.
fn bound_resource(r: &mut ResourceStatus) {
    let words = [
        r.status.other_mut(),
        r.health.as_mut().and_then(HealthStatus::other_mut),
    ];
    for part in [&mut r.group, &mut r.kind, &mut r.namespace, &mut r.name]
        .into_iter()
        .chain(words.into_iter().flatten())
    {
        cut(part, MAX_FIELD_BYTES);
    }
    cut_opt(&mut r.health_message, MAX_MESSAGE_BYTES);
}

/// The last sync: its texts cut, its revisions and resources the first ones.
fn bound_operation(op: &mut Operation, notes: &mut Vec<String>) {
    if let Some(p) = op.phase.other_mut() {
        cut(p, MAX_FIELD_BYTES);
    }
    cut(&mut op.message, MAX_MESSAGE_BYTES);
    cut_opt(&mut op.initiator.username, MAX_FIELD_BYTES);
    cut_opt(&mut op.revision, MAX_FIELD_BYTES);
    first(&mut op.revisions, MAX_SOURCES, "synced revisions", notes);
    op.revisions.iter_mut().for_each(|r| cut(r, MAX_FIELD_BYTES));
    first(&mut op.resources, MAX_RESOURCES, "resources in the last sync", notes);
    for r in &mut op.resources {
        let words = [r.status.other_mut(), r.hook_phase.other_mut()];
        for part in [&mut r.group, &mut r.kind, &mut r.namespace, &mut r.name]
            .into_iter()
            .chain(words.into_iter().flatten())
        {
            cut(part, MAX_FIELD_BYTES);
        }
        cut(&mut r.message, MAX_MESSAGE_BYTES);
    }
}

fn size(snap: &Snapshot) -> usize {
    serde_json::to_vec(snap).map_or(0, |v| v.len())
}

/// Halves the longer of the resource lists until `snap` serialises to at most [`MAX_SNAPSHOT_BYTES`].
fn fit(snap: &mut Snapshot, notes: &mut Vec<String>) {
    let mut cut_to = None;
    while size(snap) > MAX_SNAPSHOT_BYTES {
        let synced = snap.operation.as_mut().map(|o| &mut o.resources);
        let longer = match synced {
            Some(op) if op.len() > snap.resources.len() => {
                op.truncate(op.len() / 2);
                op.len()
            }
            _ if !snap.resources.is_empty() => {
                let half = snap.resources.len() / 2;
                snap.resources.truncate(half);
                half
            }
            _ => break,
        };
        cut_to = Some(longer);
    }
    if let Some(n) = cut_to {
        notes.push(format!(
            "resource lists cut (down to {n}) to keep the state under {MAX_SNAPSHOT_BYTES} bytes"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argocd::parse_body;
    use serde_json::json;

    #[test]
    fn a_cut_text_says_it_was_cut_and_how_long_it_was() {
        let mut s = "é".repeat(3000);
        cut(&mut s, MAX_MESSAGE_BYTES);
        assert!(s.starts_with(&"é".repeat(2048)), "cut at a character boundary");
        assert!(s.ends_with("… (truncated, 6000 bytes)"), "{}", &s[s.len() - 40..]);
        let mut short = "fine".to_string();
        cut(&mut short, 4);
        assert_eq!(short, "fine");
    }

    #[test]
    fn a_huge_application_is_kept_bounded_with_a_visible_note() {
        let message = "x".repeat(4_000_000);
        let labels: serde_json::Map<String, serde_json::Value> = (0..1200)
            .map(|k| (format!("l{k:04}"), json!("v".repeat(3000))))
            .collect();
        let resources: Vec<_> = (0..36_000)
            .map(|k| {
                json!({"kind": "ConfigMap", "namespace": "ns", "name": format!("cm-{k}"),
                            "status": "OutOfSync", "requiresPruning": true, "version": "v1"})
            })
            .collect();
        let body = json!({"app": {
            "metadata": {"name": "big", "namespace": "argocd", "labels": labels},
            "status": {
                "sync": {"status": "OutOfSync"},
                "health": {"status": "Degraded", "message": message},
                "resources": resources,
                "conditions": [{"type": "SyncError", "message": message}],
                "operationState": {"phase": "Failed", "message": message},
            }
        }});
        let text = body.to_string();

        let snap = parse_body(text.as_bytes(), 64).expect("valid");

        let kept = serde_json::to_vec(&snap).expect("json").len();
        assert!(kept < 2_000_000, "{kept} bytes kept of a {} byte body", text.len());
        let health = snap.health_message.as_deref().unwrap_or_default();
        assert!(health.len() < MAX_MESSAGE_BYTES + 64 && health.ends_with("(truncated, 4000000 bytes)"));
        let op = snap.operation.as_ref().expect("operation");
        assert!(op.message.ends_with("(truncated, 4000000 bytes)"));
        assert_eq!(snap.labels.len(), MAX_LABELS);
        assert!(snap.labels.values().all(|v| v.ends_with("(truncated, 3000 bytes)")));
        assert_eq!(snap.resources.len(), MAX_RESOURCES);
        let note = snap.conditions.iter().find(|c| c.r#type == TRUNCATED).expect("a note");
        assert!(
            note.message
                .contains("more than 1000 resources out of sync: only the first 1000 are kept"),
            "{}",
            note.message
        );
        assert!(note.message.contains("1200 labels"), "{}", note.message);
    }

    #[test]
    fn an_item_past_a_lists_cap_is_still_checked_and_a_wrong_one_refused_by_its_path() {
        // Past the cap the readers keep nothing more, but they still read each item: a wrong one is refused as it
        // was before the caps applied while parsing, naming where it is.
        let mut resources: Vec<_> = (0..MAX_RESOURCES + 500)
            .map(|k| json!({"kind": "ConfigMap", "name": format!("cm-{k}"), "status": "OutOfSync"}))
            .collect();
        resources[MAX_RESOURCES + 400] = json!({"kind": 5, "name": "wrong"});
        let mut conditions: Vec<_> = (0..MAX_CONDITIONS + 10)
            .map(|k| json!({"type": "SyncError", "message": format!("m{k}")}))
            .collect();
        let body = |resources: &Vec<serde_json::Value>, conditions: &Vec<serde_json::Value>| {
            json!({"app": {"metadata": {"name": "pay", "namespace": "argocd"},
                           "status": {"resources": resources, "conditions": conditions}}})
            .to_string()
        };
        let err = parse_body(body(&resources, &conditions).as_bytes(), 64).expect_err("a wrong resource");
        assert!(
            err.to_string().contains(&format!("resources[{}]", MAX_RESOURCES + 400)),
            "{err}"
        );
        resources[MAX_RESOURCES + 400] = json!({"kind": "ConfigMap", "name": "right", "status": "OutOfSync"});
        conditions[MAX_CONDITIONS + 5] = json!({"type": ["not", "a", "string"]});
        let err = parse_body(body(&resources, &conditions).as_bytes(), 64).expect_err("a wrong condition");
        assert!(
            err.to_string().contains(&format!("conditions[{}]", MAX_CONDITIONS + 5)),
            "{err}"
        );
        conditions[MAX_CONDITIONS + 5] = json!({"type": "SyncError", "message": "fine"});
        let snap = parse_body(body(&resources, &conditions).as_bytes(), 64).expect("valid again");
        assert_eq!(snap.resources.len(), MAX_RESOURCES);
    }

    #[test]
    fn a_state_with_long_resource_names_is_kept_under_its_byte_bound() {
        let resources: Vec<_> = (0..3000)
            .map(|k| {
                json!({"kind": "k".repeat(500), "namespace": "n".repeat(500), "name": format!("{k}{}", "r".repeat(500)),
                            "status": "OutOfSync", "requiresPruning": true})
            })
            .collect();
        let body = json!({"app": {"metadata": {"name": "big"}, "status": {"resources": resources}}});

        let snap = parse_body(body.to_string().as_bytes(), 64).expect("valid");

        assert!(size(&snap) <= MAX_SNAPSHOT_BYTES, "{}", size(&snap));
        assert!(!snap.resources.is_empty() && snap.resources.len() < MAX_RESOURCES);
        let note = snap.conditions.iter().find(|c| c.r#type == TRUNCATED).expect("a note");
        assert!(
            note.message.contains("more than 1000 resources out of sync")
                && note.message.contains("resource lists cut")
        );
    }

    #[test]
    fn an_application_within_the_bounds_is_kept_whole() {
        let body = br#"{"app":{"metadata":{"name":"pay","labels":{"team":"payments"}},
            "status":{"health":{"status":"Degraded","message":"Back-off pulling image"}}}}"#;
        let snap = parse_body(body, 64).expect("valid");
        assert_eq!(snap.health_message.as_deref(), Some("Back-off pulling image"));
        assert!(snap.conditions.is_empty());
    }
}
