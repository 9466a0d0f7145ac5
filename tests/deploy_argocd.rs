//! The Argo CD side of the contract (`deploy/argocd/`, DESIGN §2 and §7): what an operator applies must make Argo CD's
//! notifications-engine send Herald, for every state Herald tracks and every change of a field Herald reads, a POST
//! whose body Herald accepts; and it must be installable and removable without touching the operator's other keys.
//!
//! The patch is read as notifications-engine reads it: each `data` value is itself YAML.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

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

/// The one trigger with `oncePer`: it sends once per distinct signature of what Herald reads.
const SIGNATURE_TRIGGER: &str = "herald-on-change";

/// The fields the signature must name (`?.` written as `.`), so that a change of any of them is sent.
const SIGNATURE_FIELDS: &[&str] = &[
    "app.status.sync.status",
    "app.status.health.status",
    "app.status.operationState.phase",
    "app.status.operationState.finishedAt",
    "app.status.resources",
    "requiresPruning",
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

#[test]
fn every_flip_trigger_is_without_once_per_and_the_signature_trigger_is_the_only_one_with_it() {
    let data = data();
    for (name, conditions) in triggers(&data) {
        for condition in conditions {
            if name == SIGNATURE_TRIGGER {
                assert!(
                    condition["oncePer"].as_str().is_some_and(|o| !o.trim().is_empty()),
                    "trigger.{name} must have oncePer"
                );
            } else {
                // With `oncePer` a failed send is dropped; without it Argo CD retries on the next evaluation.
                assert!(
                    condition.get("oncePer").is_none(),
                    "trigger.{name} must not have oncePer"
                );
            }
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
        assert!(
            conditions[0].get("oncePer").is_none(),
            "trigger.{needed} must be a flip trigger"
        );
        let when = conditions[0]["when"].as_str().unwrap_or_default();
        for part in *tests {
            assert!(when.contains(part), "trigger.{needed}: `{when}` should test {part}");
        }
    }
}

#[test]
fn the_signature_trigger_holds_for_every_application_and_its_once_per_names_every_field_herald_reads() {
    let data = data();
    let triggers = triggers(&data);
    let (_, conditions) = triggers
        .iter()
        .find(|(name, _)| *name == SIGNATURE_TRIGGER)
        .unwrap_or_else(|| panic!("no trigger.{SIGNATURE_TRIGGER}"));
    assert_eq!(conditions.len(), 1, "trigger.{SIGNATURE_TRIGGER} has one condition");
    // Always true: it must fire for every Application, only `oncePer` decides whether to send.
    assert_eq!(conditions[0]["when"].as_str().map(str::trim), Some("true"));
    let once_per = conditions[0]["oncePer"].as_str().expect("oncePer is an expression");
    let plain = once_per.replace("?.", ".");
    for field in SIGNATURE_FIELDS {
        assert!(plain.contains(field), "oncePer `{once_per}` should name {field}");
    }
}

/// An expression error would make Argo CD key the trigger without its `oncePer`: one send, then silence. So every
/// object that may be absent (`status`, `operationState`, `sync`, `health`) is read with `?.`, and `resources` only
/// behind a nil check.
#[test]
fn the_signature_reads_objects_that_may_be_absent_nil_safely() {
    let data = data();
    let once_per = data[&format!("trigger.{SIGNATURE_TRIGGER}")][0]["oncePer"]
        .as_str()
        .expect("oncePer is an expression")
        .to_string();
    let guard = "app.status?.resources == nil ? 0 : len(filter(app.status.resources,";
    assert!(
        once_per.contains(guard),
        "`resources` must be counted behind `{guard}`: {once_per}"
    );
    let unguarded = once_per.replace(guard, "");
    for object in ["app.status", "sync", "health", "operationState"] {
        assert!(
            !unguarded.contains(&format!("{object}.")),
            "oncePer reads `{object}` with `.`, which fails when it is absent: {once_per}"
        );
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
    let mut fixture = fixture("021_remove_podinfo_1_1.json");
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
