//! Receiving what Argo CD sends and keeping each Application's state.

use crate::helpers::*;
use serde_json::Value;

async fn post_all(app: &TestApp) -> Vec<(String, u16, Value)> {
    let mut out = Vec::new();
    for (name, body) in captured() {
        let r = app.post(body).await;
        let status = r.status().as_u16();
        out.push((name, status, r.json().await.expect("json answer")));
    }
    out
}

#[tokio::test]
async fn the_captured_timeline_gives_the_expected_transitions() {
    let app = TestApp::spawn("").await;
    let results = post_all(&app).await;
    for (name, status, body) in &results {
        assert_eq!(*status, 202, "{name}: {body}");
    }
    let seen = |app_name: &str| -> Vec<(String, String, String, String)> {
        results
            .iter()
            .filter(|(_, _, b)| b["application"] == format!("argocd/{app_name}"))
            .map(|(n, _, b)| {
                (
                    n[..3].to_string(),
                    b["outcome"].as_str().unwrap_or("").to_string(),
                    b["sync"].as_str().unwrap_or("").to_string(),
                    b["health"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    let t = |f: &str, o: &str, s: &str, h: &str| (f.to_string(), o.to_string(), s.to_string(), h.to_string());
    // Written down from reading the files. 000's timestamp is 18:13+02:00 = 16:13Z, later than 003 (16:06Z):
    // 003 arrives after it and is older, so it is stale.
    assert_eq!(
        seen("aaaaaaa"),
        vec![
            t("000", "changed", "Unknown", "Unknown"),
            t("003", "stale", "Unknown", "Unknown"),
            t("009", "changed", "OutOfSync", "Missing"),
            t("010", "changed", "Synced", "Degraded"),
            t("012", "changed", "Unknown", "Degraded"),
            t("015", "changed", "OutOfSync", "Degraded"),
            t("017", "changed", "Synced", "Healthy"),
            t("020", "changed", "OutOfSync", "Healthy"),
            t("022", "changed", "Synced", "Healthy"),
        ]
    );
    assert_eq!(
        seen("aaaaaaaaa"),
        vec![
            t("007", "changed", "Synced", "Healthy"),
            t("008", "changed", "Synced", "Healthy"),
            t("011", "changed", "Synced", "Healthy"),
            t("013", "changed", "Synced", "Healthy"),
            t("014", "changed", "OutOfSync", "Healthy"),
            t("016", "changed", "Synced", "Healthy"),
            t("018", "changed", "OutOfSync", "Healthy"),
            t("019", "changed", "Synced", "Healthy"),
            t("021", "changed", "OutOfSync", "Healthy"),
        ]
    );
    // 005 and 006 are the same delivery twice: one transition, then a duplicate.
    assert_eq!(
        seen("aaaaa-aa"),
        vec![
            t("005", "changed", "Unknown", "Healthy"),
            t("006", "duplicate", "Unknown", "Healthy")
        ]
    );

    // The sync timeline Herald keeps for each Application.
    let sync_steps = |v: &Value| -> Vec<String> {
        v["timeline"]
            .as_array()
            .expect("timeline")
            .iter()
            .filter(|e| e["field"] == "sync")
            .map(|e| e["to"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let podinfo_parent = app.get_json("/v1/apps/argocd/aaaaaaaaa").await;
    assert_eq!(
        sync_steps(&podinfo_parent),
        ["Synced", "OutOfSync", "Synced", "OutOfSync", "Synced", "OutOfSync"]
    );
    // 021: one resource requires pruning.
    let pruning = podinfo_parent["resources_requiring_pruning"].as_array().expect("list");
    assert_eq!(pruning.len(), 1);
    assert_eq!(pruning[0]["name"], "podinfo");
    assert_eq!(pruning[0]["kind"], "Application");

    let demo = app.get_json("/v1/apps/argocd/aaaaaaa").await;
    assert_eq!(
        sync_steps(&demo),
        [
            "Unknown",
            "OutOfSync",
            "Synced",
            "Unknown",
            "OutOfSync",
            "Synced",
            "OutOfSync",
            "Synced"
        ]
    );
    let health_steps: Vec<&str> = demo["timeline"]
        .as_array()
        .expect("timeline")
        .iter()
        .filter(|e| e["field"] == "health")
        .map(|e| e["to"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(health_steps, ["Unknown", "Missing", "Degraded", "Healthy"]);
    assert!(demo["sync"]["since"].is_string() && demo["health"]["since"].is_string());

    let dup = app.get_json("/v1/apps/argocd/aaaaa-aa").await;
    assert_eq!(sync_steps(&dup), ["Unknown"], "005/006 make one transition, not two");
    let conditions: Vec<&str> = dup["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .map(|c| c["type"].as_str().unwrap_or(""))
        .collect();
    assert!(conditions.contains(&"ComparisonError"));

    // Six Applications; 022 carries aaaaaaa's deletionTimestamp (the demo removed it from Git), so it is deleted:
    // five in the list, aaaaaaa among the deleted.
    let all = app.get_json("/v1/apps").await;
    assert_eq!(all["count"], 5);
    let deleted = app.get_json("/v1/apps?deleted=true").await;
    assert_eq!(deleted["count"], 1);
    assert_eq!(deleted["items"][0]["name"], "aaaaaaa");
    let out_of_sync = app.get_json("/v1/apps?sync=OutOfSync").await;
    assert_eq!(out_of_sync["count"], 1);
    assert_eq!(out_of_sync["items"][0]["name"], "aaaaaaaaa");
    let unknown = app.get_json("/v1/apps?sync=Unknown&health=Healthy").await;
    assert_eq!(unknown["count"], 1);
    app.stop().await;
}

#[tokio::test]
async fn body_012_is_unknown_with_a_comparison_error() {
    let app = TestApp::spawn("").await;
    let r = app.post(fixture("captured/012_sync_podinfo_2_2.json")).await;
    assert_eq!(r.status(), 202);
    let v = app.get_json("/v1/apps/argocd/aaaaaaa").await;
    assert_eq!(v["sync"]["status"], "Unknown");
    assert_eq!(v["conditions"][0]["type"], "ComparisonError");
    app.stop().await;
}

/// Each document of the YAML fixture `rel` as a JSON body.
fn yaml_docs_as_json(rel: &str) -> Vec<Vec<u8>> {
    (fixture_yaml_documents(rel).iter())
        .map(|v| serde_json::to_vec(v).expect("json"))
        .collect()
}

#[tokio::test]
async fn every_application_object_is_handled() {
    let app = TestApp::spawn("").await;
    // Whole Applications are accepted as bare bodies.
    for (rel, expect_name) in [
        (
            "objects/01-argo-cd-controller-testdata-diff-cache.yaml",
            vec!["argo-cd/velero-test"],
        ),
        ("objects/02-live-app-outofsync-sync-failed.yaml", vec!["argocd/jen"]),
        (
            "objects/03-argo-cd-metrics-test-apps-outofsync-degraded.yaml",
            vec!["argocd/my-app-3", "argocd/my-app-4", "argocd/my-app", "argocd/my-app"],
        ),
    ] {
        let docs = yaml_docs_as_json(rel);
        assert_eq!(docs.len(), expect_name.len(), "{rel}");
        for (doc, name) in docs.into_iter().zip(expect_name) {
            let r = app.post(doc).await;
            assert_eq!(r.status(), 202, "{rel}");
            let v: serde_json::Value = r.json().await.expect("json");
            assert_eq!(v["application"], name, "{rel}");
        }
    }
    let jen = app.get_json("/v1/apps/argocd/jen").await;
    assert_eq!(jen["operation"]["phase"], "Failed");
    assert_eq!(jen["sync"]["status"], "OutOfSync");

    // Objects without metadata (pieces of an Application) are refused with the missing field named.
    for rel in [
        "objects/04-live-app-multisource-outofsync-pruneskipped.json",
        "objects/05-api-app-sync-succeeded-with-pruned-resources.json",
    ] {
        let r = app.post(fixture(rel)).await;
        assert_eq!(r.status(), 422, "{rel}");
        let v: serde_json::Value = r.json().await.expect("json");
        assert!(
            v["error"].as_str().unwrap_or("").contains("metadata.name is missing"),
            "{rel}: {v}"
        );
    }
    for doc in yaml_docs_as_json("objects/07-argo-cd-docs-v3-status-resource-health-persisted-vs-appTree.yaml") {
        assert_eq!(app.post(doc).await.status(), 422);
    }
    // 06 is the docs' example with a comment and "...": not JSON, refused with the position.
    let r = app
        .post(fixture(
            "objects/06-notifications-docs-webhook-payload-syncResult.jsonc",
        ))
        .await;
    assert_eq!(r.status(), 400);
    let v: serde_json::Value = r.json().await.expect("json");
    assert!(
        v["error"].as_str().unwrap_or("").contains("invalid JSON at line"),
        "{v}"
    );
    // my-app comes twice (operation running, then finished): five Applications, of which my-app-3 (object 03)
    // is being deleted, so it is listed among the deleted ones.
    assert_eq!(
        app.get_json("/v1/apps").await["count"],
        4,
        "nothing stored from refused bodies"
    );
    let deleted = app.get_json("/v1/apps?deleted=true").await;
    assert_eq!(deleted["count"], 1);
    assert_eq!(deleted["items"][0]["name"], "my-app-3");
    app.stop().await;
}

#[tokio::test]
async fn put_and_a_json_content_type_are_accepted_too() {
    let app = TestApp::spawn("").await;
    let body = envelope("pay-api", "payments", "Synced", "Healthy", &now_rfc3339());
    let r = app
        .client
        .put(format!("{}/v1/argocd/events", app.address))
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 202);
    let v: serde_json::Value = r.json().await.expect("json");
    assert_eq!(v["application"], "argocd/pay-api");
    assert_eq!(v["outcome"], "changed");
    assert_eq!(v["transitions"][0]["field"], "sync");
    app.stop().await;
}

#[tokio::test]
async fn an_older_snapshot_does_not_overwrite_a_newer_one() {
    let app = TestApp::spawn("").await;
    let newer = envelope("pay-api", "payments", "Synced", "Healthy", "2026-01-01T10:00:00Z");
    let older = envelope("pay-api", "payments", "OutOfSync", "Degraded", "2026-01-01T09:00:00Z");
    assert_eq!(app.post(newer).await.status(), 202);
    let r = app.post(older).await;
    assert_eq!(
        r.status(),
        202,
        "a stale body is acknowledged (Argo CD must not retry it)"
    );
    let v: serde_json::Value = r.json().await.expect("json");
    assert_eq!(v["outcome"], "stale");
    let state = app.get_json("/v1/apps/argocd/pay-api").await;
    assert_eq!(state["sync"]["status"], "Synced");
    assert_eq!(state["health"]["status"], "Healthy");
    app.stop().await;
}

#[tokio::test]
async fn state_survives_a_restart() {
    let app = TestApp::spawn("").await;
    for (_, body) in captured() {
        assert_eq!(app.post(body).await.status(), 202);
    }
    let before = app.get_json("/v1/apps/argocd/aaaaaaaaa").await;
    let dir = app.stop().await;
    let app = TestApp::spawn_in(dir, "", std::sync::Arc::new(herald::clock::SystemClock)).await;
    let after = app.get_json("/v1/apps/argocd/aaaaaaaaa").await;
    assert_eq!(before["sync"], after["sync"]);
    assert_eq!(before["timeline"], after["timeline"]);
    assert_eq!(app.get_json("/v1/apps").await["count"], 5, "aaaaaaa is deleted (022)");
    assert_eq!(app.get_json("/v1/apps?deleted=true").await["count"], 1);
    // The raw bodies are kept, for replay.
    let raw = app.get_json("/v1/apps/argocd/aaaaaaaaa/raw?limit=3").await;
    assert_eq!(raw["count"], 3);
    assert_eq!(raw["items"][0]["body"]["app"]["metadata"]["name"], "aaaaaaaaa");
    // A body seen before the restart is still a duplicate after it.
    let r = app.post(fixture("captured/021_remove_podinfo_1_1.json")).await;
    let v: serde_json::Value = r.json().await.expect("json");
    assert_eq!(v["outcome"], "duplicate");
    app.stop().await;
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let app = TestApp::spawn("").await;
    assert_eq!(app.get_json("/healthz").await["status"], "ok");
    assert_eq!(app.get_json("/readyz").await["status"], "ready");
    app.post(fixture("captured/021_remove_podinfo_1_1.json")).await;
    app.post(b"not json".to_vec()).await;
    let text = app.metrics().await;
    assert!(
        text.contains("herald_events_received_total{outcome=\"changed\"}"),
        "{text}"
    );
    assert!(
        text.contains("herald_events_received_total{outcome=\"rejected\"}"),
        "{text}"
    );
    assert!(text.contains("herald_ingest_duration_seconds_bucket"), "{text}");
    assert!(
        text.contains("herald_applications{sync=\"OutOfSync\",health=\"Healthy\"}"),
        "{text}"
    );
    app.stop().await;
}

#[tokio::test]
async fn every_list_is_paged_with_a_next_link() {
    let app = TestApp::spawn("rules: {out_of_sync: {for: 1h}}").await;
    for i in 0..5 {
        let body = envelope(&format!("app-{i}"), "payments", "OutOfSync", "Healthy", &now_rfc3339());
        assert_eq!(app.post(body).await.status(), 202);
    }
    let mut seen = Vec::new();
    let mut next = Some("/v1/apps?limit=2".to_string());
    while let Some(path) = next {
        let page = app.get_json(&path).await;
        assert!(page["count"].as_u64().unwrap_or(0) <= 2, "{page}");
        seen.extend(
            page["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|a| a["name"].as_str().unwrap_or_default().to_string()),
        );
        next = page["next"].as_str().map(str::to_string);
        assert!(seen.len() <= 5, "no page twice: {seen:?}");
    }
    seen.sort();
    assert_eq!(seen, ["app-0", "app-1", "app-2", "app-3", "app-4"]);
    // Incidents page by id, newest first.
    let first = app.get_json("/v1/incidents?state=pending&limit=3").await;
    assert_eq!(first["count"], 3);
    let rest = app.get_json(first["next"].as_str().expect("a next link")).await;
    assert_eq!(rest["count"], 2);
    assert!(rest.get("next").is_none(), "the last page has no next link: {rest}");
    let bad = app
        .client
        .get(format!("{}/v1/apps?after=not-a-cursor", app.address))
        .send()
        .await
        .expect("request");
    assert_eq!(bad.status(), 400);
    let too_many = app
        .client
        .get(format!("{}/v1/apps?limit=5000", app.address))
        .send()
        .await
        .expect("request");
    assert_eq!(too_many.status(), 400, "a page of Applications is at most 1000");
    app.stop().await;
}

#[tokio::test]
async fn a_body_dated_minutes_ahead_does_not_hide_a_failed_sync_dated_now() {
    let app = TestApp::spawn("rules: {sync_failed: {for: 0s}}").await;
    // Within server.max_clock_skew (5m), so taken as it is.
    let ahead = (chrono::Utc::now() + chrono::Duration::seconds(290)).to_rfc3339();
    assert_eq!(
        app.post(envelope("pay-api", "payments", "Synced", "Healthy", &ahead))
            .await
            .status(),
        202
    );
    let now = now_rfc3339();
    let failed = with_operation(
        &envelope("pay-api", "payments", "OutOfSync", "Healthy", &now),
        serde_json::json!({"phase": "Failed", "message": "one or more objects failed to apply", "startedAt": now, "finishedAt": now}),
    );
    let r = app.post(failed).await;
    let v: serde_json::Value = r.json().await.expect("json");
    assert_eq!(v["outcome"], "changed", "the failed sync is not stale: {v}");
    let firing = app.get_json("/v1/incidents?state=firing&kind=sync_failed").await;
    assert_eq!(firing["count"], 1, "{firing}");
    assert_eq!(firing["items"][0]["app_name"], "pay-api", "{firing}");
    app.stop().await;
}

#[tokio::test]
async fn a_body_dated_far_in_the_future_does_not_poison_the_application() {
    let app = TestApp::spawn("").await;
    let poison = envelope("pay-api", "payments", "OutOfSync", "Healthy", "2999-01-01T00:00:00Z");
    assert_eq!(app.post(poison).await.status(), 202);
    let fixed = envelope("pay-api", "payments", "Synced", "Healthy", &now_rfc3339());
    let r = app.post(fixed).await;
    let v: serde_json::Value = r.json().await.expect("json");
    assert_eq!(v["outcome"], "changed", "the later body is not stale: {v}");
    assert_eq!(
        app.get_json("/v1/apps/argocd/pay-api").await["sync"]["status"],
        "Synced"
    );
    let metrics = app.metrics().await;
    assert!(metrics.contains("herald_clock_skew_clamped_total 1"), "{metrics}");
    app.stop().await;
}

/// How many bodies the metrics say were answered without parsing (same bytes, Application unchanged since). The
/// recorder is the test process's: other tests add to it, so a test can only say "at least".
async fn repeated(app: &TestApp) -> u64 {
    let metrics = app.metrics().await;
    (metrics.lines())
        .find_map(|l| l.strip_prefix("herald_events_repeated_total "))
        .map_or(0, |v| v.trim().parse().expect("a count"))
}

#[tokio::test]
async fn a_body_sent_again_gets_the_answer_its_application_now_gives_it() {
    let app = TestApp::spawn("").await;
    let first = envelope("pay-api", "payments", "OutOfSync", "Healthy", "2026-01-01T09:00:00Z");
    let later = envelope("pay-api", "payments", "Synced", "Healthy", "2026-01-01T10:00:00Z");
    let outcome = |r: serde_json::Value| {
        (
            r["outcome"].as_str().unwrap_or("").to_string(),
            r["sync"].as_str().unwrap_or("").to_string(),
        )
    };
    let post = |body: String| async { outcome(app.post(body).await.json().await.expect("json")) };
    let before = repeated(&app).await;
    assert_eq!(post(first.clone()).await, ("changed".into(), "OutOfSync".into()));
    assert_eq!(post(first.clone()).await, ("duplicate".into(), "OutOfSync".into()));
    assert_eq!(post(first.clone()).await, ("duplicate".into(), "OutOfSync".into()));
    let after = repeated(&app).await;
    assert!(
        after >= before + 2,
        "both copies were answered from memory: {before} then {after}"
    );
    // A change for the Application: the same old bytes are now stale, not a duplicate of what is stored.
    assert_eq!(post(later.clone()).await, ("changed".into(), "Synced".into()));
    assert_eq!(post(first.clone()).await, ("stale".into(), "Synced".into()));
    assert_eq!(post(first.clone()).await, ("stale".into(), "Synced".into()));
    assert_eq!(post(later.clone()).await, ("duplicate".into(), "Synced".into()));
    // The first stale copy was parsed (its Application had changed since it was judged), the rest were not.
    assert!(repeated(&app).await >= before + 4);
    let state = app.get_json("/v1/apps/argocd/pay-api").await;
    assert_eq!(state["sync"]["status"], "Synced");
    app.stop().await;
}

#[tokio::test]
async fn a_repeated_body_of_a_deleted_application_does_not_bring_it_back() {
    let app = TestApp::spawn("").await;
    let mut outcomes = Vec::new();
    // The captured timeline twice: the second time every body is one Herald has judged, most from memory.
    for pass in 0..2 {
        for (name, body) in captured() {
            let r: serde_json::Value = app.post(body).await.json().await.expect("json");
            if pass == 1 {
                outcomes.push((name, r["outcome"].as_str().unwrap_or("").to_string()));
            }
        }
    }
    assert!(
        outcomes.iter().all(|(_, o)| o == "stale" || o == "duplicate"),
        "{outcomes:#?}"
    );
    assert!(repeated(&app).await > 0);
    assert_eq!(
        app.get_json("/v1/apps").await["count"],
        5,
        "aaaaaaa stays deleted (022)"
    );
    assert_eq!(app.get_json("/v1/apps?deleted=true").await["count"], 1);
    app.stop().await;
}

#[tokio::test]
async fn every_body_that_changed_something_reads_back_as_it_was_sent_across_a_restart() {
    let bodies = captured();
    let (first, second) = bodies.split_at(bodies.len() / 2);
    let mut changes: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    let mut app = TestApp::spawn("").await;
    // The bodies after the restart are stored by a writer that does not remember the ones before.
    for (half, part) in [first, second].into_iter().enumerate() {
        if half == 1 {
            let dir = app.stop().await;
            app = TestApp::spawn_in(dir, "", std::sync::Arc::new(herald::clock::SystemClock)).await;
        }
        for (_, body) in part {
            let r = app.post(body.clone()).await;
            let v: Value = r.json().await.expect("json answer");
            if v["outcome"] == "changed" {
                let name = v["application"].as_str().expect("its Application").to_string();
                changes
                    .entry(name)
                    .or_default()
                    .push(serde_json::from_slice(body).expect("json"));
            }
        }
    }
    assert!(changes.values().any(|v| v.len() > 3), "{changes:?}");
    for (name, sent) in &changes {
        let raw = app.get_json(&format!("/v1/apps/{name}/raw?limit=1000")).await;
        let mut stored: Vec<Value> = raw["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| i["body"].clone())
            .collect();
        stored.reverse();
        assert_eq!(&stored, sent, "{name}: every body, oldest first");
        // A page whose oldest body is in the middle of a run reads the same bodies.
        let page = app.get_json(&format!("/v1/apps/{name}/raw?limit=2")).await;
        let newest: Vec<&Value> = sent.iter().rev().take(2).collect();
        let got: Vec<&Value> = page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| &i["body"])
            .collect();
        assert_eq!(got, newest, "{name}: the newest two");
    }
    app.stop().await;
}

/// Resolved incidents and the timeline of changes are purged after `storage.history_retention` (here 10 days), on a
/// manual clock across a restart (the purge runs at start and then hourly); an open incident stays however old.
#[tokio::test]
async fn resolved_incidents_and_the_timeline_go_after_the_history_retention_open_ones_stay() {
    use herald::clock::{Clock, ManualClock};
    let start: chrono::DateTime<chrono::Utc> = "2026-01-01T00:00:00Z".parse().expect("time");
    let clock = ManualClock::new(start);
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let cfg = "rules: {degraded: {for: 0s}}\nstorage: {raw_retention: 1d, history_retention: 10d}\n";
    let app = TestApp::spawn_in(dir.clone(), cfg, std::sync::Arc::new(clock.clone())).await;
    let send = |name: &'static str, health: &'static str| {
        let body = envelope(name, "payments", "Synced", health, &clock.now().to_rfc3339());
        let app = &app;
        async move { assert_eq!(app.post(body).await.status(), 202) }
    };
    send("ledger", "Degraded").await;
    send("billing", "Degraded").await;
    app.advance(&clock, std::time::Duration::from_secs(60)).await;
    send("ledger", "Healthy").await;
    app.settle().await;
    let items = |v: Value| v["items"].as_array().cloned().unwrap_or_default();
    let resolved = items(app.get_json("/v1/incidents?state=resolved").await);
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    let id = resolved[0]["id"].as_i64().expect("id");
    let timeline = |page: Value| page["timeline"].as_array().map_or(0, Vec::len);
    assert!(timeline(app.get_json("/v1/apps/argocd/ledger").await) > 0);
    let dir = app.stop().await;

    clock.advance(std::time::Duration::from_secs(11 * 24 * 3600));
    let app = TestApp::spawn_in(dir, cfg, std::sync::Arc::new(clock.clone())).await;
    let gone = eventually(std::time::Duration::from_secs(10), || async {
        items(app.get_json("/v1/incidents?state=resolved").await)
            .is_empty()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the resolved incident was purged");
    let page = app
        .client
        .get(format!("{}/v1/incidents/{id}", app.address))
        .send()
        .await
        .expect("get");
    assert_eq!(page.status(), 404);
    let firing = items(app.get_json("/v1/incidents?state=firing").await);
    assert_eq!(firing.len(), 1, "billing's, open since day 0: {firing:?}");
    assert_eq!(
        timeline(app.get_json("/v1/apps/argocd/ledger").await),
        0,
        "its changes are past the retention"
    );
    assert_eq!(
        app.get_json("/v1/apps").await["count"],
        2,
        "the Applications themselves stay"
    );
    app.stop().await;
}
