//! The person on call (issue 45 §2), from the outside on a manual clock: an escalation step `on_call` reaches
//! whoever the schedule has on call when it fires — before the hand-off the first person, after it the next, during
//! an override its person (a Slack direct message, an e-mail through a real SMTP server) — and the team's
//! receivers, told so, when nobody is; `GET /v1/oncall` (and `herald oncall`) says who and until when; the status
//! page says it per team; a calendar given by URL is fetched, refreshed, and a broken or oversized one never
//! blanks the schedule; a calendar file is read.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::*;
use crate::initiator::Mailbox;
use herald::clock::{Clock, ManualClock};

/// Monday 30 March 2026, 06:00 UTC (08:00 in Berlin, summer time since Sunday): the rotation hands off to bob at
/// 09:00 Berlin, 07:00 UTC.
fn t0() -> chrono::DateTime<chrono::Utc> {
    utc("2026-03-30T06:00:00Z")
}

fn utc(t: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(t)
        .expect("t")
        .with_timezone(&chrono::Utc)
}

/// The team is told through a console file; people through a Slack bot (`slack`) and e-mail (`smtp_port`).
fn config(dir: &std::path::Path, slack: &str, smtp_port: u16, schedule: &str) -> String {
    format!(
        r##"
receivers:
  - {{name: team, console: {{file: "{d}/team.jsonl"}}}}
  - {{name: slack-bot, slack: {{token: xoxb-test, channel: "#ops", api_url: "{slack}/api"}}}}
  - {{name: mail, email: {{to: [oncall@example.com]}}}}
smtp: {{url: "smtp://127.0.0.1:{smtp_port}", from: herald@example.com}}
people:
  alice: {{email: alice@example.com}}
  bob: {{slack: U0BOB0001}}
  carol: {{slack: U0CAROL01}}
schedules:
  payments-primary: {schedule}
ownership: {{default_team: payments}}
teams:
  payments:
    receivers: [team]
    escalation: [{{after: 30m, on_call: payments-primary}}]
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_by: [app]}}
"##,
        d = dir.display()
    )
}

const ROTATION: &str = "{timezone: Europe/Berlin, rotation: {people: [alice, bob], every: 1w, start: 2026-03-23, \
                        handoff: '09:00'}, overrides: [{person: carol, from: '2026-03-30 10:00', until: '2026-03-30 12:00'}]}";

async fn slack() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat.postMessage"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(serde_json::json!({"ok": true, "channel": "D1", "ts": "1.0"})),
        )
        .mount(&server)
        .await;
    server
}

/// The Slack messages so far, as (channel, text).
async fn dms(server: &MockServer) -> Vec<(String, String)> {
    (server.received_requests().await.unwrap_or_default().iter())
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .map(|b| (b["channel"].as_str().unwrap_or("").to_string(), b.to_string()))
        .collect()
}

async fn degraded(app: &TestApp, clock: &ManualClock, name: &str) {
    let r = app
        .post(envelope(
            name,
            "payments",
            "Synced",
            "Degraded",
            &clock.now().to_rfc3339(),
        ))
        .await;
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
    app.settle().await;
}

/// The team's messages that are escalation steps.
fn team_escalations(dir: &std::path::Path) -> Vec<Value> {
    (delivered(&dir.join("team.jsonl")).into_iter())
        .filter(|m| m["title"].as_str().is_some_and(|t| t.starts_with("Escalated")))
        .collect()
}

async fn on_call(app: &TestApp, query: &str) -> (u16, Value) {
    let r = app
        .client
        .get(format!("{}/v1/oncall{query}", app.address))
        .send()
        .await
        .expect("get");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_step_before_the_hand_off_reaches_alice_after_it_bob_and_during_the_override_carol() {
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let (slack, mail) = (slack().await, Mailbox::start(dir.path()).await);
    let clock = ManualClock::new(t0());
    let app = TestApp::spawn_in(
        dir.clone(),
        &config(dir.path(), &slack.uri(), mail.port, ROTATION),
        Arc::new(clock.clone()),
    )
    .await;

    // pay-a fires at 06:00 UTC; its step is due at 06:30, before the hand-off: alice, who has e-mail only.
    degraded(&app, &clock, "pay-a").await;
    app.advance(&clock, Duration::from_secs(31 * 60)).await;
    let mails = eventually(Duration::from_secs(10), || async {
        Some(mail.messages()).filter(|m| !m.is_empty())
    })
    .await
    .expect("an e-mail to alice");
    assert_eq!(mails.len(), 1);
    assert!(mails[0].contains("To: alice@example.com"), "{}", mails[0]);
    assert!(
        !mails[0].contains("oncall@example.com"),
        "to alice, not the receiver's own list"
    );
    assert!(mails[0].contains("payments-primary"), "{}", mails[0]);
    assert!(dms(&slack).await.is_empty(), "alice has no Slack");

    // pay-b fires at 06:31; its step is due at 07:01, after the hand-off at 09:00 Berlin: bob, by Slack.
    degraded(&app, &clock, "pay-b").await;
    app.advance(&clock, Duration::from_secs(31 * 60)).await;
    let to_bob = eventually(Duration::from_secs(10), || async {
        Some(dms(&slack).await).filter(|d| !d.is_empty())
    })
    .await
    .expect("a DM to bob");
    assert_eq!(
        to_bob.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(),
        vec!["U0BOB0001"]
    );
    assert!(to_bob[0].1.contains("pay-b"), "{}", to_bob[0].1);

    // pay-c fires at 07:02, its step at 07:32 is still bob's; the override (carol, 10:00–12:00 Berlin = 08:00–10:00
    // UTC) begins later: pay-d fires at 07:41, its step at 08:11 reaches carol.
    degraded(&app, &clock, "pay-c").await;
    app.advance(&clock, Duration::from_secs(39 * 60)).await;
    degraded(&app, &clock, "pay-d").await;
    app.advance(&clock, Duration::from_secs(31 * 60)).await;
    let all = eventually(Duration::from_secs(10), || async {
        Some(dms(&slack).await).filter(|d| d.len() >= 3)
    })
    .await
    .expect("three DMs");
    app.settle().await;
    let channels: Vec<String> = dms(&slack).await.into_iter().map(|(c, _)| c).collect();
    assert_eq!(channels, vec!["U0BOB0001", "U0BOB0001", "U0CAROL01"], "{all:?}");
    assert!(all[2].1.contains("pay-d"), "{}", all[2].1);
    assert_eq!(mail.messages().len(), 1, "nothing more to alice");
    assert!(
        team_escalations(dir.path()).is_empty(),
        "someone was on call each time: the team is not told"
    );

    // The API says who is on call now (carol, by the override, until 10:00 UTC), and at any other time.
    let (status, now) = on_call(&app, "").await;
    assert_eq!(status, 200, "{now}");
    let s = &now["items"][0];
    assert_eq!(
        (s["schedule"].as_str(), s["on_call"]["person"].as_str()),
        (Some("payments-primary"), Some("carol"))
    );
    assert_eq!(
        (s["on_call"]["by"].as_str(), s["on_call"]["until"].as_str()),
        (Some("override"), Some("2026-03-30T10:00:00Z"))
    );
    assert_eq!(s["teams"], serde_json::json!(["payments"]));
    let (_, later) = on_call(&app, "?schedule=payments-primary&at=2026-04-06T06:59:00Z").await;
    assert_eq!(later["items"][0]["on_call"]["person"], "bob");
    let (_, next) = on_call(&app, "?at=2026-04-06T09:00:00%2B02:00").await;
    assert_eq!(
        next["items"][0]["on_call"]["person"], "alice",
        "the next hand-off, at 09:00 Berlin"
    );

    // The status page says it for the team.
    let page = app
        .client
        .get(format!("{}/?team=payments", app.address))
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("text");
    assert!(page.contains("On call") && page.contains("<b>carol</b>"), "{page}");
    app.stop().await;
}

#[tokio::test]
async fn a_step_with_nobody_on_call_goes_to_the_teams_receivers_saying_so() {
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let slack = slack().await;
    // The rotation starts next week: nobody is on call yet.
    let schedule = "{rotation: {people: [bob], every: 1w, start: 2026-04-06}}";
    let clock = ManualClock::new(t0());
    let app = TestApp::spawn_in(
        dir.clone(),
        &config(dir.path(), &slack.uri(), free_port(), schedule),
        Arc::new(clock.clone()),
    )
    .await;
    degraded(&app, &clock, "pay-a").await;
    app.advance(&clock, Duration::from_secs(31 * 60)).await;
    let told = eventually(Duration::from_secs(10), || async {
        Some(team_escalations(dir.path())).filter(|m| !m.is_empty())
    })
    .await
    .expect("the team is told");
    assert_eq!(told.len(), 1, "{told:?}");
    let title = told[0]["title"].as_str().unwrap_or("");
    assert!(title.contains("nobody was on call for payments-primary"), "{title}");
    assert!(
        told[0]["reason"].as_str().unwrap_or("").contains("nobody was on call"),
        "{}",
        told[0]
    );
    assert!(dms(&slack).await.is_empty());
    let (_, now) = on_call(&app, "?schedule=payments-primary").await;
    assert_eq!(now["items"][0]["on_call"], Value::Null);
    app.stop().await;
}

#[tokio::test]
async fn bad_questions_about_who_is_on_call_get_a_4xx_that_says_why() {
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let slack = slack().await;
    let clock = ManualClock::new(t0());
    let app = TestApp::spawn_in(
        dir.clone(),
        &config(dir.path(), &slack.uri(), free_port(), ROTATION),
        Arc::new(clock),
    )
    .await;
    for (query, status, says) in [
        (
            "?schedule=nope",
            404,
            "no schedule is named \"nope\" (configured: payments-primary)",
        ),
        ("?at=tomorrow", 400, "not an RFC 3339 time"),
        ("?at=2026-13-01T00:00:00Z", 400, "not an RFC 3339 time"),
        ("?colour=red", 400, "unknown field"),
    ] {
        let (got, body) = on_call(&app, query).await;
        assert_eq!(got, status, "{query}: {body}");
        assert!(body["error"].as_str().unwrap_or("").contains(says), "{query}: {body}");
    }
    app.stop().await;
}

/// `herald oncall` prints who is on call, by schedule, at `--at`.
#[tokio::test]
async fn herald_oncall_prints_who_and_until_when() {
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let slack = slack().await;
    let clock = ManualClock::new(t0());
    let app = TestApp::spawn_in(
        dir.clone(),
        &config(dir.path(), &slack.uri(), free_port(), ROTATION),
        Arc::new(clock),
    )
    .await;
    let run = |args: Vec<String>| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(args)
            .output()
            .expect("herald");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let url = app.address.clone();
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        run(vec![
            "oncall".into(),
            "payments-primary".into(),
            "--at".into(),
            "2026-03-30T07:30:00Z".into(),
            "--url".into(),
            url,
        ])
    })
    .await
    .expect("ran");
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("SCHEDULE") && out.contains("payments-primary"), "{out}");
    assert!(
        out.contains("bob") && out.contains("2026-03-30 08:00 UTC") && out.contains("rotation"),
        "bob until carol's override: {out}"
    );
    let url = app.address.clone();
    let (code, _, err) =
        tokio::task::spawn_blocking(move || run(vec!["oncall".into(), "ghost".into(), "--url".into(), url]))
            .await
            .expect("ran");
    assert_ne!(code, Some(0));
    assert!(err.contains("no schedule is named \"ghost\""), "{err}");
    app.stop().await;
}

const CALENDAR: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\n\
BEGIN:VEVENT\r\nUID:1\r\nDTSTART;TZID=Europe/Berlin:20260323T090000\r\nDTEND;TZID=Europe/Berlin:20260330T090000\r\nSUMMARY:bob\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:2\r\nDTSTART;TZID=Europe/Berlin:20260330T090000\r\nDTEND;TZID=Europe/Berlin:20260406T090000\r\nSUMMARY:Alice@Example.com\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:3\r\nDTSTART:20260401T000000Z\r\nDURATION:P1D\r\nRRULE:FREQ=WEEKLY\r\nSUMMARY:carol\r\nEND:VEVENT\r\n\
END:VCALENDAR\r\n";

#[tokio::test]
async fn a_calendar_by_url_is_fetched_and_a_broken_or_oversized_one_keeps_the_last_good_copy() {
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let (slack, calendar, mail) = (
        slack().await,
        MockServer::start().await,
        Mailbox::start(dir.path()).await,
    );
    Mock::given(method("GET"))
        .and(path("/private-s3cret/basic.ics"))
        .respond_with(ResponseTemplate::new(200).set_body_string(CALENDAR))
        .mount(&calendar)
        .await;
    let schedule = format!(
        "{{timezone: Europe/Berlin, ical: {{url: '{}/private-s3cret/basic.ics', refresh: 10m, max_bytes: 65536}}}}",
        calendar.uri()
    );
    let clock = ManualClock::new(t0());
    let app = TestApp::spawn_in(
        dir.clone(),
        &config(dir.path(), &slack.uri(), mail.port, &schedule),
        Arc::new(clock.clone()),
    )
    .await;

    // Fetched at start: bob until 09:00 Berlin, then alice (named by her e-mail address).
    let first = eventually(Duration::from_secs(10), || async {
        let (_, v) = on_call(&app, "").await;
        Some(v).filter(|v| !v["items"][0]["calendar"]["read_at"].is_null())
    })
    .await
    .expect("the calendar is fetched");
    let s = &first["items"][0];
    assert_eq!(
        (s["on_call"]["person"].as_str(), s["on_call"]["by"].as_str()),
        (Some("bob"), Some("calendar"))
    );
    assert_eq!(s["on_call"]["until"], "2026-03-30T07:00:00Z");
    let c = &s["calendar"];
    assert_eq!(
        (c["events"].as_u64(), c["repeating"].as_u64()),
        (Some(2), Some(1)),
        "{c}"
    );
    assert!(
        !first.to_string().contains("s3cret"),
        "the calendar's address is not shown: {first}"
    );
    let (_, later) = on_call(&app, "?at=2026-03-31T12:00:00Z").await;
    assert_eq!(later["items"][0]["on_call"]["person"], "alice");

    // The calendar breaks: the next refresh fails, the copy is kept, and says how old it is and why.
    calendar.reset().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>Sign in to see this calendar</html>"))
        .mount(&calendar)
        .await;
    clock.advance(Duration::from_secs(11 * 60));
    let broken = eventually(Duration::from_secs(10), || async {
        let (_, v) = on_call(&app, "").await;
        Some(v).filter(|v| !v["items"][0]["calendar"]["error"].is_null())
    })
    .await
    .expect("the failure is seen");
    let s = &broken["items"][0];
    assert!(
        s["calendar"]["error"]
            .as_str()
            .unwrap_or("")
            .contains("BEGIN:VCALENDAR"),
        "{s}"
    );
    assert_eq!(s["calendar"]["read_at"], "2026-03-30T06:00:00Z", "{s}");
    assert_eq!(s["calendar"]["age_seconds"], 11 * 60, "{s}");
    assert_eq!(s["on_call"]["person"], "bob", "the last good copy still answers");

    // Oversized: refused without reading it all; the copy is still kept.
    calendar.reset().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_string(format!("BEGIN:VCALENDAR\r\n{}", "X-PAD:0123456789\r\n".repeat(10_000))),
        )
        .mount(&calendar)
        .await;
    clock.advance(Duration::from_secs(11 * 60));
    let oversized = eventually(Duration::from_secs(10), || async {
        let (_, v) = on_call(&app, "").await;
        Some(v).filter(|v| {
            v["items"][0]["calendar"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("max_bytes"))
        })
    })
    .await
    .expect("the oversized calendar is refused");
    assert_eq!(
        oversized["items"][0]["on_call"]["person"], "bob",
        "06:22 UTC: bob's event, from the copy"
    );

    // An escalation step reaches the calendar's person at that moment: pay-a fires at 07:02, its step at 07:32 is
    // alice's (the copy read at 06:00 says so).
    app.advance(&clock, Duration::from_secs(40 * 60)).await;
    degraded(&app, &clock, "pay-a").await;
    app.advance(&clock, Duration::from_secs(31 * 60)).await;
    let mails = eventually(Duration::from_secs(10), || async {
        Some(mail.messages()).filter(|m| !m.is_empty())
    })
    .await
    .expect("an e-mail to alice");
    assert!(mails[0].contains("To: alice@example.com"), "{}", mails[0]);
    let page = app
        .client
        .get(format!("{}/", app.address))
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("text");
    assert!(page.contains("cannot be read") && !page.contains("s3cret"), "{page}");
    app.stop().await;
}

#[tokio::test]
async fn a_calendar_file_is_read_at_start() {
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let slack = slack().await;
    let file = dir.path().join("oncall.ics");
    std::fs::write(&file, CALENDAR).expect("write");
    let schedule = format!("{{timezone: Europe/Berlin, ical: {{file: '{}'}}}}", file.display());
    let clock = ManualClock::new(t0());
    let app = TestApp::spawn_in(
        dir.clone(),
        &config(dir.path(), &slack.uri(), free_port(), &schedule),
        Arc::new(clock),
    )
    .await;
    let (_, v) = on_call(&app, "?at=2026-03-30T07:00:00Z").await;
    let s = &v["items"][0];
    assert_eq!(
        (s["on_call"]["person"].as_str(), s["on_call"]["by"].as_str()),
        (Some("alice"), Some("calendar")),
        "{v}"
    );
    assert_eq!(
        s["calendar"]["source"].as_str(),
        Some(file.display().to_string().as_str())
    );
    let (_, gap) = on_call(&app, "?at=2026-04-07T00:00:00Z").await;
    assert_eq!(gap["items"][0]["on_call"], Value::Null, "no event: nobody");
    app.stop().await;
}

/// A calendar of one event, from a day ago to a day ahead, naming `who`.
fn calendar_of(who: &str) -> String {
    let at = |d: i64| {
        (chrono::Utc::now() + chrono::Duration::days(d))
            .format("%Y%m%dT%H%M%SZ")
            .to_string()
    };
    format!(
        "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART:{}\r\nDTEND:{}\r\nSUMMARY:{who}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
        at(-1),
        at(1)
    )
}

/// The real binary reads a schedule's calendar file again on SIGHUP; a file that no longer reads is refused with
/// its key path, and the copy read before keeps answering.
#[tokio::test]
async fn sighup_reads_the_calendar_file_again_and_a_broken_one_changes_nothing() {
    use crate::reload::{hangup, logged};
    let dir = tempfile::tempdir().expect("tmp");
    let (cfg, ics) = (dir.path().join("herald.yaml"), dir.path().join("oncall.ics"));
    std::fs::write(&ics, calendar_of("alice")).expect("write");
    std::fs::write(
        &cfg,
        format!(
            "{}people: {{alice: {{email: alice@example.com}}, bob: {{email: bob@example.com}}}}\n\
             schedules: {{primary: {{ical: {{file: '{}'}}}}}}\n",
            base_yaml(dir.path()),
            ics.display()
        ),
    )
    .expect("write");
    let mut bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();
    let who = || async {
        let v: Value = (client
            .get(format!("{}/v1/oncall?schedule=primary", bin.address))
            .send()
            .await)
            .expect("get")
            .json()
            .await
            .expect("json");
        v["items"][0]["on_call"]["person"]
            .as_str()
            .unwrap_or("nobody")
            .to_string()
    };
    assert_eq!(who().await, "alice");

    std::fs::write(&ics, calendar_of("bob")).expect("write");
    hangup(&bin);
    logged(&bin, "configuration reloaded", 1).await;
    assert_eq!(who().await, "bob", "the file is read again");

    std::fs::write(&ics, "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nSUMMARY:alice\r\n").expect("write");
    hangup(&bin);
    logged(&bin, "configuration reload refused", 1).await;
    assert!(bin.logs().contains("schedules.primary.ical.file"), "{}", bin.logs());
    assert_eq!(who().await, "bob", "the running copy stays");
    assert!(bin.terminate().await.success());
}
