//! Storms from the outside: twelve Applications of one cluster going Degraded together are one `storm` incident
//! told to the default team; each Application's incident stays in the API, held by it (`held.by: storm`), and on
//! the status page it is counted under the storm's line, not listed; once most recovered the storm resolves and
//! what still fires is told to its team after `storm.window`.

use std::sync::Arc;
use std::time::Duration;

use crate::helpers::*;
use herald::clock::{Clock, ManualClock};
use serde_json::Value;

fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z")
        .expect("t")
        .with_timezone(&chrono::Utc)
}

fn config(dir: &std::path::Path) -> String {
    format!(
        r#"
receivers:
  - {{name: pay-chat, console: {{file: "{d}/pay.jsonl"}}}}
  - {{name: platform-chat, console: {{file: "{d}/platform.jsonl"}}}}
ownership: {{default_team: platform}}
teams:
  payments: {{receivers: [pay-chat]}}
  platform: {{receivers: [platform-chat]}}
grouping: {{group_wait: 30s, group_interval: 1m, repeat_interval: 4h}}
"#,
        d = dir.display()
    )
}

async fn post(app: &TestApp, clock: &ManualClock, name: &str, health: &str) {
    let body = envelope(name, "payments", "Synced", health, &clock.now().to_rfc3339());
    let r = app.post(body).await;
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
}

async fn items(app: &TestApp, query: &str) -> Vec<Value> {
    let list = app.get_json(&format!("/v1/incidents?{query}")).await;
    list["items"].as_array().cloned().unwrap_or_default()
}

async fn status_page(app: &TestApp) -> String {
    let r = app.client.get(format!("{}/", app.address)).send().await.expect("GET /");
    assert_eq!(r.status(), 200);
    r.text().await.expect("html")
}

#[tokio::test]
async fn twelve_applications_of_one_cluster_degraded_together_are_one_storm_told_to_the_platform() {
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&d), Arc::new(clock.clone())).await;
    let names: Vec<String> = (1..=12).map(|k| format!("pay-{k:02}")).collect();
    for name in &names {
        post(&app, &clock, name, "Degraded").await;
    }
    let storms = items(&app, "kind=storm").await;
    assert_eq!(storms.len(), 1, "{storms:#?}");
    assert_eq!(storms[0]["state"], "pending", "it fires with its first member");
    assert_eq!(
        storms[0]["summary"],
        "cluster https://kubernetes.default.svc: 12 Applications Degraded since 09:00 UTC"
    );
    let storm_id = storms[0]["id"].as_i64().expect("an id");

    // Degraded fires after 5 minutes: every member fires held, the storm fires, the platform is told once.
    app.advance(&clock, Duration::from_secs(5 * 60 + 1)).await;
    app.advance(&clock, Duration::from_secs(31)).await;
    let platform = wait_for(&d.join("platform.jsonl"), 1).await;
    assert_eq!(platform.len(), 1, "{platform:#?}");
    assert_eq!(
        platform[0]["title"],
        "cluster https://kubernetes.default.svc: 12 Applications Degraded since 09:00 UTC"
    );
    assert_eq!(platform[0]["incidents"][0]["kind"], "storm");
    let members = items(&app, "kind=degraded&state=firing").await;
    assert_eq!(members.len(), 12, "every member is still in the API");
    for m in &members {
        assert_eq!(m["held"]["by"], "storm", "{m}");
        assert_eq!(m["held"]["storm_id"], storm_id, "{m}");
        assert_eq!(m["held"]["about"], "cluster https://kubernetes.default.svc", "{m}");
    }
    let page = status_page(&app).await;
    assert!(
        page.contains("Storm: cluster https://kubernetes.default.svc"),
        "the storm's line"
    );
    assert!(page.contains("12 held by storms (above), not listed."), "counted");
    let incidents = &page[page.find("id=\"incidents\"").expect("the incidents")..];
    let incidents = &incidents[..incidents.find("id=\"pending\"").expect("the pending")];
    assert!(
        !incidents.contains("pay-01"),
        "no member listed one by one: {incidents}"
    );
    assert!(incidents.contains("Team platform"), "the storm itself is: {incidents}");

    // Seven recover: more than half, the storm is over; the five still Degraded after storm.window are told.
    for name in &names[..7] {
        post(&app, &clock, name, "Healthy").await;
    }
    // Its resolve is in the storm's thread, after group_interval.
    app.advance(&clock, Duration::from_secs(61)).await;
    let platform = wait_for(&d.join("platform.jsonl"), 2).await;
    assert_eq!(platform[1]["action"], "resolve", "{platform:#?}");
    assert!(delivered(&d.join("pay.jsonl")).is_empty(), "nothing to the team yet");
    app.advance(&clock, Duration::from_secs(60)).await;
    app.advance(&clock, Duration::from_secs(31)).await;
    let pay = wait_for(&d.join("pay.jsonl"), 1).await;
    assert_eq!(pay.len(), 1, "{pay:#?}");
    assert_eq!(pay[0]["incidents"].as_array().map(Vec::len), Some(5), "the stragglers");
    assert_eq!(pay[0]["title"], "Degraded on 5 Applications of team payments");
}

#[tokio::test]
async fn nine_applications_are_no_storm_and_min_apps_0_turns_storms_off() {
    for (extra, count, storms) in [
        ("", 9, 0),
        ("storm: {min_apps: 0}\n", 12, 0),
        ("storm: {min_apps: 3}\n", 3, 1),
    ] {
        let clock = ManualClock::new(t0());
        let dir = Arc::new(tempfile::tempdir().expect("tmp"));
        let d = dir.path().to_path_buf();
        let config = format!("{}{extra}", config(&d));
        let app = TestApp::spawn_in(dir.clone(), &config, Arc::new(clock.clone())).await;
        for k in 1..=count {
            post(&app, &clock, &format!("pay-{k:02}"), "Degraded").await;
        }
        assert_eq!(items(&app, "kind=storm").await.len(), storms, "{extra}{count}");
        assert_eq!(items(&app, "kind=degraded").await.len(), count, "{extra}{count}");
    }
}
