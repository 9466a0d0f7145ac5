//! Every HTTP receiver against a downstream that echoes everything it was sent (URL, headers, body) in its error:
//! no configured secret, nor the encoded form it travelled in, reaches the failure that is logged, stored in the
//! outbox and shown on the status page.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer};

use super::testing::{self, EchoEverything, assert_no_secret, error_text};
use super::{DeliveryError, Shared, build};
use crate::configuration::Settings;
use crate::domain::{Action, Body, CommitState, Notification};

/// Builds the one receiver `yaml` configures (`{base}` is the echo server's URL, `{authority}` its host and
/// port), delivers an open notification to a
/// downstream answering `status` with an echo, and returns the failure after checking no secret is in it.
async fn echoed_failure(yaml: &str, status: u16, secrets: &[&str]) -> DeliveryError {
    echoed_failure_of(yaml, &testing::notification(Action::Open), status, secrets).await
}

/// [`echoed_failure`] delivering `n` (a sync, for the receivers told of syncs only).
async fn echoed_failure_of(yaml: &str, n: &Notification, status: u16, secrets: &[&str]) -> DeliveryError {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(EchoEverything(status))
        .mount(&server)
        .await;
    let base = server.uri();
    let yaml = yaml
        .replace("{base}", &base)
        .replace("{authority}", base.trim_start_matches("http://"));
    let settings = Settings::from_yaml(&yaml).expect("valid settings");
    let shared = Shared::new(std::sync::Arc::new(settings), testing::clock());
    let receiver = build(&shared.settings.receivers[0], &shared).expect("builds");

    let e = receiver.deliver(n, None).await.expect_err("the downstream refuses");

    assert!(
        !testing::requests(&server).await.is_empty(),
        "the request reached the echo server"
    );
    assert!(error_text(&e).contains(&format!("HTTP {status}")), "{e}");
    assert_no_secret(&e, secrets);
    e
}

#[tokio::test]
async fn the_webhook_receiver_keeps_its_url_headers_and_signing_key_out_of_failures() {
    let yaml = r#"
receivers:
  - name: hook
    webhook:
      url: "{base}/hooks/s3cr3t-path-token?token=qu3ry-t0ken"
      hmac_secret: "signing-key-0001"
      headers: {Authorization: "Bearer b3arer-xyz", X-Api-Key: "k9z"}
"#;
    let e = echoed_failure(
        yaml,
        404,
        &[
            "s3cr3t-path-token",
            "qu3ry-t0ken",
            "b3arer-xyz",
            "k9z",
            "signing-key-0001",
        ],
    )
    .await;
    assert!(error_text(&e).contains("[redacted]"), "{e}");
}

#[tokio::test]
async fn the_slack_webhook_and_bot_keep_their_url_and_token_out_of_failures() {
    let hook = r#"receivers: [{name: s, slack: {webhook_url: "{base}/services/T0/B0/slackhooksecret0123"}}]"#;
    echoed_failure(hook, 404, &["slackhooksecret0123", "/services/T0/B0"]).await;
    let bot = r##"receivers: [{name: s, slack: {token: "xoxb-42-s3cr3t", channel: "#ops", api_url: "{base}/api"}}]"##;
    echoed_failure(bot, 403, &["xoxb-42-s3cr3t"]).await;
}

#[tokio::test]
async fn the_chat_webhooks_keep_their_urls_out_of_failures() {
    let cases = [
        (
            r#"receivers: [{name: t, msteams: {webhook_url: "{base}/workflows/abc/triggers/manual/paths/invoke?api-version=1&sig=teamsSig0123456789abc"}}]"#,
            vec!["teamsSig0123456789abc"],
        ),
        (
            r#"receivers: [{name: g, googlechat: {webhook_url: "{base}/v1/spaces/AAAA/messages?key=gKey0123456789abcdef&token=gTok0123456789abcdef"}}]"#,
            vec!["gKey0123456789abcdef", "gTok0123456789abcdef"],
        ),
        (
            r#"receivers: [{name: m, mattermost: {webhook_url: "{base}/hooks/mmhooksecret0123456"}}]"#,
            vec!["mmhooksecret0123456"],
        ),
        (
            r#"receivers: [{name: d, discord: {webhook_url: "{base}/api/webhooks/1234/dcWebhookT0ken0123456789"}}]"#,
            vec!["dcWebhookT0ken0123456789", "/api/webhooks/1234"],
        ),
    ];
    for (yaml, secrets) in cases {
        echoed_failure(yaml, 400, &secrets).await;
    }
}

#[tokio::test]
async fn jira_keeps_its_token_and_the_basic_credentials_out_of_failures() {
    let cloud = r#"receivers: [{name: j, jira: {url: "{base}", user: bot@example.com, token: "jt0k", project: PAY}}]"#;
    let basic = STANDARD.encode("bot@example.com:jt0k");
    echoed_failure(cloud, 401, &["jt0k", &basic]).await;
    let dc = r#"receivers: [{name: j, jira: {url: "{base}", api: datacenter, token: "dc-pat-0042", project: PAY}}]"#;
    echoed_failure(dc, 401, &["dc-pat-0042"]).await;
}

#[tokio::test]
async fn github_keeps_its_token_out_of_failures() {
    let yaml = r#"receivers: [{name: g, github: {api_url: "{base}", repo: acme/payments, token: "ghp_x1"}}]"#;
    echoed_failure(yaml, 401, &["ghp_x1"]).await;
}

#[tokio::test]
async fn pagerduty_keeps_the_routing_key_it_sends_in_the_body_out_of_failures() {
    let yaml = r#"receivers: [{name: p, pagerduty: {url: "{base}/v2/enqueue", routing_key: "rk-77"}}]"#;
    echoed_failure(yaml, 400, &["rk-77"]).await;
}

#[tokio::test]
async fn alertmanager_keeps_the_credentials_of_its_url_out_of_failures() {
    let yaml = r#"receivers: [{name: a, alertmanager: {url: "http://am:hunter2@{authority}"}}]"#;
    let basic = STANDARD.encode("am:hunter2");
    echoed_failure(yaml, 400, &["hunter2", &basic]).await;
}

#[tokio::test]
async fn telegram_keeps_the_bot_token_in_its_urls_path_out_of_failures() {
    let yaml = r#"receivers: [{name: t, telegram: {api_url: "{base}", bot_token: "4242:tgT0kenSecretPart_x", chat_id: -100}}]"#;
    let e = echoed_failure(yaml, 400, &["4242:tgT0kenSecretPart_x", "tgT0kenSecretPart_x"]).await;
    assert!(error_text(&e).contains("[redacted]"), "{e}");
}

#[tokio::test]
async fn the_github_status_and_grafana_receivers_keep_their_tokens_out_of_failures() {
    let status = testing::sync_notification(Body::CommitStatus(Box::new(testing::commit_status(
        CommitState::Success,
    ))));
    let yaml = r#"receivers: [{name: s, github_status: {api_url: "{base}", token: "ghp_st4tus"}}]"#;
    echoed_failure_of(yaml, &status, 422, &["ghp_st4tus"]).await;

    let deployed = testing::sync_notification(Body::Change(Box::new(testing::change())));
    let yaml = r#"receivers: [{name: g, grafana: {url: "http://admin:pa55w0rd@{authority}", token: "glsa_t0k"}}]"#;
    let basic = STANDARD.encode("admin:pa55w0rd");
    echoed_failure_of(yaml, &deployed, 403, &["glsa_t0k", "pa55w0rd", &basic]).await;
}
