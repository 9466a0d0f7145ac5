//! Contract tests against the Bot API as documented (core.telegram.org/bots/api): `sendMessage` and
//! `editMessageText` answered `{"ok": true, "result": Message}`; failures `{"ok": false, "error_code",
//! "description", "parameters": ResponseParameters}` with the HTTP status of `error_code`.

use std::time::Duration;

use serde_json::json;
use wiremock::{MockServer, ResponseTemplate};

use super::*;
use crate::domain::Action;
use crate::receivers::render::escape::WORD_JOINER;
use crate::receivers::testing::{self, assert_no_secret, permanent_reason, requests, transient_after};

const TOKEN: &str = "123456789:AAHsecretBotTokenPart_0123456789-xyz";
const SEND: &str = "/bot123456789:AAHsecretBotTokenPart_0123456789-xyz/sendMessage";
const EDIT: &str = "/bot123456789:AAHsecretBotTokenPart_0123456789-xyz/editMessageText";
const CHAT: i64 = -1001234567890;

fn telegram_on(api_url: &str, template: Option<String>) -> Telegram {
    Telegram::new(
        Config {
            bot_token: TOKEN.into(),
            chat_id: ChatId::Name(CHAT.to_string()),
            api_url: format!("{api_url}/"),
            message_thread_id: Some(7),
        },
        testing::http(),
        template,
    )
}

fn telegram(server: &MockServer) -> Telegram {
    telegram_on(&server.uri(), None)
}

/// A `Message` as `sendMessage` and `editMessageText` answer it.
fn message(id: i64) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"ok": true, "result": {
        "message_id": id, "date": 1740830400, "text": "…",
        "from": {"id": 123456789, "is_bot": true, "first_name": "Herald", "username": "herald_bot"},
        "chat": {"id": CHAT, "title": "Ops", "type": "supergroup"},
    }}))
}

fn refused(status: u16, description: &str, parameters: Option<serde_json::Value>) -> ResponseTemplate {
    let mut body = json!({"ok": false, "error_code": status, "description": description});
    if let Some(p) = parameters {
        body["parameters"] = p;
    }
    ResponseTemplate::new(status).set_body_json(body)
}

fn first() -> Memo {
    json!({"chat_id": CHAT, "message_id": 42})
}

async fn deliver(server: &MockServer, action: Action, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
    testing::deliver_strictly(server, &telegram(server), &testing::notification(action), memo).await
}

async fn failure(answer: ResponseTemplate) -> DeliveryError {
    let server = testing::expecting_one_post(SEND, answer).await;
    let e = deliver(&server, Action::Open, None)
        .await
        .expect_err("Telegram refuses");
    assert_no_secret(&e, &[TOKEN, "AAHsecretBotTokenPart"]);
    e
}

#[tokio::test]
async fn an_open_sends_html_into_the_topic_and_remembers_the_message() {
    let server = testing::expecting_one_post(SEND, message(42)).await;

    let out = deliver(&server, Action::Open, None).await.unwrap();

    testing::assert_delivered(&out, Some(first()), "posted message 42");
    let body = testing::only_body(&server).await;
    assert_eq!(body["chat_id"], CHAT, "the id written as text is sent as the number");
    assert_eq!(body["parse_mode"], "HTML");
    assert_eq!(body["message_thread_id"], 7);
    assert_eq!(body["link_preview_options"], json!({"is_disabled": true}));
    assert_eq!(body.get("reply_parameters"), None);
    let text = body["text"].as_str().unwrap();
    testing::assert_contains_all(
        text,
        &[
            "🔴 <b>FIRING: payments is Degraded</b>\n<i>fired</i>\n",
            &format!("Application: <a href=\"{}\">argocd/payments</a>", testing::APP_URL),
            "<b>[FIRING] Degraded for 5 min, since 11:55 UTC</b>",
            "• <code>Deployment payments/payments-api</code>: Degraded — exceeded its progress deadline",
            "<pre>Back-off pulling image</pre>",
            "<b>What to do</b>",
        ],
    );
}

#[tokio::test]
async fn an_update_replies_to_the_first_message_which_stays_the_threads() {
    let server = testing::expecting_one_post(SEND, message(43)).await;

    let out = deliver(&server, Action::Update, Some(&first())).await.unwrap();

    testing::assert_delivered(&out, Some(first()), "replied 43 to message 42");
    let body = testing::only_body(&server).await;
    assert_eq!(
        body["reply_parameters"],
        json!({"message_id": 42, "allow_sending_without_reply": true})
    );
}

#[tokio::test]
async fn a_resolve_and_an_acknowledgement_edit_the_first_message() {
    let server = MockServer::start().await;
    testing::expect_post(&server, EDIT, message(42), 2).await;

    let resolved = deliver(&server, Action::Resolve, Some(&first())).await.unwrap();
    let acknowledged = deliver(&server, Action::Acknowledge, Some(&first())).await.unwrap();

    testing::assert_delivered(&resolved, Some(first()), "edited message 42 to resolved");
    testing::assert_delivered(&acknowledged, Some(first()), "edited message 42 to acknowledged");
    let edits = testing::json_bodies(&server).await;
    assert_eq!(
        (edits[0]["chat_id"].clone(), edits[0]["message_id"].clone()),
        (json!(CHAT), json!(42))
    );
    assert_eq!(edits[0]["parse_mode"], "HTML");
    assert!(
        edits[0]["text"].as_str().unwrap().starts_with("✅ <b>RESOLVED: "),
        "{}",
        edits[0]
    );
    assert!(
        edits[1]["text"].as_str().unwrap().starts_with("👀 <b>ACKNOWLEDGED: "),
        "{}",
        edits[1]
    );
}

#[tokio::test]
async fn an_edit_that_changes_nothing_is_done() {
    let server = MockServer::start().await;
    let unchanged = "Bad Request: message is not modified: specified new message content and reply markup are \
                     exactly the same as a current content and reply markup of the message";
    testing::expect_post(&server, EDIT, refused(400, unchanged, None), 1).await;

    let out = deliver(&server, Action::Resolve, Some(&first())).await.unwrap();

    testing::assert_delivered(&out, Some(first()), "message 42 already shows resolved");
}

#[tokio::test]
async fn a_resolve_whose_message_is_gone_is_sent_as_a_new_message() {
    let server = MockServer::start().await;
    testing::expect_post(
        &server,
        EDIT,
        refused(400, "Bad Request: message to edit not found", None),
        1,
    )
    .await;
    testing::expect_post(&server, SEND, message(50), 1).await;

    let out = deliver(&server, Action::Resolve, Some(&first())).await.unwrap();

    testing::assert_delivered(
        &out,
        Some(json!({"chat_id": CHAT, "message_id": 50})),
        "message 42 can no longer be edited: posted 50",
    );
    let sent = testing::bodies(&server, "POST", SEND).await;
    assert!(
        sent[0]["text"].as_str().unwrap().starts_with("✅ <b>RESOLVED"),
        "{}",
        sent[0]
    );
}

#[tokio::test]
async fn an_acknowledgement_without_a_first_message_sends_nothing() {
    let server = MockServer::start().await;

    let out = deliver(&server, Action::Acknowledge, None).await.unwrap();

    testing::assert_delivered(&out, None, "no message of this thread to edit: nothing to do");
    assert!(requests(&server).await.is_empty());
}

#[tokio::test]
async fn flood_control_waits_retry_after() {
    let limited = refused(429, "Too Many Requests: retry after 5", Some(json!({"retry_after": 5})));

    let e = failure(limited).await;

    assert_eq!(transient_after(&e), Some(Duration::from_secs(5)));
    assert!(e.to_string().contains("Too Many Requests"), "{e}");
}

#[tokio::test]
async fn a_blocked_or_removed_bot_is_permanent_and_says_so() {
    for description in [
        "Forbidden: bot was blocked by the user",
        "Forbidden: bot was kicked from the group chat",
    ] {
        let e = failure(refused(403, description, None)).await;
        let reason = permanent_reason(&e);
        assert!(
            reason.contains("add the bot again") && reason.contains(description),
            "{reason}"
        );
    }
}

#[tokio::test]
async fn a_group_upgraded_to_a_supergroup_names_the_new_chat_id() {
    let migrated = refused(
        400,
        "Bad Request: group chat was upgraded to a supergroup chat",
        Some(json!({"migrate_to_chat_id": -1009876543210i64})),
    );

    let e = failure(migrated).await;

    assert!(permanent_reason(&e).contains("set chat_id to -1009876543210"), "{e}");
}

#[tokio::test]
async fn a_bad_token_is_permanent_and_never_shown() {
    let e = failure(refused(401, "Unauthorized", None)).await;
    assert!(permanent_reason(&e).contains("bot_token is not a valid token"), "{e}");
    let echoed = ResponseTemplate::new(404).set_body_string(format!("no route /bot{TOKEN}/sendMessage"));
    let e = failure(echoed).await;
    assert!(e.to_string().contains("[redacted]"), "{e}");
}

#[tokio::test]
async fn server_errors_are_transient_even_without_the_bot_apis_body() {
    let e = failure(refused(500, "Internal Server Error", None)).await;
    assert!(matches!(e, DeliveryError::Transient { .. }), "{e:?}");
    let e = failure(ResponseTemplate::new(502).set_body_string("<html>502 Bad Gateway</html>")).await;
    assert!(matches!(e, DeliveryError::Transient { .. }), "{e:?}");
}

#[tokio::test]
async fn an_unreachable_api_is_transient_and_the_token_in_the_url_is_not_shown() {
    let receiver = telegram_on(testing::UNREACHABLE, None);
    testing::assert_unreachable_is_transient(
        &receiver,
        &testing::notification(Action::Open),
        &[TOKEN, "AAHsecretBotTokenPart"],
    )
    .await;
}

#[tokio::test]
async fn text_from_argo_cd_opens_no_tag_and_mentions_no_one() {
    let server = testing::expecting_one_post(SEND, message(42)).await;
    let mut n = testing::notification(Action::Open);
    n.title = "<b>bold</b> & <a href=\"https://evil.example\">click</a> @admin".into();
    n.incidents_mut()[0].messages = vec!["</pre><b>out</b>\n@channel".into()];

    telegram(&server).deliver(&n, None).await.unwrap();

    let text = testing::only_body(&server).await["text"].as_str().unwrap().to_string();
    assert!(text.contains(&format!(
        "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;a href=\"https{WORD_JOINER}://evil{WORD_JOINER}.example\"&gt;click&lt;/a&gt; @{WORD_JOINER}admin"
    )));
    assert!(text.contains(&format!(
        "<pre>&lt;/pre&gt;&lt;b&gt;out&lt;/b&gt;\n@{WORD_JOINER}channel</pre>"
    )));
}

#[tokio::test]
async fn a_template_is_the_text_with_its_values_escaped() {
    let server = testing::expecting_one_post(SEND, message(42)).await;
    let mut n = testing::notification(Action::Open);
    n.title = "a <b> & b".into();

    telegram_on(&server.uri(), Some("<b>{{ notification.title }}</b>".into()))
        .deliver(&n, None)
        .await
        .unwrap();

    assert_eq!(testing::only_body(&server).await["text"], "<b>a &lt;b&gt; &amp; b</b>");
}

#[test]
fn a_long_message_keeps_whole_lines_within_4096_characters_and_counts_the_rest() {
    let mut n = testing::notification(Action::Open);
    n.incidents_mut()[0].messages = (0..400)
        .map(|k| format!("line {k} of a very long <log> & more"))
        .collect();

    let text = text(&n);

    assert!(crate::receivers::render::telegram_len(&text) <= MAX_TEXT);
    let shown = text.matches("<pre>").count();
    assert_eq!(text.matches("</pre>").count(), shown, "no tag is cut");
    assert!(text.contains(" more lines\n"), "{text}");
}

#[test]
fn the_block_reads_its_token_from_a_file_and_acknowledgements_edit_its_messages() {
    use secrecy::ExposeSecret;
    let token = testing::secret_file("bot-token", TOKEN);
    let yaml = format!(
        "receivers: [{{name: ops, telegram: {{bot_token_file: '{}', chat_id: '@herald_ops'}}}}]",
        token.path.display()
    );
    let settings = crate::configuration::Settings::from_yaml(&yaml).expect("valid");
    let crate::receivers::ReceiverKind::Telegram(c) = &settings.receivers[0].kind else {
        panic!("a telegram block");
    };
    assert_eq!(c.bot_token.expose_secret(), TOKEN);
    assert_eq!(c.chat_id.to_json(), json!("@herald_ops"));
    assert_eq!(c.api_url, "https://api.telegram.org");
    let caps = settings.receivers[0].capabilities();
    assert_eq!(
        (
            caps.sends_resolved,
            caps.default_rate,
            caps.acknowledgements,
            caps.digest
        ),
        (true, Some(1.0), true, true)
    );
}

#[test]
fn a_refused_token_is_never_repeated() {
    let yaml = "receivers: [{name: ops, telegram: {bot_token: 'AAHsecret without id', chat_id: 1}}]";
    let e = crate::configuration::Settings::from_yaml(yaml)
        .expect_err("refused")
        .to_string();
    assert!(e.contains("telegram.bot_token") && !e.contains("AAHsecret"), "{e}");
}
