//! The three incidents of DESIGN §1, end to end through the real binary with short `for` durations and a console
//! receiver that records every notification it gets (one JSON line each). The bodies are copies of the real captured
//! fixtures, edited as each test says (names, resources, messages); everything else is as Argo CD sent it.

use std::path::Path;

use crate::helpers::*;
use serde_json::{Value, json};

fn start(dir: &Path, extra: &str) -> Binary {
    let cfg = dir.join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            r#"
server: {{listen: "127.0.0.1:0"}}
storage: {{url: "sqlite://{d}/h.db"}}
scheduler: {{tick: 100ms}}
outbox: {{poll_interval: 50ms}}
grouping: {{group_wait: 0s, group_interval: 1s, repeat_interval: 1h}}
receivers:
  - {{name: billing-inbox, console: {{file: "{d}/billing.jsonl"}}}}
  - {{name: payments-inbox, console: {{file: "{d}/payments.jsonl"}}}}
  - {{name: platform-inbox, console: {{file: "{d}/platform.jsonl"}}}}
ownership: {{default_team: platform}}
teams:
  billing: {{receivers: [billing-inbox]}}
  payments: {{receivers: [payments-inbox]}}
  platform: {{receivers: [platform-inbox]}}
{extra}
"#,
            d = dir.display()
        ),
    )
    .expect("config");
    Binary::start(&cfg, &[])
}

async fn post(bin: &Binary, body: &Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/v1/argocd/events", bin.address))
        .body(body.to_string())
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
}

/// 1. Prune off: a CronJob deleted from Git keeps running. Based on 021 (prune off — `automated: {}` — with one
/// resource requiring pruning); edited: the resource is a CronJob `invoice-reminders` in `billing`, the
/// Application is labelled `team: billing`, the timestamp is now.
#[tokio::test]
async fn a_cronjob_removed_from_git_with_prune_off_is_reported_to_its_team_until_it_is_gone() {
    let dir = tempfile::tempdir().expect("tmp");
    let bin = start(dir.path(), "rules: {prune_pending: {for: 2s}}");
    let mut body = fixture_json("captured/021_remove_podinfo_1_1.json");
    body["timestamp"] = now_rfc3339().into();
    body["app"]["metadata"]["labels"] = json!({"team": "billing"});
    let resources = body["app"]["status"]["resources"].as_array_mut().expect("resources");
    for r in resources.iter_mut() {
        if r["requiresPruning"] == true {
            *r = json!({"group": "batch", "version": "v1", "kind": "CronJob", "namespace": "billing",
                        "name": "invoice-reminders", "status": "OutOfSync", "requiresPruning": true});
        }
    }
    post(&bin, &body).await;
    let pending = reqwest::get(format!("{}/v1/prune-pending", bin.address))
        .await
        .expect("get")
        .json::<Value>()
        .await
        .expect("json");
    assert_eq!(pending["count"], 1);
    assert_eq!(pending["items"][0]["kind"], "CronJob");
    assert_eq!(pending["items"][0]["name"], "invoice-reminders");
    assert_eq!(pending["items"][0]["team"], "billing");
    assert_eq!(pending["items"][0]["prune_enabled"], false);
    assert!(pending["items"][0]["waiting_since"].is_string());
    bin.settle().await;
    assert!(
        delivered(&dir.path().join("billing.jsonl")).is_empty(),
        "nothing before the rule's time"
    );
    let got = wait_for(&dir.path().join("billing.jsonl"), 1).await;
    let n = &got[0];
    assert_eq!(n["action"], "open");
    let inc = &n["incidents"][0];
    assert_eq!(inc["kind"], "prune_pending");
    assert_eq!(inc["team"], "billing");
    assert_eq!(inc["resources"][0]["kind"], "CronJob");
    assert_eq!(inc["resources"][0]["name"], "invoice-reminders");
    assert!(
        inc["summary"]
            .as_str()
            .unwrap_or("")
            .contains("still running in the cluster"),
        "{inc}"
    );
    let hint = inc["hints"]
        .as_array()
        .expect("hints")
        .iter()
        .find(|h| h["id"] == "prune_disabled")
        .expect("prune hint");
    assert!(
        hint["text"]
            .as_str()
            .unwrap_or("")
            .contains("argocd app sync aaaaaaaaa --prune"),
        "{hint}"
    );
    assert!(hint["text"].as_str().unwrap_or("").contains("Prune=false"), "{hint}");
    // Argo CD keeps sending the same state: nothing more.
    for _ in 0..3 {
        body["timestamp"] = now_rfc3339().into();
        post(&bin, &body).await;
    }
    bin.settle().await;
    assert_eq!(
        delivered(&dir.path().join("billing.jsonl")).len(),
        1,
        "nothing more while it stays that way"
    );
    assert!(
        delivered(&dir.path().join("platform.jsonl")).is_empty(),
        "only the owning team"
    );
    // Pruned by hand (022's shape: Synced, nothing requiring pruning): resolved.
    body["timestamp"] = now_rfc3339().into();
    body["app"]["status"]["sync"]["status"] = "Synced".into();
    for r in body["app"]["status"]["resources"].as_array_mut().expect("resources") {
        r["status"] = "Synced".into();
        r.as_object_mut().expect("obj").remove("requiresPruning");
    }
    post(&bin, &body).await;
    let got = wait_for(&dir.path().join("billing.jsonl"), 2).await;
    assert_eq!(got[1]["action"], "resolve");
    assert_eq!(got[1]["incidents"][0]["state"], "resolved");
    let pending = reqwest::get(format!("{}/v1/prune-pending", bin.address))
        .await
        .expect("get")
        .json::<Value>()
        .await
        .expect("json");
    assert_eq!(pending["count"], 0);
}

/// 2. Prune on: a rename deleted production. Based on 008 (an automated sync that Succeeded, with its history);
/// edited: the Application is `payments` of team payments deploying to `payments-prod` with prune on, and its
/// sync result pruned ConfigMap `payments-config` while creating `payments-cfg`.
#[tokio::test]
async fn a_configmap_renamed_with_prune_on_is_a_critical_pruned_notification_with_recovery_steps() {
    let dir = tempfile::tempdir().expect("tmp");
    let bin = start(dir.path(), "rules: {pruned: {production: {namespaces: ['*-prod']}}}");
    let mut body = fixture_json("captured/008_sync_podinfo_1_2.json");
    body["timestamp"] = now_rfc3339().into();
    let app = &mut body["app"];
    app["metadata"]["name"] = "payments".into();
    app["metadata"]["labels"] = json!({"team": "payments"});
    app["spec"]["destination"]["namespace"] = "payments-prod".into();
    app["spec"]["syncPolicy"]["automated"] = json!({"prune": true, "selfHeal": true});
    let history: Vec<String> = app["status"]["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|h| h["revision"].as_str().unwrap_or("").to_string())
        .collect();
    let previous = history[history.len() - 2].clone();
    let current = history[history.len() - 1].clone();
    let results = app["status"]["operationState"]["syncResult"]["resources"]
        .as_array_mut()
        .expect("resources");
    results.push(json!({"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "payments-prod", "name": "payments-config",
                        "status": "Pruned", "message": "pruned", "syncPhase": "Sync", "hookPhase": "Succeeded"}));
    results.push(json!({"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "payments-prod", "name": "payments-cfg",
                        "status": "Synced", "message": "configmap/payments-cfg created", "syncPhase": "Sync", "hookPhase": "Succeeded"}));
    post(&bin, &body).await;
    let got = wait_for(&dir.path().join("payments.jsonl"), 1).await;
    let inc = &got[0]["incidents"][0];
    assert_eq!(inc["kind"], "pruned");
    assert_eq!(inc["severity"], "critical");
    assert_eq!(inc["team"], "payments");
    assert!(
        inc["summary"].as_str().unwrap_or("").contains("payments-config"),
        "{inc}"
    );
    assert_eq!(inc["resources"][0]["name"], "payments-config");
    assert_eq!(inc["previous_revision"], previous.as_str());
    assert_eq!(inc["revision"], current.as_str());
    assert_eq!(inc["initiated_by"], "automated sync");
    let hints: Vec<&str> = inc["hints"]
        .as_array()
        .expect("hints")
        .iter()
        .map(|h| h["id"].as_str().unwrap_or(""))
        .collect();
    assert!(
        hints.contains(&"rename") && hints.contains(&"pruned_recovery") && hints.contains(&"production_prune"),
        "{hints:?}"
    );
    let text = inc["hints"].to_string();
    assert!(text.contains("payments-cfg"), "names the new ConfigMap");
    assert!(
        text.contains(&format!("argocd app manifests payments --revision {previous}")),
        "{text}"
    );
    assert!(text.contains("argocd app history payments"), "{text}");
    assert!(text.contains("add → migrate consumers → remove"), "{text}");
    // Informational: told once, nothing to resolve; the same body again adds nothing.
    post(&bin, &body).await;
    bin.settle().await;
    assert_eq!(delivered(&dir.path().join("payments.jsonl")).len(), 1);
}

/// 3. A ServiceMonitor whose CRD is missing. Based on 012 (Unknown with a ComparisonError); edited: the condition's
/// message is the one Argo CD gives for a kind the cluster does not know.
#[tokio::test]
async fn a_service_monitor_without_its_crd_is_a_sync_unknown_notification_with_the_missing_crd_hint() {
    let dir = tempfile::tempdir().expect("tmp");
    let bin = start(
        dir.path(),
        "rules: {sync_unknown: {for: 2s}, degraded: {enabled: false}}",
    );
    let mut body = fixture_json("captured/012_sync_podinfo_2_2.json");
    body["timestamp"] = now_rfc3339().into();
    body["app"]["status"]["conditions"][0]["message"] = "Failed to load target state: failed to get cluster version for cluster \
        \"https://kubernetes.default.svc\": resource mapping not found for name: \"podinfo\" namespace: \"podinfo\" from \"\": \
        no matches for kind \"ServiceMonitor\" in version \"monitoring.coreos.com/v1\"\nensure CRDs are installed first"
        .into();
    post(&bin, &body).await;
    let got = wait_for(&dir.path().join("platform.jsonl"), 1).await;
    let inc = &got[0]["incidents"][0];
    assert_eq!(inc["kind"], "sync_unknown");
    assert!(
        inc["summary"].as_str().unwrap_or("").contains("ComparisonError"),
        "{inc}"
    );
    let hint = inc["hints"]
        .as_array()
        .expect("hints")
        .iter()
        .find(|h| h["id"] == "missing_crd")
        .expect("missing CRD hint");
    let text = hint["text"].as_str().unwrap_or("");
    assert!(text.contains("ServiceMonitor"), "{text}");
    assert!(text.contains("sync-wave"), "{text}");
}
