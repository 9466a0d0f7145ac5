//! Delivery through the outbox to receivers on wiremock: outages, Retry-After, dead rows, ordering, and one ticket
//! per incident across a kill -9.

use std::time::Duration;

use crate::helpers::*;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

fn failing_then_ok(fails: u64, fail: ResponseTemplate, ok: ResponseTemplate) -> (Mock, Mock) {
    (
        Mock::given(method("POST"))
            .and(path("/hooks/mm"))
            .respond_with(fail)
            .up_to_n_times(fails)
            .with_priority(1),
        Mock::given(method("POST"))
            .and(path("/hooks/mm"))
            .respond_with(ok)
            .with_priority(2),
    )
}

fn texts(reqs: &[Request]) -> Vec<String> {
    reqs.iter()
        .map(|r| {
            let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json body");
            v["text"].as_str().unwrap_or("").to_string()
        })
        .collect()
}

fn config(server: &MockServer, extra: &str) -> String {
    format!(
        r#"
receivers: [{{name: mm, send_resolved: true, mattermost: {{webhook_url: "{}/hooks/mm"}}}}]
teams: {{payments: {{receivers: [mm]}}}}
rules: {{sync_failed: {{for: 0s}}, out_of_sync: {{enabled: false}}}}
grouping: {{group_wait: 0s, group_interval: 1s}}
outbox: {{poll_interval: 50ms, initial_backoff: 200ms, max_backoff: 1s}}
{extra}
"#,
        server.uri()
    )
}

pub(crate) fn failed_sync(name: &str, started: &str) -> String {
    with_operation(
        &envelope(name, "payments", "OutOfSync", "Healthy", &now_rfc3339()),
        serde_json::json!({"phase": "Failed", "message": "one or more objects failed to apply", "startedAt": started}),
    )
}

pub(crate) fn recovered(name: &str, started: &str) -> String {
    with_operation(
        &envelope(name, "payments", "Synced", "Healthy", &now_rfc3339()),
        serde_json::json!({"phase": "Succeeded", "message": "successfully synced", "startedAt": started}),
    )
}

#[tokio::test]
async fn a_receiver_down_for_a_while_gets_everything_afterwards_in_order() {
    let server = MockServer::start().await;
    let (fail, ok) = failing_then_ok(6, ResponseTemplate::new(503), ResponseTemplate::new(200));
    fail.mount(&server).await;
    ok.mount(&server).await;
    let app = TestApp::spawn(&config(&server, "")).await;
    assert_eq!(
        app.post(failed_sync("pay-api", "2026-01-01T00:00:00Z")).await.status(),
        202
    );
    eventually(Duration::from_secs(5), || async {
        (!server.received_requests().await.unwrap_or_default().is_empty()).then_some(())
    })
    .await
    .expect("the first attempt failed before the resolve arrives");
    assert_eq!(
        app.post(recovered("pay-api", "2026-01-01T00:05:00Z")).await.status(),
        202
    );
    let delivered = eventually(Duration::from_secs(20), || async {
        let reqs = server.received_requests().await.unwrap_or_default();
        (reqs.len() >= 8).then_some(reqs)
    })
    .await
    .expect("6 failures, then both messages");
    app.settle().await;
    let all = texts(&server.received_requests().await.unwrap_or_default());
    assert_eq!(all.len(), 8, "no extra deliveries: {all:#?}");
    // Every failed attempt was the open; the resolve waited behind it.
    assert!(all[..7].iter().all(|t| t.contains("**FIRING**")), "{all:#?}");
    assert!(all[7].contains("**RESOLVED**"), "{all:#?}");
    assert_eq!(delivered.len(), 8);
    assert_eq!(app.get_json("/v1/outbox?state=done").await["count"], 2);
    app.stop().await;
}

#[tokio::test]
async fn retry_after_is_obeyed() {
    let server = MockServer::start().await;
    let (fail, ok) = failing_then_ok(
        1,
        ResponseTemplate::new(429).insert_header("Retry-After", "2"),
        ResponseTemplate::new(200),
    );
    fail.mount(&server).await;
    ok.mount(&server).await;
    let app = TestApp::spawn(&config(&server, "")).await;
    app.post(failed_sync("pay-api", "2026-01-01T00:00:00Z")).await;
    eventually(Duration::from_secs(5), || async {
        (server.received_requests().await.unwrap_or_default().len() == 1).then_some(())
    })
    .await
    .expect("first attempt");
    let first = std::time::Instant::now();
    let_time_pass(Duration::from_millis(1500)).await;
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1,
        "no retry before Retry-After"
    );
    eventually(Duration::from_secs(5), || async {
        (server.received_requests().await.unwrap_or_default().len() == 2).then_some(())
    })
    .await
    .expect("retried");
    assert!(first.elapsed() >= Duration::from_millis(1900));
    app.stop().await;
}

#[tokio::test]
async fn a_permanent_failure_is_dead_visible_and_retryable() {
    let server = MockServer::start().await;
    let (fail, ok) = failing_then_ok(
        1,
        ResponseTemplate::new(400).set_body_string("invalid_payload"),
        ResponseTemplate::new(200),
    );
    fail.mount(&server).await;
    ok.mount(&server).await;
    let app = TestApp::spawn(&config(&server, "")).await;
    app.post(failed_sync("pay-api", "2026-01-01T00:00:00Z")).await;
    let dead = eventually(Duration::from_secs(5), || async {
        let v = app.get_json("/v1/outbox?state=dead").await;
        (v["count"] == 1).then_some(v)
    })
    .await
    .expect("dead after a 400");
    assert!(
        dead["items"][0]["last_error"].as_str().unwrap_or("").contains("400"),
        "{dead}"
    );
    app.settle().await;
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1,
        "a 400 is never retried by itself"
    );
    let page = app
        .client
        .get(format!("{}/", app.address))
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    assert!(page.contains("Dead notifications (1)"), "the status page shows it");
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("herald_outbox{receiver=\"mm\",state=\"dead\"} 1"),
        "{metrics}"
    );
    let id = dead["items"][0]["id"].as_i64().expect("id");
    let r = app
        .client
        .post(format!("{}/v1/outbox/{id}/retry", app.address))
        .send()
        .await
        .expect("retry");
    assert_eq!(r.status(), 202);
    eventually(Duration::from_secs(5), || async {
        let v = app.get_json("/v1/outbox?state=done").await;
        (v["count"] == 1).then_some(())
    })
    .await
    .expect("delivered after the retry");
    assert_eq!(server.received_requests().await.unwrap_or_default().len(), 2);
    assert_eq!(app.get_json("/v1/outbox?state=dead").await["count"], 0);
    let metrics = app.metrics().await;
    // No dead row left: the label set is gone from /metrics, not kept at 0 (issue 12).
    assert!(
        !metrics.contains("herald_outbox{receiver=\"mm\",state=\"dead\"}"),
        "the dead label set is gone: {metrics}"
    );
    assert!(
        metrics.contains("# TYPE herald_outbox gauge"),
        "the family is still described"
    );
    app.stop().await;
}

/// A crash (kill -9 of the real binary) after GitHub created the issue but before Herald recorded it: after the
/// restart Herald finds the issue by its fingerprint label and comments; it never opens a second one.
#[tokio::test]
async fn a_crash_between_creating_a_ticket_and_recording_it_opens_no_second_ticket() {
    let gh = MockServer::start().await;
    let issue = serde_json::json!({"number": 7, "html_url": "https://github.example/acme/pay/issues/7", "state": "open",
                                   "labels": [{"name": "argocd"}], "title": "x"});
    Mock::given(method("GET"))
        .and(path("/repos/acme/pay/issues"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!([])))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&gh)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/pay/issues"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!([issue.clone()])))
        .with_priority(2)
        .mount(&gh)
        .await;
    Mock::given(method("POST"))
        .and(path("/repos/acme/pay/issues"))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_json(issue.clone())
                .set_delay(Duration::from_secs(3)),
        )
        .mount(&gh)
        .await;
    Mock::given(method("POST"))
        .and(path("/repos/acme/pay/issues/7/comments"))
        .respond_with(ResponseTemplate::new(201).set_body_json(serde_json::json!({"id": 1})))
        .mount(&gh)
        .await;
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            r#"
server: {{listen: "127.0.0.1:0"}}
storage: {{url: "sqlite://{db}"}}
receivers: [{{name: gh, github: {{api_url: "{api}", repo: acme/pay, token: ghp-test-token, labels: [argocd]}}}}]
teams: {{payments: {{receivers: [gh]}}}}
rules: {{sync_failed: {{for: 0s}}, out_of_sync: {{enabled: false}}}}
grouping: {{group_wait: 0s}}
outbox: {{lease: 2s, poll_interval: 50ms, initial_backoff: 100ms}}
scheduler: {{tick: 50ms}}
"#,
            db = dir.path().join("h.db").display(),
            api = gh.uri()
        ),
    )
    .expect("config");
    let mut bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/v1/argocd/events", bin.address))
        .body(failed_sync("pay-api", "2026-01-01T00:00:00Z"))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 202);
    let creates = || async {
        gh.received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .filter(|r| r.method.as_str() == "POST" && r.url.path() == "/repos/acme/pay/issues")
            .count()
    };
    eventually(Duration::from_secs(10), || async {
        (creates().await == 1).then_some(())
    })
    .await
    .expect("the ticket creation reached GitHub");
    bin.kill9(); // GitHub has the issue; Herald never heard the answer.
    let bin = Binary::start(&cfg, &[]);
    let comments = eventually(Duration::from_secs(15), || async {
        let n = gh
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .filter(|r| r.url.path() == "/repos/acme/pay/issues/7/comments")
            .count();
        (n >= 1).then_some(n)
    })
    .await
    .expect("after the restart the existing issue is found and commented on");
    assert_eq!(comments, 1);
    bin.settle().await;
    assert_eq!(creates().await, 1, "exactly one ticket");
    drop(bin);
}

/// A PagerDuty events API on wiremock that answers 500 to every page about `failing` and 202 to the others.
async fn pager_failing_for(failing: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v2/enqueue"))
        .and(wiremock::matchers::body_string_contains(failing))
        .respond_with(ResponseTemplate::new(500))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v2/enqueue"))
        .respond_with(ResponseTemplate::new(202).set_body_json(serde_json::json!({"status": "success"})))
        .with_priority(2)
        .mount(&server)
        .await;
    server
}

/// How many pages the pager was sent about `app`.
async fn pages_about(server: &MockServer, app: &str) -> usize {
    let requests = server.received_requests().await.unwrap_or_default();
    (requests.iter())
        .filter(|r| String::from_utf8_lossy(&r.body).contains(app))
        .count()
}

/// `name` of team payments, OutOfSync, as Argo CD sends it at the manual clock's time.
async fn out_of_sync_at(app: &TestApp, clock: &herald::clock::ManualClock, name: &str) {
    use herald::clock::Clock;
    let body = envelope(name, "payments", "OutOfSync", "Healthy", &clock.now().to_rfc3339());
    assert_eq!(app.post(body).await.status(), 202);
}

#[tokio::test]
async fn one_incidents_page_failing_holds_back_no_other_incidents_escalation_to_the_same_pager() {
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z").expect("time");
    let clock = herald::clock::ManualClock::new(t0.with_timezone(&chrono::Utc));
    let pager = pager_failing_for("pay-a").await;
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let cfg = format!(
        r#"
receivers:
  - {{name: chat, console: {{file: "{chat}"}}}}
  - {{name: pager, pagerduty: {{url: "{pd}/v2/enqueue", routing_key: R0UT1NGKEY0000000000000000000000}}}}
teams: {{payments: {{receivers: [chat], escalation: [{{after: 1h, receivers: [pager]}}]}}}}
grouping: {{group_wait: 0s, group_interval: 1m, repeat_interval: 12h}}
"#,
        chat = dir.path().join("chat.jsonl").display(),
        pd = pager.uri()
    );
    let app = TestApp::spawn_in(dir.clone(), &cfg, std::sync::Arc::new(clock.clone())).await;

    out_of_sync_at(&app, &clock, "pay-a").await;
    app.advance(&clock, Duration::from_secs(61 * 60)).await; // pay-a fires
    out_of_sync_at(&app, &clock, "pay-b").await;
    app.advance(&clock, Duration::from_secs(61 * 60)).await; // pay-a escalates (and fails), pay-b fires
    assert_eq!(pages_about(&pager, "pay-a").await, 1, "pay-a's page was tried");
    app.advance(&clock, Duration::from_secs(61 * 60)).await; // pay-b escalates; pay-a's page is retried

    assert!(pages_about(&pager, "pay-a").await >= 2, "pay-a's page is retried");
    assert_eq!(
        pages_about(&pager, "pay-b").await,
        1,
        "pay-b's escalation is sent, whatever happens to pay-a's"
    );
    let pending = app.get_json("/v1/outbox?state=pending").await;
    assert_eq!(pending["count"], 1, "only pay-a's page waits: {pending}");
    app.stop().await;
}

#[tokio::test]
async fn an_email_to_alice_failing_holds_back_no_slack_message_to_her() {
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z").expect("time");
    let clock = herald::clock::ManualClock::new(t0.with_timezone(&chrono::Utc));
    let slack = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat.postMessage"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(serde_json::json!({"ok": true, "channel": "D0ALICE", "ts": "1.0"})),
        )
        .mount(&slack)
        .await;
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    // Nothing listens on the mail port: every e-mail fails and is retried.
    let cfg = crate::initiator::config(dir.path(), &slack, free_port());
    let app = TestApp::spawn_in(dir.clone(), &cfg, std::sync::Arc::new(clock.clone())).await;
    let at = {
        use herald::clock::Clock;
        clock.now().to_rfc3339()
    };
    let body = with_operation(
        &envelope("payments-api", "payments", "OutOfSync", "Healthy", &at),
        serde_json::json!({"phase": "Failed", "message": "one or more objects failed to apply", "startedAt": at,
               "operation": {"initiatedBy": {"username": "alice"}, "sync": {"revision": "0123456789abcdef0123456789abcdef01234567"}}}),
    );
    assert_eq!(app.post(body).await.status(), 202);
    app.settle().await;
    app.advance(&clock, Duration::from_secs(5)).await; // the e-mail is tried again, and fails again

    let channels: Vec<String> = (slack.received_requests().await.unwrap_or_default().iter())
        .filter_map(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
        .filter_map(|b| b["channel"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        channels,
        ["U024BE7LH"],
        "alice's Slack message does not wait for her e-mail"
    );
    let pending = app.get_json("/v1/outbox?state=pending").await;
    assert_eq!(pending["count"], 1, "only the e-mail waits: {pending}");
    assert_eq!(pending["items"][0]["receiver"], "mail", "{pending}");
    app.stop().await;
}
