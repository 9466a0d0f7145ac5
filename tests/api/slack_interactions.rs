//! Slack buttons from the outside: with `slack.signing_secret`, the bot's message about a firing incident carries
//! "Acknowledge" and "Silence 1 h"; a click Slack signed (`POST /v1/slack/interactions`, no Herald credential)
//! acknowledges as `@alice (Slack)` — and the message is edited to say so — or silences the incident's Application
//! and kind for an hour. A request that is not signed with the secret, is older or newer than 5 minutes, or was
//! seen before is refused (401) and changes nothing; a payload Herald cannot act on is a 4xx that says why; the
//! secret and the signature are never in an answer or the log.

use std::sync::Arc;
use std::time::Duration;

use crate::helpers::*;
use herald::clock::{Clock, ManualClock};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SIGNING_SECRET: &str = "slack-signing-secret-8f742231b10e8888abcd";
const READER: &str = "reader-token-0123456789";
const ARGOCD: &str = "argocd-ingest-token-0123456789";
const BOT_TOKEN: &str = "xoxb-bot-token-0123456789";

fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z")
        .expect("t")
        .with_timezone(&chrono::Utc)
}

fn config(slack_api: &str) -> String {
    format!(
        r##"
server:
  auth:
    read_tokens: [{{name: dashboard, token: {READER}}}]
    ingest_tokens: [{ARGOCD}]
receivers:
  - name: slack
    rate_limit_per_second: 100
    slack: {{token: {BOT_TOKEN}, channel: "#payments", api_url: "{slack_api}/api", signing_secret: {SIGNING_SECRET}}}
ownership: {{default_team: payments}}
teams: {{payments: {{receivers: [slack]}}}}
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1m, repeat_interval: 30m}}
"##
    )
}

/// A Slack Web API that takes every `chat.postMessage` and `chat.update`.
async fn slack() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat.postMessage"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "channel": "C0PAY", "ts": "1700000000.000100"})),
        )
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/chat.update"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "channel": "C0PAY", "ts": "1700000000.000100"})),
        )
        .mount(&server)
        .await;
    server
}

/// The bodies of the Web API calls of `name` Slack received.
async fn calls(server: &MockServer, name: &str) -> Vec<Value> {
    (server.received_requests().await.unwrap_or_default().iter())
        .filter(|r| r.url.path() == format!("/api/{name}"))
        .filter_map(|r| serde_json::from_slice(&r.body).ok())
        .collect()
}

/// `v0=` + hex HMAC-SHA256 over `v0:{timestamp}:{body}`, as Slack signs.
fn sign(secret: &str, timestamp: &str, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// A `block_actions` click of `user` on the button `action_id` whose value is `value`, form-encoded as Slack sends it.
fn click(action_id: &str, value: &str, user: &str) -> String {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": "U0123ABCD", "username": user, "name": user, "team_id": "T0001"},
        "api_app_id": "A0001",
        "container": {"type": "message", "message_ts": "1700000000.000100", "channel_id": "C0PAY"},
        "channel": {"id": "C0PAY", "name": "payments"},
        "response_url": "https://hooks.slack.com/actions/T0001/1/abcdef",
        "actions": [{"action_id": action_id, "block_id": "b", "type": "button", "value": value,
                     "text": {"type": "plain_text", "text": "Acknowledge"}, "action_ts": "1700000001.000200"}],
    });
    form(&payload.to_string())
}

fn form(payload: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", payload)
        .finish()
}

/// Posts `body` to the interactions endpoint with the given signing headers; the status and the answer's text.
async fn post(app: &TestApp, body: &str, timestamp: Option<&str>, signature: Option<&str>) -> (u16, String) {
    let mut req = app
        .client
        .post(format!("{}/v1/slack/interactions", app.address))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.to_string());
    if let Some(t) = timestamp {
        req = req.header("X-Slack-Request-Timestamp", t);
    }
    if let Some(s) = signature {
        req = req.header("X-Slack-Signature", s);
    }
    let r = req.send().await.expect("post");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    assert!(!text.contains(SIGNING_SECRET), "the secret in an answer: {text}");
    if let Some(s) = signature {
        assert!(
            !text.contains(s.trim_start_matches("v0=")),
            "the signature in an answer: {text}"
        );
    }
    (status, text)
}

/// Posts `body` signed now (by `clock`) with the signing secret.
async fn post_signed(app: &TestApp, clock: &ManualClock, body: &str) -> (u16, String) {
    let ts = clock.now().timestamp().to_string();
    post(app, body, Some(&ts), Some(&sign(SIGNING_SECRET, &ts, body))).await
}

async fn get(app: &TestApp, path: &str) -> Value {
    let r = app
        .client
        .get(format!("{}{path}", app.address))
        .bearer_auth(READER)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 200, "GET {path}");
    r.json().await.expect("json")
}

async fn firing(app: &TestApp) -> Value {
    get(app, "/v1/incidents?state=firing").await["items"][0].clone()
}

/// Starts Herald with a Slack bot at `server`, and an incident that fired and was posted; its id.
async fn started(server: &MockServer, clock: &ManualClock) -> (TestApp, i64) {
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let app = TestApp::spawn_in(dir, &config(&server.uri()), Arc::new(clock.clone())).await;
    let body = envelope("pay-api", "payments", "Synced", "Degraded", &clock.now().to_rfc3339());
    let r = app.post_as(ARGOCD, body).await;
    assert_eq!(r.status(), 202);
    app.settle().await;
    assert_eq!(calls(server, "chat.postMessage").await.len(), 1, "the first message");
    let id = firing(&app).await["id"].as_i64().expect("id");
    (app, id)
}

/// The `actions` blocks of a message.
fn buttons(message: &Value) -> Vec<Value> {
    (message["blocks"].as_array().expect("blocks").iter())
        .filter(|b| b["type"] == "actions")
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_signed_click_on_acknowledge_acknowledges_as_the_slack_user_and_edits_the_message() {
    let server = slack().await;
    let clock = ManualClock::new(t0());
    let (app, id) = started(&server, &clock).await;

    // The first message carries the two buttons, each with the incident's id.
    let first = calls(&server, "chat.postMessage").await.remove(0);
    let actions = buttons(&first);
    assert_eq!(actions.len(), 1, "{first}");
    let elements = actions[0]["elements"].as_array().expect("elements");
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let seen: Vec<(String, String, String)> = (elements.iter())
        .map(|e| (s(&e["action_id"]), s(&e["text"]["text"]), s(&e["value"])))
        .collect();
    let id_text = id.to_string();
    let want = |a: &str, t: &str| (a.to_string(), t.to_string(), id_text.clone());
    assert_eq!(
        seen,
        [
            want("herald_ack", "Acknowledge"),
            want("herald_silence_1h", "Silence 1 h")
        ]
    );

    // Alice clicks Acknowledge: no Herald credential, Slack's signature only.
    let (status, text) = post_signed(&app, &clock, &click("herald_ack", &id_text, "alice")).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("Acknowledged by @alice (Slack)"), "{text}");
    let incident = firing(&app).await;
    assert_eq!(incident["acknowledged"]["by"], "@alice (Slack)", "{incident}");
    assert_eq!(incident["acknowledged"]["comment"], "Slack user U0123ABCD");

    // The bot's message is edited in place to say who took it, without buttons.
    app.settle().await;
    let updates = calls(&server, "chat.update").await;
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(updates[0]["ts"], "1700000000.000100");
    assert_eq!(updates[0]["channel"], "C0PAY");
    // Text from outside has a word joiner after `@` (no accidental mention); Slack shows "@alice".
    let edited = updates[0]["text"].as_str().unwrap_or_default().replace('\u{2060}', "");
    assert!(edited.contains("Acknowledged by @alice"), "{}", updates[0]);
    assert!(
        buttons(&updates[0]).is_empty(),
        "no buttons once acknowledged: {}",
        updates[0]
    );
    assert_eq!(calls(&server, "chat.postMessage").await.len(), 1, "nothing else posted");
    app.stop().await;
}

#[tokio::test]
async fn a_signed_click_on_silence_silences_the_application_and_kind_for_an_hour() {
    let server = slack().await;
    let clock = ManualClock::new(t0());
    let (app, id) = started(&server, &clock).await;

    let (status, text) = post_signed(&app, &clock, &click("herald_silence_1h", &id.to_string(), "bob")).await;
    assert_eq!(status, 200, "{text}");
    let silences = get(&app, "/v1/silences").await;
    assert_eq!(silences["count"], 1, "{silences}");
    let silence = &silences["items"][0];
    assert_eq!(silence["created_by"], "@bob (Slack)");
    let matchers = silence["matchers"].to_string();
    assert!(
        matchers.contains("pay-api") && matchers.contains("degraded"),
        "the Application and the kind: {matchers}"
    );
    assert!(
        silence["comment"].as_str().unwrap_or_default().contains("U0123ABCD"),
        "{silence}"
    );

    // The repeat due after 30 minutes is held by the silence …
    app.advance(&clock, Duration::from_secs(31 * 60)).await;
    assert_eq!(
        calls(&server, "chat.postMessage").await.len(),
        1,
        "no repeat while silenced"
    );
    // … and is sent once the hour is over.
    app.advance(&clock, Duration::from_secs(31 * 60)).await;
    let posted = eventually(Duration::from_secs(10), || async {
        let p = calls(&server, "chat.postMessage").await;
        (p.len() >= 2).then_some(p)
    })
    .await
    .expect("the repeat after the silence");
    assert_eq!(posted.len(), 2, "{posted:?}");
    app.stop().await;
}

#[tokio::test]
async fn an_unsigned_forged_stale_early_or_replayed_click_is_refused_and_changes_nothing() {
    let server = slack().await;
    let clock = ManualClock::new(t0());
    let (app, id) = started(&server, &clock).await;
    let body = click("herald_ack", &id.to_string(), "mallory");
    let now = clock.now().timestamp();
    let at = |secs: i64| (now + secs).to_string();
    let signed = |ts: &str| sign(SIGNING_SECRET, ts, &body);

    let cases: Vec<(&str, Option<String>, Option<String>)> = vec![
        ("no headers", None, None),
        ("no signature", Some(at(0)), None),
        ("no timestamp", None, Some(signed(&at(0)))),
        (
            "another secret",
            Some(at(0)),
            Some(sign("another-secret", &at(0), &body)),
        ),
        ("another timestamp than signed", Some(at(1)), Some(signed(&at(0)))),
        (
            "a timestamp that is no number",
            Some("soon".into()),
            Some(signed("soon")),
        ),
        ("6 minutes old", Some(at(-360)), Some(signed(&at(-360)))),
        ("6 minutes ahead", Some(at(360)), Some(signed(&at(360)))),
        ("not hex", Some(at(0)), Some("v0=zz".into())),
    ];
    for (what, ts, sig) in &cases {
        let (status, text) = post(&app, &body, ts.as_deref(), sig.as_deref()).await;
        assert_eq!(status, 401, "{what}: {text}");
        assert!(
            text.contains("Slack") || text.contains("X-Slack"),
            "{what} says why: {text}"
        );
    }
    // A body changed after signing.
    let ts = at(0);
    let (status, _) = post(
        &app,
        &click("herald_ack", &id.to_string(), "eve"),
        Some(&ts),
        Some(&signed(&ts)),
    )
    .await;
    assert_eq!(status, 401, "a changed body");

    // The same signed request twice: the second is a replay — also after a minute, within the window.
    let silence = click("herald_silence_1h", &id.to_string(), "bob");
    let sig = sign(SIGNING_SECRET, &ts, &silence);
    let (status, text) = post(&app, &silence, Some(&ts), Some(&sig)).await;
    assert_eq!(status, 200, "{text}");
    clock.advance(Duration::from_secs(60));
    let (status, text) = post(&app, &silence, Some(&ts), Some(&sig)).await;
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("replay"), "{text}");

    assert!(firing(&app).await.get("acknowledged").is_none(), "nothing acknowledged");
    assert_eq!(get(&app, "/v1/silences").await["count"], 1, "only the first silence");
    app.stop().await;
}

#[tokio::test]
async fn a_replay_is_refused_after_a_restart_too() {
    let server = slack().await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let app = TestApp::spawn_in(dir.clone(), &config(&server.uri()), Arc::new(clock.clone())).await;
    let body = click("herald_ack", "999", "alice");
    let ts = clock.now().timestamp().to_string();
    let sig = sign(SIGNING_SECRET, &ts, &body);
    let (status, text) = post(&app, &body, Some(&ts), Some(&sig)).await;
    assert_eq!(status, 200, "an unknown incident: nothing done, said: {text}");
    assert!(text.contains("was not sent to this Slack app"), "{text}");
    let dir = app.stop().await;
    let app = TestApp::spawn_in(dir, &config(&server.uri()), Arc::new(clock.clone())).await;
    let (status, text) = post(&app, &body, Some(&ts), Some(&sig)).await;
    assert_eq!(status, 401, "{text}");
    app.stop().await;
}

#[tokio::test]
async fn a_signed_payload_herald_cannot_act_on_is_a_4xx_that_says_why() {
    let server = slack().await;
    let clock = ManualClock::new(t0());
    let (app, id) = started(&server, &clock).await;
    let id = id.to_string();
    let wrong_user = form(
        &json!({"type": "block_actions", "user": {"id": "U1", "username": 42},
                "actions": [{"action_id": "herald_ack", "value": id}]})
        .to_string(),
    );
    let cases: Vec<(&str, String, &str)> = vec![
        ("no payload field", "text=hello".into(), "payload"),
        ("a payload that is not JSON", form("{not json"), "not JSON"),
        ("a JSON array", form("[1, 2]"), "object"),
        (
            "another interaction type",
            form(&json!({"type": "view_submission", "user": {"id": "U1", "username": "a"}}).to_string()),
            "block_actions",
        ),
        ("an unknown button", click("herald_reboot", &id, "alice"), "herald_ack"),
        (
            "a value that is no incident id",
            click("herald_ack", "DROP TABLE", "alice"),
            "incident id",
        ),
        ("a user name of the wrong type", wrong_user, "username"),
        (
            "a user name of two lines",
            click("herald_ack", &id, "alice\nERROR forged"),
            "one line",
        ),
        ("not UTF-8", "payload=%FF%FE".into(), "payload"),
    ];
    for (what, body, says) in cases {
        let (status, text) = post_signed(&app, &clock, &body).await;
        assert_eq!(status, 400, "{what}: {text}");
        assert!(text.contains(says), "{what}: {text}");
    }
    // Larger than the endpoint takes: 413 before anything is parsed.
    let huge = form(&"x".repeat(600 * 1024));
    let (status, text) = post_signed(&app, &clock, &huge).await;
    assert_eq!(status, 413, "{text}");

    assert!(firing(&app).await.get("acknowledged").is_none(), "nothing acknowledged");
    assert_eq!(get(&app, "/v1/silences").await["count"], 0);
    app.stop().await;
}

#[tokio::test]
async fn neither_the_signing_secret_nor_a_signature_reaches_the_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            "{}receivers: [{{name: slack, slack: {{token: {BOT_TOKEN}, channel: '#c', api_url: 'http://127.0.0.1:9/api', \
             signing_secret: {SIGNING_SECRET}}}}}]\n",
            base_yaml(dir.path())
        ),
    )
    .expect("write");
    let mut bin = Binary::start(&cfg, &[("RUST_LOG", "debug")]);
    let client = reqwest::Client::new();
    let ts = chrono::Utc::now().timestamp().to_string();
    let mut signatures = Vec::new();
    for (body, secret) in [
        (click("herald_ack", "7", "alice"), SIGNING_SECRET),
        (click("herald_ack", "7", "alice"), "a-wrong-secret"),
        (form("{not json"), SIGNING_SECRET),
    ] {
        let sig = sign(secret, &ts, &body);
        let r = client
            .post(format!("{}/v1/slack/interactions", bin.address))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("X-Slack-Request-Timestamp", &ts)
            .header("X-Slack-Signature", &sig)
            .body(body)
            .send()
            .await
            .expect("post");
        assert!(r.status().as_u16() < 500, "{}", r.status());
        signatures.push(sig);
    }
    assert!(bin.terminate().await.success());
    let logs = bin.logs();
    assert!(logs.contains("a Slack interaction was refused"), "{logs}");
    assert!(!logs.contains(SIGNING_SECRET), "{logs}");
    for sig in signatures {
        assert!(!logs.contains(sig.trim_start_matches("v0=")), "{logs}");
    }
}

const SECRET_A: &str = "slack-signing-secret-of-team-a-0123456789";
const SECRET_B: &str = "slack-signing-secret-of-team-b-0123456789";

/// Three teams: payments with its Slack app (A), search with its own (B, `slack_users: known`), ledger with no Slack
/// receiver at all; alice is a person Herald knows by her Slack user id.
fn three_teams_config(slack_api: &str, dir: &std::path::Path) -> String {
    format!(
        r##"
server:
  auth:
    read_tokens: [{{name: dashboard, token: {READER}}}]
    ingest_tokens: [{ARGOCD}]
receivers:
  - name: slack-a
    rate_limit_per_second: 100
    slack: {{token: {BOT_TOKEN}, channel: "#payments", api_url: "{slack_api}/api", signing_secret: {SECRET_A}}}
  - name: slack-b
    rate_limit_per_second: 100
    slack: {{token: {BOT_TOKEN}, channel: "#search", api_url: "{slack_api}/api", signing_secret: {SECRET_B}, slack_users: known}}
  - {{name: ledger-chat, console: {{file: "{d}/ledger.jsonl"}}}}
people: {{alice: {{slack: U0ALICE01}}}}
ownership: {{default_team: payments}}
teams: {{payments: {{receivers: [slack-a]}}, search: {{receivers: [slack-b]}}, ledger: {{receivers: [ledger-chat]}}}}
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1m, repeat_interval: 30m}}
"##,
        d = dir.display()
    )
}

/// A click on `action_id` for incident `value` by the Slack user `user_id` (`username`).
fn click_by(action_id: &str, value: &str, user_id: &str, username: &str) -> String {
    let body = click(action_id, value, username);
    body.replace("U0123ABCD", user_id)
}

/// Posts `body` signed now with `secret`.
async fn post_signed_with(app: &TestApp, clock: &ManualClock, secret: &str, body: &str) -> (u16, String) {
    let ts = clock.now().timestamp().to_string();
    post(app, body, Some(&ts), Some(&sign(secret, &ts, body))).await
}

#[tokio::test]
async fn one_teams_slack_app_acts_only_on_the_incidents_it_was_sent_and_names_known_people() {
    let server = slack().await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir, &three_teams_config(&server.uri(), &d), Arc::new(clock.clone())).await;
    for (name, team) in [
        ("pay-api", "payments"),
        ("search-api", "search"),
        ("ledger-api", "ledger"),
    ] {
        let body = envelope(name, team, "Synced", "Degraded", &clock.now().to_rfc3339());
        assert_eq!(app.post_as(ARGOCD, body).await.status(), 202);
    }
    wait_for(&d.join("ledger.jsonl"), 1).await;
    app.settle().await;
    assert_eq!(
        calls(&server, "chat.postMessage").await.len(),
        2,
        "payments' and search's"
    );
    let list = get(&app, "/v1/incidents?state=firing").await;
    let id_of = |team: &str| {
        (list["items"].as_array().expect("items").iter())
            .find(|i| i["team"] == team)
            .and_then(|i| i["id"].as_i64())
            .unwrap_or_else(|| panic!("no incident of {team}: {list}"))
    };
    let (pay, search, ledger) = (id_of("payments"), id_of("search"), id_of("ledger"));
    let app_ref = &app;
    let acked = move |id: i64| {
        let app = app_ref;
        async move {
            let list = get(app, "/v1/incidents?state=firing").await;
            (list["items"].as_array().expect("items").iter())
                .find(|i| i["id"] == id)
                .and_then(|i| i["acknowledged"]["by"].as_str().map(str::to_string))
        }
    };

    // Team A's app, signed with its own secret, on team B's incident and on team C's (no Slack receiver at all):
    // nothing is done, and the person who clicked is told why.
    for other in [search, ledger] {
        for action in ["herald_ack", "herald_silence_1h"] {
            let (status, text) = post_signed_with(
                &app,
                &clock,
                SECRET_A,
                &click_by(action, &other.to_string(), "U0EVE0001", "eve"),
            )
            .await;
            assert_eq!(status, 200, "{text}");
            let v: Value = serde_json::from_str(&text).expect("json");
            assert_eq!(v["response_type"], "ephemeral");
            assert!(
                v["text"].as_str().unwrap_or_default().contains(&format!(
                    "incident {other} was not sent to this Slack app (Herald's receiver slack-a)"
                )),
                "{text}"
            );
            assert_eq!(acked(other).await, None, "incident {other}");
            clock.advance(Duration::from_secs(1));
        }
    }
    assert_eq!(get(&app, "/v1/silences").await["count"], 0, "nothing silenced");

    // On its own incident: acknowledged, by alice as Herald knows her (her Slack user id is in people).
    let (status, text) = post_signed_with(
        &app,
        &clock,
        SECRET_A,
        &click_by("herald_ack", &pay.to_string(), "U0ALICE01", "al"),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(acked(pay).await.as_deref(), Some("alice"));

    // Team B's app takes only people Herald knows: eve is refused, saying why; alice acknowledges.
    let (status, text) = post_signed_with(
        &app,
        &clock,
        SECRET_B,
        &click_by("herald_ack", &search.to_string(), "U0EVE0001", "eve"),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("U0EVE0001 is not in Herald's people"), "{text}");
    assert_eq!(acked(search).await, None);
    clock.advance(Duration::from_secs(1));
    let (status, text) = post_signed_with(
        &app,
        &clock,
        SECRET_B,
        &click_by("herald_ack", &search.to_string(), "U0ALICE01", "al"),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(acked(search).await.as_deref(), Some("alice"));
    app.stop().await;
}
