//! Chat receivers behind one incoming-webhook URL: Microsoft Teams (Workflows webhook, Adaptive Card 1.4), Google
//! Chat (text messages threaded by the notification's `thread_key`) and Mattermost (Slack-compatible webhook,
//! Markdown). None of them can edit an earlier message, so each action is a new message.

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::http::Http;
use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::configuration::WebhookUrlSettings;
use crate::domain::{Action, Incident, Notification};
use crate::receivers::render;

/// A coloured marker for titles, so the state reads at a glance in a channel.
pub(crate) fn status_emoji(n: &Notification) -> &'static str {
    match n.action {
        Action::Resolve => "✅",
        Action::Test => "🧪",
        Action::Open | Action::Update => match n.highest_severity() {
            crate::domain::Severity::Critical => "🔴",
            crate::domain::Severity::Warning => "🟠",
            _ => "🔵",
        },
    }
}

pub(crate) use crate::receivers::render::truncate;

fn render_template(template: Option<&str>, n: &Notification) -> Result<Option<String>, DeliveryError> {
    template
        .map(|t| render::with_template(t, n).map_err(|e| DeliveryError::permanent(format!("template: {e}"))))
        .transpose()
}

// ---------------------------------------------------------------------------------------------------------------
// Microsoft Teams
// ---------------------------------------------------------------------------------------------------------------

/// Teams messages stay well under the ~28 KB payload limit with this many incidents per card.
const TEAMS_MAX_INCIDENTS: usize = 20;
const TEAMS_MAX_ACTIONS: usize = 5;
const TEAMS_MAX_TEXT: usize = 2000;

pub struct Teams {
    webhook_url: SecretString,
    http: Http,
    redactor: Redactor,
}

impl Teams {
    pub fn new(settings: WebhookUrlSettings, http: Http) -> Self {
        let redactor = Redactor::default().url(settings.webhook_url.expose_secret());
        Self {
            webhook_url: settings.webhook_url,
            http,
            redactor,
        }
    }
}

/// Adaptive Card colour of the title: red when critical, amber when a warning, green when resolved.
fn teams_colour(n: &Notification) -> &'static str {
    match n.action {
        Action::Resolve => "Good",
        Action::Test => "Accent",
        Action::Open | Action::Update => match n.highest_severity() {
            crate::domain::Severity::Critical => "Attention",
            crate::domain::Severity::Warning => "Warning",
            _ => "Accent",
        },
    }
}

fn teams_incident(i: &Incident) -> Value {
    let mut items = vec![json!({
        "type": "TextBlock",
        "text": truncate(&format!("[{}] {}", i.state.as_str().to_uppercase(), i.summary), TEAMS_MAX_TEXT),
        "weight": "Bolder",
        "wrap": true,
    })];
    let facts: Vec<Value> = render::facts(i)
        .into_iter()
        // The Argo CD link is an action button instead.
        .filter(|(k, _)| *k != "Argo CD")
        .map(|(k, v)| json!({"title": k, "value": truncate(&v, 500)}))
        .collect();
    items.push(json!({"type": "FactSet", "facts": facts}));
    if !i.resources.is_empty() {
        let lines: Vec<String> = i
            .resources
            .iter()
            .map(|r| {
                let mut l = format!("- {} ({})", r.display(), r.status);
                if !r.message.is_empty() {
                    l.push_str(&format!(": {}", r.message.replace('\n', " ")));
                }
                l
            })
            .collect();
        items.push(json!({
            "type": "TextBlock",
            "text": truncate(&format!("**Resources**\n\n{}", lines.join("\n")), TEAMS_MAX_TEXT),
            "wrap": true,
        }));
    }
    for m in i.messages.iter().take(3) {
        items.push(json!({
            "type": "TextBlock",
            "text": truncate(m, TEAMS_MAX_TEXT),
            "isSubtle": true,
            "wrap": true,
        }));
    }
    if !i.hints.is_empty() {
        let lines: Vec<String> = i
            .hints
            .iter()
            .map(|h| format!("- **{}**: {}", h.title, h.text))
            .collect();
        items.push(json!({
            "type": "TextBlock",
            "text": truncate(&format!("**What to do**\n\n{}", lines.join("\n")), TEAMS_MAX_TEXT),
            "wrap": true,
        }));
    }
    for note in &i.notes {
        items.push(json!({
            "type": "TextBlock",
            "text": truncate(&format!("Note: {note}"), TEAMS_MAX_TEXT),
            "isSubtle": true,
            "wrap": true,
        }));
    }
    json!({"type": "Container", "separator": true, "items": items})
}

/// The Workflows webhook message: one attachment holding an Adaptive Card 1.4.
pub(crate) fn teams_message(n: &Notification) -> Value {
    let mut body = vec![json!({
        "type": "TextBlock",
        "text": truncate(&format!("{} {}: {}", status_emoji(n), render::status_word(n), n.title), 500),
        "size": "Medium",
        "weight": "Bolder",
        "color": teams_colour(n),
        "wrap": true,
    })];
    if !n.reason.is_empty() {
        body.push(json!({"type": "TextBlock", "text": truncate(&n.reason, 500), "isSubtle": true, "wrap": true}));
    }
    let shown = &n.incidents[..n.incidents.len().min(TEAMS_MAX_INCIDENTS)];
    body.extend(shown.iter().map(teams_incident));
    if n.incidents.len() > shown.len() {
        body.push(json!({
            "type": "TextBlock",
            "text": format!("…and {} more", n.incidents.len() - shown.len()),
            "isSubtle": true,
            "wrap": true,
        }));
    }
    let mut actions: Vec<Value> = Vec::new();
    for i in shown {
        if let Some(u) = &i.app_url
            && actions.len() < TEAMS_MAX_ACTIONS
            && !actions.iter().any(|a| a["url"] == u.as_str())
        {
            actions.push(json!({
                "type": "Action.OpenUrl",
                "title": truncate(&format!("Open {} in Argo CD", i.app_name), 100),
                "url": u,
            }));
        }
    }
    let mut card = json!({
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "msteams": {"width": "Full"},
        "body": body,
    });
    if !actions.is_empty() {
        card["actions"] = Value::Array(actions);
    }
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": card,
        }],
    })
}

#[async_trait::async_trait]
impl Receiver for Teams {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        // Workflows answers 202 (accepted) in general, 200 for some flows: both are success.
        self.http
            .post_json(
                self.webhook_url.expose_secret(),
                &teams_message(n),
                &self.redactor,
                "msteams",
            )
            .await?;
        Ok(Delivered {
            memo: None,
            detail: "posted an Adaptive Card".into(),
        })
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Google Chat
// ---------------------------------------------------------------------------------------------------------------

/// Google Chat refuses message text over 4,096 characters.
const GOOGLE_CHAT_MAX_TEXT: usize = 4000;
const THREAD_KEY_MAX: usize = 100;

pub struct GoogleChat {
    webhook_url: SecretString,
    http: Http,
    template: Option<String>,
    redactor: Redactor,
}

impl GoogleChat {
    pub fn new(settings: WebhookUrlSettings, http: Http, template: Option<String>) -> Self {
        let redactor = Redactor::default().url(settings.webhook_url.expose_secret());
        Self {
            webhook_url: settings.webhook_url,
            http,
            template,
            redactor,
        }
    }

    /// The webhook URL (which already carries `key` and `token`) plus the reply option that threads by key.
    fn url(&self) -> Result<String, DeliveryError> {
        let mut u = url::Url::parse(self.webhook_url.expose_secret())
            .map_err(|_| DeliveryError::permanent("googlechat: webhook_url is not a valid URL"))?;
        let kept: Vec<(String, String)> = u
            .query_pairs()
            .filter(|(k, _)| k != "messageReplyOption")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        u.query_pairs_mut()
            .clear()
            .extend_pairs(kept)
            .append_pair("messageReplyOption", "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD");
        Ok(u.into())
    }
}

/// A thread key Google Chat accepts as is: ASCII letters, digits, `-`, `_` and `.`, at most 100 characters. When
/// the key had to change, a hash of the original keeps distinct keys distinct.
pub(crate) fn google_thread_key(key: &str) -> String {
    let clean: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if clean == key && !clean.is_empty() && clean.len() <= THREAD_KEY_MAX {
        return clean;
    }
    use sha2::Digest;
    let hash = hex::encode(sha2::Sha256::digest(key.as_bytes()));
    let head: String = clean.chars().take(THREAD_KEY_MAX - 17).collect();
    format!("{head}-{}", &hash[..16])
}

/// Google Chat's own light markup: `*bold*`, `_italic_`, `` `code` ``, `<url|label>`.
pub(crate) fn google_chat_text(n: &Notification) -> String {
    let mut s = format!("{} *{}: {}*\n", status_emoji(n), render::status_word(n), n.title);
    if !n.reason.is_empty() {
        s.push_str(&format!("_{}_\n", n.reason));
    }
    for i in &n.incidents {
        s.push_str(&format!("\n*[{}] {}*\n", i.state.as_str().to_uppercase(), i.summary));
        for (k, v) in render::facts(i) {
            if k == "Argo CD" {
                s.push_str(&format!("{k}: <{v}|open {}>\n", i.app_name));
            } else {
                s.push_str(&format!("{k}: `{v}`\n"));
            }
        }
        if !i.resources.is_empty() {
            s.push_str("Resources:\n");
            for r in &i.resources {
                s.push_str(&format!("• `{}` ({})", r.display(), r.status));
                if !r.message.is_empty() {
                    s.push_str(&format!(": {}", r.message.replace('\n', " ")));
                }
                s.push('\n');
            }
        }
        for m in &i.messages {
            s.push_str(&format!("> {}\n", m.replace('\n', " ")));
        }
        if !i.hints.is_empty() {
            s.push_str("*What to do*\n");
            for h in &i.hints {
                s.push_str(&format!("• *{}*: {}\n", h.title, h.text));
            }
        }
        for note in &i.notes {
            s.push_str(&format!("_Note: {note}_\n"));
        }
    }
    s
}

#[async_trait::async_trait]
impl Receiver for GoogleChat {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let text = render_template(self.template.as_deref(), n)?.unwrap_or_else(|| google_chat_text(n));
        let thread_key = google_thread_key(&n.thread_key);
        let body = json!({
            "text": truncate(&text, GOOGLE_CHAT_MAX_TEXT),
            "thread": {"threadKey": thread_key},
        });
        self.http
            .post_json(&self.url()?, &body, &self.redactor, "googlechat")
            .await?;
        Ok(Delivered {
            memo: None,
            detail: format!("posted in thread {thread_key}"),
        })
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Mattermost
// ---------------------------------------------------------------------------------------------------------------

/// Mattermost's default maximum post size is 16,383 characters.
const MATTERMOST_MAX_TEXT: usize = 16000;

pub struct Mattermost {
    webhook_url: SecretString,
    http: Http,
    template: Option<String>,
    redactor: Redactor,
}

impl Mattermost {
    pub fn new(settings: WebhookUrlSettings, http: Http, template: Option<String>) -> Self {
        let redactor = Redactor::default().url(settings.webhook_url.expose_secret());
        Self {
            webhook_url: settings.webhook_url,
            http,
            template,
            redactor,
        }
    }
}

#[async_trait::async_trait]
impl Receiver for Mattermost {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let text = match render_template(self.template.as_deref(), n)? {
            Some(t) => t,
            None => format!(
                "{} **{}**\n{}",
                status_emoji(n),
                render::status_word(n),
                render::markdown(n)
            ),
        };
        let body = json!({"text": truncate(&text, MATTERMOST_MAX_TEXT)});
        self.http
            .post_json(self.webhook_url.expose_secret(), &body, &self.redactor, "mattermost")
            .await?;
        Ok(Delivered {
            memo: None,
            detail: "posted".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::TimeZone;
    use wiremock::matchers::{method, path, query_param};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::domain::{Hint, ResourceRef};
    use crate::receivers::testing;

    const TEAMS_PATH: &str = "/workflows/abc123/triggers/manual/paths/invoke";
    const TEAMS_SIG: &str = "teamsSignatureSecretValue0123456789";
    const GCHAT_PATH: &str = "/v1/spaces/AAAAspace/messages";
    const GCHAT_KEY: &str = "AIzaSyGoogleChatKeySecret0123";
    const GCHAT_TOKEN: &str = "googleChatTokenSecret0123456789";
    const MM_PATH: &str = "/hooks/mattermosthooksecret0123456";

    fn notification(action: Action) -> Notification {
        let incident = Incident {
            fingerprint: "fp-1".into(),
            kind: crate::domain::Kind::Degraded,
            severity: crate::domain::Severity::Critical,
            state: if action == Action::Resolve {
                crate::domain::IncidentState::Resolved
            } else {
                crate::domain::IncidentState::Firing
            },
            summary: "payments is Degraded".into(),
            app_namespace: "argocd".into(),
            app_name: "payments".into(),
            project: "default".into(),
            team: "payments".into(),
            destination_cluster: "in-cluster".into(),
            destination_namespace: "payments".into(),
            app_url: Some("https://argocd.example.com/applications/argocd/payments".into()),
            since: chrono::Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).unwrap(),
            resources: vec![ResourceRef {
                kind: "Deployment".into(),
                namespace: "payments".into(),
                name: "api".into(),
                status: "Degraded".into(),
                message: "exceeded its progress deadline".into(),
            }],
            hints: vec![Hint {
                id: "rollout".into(),
                title: "Check the rollout".into(),
                text: "kubectl -n payments rollout status deploy/api".into(),
            }],
            ..Default::default()
        };
        Notification {
            receiver: "team-chat".into(),
            action,
            thread_key: "group:payments/prod".into(),
            title: "payments is Degraded".into(),
            reason: "fired".into(),
            incidents: vec![incident],
            created_at: chrono::Utc.with_ymd_and_hms(2026, 11, 30, 10, 5, 0).unwrap(),
        }
    }

    fn settings(url: String) -> WebhookUrlSettings {
        WebhookUrlSettings {
            webhook_url: SecretString::from(url),
        }
    }

    fn teams(server: &MockServer) -> Teams {
        let url = format!(
            "{}{TEAMS_PATH}?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sig={TEAMS_SIG}",
            server.uri()
        );
        Teams::new(settings(url), testing::http())
    }

    fn google_chat(server: &MockServer, template: Option<String>) -> GoogleChat {
        let url = format!("{}{GCHAT_PATH}?key={GCHAT_KEY}&token={GCHAT_TOKEN}", server.uri());
        GoogleChat::new(settings(url), testing::http(), template)
    }

    fn mattermost(server: &MockServer, template: Option<String>) -> Mattermost {
        Mattermost::new(
            settings(format!("{}{MM_PATH}", server.uri())),
            testing::http(),
            template,
        )
    }

    async fn received(server: &MockServer) -> Vec<wiremock::Request> {
        server.received_requests().await.unwrap()
    }

    fn json_body(r: &wiremock::Request) -> Value {
        serde_json::from_slice(&r.body).unwrap()
    }

    fn assert_no_secret(e: &DeliveryError) {
        let s = e.to_string();
        for secret in [TEAMS_PATH, TEAMS_SIG, GCHAT_PATH, GCHAT_KEY, GCHAT_TOKEN, MM_PATH] {
            assert!(!s.contains(secret), "{secret:?} leaked into {s:?}");
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Kind {
        Teams,
        GoogleChat,
        Mattermost,
    }

    const ALL: [Kind; 3] = [Kind::Teams, Kind::GoogleChat, Kind::Mattermost];

    /// Mounts one answer on any POST, delivers once and returns the failure (after checking exactly one request).
    async fn failure(kind: Kind, answer: ResponseTemplate) -> DeliveryError {
        failure_with(kind, move |_| answer).await
    }

    /// Like [`failure`], with an answer made from the receiver's own webhook URL.
    async fn failure_with(kind: Kind, answer: impl FnOnce(&str) -> ResponseTemplate) -> DeliveryError {
        let server = MockServer::start().await;
        let url = match kind {
            Kind::Teams => format!("{}{TEAMS_PATH}?api-version=1&sig={TEAMS_SIG}", server.uri()),
            Kind::GoogleChat => format!("{}{GCHAT_PATH}?key={GCHAT_KEY}&token={GCHAT_TOKEN}", server.uri()),
            Kind::Mattermost => format!("{}{MM_PATH}", server.uri()),
        };
        Mock::given(method("POST"))
            .respond_with(answer(&url))
            .expect(1)
            .mount(&server)
            .await;
        let n = notification(Action::Open);
        let http = testing::http();
        let e = match kind {
            Kind::Teams => Teams::new(settings(url), http).deliver(&n, None).await,
            Kind::GoogleChat => GoogleChat::new(settings(url), http, None).deliver(&n, None).await,
            Kind::Mattermost => Mattermost::new(settings(url), http, None).deliver(&n, None).await,
        }
        .unwrap_err();
        assert_eq!(received(&server).await.len(), 1, "{kind:?}");
        assert_no_secret(&e);
        e
    }

    #[tokio::test]
    async fn every_chat_receiver_treats_429_as_transient_with_the_retry_after_delay() {
        for kind in ALL {
            let e = failure(kind, ResponseTemplate::new(429).insert_header("Retry-After", "7")).await;
            let delay = match e {
                DeliveryError::Transient { retry_after, .. } => retry_after,
                other => panic!("{kind:?}: expected a transient failure, got {other:?}"),
            };
            assert_eq!(delay, Some(Duration::from_secs(7)), "{kind:?}");
        }
    }

    #[tokio::test]
    async fn every_chat_receiver_treats_500_as_transient() {
        for kind in ALL {
            let e = failure(kind, ResponseTemplate::new(500).set_body_string("boom")).await;
            assert!(matches!(e, DeliveryError::Transient { .. }), "{kind:?}: {e:?}");
        }
    }

    #[tokio::test]
    async fn every_chat_receiver_treats_400_as_permanent() {
        for kind in ALL {
            let e = failure(kind, ResponseTemplate::new(400).set_body_string("bad payload")).await;
            assert!(matches!(e, DeliveryError::Permanent { .. }), "{kind:?}: {e:?}");
            assert!(e.to_string().contains("bad payload"), "{kind:?}: {e}");
        }
    }

    #[tokio::test]
    async fn an_error_body_echoing_the_webhook_url_does_not_leak_it() {
        for kind in ALL {
            // The whole URL, then its path and query on their own, as a careless server might echo them.
            let e = failure_with(kind, |url| {
                let u = url::Url::parse(url).unwrap();
                let echo = format!("invalid webhook {url} (path {}, query {:?})", u.path(), u.query());
                ResponseTemplate::new(404).set_body_string(echo)
            })
            .await;
            assert!(e.to_string().contains("[redacted]"), "{kind:?}: {e}");
        }
    }

    #[tokio::test]
    async fn an_unreachable_webhook_is_transient_and_keeps_the_url_secret() {
        let n = notification(Action::Open);
        let base = "http://127.0.0.1:9";
        let t = Teams::new(settings(format!("{base}{TEAMS_PATH}?sig={TEAMS_SIG}")), testing::http());
        let g = GoogleChat::new(
            settings(format!("{base}{GCHAT_PATH}?key={GCHAT_KEY}&token={GCHAT_TOKEN}")),
            testing::http(),
            None,
        );
        let m = Mattermost::new(settings(format!("{base}{MM_PATH}")), testing::http(), None);
        for e in [
            t.deliver(&n, None).await.unwrap_err(),
            g.deliver(&n, None).await.unwrap_err(),
            m.deliver(&n, None).await.unwrap_err(),
        ] {
            assert!(matches!(e, DeliveryError::Transient { .. }), "{e:?}");
            assert_no_secret(&e);
        }
    }

    #[tokio::test]
    async fn teams_posts_an_adaptive_card_and_accepts_202() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(TEAMS_PATH))
            .and(query_param("sig", TEAMS_SIG))
            .and(query_param("api-version", "1"))
            .respond_with(ResponseTemplate::new(202))
            .expect(1)
            .mount(&server)
            .await;

        let out = teams(&server).deliver(&notification(Action::Open), None).await.unwrap();

        assert_eq!(out.memo, None);
        let reqs = received(&server).await;
        assert_eq!(reqs.len(), 1);
        let body = json_body(&reqs[0]);
        assert_eq!(body["type"], "message");
        let attachment = &body["attachments"][0];
        assert_eq!(attachment["contentType"], "application/vnd.microsoft.card.adaptive");
        let card = &attachment["content"];
        assert_eq!(card["type"], "AdaptiveCard");
        assert_eq!(card["version"], "1.4");
        let title = &card["body"][0];
        assert_eq!(title["type"], "TextBlock");
        assert_eq!(title["color"], "Attention");
        assert!(title["text"].as_str().unwrap().contains("FIRING: payments is Degraded"));
        let incident = card["body"][2]["items"].as_array().unwrap();
        let facts = incident.iter().find(|i| i["type"] == "FactSet").unwrap();
        assert!(
            facts["facts"]
                .as_array()
                .unwrap()
                .contains(&json!({"title": "Application", "value": "argocd/payments"}))
        );
        let texts: Vec<&str> = incident.iter().filter_map(|i| i["text"].as_str()).collect();
        assert!(
            texts.iter().any(|t| t.contains("Deployment/payments/api (Degraded)")),
            "{texts:?}"
        );
        assert!(
            texts
                .iter()
                .any(|t| t.contains("**What to do**") && t.contains("Check the rollout"))
        );
        assert_eq!(
            card["actions"],
            json!([{
                "type": "Action.OpenUrl",
                "title": "Open payments in Argo CD",
                "url": "https://argocd.example.com/applications/argocd/payments",
            }])
        );
    }

    #[tokio::test]
    async fn teams_resolve_is_a_new_green_card_and_200_is_success_too() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(TEAMS_PATH))
            .respond_with(ResponseTemplate::new(200))
            .expect(1)
            .mount(&server)
            .await;

        let out = teams(&server)
            .deliver(&notification(Action::Resolve), Some(&json!({"ignored": true})))
            .await
            .unwrap();

        assert_eq!(out.memo, None);
        let body = json_body(&received(&server).await[0]);
        let title = &body["attachments"][0]["content"]["body"][0];
        assert_eq!(title["color"], "Good");
        assert!(title["text"].as_str().unwrap().contains("RESOLVED"));
    }

    #[test]
    fn a_teams_card_with_many_incidents_is_capped() {
        let mut n = notification(Action::Open);
        let one = n.incidents[0].clone();
        n.incidents = (0..30)
            .map(|k| Incident {
                app_name: format!("app-{k}"),
                app_url: Some(format!("https://argocd.example.com/applications/argocd/app-{k}")),
                ..one.clone()
            })
            .collect();

        let card = &teams_message(&n)["attachments"][0]["content"];

        let body = card["body"].as_array().unwrap();
        assert_eq!(
            body.iter().filter(|b| b["type"] == "Container").count(),
            TEAMS_MAX_INCIDENTS
        );
        assert_eq!(body.last().unwrap()["text"], "…and 10 more");
        assert_eq!(card["actions"].as_array().unwrap().len(), TEAMS_MAX_ACTIONS);
    }

    #[tokio::test]
    async fn google_chat_keeps_key_and_token_and_threads_by_the_notification_key() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(GCHAT_PATH))
            .and(query_param("key", GCHAT_KEY))
            .and(query_param("token", GCHAT_TOKEN))
            .and(query_param(
                "messageReplyOption",
                "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD",
            ))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "name": "spaces/AAAAspace/messages/m1",
                "thread": {"name": "spaces/AAAAspace/threads/t1"},
            })))
            .expect(3)
            .mount(&server)
            .await;

        let chat = google_chat(&server, None);
        for action in [Action::Open, Action::Update, Action::Resolve] {
            let out = chat.deliver(&notification(action), None).await.unwrap();
            assert_eq!(out.memo, None);
        }

        let reqs = received(&server).await;
        assert_eq!(reqs.len(), 3);
        let key = google_thread_key("group:payments/prod");
        for r in &reqs {
            let body = json_body(r);
            assert_eq!(
                body["thread"]["threadKey"],
                key.as_str(),
                "updates land in the first message's thread"
            );
            let replies = r.url.query_pairs().filter(|(k, _)| k == "messageReplyOption").count();
            assert_eq!(replies, 1);
        }
        let open = json_body(&reqs[0]);
        let text = open["text"].as_str().unwrap();
        for expected in [
            "*FIRING: payments is Degraded*",
            "Application: `argocd/payments`",
            "• `Deployment/payments/api` (Degraded)",
            "*What to do*",
            "<https://argocd.example.com/applications/argocd/payments|open payments>",
        ] {
            assert!(text.contains(expected), "{expected:?} not in {text}");
        }
        assert!(json_body(&reqs[2])["text"].as_str().unwrap().contains("*RESOLVED: "));
    }

    #[tokio::test]
    async fn google_chat_replaces_a_reply_option_already_in_the_url() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(GCHAT_PATH))
            .and(query_param(
                "messageReplyOption",
                "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD",
            ))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({})))
            .expect(1)
            .mount(&server)
            .await;
        let url = format!(
            "{}{GCHAT_PATH}?key={GCHAT_KEY}&messageReplyOption=REPLY_MESSAGE_OR_FAIL&token={GCHAT_TOKEN}",
            server.uri()
        );
        let chat = GoogleChat::new(settings(url), testing::http(), None);

        chat.deliver(&notification(Action::Open), None).await.unwrap();

        let reqs = received(&server).await;
        assert_eq!(reqs.len(), 1);
        let options: Vec<String> = reqs[0]
            .url
            .query_pairs()
            .filter(|(k, _)| k == "messageReplyOption")
            .map(|(_, v)| v.into_owned())
            .collect();
        assert_eq!(options, ["REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"]);
        assert!(reqs[0].url.query_pairs().any(|(k, v)| k == "token" && v == GCHAT_TOKEN));
    }

    #[tokio::test]
    async fn google_chat_uses_the_template_as_text() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({})))
            .expect(1)
            .mount(&server)
            .await;
        let chat = google_chat(&server, Some("{{ notification.title }}!".into()));

        chat.deliver(&notification(Action::Open), None).await.unwrap();

        assert_eq!(json_body(&received(&server).await[0])["text"], "payments is Degraded!");
    }

    #[test]
    fn thread_keys_are_sanitised_short_and_still_distinct() {
        assert_eq!(google_thread_key("herald-group_1.a"), "herald-group_1.a");
        let a = google_thread_key("group:payments/prod");
        let b = google_thread_key("group:payments:prod");
        assert_ne!(a, b, "keys that sanitise alike keep distinct hashes");
        assert!(a.starts_with("group-payments-prod-"), "{a}");
        let long = google_thread_key(&"x".repeat(500));
        assert_eq!(long.len(), THREAD_KEY_MAX);
        for k in [a, b, long, google_thread_key(""), google_thread_key("ünïcödé key")] {
            assert!(!k.is_empty() && k.len() <= THREAD_KEY_MAX, "{k}");
            assert!(
                k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')),
                "{k}"
            );
        }
    }

    #[tokio::test]
    async fn mattermost_posts_markdown_text() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(MM_PATH))
            .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
            .expect(1)
            .mount(&server)
            .await;

        let out = mattermost(&server, None)
            .deliver(&notification(Action::Open), None)
            .await
            .unwrap();

        assert_eq!(out.memo, None);
        let reqs = received(&server).await;
        assert_eq!(reqs.len(), 1);
        let body = json_body(&reqs[0]);
        assert_eq!(body.as_object().unwrap().len(), 1, "only `text`: {body}");
        let text = body["text"].as_str().unwrap();
        for expected in [
            "**FIRING**",
            "### payments is Degraded",
            "| Deployment | payments | api | Degraded |",
            "**What to do**",
            "[payments](https://argocd.example.com/applications/argocd/payments)",
        ] {
            assert!(text.contains(expected), "{expected:?} not in {text}");
        }
    }

    #[tokio::test]
    async fn mattermost_uses_the_template_and_a_broken_template_is_permanent() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(MM_PATH))
            .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
            .expect(1)
            .mount(&server)
            .await;

        mattermost(
            &server,
            Some("{{ notification.reason }}: {{ notification.title }}".into()),
        )
        .deliver(&notification(Action::Open), None)
        .await
        .unwrap();
        let e = mattermost(&server, Some("{{ unclosed".into()))
            .deliver(&notification(Action::Open), None)
            .await
            .unwrap_err();

        assert!(matches!(e, DeliveryError::Permanent { .. }), "{e:?}");
        let reqs = received(&server).await;
        assert_eq!(reqs.len(), 1, "a broken template sends nothing");
        assert_eq!(json_body(&reqs[0])["text"], "fired: payments is Degraded");
    }

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate("héllo", 5), "héllo");
        assert_eq!(truncate("héllo wörld", 5), "héll…");
    }
}
