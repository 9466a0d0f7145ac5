//! The Argo CD side of the contract (`deploy/argocd/`, DESIGN §2 and §7): what an operator applies must make Argo CD's
//! notifications-engine send Herald, for every state Herald tracks, a POST whose body Herald accepts; it must never
//! change what the operator's own triggers send (their entries in the shared notified-state annotation); and it must
//! be installable and removable without touching the operator's other keys.
//!
//! The patch is read as notifications-engine reads it: each `data` value is itself YAML, each condition an expression
//! that `deploy_argocd/engine.rs` evaluates under the engine's rules.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

#[path = "common/argocd_bodies.rs"]
mod argocd_bodies;
#[path = "deploy_argocd/engine.rs"]
mod engine;
#[path = "common/fixtures.rs"]
mod fixtures;
use argocd_bodies::envelope_from;
use engine::{Engine, NOTIFIED_HISTORY_MAX, Trigger};
use fixtures::{captured, fixture_json};

const PATCH: &str = "deploy/argocd/argocd-notifications-cm.patch.yaml";
const SECRET_EXAMPLE: &str = "deploy/argocd/argocd-notifications-secret.example.yaml";
const KUSTOMIZATION: &str = "deploy/argocd/kustomization.yaml";
const HELM_VALUES: &str = "deploy/argocd/helm-values.yaml";
const UNINSTALL: &str = "deploy/argocd/uninstall.sh";

/// The body of DESIGN §7, character for character.
const BODY: &str = r#"{"timestamp": "{{ (call .time.Now).Format "2006-01-02T15:04:05.000000Z07:00" }}", "context": {{toJson .context}}, "app": {{toJson .app}}}"#;
const TIME_ACTION: &str = r#"{{ (call .time.Now).Format "2006-01-02T15:04:05.000000Z07:00" }}"#;

/// Each state Herald needs a flip trigger for, and what the trigger's condition must test.
const NEEDED_TRIGGERS: &[(&str, &[&str])] = &[
    ("herald-on-out-of-sync", &["app.status.sync.status", "'OutOfSync'"]),
    ("herald-on-synced", &["app.status.sync.status", "'Synced'"]),
    ("herald-on-sync-unknown", &["app.status.sync.status", "'Unknown'"]),
    ("herald-on-health-degraded", &["app.status.health.status", "'Degraded'"]),
    ("herald-on-health-healthy", &["app.status.health.status", "'Healthy'"]),
    ("herald-on-health-missing", &["app.status.health.status", "'Missing'"]),
    (
        "herald-on-health-progressing",
        &["app.status.health.status", "'Progressing'"],
    ),
    (
        "herald-on-health-suspended",
        &["app.status.health.status", "'Suspended'"],
    ),
    ("herald-on-health-unknown", &["app.status.health.status", "'Unknown'"]),
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
    (
        "herald-on-sync-terminating",
        &["app.status.operationState.phase", "'Terminating'"],
    ),
    ("herald-on-deleted", &["app.metadata.deletionTimestamp", "!= nil"]),
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
fn every_trigger_sends_the_herald_template_when_its_condition_holds() {
    let data = data();
    let (template_name, _) = template(&data);
    for (name, conditions) in triggers(&data) {
        assert!(!conditions.is_empty(), "trigger.{name} has no condition");
        for condition in conditions {
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
}

/// An entry of a trigger with `oncePer` is never removed from the Application's notified state (only pushed out by
/// newer ones), and a failed send of it is dropped; without `oncePer` Argo CD removes the entry when the condition turns
/// false and retries a failed send while it holds.
#[test]
fn no_trigger_has_once_per() {
    let data = data();
    for (name, conditions) in triggers(&data) {
        for condition in conditions {
            assert!(
                condition.get("oncePer").is_none(),
                "trigger.{name} must not have oncePer"
            );
        }
    }
}

#[test]
fn every_needed_state_has_a_flip_trigger_that_tests_it() {
    let data = data();
    let triggers = triggers(&data);
    for (needed, tests) in NEEDED_TRIGGERS {
        let (_, conditions) = triggers
            .iter()
            .find(|(name, _)| name == needed)
            .unwrap_or_else(|| panic!("no trigger.{needed}"));
        let when: Vec<&str> = conditions.iter().filter_map(|c| c["when"].as_str()).collect();
        let when = when.join(" | ");
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
    let fixture = fixture_json("captured/021_remove_podinfo_1_1.json");
    let rendered = render(&body, &fixture, "2025-10-02T17:01:47.257365Z");
    let snapshot = herald::argocd::parse_body(rendered.as_bytes(), 128).expect("Herald accepts the rendered body");
    // The very envelope the other tests build (tests/common/argocd_bodies.rs) around the same Application.
    let sent: Value = serde_json::from_str(&rendered).expect("the rendered body is JSON");
    let built = envelope_from(
        Some(fixture["context"].clone()),
        fixture["app"].clone(),
        "2025-10-02T17:01:47.257365Z",
    );
    assert_eq!(sent, built, "the template's body and the tests' envelope differ");
    assert_eq!(snapshot.app.name, "aaaaaaaaa");
    assert_eq!(snapshot.sync_status.as_str(), "OutOfSync");
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
    let captured = captured();
    assert!(!captured.is_empty(), "no captured bodies");
    for (name, bytes) in captured {
        let fixture: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let rendered = render(&body, &fixture, "2026-01-31T23:59:59.000001+01:00");
        let snapshot = herald::argocd::parse_body(rendered.as_bytes(), 128)
            .unwrap_or_else(|e| panic!("{name}: Herald refuses the rendered body: {e}"));
        assert_eq!(snapshot.app.name, fixture["app"]["metadata"]["name"], "{name}");
        assert_eq!(
            snapshot.sync_status.as_str(),
            fixture["app"]["status"]["sync"]["status"],
            "{name}"
        );
    }
}

/// A Component owns no object: applying or deleting `deploy/argocd` on its own can never replace or delete the
/// operator's whole `argocd-notifications-cm`.
#[test]
fn the_kustomization_is_a_component_that_applies_the_patch_to_files_that_exist() {
    let kustomization = yaml(&read(KUSTOMIZATION), KUSTOMIZATION);
    assert_eq!(kustomization["kind"], "Component");
    assert!(
        kustomization.get("resources").is_none(),
        "the Component must not own the ConfigMap (no resources)"
    );
    let dir = Path::new(KUSTOMIZATION).parent().expect("a directory");
    let patches = kustomization["patches"].as_array().expect("the Component has patches");
    let paths: Vec<&str> = patches.iter().filter_map(|p| p["path"].as_str()).collect();
    assert_eq!(paths, vec!["argocd-notifications-cm.patch.yaml"]);
    for path in paths {
        assert!(
            root().join(dir).join(path).is_file(),
            "{KUSTOMIZATION} names {path}, which does not exist"
        );
    }
    for patch in patches {
        assert!(
            patch["path"].is_string() || patch["patch"].is_string(),
            "a patch is a file or inline: {patch}"
        );
        // Matched by kind and name only, so the patch also lands on a ConfigMap that gets its namespace later.
        let target = &patch["target"];
        assert_eq!(target["kind"], "ConfigMap");
        assert_eq!(target["name"], "argocd-notifications-cm");
        assert!(target.get("namespace").is_none(), "{target}");
    }
}

/// `subscriptions` is one key that a patch can only replace: before Herald's keys, a JSON patch `test` that the
/// operator's ConfigMap has none makes kustomize stop instead (.ci/validate-deploy.sh builds both cases).
#[test]
fn the_component_tests_that_the_operator_has_no_subscriptions_before_it_adds_herald_s() {
    let kustomization = yaml(&read(KUSTOMIZATION), KUSTOMIZATION);
    let patches = kustomization["patches"].as_array().expect("the Component has patches");
    let guard = patches
        .iter()
        .position(|p| {
            p["patch"]
                .as_str()
                .map(|text| yaml(text, "an inline patch"))
                .is_some_and(|ops| ops == json!([{"op": "test", "path": "/data/subscriptions", "value": null}]))
        })
        .expect("a JSON patch that tests /data/subscriptions is absent");
    let herald = patches
        .iter()
        .position(|p| p["path"] == "argocd-notifications-cm.patch.yaml")
        .expect("Herald's patch");
    assert!(guard < herald, "the test must run before Herald's keys are added");
}

/// The argo-cd chart's keys (charts/argo-cd/values.yaml, templates/argocd-configs/argocd-notifications-cm.yaml):
/// `notifications.notifiers`, `.templates`, `.triggers` are maps of ConfigMap keys, `.subscriptions` a list,
/// `.secret.items` the Secret's keys, `.argocdUrl` the `argocdUrl` of the `context` key.
#[test]
fn the_helm_values_carry_the_same_service_template_triggers_and_subscription_as_the_patch() {
    let values = yaml(&read(HELM_VALUES), HELM_VALUES);
    let notifications = values["notifications"]
        .as_object()
        .expect("helm-values.yaml has a `notifications` map");
    let data = data();
    let section = |key: &str| -> Map<String, Value> {
        notifications[key]
            .as_object()
            .unwrap_or_else(|| panic!("notifications.{key} must be a map of ConfigMap keys"))
            .iter()
            .map(|(k, v)| {
                let text = v
                    .as_str()
                    .unwrap_or_else(|| panic!("notifications.{key}.{k} must be YAML text"));
                (k.clone(), yaml(text, &format!("notifications.{key}.{k}")))
            })
            .collect()
    };
    let from_patch = |prefix: &str| -> Map<String, Value> {
        data.iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(section("notifiers"), from_patch("service."));
    assert_eq!(section("templates"), from_patch("template."));
    assert_eq!(section("triggers"), from_patch("trigger."));
    assert_eq!(notifications["subscriptions"], data["subscriptions"]);

    let argocd_url = notifications["argocdUrl"].as_str().unwrap_or_default();
    assert!(
        argocd_url.starts_with("https://"),
        "notifications.argocdUrl: {argocd_url:?}"
    );
    // The chart writes argocdUrl and notifications.context into the same `context` key: never both.
    assert!(
        notifications
            .get("context")
            .is_none_or(|c| c.get("argocdUrl").is_none()),
        "set argocdUrl with notifications.argocdUrl only"
    );
    let token = notifications["secret"]["items"]["herald-token"]
        .as_str()
        .unwrap_or_default();
    assert!(
        token.contains("REPLACE"),
        "notifications.secret.items.herald-token must be an obvious placeholder"
    );
}

/// uninstall.sh removes `service.webhook.herald`, `template.herald`, `trigger.herald-on-*` and a `subscriptions` key
/// that holds only Herald's subscription: every key the kit adds must be one of those.
#[test]
fn every_key_the_patch_adds_is_one_that_uninstall_removes() {
    let script = read(UNINSTALL);
    for pattern in [r"service\.webhook\.herald", r"template\.herald", r"trigger\.herald-on-"] {
        assert!(script.contains(pattern), "{UNINSTALL} no longer matches {pattern}");
    }
    for key in data().keys() {
        let removed = key == "service.webhook.herald"
            || key == "template.herald"
            || key == "subscriptions"
            || key
                .strip_prefix("trigger.herald-on-")
                .is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
        assert!(removed, "data.{key} would be left behind by {UNINSTALL}");
    }
    let subscriptions = data()["subscriptions"].clone();
    let recipients: Vec<&Value> = subscriptions
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["recipients"].as_array().into_iter().flatten())
        .collect();
    assert!(
        recipients.iter().all(|r| *r == "herald"),
        "uninstall.sh recognises Herald's subscription by its only recipient, herald: {recipients:?}"
    );
}

/// Argo CD puts `notificationType` (the service name, `herald`, not `webhook`) in the context; Herald must not
/// depend on it.
#[test]
fn the_body_is_read_the_same_whatever_the_context_notification_type() {
    let body = the_body(&data());
    let mut fixture = fixture_json("captured/021_remove_podinfo_1_1.json");
    let now = "2025-10-02T17:01:47.257365Z";
    let parse = |fixture: &Value| {
        herald::argocd::parse_body(render(&body, fixture, now).as_bytes(), 128).expect("Herald accepts the body")
    };
    fixture["context"]["notificationType"] = Value::from("herald");
    let as_sent = parse(&fixture);
    fixture["context"]
        .as_object_mut()
        .expect("the fixture has a context")
        .remove("notificationType");
    assert_eq!(parse(&fixture), as_sent);
    fixture["context"]["notificationType"] = Value::from("webhook");
    assert_eq!(parse(&fixture), as_sent);
}

// --- The kit and the operator's own notifications, under notifications-engine's rules (deploy_argocd/engine.rs) ------

/// Two triggers of Argo CD's catalog as an operator subscribes them to their Slack: `on-created` has an `oncePer`
/// (its entry stays for the Application's life), `on-sync-running` is a flip.
const OPERATOR_TRIGGERS: &[(&str, &str)] = &[
    (
        "on-created",
        "- when: 'true'\n  oncePer: app.metadata.name\n  send: [app-created]\n",
    ),
    (
        "on-sync-running",
        "- when: app.status.operationState != nil and app.status.operationState.phase in ['Running']\n  send: [app-sync-running]\n",
    ),
];
const OPERATOR_RECIPIENT: &str = "slack:deployments";

/// The signature trigger the kit had before (issue 23), kept to show what the model catches: a new `oncePer` value,
/// and so a new entry that is never removed, for each change of the signature — about three per sync.
const PREVIOUS_SIGNATURE_TRIGGER: &str = "- when: 'true'
  oncePer: >-
    [app.status?.sync?.status, app.status?.health?.status,
    app.status?.operationState?.phase, app.status?.operationState?.finishedAt,
    app.status?.resources == nil ? 0 : len(filter(app.status.resources, {#.requiresPruning == true}))]
  send: [herald]
";

/// The kit's triggers and global subscription, compiled as notifications-engine compiles them.
fn kit_engine() -> Engine {
    let data = data();
    let mut engine = Engine::default();
    for (name, conditions) in triggers(&data) {
        engine.add_trigger(Trigger::compile(name, conditions).unwrap_or_else(|e| panic!("{e}")));
    }
    for subscription in data["subscriptions"].as_array().expect("subscriptions is a list") {
        for recipient in subscription["recipients"].as_array().expect("recipients") {
            for trigger in subscription["triggers"].as_array().expect("triggers") {
                engine.subscribe(
                    trigger.as_str().expect("a trigger name"),
                    recipient.as_str().expect("a recipient"),
                );
            }
        }
    }
    engine
}

fn with_operator_triggers(mut engine: Engine) -> Engine {
    for (name, text) in OPERATOR_TRIGGERS {
        let conditions = yaml(text, name);
        engine
            .add_trigger(Trigger::compile(name, conditions.as_array().expect("a list")).expect("the catalog compiles"));
        engine.subscribe(name, OPERATOR_RECIPIENT);
    }
    engine
}

/// The kit as it was: the same flips (one condition for Failed and Error) plus the signature trigger.
fn previous_kit_engine() -> Engine {
    let data = data();
    let mut engine = Engine::default();
    for (name, conditions) in triggers(&data) {
        if name.starts_with("herald-on-prune-") {
            continue;
        }
        engine.add_trigger(Trigger::compile(name, &conditions[..1]).expect("compiles"));
        engine.subscribe(name, "herald");
    }
    let signature = yaml(PREVIOUS_SIGNATURE_TRIGGER, "the previous signature trigger");
    engine.add_trigger(Trigger::compile("herald-on-change", signature.as_array().expect("a list")).expect("compiles"));
    engine.subscribe("herald-on-change", "herald");
    engine
}

/// One Application as the notifications controller sees it.
#[derive(Clone)]
struct AppState {
    sync: &'static str,
    health: &'static str,
    /// The last operation: phase, startedAt, finishedAt (None before the first sync).
    operation: Option<(&'static str, i64, Option<i64>)>,
    /// Resources requiring pruning now (kind, name).
    pruning: Vec<(&'static str, &'static str)>,
    /// Resources the last sync left to prune (`PruneSkipped` in its result).
    skipped: Vec<(&'static str, &'static str)>,
}

fn rfc3339(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .expect("a valid time")
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

impl AppState {
    fn to_json(&self) -> Value {
        let mut resources = vec![
            json!({"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "payments",
                                        "name": "payments-api", "status": "Synced", "health": {"status": self.health}}),
        ];
        for (kind, name) in &self.pruning {
            resources.push(
                json!({"version": "v1", "kind": kind, "namespace": "payments", "name": name,
                                  "status": "OutOfSync", "requiresPruning": true}),
            );
        }
        let mut status = json!({
            "sync": {"status": self.sync, "revision": "8f2c1e0"},
            "health": {"status": self.health},
            "resources": resources,
        });
        if let Some((phase, started, finished)) = self.operation {
            let mut results = vec![
                json!({"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "payments",
                                          "name": "payments-api", "status": "Synced", "message": "deployment.apps/payments-api configured"}),
            ];
            for (kind, name) in &self.skipped {
                results.push(
                    json!({"group": "", "version": "v1", "kind": kind, "namespace": "payments", "name": name,
                                    "status": "PruneSkipped", "message": "ignored (requires pruning)"}),
                );
            }
            let mut operation = json!({"phase": phase, "startedAt": rfc3339(started),
                                       "operation": {"sync": {"revision": "8f2c1e0"}}});
            if let Some(finished) = finished {
                operation["finishedAt"] = Value::from(rfc3339(finished));
                operation["syncResult"] = json!({"revision": "8f2c1e0", "resources": results});
            }
            status["operationState"] = operation;
        }
        json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "payments-api", "namespace": "argocd"},
            "status": status,
        })
    }
}

const START: i64 = 1_790_000_000;
const SYNC_EVERY: i64 = 20 * 60;

/// 24 h of auto-sync every 20 minutes (drift, sync running, sync succeeded with the Deployment progressing, healthy),
/// evaluated at every change and every 60 s in between as the notifications controller does; `after_each` sees the
/// engine after every evaluation. Returns the number of syncs.
fn a_day_of_auto_sync(engine: &mut Engine, after_each: &mut dyn FnMut(&Engine)) -> usize {
    let created = AppState {
        sync: "OutOfSync",
        health: "Missing",
        operation: None,
        pruning: vec![],
        skipped: vec![],
    };
    let mut timeline: Vec<(i64, AppState)> = vec![(START, created)];
    let mut previous: Option<i64> = None;
    let syncs = (24 * 3600 / SYNC_EVERY) as usize;
    for cycle in 0..syncs as i64 {
        let at = START + 60 + cycle * SYNC_EVERY;
        let state = |sync, health, operation| AppState {
            sync,
            health,
            operation,
            pruning: vec![],
            skipped: vec![],
        };
        let last = previous.map(|finished| ("Succeeded", finished - 10, Some(finished)));
        timeline.push((at, state("OutOfSync", "Healthy", last)));
        timeline.push((at + 5, state("OutOfSync", "Healthy", Some(("Running", at + 5, None)))));
        timeline.push((
            at + 15,
            state("Synced", "Progressing", Some(("Succeeded", at + 5, Some(at + 15)))),
        ));
        timeline.push((
            at + 75,
            state("Synced", "Healthy", Some(("Succeeded", at + 5, Some(at + 15)))),
        ));
        previous = Some(at + 15);
    }
    let end = START + 24 * 3600;
    let mut t = START;
    let mut next = 0;
    while t < end {
        // The state at t: the last change at or before it.
        while next + 1 < timeline.len() && timeline[next + 1].0 <= t {
            next += 1;
        }
        engine.evaluate(&timeline[next].1.to_json(), t, &mut |_, _| true);
        after_each(engine);
        let resync = t + 60 - (t - START) % 60;
        t = timeline
            .get(next + 1)
            .map_or(resync, |(change, _)| (*change).min(resync));
    }
    syncs
}

fn sent(engine: &Engine, trigger: &str) -> usize {
    engine
        .sends
        .iter()
        .filter(|s| s.trigger == trigger && s.delivered)
        .count()
}

/// Issue 23: the kit must never change what the operator's other triggers send. Over a day of syncs every 20 minutes
/// Herald's entries come and go with their conditions, the annotation never reaches notifications-engine's cap, and
/// the operator's `on-created` is sent once and `on-sync-running` once per sync — while Herald hears of every sync.
#[test]
fn a_day_of_auto_sync_leaves_the_operators_notified_entries_untouched() {
    let mut engine = with_operator_triggers(kit_engine());
    let mut herald_conditions = 0;
    for (_, conditions) in triggers(&data()) {
        herald_conditions += conditions.len();
    }
    let herald_triggers: Vec<String> = triggers(&data()).iter().map(|(name, _)| name.to_string()).collect();
    let (mut largest_state, mut largest_herald_share) = (0, 0);
    let syncs = a_day_of_auto_sync(&mut engine, &mut |engine| {
        largest_state = largest_state.max(engine.state.len());
        let herald: usize = herald_triggers.iter().map(|name| engine.entries_of(name)).sum();
        largest_herald_share = largest_herald_share.max(herald);
    });
    assert_eq!(syncs, 72);
    assert!(engine.errors.is_empty(), "expression errors: {:?}", engine.errors);
    assert_eq!(
        engine.pushed_out,
        Vec::<String>::new(),
        "entries pushed out of the notified state"
    );
    assert_eq!(sent(&engine, "on-created"), 1, "the operator's on-created is sent once");
    assert_eq!(
        sent(&engine, "on-sync-running"),
        syncs,
        "the operator's on-sync-running once per sync"
    );
    assert!(
        engine.state.keys().any(|k| k.contains(":on-created:")),
        "on-created's entry stays"
    );
    // Herald's share of the annotation is bounded by its conditions, however long this runs.
    assert!(
        largest_herald_share <= herald_conditions,
        "Herald held {largest_herald_share} entries, more than its {herald_conditions} conditions"
    );
    assert!(largest_state <= herald_conditions + OPERATOR_TRIGGERS.len() && largest_state < NOTIFIED_HISTORY_MAX);
    // …and Herald still hears of every sync: it starts, it ends, the Application recovers.
    for trigger in [
        "herald-on-sync-running",
        "herald-on-sync-succeeded",
        "herald-on-synced",
        "herald-on-health-healthy",
    ] {
        assert!(
            sent(&engine, trigger) >= syncs,
            "{trigger} sent {} times",
            sent(&engine, trigger)
        );
    }
}

/// The model is not blind: with the signature trigger the kit had before, the same day fills the annotation, pushes
/// the operator's entries out and Argo CD sends their `on-created` again (what issue 23 measured).
#[test]
fn the_previous_signature_trigger_pushed_the_operators_entries_out() {
    let mut engine = with_operator_triggers(previous_kit_engine());
    a_day_of_auto_sync(&mut engine, &mut |_| {});
    assert!(engine.errors.is_empty(), "expression errors: {:?}", engine.errors);
    assert!(engine.pushed_out.len() > 100, "pushed out: {}", engine.pushed_out.len());
    assert!(
        sent(&engine, "on-created") > 1,
        "on-created sent {} times",
        sent(&engine, "on-created")
    );
}

fn pruning_state(pruning: Vec<(&'static str, &'static str)>, skipped: Vec<(&'static str, &'static str)>) -> AppState {
    AppState {
        sync: "OutOfSync",
        health: "Healthy",
        operation: Some(("Succeeded", START, Some(START + 20))),
        pruning,
        skipped,
    }
}

/// Evaluates `state` at `at` and then twice more a minute apart; returns what was sent to Herald.
fn herald_sends_for(engine: &mut Engine, state: &AppState, at: i64) -> Vec<String> {
    let before = engine.sends.len();
    for t in [at, at + 60, at + 120] {
        engine.evaluate(&state.to_json(), t, &mut |_, _| true);
    }
    engine.sends[before..]
        .iter()
        .filter(|s| s.destination.service == "herald")
        .map(|s| s.trigger.clone())
        .collect()
}

/// Issue 23: the previous `oncePer` counted resources requiring pruning, so a swap at the same count (the Service is
/// pruned by hand, a ConfigMap now waits) was never sent and Herald kept the wrong resource. The kit names them.
#[test]
fn a_swap_of_the_resource_requiring_pruning_at_the_same_count_is_sent() {
    let service = ("Service", "payments-legacy");
    let config_map = ("ConfigMap", "payments-flags");
    let secret = ("Secret", "payments-old-keys");
    // The last sync (prune off) left the Service; then the swap.
    let waiting = pruning_state(vec![service], vec![service]);
    let swapped = pruning_state(vec![config_map], vec![service]);

    let mut engine = with_operator_triggers(kit_engine());
    herald_sends_for(&mut engine, &waiting, START + 60);
    assert_eq!(
        herald_sends_for(&mut engine, &waiting, START + 600),
        Vec::<String>::new(),
        "nothing changed"
    );
    let sends = herald_sends_for(&mut engine, &swapped, START + 1200);
    assert!(!sends.is_empty(), "the swap was not sent to Herald");
    assert!(sends.iter().all(|t| t.starts_with("herald-on-prune-")), "{sends:?}");

    // The next sync leaves the ConfigMap: both pruning triggers turn false, so the next swap is sent again.
    let synced = AppState {
        operation: Some(("Succeeded", START + 1800, Some(START + 1810))),
        ..pruning_state(vec![config_map], vec![config_map])
    };
    herald_sends_for(&mut engine, &synced, START + 1810);
    let swapped_again = AppState {
        pruning: vec![secret],
        ..synced.clone()
    };
    let sends = herald_sends_for(&mut engine, &swapped_again, START + 2400);
    assert!(!sends.is_empty(), "the second swap was not sent to Herald");
    assert!(engine.errors.is_empty(), "expression errors: {:?}", engine.errors);
    assert_eq!(sent(&engine, "on-created"), 1);

    // The previous kit sent nothing for the same swap.
    let mut previous = previous_kit_engine();
    herald_sends_for(&mut previous, &waiting, START + 60);
    assert_eq!(
        herald_sends_for(&mut previous, &swapped, START + 1200),
        Vec::<String>::new()
    );
}

/// Every trigger compiles in the model (the expr subset of 1.9 and later, valid in Argo CD's expr 1.17) and never fails
/// on an Application without `operationState`, `resources` or `syncResult` — a failing condition sends nothing.
#[test]
fn every_condition_is_nil_safe_on_a_new_application() {
    let bare = json!({"metadata": {"name": "new", "namespace": "argocd"},
                      "status": {"sync": {"status": "Unknown"}, "health": {"status": "Missing"}}});
    let running = json!({"metadata": {"name": "new", "namespace": "argocd"},
                         "status": {"sync": {"status": "OutOfSync"}, "health": {"status": "Missing"},
                                    "operationState": {"phase": "Running"}}});
    // Never synced, but a resource already waits to be pruned (it was removed from Git): there is no sync result.
    let never_synced = AppState {
        operation: None,
        ..pruning_state(vec![("Service", "payments-legacy")], vec![])
    }
    .to_json();
    let mut engine = kit_engine();
    engine.evaluate(&bare, START, &mut |_, _| true);
    engine.evaluate(&running, START + 60, &mut |_, _| true);
    engine.evaluate(&never_synced, START + 120, &mut |_, _| true);
    assert!(engine.errors.is_empty(), "expression errors: {:?}", engine.errors);
    assert!(sent(&engine, "herald-on-sync-running") == 1 && sent(&engine, "herald-on-sync-unknown") == 1);
    assert_eq!(sent(&engine, "herald-on-prune-pending"), 1);
    assert_eq!(sent(&engine, "herald-on-prune-cleared"), 0);
}

/// The model knows only the expression subset it documents: a condition using anything else fails to parse, so the
/// kit cannot start using a feature without someone checking which expr version has it.
#[test]
fn the_model_refuses_expressions_outside_its_subset() {
    for outside in [
        "upper(app.metadata.name) == 'A'",
        "app.metadata.name matches '^pay'",
        "app.status.resources[0:2] != nil",
        "let x = 1; x == 1",
        "app.metadata.labels?.team ?? 'none'",
        "len(app.status.resources) > 1",
    ] {
        assert!(engine::parse(outside).is_err(), "`{outside}` should not parse");
    }
    for inside in [
        "app.status?.resources != nil and any(app.status.resources, {.requiresPruning == true})",
        "not (app.metadata.name in ['a', 'b']) or app.status.sync.status == 'Synced'",
        "app.status?.operationState == nil ? 0 : len(filter(app.status.resources, {#.requiresPruning == true}))",
    ] {
        assert!(engine::parse(inside).is_ok(), "`{inside}` should parse");
    }
}

/// Without `oncePer` a failed send is forgotten, so Argo CD tries again at the next evaluation while the condition
/// holds (README.md "Triggers").
#[test]
fn a_failed_send_is_tried_again_at_the_next_evaluation_while_the_condition_holds() {
    let degraded = AppState {
        sync: "Synced",
        health: "Degraded",
        operation: Some(("Succeeded", START, Some(START + 20))),
        pruning: vec![],
        skipped: vec![],
    };
    let mut engine = kit_engine();
    engine.evaluate(&degraded.to_json(), START + 60, &mut |_, _| false);
    engine.evaluate(&degraded.to_json(), START + 120, &mut |_, _| true);
    engine.evaluate(&degraded.to_json(), START + 180, &mut |_, _| true);
    let tries: Vec<bool> = engine
        .sends
        .iter()
        .filter(|s| s.trigger == "herald-on-health-degraded")
        .map(|s| s.delivered)
        .collect();
    assert_eq!(tries, vec![false, true]);
}
