//! Signed one-click links in messages: a chat message carries them when `server.public_url` and
//! `server.link_signing_key` are set; a GET shows a confirmation page and changes nothing; the POST acts once and a
//! replay says what already happened; a forged, altered or expired link gets a clear 4xx page.

use std::sync::Arc;
use std::time::Duration;

use crate::helpers::*;
use herald::clock::{Clock, ManualClock};
use serde_json::Value;

const KEY: &str = "a-link-signing-key-of-at-least-32-chars";

fn config(dir: &std::path::Path) -> String {
    format!(
        r#"
server: {{public_url: "https://herald.example.com", link_signing_key: "{KEY}", link_ttl: 7d}}
receivers: [{{name: chat, console: {{file: "{d}/chat.jsonl"}}}}]
ownership: {{default_team: payments}}
teams: {{payments: {{receivers: [chat]}}}}
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1m, repeat_interval: 1h}}
"#,
        d = dir.display()
    )
}

/// The path (`/act/…`) of the link labelled `label` in a delivered message.
fn link(message: &Value, label: &str) -> String {
    let actions = message["incidents"][0]["actions"].as_array().expect("actions");
    let url = actions
        .iter()
        .find(|a| a["label"].as_str().is_some_and(|l| l.starts_with(label)))
        .and_then(|a| a["url"].as_str())
        .unwrap_or_else(|| panic!("no {label} link: {message}"));
    url.strip_prefix("https://herald.example.com")
        .expect("public_url")
        .to_string()
}

/// A link's page confirmed: its form posted to `url` with `form` (`name=alice`).
async fn confirm(app: &TestApp, url: &str, form: &str) -> reqwest::Response {
    (app.client.post(url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form.to_string())
        .send()
        .await
        .expect("post")
}

#[tokio::test]
async fn a_links_get_changes_nothing_its_post_acts_once_and_a_forged_or_expired_one_is_refused() {
    let clock = ManualClock::new(chrono::Utc::now());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&d), Arc::new(clock.clone())).await;
    let body = envelope("pay-api", "payments", "Synced", "Degraded", &clock.now().to_rfc3339());
    assert_eq!(app.post(body).await.status(), 202);
    let message = wait_for(&d.join("chat.jsonl"), 1).await.remove(0);
    let labels: Vec<&str> = (message["incidents"][0]["actions"].as_array().expect("actions").iter())
        .filter_map(|a| a["label"].as_str())
        .collect();
    assert_eq!(
        labels,
        [
            "Acknowledge",
            "Silence 1 h",
            "Silence until Monday 09:00 (UTC)",
            "Open in Herald"
        ]
    );
    assert_eq!(
        link(&message, "Open in Herald"),
        "/apps/argocd/pay-api",
        "the Application's page on Herald"
    );
    let ack = link(&message, "Acknowledge");
    let url = |p: &str| format!("{}{p}", app.address);
    let acknowledged = || async {
        app.get_json("/v1/incidents?state=firing").await["items"][0]
            .get("acknowledged")
            .cloned()
    };

    // GET: a confirmation page asking for a name, one button; nothing acknowledged.
    for _ in 0..2 {
        let r = app.client.get(url(&ack)).send().await.expect("get");
        assert_eq!(r.status(), 200);
        let html = r.text().await.expect("html");
        assert!(html.contains("name=\"name\"") && html.contains("<button"), "{html}");
        // What it acts on, in people's words, linked back to the Application's page.
        assert!(
            html.contains(
                "<a href=\"/apps/argocd/pay-api\">pay-api</a> (Degraded), Argo CD instance default, firing since "
            ),
            "{html}"
        );
    }
    assert_eq!(acknowledged().await, None, "a GET never acts");

    // POST without a name: asked for one; with it: acknowledged once.
    let r = confirm(&app, &url(&ack), "name=").await;
    assert_eq!(r.status(), 422);
    let r = confirm(&app, &url(&ack), "name=alice").await;
    assert_eq!(r.status(), 200);
    assert!(r.text().await.expect("html").contains("Acknowledged by alice"));
    assert_eq!(acknowledged().await.expect("acknowledged")["by"], "alice");

    // Replayed (by anyone): harmless, says what happened, changes nothing.
    let r = confirm(&app, &url(&ack), "name=mallory").await;
    assert_eq!(r.status(), 200);
    let html = r.text().await.expect("html");
    assert!(
        html.contains("used already") && html.contains("acknowledged by alice"),
        "{html}"
    );
    assert_eq!(acknowledged().await.expect("acknowledged")["by"], "alice");

    // Silence 1 h: one silence, by the name given.
    let silence = link(&message, "Silence 1 h");
    let r = confirm(&app, &url(&silence), "name=bob").await;
    assert_eq!(r.status(), 200);
    let done = r.text().await.expect("html");
    assert!(
        done.contains("Silenced pay-api (Degraded) for bob until "),
        "in people's words: {done}"
    );
    let silences = app.get_json("/v1/silences").await;
    assert_eq!(silences["count"], 1, "{silences}");
    assert_eq!(silences["items"][0]["created_by"], "bob");

    // Altered (another token character) or forged: refused with a 4xx page, nothing done.
    let mut altered = ack.clone().into_bytes();
    let at = altered.len() - 20;
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).expect("ascii");
    for (path, want) in [(altered.as_str(), 403u16), ("/act/not-a-link", 400)] {
        for r in [
            app.client.get(url(path)).send().await.expect("get"),
            confirm(&app, &url(path), "name=eve").await,
        ] {
            assert_eq!(r.status().as_u16(), want, "{path}");
            assert!(r.text().await.expect("html").contains("cannot be used"));
        }
    }
    assert_eq!(app.get_json("/v1/silences").await["count"], 1);

    // Expired: eight days later the unused "Silence until Monday" link is refused (410).
    let monday = link(&message, "Silence until Monday");
    clock.advance(Duration::from_secs(8 * 24 * 3600));
    let r = confirm(&app, &url(&monday), "name=bob").await;
    assert_eq!(r.status(), 410);
    assert!(r.text().await.expect("html").contains("expired"));
    assert_eq!(app.get_json("/v1/silences?expired=true").await["count"], 1);
    app.stop().await;
}

/// Without a digest of its own, a team's "Silence until Monday 09:00" is in `server.time_zone`, and the silence ends
/// then.
#[tokio::test]
async fn silence_until_monday_is_in_the_servers_time_zone_when_the_team_has_no_digest() {
    let clock = ManualClock::new(chrono::Utc::now());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let config = config(&d).replace("link_ttl: 7d}", "link_ttl: 7d, time_zone: Europe/Berlin}");
    let app = TestApp::spawn_in(dir.clone(), &config, Arc::new(clock.clone())).await;
    let body = envelope("pay-api", "payments", "Synced", "Degraded", &clock.now().to_rfc3339());
    assert_eq!(app.post(body).await.status(), 202);
    let message = wait_for(&d.join("chat.jsonl"), 1).await.remove(0);
    let path = link(&message, "Silence until Monday 09:00 (Europe/Berlin)");
    let r = confirm(&app, &format!("{}{path}", app.address), "name=alice").await;
    assert_eq!(r.status(), 200);
    let silences = app.get_json("/v1/silences").await;
    let ends = silences["items"][0]["ends_at"].as_str().expect("a silence").to_string();
    let ends: chrono::DateTime<chrono::Utc> = ends.parse().expect("rfc3339");
    let local = ends.with_timezone(&chrono_tz::Europe::Berlin);
    assert_eq!(local.format("%a %H:%M").to_string(), "Mon 09:00", "{ends}");
}

/// A Slack Web API taking every `chat.postMessage` and `chat.update`.
async fn slack_api() -> wiremock::MockServer {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    let ok = serde_json::json!({"ok": true, "channel": "C0PAY", "ts": "1700000000.000100"});
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(ok))
        .mount(&server)
        .await;
    server
}

/// The bodies of the Web API calls `name` (`chat.update`) Slack received.
async fn slack_calls(server: &wiremock::MockServer, name: &str) -> Vec<Value> {
    (server.received_requests().await.unwrap_or_default().iter())
        .filter(|r| r.url.path() == format!("/api/{name}"))
        .filter_map(|r| serde_json::from_slice(&r.body).ok())
        .collect()
}

#[tokio::test]
async fn a_message_about_seven_applications_offers_one_link_that_acknowledges_them_all_at_once() {
    let clock = ManualClock::new(chrono::Utc::now());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let slack = slack_api().await;
    // The seven arrive within the group's wait: one message about all of them, to a Slack bot (whose message is
    // edited when they are acknowledged) and to the console.
    let config = format!(
        r##"
server: {{public_url: "https://herald.example.com", link_signing_key: "{KEY}", link_ttl: 7d}}
receivers:
  - {{name: chat, console: {{file: "{d}/chat.jsonl"}}}}
  - {{name: bot, slack: {{token: xoxb-0000000000-0000000000000-aaaaaaaaaaaaaaaaaaaaaaaa, channel: "#pay", api_url: "{api}/api"}}}}
ownership: {{default_team: payments}}
teams: {{payments: {{receivers: [chat, bot]}}}}
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 30s, group_interval: 1m, repeat_interval: 1h}}
"##,
        d = d.display(),
        api = slack.uri()
    );
    let app = TestApp::spawn_in(dir.clone(), &config, Arc::new(clock.clone())).await;
    let names: Vec<String> = (1..=7).map(|k| format!("shop-{k}")).collect();
    for name in &names {
        let body = envelope(name, "payments", "Synced", "Degraded", &clock.now().to_rfc3339());
        assert_eq!(app.post(body).await.status(), 202);
    }
    clock.advance(Duration::from_secs(31));
    let message = wait_for(&d.join("chat.jsonl"), 1).await.remove(0);
    assert_eq!(message["incidents"].as_array().map(Vec::len), Some(7), "{message}");
    // The list is too long for each incident's details: one link for them all.
    let all = message["group_actions"].as_array().expect("group_actions");
    assert_eq!(all.len(), 1, "{message}");
    assert_eq!(all[0]["label"], "Acknowledge all 7");
    let path = (all[0]["url"]
        .as_str()
        .unwrap_or_default()
        .strip_prefix("https://herald.example.com"))
    .expect("under public_url")
    .to_string();
    let url = format!("{}{path}", app.address);
    // Slack's message shows it under the list.
    app.settle().await;
    let posted = slack_calls(&slack, "chat.postMessage").await;
    assert_eq!(posted.len(), 1, "{posted:?}");
    // (each receiver's message has links of its own)
    assert!(posted[0].to_string().contains("|Acknowledge all 7>*"), "{}", posted[0]);

    // One incident resolves before anyone clicks.
    let healthy = envelope("shop-7", "payments", "Synced", "Healthy", &clock.now().to_rfc3339());
    assert_eq!(app.post(healthy).await.status(), 202);
    let resolved = eventually(Duration::from_secs(10), || async {
        let firing = app.get_json("/v1/incidents?state=firing").await;
        (firing["items"].as_array().map(Vec::len) == Some(6)).then_some(())
    });
    resolved.await.expect("shop-7 resolved");

    // The page lists what it acts on; a GET acknowledges nothing.
    let html = app
        .client
        .get(&url)
        .send()
        .await
        .expect("get")
        .text()
        .await
        .expect("html");
    assert!(html.contains("<h1>Acknowledge all 7</h1>"), "{html}");
    for name in &names {
        assert!(html.contains(&format!(">{name}</a> (Degraded)")), "{name}: {html}");
    }
    let firing = app.get_json("/v1/incidents?state=firing").await;
    assert!(
        firing["items"]
            .as_array()
            .expect("items")
            .iter()
            .all(|i| i.get("acknowledged").is_none())
    );

    // Confirmed: the six still open are acknowledged by bob, in one go; the one resolved is left alone.
    let r = confirm(&app, &url, "name=bob").await;
    assert_eq!(r.status(), 200);
    let html = r.text().await.expect("html");
    assert!(
        html.contains("6 incidents acknowledged by bob at ") && html.contains("1 incident had resolved"),
        "{html}"
    );
    let firing = app.get_json("/v1/incidents?state=firing").await;
    let items = firing["items"].as_array().expect("items");
    assert_eq!(items.len(), 6);
    assert!(items.iter().all(|i| i["acknowledged"]["by"] == "bob"), "{firing}");
    // The bot's message is edited once, about the six, not six times.
    app.settle().await;
    let updates = slack_calls(&slack, "chat.update").await;
    assert_eq!(updates.len(), 1, "{updates:?}");
    let edited = updates[0].to_string();
    assert!(edited.contains("Acknowledged by bob"), "{edited}");
    assert!(!edited.contains("shop-7"), "the resolved one is not in it: {edited}");

    // A replay changes nothing and says what the link did.
    let html = confirm(&app, &url, "name=mallory").await.text().await.expect("html");
    assert!(
        html.contains("used already") && html.contains("6 incidents acknowledged by bob"),
        "{html}"
    );
    app.stop().await;
}

/// A link made for one team's incident cannot act on another's: its token with the other incident's id put in is
/// refused (403) and nothing is done; each link's page says what it acts on.
#[tokio::test]
async fn a_link_for_one_teams_incident_altered_to_another_teams_is_refused() {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    let clock = ManualClock::new(chrono::Utc::now());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let config = config(&d).replace(
        "teams: {payments: {receivers: [chat]}}",
        "teams: {payments: {receivers: [chat]}, search: {receivers: [chat]}}",
    );
    let app = TestApp::spawn_in(dir.clone(), &config, Arc::new(clock.clone())).await;
    for (name, team) in [("pay-api", "payments"), ("search-api", "search")] {
        let body = envelope(name, team, "Synced", "Degraded", &clock.now().to_rfc3339());
        assert_eq!(app.post(body).await.status(), 202);
    }
    let messages = wait_for(&d.join("chat.jsonl"), 2).await;
    let message_of = |app_name: &str| {
        messages
            .iter()
            .find(|m| m["incidents"][0]["app_name"] == app_name)
            .unwrap_or_else(|| panic!("no message about {app_name}: {messages:?}"))
    };
    let (pay, search) = (message_of("pay-api"), message_of("search-api"));
    let search_id = search["incidents"][0]["id"].as_i64().expect("id");
    let pay_id = pay["incidents"][0]["id"].as_i64().expect("id");
    let url = |p: &str| format!("{}{p}", app.address);

    // Payments' Acknowledge link, its incident id replaced by search's, the signature kept.
    let ack = link(pay, "Acknowledge");
    let token = ack.strip_prefix("/act/").expect("/act/");
    let (payload, mac) = token.split_once('.').expect("payload.mac");
    let payload = String::from_utf8(B64.decode(payload).expect("base64")).expect("utf-8");
    let altered = payload.replacen(&format!("|{pay_id}|"), &format!("|{search_id}|"), 1);
    assert_ne!(altered, payload, "{payload}");
    let altered = format!("/act/{}.{mac}", B64.encode(altered));
    for r in [
        app.client.get(url(&altered)).send().await.expect("get"),
        confirm(&app, &url(&altered), "name=mallory").await,
    ] {
        assert_eq!(r.status(), 403);
        let html = r.text().await.expect("html");
        assert!(html.contains("signature does not match"), "{html}");
    }
    let firing = app.get_json("/v1/incidents?state=firing").await;
    assert!(
        (firing["items"].as_array().expect("items").iter()).all(|i| i.get("acknowledged").is_none()),
        "nothing acknowledged: {firing}"
    );

    // Each link's page names the Application it acts on.
    for (message, name) in [(pay, "pay-api"), (search, "search-api")] {
        let r = app
            .client
            .get(url(&link(message, "Silence 1 h")))
            .send()
            .await
            .expect("get");
        let html = r.text().await.expect("html");
        assert!(
            html.contains(&format!("<a href=\"/apps/argocd/{name}\">{name}</a> (Degraded)")),
            "{html}"
        );
    }
    app.stop().await;
}
