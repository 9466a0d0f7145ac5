//! Acknowledgements from the outside: `POST /v1/incidents/{id}/ack` and `/unack` with a `respond` credential stop
//! repeats and further escalation steps (the resolve is still sent), are told to PagerDuty (`acknowledge`, same
//! dedup_key), shown in the API, the status page and later messages; a re-firing starts unacknowledged; an
//! acknowledgement for a while ends and repeats resume; bad requests get a 4xx that says why.

use std::sync::Arc;
use std::time::Duration;

use crate::helpers::*;
use herald::clock::{Clock, ManualClock};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const ALICE: &str = "alice-respond-token-0123456789";
const READER: &str = "reader-token-0123456789";
const ARGOCD: &str = "argocd-ingest-token-0123456789";

fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z")
        .expect("t")
        .with_timezone(&chrono::Utc)
}

fn config(dir: &std::path::Path, pagerduty: &str) -> String {
    format!(
        r#"
server:
  auth:
    bearer_tokens: [{{name: alice, token: {ALICE}, scope: respond}}]
    read_tokens: [{{name: dashboard, token: {READER}}}]
    ingest_tokens: [{ARGOCD}]
receivers:
  - {{name: chat, console: {{file: "{d}/chat.jsonl"}}}}
  - {{name: pager, pagerduty: {{url: "{pagerduty}/v2/enqueue", routing_key: R0UT1NGKEY000000000000000000000}}}}
  - {{name: manager, console: {{file: "{d}/manager.jsonl"}}}}
ownership: {{default_team: payments}}
teams:
  payments:
    receivers: [chat]
    escalation: [{{after: 10m, receivers: [pager]}}, {{after: 40m, receivers: [manager]}}]
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1m, repeat_interval: 1h}}
"#,
        d = dir.display()
    )
}

async fn post_event(app: &TestApp, clock: &ManualClock, health: &str) {
    let body = envelope("pay-api", "payments", "Synced", health, &clock.now().to_rfc3339());
    let r = app.post_as(ARGOCD, body).await;
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
}

async fn call(app: &TestApp, token: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = app.client.post(format!("{}{path}", app.address)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.expect("request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn incidents(app: &TestApp, state: &str) -> Vec<Value> {
    let r = app
        .client
        .get(format!("{}/v1/incidents?state={state}", app.address))
        .bearer_auth(READER)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.expect("json");
    v["items"].as_array().cloned().unwrap_or_default()
}

/// The PagerDuty events received so far, as `(event_action, dedup_key)`.
async fn pages(server: &MockServer) -> Vec<(String, String)> {
    (server.received_requests().await.unwrap_or_default().iter())
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            (s("event_action"), s("dedup_key"))
        })
        .collect()
}

async fn pagerduty() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v2/enqueue"))
        .respond_with(ResponseTemplate::new(202).set_body_json(json!({"status": "success"})))
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn an_acknowledged_incident_is_neither_repeated_nor_escalated_its_resolve_is_sent_and_a_refiring_starts_afresh() {
    let pd = pagerduty().await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&d, &pd.uri()), Arc::new(clock.clone())).await;
    let (chat, manager) = (d.join("chat.jsonl"), d.join("manager.jsonl"));

    post_event(&app, &clock, "Degraded").await;
    assert_eq!(wait_for(&chat, 1).await[0]["action"], "open");
    // The first escalation step pages.
    app.advance(&clock, Duration::from_secs(11 * 60)).await;
    let paged = eventually(Duration::from_secs(10), || async {
        let p = pages(&pd).await;
        (!p.is_empty()).then_some(p)
    })
    .await
    .expect("the pager was triggered");
    assert_eq!(paged[0].0, "trigger");
    let dedup_key = paged[0].1.clone();

    let id = incidents(&app, "firing").await[0]["id"].as_i64().expect("id");
    let (status, acked) = call(
        &app,
        ALICE,
        &format!("/v1/incidents/{id}/ack"),
        Some(json!({"comment": "looking at the rollout"})),
    )
    .await;
    assert_eq!(status, 200, "{acked}");
    assert_eq!(
        acked["acknowledged"]["by"], "alice",
        "the credential's name, never the token"
    );
    assert!(acked["acknowledged"]["until"].is_null(), "until resolved: {acked}");
    assert!(!acked.to_string().contains(ALICE), "no token in the answer");

    // PagerDuty hears the acknowledgement on the same alert.
    let told = eventually(Duration::from_secs(10), || async {
        let p = pages(&pd).await;
        (p.len() >= 2).then_some(p)
    })
    .await
    .expect("pagerduty told");
    assert_eq!(told[1], ("acknowledge".to_string(), dedup_key.clone()));

    // Shown in the API and on the status page.
    let listed = &incidents(&app, "firing").await[0];
    assert_eq!(listed["acknowledged"]["by"], "alice");
    assert_eq!(listed["acknowledged"]["comment"], "looking at the rollout");
    assert_eq!(listed["held"]["by"], "acknowledged", "{listed}");
    let page = app
        .client
        .get(format!("{}/", app.address))
        .bearer_auth(READER)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    assert!(
        page.contains("Acknowledged by alice at 09:11 UTC, until resolved"),
        "{page}"
    );

    // Two hours on: no repeat to chat, no second escalation step to the manager.
    for _ in 0..8 {
        app.advance(&clock, Duration::from_secs(15 * 60)).await;
    }
    app.settle().await;
    assert_eq!(
        delivered(&chat).len(),
        1,
        "no repeat while acknowledged: {:?}",
        delivered(&chat)
    );
    assert!(delivered(&manager).is_empty(), "no further escalation step");
    assert_eq!(pages(&pd).await.len(), 2, "nothing more to the pager");

    // The resolve is still sent, and says who acknowledged it.
    post_event(&app, &clock, "Healthy").await;
    app.advance(&clock, Duration::from_secs(61)).await; // the group's next flush: group_interval after its last
    let got = wait_for(&chat, 2).await;
    assert_eq!(got[1]["action"], "resolve");
    assert_eq!(got[1]["incidents"][0]["acknowledged"]["by"], "alice", "{}", got[1]);
    let resolved_pages = eventually(Duration::from_secs(10), || async {
        let p = pages(&pd).await;
        (p.len() >= 3).then_some(p)
    })
    .await
    .expect("pager resolved");
    assert_eq!(resolved_pages[2], ("resolve".to_string(), dedup_key));

    // Fired again after the resolve: a new incident, unacknowledged, told again.
    app.advance(&clock, Duration::from_secs(60)).await;
    post_event(&app, &clock, "Degraded").await;
    app.advance(&clock, Duration::from_secs(61)).await;
    let got = wait_for(&chat, 3).await;
    assert_eq!(got[2]["action"], "open");
    assert!(got[2]["incidents"][0].get("acknowledged").is_none(), "{}", got[2]);
    let firing = incidents(&app, "firing").await;
    assert!(firing[0].get("acknowledged").is_none() && firing[0]["id"] != json!(id));
    app.stop().await;
}

#[tokio::test]
async fn an_acknowledgement_for_a_while_ends_and_repeats_resume_as_after_an_unack() {
    let pd = pagerduty().await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&d, &pd.uri()), Arc::new(clock.clone())).await;
    let chat = d.join("chat.jsonl");
    post_event(&app, &clock, "Degraded").await;
    wait_for(&chat, 1).await;
    let id = incidents(&app, "firing").await[0]["id"].as_i64().expect("id");
    let (status, acked) = call(
        &app,
        ALICE,
        &format!("/v1/incidents/{id}/ack"),
        Some(json!({"for": "90m"})),
    )
    .await;
    assert_eq!(status, 200, "{acked}");
    assert_eq!(acked["acknowledged"]["until"], "2026-03-02T10:30:00Z");

    // The repeat due at 10:00 is held; at 10:31 the acknowledgement has ended and the next look repeats.
    app.advance(&clock, Duration::from_secs(61 * 60)).await;
    app.advance(&clock, Duration::from_secs(2 * 60)).await;
    assert_eq!(delivered(&chat).len(), 1, "held while acknowledged");
    app.advance(&clock, Duration::from_secs(30 * 60)).await;
    app.advance(&clock, Duration::from_secs(2 * 60)).await;
    let got = wait_for(&chat, 2).await;
    assert_eq!(got[1]["reason"], "still firing", "{}", got[1]);

    // Acknowledged again, then given back: repeats resume after the next repeat_interval.
    let (status, _) = call(&app, ALICE, &format!("/v1/incidents/{id}/ack"), None).await;
    assert_eq!(status, 200);
    app.advance(&clock, Duration::from_secs(61 * 60)).await;
    app.advance(&clock, Duration::from_secs(2 * 60)).await;
    assert_eq!(delivered(&chat).len(), 2, "held again");
    let (status, back) = call(&app, ALICE, &format!("/v1/incidents/{id}/unack"), None).await;
    assert_eq!(status, 200, "{back}");
    assert!(back.get("acknowledged").is_none());
    app.advance(&clock, Duration::from_secs(2 * 60)).await;
    app.advance(&clock, Duration::from_secs(60)).await;
    let got = wait_for(&chat, 3).await;
    assert_eq!(got[2]["reason"], "still firing");
    app.stop().await;
}

#[tokio::test]
async fn bad_acknowledgements_get_a_4xx_that_says_why() {
    let pd = pagerduty().await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&d, &pd.uri()), Arc::new(clock.clone())).await;
    post_event(&app, &clock, "Degraded").await;
    wait_for(&d.join("chat.jsonl"), 1).await;
    let id = incidents(&app, "firing").await[0]["id"].as_i64().expect("id");
    let ack = format!("/v1/incidents/{id}/ack");
    let cases: Vec<(&str, &str, Option<Value>, u16, &str)> = vec![
        (ALICE, "/v1/incidents/999999/ack", None, 404, "no incident 999999"),
        (ALICE, "/v1/incidents/abc/ack", None, 400, "positive number"),
        (
            ALICE,
            &ack,
            Some(json!({"for": "soon"})),
            400,
            "invalid acknowledgement",
        ),
        (
            ALICE,
            &ack,
            Some(json!({"for": "1h", "until": "2026-03-02T12:00:00Z"})),
            422,
            "not both",
        ),
        (
            ALICE,
            &ack,
            Some(json!({"until": "2026-03-01T12:00:00Z"})),
            422,
            "in the future",
        ),
        (
            ALICE,
            &ack,
            Some(json!({"comment": "x".repeat(5000)})),
            422,
            "at most 4096 bytes",
        ),
        (ALICE, &ack, Some(json!({"who": "mallory"})), 400, "unknown field"),
        (READER, &ack, None, 403, "this needs respond"),
        ("wrong-token-0123456789", &ack, None, 401, ""),
    ];
    for (token, path, body, want, says) in cases {
        let (status, answer) = call(&app, token, path, body).await;
        assert_eq!(status, want, "{path}: {answer}");
        assert!(
            answer.to_string().contains(says),
            "{path}: {answer} should say {says:?}"
        );
    }
    assert!(
        incidents(&app, "firing").await[0].get("acknowledged").is_none(),
        "nothing was acknowledged"
    );
    // `respond` is not `admin`: no silences.
    let r = app
        .client
        .post(format!("{}/v1/silences", app.address))
        .bearer_auth(ALICE)
        .json(&json!({"matchers": [{"name": "app", "value": "*"}], "duration": "1h"}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 403);

    // A resolved incident: nothing to acknowledge.
    post_event(&app, &clock, "Healthy").await;
    let (status, answer) = call(&app, ALICE, &ack, None).await;
    assert_eq!(status, 409, "{answer}");
    assert!(answer["error"].as_str().unwrap_or_default().contains("resolved"));
    let (status, _) = call(&app, ALICE, &format!("/v1/incidents/{id}/unack"), None).await;
    assert_eq!(status, 409);
    app.stop().await;
}
