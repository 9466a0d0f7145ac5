//! The Argo CD side of the contract (`deploy/argocd/`, DESIGN §2 and §7): what an operator applies must make Argo CD's
//! notifications-engine send Herald, for every state Herald tracks, a POST whose body Herald accepts.
//!
//! The patch is read as notifications-engine reads it: each `data` value is itself YAML.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

const PATCH: &str = "deploy/argocd/argocd-notifications-cm.patch.yaml";
const SECRET_EXAMPLE: &str = "deploy/argocd/argocd-notifications-secret.example.yaml";
const KUSTOMIZATION: &str = "deploy/argocd/kustomization.yaml";

/// The body of DESIGN §7, character for character.
const BODY: &str = r#"{"timestamp": "{{ (call .time.Now).Format "2006-01-02T15:04:05.000000Z07:00" }}", "context": {{toJson .context}}, "app": {{toJson .app}}}"#;
const TIME_ACTION: &str = r#"{{ (call .time.Now).Format "2006-01-02T15:04:05.000000Z07:00" }}"#;

/// Each state Herald needs a trigger for, and what the trigger's condition must test.
const NEEDED_TRIGGERS: &[(&str, &[&str])] = &[
    ("herald-on-out-of-sync", &["app.status.sync.status", "'OutOfSync'"]),
    ("herald-on-synced", &["app.status.sync.status", "'Synced'"]),
    ("herald-on-sync-unknown", &["app.status.sync.status", "'Unknown'"]),
    ("herald-on-health-degraded", &["app.status.health.status", "'Degraded'"]),
    ("herald-on-health-healthy", &["app.status.health.status", "'Healthy'"]),
    ("herald-on-health-missing", &["app.status.health.status", "'Missing'"]),
    (
        "herald-on-sync-running",
        &["app.status.operationState.phase", "'Running'"],
    ),
    (
        "herald-on-sync-succeeded",
        &["app.status.operationState.phase", "'Succeeded'"],
    ),
    (
        "herald-on-sync-failed",
        &["app.status.operationState.phase", "'Failed'", "'Error'"],
    ),
    ("herald-on-deleted", &["app.metadata.deletionTimestamp"]),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml(text: &str, what: &str) -> Value {
    serde_norway::from_str(text).unwrap_or_else(|e| panic!("{what} is not valid YAML: {e}"))
}

fn patch() -> Value {
    yaml(&read(PATCH), PATCH)
}

/// The ConfigMap's `data`, each value parsed as the YAML notifications-engine expects (except `context`, a string map).
fn data() -> Map<String, Value> {
    let patch = patch();
    let Some(Value::Object(data)) = patch.get("data") else {
        panic!("{PATCH} has no `data` map");
    };
    data.iter()
        .map(|(k, v)| {
            let text = v
                .as_str()
                .unwrap_or_else(|| panic!("data.{k} must be a string (YAML text)"));
            (k.clone(), yaml(text, &format!("data.{k}")))
        })
        .collect()
}

fn with_prefix<'a>(data: &'a Map<String, Value>, prefix: &str) -> Vec<(&'a str, &'a Value)> {
    data.iter()
        .filter_map(|(k, v)| k.strip_prefix(prefix).map(|name| (name, v)))
        .collect()
}

fn service_name(data: &Map<String, Value>) -> String {
    let services = with_prefix(data, "service.webhook.");
    assert_eq!(services.len(), 1, "exactly one webhook service is expected");
    services[0].0.to_string()
}

fn template(data: &Map<String, Value>) -> (&str, &Value) {
    let templates = with_prefix(data, "template.");
    assert_eq!(
        templates.len(),
        1,
        "exactly one template is expected, found {templates:?}"
    );
    templates[0]
}

fn triggers(data: &Map<String, Value>) -> Vec<(&str, &Vec<Value>)> {
    with_prefix(data, "trigger.")
        .into_iter()
        .map(|(name, conditions)| {
            let list = conditions
                .as_array()
                .unwrap_or_else(|| panic!("trigger.{name} must be a YAML list of conditions"));
            (name, list)
        })
        .collect()
}

/// Captured bodies, kept in the repository (`tests/fixtures/argocd/SOURCES.md` says where each comes from).
fn captured() -> PathBuf {
    root().join("tests/fixtures/argocd/captured")
}

fn fixture(name: &str) -> Value {
    let path = captured().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What Argo CD would send for `fixture` at `now`: the template's body with its three actions filled in.
fn render(body_template: &str, fixture: &Value, now: &str) -> String {
    let json = |key: &str| serde_json::to_string(&fixture[key]).expect("a JSON value serialises");
    let body = body_template
        .replace(TIME_ACTION, now)
        .replace("{{toJson .context}}", &json("context"))
        .replace("{{toJson .app}}", &json("app"));
    assert!(
        !body.contains("{{"),
        "the body has a template action this test does not know: {body_template}"
    );
    body
}

fn the_body(data: &Map<String, Value>) -> String {
    let service = service_name(data);
    let (_, template) = template(data);
    template["webhook"][service.as_str()]["body"]
        .as_str()
        .expect("the template has a body for the service")
        .to_string()
}

#[test]
fn the_patch_targets_argo_cds_notifications_configmap() {
    let patch = patch();
    assert_eq!(patch["apiVersion"], "v1");
    assert_eq!(patch["kind"], "ConfigMap");
    assert_eq!(patch["metadata"]["name"], "argocd-notifications-cm");
    assert_eq!(patch["metadata"]["namespace"], "argocd");
}

#[test]
fn every_key_follows_the_notifications_engine_format() {
    for key in data().keys() {
        let ok = key == "subscriptions"
            || ["service.webhook.", "template.", "trigger."].iter().any(|p| {
                key.strip_prefix(p)
                    .is_some_and(|name| !name.is_empty() && !name.contains(' '))
            });
        assert!(
            ok,
            "data.{key} is not service.webhook.<name>, template.<name>, trigger.<name> or subscriptions"
        );
    }
}

#[test]
fn the_template_posts_the_envelope_to_the_herald_service() {
    let data = data();
    let service = service_name(&data);
    assert_eq!(service, "herald");
    let (name, template) = template(&data);
    let webhook = template["webhook"]
        .as_object()
        .expect("the template has a `webhook` map");
    // Argo CD sends a GET with the plain-text message unless this key equals the service name.
    assert_eq!(
        webhook.keys().collect::<Vec<_>>(),
        vec![&service],
        "template.{name}: webhook.<key> must be the service name"
    );
    let request = &webhook[&service];
    assert_eq!(request["method"], "POST");
    assert!(
        request.get("path").is_none_or(|p| p.as_str() == Some("")),
        "the service URL is complete: the template must not add a path"
    );
    assert_eq!(the_body(&data).trim_end(), BODY);
}

#[test]
fn every_needed_state_has_a_trigger_without_once_per_that_sends_the_herald_template() {
    let data = data();
    let (template_name, _) = template(&data);
    let triggers = triggers(&data);
    for (name, conditions) in &triggers {
        assert!(!conditions.is_empty(), "trigger.{name} has no condition");
        for condition in *conditions {
            // With `oncePer` a failed send is dropped; without it Argo CD retries on the next evaluation.
            assert!(
                condition.get("oncePer").is_none(),
                "trigger.{name} must not have oncePer"
            );
            assert!(
                condition["when"].as_str().is_some_and(|w| !w.trim().is_empty()),
                "trigger.{name} has no `when`"
            );
            assert_eq!(
                condition["send"],
                serde_json::json!([template_name]),
                "trigger.{name} must send [{template_name}]"
            );
        }
    }
    for (needed, tests) in NEEDED_TRIGGERS {
        let (_, conditions) = triggers
            .iter()
            .find(|(name, _)| name == needed)
            .unwrap_or_else(|| panic!("no trigger.{needed}"));
        let when = conditions[0]["when"].as_str().unwrap_or_default();
        for part in *tests {
            assert!(when.contains(part), "trigger.{needed}: `{when}` should test {part}");
        }
    }
}

#[test]
fn one_global_subscription_sends_every_trigger_to_herald() {
    let data = data();
    let service = service_name(&data);
    let subscriptions = data["subscriptions"].as_array().expect("subscriptions is a YAML list");
    assert_eq!(subscriptions.len(), 1);
    let subscription = &subscriptions[0];
    // A recipient without `:` is the service itself with an empty destination, what a webhook service takes.
    assert_eq!(subscription["recipients"], serde_json::json!([service]));
    assert!(
        subscription.get("selector").is_none(),
        "the subscription must cover every Application"
    );
    let subscribed: BTreeSet<&str> = subscription["triggers"]
        .as_array()
        .expect("the subscription lists its triggers")
        .iter()
        .map(|t| t.as_str().expect("a trigger name"))
        .collect();
    let defined: BTreeSet<&str> = triggers(&data).into_iter().map(|(name, _)| name).collect();
    assert_eq!(
        subscribed, defined,
        "the subscription must name every trigger, and only those"
    );
}

#[test]
fn the_service_sends_a_bearer_token_that_the_example_secret_defines() {
    let data = data();
    let service = &data[&format!("service.webhook.{}", service_name(&data))];
    assert_eq!(service["url"], "http://herald.herald.svc:8080/v1/argocd/events");
    let headers: Vec<(&str, &str)> = service["headers"]
        .as_array()
        .expect("the service has headers")
        .iter()
        .map(|h| {
            (
                h["name"].as_str().expect("header name"),
                h["value"].as_str().expect("header value"),
            )
        })
        .collect();
    assert!(
        headers.contains(&("Authorization", "Bearer $herald-token")),
        "{headers:?}"
    );
    assert!(headers.contains(&("Content-Type", "application/json")), "{headers:?}");

    let secret = yaml(&read(SECRET_EXAMPLE), SECRET_EXAMPLE);
    assert_eq!(secret["kind"], "Secret");
    assert_eq!(secret["metadata"]["name"], "argocd-notifications-secret");
    assert_eq!(secret["metadata"]["namespace"], "argocd");
    let keys = secret["stringData"]
        .as_object()
        .expect("the example secret has stringData");
    // notifications-engine replaces `$name` (letters, digits, `_`, `-`) with that key of the Secret.
    for (_, value) in &headers {
        for reference in value.split('$').skip(1) {
            let key: String = reference
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                .collect();
            assert!(keys.contains_key(&key), "${key} is not in {SECRET_EXAMPLE}");
        }
    }
    let placeholder = keys["herald-token"].as_str().unwrap_or_default();
    assert!(
        placeholder.contains("REPLACE"),
        "the example token must be an obvious placeholder"
    );
}

#[test]
fn the_body_argo_cd_renders_for_a_captured_application_is_accepted() {
    let body = the_body(&data());
    let fixture = fixture("021_remove_podinfo_1_1.json");
    let rendered = render(&body, &fixture, "2025-10-02T17:01:47.257365Z");
    let snapshot = herald::argocd::parse_body(rendered.as_bytes(), 128).expect("Herald accepts the rendered body");
    assert_eq!(snapshot.app.name, "aaaaaaaaa");
    assert_eq!(snapshot.sync_status, "OutOfSync");
    assert_eq!(snapshot.argocd_url.as_deref(), Some("https://demo.cdviz.dev"));
    let observed = snapshot
        .observed_at
        .expect("the envelope timestamp is read")
        .to_rfc3339();
    assert_eq!(observed, "2025-10-02T17:01:47.257365+00:00");
}

#[test]
fn the_body_is_accepted_for_every_captured_application() {
    let body = the_body(&data());
    let dir = captured();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no fixtures in {}", dir.display());
    for name in names {
        let fixture = fixture(&name);
        let rendered = render(&body, &fixture, "2026-01-31T23:59:59.000001+01:00");
        let snapshot = herald::argocd::parse_body(rendered.as_bytes(), 128)
            .unwrap_or_else(|e| panic!("{name}: Herald refuses the rendered body: {e}"));
        assert_eq!(snapshot.app.name, fixture["app"]["metadata"]["name"], "{name}");
        assert_eq!(
            snapshot.sync_status, fixture["app"]["status"]["sync"]["status"],
            "{name}"
        );
    }
}

#[test]
fn the_kustomization_applies_the_patch_to_files_that_exist() {
    let kustomization = yaml(&read(KUSTOMIZATION), KUSTOMIZATION);
    let dir = Path::new(KUSTOMIZATION).parent().expect("a directory");
    let paths: Vec<&str> = kustomization["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            kustomization["patches"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| &p["path"]),
        )
        .map(|v| v.as_str().expect("a path"))
        .collect();
    assert!(paths.contains(&"argocd-notifications-cm.patch.yaml"), "{paths:?}");
    for path in paths {
        assert!(
            root().join(dir).join(path).is_file(),
            "{KUSTOMIZATION} names {path}, which does not exist"
        );
    }
}
