//! The Slack receiver: Block Kit messages through an incoming webhook (one new message per action), or through a
//! bot token and the Web API, where the first message's `{channel, ts}` is the memo: updates reply in its thread,
//! a resolve edits it (`chat.update`) to show RESOLVED and replies in the thread.
//! Owns the Block Kit rendering of a notification and the `ok:false` error → retry mapping of the Web API.

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::http::{Http, transport_error};
use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::configuration::SlackSettings;
use crate::domain::{Action, Incident, Notification};
use crate::receivers::render;
use crate::receivers::render::{status_emoji, truncate};

/// Block Kit limits: 50 blocks per message, 3000 characters per section text, 150 per header.
const MAX_BLOCKS: usize = 50;
const MAX_SECTION_TEXT: usize = 3000;
const MAX_HEADER_TEXT: usize = 150;
const MAX_CONTEXT_TEXT: usize = 2000;
/// Slack truncates `text` beyond 40,000 characters; the fallback stays far below.
const MAX_FALLBACK_TEXT: usize = 3000;
const MAX_TEMPLATE_TEXT: usize = 39000;

enum Mode {
    Webhook(SecretString),
    Bot {
        token: SecretString,
        channel: Option<String>,
    },
    /// Neither a webhook URL nor a token: configuration validation refuses this, but fail clearly if it gets here.
    Unconfigured,
}

pub struct Slack {
    mode: Mode,
    api_url: String,
    http: Http,
    template: Option<String>,
    redactor: Redactor,
}

impl Slack {
    /// A bot token wins over a webhook URL when both are set: only the Web API can thread and edit.
    pub fn new(settings: SlackSettings, http: Http, template: Option<String>) -> Self {
        let mut redactor = Redactor::default();
        if let Some(u) = &settings.webhook_url {
            redactor = redactor.url(u.expose_secret());
        }
        if let Some(t) = &settings.token {
            redactor = redactor.secret(t.expose_secret());
        }
        let mode = match (settings.token, settings.webhook_url) {
            (Some(token), _) => Mode::Bot {
                token,
                channel: settings.channel,
            },
            (None, Some(url)) => Mode::Webhook(url),
            (None, None) => Mode::Unconfigured,
        };
        Self {
            mode,
            api_url: settings.api_url.trim_end_matches('/').to_string(),
            http,
            template,
            redactor,
        }
    }
}

/// The first message of a thread, as the Web API named it (`channel` is the channel ID `chat.update` needs).
#[derive(Debug, Clone, PartialEq)]
struct Posted {
    channel: String,
    ts: String,
}

impl Posted {
    fn from_memo(memo: Option<&Memo>) -> Option<Self> {
        let m = memo?;
        Some(Self {
            channel: m.get("channel")?.as_str()?.to_string(),
            ts: m.get("ts")?.as_str()?.to_string(),
        })
    }
    fn to_memo(&self) -> Memo {
        json!({"channel": self.channel, "ts": self.ts})
    }
}

/// A message ready to send: `text` is the notification fallback, `blocks` what people see.
struct Message {
    text: String,
    blocks: Vec<Value>,
}

// ---------------------------------------------------------------------------------------------------------------
// Block Kit
// ---------------------------------------------------------------------------------------------------------------

/// mrkdwn treats `&`, `<` and `>` as control characters.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn header(n: &Notification) -> Value {
    json!({
        "type": "header",
        "text": {
            "type": "plain_text",
            "text": truncate(&format!("{} {}: {}", status_emoji(n), render::status_word(n), n.title), MAX_HEADER_TEXT),
            "emoji": true,
        },
    })
}

fn section(text: &str) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate(text, MAX_SECTION_TEXT)}})
}

fn context(n: &Notification) -> Value {
    let mut parts = Vec::new();
    if !n.reason.is_empty() {
        parts.push(esc(&n.reason));
    }
    parts.push(format!("Herald · {}", n.created_at.format("%Y-%m-%d %H:%M:%S UTC")));
    json!({
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": truncate(&parts.join(" · "), MAX_CONTEXT_TEXT)}],
    })
}

fn incident_text(i: &Incident) -> String {
    let mut s = format!("*[{}] {}*\n", esc(&i.state.as_str().to_uppercase()), esc(&i.summary));
    for (k, v) in render::facts(i) {
        if k != "Argo CD" {
            s.push_str(&format!("*{k}:* `{}`\n", esc(&v)));
        }
    }
    if !i.resources.is_empty() {
        s.push_str("*Resources:*\n");
        for r in &i.resources {
            s.push_str(&format!("• `{}` ({})", esc(&r.display()), esc(&r.status)));
            if !r.message.is_empty() {
                s.push_str(&format!(": {}", esc(&r.message.replace('\n', " "))));
            }
            s.push('\n');
        }
    }
    for m in &i.messages {
        s.push_str(&format!("> {}\n", esc(&m.replace('\n', " "))));
    }
    if !i.hints.is_empty() {
        s.push_str("*What to do*\n");
        for h in &i.hints {
            s.push_str(&format!("• *{}*: {}\n", esc(&h.title), esc(&h.text)));
        }
    }
    for note in &i.notes {
        s.push_str(&format!("_Note: {}_\n", esc(note)));
    }
    s
}

fn incident_section(i: &Incident) -> Value {
    let mut block = section(&incident_text(i));
    // A button needs an http(s) URL of at most 3000 characters; otherwise the section goes without one.
    if let Some(u) = &i.app_url
        && (u.starts_with("https://") || u.starts_with("http://"))
        && u.len() <= 3000
    {
        block["accessory"] = json!({
            "type": "button",
            "text": {"type": "plain_text", "text": "Open in Argo CD"},
            "url": u,
        });
    }
    block
}

/// Splits text into pieces of at most `max` characters, at line ends when possible.
fn chunks(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.split_inclusive('\n') {
        if cur.chars().count() + line.chars().count() > max && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        if line.chars().count() > max {
            let chars: Vec<char> = line.chars().collect();
            for piece in chars.chunks(max) {
                out.push(piece.iter().collect());
            }
        } else {
            cur.push_str(line);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

/// Header, one section per incident (or the template's text), a context line; never more than 50 blocks.
fn blocks(n: &Notification, templated: Option<&str>) -> Vec<Value> {
    let room = MAX_BLOCKS - 2; // header + context
    let mut body: Vec<Value> = match templated {
        Some(t) => {
            let mut pieces = chunks(t, MAX_SECTION_TEXT);
            pieces.truncate(room);
            pieces.iter().map(|p| section(p)).collect()
        }
        None if n.incidents.len() <= room => n.incidents.iter().map(incident_section).collect(),
        None => {
            let shown = room - 1;
            let mut v: Vec<Value> = n.incidents[..shown].iter().map(incident_section).collect();
            v.push(section(&format!("…and {} more", n.incidents.len() - shown)));
            v
        }
    };
    let mut out = Vec::with_capacity(body.len() + 2);
    out.push(header(n));
    out.append(&mut body);
    out.push(context(n));
    out
}

/// The fallback `text` shown in notifications and to screen readers: title, reason and one line per incident.
fn fallback_text(n: &Notification) -> String {
    let mut s = format!("{}: {}", render::status_word(n), n.title);
    if !n.reason.is_empty() {
        s.push_str(&format!(" ({})", n.reason));
    }
    for i in &n.incidents {
        s.push_str(&format!("\n• [{}] {}", i.state.as_str().to_uppercase(), i.summary));
    }
    truncate(&esc(&s), MAX_FALLBACK_TEXT)
}

/// The short reply posted in the thread when the first message has been edited to show the resolution.
fn resolved_reply(n: &Notification) -> Message {
    let mut s = format!("{} *{}*: {}", status_emoji(n), render::status_word(n), esc(&n.title));
    if !n.reason.is_empty() {
        s.push_str(&format!("\n_{}_", esc(&n.reason)));
    }
    Message {
        text: truncate(&format!("{}: {}", render::status_word(n), n.title), MAX_FALLBACK_TEXT),
        blocks: vec![section(&s)],
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Delivery
// ---------------------------------------------------------------------------------------------------------------

/// Web API `error` codes worth retrying; every other code (bad auth, unknown channel, invalid blocks, and codes
/// this table does not know) is permanent.
fn api_error_is_transient(code: &str) -> bool {
    matches!(
        code,
        "ratelimited" | "rate_limited" | "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout"
    )
}

/// What `chat.update` answers when the first message cannot be edited any more: reply in the thread anyway.
fn cannot_edit(code: &str) -> bool {
    matches!(code, "cant_update_message" | "edit_window_closed")
}

/// Answered by `chat.update` when the first message is gone: start a new thread instead.
const MESSAGE_GONE: &str = "message_not_found";

/// A Web API failure with its `error` code kept, so callers can react to particular codes.
struct ApiError {
    code: Option<String>,
    error: DeliveryError,
}

impl From<DeliveryError> for ApiError {
    fn from(error: DeliveryError) -> Self {
        Self { code: None, error }
    }
}

impl Slack {
    fn message(&self, n: &Notification) -> Result<Message, DeliveryError> {
        let custom =
            render::custom_text(self.template.as_deref(), n).map_err(|e| DeliveryError::prefixed("slack", e))?;
        match custom {
            Some(text) => Ok(Message {
                blocks: blocks(n, Some(&text)),
                text: truncate(&text, MAX_TEMPLATE_TEXT),
            }),
            None => Ok(Message {
                text: fallback_text(n),
                blocks: blocks(n, None),
            }),
        }
    }

    async fn post_webhook(&self, url: &SecretString, msg: &Message) -> Result<Delivered, DeliveryError> {
        let body = json!({"text": msg.text, "blocks": msg.blocks});
        self.http
            .post_json(url.expose_secret(), &body, &self.redactor, "slack webhook")
            .await?;
        Ok(Delivered {
            memo: None,
            detail: "posted to the incoming webhook".into(),
        })
    }

    /// Calls a Web API method. HTTP errors go through the shared status table; HTTP 200 with `ok:false` is a
    /// failure classified by its `error` code.
    async fn call(&self, token: &SecretString, method: &str, body: &Value) -> Result<Value, ApiError> {
        let resp = self
            .http
            .client()
            .post(format!("{}/{method}", self.api_url))
            .bearer_auth(token.expose_secret())
            .json(body)
            .send()
            .await
            .map_err(|e| self.redactor.apply(transport_error(e)))?;
        if !resp.status().is_success() {
            let e = self.http.error_from_response(resp).await;
            return Err(self
                .redactor
                .apply(DeliveryError::prefixed(&format!("slack {method}"), e))
                .into());
        }
        let retry_after = self.http.retry_after(&resp);
        let text = resp.text().await.unwrap_or_default();
        let value: Value = serde_json::from_str(&text).map_err(|_| {
            // Something between us and Slack answered; the message may not have been posted.
            self.redactor.apply(DeliveryError::transient(format!(
                "slack {method}: the answer is not JSON: {}",
                truncate(&text, 200)
            )))
        })?;
        if value.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(value);
        }
        let code = value
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown_error")
            .to_string();
        let mut reason = format!("slack {method}: {code}");
        // invalid_blocks and friends explain themselves in response_metadata.messages.
        if let Some(details) = value.pointer("/response_metadata/messages").and_then(Value::as_array) {
            let details: Vec<&str> = details.iter().filter_map(Value::as_str).collect();
            if !details.is_empty() {
                reason.push_str(&format!(" ({})", truncate(&details.join("; "), 300)));
            }
        }
        let error = if api_error_is_transient(&code) {
            DeliveryError::Transient { reason, retry_after }
        } else {
            DeliveryError::permanent(reason)
        };
        Err(ApiError {
            code: Some(code),
            error: self.redactor.apply(error),
        })
    }

    async fn post_message(
        &self,
        token: &SecretString,
        channel: &str,
        thread_ts: Option<&str>,
        msg: &Message,
    ) -> Result<Posted, DeliveryError> {
        let mut body = json!({
            "channel": channel,
            "text": msg.text,
            "blocks": msg.blocks,
            "unfurl_links": false,
            "unfurl_media": false,
        });
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        let answer = self.call(token, "chat.postMessage", &body).await.map_err(|e| e.error)?;
        let channel = answer.get("channel").and_then(Value::as_str).unwrap_or(channel);
        let ts = answer
            .get("ts")
            .and_then(Value::as_str)
            .ok_or_else(|| DeliveryError::permanent("slack chat.postMessage: ok without a message ts"))?;
        Ok(Posted {
            channel: channel.to_string(),
            ts: ts.to_string(),
        })
    }

    async fn deliver_bot(
        &self,
        token: &SecretString,
        channel: &str,
        n: &Notification,
        first: Option<Posted>,
    ) -> Result<Delivered, DeliveryError> {
        let msg = self.message(n)?;
        let new_thread = |posted: Posted| Delivered {
            detail: format!("posted ts {} in {}", posted.ts, posted.channel),
            memo: Some(posted.to_memo()),
        };
        match (n.action, first) {
            (Action::Update, Some(first)) => {
                let reply = self.post_message(token, &first.channel, Some(&first.ts), &msg).await?;
                Ok(Delivered {
                    detail: format!("replied ts {} in thread {}", reply.ts, first.ts),
                    memo: Some(first.to_memo()),
                })
            }
            (Action::Resolve, Some(first)) => {
                let edit = json!({
                    "channel": first.channel,
                    "ts": first.ts,
                    "text": msg.text,
                    "blocks": msg.blocks,
                });
                let edited = match self.call(token, "chat.update", &edit).await {
                    Ok(_) => true,
                    Err(ApiError { code: Some(code), .. }) if code == MESSAGE_GONE => {
                        let posted = self.post_message(token, channel, None, &msg).await?;
                        return Ok(new_thread(posted));
                    }
                    Err(ApiError { code: Some(code), .. }) if cannot_edit(&code) => false,
                    Err(e) => return Err(e.error),
                };
                self.post_message(token, &first.channel, Some(&first.ts), &resolved_reply(n))
                    .await?;
                Ok(Delivered {
                    detail: if edited {
                        format!("edited ts {} to resolved and replied in its thread", first.ts)
                    } else {
                        format!("replied in thread {} (the message can no longer be edited)", first.ts)
                    },
                    memo: Some(first.to_memo()),
                })
            }
            // Open, Test, or nothing to thread under: a new top-level message that later ones thread under.
            _ => Ok(new_thread(self.post_message(token, channel, None, &msg).await?)),
        }
    }
}

#[async_trait::async_trait]
impl Receiver for Slack {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        match &self.mode {
            Mode::Webhook(url) => self.post_webhook(url, &self.message(n)?).await,
            Mode::Bot { token, channel } => {
                let channel = channel
                    .as_deref()
                    .ok_or_else(|| DeliveryError::permanent("slack: a bot token needs a `channel`"))?;
                self.deliver_bot(token, channel, n, Posted::from_memo(memo)).await
            }
            Mode::Unconfigured => Err(DeliveryError::permanent(
                "slack: needs `webhook_url`, or `token` and `channel`",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::TimeZone;
    use wiremock::matchers::{bearer_token, body_partial_json, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::domain::{Hint, ResourceRef};
    use crate::receivers::testing;

    const TOKEN: &str = "xoxb-1111-2222-secrettokenvalue";
    const HOOK_PATH: &str = "/services/T0000/B0000/hooksecretXXXXXXXXXXXX";

    fn incident(n: usize) -> Incident {
        Incident {
            fingerprint: format!("fp-{n}"),
            kind: crate::domain::Kind::Degraded,
            severity: crate::domain::Severity::Critical,
            state: crate::domain::IncidentState::Firing,
            summary: format!("payments-{n} is Degraded"),
            app_namespace: "argocd".into(),
            app_name: format!("payments-{n}"),
            project: "default".into(),
            team: "payments".into(),
            destination_cluster: "in-cluster".into(),
            destination_namespace: "payments".into(),
            app_url: Some(format!("https://argocd.example.com/applications/argocd/payments-{n}")),
            since: chrono::Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).unwrap(),
            resources: vec![ResourceRef {
                kind: "Deployment".into(),
                namespace: "payments".into(),
                name: "api".into(),
                status: "Degraded".into(),
                message: "Deployment exceeded its progress deadline".into(),
            }],
            hints: vec![Hint {
                id: "rollout".into(),
                title: "Check the rollout".into(),
                text: "kubectl -n payments rollout status deploy/api".into(),
            }],
            ..Default::default()
        }
    }

    fn notification(action: Action) -> Notification {
        let mut i = incident(1);
        if action == Action::Resolve {
            i.state = crate::domain::IncidentState::Resolved;
        }
        Notification {
            receiver: "team-slack".into(),
            action,
            thread_key: "group:payments".into(),
            title: "payments-1 is Degraded".into(),
            reason: if action == Action::Resolve { "resolved" } else { "fired" }.into(),
            incidents: vec![i],
            created_at: chrono::Utc.with_ymd_and_hms(2026, 11, 30, 10, 5, 0).unwrap(),
        }
    }

    fn webhook(server: &MockServer) -> Slack {
        let settings = SlackSettings {
            webhook_url: Some(SecretString::from(format!("{}{HOOK_PATH}", server.uri()))),
            token: None,
            channel: None,
            api_url: "http://127.0.0.1:9/unused".into(),
        };
        Slack::new(settings, testing::http(), None)
    }

    fn bot(server: &MockServer) -> Slack {
        let settings = SlackSettings {
            webhook_url: None,
            token: Some(SecretString::from(TOKEN)),
            channel: Some("#payments".into()),
            api_url: format!("{}/api/", server.uri()),
        };
        Slack::new(settings, testing::http(), None)
    }

    fn memo() -> Memo {
        json!({"channel": "C0123", "ts": "1700000000.000100"})
    }

    /// Every request the server saw (so a test fails on extra requests, not only on missing ones).
    async fn received(server: &MockServer) -> Vec<(String, Value)> {
        server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| (r.url.path().to_string(), serde_json::from_slice(&r.body).unwrap()))
            .collect()
    }

    fn assert_no_secret(e: &DeliveryError) {
        let s = e.to_string();
        for secret in [TOKEN, HOOK_PATH, "hooksecretXXXXXXXXXXXX"] {
            assert!(!s.contains(secret), "{secret:?} leaked into {s:?}");
        }
    }

    fn transient_after(e: &DeliveryError) -> Option<Duration> {
        match e {
            DeliveryError::Transient { retry_after, .. } => *retry_after,
            other => panic!("expected a transient failure, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn webhook_posts_text_and_blocks_and_accepts_ok() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(HOOK_PATH))
            .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
            .expect(1)
            .mount(&server)
            .await;

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
        let section = blocks[1]["text"]["text"].as_str().unwrap();
        for expected in [
            "payments-1 is Degraded",
            "*Application:* `argocd/payments-1`",
            "`Deployment/payments/api` (Degraded)",
            "*What to do*",
            "Check the rollout",
        ] {
            assert!(section.contains(expected), "{expected:?} not in {section}");
        }
        assert_eq!(
            blocks[1]["accessory"]["url"],
            "https://argocd.example.com/applications/argocd/payments-1"
        );
        assert_eq!(blocks.last().unwrap()["type"], "context");
    }

    #[tokio::test]
    async fn webhook_resolve_is_a_new_message_saying_resolved() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(HOOK_PATH))
            .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
            .expect(1)
            .mount(&server)
            .await;

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
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .and(path(HOOK_PATH))
                .respond_with(ResponseTemplate::new(status).set_body_string(body))
                .expect(1)
                .mount(&server)
                .await;

            let e = webhook(&server)
                .deliver(&notification(Action::Open), None)
                .await
                .unwrap_err();

            assert!(matches!(e, DeliveryError::Permanent { .. }), "{status}: {e:?}");
            assert!(e.to_string().contains(body), "{e}");
            assert_no_secret(&e);
        }
    }

    #[tokio::test]
    async fn webhook_429_is_transient_with_the_retry_after_delay() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "7"))
            .expect(1)
            .mount(&server)
            .await;

        let e = webhook(&server)
            .deliver(&notification(Action::Open), None)
            .await
            .unwrap_err();

        assert_eq!(transient_after(&e), Some(Duration::from_secs(7)));
        assert_no_secret(&e);
    }

    #[tokio::test]
    async fn webhook_500_is_transient() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(500).set_body_string("internal error"))
            .expect(1)
            .mount(&server)
            .await;

        let e = webhook(&server)
            .deliver(&notification(Action::Open), None)
            .await
            .unwrap_err();

        assert_eq!(transient_after(&e), None);
        assert_no_secret(&e);
    }

    #[tokio::test]
    async fn an_error_body_echoing_the_webhook_url_does_not_leak_it() {
        let server = MockServer::start().await;
        let echo = format!("no_service for {}{HOOK_PATH}", server.uri());
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(404).set_body_string(echo))
            .expect(1)
            .mount(&server)
            .await;

        let e = webhook(&server)
            .deliver(&notification(Action::Open), None)
            .await
            .unwrap_err();

        assert_no_secret(&e);
        assert!(e.to_string().contains("[redacted]"), "{e}");
    }

    #[tokio::test]
    async fn a_webhook_that_cannot_be_reached_is_transient_and_keeps_the_url_secret() {
        let settings = SlackSettings {
            webhook_url: Some(SecretString::from(format!("http://127.0.0.1:9{HOOK_PATH}"))),
            token: None,
            channel: None,
            api_url: "http://127.0.0.1:9".into(),
        };
        let slack = Slack::new(settings, testing::http(), None);

        let e = slack.deliver(&notification(Action::Open), None).await.unwrap_err();

        transient_after(&e);
        assert_no_secret(&e);
    }

    #[tokio::test]
    async fn bot_open_posts_to_the_channel_and_keeps_channel_and_ts_as_memo() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/api/chat.postMessage"))
            .and(bearer_token(TOKEN))
            .and(body_partial_json(json!({"channel": "#payments"})))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"ok": true, "channel": "C0123", "ts": "1700000000.000100", "message": {}})),
            )
            .expect(1)
            .mount(&server)
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
        Mock::given(method("POST"))
            .and(path("/api/chat.postMessage"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"ok": true, "channel": "C0123", "ts": "2.0"})),
            )
            .expect(1)
            .mount(&server)
            .await;

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
        Mock::given(method("POST"))
            .and(path("/api/chat.postMessage"))
            .and(bearer_token(TOKEN))
            .and(body_partial_json(
                json!({"channel": "C0123", "thread_ts": "1700000000.000100"}),
            ))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"ok": true, "channel": "C0123", "ts": "1700000100.000200"})),
            )
            .expect(1)
            .mount(&server)
            .await;

        let out = bot(&server)
            .deliver(&notification(Action::Update), Some(&memo()))
            .await
            .unwrap();

        assert_eq!(out.memo, Some(memo()), "the thread stays the first message's");
        assert_eq!(received(&server).await.len(), 1);
    }

    #[tokio::test]
    async fn bot_resolve_edits_the_first_message_and_replies_in_its_thread() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/api/chat.update"))
            .and(bearer_token(TOKEN))
            .and(body_partial_json(
                json!({"channel": "C0123", "ts": "1700000000.000100"}),
            ))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"ok": true, "channel": "C0123", "ts": "1700000000.000100"})),
            )
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/api/chat.postMessage"))
            .and(body_partial_json(
                json!({"channel": "C0123", "thread_ts": "1700000000.000100"}),
            ))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"ok": true, "channel": "C0123", "ts": "3.0"})),
            )
            .expect(1)
            .mount(&server)
            .await;

        let out = bot(&server)
            .deliver(&notification(Action::Resolve), Some(&memo()))
            .await
            .unwrap();

        assert_eq!(out.memo, Some(memo()));
        let reqs = received(&server).await;
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].0, "/api/chat.update", "edit first, then reply");
        let edit = &reqs[0].1;
        assert!(edit["text"].as_str().unwrap().starts_with("RESOLVED: "));
        let header = edit["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(header.contains("RESOLVED"), "{header}");
        assert!(
            edit["blocks"][1]["text"]["text"]
                .as_str()
                .unwrap()
                .contains("[RESOLVED]")
        );
        assert!(reqs[1].1["text"].as_str().unwrap().starts_with("RESOLVED: "));
    }

    #[tokio::test]
    async fn bot_update_without_memo_posts_a_top_level_message_and_keeps_it() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/api/chat.postMessage"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"ok": true, "channel": "C0999", "ts": "5.0"})),
            )
            .expect(2)
            .mount(&server)
            .await;

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
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/api/chat.update"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "message_not_found"})))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/api/chat.postMessage"))
            .and(body_partial_json(json!({"channel": "#payments"})))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"ok": true, "channel": "C0123", "ts": "9.0"})),
            )
            .expect(1)
            .mount(&server)
            .await;

        let out = bot(&server)
            .deliver(&notification(Action::Resolve), Some(&memo()))
            .await
            .unwrap();

        assert_eq!(out.memo, Some(json!({"channel": "C0123", "ts": "9.0"})));
        let reqs = received(&server).await;
        assert_eq!(reqs.len(), 2);
        assert!(reqs[1].1.get("thread_ts").is_none());
    }

    #[tokio::test]
    async fn bot_resolve_of_a_message_that_cannot_be_edited_still_replies_in_its_thread() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/api/chat.update"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "edit_window_closed"})))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/api/chat.postMessage"))
            .and(body_partial_json(json!({"thread_ts": "1700000000.000100"})))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"ok": true, "channel": "C0123", "ts": "4.0"})),
            )
            .expect(1)
            .mount(&server)
            .await;

        let out = bot(&server)
            .deliver(&notification(Action::Resolve), Some(&memo()))
            .await
            .unwrap();

        assert_eq!(out.memo, Some(memo()));
        assert_eq!(received(&server).await.len(), 2);
    }

    async fn bot_answering(answer: ResponseTemplate) -> DeliveryError {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/api/chat.postMessage"))
            .respond_with(answer)
            .expect(1)
            .mount(&server)
            .await;
        let e = bot(&server)
            .deliver(&notification(Action::Open), None)
            .await
            .unwrap_err();
        assert_eq!(received(&server).await.len(), 1);
        assert_no_secret(&e);
        e
    }

    #[tokio::test]
    async fn bot_ok_false_invalid_auth_is_permanent() {
        let e = bot_answering(ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "invalid_auth"})))
            .await;

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
        let e =
            bot_answering(ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "ratelimited"}))).await;

        transient_after(&e);
        assert!(e.to_string().contains("ratelimited"), "{e}");
    }

    #[tokio::test]
    async fn bot_http_429_is_transient_with_the_retry_after_delay() {
        let e = bot_answering(
            ResponseTemplate::new(429)
                .insert_header("Retry-After", "7")
                .set_body_json(json!({"ok": false, "error": "ratelimited"})),
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
        let settings = SlackSettings {
            webhook_url: None,
            token: Some(SecretString::from(TOKEN)),
            channel: None,
            api_url: server.uri(),
        };
        let slack = Slack::new(settings, testing::http(), None);

        let e = slack.deliver(&notification(Action::Open), None).await.unwrap_err();

        assert!(matches!(e, DeliveryError::Permanent { .. }), "{e:?}");
        assert!(received(&server).await.is_empty());
    }

    #[test]
    fn blocks_stay_within_slack_limits() {
        let mut n = notification(Action::Open);
        n.title = "t".repeat(400);
        n.incidents = (0..60).map(incident).collect();
        n.incidents[0].summary = "x".repeat(5000);

        let b = blocks(&n, None);

        assert_eq!(b.len(), MAX_BLOCKS);
        assert!(b[0]["text"]["text"].as_str().unwrap().chars().count() <= MAX_HEADER_TEXT);
        for block in &b {
            if block["type"] == "section" {
                assert!(block["text"]["text"].as_str().unwrap().chars().count() <= MAX_SECTION_TEXT);
            }
        }
        let more = b[MAX_BLOCKS - 2]["text"]["text"].as_str().unwrap();
        assert_eq!(more, "…and 13 more");
        assert!(fallback_text(&n).chars().count() <= MAX_FALLBACK_TEXT);
    }

    #[test]
    fn text_from_argo_cd_cannot_inject_slack_markup() {
        let mut n = notification(Action::Open);
        n.incidents[0].summary = "<!channel> & <https://evil.example|click>".into();

        let b = blocks(&n, None);

        let section = b[1]["text"]["text"].as_str().unwrap();
        assert!(
            section.contains("&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;"),
            "{section}"
        );
        assert!(!fallback_text(&n).contains("<!channel>"));
    }

    #[tokio::test]
    async fn a_template_becomes_the_text_and_the_message_body() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(HOOK_PATH))
            .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
            .expect(1)
            .mount(&server)
            .await;
        let settings = SlackSettings {
            webhook_url: Some(SecretString::from(format!("{}{HOOK_PATH}", server.uri()))),
            token: None,
            channel: None,
            api_url: server.uri(),
        };
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
}
