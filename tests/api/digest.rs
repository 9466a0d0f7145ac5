//! The per-team digest: sent at 09:00 in Berlin on weekdays across the change from summer to winter time, with
//! the team's problems in it (the longest OutOfSync first, a pending prune, a firing incident); once across a
//! restart and across two replicas on PostgreSQL; a slot missed while Herald was down is sent at start if less
//! than `catch_up` late, else skipped (but a digest just added has missed nothing: its first start says so, without
//! a warning or the skipped-slot metric); an empty digest sends nothing, or one line with `when_empty: all_green`.
//! Last, the real binary under libfaketime: 09:00 in Berlin on Friday (summer time), a kill -9, and 09:00 on
//! Monday (winter time), each sent once; and two real binaries on one PostgreSQL, which send that slot once.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use herald::clock::ManualClock;
use herald::configuration::StorageSettings;
use herald::store::{SlotState, Store};
use secrecy::SecretString;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::*;

fn t(s: &str) -> DateTime<Utc> {
    s.parse().expect("a UTC time")
}

/// Fri 2026-10-23 06:00 UTC (08:00 in Berlin, summer time): an hour before the Friday slot.
fn friday_early() -> DateTime<Utc> {
    t("2026-10-23T06:00:00Z")
}

/// `digest` is added to the team's digest block; `extra` to the settings (a second receiver is `hook`, a webhook
/// to `HOOK_URL`).
fn config(dir: &Path, digest: &str, extra: &str) -> String {
    let (hook, extra) = match extra.strip_prefix("HOOK_URL=") {
        Some(url) => (format!(", {{name: hook, webhook: {{url: \"{url}/digest\"}}}}"), ""),
        None => (String::new(), extra),
    };
    format!(
        r#"
receivers: [{{name: sink, console: {{file: "{d}/sink.jsonl"}}}}{hook}]
ownership: {{default_team: payments}}
teams: {{payments: {{receivers: [sink], digest: {{schedule: "Mon-Fri 09:00", timezone: Europe/Berlin{digest}}}}}}}
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1s, repeat_interval: 1h}}
{extra}
"#,
        d = dir.display()
    )
}

/// The digests the console receiver wrote (the incidents' own notifications left out).
fn digests(dir: &Path) -> Vec<Value> {
    delivered(&dir.join("sink.jsonl"))
        .into_iter()
        .filter(|n| n["action"] == "digest")
        .collect()
}

async fn wait_for_digests(dir: &Path, n: usize) -> Vec<Value> {
    eventually(Duration::from_secs(10), || async {
        let d = digests(dir);
        (d.len() >= n).then_some(d)
    })
    .await
    .unwrap_or_else(|| panic!("fewer than {n} digests: {:?}", digests(dir)))
}

fn body(name: &str, sync: &str, health: &str, at: DateTime<Utc>) -> String {
    envelope(name, "payments", sync, health, &at.to_rfc3339())
}

fn with_prune(body: &str, resource: &str) -> String {
    let mut v: Value = serde_json::from_str(body).expect("json");
    v["app"]["status"]["resources"] = json!([
        {"kind": "ConfigMap", "namespace": "pay", "name": resource, "status": "OutOfSync", "requiresPruning": true}
    ]);
    v.to_string()
}

/// Two Applications OutOfSync (the older one with a resource to prune) and one Degraded.
async fn post_problems(app: &TestApp, clock: &ManualClock) {
    let at = friday_early();
    let old = with_prune(&body("old-drift", "OutOfSync", "Healthy", at), "stale-config");
    post_ok(app, old).await;
    app.advance_to(clock, at + chrono::Duration::minutes(10)).await;
    let later = at + chrono::Duration::minutes(10);
    post_ok(app, body("new-drift", "OutOfSync", "Healthy", later)).await;
    post_ok(app, body("broken", "Synced", "Degraded", later)).await;
}

async fn post_ok(app: &TestApp, body: String) {
    let r = app.post(body).await;
    assert!(r.status().is_success(), "{}", r.status());
}

async fn slots(dir: &Path) -> Vec<herald::store::DigestSlot> {
    let store = Store::connect(&StorageSettings {
        url: SecretString::from(format!("sqlite://{}", dir.join("herald.db").display())),
        ..Default::default()
    })
    .await
    .expect("store");
    let slots = store.digest_slots("payments", 10).await.expect("slots");
    store.close().await;
    slots
}

#[tokio::test]
async fn nine_in_berlin_on_weekdays_sends_one_digest_at_seven_utc_in_summer_and_eight_in_winter() {
    let hook = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&hook)
        .await;
    let clock = ManualClock::new(friday_early());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let cfg = config(
        dir.path(),
        ", receivers: [sink, hook]",
        &format!("HOOK_URL={}", hook.uri()),
    );
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    post_problems(&app, &clock).await;

    app.advance_to(&clock, t("2026-10-23T06:59:59Z")).await;
    assert!(digests(dir.path()).is_empty(), "nothing before 09:00 CEST");
    app.advance_to(&clock, t("2026-10-23T07:00:00Z")).await;
    let friday = wait_for_digests(dir.path(), 1).await;
    assert_eq!(friday[0]["created_at"], "2026-10-23T07:00:00Z");
    let d = &friday[0]["digest"];
    let out_of_sync: Vec<&str> = d["out_of_sync"]
        .as_array()
        .expect("out_of_sync")
        .iter()
        .map(|a| a["app"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(out_of_sync, ["argocd/old-drift", "argocd/new-drift"], "longest first");
    assert_eq!(d["out_of_sync"][0]["pruning"], 1);
    assert_eq!(d["pending_prunes"][0]["resource"], "ConfigMap pay/stale-config");
    let firing = d["firing"].as_array().expect("firing");
    assert!(
        firing
            .iter()
            .any(|i| i["app"] == "argocd/broken" && i["problem"] == "Degraded"),
        "{firing:?}"
    );

    // The weekend has no slot; Monday 09:00 is CET after the clocks went back on Sunday.
    app.advance_to(&clock, t("2026-10-24T07:00:00Z")).await;
    app.advance_to(&clock, t("2026-10-26T07:00:00Z")).await;
    assert_eq!(digests(dir.path()).len(), 1, "no digest at 07:00 UTC in winter time");
    app.advance_to(&clock, t("2026-10-26T08:00:00Z")).await;
    let monday = wait_for_digests(dir.path(), 2).await;
    assert_eq!(monday[1]["created_at"], "2026-10-26T08:00:00Z");
    app.settle().await;
    assert_eq!(digests(dir.path()).len(), 2, "exactly one digest per slot");

    let to_hook = eventually(Duration::from_secs(10), || async {
        let got: Vec<Value> = (hook.received_requests().await.unwrap_or_default().iter())
            .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
            .filter(|b| b["action"] == "digest")
            .collect();
        (got.len() >= 2).then_some(got)
    })
    .await
    .expect("the webhook got both digests");
    assert_eq!(to_hook.len(), 2);
    assert!(
        to_hook[0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("argocd/old-drift")
    );
    assert_eq!(to_hook[0]["digest"]["team"], "payments");
    app.stop().await;
}

/// Started before the Friday slot with the problems posted, stopped, and started again at `restart_at`.
async fn down_across_the_slot_until(restart_at: DateTime<Utc>) -> (ManualClock, String, TestApp) {
    let clock = ManualClock::new(friday_early());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let cfg = config(dir.path(), "", "");
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    post_problems(&app, &clock).await;
    let dir = app.stop().await;
    clock.set(restart_at);
    let app = TestApp::spawn_in(dir, &cfg, Arc::new(clock.clone())).await;
    (clock, cfg, app)
}

/// What the store says of the Friday 09:00 slot.
async fn friday_slot(dir: &Path) -> Option<SlotState> {
    let slot = t("2026-10-23T07:00:00Z");
    slots(dir).await.iter().find(|s| s.slot_at == slot).map(|s| s.state)
}

#[tokio::test]
async fn a_slot_passed_while_down_is_sent_once_at_start_and_not_again_after_a_restart() {
    // Down across the slot: started 3 h after it, within catch_up (6 h).
    let (clock, cfg, app) = down_across_the_slot_until(t("2026-10-23T10:00:00Z")).await;
    let sent = wait_for_digests(app.dir.path(), 1).await;
    assert_eq!(sent[0]["created_at"], "2026-10-23T10:00:00Z");
    let dir = app.stop().await;

    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    app.advance_to(&clock, t("2026-10-23T10:05:00Z")).await;
    assert_eq!(digests(dir.path()).len(), 1, "the restart does not send it again");
    let dir = app.stop().await;
    assert_eq!(friday_slot(dir.path()).await, Some(SlotState::Sent));
}

#[tokio::test]
async fn a_slot_missed_by_more_than_catch_up_is_skipped_and_recorded() {
    // Down for 7 h across the slot: more than catch_up.
    let (_clock, _cfg, app) = down_across_the_slot_until(t("2026-10-23T14:00:00Z")).await;
    app.settle().await;
    assert!(digests(app.dir.path()).is_empty(), "{:?}", digests(app.dir.path()));
    let dir = app.stop().await;
    assert_eq!(friday_slot(dir.path()).await, Some(SlotState::Skipped));
}

#[tokio::test]
async fn a_digest_just_added_is_not_reported_as_a_missed_slot_at_the_first_start() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("herald.yaml");
    // Its last slot was 7 h before this first start: more than catch_up (6 h) ago, but never due.
    let slot = (Utc::now() - chrono::Duration::hours(7)).format("%H:%M");
    std::fs::write(
        &file,
        format!(
            "{}receivers: [{{name: sink, console: {{file: \"{d}/sink.jsonl\"}}}}]\n\
             teams: {{payments: {{receivers: [sink], digest: {{schedule: \"daily {slot}\", timezone: UTC}}}}}}\n",
            base_yaml(dir.path()),
            d = dir.path().display()
        ),
    )
    .expect("write");
    let mut bin = Binary::start(&file, &[]);
    eventually(Duration::from_secs(10), || async {
        bin.logs().contains("digest added").then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("the first start says the digest was added: {}", bin.logs()));
    let metrics = reqwest::get(format!("{}/metrics", bin.address))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let skipped = metrics
        .lines()
        .filter(|l| l.starts_with("herald_digest_slots_total") && l.contains("skipped"))
        .filter(|l| !l.ends_with(" 0"));
    assert_eq!(skipped.count(), 0, "no skipped slot counted: {metrics}");
    assert!(bin.terminate().await.success());
    let logs = bin.logs();
    assert!(!logs.contains("missed") && !logs.contains("WARN"), "{logs}");
    assert!(digests(dir.path()).is_empty());
}

/// Every Application of the team fine, and the clock at the Friday slot.
async fn all_fine_at_the_slot(digest: &str) -> TestApp {
    let clock = ManualClock::new(friday_early());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let app = TestApp::spawn_in(dir.clone(), &config(dir.path(), digest, ""), Arc::new(clock.clone())).await;
    post_ok(&app, body("fine", "Synced", "Healthy", friday_early())).await;
    app.advance_to(&clock, t("2026-10-23T07:00:00Z")).await;
    app
}

#[tokio::test]
async fn nothing_to_report_sends_nothing() {
    let app = all_fine_at_the_slot("").await;
    assert!(digests(app.dir.path()).is_empty());
    let dir = app.stop().await;
    assert_eq!(friday_slot(dir.path()).await, Some(SlotState::Empty));
}

#[tokio::test]
async fn nothing_to_report_with_all_green_sends_one_line() {
    let app = all_fine_at_the_slot(", when_empty: all_green").await;
    let sent = wait_for_digests(app.dir.path(), 1).await;
    assert_eq!(sent[0]["title"], "Digest for payments: all green");
    let text =
        herald::receivers::render::digest::text(&serde_json::from_value(sent[0]["digest"].clone()).expect("a digest"));
    assert!(text.contains("All green for team payments"), "{text}");
    app.settle().await;
    assert_eq!(digests(app.dir.path()).len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn two_replicas_on_postgresql_send_a_slot_once() {
    let pg = PgServer::start();
    let clock = ManualClock::new(friday_early());
    let dir_a = Arc::new(tempfile::tempdir().expect("tmp"));
    let dir_b = Arc::new(tempfile::tempdir().expect("tmp"));
    let storage = format!("storage: {{url: \"{}\"}}", pg.url);
    let a = TestApp::spawn_in(
        dir_a.clone(),
        &config(dir_a.path(), "", &storage),
        Arc::new(clock.clone()),
    )
    .await;
    let b = TestApp::spawn_in(
        dir_b.clone(),
        &config(dir_b.path(), "", &storage),
        Arc::new(clock.clone()),
    )
    .await;
    post_ok(&a, body("broken", "Synced", "Degraded", friday_early())).await;
    clock.set(t("2026-10-23T07:00:00Z"));
    let both = || digests(dir_a.path()).len() + digests(dir_b.path()).len();
    let sent = eventually(Duration::from_secs(10), || async { (both() >= 1).then_some(()) }).await;
    assert!(sent.is_some(), "one of the replicas sent the digest");
    a.settle().await;
    b.settle().await;
    assert_eq!(both(), 1, "exactly once for both replicas");
    a.stop().await;
    b.stop().await;
}

/// libfaketime (Debian's `faketime`, installed by scripts/test): the real binary's wall clock starts at a time the
/// test chooses and goes on ticking; monotonic time (timers, timeouts) stays real.
fn faked_clock(start: &str) -> Vec<(&'static str, String)> {
    let lib = ["x86_64-linux-gnu", "aarch64-linux-gnu"]
        .iter()
        .map(|arch| format!("/usr/lib/{arch}/faketime/libfaketimeMT.so.1"))
        .find(|p| Path::new(p).exists())
        .unwrap_or_else(|| panic!("libfaketime not found: apt-get install faketime (scripts/test installs it)"));
    vec![
        ("LD_PRELOAD", lib),
        ("FAKETIME", format!("@{start}")),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
        ("TZ", "UTC".into()),
    ]
}

fn start_binary_at(config: &Path, start: &str) -> Binary {
    let env = faked_clock(start);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Binary::start(config, &env)
}

async fn wait_long_for_digests(dir: &Path, n: usize) -> Vec<Value> {
    eventually(Duration::from_secs(30), || async {
        let d = digests(dir);
        (d.len() >= n).then_some(d)
    })
    .await
    .unwrap_or_else(|| panic!("fewer than {n} digests: {:?}", digests(dir)))
}

/// The binary's clock ticks: a digest is made at the first scheduler tick at or after its slot.
fn sent_just_after(digest: &Value, slot: &str) {
    let at = t(digest["created_at"].as_str().expect("created_at"));
    let late = at - t(slot);
    assert!(
        late >= chrono::Duration::zero() && late < chrono::Duration::seconds(5),
        "made at {at}, for the slot {slot}"
    );
}

#[tokio::test]
async fn the_real_binary_sends_at_nine_in_berlin_once_across_a_kill_9_and_the_change_to_winter_time() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("herald.yaml");
    let yaml = format!("{}{}", base_yaml(dir.path()), config(dir.path(), "", ""));
    std::fs::write(&file, yaml).expect("config");

    // Friday 08:59:55 in Berlin (summer time, 06:59:55 UTC).
    let mut bin = start_binary_at(&file, "2026-10-23 06:59:55");
    let client = reqwest::Client::new();
    let sent = client
        .post(format!("{}/v1/argocd/events", bin.address))
        .body(body("old-drift", "OutOfSync", "Healthy", t("2026-10-23T06:59:55Z")))
        .send()
        .await
        .expect("herald answers");
    assert!(sent.status().is_success(), "{}", sent.status());
    let friday = wait_long_for_digests(dir.path(), 1).await;
    sent_just_after(&friday[0], "2026-10-23T07:00:00Z");
    assert_eq!(friday[0]["digest"]["out_of_sync"][0]["app"], "argocd/old-drift");
    // Killed once its sending is recorded: a kill between writing the line and recording it sends it again after the
    // restart (deliveries are at least once), which is not what this test is about.
    bin.settle().await;
    bin.kill9();

    // Killed, and started again on Monday 08:59:56 in Berlin, winter time since Sunday (07:59:56 UTC): the Friday
    // slot is not sent again, 07:00 UTC passed without a slot, and 09:00 CET sends the Monday digest.
    let mut bin = start_binary_at(&file, "2026-10-26 07:59:56");
    let monday = wait_long_for_digests(dir.path(), 2).await;
    sent_just_after(&monday[1], "2026-10-26T08:00:00Z");
    assert_eq!(monday[1]["digest"]["out_of_sync"][0]["app"], "argocd/old-drift");
    bin.settle().await;
    assert_eq!(
        digests(dir.path()).len(),
        2,
        "one digest per slot: {:?}",
        digests(dir.path())
    );
    bin.kill9();
}

#[tokio::test]
async fn two_real_binaries_on_postgresql_send_nine_in_berlin_once() {
    let pg = PgServer::start();
    let dirs = [tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp")];
    let replicas: Vec<Binary> = dirs
        .iter()
        .map(|dir| {
            let file = dir.path().join("herald.yaml");
            let base: String = (base_yaml(dir.path()).lines())
                .filter(|line| !line.starts_with("storage:"))
                .map(|line| format!("{line}\n"))
                .collect();
            let storage = format!("storage: {{url: \"{}\"}}\n", pg.url);
            std::fs::write(&file, format!("{base}{storage}{}", config(dir.path(), "", ""))).expect("config");
            // Friday 08:59:45 in Berlin: both replicas' clocks start 15 s before the slot.
            start_binary_at(&file, "2026-10-23 06:59:45")
        })
        .collect();
    let sent = reqwest::Client::new()
        .post(format!("{}/v1/argocd/events", replicas[0].address))
        .body(body("old-drift", "OutOfSync", "Healthy", t("2026-10-23T06:59:45Z")))
        .send()
        .await
        .expect("herald answers");
    assert!(sent.status().is_success(), "{}", sent.status());

    let all = || -> Vec<Value> { dirs.iter().flat_map(|d| digests(d.path())).collect() };
    let first = eventually(Duration::from_secs(30), || async {
        let d = all();
        (!d.is_empty()).then_some(d)
    })
    .await
    .expect("one of the replicas sent the digest");
    sent_just_after(&first[0], "2026-10-23T07:00:00Z");
    assert_eq!(first[0]["digest"]["out_of_sync"][0]["app"], "argocd/old-drift");
    // Both replicas' schedulers have passed the slot since.
    for replica in &replicas {
        replica.settle().await;
    }
    assert_eq!(all().len(), 1, "one digest for two replicas: {:?}", all());
    for mut replica in replicas {
        replica.kill9();
    }
}
