//! "Confirm in the cluster, not in Git": before a timed rule fires, Herald reads the Application from the Argo CD
//! API (wiremock serving the fixture objects) and does not fire when the condition is gone. The periodic resync is
//! off here (`resync_interval: 0s`): these tests count the confirmation requests alone.

use std::time::Duration;

use crate::helpers::*;
use herald::clock::{Clock, ManualClock};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn config(api: &str, dir: &std::path::Path) -> String {
    format!(
        r#"
argocd: {{api: {{url: "{api}", token: argocd-api-token, timeout: 1s, confirm_wait: 10m, resync_interval: 0s}}}}
receivers: [{{name: sink, console: {{file: "{}/sink.jsonl"}}}}]
ownership: {{default_team: ops}}
teams: {{ops: {{receivers: [sink]}}}}
rules: {{out_of_sync: {{for: 1h}}, sync_failed: {{enabled: false}}, degraded: {{enabled: false}}}}
grouping: {{group_wait: 0s}}
"#,
        dir.display()
    )
}

fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z")
        .expect("t")
        .with_timezone(&chrono::Utc)
}

#[tokio::test]
async fn a_condition_confirmed_by_the_api_fires() {
    let api = MockServer::start().await;
    let jen = fixture_yaml("objects/02-live-app-outofsync-sync-failed.yaml");
    Mock::given(method("GET"))
        .and(path("/api/v1/applications/jen"))
        .and(query_param("appNamespace", "argocd"))
        .and(header("authorization", "Bearer argocd-api-token"))
        .respond_with(ResponseTemplate::new(200).set_body_json(jen.clone()))
        .expect(1)
        .mount(&api)
        .await;
    let clock = ManualClock::new(t0());
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&api.uri(), &d), std::sync::Arc::new(clock.clone())).await;
    assert_eq!(app.post(serde_json::to_vec(&jen).expect("json")).await.status(), 202);
    app.advance(&clock, Duration::from_secs(59 * 60)).await;
    assert!(
        api.received_requests().await.unwrap_or_default().is_empty(),
        "the API is asked only when the rule is due"
    );
    app.advance(&clock, Duration::from_secs(2 * 60)).await;
    let got = wait_for(&d.join("sink.jsonl"), 1).await;
    assert_eq!(got[0]["incidents"][0]["app_name"], "jen");
    assert!(
        got[0]["incidents"][0]["notes"].as_array().expect("notes").is_empty(),
        "confirmed: no caveat"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_condition_gone_in_the_cluster_does_not_fire_and_is_recorded() {
    let api = MockServer::start().await;
    // What the cluster says now: the real object 01, Synced.
    let synced = fixture_yaml("objects/01-argo-cd-controller-testdata-diff-cache.yaml");
    Mock::given(method("GET"))
        .and(path("/api/v1/applications/velero-test"))
        .and(query_param("appNamespace", "argo-cd"))
        .respond_with(ResponseTemplate::new(200).set_body_json(synced.clone()))
        .expect(1)
        .mount(&api)
        .await;
    // What Herald heard: a copy of 01 edited to OutOfSync (a Synced event was lost).
    let mut heard = synced.clone();
    heard["status"]["sync"]["status"] = "OutOfSync".into();
    let clock = ManualClock::new(t0());
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&api.uri(), &d), std::sync::Arc::new(clock.clone())).await;
    assert_eq!(app.post(serde_json::to_vec(&heard).expect("json")).await.status(), 202);
    app.advance(&clock, Duration::from_secs(61 * 60)).await;
    eventually(Duration::from_secs(5), || async {
        (!api.received_requests().await.unwrap_or_default().is_empty()).then_some(())
    })
    .await
    .expect("asked the API");
    app.settle().await;
    assert!(delivered(&d.join("sink.jsonl")).is_empty(), "nothing sent");
    let state = app.get_json("/v1/apps/argo-cd/velero-test").await;
    assert_eq!(state["sync"]["status"], "Synced", "the API's snapshot was recorded");
    assert_eq!(
        app.get_json("/v1/incidents?state=resolved&kind=out_of_sync").await["count"],
        1
    );
    assert_eq!(app.get_json("/v1/incidents?state=firing").await["count"], 0);
    app.stop().await;
}

#[tokio::test]
async fn an_unreachable_api_delays_the_rule_a_bounded_time_then_it_fires_unconfirmed() {
    let api = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&api)
        .await;
    let clock = ManualClock::new(t0());
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&api.uri(), &d), std::sync::Arc::new(clock.clone())).await;
    let body = envelope("pay-api", "ops", "OutOfSync", "Healthy", &clock.now().to_rfc3339());
    assert_eq!(app.post(body).await.status(), 202);
    app.advance(&clock, Duration::from_secs(61 * 60)).await;
    app.advance(&clock, Duration::from_secs(5 * 60)).await;
    assert!(
        !api.received_requests().await.unwrap_or_default().is_empty(),
        "it tried"
    );
    assert!(
        delivered(&d.join("sink.jsonl")).is_empty(),
        "within confirm_wait it waits"
    );
    app.advance(&clock, Duration::from_secs(6 * 60)).await; // past fire_at + confirm_wait (10m)
    let got = wait_for(&d.join("sink.jsonl"), 1).await;
    let notes = got[0]["incidents"][0]["notes"].to_string();
    assert!(notes.contains("not confirmed"), "{notes}");
    assert_eq!(got.len(), 1);
    app.stop().await;
}
