//! The Slack receiver against a wiremock Slack: incoming webhooks, the Web API's threading and edits, its
//! `ok:false` codes, Block Kit limits and escaping, and secrets kept out of failures.

use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Value, json};
use wiremock::matchers::{bearer_token, body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::api::api_error_is_transient;
use super::blocks::{MAX_BLOCKS, MAX_FALLBACK_TEXT, MAX_HEADER_TEXT, MAX_SECTION_TEXT, chunks};
use super::*;
use crate::domain::Incident;
use crate::receivers::testing::{self, assert_no_secret, transient_after};

const TOKEN: &str = "xoxb-1111-2222-secrettokenvalue";
const HOOK_PATH: &str = "/services/T0000/B0000/hooksecretXXXXXXXXXXXX";
const SECRETS: [&str; 3] = [TOKEN, HOOK_PATH, "hooksecretXXXXXXXXXXXX"];

/// Makes `i` the incident of the `k`th payments application.
fn number(i: &mut Incident, k: usize) {
    i.fingerprint = format!("fp-{k}");
    i.summary = format!("payments-{k} is Degraded");
    i.app_name = format!("payments-{k}");
    i.app_url = Some(format!("https://argocd.example.com/applications/argocd/payments-{k}"));
}

fn incident(k: usize) -> Incident {
    let mut i = testing::incident();
    number(&mut i, k);
    i
}

fn notification(action: Action) -> Notification {
    let mut n = testing::notification(action);
    n.title = "payments-1 is Degraded".into();
    number(&mut n.incidents_mut()[0], 1);
    n
}

/// An incoming webhook at `base` (the Web API is not used).
fn webhook_settings(base: &str) -> Config {
    Config {
        webhook_url: Some(SecretString::from(format!("{base}{HOOK_PATH}"))),
        token: None,
        channel: None,
        api_url: "http://127.0.0.1:9/unused".into(),
        signing_secret: None,
        slack_users: Default::default(),
    }
}

/// A bot posting to `channel` through the Web API at `api_url`.
fn bot_settings(api_url: String, channel: Option<&str>) -> Config {
    Config {
        webhook_url: None,
        token: Some(SecretString::from(TOKEN)),
        channel: channel.map(str::to_string),
        api_url,
        signing_secret: None,
        slack_users: Default::default(),
    }
}

fn webhook(server: &MockServer) -> Slack {
    Slack::new(webhook_settings(&server.uri()), testing::http(), None)
}

fn bot(server: &MockServer) -> Slack {
    let settings = bot_settings(format!("{}/api/", server.uri()), Some("#payments"));
    Slack::new(settings, testing::http(), None)
}

/// Expects `times` calls of the Web API method `name` with the bot's token and a body holding `partial`, each
/// answered `answer`.
async fn web_api_expects(server: &MockServer, name: &str, partial: Value, answer: Value, times: u64) {
    let matching = Mock::given(method("POST"))
        .and(path(format!("/api/{name}")))
        .and(bearer_token(TOKEN))
        .and(body_partial_json(partial));
    let answer = ResponseTemplate::new(200).set_body_json(answer);
    testing::expect_matching(server, matching, answer, times, name).await;
}

/// Expects `times` `chat.postMessage` calls whose body holds `partial`, each answered as a message posted to
/// `channel` at `ts`.
async fn posts_expected(server: &MockServer, partial: Value, channel: &str, ts: &str, times: u64) {
    let posted = json!({"ok": true, "channel": channel, "ts": ts});
    web_api_expects(server, "chat.postMessage", partial, posted, times).await;
}

/// The failure of an open sent through the webhook to a server answering once with `answer(its base URL)`,
/// checked to keep every secret out.
async fn webhook_failure(answer: impl FnOnce(&str) -> ResponseTemplate) -> DeliveryError {
    let server = MockServer::start().await;
    testing::expect_post(&server, HOOK_PATH, answer(&server.uri()), 1).await;
    let e = webhook(&server)
        .deliver(&notification(Action::Open), None)
        .await
        .unwrap_err();
    assert_no_secret(&e, &SECRETS);
    e
}

/// Slack's answer refusing a Web API call with the code `error`.
fn refused(error: &str) -> Value {
    json!({"ok": false, "error": error})
}

fn memo() -> Memo {
    json!({"channel": "C0123", "ts": "1700000000.000100"})
}

/// Every request the server saw, as (path, JSON body).
async fn received(server: &MockServer) -> Vec<(String, Value)> {
    testing::requests(server)
        .await
        .iter()
        .map(|r| (r.url.path().to_string(), testing::json(r)))
        .collect()
}

#[tokio::test]
async fn webhook_posts_text_and_blocks_and_accepts_ok() {
    let server = MockServer::start().await;
    testing::expect_post(&server, HOOK_PATH, ResponseTemplate::new(200).set_body_string("ok"), 1).await;

    let out = webhook(&server)
        .deliver(&notification(Action::Open), None)
        .await
        .unwrap();

    assert_eq!(out.memo, None, "an incoming webhook cannot thread");
    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    let body = &reqs[0].1;
    assert!(
        body["text"]
            .as_str()
            .unwrap()
            .starts_with("FIRING: payments-1 is Degraded")
    );
    let blocks = body["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "header");
    assert!(
        blocks[0]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("FIRING: payments-1 is Degraded")
    );
    let app = blocks[1]["text"]["text"].as_str().unwrap();
    testing::assert_contains_all(
        app,
        &[
            "*<https://argocd.example.com/applications/argocd/payments-1|argocd/payments-1>*",
            "*Team:* payments",
        ],
    );
    let section = blocks[2]["text"]["text"].as_str().unwrap();
    testing::assert_contains_all(
        section,
        &[
            "*[FIRING]* Degraded for 5 min, since 11:55 UTC",
            "`Deployment payments/payments-api`: Degraded — exceeded its progress deadline",
            "*What to do*",
            "Check the image",
        ],
    );
    assert_eq!(
        blocks[1]["accessory"]["url"],
        "https://argocd.example.com/applications/argocd/payments-1"
    );
    assert_eq!(blocks.last().unwrap()["type"], "context");
}

#[tokio::test]
async fn webhook_resolve_is_a_new_message_saying_resolved() {
    let server = MockServer::start().await;
    testing::expect_post(&server, HOOK_PATH, ResponseTemplate::new(200).set_body_string("ok"), 1).await;

    let out = webhook(&server)
        .deliver(&notification(Action::Resolve), Some(&memo()))
        .await
        .unwrap();

    assert_eq!(out.memo, None);
    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].1["text"].as_str().unwrap().starts_with("RESOLVED: "));
    assert!(reqs[0].1.get("thread_ts").is_none());
}

#[tokio::test]
async fn webhook_rejections_are_permanent() {
    for (status, body) in [
        (400, "invalid_payload"),
        (404, "no_service"),
        (410, "channel_is_archived"),
    ] {
        let e = webhook_failure(|_| ResponseTemplate::new(status).set_body_string(body)).await;

        assert!(matches!(e, DeliveryError::Permanent { .. }), "{status}: {e:?}");
        assert!(e.to_string().contains(body), "{e}");
    }
}

#[tokio::test]
async fn webhook_429_is_transient_with_the_retry_after_delay() {
    let e = webhook_failure(|_| ResponseTemplate::new(429).insert_header("Retry-After", "7")).await;

    assert_eq!(transient_after(&e), Some(Duration::from_secs(7)));
}

#[tokio::test]
async fn webhook_500_is_transient() {
    let e = webhook_failure(|_| ResponseTemplate::new(500).set_body_string("internal error")).await;

    assert_eq!(transient_after(&e), None);
}

#[tokio::test]
async fn an_error_body_echoing_the_webhook_url_does_not_leak_it() {
    let e =
        webhook_failure(|base| ResponseTemplate::new(404).set_body_string(format!("no_service for {base}{HOOK_PATH}")))
            .await;

    assert!(e.to_string().contains("[redacted]"), "{e}");
}

#[tokio::test]
async fn a_webhook_that_cannot_be_reached_is_transient_and_keeps_the_url_secret() {
    let slack = Slack::new(webhook_settings(testing::UNREACHABLE), testing::http(), None);

    testing::assert_unreachable_is_transient(&slack, &notification(Action::Open), &SECRETS).await;
}

#[tokio::test]
async fn bot_open_posts_to_the_channel_and_keeps_channel_and_ts_as_memo() {
    let server = MockServer::start().await;
    web_api_expects(
        &server,
        "chat.postMessage",
        json!({"channel": "#payments"}),
        json!({"ok": true, "channel": "C0123", "ts": "1700000000.000100", "message": {}}),
        1,
    )
    .await;

    let out = bot(&server).deliver(&notification(Action::Open), None).await.unwrap();

    assert_eq!(out.memo, Some(memo()));
    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    assert!(reqs[0].1.get("thread_ts").is_none(), "the first message is top-level");
    assert_eq!(reqs[0].1["blocks"][0]["type"], "header");
}

#[tokio::test]
async fn bot_open_with_an_old_memo_starts_a_new_thread() {
    let server = MockServer::start().await;
    posts_expected(&server, json!({}), "C0123", "2.0", 1).await;

    let out = bot(&server)
        .deliver(&notification(Action::Open), Some(&memo()))
        .await
        .unwrap();

    assert_eq!(out.memo, Some(json!({"channel": "C0123", "ts": "2.0"})));
    assert!(received(&server).await[0].1.get("thread_ts").is_none());
}

#[tokio::test]
async fn bot_update_replies_in_the_thread_of_the_first_message() {
    let server = MockServer::start().await;
    let in_the_thread = json!({"channel": "C0123", "thread_ts": "1700000000.000100"});
    posts_expected(&server, in_the_thread, "C0123", "1700000100.000200", 1).await;

    let out = bot(&server)
        .deliver(&notification(Action::Update), Some(&memo()))
        .await
        .unwrap();

    assert_eq!(out.memo, Some(memo()), "the thread stays the first message's");
    assert_eq!(received(&server).await.len(), 1);
}

/// A resolve with the first message in the memo: one `chat.update` of that message, answered `edit`, then one
/// `chat.postMessage` whose body holds `reply`, answered with a new message at `ts`. The outcome, and the two
/// requests Slack saw (the expectations are checked before this returns).
async fn resolve_after_edit(edit: Value, reply: Value, ts: &str) -> (Delivered, Vec<(String, Value)>) {
    let server = MockServer::start().await;
    let first = json!({"channel": "C0123", "ts": "1700000000.000100"});
    web_api_expects(&server, "chat.update", first, edit, 1).await;
    posts_expected(&server, reply, "C0123", ts, 1).await;
    let out = bot(&server)
        .deliver(&notification(Action::Resolve), Some(&memo()))
        .await
        .unwrap();
    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 2, "one edit, one reply");
    (out, reqs)
}

#[tokio::test]
async fn bot_resolve_edits_the_first_message_and_replies_in_its_thread() {
    let (out, reqs) = resolve_after_edit(
        json!({"ok": true, "channel": "C0123", "ts": "1700000000.000100"}),
        json!({"channel": "C0123", "thread_ts": "1700000000.000100"}),
        "3.0",
    )
    .await;

    assert_eq!(out.memo, Some(memo()));
    assert_eq!(reqs[0].0, "/api/chat.update", "edit first, then reply");
    let edit = &reqs[0].1;
    assert!(edit["text"].as_str().unwrap().starts_with("RESOLVED: "));
    let header = edit["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(header.contains("RESOLVED"), "{header}");
    assert!(
        edit["blocks"][2]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("[RESOLVED]")
    );
    assert!(reqs[1].1["text"].as_str().unwrap().starts_with("RESOLVED: "));
}

#[tokio::test]
async fn bot_update_without_memo_posts_a_top_level_message_and_keeps_it() {
    let server = MockServer::start().await;
    posts_expected(&server, json!({}), "C0999", "5.0", 2).await;

    let slack = bot(&server);
    let update = slack.deliver(&notification(Action::Update), None).await.unwrap();
    let resolve = slack
        .deliver(&notification(Action::Resolve), Some(&json!({"unexpected": true})))
        .await
        .unwrap();

    assert_eq!(update.memo, Some(json!({"channel": "C0999", "ts": "5.0"})));
    assert_eq!(resolve.memo, Some(json!({"channel": "C0999", "ts": "5.0"})));
    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 2, "no chat.update without a message to edit");
    assert!(reqs.iter().all(|(_, b)| b.get("thread_ts").is_none()));
}

#[tokio::test]
async fn bot_resolve_of_a_deleted_first_message_starts_a_new_thread() {
    let (out, reqs) = resolve_after_edit(refused("message_not_found"), json!({"channel": "#payments"}), "9.0").await;

    assert_eq!(out.memo, Some(json!({"channel": "C0123", "ts": "9.0"})));
    assert!(reqs[1].1.get("thread_ts").is_none());
}

#[tokio::test]
async fn bot_resolve_of_a_message_that_cannot_be_edited_still_replies_in_its_thread() {
    let (out, _) = resolve_after_edit(
        refused("edit_window_closed"),
        json!({"thread_ts": "1700000000.000100"}),
        "4.0",
    )
    .await;

    assert_eq!(out.memo, Some(memo()));
}

async fn bot_answering(answer: ResponseTemplate) -> DeliveryError {
    let server = MockServer::start().await;
    testing::expect_post(&server, "/api/chat.postMessage", answer, 1).await;
    let e = bot(&server)
        .deliver(&notification(Action::Open), None)
        .await
        .unwrap_err();
    assert_eq!(received(&server).await.len(), 1);
    assert_no_secret(&e, &SECRETS);
    e
}

#[tokio::test]
async fn bot_ok_false_invalid_auth_is_permanent() {
    let e = bot_answering(ResponseTemplate::new(200).set_body_json(refused("invalid_auth"))).await;

    assert!(matches!(e, DeliveryError::Permanent { .. }), "{e:?}");
    assert!(e.to_string().contains("invalid_auth"), "{e}");
}

#[tokio::test]
async fn bot_ok_false_invalid_blocks_is_permanent_and_says_why() {
    let e = bot_answering(ResponseTemplate::new(200).set_body_json(json!({
        "ok": false,
        "error": "invalid_blocks",
        "response_metadata": {"messages": ["[ERROR] must be less than 3001 characters [json-pointer:/blocks/1/text/text]"]},
    })))
    .await;

    assert!(matches!(e, DeliveryError::Permanent { .. }), "{e:?}");
    assert!(e.to_string().contains("3001 characters"), "{e}");
}

#[tokio::test]
async fn bot_ok_false_ratelimited_is_transient() {
    let e = bot_answering(ResponseTemplate::new(200).set_body_json(refused("ratelimited"))).await;

    transient_after(&e);
    assert!(e.to_string().contains("ratelimited"), "{e}");
}

#[tokio::test]
async fn bot_http_429_is_transient_with_the_retry_after_delay() {
    let e = bot_answering(
        ResponseTemplate::new(429)
            .insert_header("Retry-After", "7")
            .set_body_json(refused("ratelimited")),
    )
    .await;

    assert_eq!(transient_after(&e), Some(Duration::from_secs(7)));
}

#[tokio::test]
async fn bot_http_500_is_transient() {
    let e = bot_answering(ResponseTemplate::new(500).set_body_string("oops")).await;

    assert_eq!(transient_after(&e), None);
}

#[tokio::test]
async fn bot_error_echoing_the_token_does_not_leak_it() {
    let e = bot_answering(ResponseTemplate::new(401).set_body_string(format!("not_authed: Bearer {TOKEN}"))).await;

    assert!(matches!(e, DeliveryError::Permanent { .. }), "{e:?}");
    assert!(e.to_string().contains("[redacted]"), "{e}");
}

#[test]
fn web_api_error_codes_say_whether_retrying_helps() {
    for code in [
        "ratelimited",
        "internal_error",
        "fatal_error",
        "service_unavailable",
        "request_timeout",
    ] {
        assert!(api_error_is_transient(code), "{code}");
    }
    for code in [
        "invalid_auth",
        "not_authed",
        "channel_not_found",
        "not_in_channel",
        "account_inactive",
        "token_revoked",
        "invalid_blocks",
        "msg_too_long",
        "something_new",
    ] {
        assert!(!api_error_is_transient(code), "{code}");
    }
}

#[tokio::test]
async fn a_bot_without_a_channel_fails_permanently_without_calling_slack() {
    let server = MockServer::start().await;
    let slack = Slack::new(bot_settings(server.uri(), None), testing::http(), None);

    let e = slack.deliver(&notification(Action::Open), None).await.unwrap_err();

    assert!(matches!(e, DeliveryError::Permanent { .. }), "{e:?}");
    assert!(received(&server).await.is_empty());
}

#[test]
fn blocks_stay_within_slack_limits() {
    // One Application with 60 problems: a section each, more than a message may hold.
    let mut n = notification(Action::Open);
    n.title = "t".repeat(400);
    *crate::receivers::testing::incidents_of(&mut n) = (0..60)
        .map(|k| Incident {
            fingerprint: format!("fp-{k}"),
            ..incident(1)
        })
        .collect();
    n.incidents_mut()[0].condition = "x".repeat(5000);

    let b = blocks(&n, None, false);

    assert_eq!(b.len(), MAX_BLOCKS);
    let header = b[0]["text"]["text"].as_str().unwrap();
    assert!(
        header.encode_utf16().count() < MAX_HEADER_TEXT,
        "Slack counts UTF-16 units"
    );
    for block in &b {
        if block["type"] == "section" {
            assert!(block["text"]["text"].as_str().unwrap().chars().count() <= MAX_SECTION_TEXT);
        }
    }
    let more = b[MAX_BLOCKS - 2]["text"]["text"].as_str().unwrap();
    assert_eq!(more, "…and 14 more sections: open Argo CD for the rest");
    assert!(fallback_text(&n).chars().count() <= MAX_FALLBACK_TEXT);

    // Sixty Applications: one line each, in sections within the limits.
    *crate::receivers::testing::incidents_of(&mut n) = (0..60).map(incident).collect();
    let b = blocks(&n, None, false);
    assert!(b.len() < MAX_BLOCKS);
    let lines: usize = b[1..b.len() - 1]
        .iter()
        .map(|s| s["text"]["text"].as_str().unwrap().matches("*FIRING*").count())
        .sum();
    assert_eq!(lines, 60);
}

#[test]
fn a_header_of_150_code_points_with_an_emoji_stays_under_150_utf16_units() {
    let mut n = notification(Action::Open);
    n.title = "x".repeat(MAX_HEADER_TEXT - "🔴 FIRING: ".chars().count());

    let b = blocks(&n, None, false);

    let header = b[0]["text"]["text"].as_str().unwrap();
    assert!(header.starts_with("🔴 FIRING: x"), "{header}");
    assert!(
        header.encode_utf16().count() < MAX_HEADER_TEXT,
        "{}",
        header.encode_utf16().count()
    );
}

#[test]
fn text_from_argo_cd_cannot_inject_slack_markup() {
    let mut n = notification(Action::Open);
    n.incidents_mut()[0].condition = "<!channel> & <https://evil.example|click>".into();

    let b = blocks(&n, None, false);

    let section = b[2]["text"]["text"].as_str().unwrap();
    assert!(
        section.contains("&lt;!channel&gt; &amp; &lt;https\u{2060}://evil\u{2060}.example|click&gt;"),
        "{section}"
    );
    assert!(!fallback_text(&n).contains("<!channel>"));
}

#[tokio::test]
async fn a_template_becomes_the_text_and_the_message_body() {
    let server = MockServer::start().await;
    testing::expect_post(&server, HOOK_PATH, ResponseTemplate::new(200).set_body_string("ok"), 1).await;
    let settings = webhook_settings(&server.uri());
    let template = "{{ notification.title }} for team {{ incidents[0].team }}".to_string();
    let slack = Slack::new(settings, testing::http(), Some(template));

    slack.deliver(&notification(Action::Open), None).await.unwrap();

    let body = &received(&server).await[0].1;
    assert_eq!(body["text"], "payments-1 is Degraded for team payments");
    assert_eq!(body["blocks"][0]["type"], "header");
    assert_eq!(
        body["blocks"][1]["text"]["text"],
        "payments-1 is Degraded for team payments"
    );
}

#[test]
fn long_template_output_is_split_into_sections_at_line_ends() {
    let text = format!("{}\n{}\n{}", "a".repeat(2000), "b".repeat(2000), "c".repeat(7000));

    let pieces = chunks(&text, MAX_SECTION_TEXT);

    assert!(pieces.iter().all(|p| p.chars().count() <= MAX_SECTION_TEXT));
    assert_eq!(pieces.concat(), text);
    assert!(pieces[0].starts_with('a') && pieces[0].ends_with('\n'));
    assert!(pieces[1].starts_with('b'));
}

fn to_alice(action: Action) -> Notification {
    let mut n = notification(action);
    n.recipient = Some(crate::domain::Recipient {
        username: "alice".into(),
        email: None,
        slack: Some("U024BE7LH".into()),
    });
    n
}

#[tokio::test]
async fn a_message_to_a_person_is_a_direct_message_to_their_user_id() {
    let server = MockServer::start().await;
    let dm = json!({"ok": true, "channel": "D024BE91L", "ts": "6.0"});
    testing::expect_post(
        &server,
        "/api/chat.postMessage",
        ResponseTemplate::new(200).set_body_json(dm),
        1,
    )
    .await;
    testing::refuse_anything_else(&server).await;

    let out = bot(&server).deliver(&to_alice(Action::Open), None).await.unwrap();

    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].1["channel"], "U024BE7LH", "not the receiver's #payments");
    assert_eq!(out.detail, "posted ts 6.0 in D024BE91L");
}

#[tokio::test]
async fn an_incoming_webhook_refuses_a_message_to_a_person() {
    let server = MockServer::start().await;
    testing::refuse_anything_else(&server).await;

    let err = webhook(&server)
        .deliver(&to_alice(Action::Open), None)
        .await
        .unwrap_err();

    assert!(matches!(err, DeliveryError::Permanent { .. }), "{err:?}");
}

#[tokio::test]
async fn bot_acknowledge_edits_the_first_message_in_place_and_posts_nothing() {
    let server = MockServer::start().await;
    let first = json!({"channel": "C0123", "ts": "1700000000.000100"});
    web_api_expects(&server, "chat.update", first, json!({"ok": true}), 1).await;
    posts_expected(&server, json!({}), "C0123", "9.0", 0).await;
    let mut n = notification(Action::Acknowledge);
    n.title = "Acknowledged by alice: payments: Degraded".into();
    let out = bot(&server).deliver(&n, Some(&memo())).await.unwrap();
    assert_eq!(out.memo, Some(memo()), "the thread stays the first message's");
    let reqs = received(&server).await;
    assert_eq!(reqs.len(), 1, "one edit: {reqs:?}");
    assert!(reqs[0].1.to_string().contains("Acknowledged by alice"), "{}", reqs[0].1);

    // Without a message to edit there is nothing to do.
    let server = MockServer::start().await;
    let out = bot(&server)
        .deliver(&notification(Action::Acknowledge), None)
        .await
        .unwrap();
    assert_eq!(out.memo, None);
    assert!(received(&server).await.is_empty());
}

/// The `actions` blocks of a message.
fn actions(blocks: &[Value]) -> Vec<&Value> {
    blocks.iter().filter(|b| b["type"] == "actions").collect()
}

#[test]
fn with_interactivity_each_firing_incident_gets_its_two_buttons_and_a_resolve_none() {
    let mut n = notification(Action::Open);
    let mut second = incident(1);
    second.id = 8;
    second.fingerprint = "fp-second".into();
    crate::receivers::testing::incidents_of(&mut n).push(second);

    let b = blocks(&n, None, true);

    let got = actions(&b);
    assert_eq!(got.len(), 2, "one per incident: {b:?}");
    for (block, id) in got.iter().zip(["7", "8"]) {
        let elements = block["elements"].as_array().unwrap();
        let ids: Vec<&str> = elements.iter().map(|e| e["action_id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["herald_ack", "herald_silence_1h"]);
        assert!(elements.iter().all(|e| e["value"] == id), "{block}");
        assert_eq!(elements[1]["text"]["text"], "Silence 1 h");
    }
    // Each under its incident's section.
    let at = b.iter().position(|x| x["type"] == "actions").unwrap();
    assert_eq!(b[at - 1]["type"], "section");

    assert!(
        actions(&blocks(&n, None, false)).is_empty(),
        "no buttons without a signing secret"
    );
    for action in [Action::Resolve, Action::Acknowledge, Action::Test] {
        let mut other = n.clone();
        other.action = action;
        assert!(actions(&blocks(&other, None, true)).is_empty(), "{action:?}");
    }
    let mut resolved = n.clone();
    resolved.incidents_mut()[1].state = crate::domain::IncidentState::Resolved;
    assert_eq!(
        actions(&blocks(&resolved, None, true)).len(),
        1,
        "a resolved incident has none"
    );
}

#[test]
fn a_list_of_many_incidents_has_named_buttons_for_its_first_five_within_slacks_limits() {
    let mut n = notification(Action::Open);
    *crate::receivers::testing::incidents_of(&mut n) = (0..60)
        .map(|k| Incident {
            id: 100 + k as i64,
            ..incident(k)
        })
        .collect();

    let b = blocks(&n, None, true);

    assert!(b.len() <= MAX_BLOCKS);
    let got = actions(&b);
    assert_eq!(got.len(), 5);
    let text = got[0]["elements"][0]["text"]["text"].as_str().unwrap();
    assert!(text.starts_with("Acknowledge: payments-0"), "{text}");
    assert!(text.chars().count() <= 75);
    assert_eq!(got[4]["elements"][0]["value"], "104");
}

#[tokio::test]
async fn a_bot_with_a_signing_secret_posts_the_buttons() {
    let server = MockServer::start().await;
    posts_expected(
        &server,
        json!({"channel": "#payments"}),
        "C0123",
        "1700000000.000100",
        1,
    )
    .await;
    let mut settings = bot_settings(format!("{}/api/", server.uri()), Some("#payments"));
    settings.signing_secret = Some(SecretString::from("slack-signing-secret"));
    let slack = Slack::new(settings, testing::http(), None);

    slack.deliver(&notification(Action::Open), None).await.unwrap();

    let reqs = received(&server).await;
    let blocks = reqs[0].1["blocks"].as_array().unwrap();
    assert_eq!(actions(blocks).len(), 1, "{blocks:?}");
}

#[test]
fn a_signing_secret_needs_a_bot_token_and_is_not_empty() {
    let errors = |yaml: &str| {
        crate::configuration::Settings::from_yaml(yaml)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let hook = errors(
        "receivers: [{name: s, slack: {webhook_url: 'https://hooks.slack.com/services/T/B/x', signing_secret: abc}}]",
    );
    assert!(
        hook.contains("receivers[\"s\"].slack.signing_secret: needs a bot `token`"),
        "{hook}"
    );
    let empty = errors("receivers: [{name: s, slack: {token: xoxb-1, channel: '#c', signing_secret: ' '}}]");
    assert!(
        empty.contains("receivers[\"s\"].slack.signing_secret: must not be empty"),
        "{empty}"
    );
    assert_eq!(
        errors("receivers: [{name: s, slack: {token: xoxb-1, channel: '#c', signing_secret: abc}}]"),
        ""
    );
}

#[test]
fn slack_users_is_any_or_known_and_known_needs_a_signing_secret() {
    let errors = |yaml: &str| {
        crate::configuration::Settings::from_yaml(yaml)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let without = errors("receivers: [{name: s, slack: {token: xoxb-1, channel: '#c', slack_users: known}}]");
    assert!(
        without.contains("receivers[\"s\"].slack.slack_users: is about who may click the buttons"),
        "{without}"
    );
    for bad in ["someone", "[known]", "1"] {
        let e = errors(&format!(
            "receivers: [{{name: s, slack: {{token: xoxb-1, channel: '#c', signing_secret: abc, slack_users: {bad}}}}}]"
        ));
        assert!(e.contains("slack_users"), "{bad}: {e}");
    }
    for ok in ["any", "known"] {
        assert_eq!(
            errors(&format!(
                "receivers: [{{name: s, slack: {{token: xoxb-1, channel: '#c', signing_secret: abc, slack_users: {ok}}}}}]"
            )),
            ""
        );
    }
}
