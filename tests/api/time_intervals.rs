//! Planned quiet hours from the outside: `time_intervals` named by a team's `mute_time_intervals` or a route's
//! `active_time_intervals`. Inside, nothing is sent and the API and the status page say the incident is muted,
//! by what and until when; what still fires is sent when the interval ends, after a restart too; what was told
//! before and resolves inside is still closed; what fired and resolved inside is never sent.

use std::sync::Arc;
use std::time::Duration;

use crate::helpers::*;
use herald::clock::{Clock, ManualClock};
use serde_json::Value;

const READER: &str = "reader-token-0123456789";
const ARGOCD: &str = "argocd-ingest-token-0123456789";

fn at(s: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(s)
        .expect("t")
        .with_timezone(&chrono::Utc)
}

/// payments (chat) is muted at night in Berlin, 22:00 to 07:00 (21:00 to 06:00 UTC in March, before summer time);
/// `routes[0]` sends sync failures to on-call only during office hours (Monday to Friday, 09:00 to 17:00 UTC).
fn config(dir: &std::path::Path) -> String {
    format!(
        r#"
server:
  auth:
    read_tokens: [{{name: dashboard, token: {READER}}}]
    ingest_tokens: [{ARGOCD}]
receivers:
  - {{name: chat, console: {{file: "{d}/chat.jsonl"}}}}
  - {{name: oncall, console: {{file: "{d}/oncall.jsonl"}}}}
ownership: {{default_team: payments}}
teams:
  payments:
    receivers: [chat]
    mute_time_intervals: [nights]
time_intervals:
  - name: nights
    time_intervals:
      - times: [{{start_time: "22:00", end_time: "24:00"}}, {{start_time: "00:00", end_time: "07:00"}}]
        location: Europe/Berlin
  - name: office
    time_intervals:
      - weekdays: ["monday:friday"]
        times: [{{start_time: "09:00", end_time: "17:00"}}]
routes:
  - {{kind: sync_failed, receivers: [oncall], active_time_intervals: [office]}}
rules: {{degraded: {{for: 0s}}, sync_failed: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1m, repeat_interval: 1h}}
"#,
        d = dir.display()
    )
}

async fn post(app: &TestApp, clock: &ManualClock, name: &str, health: &str) {
    let body = envelope(name, "payments", "Synced", health, &clock.now().to_rfc3339());
    let r = app.post_as(ARGOCD, body).await;
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
}

async fn firing(app: &TestApp) -> Vec<Value> {
    let r = (app.client.get(format!("{}/v1/incidents?state=firing", app.address)))
        .bearer_auth(READER)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.expect("json");
    v["items"].as_array().cloned().unwrap_or_default()
}

async fn status_page(app: &TestApp) -> String {
    (app.client.get(format!("{}/", app.address)))
        .bearer_auth(READER)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html")
}

#[tokio::test]
async fn a_muted_team_is_told_nothing_inside_its_interval_and_what_still_fires_at_its_end_after_a_restart_too() {
    let clock = ManualClock::new(at("2026-03-02T21:30:00Z")); // Monday 22:30 in Berlin
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let chat = d.join("chat.jsonl");
    let app = TestApp::spawn_in(dir.clone(), &config(&d), Arc::new(clock.clone())).await;

    post(&app, &clock, "pay-api", "Degraded").await;
    app.advance(&clock, Duration::from_secs(60)).await;
    let listed = firing(&app).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let held = &listed[0]["held"];
    assert_eq!(held["by"], "muted", "{held}");
    assert_eq!(held["owner"], "team payments", "{held}");
    assert_eq!(held["intervals"], serde_json::json!(["nights"]), "{held}");
    assert_eq!(held["outside"], false, "{held}");
    assert_eq!(held["until"], "2026-03-03T06:00:00Z", "07:00 in Berlin: {held}");
    let page = status_page(&app).await;
    assert!(
        page.contains("muted for team payments (time interval nights) until"),
        "{page}"
    );

    // An hour in the night, then a restart: still nothing.
    app.advance(&clock, Duration::from_secs(3600)).await;
    assert!(delivered(&chat).is_empty(), "muted: {:?}", delivered(&chat));
    let dir = app.stop().await;
    clock.set(at("2026-03-03T05:59:00Z"));
    let app = TestApp::spawn_in(dir, &config(&d), Arc::new(clock.clone())).await;
    app.settle().await;
    assert!(
        delivered(&chat).is_empty(),
        "still muted after the restart: {:?}",
        delivered(&chat)
    );
    assert_eq!(firing(&app).await[0]["held"]["by"], "muted");

    // 07:00 in Berlin: the interval is over, pay-api still Degraded: told once.
    app.advance_to(&clock, at("2026-03-03T06:00:00Z")).await;
    app.advance(&clock, Duration::from_secs(30)).await;
    let got = wait_for(&chat, 1).await;
    assert_eq!(got[0]["action"], "open", "{:?}", got[0]);
    assert!(firing(&app).await[0].get("held").is_none(), "no longer held");
    app.advance(&clock, Duration::from_secs(5 * 60)).await;
    assert_eq!(delivered(&chat).len(), 1, "told once: {:?}", delivered(&chat));
}

#[tokio::test]
async fn inside_the_interval_what_was_told_is_still_closed_and_what_fired_and_resolved_is_never_sent() {
    let clock = ManualClock::new(at("2026-03-02T20:00:00Z")); // Monday 21:00 in Berlin: not muted yet
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let chat = d.join("chat.jsonl");
    let app = TestApp::spawn_in(dir.clone(), &config(&d), Arc::new(clock.clone())).await;

    post(&app, &clock, "pay-api", "Degraded").await;
    let got = wait_for(&chat, 1).await;
    assert_eq!(got[0]["action"], "open");

    app.advance_to(&clock, at("2026-03-02T21:30:00Z")).await;
    post(&app, &clock, "pay-worker", "Degraded").await;
    app.advance(&clock, Duration::from_secs(60)).await;
    post(&app, &clock, "pay-api", "Healthy").await;
    post(&app, &clock, "pay-worker", "Healthy").await;
    app.advance(&clock, Duration::from_secs(2 * 60)).await;
    let got = wait_for(&chat, 2).await;
    assert_eq!(
        got[1]["action"], "resolve",
        "pay-api's resolve goes where its firing went: {:?}",
        got[1]
    );
    assert_eq!(got[1]["incidents"][0]["app_name"], "pay-api", "{:?}", got[1]);

    app.advance_to(&clock, at("2026-03-03T06:30:00Z")).await;
    app.advance(&clock, Duration::from_secs(5 * 60)).await;
    let all = delivered(&chat);
    assert_eq!(
        all.len(),
        2,
        "nothing of pay-worker, at the interval's end neither: {all:?}"
    );
}

#[tokio::test]
async fn a_route_active_only_in_office_hours_holds_what_it_takes_until_they_begin() {
    let clock = ManualClock::new(at("2026-03-07T10:00:00Z")); // a Saturday
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let (chat, oncall) = (d.join("chat.jsonl"), d.join("oncall.jsonl"));
    let app = TestApp::spawn_in(dir.clone(), &config(&d), Arc::new(clock.clone())).await;

    let body = with_operation(
        &envelope("pay-api", "payments", "OutOfSync", "Healthy", &clock.now().to_rfc3339()),
        serde_json::json!({"phase": "Failed", "message": "one or more objects failed to apply",
            "startedAt": clock.now().to_rfc3339()}),
    );
    let r = app.post_as(ARGOCD, body).await;
    assert_eq!(r.status(), 202);
    app.advance(&clock, Duration::from_secs(60)).await;
    let listed = firing(&app).await;
    let failed = (listed.iter())
        .find(|i| i["kind"] == "sync_failed")
        .unwrap_or_else(|| panic!("a sync_failed incident: {listed:?}"));
    let held = &failed["held"];
    assert_eq!(held["by"], "muted", "{held}");
    assert_eq!(held["owner"], "routes[0]", "{held}");
    assert_eq!(held["outside"], true, "{held}");
    assert_eq!(held["until"], "2026-03-09T09:00:00Z", "Monday 09:00: {held}");
    assert!(delivered(&oncall).is_empty());
    assert!(
        !delivered(&chat).iter().any(|m| m.to_string().contains("sync_failed")),
        "the route takes it from the team: {:?}",
        delivered(&chat)
    );

    app.advance_to(&clock, at("2026-03-09T09:00:00Z")).await;
    app.advance(&clock, Duration::from_secs(30)).await;
    let got = wait_for(&oncall, 1).await;
    assert_eq!(got[0]["action"], "open", "{:?}", got[0]);
    assert_eq!(got[0]["incidents"][0]["kind"], "sync_failed");
}
