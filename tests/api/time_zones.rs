//! Times in messages are in their readers' zone: a team's digest zone, else `server.time_zone`; machine-readable
//! fields stay RFC 3339 in UTC.

use std::sync::Arc;
use std::time::Duration;

use crate::helpers::*;
use herald::clock::ManualClock;
use serde_json::Value;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Monday 2026-03-02 09:01 UTC: 10:01 in Berlin, 04:01 in New York.
fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-02T09:01:00Z")
        .expect("t")
        .with_timezone(&chrono::Utc)
}

/// The bodies the webhook at `path` received.
async fn bodies(server: &MockServer, path: &str) -> Vec<Value> {
    (server.received_requests().await.unwrap_or_default().iter())
        .filter(|r| r.url.path() == path)
        .filter_map(|r| serde_json::from_slice(&r.body).ok())
        .collect()
}

#[tokio::test]
async fn a_message_says_its_times_in_the_teams_zone_else_the_servers_and_its_json_in_utc() {
    let hooks = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&hooks)
        .await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let config = format!(
        r#"
server: {{time_zone: Europe/Berlin}}
receivers:
  - {{name: pay-hook, webhook: {{url: "{u}/pay"}}}}
  - {{name: ops-hook, webhook: {{url: "{u}/ops"}}}}
ownership: {{default_team: payments}}
teams:
  payments: {{receivers: [pay-hook]}}
  ops: {{receivers: [ops-hook], digest: {{schedule: "Mon-Fri 09:00", timezone: America/New_York}}}}
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1m, repeat_interval: 1h}}
"#,
        u = hooks.uri()
    );
    let app = TestApp::spawn_in(dir.clone(), &config, Arc::new(clock.clone())).await;
    let pay = envelope("pay-api", "payments", "Synced", "Degraded", &t0().to_rfc3339());
    assert_eq!(app.post(pay).await.status(), 202);
    let ops = envelope("ops-api", "ops", "Synced", "Degraded", &t0().to_rfc3339());
    assert_eq!(app.post(ops).await.status(), 202);
    clock.advance(Duration::from_secs(60));
    app.settle().await;
    let (pay, ops) = (bodies(&hooks, "/pay").await, bodies(&hooks, "/ops").await);
    assert_eq!((pay.len(), ops.len()), (1, 1), "{pay:?} {ops:?}");
    let text = |b: &Value| b["text"].as_str().unwrap_or_default().to_string();
    // payments has no digest: the server's zone.
    assert!(text(&pay[0]).contains("since 10:01 CET"), "{}", text(&pay[0]));
    // ops reads its digest's zone.
    assert!(text(&ops[0]).contains("since 04:01 EST"), "{}", text(&ops[0]));
    for b in pay.iter().chain(&ops) {
        assert!(!text(b).contains("UTC"), "{}", text(b));
        // The JSON keeps its instants in UTC.
        assert_eq!(b["incidents"][0]["since"], "2026-03-02T09:01:00Z", "{b}");
    }
    app.stop().await;
}
