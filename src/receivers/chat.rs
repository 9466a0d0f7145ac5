//! Chat receivers behind one incoming-webhook URL: Microsoft Teams (Workflows webhook, Adaptive Card 1.4), Google
//! Chat (text messages threaded by the notification's `thread_key`) and Mattermost (Slack-compatible webhook,
//! Markdown). None of them can edit an earlier message, so each action is a new message.
//! Also owns [`Redactor`], which keeps webhook-URL secrets and tokens out of error strings (Slack uses it too).

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::{Delivered, DeliveryError, Memo, Receiver, error_from_response, transport_error};
use crate::configuration::WebhookUrlSettings;
use crate::notify::{Action, IncidentView, Notification, render};

/// Removes secrets from error reasons: a webhook URL carries its secret in the path or the query, and a
/// downstream may echo any of it back in an error body.
#[derive(Default)]
pub(crate) struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// The whole URL, its path and query, and its last path segment and query values when long enough to be a key
    /// (short ones such as `invoke` or `1` are words, not secrets).
    pub(crate) fn url(mut self, raw: &str) -> Self {
        const KEY_LEN: usize = 16;
        self.secrets.push(raw.to_string());
        if let Ok(u) = url::Url::parse(raw) {
            if u.path().len() > 1 {
                self.secrets.push(u.path().to_string());
            }
            if let Some(q) = u.query() {
                self.secrets.push(q.to_string());
            }
            if let Some(last) = u.path_segments().and_then(|mut s| s.next_back()) {
                if last.len() >= KEY_LEN {
                    self.secrets.push(last.to_string());
                }
            }
            for (_, v) in u.query_pairs() {
                if v.len() >= KEY_LEN {
                    self.secrets.push(v.into_owned());
                }
            }
        }
        self
    }

    pub(crate) fn secret(mut self, s: &str) -> Self {
        self.secrets.push(s.to_string());
        self
    }

    fn scrub(&self, reason: &str) -> String {
        let mut out = reason.to_string();
        let mut secrets: Vec<&String> = self.secrets.iter().filter(|s| s.len() >= 6).collect();
        // Longest first, so a URL is replaced whole rather than leaving its host around a redacted path.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        for s in secrets {
            out = out.replace(s.as_str(), "[redacted]");
        }
        out
    }

    pub(crate) fn apply(&self, e: DeliveryError) -> DeliveryError {
        match e {
            DeliveryError::Transient {
                reason,
                retry_after,
            } => DeliveryError::Transient {
                reason: self.scrub(&reason),
                retry_after,
            },
            DeliveryError::Permanent { reason } => DeliveryError::Permanent {
                reason: self.scrub(&reason),
            },
        }
    }
}

/// A coloured marker for titles, so the state reads at a glance in a channel.
pub(crate) fn status_emoji(n: &Notification) -> &'static str {
    match n.action {
        Action::Resolve => "✅",
        Action::Test => "🧪",
        Action::Open | Action::Update => match n.highest_severity() {
            "critical" => "🔴",
            "warning" => "🟠",
            _ => "🔵",
        },
    }
}

/// Cuts `s` to at most `max` characters, marking the cut with an ellipsis.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn render_template(
    template: Option<&str>,
    n: &Notification,
) -> Result<Option<String>, DeliveryError> {
    template
        .map(|t| {
            render::with_template(t, n)
                .map_err(|e| DeliveryError::permanent(format!("template: {e}")))
        })
        .transpose()
}

/// POSTs a JSON body to a webhook URL; any 2xx is success and its body is returned. Failures go through the
/// shared status table, with the URL's secrets removed.
async fn post_json(
    http: &reqwest::Client,
    url: &str,
    body: &Value,
    redactor: &Redactor,
    who: &str,
) -> Result<String, DeliveryError> {
    let resp = http
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| redactor.apply(transport_error(e)))?;
    if !resp.status().is_success() {
        let e = error_from_response(resp).await;
        return Err(redactor.apply(prefix(who, e)));
    }
    Ok(resp.text().await.unwrap_or_default())
}

/// Names the receiver (and method) in a failure's reason.
pub(crate) fn prefix(who: &str, e: DeliveryError) -> DeliveryError {
    match e {
        DeliveryError::Transient {
            reason,
            retry_after,
        } => DeliveryError::Transient {
            reason: format!("{who}: {reason}"),
            retry_after,
        },
        DeliveryError::Permanent { reason } => DeliveryError::Permanent {
            reason: format!("{who}: {reason}"),
        },
    }
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
    http: reqwest::Client,
    redactor: Redactor,
}

impl Teams {
    pub fn new(settings: WebhookUrlSettings, http: reqwest::Client) -> Self {
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
            "critical" => "Attention",
            "warning" => "Warning",
            _ => "Accent",
        },
    }
}

fn teams_incident(i: &IncidentView) -> Value {
    let mut items = vec![json!({
        "type": "TextBlock",
        "text": truncate(&format!("[{}] {}", i.state.to_uppercase(), i.summary), TEAMS_MAX_TEXT),
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
        if let Some(u) = &i.app_url {
            if actions.len() < TEAMS_MAX_ACTIONS && !actions.iter().any(|a| a["url"] == u.as_str())
            {
                actions.push(json!({
                    "type": "Action.OpenUrl",
                    "title": truncate(&format!("Open {} in Argo CD", i.app_name), 100),
                    "url": u,
                }));
            }
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
    async fn deliver(
        &self,
        n: &Notification,
        _memo: Option<&Memo>,
    ) -> Result<Delivered, DeliveryError> {
        // Workflows answers 202 (accepted) in general, 200 for some flows: both are success.
        post_json(
            &self.http,
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
    http: reqwest::Client,
    template: Option<String>,
    redactor: Redactor,
}

impl GoogleChat {
    pub fn new(
        settings: WebhookUrlSettings,
        http: reqwest::Client,
        template: Option<String>,
    ) -> Self {
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
    let mut s = format!(
        "{} *{}: {}*\n",
        status_emoji(n),
        render::status_word(n),
        n.title
    );
    if !n.reason.is_empty() {
        s.push_str(&format!("_{}_\n", n.reason));
    }
    for i in &n.incidents {
        s.push_str(&format!("\n*[{}] {}*\n", i.state.to_uppercase(), i.summary));
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
    async fn deliver(
        &self,
        n: &Notification,
        _memo: Option<&Memo>,
    ) -> Result<Delivered, DeliveryError> {
        let text =
            render_template(self.template.as_deref(), n)?.unwrap_or_else(|| google_chat_text(n));
        let thread_key = google_thread_key(&n.thread_key);
        let body = json!({
            "text": truncate(&text, GOOGLE_CHAT_MAX_TEXT),
            "thread": {"threadKey": thread_key},
        });
        post_json(
            &self.http,
            &self.url()?,
            &body,
            &self.redactor,
            "googlechat",
        )
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
    http: reqwest::Client,
    template: Option<String>,
    redactor: Redactor,
}

impl Mattermost {
    pub fn new(
        settings: WebhookUrlSettings,
        http: reqwest::Client,
        template: Option<String>,
    ) -> Self {
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
    async fn deliver(
        &self,
        n: &Notification,
        _memo: Option<&Memo>,
    ) -> Result<Delivered, DeliveryError> {
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
        post_json(
            &self.http,
            self.webhook_url.expose_secret(),
            &body,
            &self.redactor,
            "mattermost",
        )
        .await?;
        Ok(Delivered {
            memo: None,
            detail: "posted".into(),
        })
    }
}
