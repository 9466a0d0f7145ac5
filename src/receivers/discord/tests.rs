//! Contract tests against Discord's documented Execute Webhook: `POST /api/webhooks/{id}/{token}?wait=true`
//! answered 200 with the message object; errors `{"message", "code"}` (404 Unknown Webhook 10015, 400 Invalid
//! Form Body 50035); a 429 `{"message": "You are being rate limited.", "retry_after": 64.57, "global": false}` with
//! `Retry-After` and `X-RateLimit-Reset-After`.

use std::time::Duration;

use serde_json::json;
use wiremock::{MockServer, ResponseTemplate};

use super::*;
use crate::domain::Action;
use crate::receivers::render::escape::WORD_JOINER;
use crate::receivers::testing::{self, assert_no_secret, json, permanent_reason, requests, transient_after};

const PATH: &str = "/api/webhooks/1234567890123456789/dIscordWebhookT0ken-secret_0123456789abcdef";
const TOKEN: &str = "dIscordWebhookT0ken-secret_0123456789abcdef";

fn discord(server: &MockServer, query: &str, template: Option<String>) -> Discord {
    let url = format!("{}{PATH}{query}", server.uri());
    Discord::new(Config::new(url), testing::http(), template)
}

/// The message object Discord answers with `wait=true`.
fn saved(id: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": id, "type": 0, "content": "", "channel_id": "111", "webhook_id": "1234567890123456789",
        "embeds": [], "mentions": [], "mention_roles": [], "pinned": false, "tts": false,
    }))
}

fn rate_limited(retry_after: f64) -> ResponseTemplate {
    ResponseTemplate::new(429)
        .insert_header("retry-after", "65")
        .insert_header("x-ratelimit-reset-after", "64.57")
        .insert_header("x-ratelimit-scope", "shared")
        .set_body_json(json!({"message": "You are being rate limited.", "retry_after": retry_after, "global": false}))
}

async fn failure(answer: ResponseTemplate) -> DeliveryError {
    let server = testing::expecting_one_post(PATH, answer).await;
    let e = discord(&server, "", None)
        .deliver(&testing::notification(Action::Open), None)
        .await
        .expect_err("Discord refuses");
    assert_eq!(requests(&server).await.len(), 1, "no second request");
    assert_no_secret(&e, &[TOKEN]);
    e
}

#[tokio::test]
async fn an_open_is_one_message_of_embeds_that_waits_for_discord_and_mentions_no_one() {
    let server = testing::expecting_one_post(PATH, saved("1300000000000000001")).await;

    let out = testing::deliver_open(&discord(&server, "", None)).await;

    testing::assert_delivered(&out, None, "posted message 1300000000000000001");
    let reqs = requests(&server).await;
    assert_eq!(testing::query(&reqs[0], "wait"), ["true"]);
    let body = json(&reqs[0]);
    assert_eq!(body["allowed_mentions"], json!({"parse": []}));
    let embeds = body["embeds"].as_array().expect("embeds");
    assert_eq!(embeds.len(), 1, "one Application, one embed: {body}");
    let e = &embeds[0];
    assert_eq!(e["title"], "🔴 FIRING: payments is Degraded");
    assert_eq!(e["color"], 0xCF222E, "critical and firing: red");
    assert_eq!(e["url"], testing::APP_URL);
    assert_eq!(e["timestamp"], "2025-03-01T12:00:00Z");
    let fields = e["fields"].as_array().expect("fields");
    assert_eq!(fields[0]["name"], "Application");
    assert_eq!(fields[0]["value"], format!("[argocd/payments]({})", testing::APP_URL));
    assert!(
        fields.iter().any(|f| f["name"] == "Project" && f["value"] == "shop"),
        "{fields:?}"
    );
    testing::assert_contains_all(
        e["description"].as_str().expect("a description"),
        &[
            "*fired*",
            "**[FIRING] Degraded for 5 min, since 11:55 UTC**",
            "• `Deployment payments/payments-api`: Degraded — exceeded its progress deadline",
            "**What to do**",
        ],
    );
}

#[tokio::test]
async fn a_resolve_is_green_and_an_acknowledgement_purple() {
    let server = MockServer::start().await;
    testing::expect_post(&server, PATH, saved("1"), 2).await;
    let receiver = discord(&server, "", None);

    receiver
        .deliver(&testing::notification(Action::Resolve), None)
        .await
        .unwrap();
    receiver
        .deliver(&testing::notification(Action::Acknowledge), None)
        .await
        .unwrap();

    let colours: Vec<Value> = (requests(&server).await.iter())
        .map(|r| json(r)["embeds"][0]["color"].clone())
        .collect();
    assert_eq!(colours, [json!(0x1A7F37), json!(0x8250DF)]);
}

#[tokio::test]
async fn a_thread_id_in_the_url_is_kept_and_wait_is_said_once() {
    let server = testing::expecting_one_post(PATH, saved("2")).await;

    testing::deliver_open(&discord(&server, "?thread_id=987&wait=false", None)).await;

    let r = &requests(&server).await[0];
    assert_eq!(testing::query(r, "thread_id"), ["987"]);
    assert_eq!(testing::query(r, "wait"), ["true"]);
}

#[tokio::test]
async fn an_answer_without_the_message_is_still_a_delivery() {
    // A proxy or an older API answering 204: the message was taken, and a retry would post it twice.
    let server = testing::expecting_one_post(PATH, ResponseTemplate::new(204)).await;

    let out = testing::deliver_open(&discord(&server, "", None)).await;

    testing::assert_delivered(&out, None, "posted");
}

#[tokio::test]
async fn a_rate_limit_waits_the_retry_after_of_the_body() {
    let e = failure(rate_limited(1.5)).await;

    assert_eq!(transient_after(&e), Some(Duration::from_millis(1500)));
    assert!(e.to_string().contains("You are being rate limited"), "{e}");
}

#[tokio::test]
async fn without_a_json_body_the_reset_after_header_then_retry_after_is_obeyed() {
    let reset = ResponseTemplate::new(429)
        .insert_header("x-ratelimit-reset-after", "2.25")
        .insert_header("retry-after", "3");
    assert_eq!(
        transient_after(&failure(reset).await),
        Some(Duration::from_millis(2250))
    );
    let only_retry_after = ResponseTemplate::new(429).insert_header("retry-after", "3");
    assert_eq!(
        transient_after(&failure(only_retry_after).await),
        Some(Duration::from_secs(3))
    );
}

#[tokio::test]
async fn an_unknown_webhook_is_permanent_and_says_what_to_do() {
    let e =
        failure(ResponseTemplate::new(404).set_body_json(json!({"message": "Unknown Webhook", "code": 10015}))).await;

    let reason = permanent_reason(&e);
    assert!(
        reason.contains("Unknown Webhook") && reason.contains("create one and set webhook_url"),
        "{reason}"
    );
}

#[tokio::test]
async fn an_invalid_body_is_permanent_and_a_server_error_transient() {
    let invalid = json!({"code": 50035, "errors": {"embeds": {"0": {"description": {"_errors": [
        {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 4096 or fewer in length."}]}}}},
        "message": "Invalid Form Body"});
    let e = failure(ResponseTemplate::new(400).set_body_json(invalid)).await;
    assert!(permanent_reason(&e).contains("Invalid Form Body"), "{e}");
    let e = failure(ResponseTemplate::new(502).set_body_string("bad gateway")).await;
    assert!(matches!(e, DeliveryError::Transient { .. }), "{e:?}");
}

#[tokio::test]
async fn an_echoed_webhook_url_is_redacted() {
    let server = MockServer::start().await;
    let echo = format!(
        "{{\"message\": \"Invalid Webhook Token for {}{PATH}\", \"code\": 50027}}",
        server.uri()
    );
    testing::expect_post(&server, PATH, ResponseTemplate::new(401).set_body_string(echo), 1).await;

    let e = discord(&server, "", None)
        .deliver(&testing::notification(Action::Open), None)
        .await
        .unwrap_err();

    assert_no_secret(&e, &[TOKEN]);
    assert!(permanent_reason(&e).contains("copy the webhook URL again"), "{e}");
}

#[tokio::test]
async fn text_from_argo_cd_cannot_mention_or_mask_a_link() {
    let server = testing::expecting_one_post(PATH, saved("3")).await;
    let mut n = testing::notification(Action::Open);
    n.title = "@everyone <@123456> [click](https://evil.example)".into();
    n.incidents_mut()[0].messages = vec!["deploy failed @here <@&42> **bold** ||spoiler||".into()];

    discord(&server, "", None).deliver(&n, None).await.unwrap();

    let body = testing::only_body(&server).await;
    assert_eq!(body["allowed_mentions"], json!({"parse": []}));
    let text = body["embeds"].to_string();
    for active in [
        "@everyone",
        "@here",
        "<@123456>",
        "<@&42>",
        "](https://evil",
        "**bold**",
        "||spoiler",
    ] {
        assert!(!text.contains(active), "{active} in {text}");
    }
    let title = body["embeds"][0]["title"].as_str().unwrap();
    assert_eq!(
        title,
        format!(
            "🔴 FIRING: @{WORD_JOINER}everyone <{WORD_JOINER}@{WORD_JOINER}123456> \\[click\\]\\(https{WORD_JOINER}://evil{WORD_JOINER}.example\\)"
        )
    );
}

#[tokio::test]
async fn a_template_is_the_description_and_a_broken_one_sends_nothing() {
    let server = testing::expecting_one_post(PATH, saved("4")).await;

    testing::deliver_open(&discord(&server, "", Some(testing::REASON_AND_TITLE.into()))).await;
    let e = discord(&server, "", Some("{{ unclosed".into()))
        .deliver(&testing::notification(Action::Open), None)
        .await
        .unwrap_err();

    assert!(matches!(e, DeliveryError::Permanent { .. }), "{e:?}");
    let body = testing::only_body(&server).await;
    assert_eq!(body["embeds"][0]["description"], testing::REASON_AND_TITLE_OF_AN_OPEN);
    assert_eq!(body["embeds"][0]["title"], "🔴 FIRING");
}

#[tokio::test]
async fn five_applications_are_five_embeds_within_the_total() {
    let server = testing::expecting_one_post(PATH, saved("5")).await;
    let mut n = testing::notification(Action::Open);
    *crate::receivers::testing::incidents_of(&mut n) = (0..5)
        .map(|k| {
            let mut i = testing::incident();
            i.id = k + 1;
            i.app_name = format!("app-{k}");
            i.messages = vec!["a long message line ".repeat(200)];
            i
        })
        .collect();

    discord(&server, "", None).deliver(&n, None).await.unwrap();

    let body = testing::only_body(&server).await;
    let embeds = body["embeds"].as_array().unwrap();
    assert_eq!(embeds.len(), 5);
    let total: usize = embeds.iter().map(embed_size).sum();
    assert!(total <= MAX_TOTAL, "{total}");
    assert_eq!(embeds[1]["title"], "argocd/app-1");
}

/// What an embed counts toward Discord's 6,000 characters.
pub(crate) fn embed_size(e: &Value) -> usize {
    let text = |v: &Value| v.as_str().map_or(0, len);
    let fields: usize = (e["fields"].as_array().into_iter().flatten())
        .map(|f| text(&f["name"]) + text(&f["value"]))
        .sum();
    text(&e["title"]) + text(&e["description"]) + text(&e["footer"]["text"]) + text(&e["author"]["name"]) + fields
}

#[test]
fn the_block_reads_its_webhook_url_from_a_file_and_never_repeats_a_bad_one() {
    let url = format!("https://discord.com{PATH}");
    let file = testing::secret_file("discord-webhook", &url);
    let yaml = format!(
        "receivers: [{{name: ops, discord: {{webhook_url_file: '{}'}}}}]",
        file.path.display()
    );
    let settings = crate::configuration::Settings::from_yaml(&yaml).expect("valid");
    let crate::receivers::ReceiverKind::Discord(c) = &settings.receivers[0].kind else {
        panic!("a discord block");
    };
    assert_eq!(c.webhook_url.expose_secret(), url);
    let caps = settings.receivers[0].capabilities();
    assert_eq!((caps.sends_resolved, caps.digest), (false, true));

    let bad = format!("receivers: [{{name: ops, discord: {{webhook_url: 'ftp://discord.com{PATH}'}}}}]");
    let e = crate::configuration::Settings::from_yaml(&bad)
        .expect_err("refused")
        .to_string();
    assert!(e.contains("discord.webhook_url") && !e.contains(TOKEN), "{e}");
}
