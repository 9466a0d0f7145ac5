//! PagerDuty change events (issue 15): a successful sync that deployed a new revision is sent once to the
//! pagerduty receivers with `change_events: true` — not again for the same body, not without the key.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::{MockServer, Request, ResponseTemplate};

use crate::helpers::{TestApp, envelope, eventually, now_rfc3339, with_operation};

const OLD: &str = "1111111111111111111111111111111111111111";
const NEW: &str = "2222222222222222222222222222222222222222";

fn config(pagerduty: &MockServer, change_events: bool) -> String {
    format!(
        r#"
teams: {{payments: {{receivers: [console]}}}}
receivers:
  - {{name: console, console: {{}}}}
  - {{name: pd, pagerduty: {{url: "{url}/v2/enqueue", routing_key: R0UT1NGKEY0000000000000000000000, change_events: {change_events}}}}}
"#,
        url = pagerduty.uri(),
    )
}

/// `payments-api` synced to `revision` by alice, with Argo CD's history of what was deployed.
fn synced(revision: &str, history: &[&str]) -> String {
    let mut body: Value = serde_json::from_str(&with_operation(
        &envelope("payments-api", "payments", "Synced", "Healthy", &now_rfc3339()),
        json!({"phase": "Succeeded", "message": "successfully synced", "startedAt": "2026-01-01T09:59:00Z",
               "finishedAt": "2026-01-01T10:00:00Z", "operation": {"initiatedBy": {"username": "alice"}},
               "syncResult": {"revision": revision}}),
    ))
    .expect("json");
    let history: Vec<Value> = (history.iter().enumerate())
        .map(|(id, r)| json!({"id": id, "revision": r, "deployedAt": "2026-01-01T10:00:00Z"}))
        .collect();
    body["app"]["status"]["history"] = json!(history);
    body.to_string()
}

async fn pagerduty() -> MockServer {
    let server = MockServer::start().await;
    let processed = json!({"status": "success", "message": "Change event processed"});
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/v2/change/enqueue"))
        .respond_with(ResponseTemplate::new(202).set_body_json(processed))
        .mount(&server)
        .await;
    server
}

async fn change_events(server: &MockServer) -> Vec<Value> {
    let requests: Vec<Request> = server.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .map(|r| {
            assert_eq!(r.url.path(), "/v2/change/enqueue", "only change events");
            serde_json::from_slice(&r.body).expect("json")
        })
        .collect()
}

#[tokio::test]
async fn a_sync_to_a_new_revision_is_one_change_event_and_the_same_body_again_is_none() {
    let server = pagerduty().await;
    let app = TestApp::spawn(&config(&server, true)).await;
    app.post(synced(OLD, &[OLD])).await;
    app.settle().await;
    assert!(
        change_events(&server).await.is_empty(),
        "the first state Herald hears of is no change"
    );

    let body = synced(NEW, &[OLD, NEW]);
    assert_eq!(app.post(body.clone()).await.status(), 202);

    let sent = eventually(Duration::from_secs(10), || async {
        Some(change_events(&server).await).filter(|e| !e.is_empty())
    })
    .await
    .expect("a change event");
    assert_eq!(
        sent,
        vec![json!({
            "routing_key": "R0UT1NGKEY0000000000000000000000",
            "payload": {
                "summary": "payments-api synced to 2222222 by alice",
                "source": "https://argocd.example.com/applications/argocd/payments-api",
                "timestamp": "2026-01-01T10:00:00+00:00",
                "custom_details": {
                    "revision": NEW,
                    "previous_revision": OLD,
                    "initiator": "alice",
                    "application": "argocd/payments-api",
                    "project": "default",
                    "namespace": "payments-api",
                },
            },
            "links": [{"href": "https://argocd.example.com/applications/argocd/payments-api",
                       "text": "Application in Argo CD"}],
        })]
    );

    app.post(body).await;
    app.post(synced(NEW, &[OLD, NEW]).replace("\"Healthy\"", "\"Progressing\""))
        .await;
    app.settle().await;
    assert_eq!(change_events(&server).await.len(), 1, "one change event per revision");
    app.stop().await;
}

#[tokio::test]
async fn a_sync_of_the_revision_already_deployed_is_no_change() {
    let server = pagerduty().await;
    let app = TestApp::spawn(&config(&server, true)).await;
    app.post(synced(OLD, &[OLD])).await;
    let running = with_operation(
        &envelope("payments-api", "payments", "Synced", "Healthy", &now_rfc3339()),
        json!({"phase": "Running", "startedAt": "2026-01-01T10:59:00Z"}),
    );
    app.post(running).await;

    app.post(synced(OLD, &[OLD, OLD])).await;

    app.settle().await;
    assert!(change_events(&server).await.is_empty());
    app.stop().await;
}

#[tokio::test]
async fn without_change_events_a_new_revision_sends_nothing() {
    let server = pagerduty().await;
    let app = TestApp::spawn(&config(&server, false)).await;
    app.post(synced(OLD, &[OLD])).await;

    app.post(synced(NEW, &[OLD, NEW])).await;

    app.settle().await;
    assert!(change_events(&server).await.is_empty());
    app.stop().await;
}

/// The same sync told again after a restart, to another replica, or by a later body of the same sync that names no
/// person: still one change event (the outbox's once-only key is in the store, not in a replica's memory).
#[tokio::test]
async fn one_change_event_per_sync_across_a_restart_and_two_replicas() {
    for engine in ["sqlite", "postgres"] {
        let server = pagerduty().await;
        let db = crate::fresh_db::fresh_db(engine, "change").await;
        let cfg = format!("{}\nstorage: {{url: \"{}\"}}\n", config(&server, true), db.url);
        let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
        let clock: herald::clock::SharedClock = std::sync::Arc::new(herald::clock::SystemClock);
        let first = TestApp::spawn_in(dir.clone(), &cfg, clock.clone()).await;
        first.post(synced(OLD, &[OLD])).await;
        let body = synced(NEW, &[OLD, NEW]);
        assert_eq!(first.post(body.clone()).await.status(), 202);
        let sent = eventually(Duration::from_secs(10), || async {
            Some(change_events(&server).await).filter(|e| !e.is_empty())
        })
        .await
        .expect("a change event");
        assert_eq!(sent.len(), 1, "{engine}");

        // A second replica on the same store hears the same body, and a later one of the same sync whose
        // initiator is gone (Argo CD sends several bodies per sync).
        let second = TestApp::spawn_in(
            std::sync::Arc::new(tempfile::tempdir().expect("tmp")),
            &cfg,
            clock.clone(),
        )
        .await;
        assert_eq!(second.post(body.clone()).await.status(), 202);
        let automated = body.replace(r#"{"username":"alice"}"#, r#"{"automated":true}"#);
        assert_ne!(automated, body, "the later body names no person");
        assert_eq!(second.post(automated).await.status(), 202);
        second.settle().await;
        first.settle().await;
        second.stop().await;

        // A restart, then the same body again.
        first.stop().await;
        let restarted = TestApp::spawn_in(dir.clone(), &cfg, clock.clone()).await;
        assert_eq!(restarted.post(body).await.status(), 202);
        restarted.settle().await;
        assert_eq!(
            change_events(&server).await.len(),
            1,
            "{engine}: one change event per (Application, revision, operation)"
        );
        restarted.stop().await;
    }
}
