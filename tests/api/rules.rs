//! Incidents, the one-hour rule, routing, grouping, escalation and silences — seen from outside: what the
//! receivers got (console receivers writing JSON lines) and what the API shows.

use std::time::Duration;

use crate::helpers::*;
use herald::clock::{Clock, ManualClock};
use serde_json::Value;

fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z")
        .expect("time")
        .with_timezone(&chrono::Utc)
}

fn console_config(dir: &std::path::Path, extra: &str) -> String {
    format!(
        r#"
receivers:
  - {{name: pay-chat, console: {{file: "{d}/pay-chat.jsonl"}}}}
  - {{name: ops-chat, console: {{file: "{d}/ops-chat.jsonl"}}}}
  - {{name: pager, console: {{file: "{d}/pager.jsonl"}}}}
  - {{name: boss, console: {{file: "{d}/boss.jsonl"}}}}
teams:
  payments: {{receivers: [pay-chat], escalation: [{{after: 1h, receivers: [pager]}}, {{after: 4h, receivers: [boss]}}]}}
  ops: {{receivers: [ops-chat]}}
grouping: {{group_wait: 0s, group_interval: 1m, repeat_interval: 3h}}
{extra}
"#,
        d = dir.display()
    )
}

fn actions(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l["action"].as_str().unwrap_or("").to_string())
        .collect()
}

async fn post_at(app: &TestApp, clock: &ManualClock, name: &str, team: &str, sync: &str) {
    let body = envelope(name, team, sync, "Healthy", &clock.now().to_rfc3339());
    let r = app.post(body).await;
    assert_eq!(r.status(), 202);
}

#[tokio::test]
async fn out_of_sync_for_an_hour_notifies_the_owning_team_exactly_once() {
    let clock = ManualClock::new(t0());
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &console_config(&d, ""), std::sync::Arc::new(clock.clone())).await;
    post_at(&app, &clock, "pay-api", "payments", "OutOfSync").await;
    app.advance(&clock, Duration::from_secs(59 * 60)).await;
    assert!(
        delivered(&d.join("pay-chat.jsonl")).is_empty(),
        "nothing before the hour"
    );
    let pending = app.get_json("/v1/incidents?state=pending&kind=out_of_sync").await;
    assert_eq!(pending["count"], 1);
    // Another revision while still OutOfSync does not restart the clock.
    let mut body: Value = serde_json::from_str(&envelope(
        "pay-api",
        "payments",
        "OutOfSync",
        "Healthy",
        &clock.now().to_rfc3339(),
    ))
    .expect("json");
    body["app"]["status"]["sync"]["revision"] = "ffffffffffffffffffffffffffffffffffffffff".into();
    assert_eq!(app.post(body.to_string()).await.status(), 202);
    app.advance(&clock, Duration::from_secs(2 * 60)).await;
    let got = wait_for(&d.join("pay-chat.jsonl"), 1).await;
    assert_eq!(actions(&got), ["open"]);
    assert_eq!(got[0]["incidents"][0]["kind"], "out_of_sync");
    assert_eq!(got[0]["incidents"][0]["team"], "payments");
    assert_eq!(got[0]["incidents"][0]["app_name"], "pay-api");
    assert!(
        delivered(&d.join("ops-chat.jsonl")).is_empty(),
        "another team hears nothing"
    );
    // Time passes without change: no second notification before repeat_interval.
    app.advance(&clock, Duration::from_secs(30 * 60)).await;
    assert_eq!(delivered(&d.join("pay-chat.jsonl")).len(), 1, "fires exactly once");
    // Synced: resolved, and the resolve is sent (console sends resolved).
    post_at(&app, &clock, "pay-api", "payments", "Synced").await;
    app.advance(&clock, Duration::from_secs(1)).await;
    let got = wait_for(&d.join("pay-chat.jsonl"), 2).await;
    assert_eq!(actions(&got), ["open", "resolve"]);
    assert_eq!(
        app.get_json("/v1/incidents?state=resolved&kind=out_of_sync").await["count"],
        1
    );
    app.stop().await;
}

#[tokio::test]
async fn synced_before_the_hour_never_notifies_and_a_new_out_of_sync_restarts_the_clock() {
    let clock = ManualClock::new(t0());
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &console_config(&d, ""), std::sync::Arc::new(clock.clone())).await;
    post_at(&app, &clock, "pay-api", "payments", "OutOfSync").await;
    app.advance(&clock, Duration::from_secs(59 * 60)).await;
    post_at(&app, &clock, "pay-api", "payments", "Synced").await;
    app.advance(&clock, Duration::from_secs(1)).await;
    post_at(&app, &clock, "pay-api", "payments", "OutOfSync").await;
    app.advance(&clock, Duration::from_secs(59 * 60)).await;
    app.advance(&clock, Duration::from_secs(59)).await;
    assert!(
        delivered(&d.join("pay-chat.jsonl")).is_empty(),
        "OutOfSync → Synced → OutOfSync restarts the clock"
    );
    app.advance(&clock, Duration::from_secs(2)).await;
    let got = wait_for(&d.join("pay-chat.jsonl"), 1).await;
    assert_eq!(got.len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn a_restart_while_pending_still_fires_on_time_and_once() {
    let clock = ManualClock::new(t0());
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let cfg = console_config(&d, "");
    let app = TestApp::spawn_in(dir.clone(), &cfg, std::sync::Arc::new(clock.clone())).await;
    post_at(&app, &clock, "pay-api", "payments", "OutOfSync").await;
    app.advance(&clock, Duration::from_secs(30 * 60)).await;
    let dir = app.stop().await;
    let app = TestApp::spawn_in(dir.clone(), &cfg, std::sync::Arc::new(clock.clone())).await;
    app.advance(&clock, Duration::from_secs(29 * 60)).await;
    assert!(delivered(&d.join("pay-chat.jsonl")).is_empty());
    app.advance(&clock, Duration::from_secs(2 * 60)).await;
    eventually(Duration::from_secs(5), || async {
        (!delivered(&d.join("pay-chat.jsonl")).is_empty()).then_some(())
    })
    .await
    .expect("fired at minute 61 after a restart at minute 30");
    // Down past the deadline of another app: fires at once after the restart, once.
    post_at(&app, &clock, "ledger", "payments", "OutOfSync").await;
    let dir = app.stop().await;
    clock.advance(Duration::from_secs(3 * 3600));
    let app = TestApp::spawn_in(dir.clone(), &cfg, std::sync::Arc::new(clock.clone())).await;
    let got = eventually(Duration::from_secs(5), || async {
        let l = delivered(&d.join("pay-chat.jsonl"));
        l.iter()
            .any(|n| {
                n["incidents"]
                    .as_array()
                    .is_some_and(|i| i.iter().any(|x| x["app_name"] == "ledger"))
            })
            .then_some(l)
    })
    .await
    .expect("fired at once after the restart");
    app.settle().await;
    // It joins the payments/out_of_sync group whose thread is open: one message lists it, once.
    let ledger_messages = delivered(&d.join("pay-chat.jsonl"))
        .iter()
        .filter(|n| {
            n["incidents"]
                .as_array()
                .is_some_and(|i| i.iter().any(|x| x["app_name"] == "ledger"))
        })
        .count();
    assert_eq!(ledger_messages, 1, "{got:?}");
    app.stop().await;
}

#[tokio::test]
async fn the_escalation_ladder_steps_and_stops_on_resolve_and_repeats_follow_repeat_interval() {
    let clock = ManualClock::new(t0());
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &console_config(&d, ""), std::sync::Arc::new(clock.clone())).await;
    post_at(&app, &clock, "pay-api", "payments", "OutOfSync").await;
    app.advance(&clock, Duration::from_secs(61 * 60)).await; // fires
    app.advance(&clock, Duration::from_secs(30 * 60)).await;
    assert!(
        delivered(&d.join("pager.jsonl")).is_empty(),
        "step 1 is 1h after firing"
    );
    app.advance(&clock, Duration::from_secs(31 * 60)).await; // 1h01 after firing
    let pager = wait_for(&d.join("pager.jsonl"), 1).await;
    assert!(pager[0]["reason"].as_str().unwrap_or("").contains("escalation step 1"));
    assert!(delivered(&d.join("boss.jsonl")).is_empty());
    // repeat_interval 3h: the team hears "still firing" 3h after the first message.
    app.advance(&clock, Duration::from_secs(2 * 3600)).await; // 3h01 after firing
    let chat = wait_for(&d.join("pay-chat.jsonl"), 2).await;
    assert_eq!(actions(&chat), ["open", "update"]);
    assert_eq!(chat[1]["reason"], "still firing");
    // Resolved before step 2 (4h): the boss never hears; the pager hears the resolve.
    post_at(&app, &clock, "pay-api", "payments", "Synced").await;
    app.advance(&clock, Duration::from_secs(2 * 3600)).await;
    assert!(delivered(&d.join("boss.jsonl")).is_empty(), "cancelled on resolve");
    let pager = wait_for(&d.join("pager.jsonl"), 2).await;
    assert_eq!(actions(&pager), ["open", "resolve"]);
    app.stop().await;
}

#[tokio::test]
async fn a_storm_gives_each_receiver_one_message_listing_its_applications() {
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    // Grouping alone, storms off: 300 Applications of one cluster failing together would otherwise be one `storm`
    // incident told to the default team (tests/api/storms.rs).
    let cfg = console_config(&d, "storm: {min_apps: 0}").replace("group_wait: 0s", "group_wait: 3s");
    let app = TestApp::spawn_in(dir.clone(), &cfg, std::sync::Arc::new(herald::clock::SystemClock)).await;
    let started = now_rfc3339();
    let bodies: Vec<String> = (0..300)
        .map(|i| {
            let team = if i % 2 == 0 { "payments" } else { "ops" };
            with_operation(
                &envelope(&format!("app-{i:03}"), team, "OutOfSync", "Healthy", &now_rfc3339()),
                serde_json::json!({"phase": "Failed", "message": "one or more objects failed to apply", "startedAt": started}),
            )
        })
        .collect();
    let t = std::time::Instant::now();
    for chunk in bodies.chunks(50) {
        let results = futures_util::future::join_all(chunk.iter().map(|b| app.post(b.clone()))).await;
        for r in results {
            assert_eq!(r.status(), 202);
        }
    }
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "the storm must arrive within group_wait"
    );
    // Duplicates of the same events add nothing.
    for b in bodies.iter().take(40) {
        let r = app.post(b.clone()).await;
        let v: Value = r.json().await.expect("json");
        assert_eq!(v["outcome"], "duplicate");
    }
    let wait = |f: &'static str| {
        let (p, app) = (d.join(f), &app);
        async move {
            eventually(Duration::from_secs(10), || async {
                (!delivered(&p).is_empty()).then_some(())
            })
            .await;
            app.settle().await;
            delivered(&p)
        }
    };
    let pay = wait("pay-chat.jsonl").await;
    let ops = wait("ops-chat.jsonl").await;
    assert_eq!(pay.len(), 1, "one message for payments");
    assert_eq!(ops.len(), 1, "one message for ops");
    assert_eq!(pay[0]["incidents"].as_array().map(|a| a.len()), Some(150));
    assert_eq!(ops[0]["incidents"].as_array().map(|a| a.len()), Some(150));
    assert!(
        pay[0]["incidents"]
            .as_array()
            .expect("list")
            .iter()
            .all(|i| i["team"] == "payments" && i["kind"] == "sync_failed")
    );
    app.stop().await;
}

#[tokio::test]
async fn silenced_incidents_are_tracked_not_delivered_until_the_silence_ends() {
    let clock = ManualClock::new(t0());
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &console_config(&d, ""), std::sync::Arc::new(clock.clone())).await;
    let ends = (clock.now() + chrono::Duration::hours(2)).to_rfc3339();
    let r = app
        .client
        .post(format!("{}/v1/silences", app.address))
        .body(format!(
            r#"{{"matchers":[{{"name":"app","value":"pay-*"}},{{"name":"kind","value":"out_of_sync"}}],"ends_at":"{ends}","created_by":"alice","comment":"migration"}}"#
        ))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 201);
    let silence: Value = r.json().await.expect("json");
    let listed = app.get_json("/v1/silences").await;
    assert_eq!(listed["count"], 1);
    assert_eq!(listed["items"][0]["active"], true);
    post_at(&app, &clock, "pay-api", "payments", "OutOfSync").await;
    app.advance(&clock, Duration::from_secs(61 * 60)).await;
    let firing = app.get_json("/v1/incidents?state=firing").await;
    assert_eq!(firing["count"], 1, "tracked and visible");
    let held = &firing["items"][0]["held"];
    assert_eq!(held["by"], "silenced", "the API says it is silenced: {held}");
    assert_eq!(held["created_by"], "alice");
    assert_eq!(
        held["until"].as_str().map(|t| t.starts_with(&ends[..16])),
        Some(true),
        "{held}"
    );
    assert!(
        delivered(&d.join("pay-chat.jsonl")).is_empty(),
        "not delivered while silenced"
    );
    // `herald incidents` (firing and recently resolved that told someone, by default) says who silenced it.
    // An incident that ended while pending told nobody: not listed by default.
    post_at(&app, &clock, "ledger", "payments", "OutOfSync").await;
    post_at(&app, &clock, "ledger", "payments", "Synced").await;
    let url = app.address.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(["incidents", "--url", &url])
            .output()
            .expect("run")
    })
    .await
    .expect("joined");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}{}", String::from_utf8_lossy(&out.stderr));
    assert!(table.contains("silenced by alice until"), "{table}");
    assert!(
        !table.contains("argocd/ledger"),
        "a pending incident that ended is not listed by default: {table}"
    );
    // Expire it: the still-firing incident is delivered then.
    let r = app
        .client
        .delete(format!(
            "{}/v1/silences/{}",
            app.address,
            silence["id"].as_str().expect("id")
        ))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200);
    app.advance(&clock, Duration::from_secs(1)).await;
    let got = wait_for(&d.join("pay-chat.jsonl"), 1).await;
    assert_eq!(actions(&got), ["open"]);
    let listed = app.get_json("/v1/silences?expired=true").await;
    assert_eq!(listed["items"][0]["state"], "expired", "{listed}");
    app.stop().await;
}

#[tokio::test]
async fn routes_send_to_their_receivers_in_order() {
    let clock = ManualClock::new(t0());
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let routes = "routes:\n  - {kind: sync_failed, team: payments, receivers: [pager], continue: true}\n  - {app: 'pay-*', receivers: [ops-chat]}\nrules: {sync_failed: {for: 0s}}";
    let app = TestApp::spawn_in(
        dir.clone(),
        &console_config(&d, routes),
        std::sync::Arc::new(clock.clone()),
    )
    .await;
    let body = with_operation(
        &envelope("pay-api", "payments", "OutOfSync", "Healthy", &clock.now().to_rfc3339()),
        serde_json::json!({"phase": "Error", "message": "boom", "startedAt": clock.now().to_rfc3339()}),
    );
    assert_eq!(app.post(body).await.status(), 202);
    app.advance(&clock, Duration::from_secs(1)).await;
    let pager = wait_for(&d.join("pager.jsonl"), 1).await;
    let ops = wait_for(&d.join("ops-chat.jsonl"), 1).await;
    assert_eq!(pager[0]["incidents"][0]["kind"], "sync_failed");
    assert_eq!(ops[0]["incidents"][0]["kind"], "sync_failed");
    assert!(
        delivered(&d.join("pay-chat.jsonl")).is_empty(),
        "a matched route replaces the team's receivers"
    );
    app.stop().await;
}

/// The rule end to end on the real binary with `for: 2s`, including a restart while pending.
#[tokio::test]
async fn the_real_binary_applies_the_rule_across_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    let cfg = d.join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            "server: {{listen: '127.0.0.1:0'}}\nstorage: {{url: 'sqlite://{db}'}}\nscheduler: {{tick: 100ms}}\n\
             rules: {{out_of_sync: {{for: 2s}}}}\ngrouping: {{group_wait: 0s}}\nlog: {{level: info}}\n{rest}",
            db = d.join("h.db").display(),
            rest = console_config(d, "").replace(
                "grouping: {group_wait: 0s, group_interval: 1m, repeat_interval: 3h}",
                ""
            )
        ),
    )
    .expect("write");
    let mut bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{}/v1/argocd/events", bin.address))
        .body(envelope("pay-api", "payments", "OutOfSync", "Healthy", &now_rfc3339()))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 202);
    bin.kill9();
    assert!(delivered(&d.join("pay-chat.jsonl")).is_empty());
    // Down across the rule's deadline.
    let_time_pass(Duration::from_millis(2500)).await;
    let bin = Binary::start(&cfg, &[]);
    let got = wait_for(&d.join("pay-chat.jsonl"), 1).await;
    bin.settle().await;
    assert_eq!(delivered(&d.join("pay-chat.jsonl")).len(), 1, "{got:?}");
    drop(bin);
}

/// Herald with the console receivers of [`console_config`], a failed sync firing at once, on `clock`; with the
/// folder the receivers write to.
async fn spawn_failing_at_once(clock: &ManualClock) -> (TestApp, std::path::PathBuf) {
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let cfg = console_config(&d, "rules: {sync_failed: {for: 0s}}");
    (
        TestApp::spawn_in(dir, &cfg, std::sync::Arc::new(clock.clone())).await,
        d,
    )
}

/// `pay-api` (payments) out of sync, its last sync failed now.
fn failed_sync(clock: &ManualClock) -> String {
    with_operation(
        &envelope("pay-api", "payments", "OutOfSync", "Healthy", &clock.now().to_rfc3339()),
        serde_json::json!({"phase": "Failed", "message": "one or more objects failed to apply",
                           "startedAt": clock.now().to_rfc3339()}),
    )
}

#[tokio::test]
async fn the_incidents_list_says_what_inhibits_an_incident_even_when_the_source_is_not_on_the_page() {
    let clock = ManualClock::new(t0());
    let (app, _) = spawn_failing_at_once(&clock).await;
    // Out of sync for an hour (fires), then its sync fails (fires at once, and explains the first).
    post_at(&app, &clock, "pay-api", "payments", "OutOfSync").await;
    app.advance(&clock, Duration::from_secs(61 * 60)).await;
    assert_eq!(app.post(failed_sync(&clock)).await.status(), 202);
    app.advance(&clock, Duration::from_secs(1)).await;
    let both = app.get_json("/v1/incidents?state=firing").await;
    assert_eq!(both["count"], 2, "{both}");
    // A page of out_of_sync only: its source is read for the answer, not taken from the page.
    let page = app.get_json("/v1/incidents?state=firing&kind=out_of_sync").await;
    assert_eq!(page["count"], 1, "{page}");
    let held = &page["items"][0]["held"];
    assert_eq!(held["by"], "inhibited", "{page}");
    assert_eq!(held["source_kind"], "sync_failed", "{held}");
    // The same answer on the page that holds both.
    let listed = (both["items"].as_array().expect("items").iter())
        .find(|i| i["kind"] == "out_of_sync")
        .expect("out_of_sync listed");
    assert_eq!(listed["held"], *held);
    let source = (both["items"].as_array().expect("items").iter())
        .find(|i| i["kind"] == "sync_failed")
        .expect("sync_failed listed");
    assert!(source.get("held").is_none_or(Value::is_null), "{source}");
    app.stop().await;
}

#[tokio::test]
async fn the_outbox_list_shows_each_delivery_with_its_title_and_incidents_not_its_payload() {
    let clock = ManualClock::new(t0());
    let (app, d) = spawn_failing_at_once(&clock).await;
    assert_eq!(app.post(failed_sync(&clock)).await.status(), 202);
    app.advance(&clock, Duration::from_secs(1)).await;
    let sent = delivered(&d.join("pay-chat.jsonl"));
    assert_eq!(sent.len(), 1, "{sent:?}");
    let firing = app.get_json("/v1/incidents?state=firing").await;
    let fingerprint = firing["items"][0]["fingerprint"].clone();
    let listed = app.get_json("/v1/outbox").await;
    assert_eq!(listed["count"], 1, "{listed}");
    let item = &listed["items"][0];
    assert_eq!(item["receiver"], "pay-chat");
    assert_eq!(item["state"], "done", "{item}");
    assert_eq!(item["title"], sent[0]["title"], "the notification's own title");
    assert_eq!(item["incidents"], serde_json::json!([fingerprint]));
    assert!(item.get("payload").is_none(), "no payload in a list: {item}");
    app.stop().await;
}

#[tokio::test]
async fn an_escalation_and_its_resolve_link_to_the_teams_status_page_as_the_teams_messages_do() {
    let clock = ManualClock::new(t0());
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let cfg = console_config(&d, "server: {public_url: \"https://herald.example.com\"}");
    let app = TestApp::spawn_in(dir.clone(), &cfg, std::sync::Arc::new(clock.clone())).await;
    post_at(&app, &clock, "pay-api", "payments", "OutOfSync").await;
    app.advance(&clock, Duration::from_secs(61 * 60)).await; // fires
    app.advance(&clock, Duration::from_secs(61 * 60)).await; // escalates to the pager
    post_at(&app, &clock, "pay-api", "payments", "Synced").await;
    app.advance(&clock, Duration::from_secs(60)).await;

    let pager = wait_for(&d.join("pager.jsonl"), 2).await;
    assert_eq!(actions(&pager), ["open", "resolve"]);
    let chat = wait_for(&d.join("pay-chat.jsonl"), 2).await;
    for message in pager.iter().chain(&chat) {
        assert_eq!(
            message["status_url"], "https://herald.example.com/?team=payments",
            "{message}"
        );
    }
    app.stop().await;
}
