//! The one way every test binary builds what Argo CD sends Herald: an Application object (minimal but
//! real-shaped) and the webhook body around one — the envelope `{"timestamp", "context", "app"}` that
//! deploy/argocd's template makes Argo CD Notifications send (DESIGN §7; `tests/deploy_argocd.rs` checks the two
//! agree). What a test changes in them, it changes on the value this returns.

#![allow(dead_code)] // each test binary builds the bodies its own tests need

use serde_json::{Value, json};

/// The Argo CD the bodies come from (`context.argocdUrl`).
pub const ARGOCD_URL: &str = "https://argocd.example.com";

/// The `context` Argo CD puts in the envelope: its URL, and the service the notification went to.
pub fn context(argocd_url: &str) -> Value {
    json!({"argocdUrl": argocd_url, "notificationType": "herald"})
}

/// The envelope around `app` at `timestamp` (RFC 3339; a story sets it when it sends), with `context` (none: a
/// sender that says nothing of where it runs, as older templates and hand-made bodies do).
pub fn envelope_from(context: Option<Value>, app: Value, timestamp: &str) -> Value {
    let mut body = json!({"timestamp": timestamp, "app": app});
    if let Some(context) = context {
        body["context"] = context;
    }
    body
}

/// The envelope around `app` at `timestamp`, from the Argo CD at [`ARGOCD_URL`].
pub fn envelope_around(app: Value, timestamp: &str) -> Value {
    envelope_from(Some(context(ARGOCD_URL)), app, timestamp)
}

/// The envelope around `app` at `timestamp`, without `context`.
pub fn bare_envelope(app: Value, timestamp: &str) -> Value {
    envelope_from(None, app, timestamp)
}

/// Application `name` (namespace `argocd`, uid `uid-<name>`) of `team` (its `team` label), in project `default`,
/// deployed to the namespace of its own name, automated without prune or self-heal, at one revision, with its sync
/// and health status.
pub fn application(name: &str, team: &str, sync: &str, health: &str) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd", "uid": format!("uid-{name}"), "labels": {"team": team}},
        "spec": {
            "project": "default",
            "destination": {"server": "https://kubernetes.default.svc", "namespace": name},
            "syncPolicy": {"automated": {"prune": false, "selfHeal": false}}
        },
        "status": {
            "sync": {"status": sync, "revision": "0123456789abcdef0123456789abcdef01234567"},
            "health": {"status": health}
        }
    })
}

/// The body Argo CD sends about [`application`] `name` at `timestamp`, as sent.
pub fn envelope(name: &str, team: &str, sync: &str, health: &str, timestamp: &str) -> String {
    envelope_around(application(name, team, sync, health), timestamp).to_string()
}

/// Sets `app.status.operationState` on a body.
pub fn with_operation(body: &str, op: Value) -> String {
    let mut v: Value = serde_json::from_str(body).expect("json");
    v["app"]["status"]["operationState"] = op;
    v.to_string()
}
