//! The Telegram receiver through the whole application: the first message's `message_id`, answered by
//! `sendMessage`, is kept as the thread's memo in the store and handed back, so the resolve edits that very message
//! (`editMessageText`) instead of posting another.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::delivery::{failed_sync, recovered};
use crate::helpers::*;

const TOKEN: &str = "4242:bl0ckedTokenPart-xyz";

fn answered(message_id: i64) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"ok": true, "result": {
        "message_id": message_id, "date": 1767225600, "text": "…",
        "chat": {"id": -1001, "title": "Ops", "type": "supergroup"},
    }}))
}

#[tokio::test]
async fn a_resolve_edits_the_message_the_open_sent() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/bot{TOKEN}/sendMessage")))
        .respond_with(answered(77))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("/bot{TOKEN}/editMessageText")))
        .respond_with(answered(77))
        .expect(1)
        .mount(&server)
        .await;
    let app = TestApp::spawn(&format!(
        r#"
receivers: [{{name: tg, telegram: {{bot_token: "{TOKEN}", chat_id: -1001, api_url: "{}"}}}}]
teams: {{payments: {{receivers: [tg]}}}}
rules: {{sync_failed: {{for: 0s}}, out_of_sync: {{enabled: false}}}}
grouping: {{group_wait: 0s, group_interval: 1s}}
outbox: {{poll_interval: 50ms, initial_backoff: 200ms, max_backoff: 1s}}
"#,
        server.uri()
    ))
    .await;

    app.post(failed_sync("pay-api", "2026-01-01T00:00:00Z")).await;
    eventually(Duration::from_secs(5), || async {
        (server.received_requests().await.unwrap_or_default().len() == 1).then_some(())
    })
    .await
    .expect("the open is sent");
    app.post(recovered("pay-api", "2026-01-01T00:05:00Z")).await;
    let reqs = eventually(Duration::from_secs(10), || async {
        let reqs = server.received_requests().await.unwrap_or_default();
        (reqs.len() >= 2).then_some(reqs)
    })
    .await
    .expect("the resolve is sent");
    app.settle().await;

    let all = server.received_requests().await.unwrap_or_default();
    assert_eq!(all.len(), 2, "no extra request");
    let edit: Value = serde_json::from_slice(&reqs[1].body).expect("json");
    assert_eq!(reqs[1].url.path(), format!("/bot{TOKEN}/editMessageText"));
    assert_eq!(
        (edit["chat_id"].clone(), edit["message_id"].clone()),
        (json!(-1001), json!(77))
    );
    assert!(
        edit["text"].as_str().unwrap_or_default().starts_with("✅ <b>RESOLVED"),
        "{edit}"
    );
    let done = app.get_json("/v1/outbox?state=done").await;
    assert_eq!(done["count"], 2);
    assert!(
        !done.to_string().contains("bl0ckedTokenPart"),
        "the token stays out of the API: {done}"
    );
    app.stop().await;
}
