//! Receivers: one module per integration behind one trait, [`Receiver`], built from settings by [`build_all`].
//! A receiver turns a [`Notification`] into the integration's request and says, when it fails, whether retrying
//! can help ([`DeliveryError::Transient`] with an optional Retry-After) or not ([`DeliveryError::Permanent`]).
//! The status-code → retry table lives here ([`classify_status`]) and is tested once for all.

pub mod alertmanager;
pub mod chat;
pub mod console;
pub mod email;
pub mod github;
pub mod jira;
pub mod pagerduty;
pub mod render;
pub mod slack;
pub mod webhook;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::configuration::{ReceiverKind, ReceiverSettings, Settings};
use crate::domain::Notification;

/// What the receiver keeps about a thread (a ticket key, a Slack `ts`…), stored by Herald per (receiver,
/// thread_key) and handed back on the next delivery of the same thread.
pub type Memo = serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delivered {
    /// Replaces the stored memo for this thread when `Some`.
    pub memo: Option<Memo>,
    /// Human-readable outcome ("created PAY-12", "posted ts 123.45").
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeliveryError {
    /// Retrying can help (5xx, 429, timeouts, connection errors). `retry_after` is the receiver's own ask.
    #[error("temporary failure: {reason}")]
    Transient {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// Retrying cannot help (4xx, invalid payload, bad credentials): the row goes dead at once.
    #[error("permanent failure: {reason}")]
    Permanent { reason: String },
}

impl DeliveryError {
    pub fn transient(reason: impl Into<String>) -> Self {
        Self::Transient {
            reason: reason.into(),
            retry_after: None,
        }
    }
    pub fn permanent(reason: impl Into<String>) -> Self {
        Self::Permanent { reason: reason.into() }
    }
}

impl DeliveryError {
    /// The same failure with its reason rewritten (a prefix, secrets removed); the retry decision is kept.
    pub fn map_reason(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            DeliveryError::Transient { reason, retry_after } => DeliveryError::Transient {
                reason: f(reason),
                retry_after,
            },
            DeliveryError::Permanent { reason } => DeliveryError::Permanent { reason: f(reason) },
        }
    }

    /// Says which receiver and operation failed: `"{who}: {reason}"`.
    pub fn prefixed(who: &str, e: DeliveryError) -> Self {
        e.map_reason(|reason| format!("{who}: {reason}"))
    }
}

/// Removes secrets from error reasons: a webhook URL carries its secret in the path or the query, and a
/// downstream may echo any of it back in an error body.
#[derive(Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// The whole URL, its path and query, and its last path segment and query values when long enough to be a key
    /// (short ones such as `invoke` or `1` are words, not secrets).
    pub fn url(mut self, raw: &str) -> Self {
        const KEY_LEN: usize = 16;
        self.secrets.push(raw.to_string());
        if let Ok(u) = url::Url::parse(raw) {
            if u.path().len() > 1 {
                self.secrets.push(u.path().to_string());
            }
            if let Some(q) = u.query() {
                self.secrets.push(q.to_string());
            }
            if let Some(last) = u.path_segments().and_then(|mut s| s.next_back())
                && last.len() >= KEY_LEN
            {
                self.secrets.push(last.to_string());
            }
            for (_, v) in u.query_pairs() {
                if v.len() >= KEY_LEN {
                    self.secrets.push(v.into_owned());
                }
            }
        }
        self
    }

    pub fn secret(mut self, s: &str) -> Self {
        self.secrets.push(s.to_string());
        self
    }

    pub fn scrub(&self, reason: &str) -> String {
        let mut out = reason.to_string();
        let mut secrets: Vec<&String> = self.secrets.iter().filter(|s| s.len() >= 6).collect();
        // Longest first, so a URL is replaced whole rather than leaving its host around a redacted path.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        for s in secrets {
            out = out.replace(s.as_str(), "[redacted]");
        }
        out
    }

    pub fn apply(&self, e: DeliveryError) -> DeliveryError {
        e.map_reason(|reason| self.scrub(&reason))
    }
}

#[async_trait::async_trait]
pub trait Receiver: Send + Sync {
    /// Delivers one notification. `memo` is what this receiver returned last time for the same `thread_key`.
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError>;
}

/// The one status-code → retry table: 408, 425, 429 and 5xx (but 501) are worth retrying; other 4xx are not.
pub fn classify_status(status: u16, retry_after: Option<Duration>, body: &str) -> DeliveryError {
    let snippet: String = body.chars().take(300).collect();
    let reason = if snippet.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {snippet}")
    };
    match status {
        408 | 425 | 429 => DeliveryError::Transient { reason, retry_after },
        501 => DeliveryError::Permanent { reason },
        500..=599 => DeliveryError::Transient { reason, retry_after },
        _ => DeliveryError::Permanent { reason },
    }
}

/// `Retry-After` in seconds or as an HTTP date.
pub fn parse_retry_after(value: Option<&str>, now: std::time::SystemTime) -> Option<Duration> {
    let v = value?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

pub fn retry_after_header(resp: &reqwest::Response) -> Option<Duration> {
    parse_retry_after(
        resp.headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()),
        std::time::SystemTime::now(),
    )
}

/// Maps a reqwest transport error (no response) to a transient failure, without the URL (it may hold a key).
pub fn transport_error(e: reqwest::Error) -> DeliveryError {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    DeliveryError::transient(format!("{kind}: {}", e.without_url()))
}

/// Reads a failed response into the shared classification.
pub async fn error_from_response(resp: reqwest::Response) -> DeliveryError {
    let status = resp.status().as_u16();
    let retry_after = retry_after_header(&resp);
    let body = resp.text().await.unwrap_or_default();
    classify_status(status, retry_after, &body)
}

/// Everything a receiver may need besides its own settings.
#[derive(Clone)]
pub struct Shared {
    pub http: reqwest::Client,
    pub settings: Arc<Settings>,
}

impl Shared {
    pub fn new(settings: Arc<Settings>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(settings.outbox.http_timeout)
            .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self { http, settings }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("receivers[{name}]: {message}")]
pub struct BuildError {
    pub name: String,
    pub message: String,
}

pub fn build(r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, BuildError> {
    let err = |message: String| BuildError {
        name: r.name.clone(),
        message,
    };
    let receiver: Arc<dyn Receiver> = match &r.kind {
        ReceiverKind::Console(c) => Arc::new(
            console::Console::new(c.clone(), r.template.clone())
                .json_lines(shared.settings.log.format == crate::configuration::LogFormat::Json),
        ),
        ReceiverKind::Email(e) => {
            Arc::new(email::Email::new(e.clone(), shared.settings.smtp.clone(), r.template.clone()).map_err(err)?)
        }
        ReceiverKind::Slack(s) => Arc::new(slack::Slack::new(s.clone(), shared.http.clone(), r.template.clone())),
        ReceiverKind::Msteams(w) => Arc::new(chat::Teams::new(w.clone(), shared.http.clone())),
        ReceiverKind::Googlechat(w) => Arc::new(chat::GoogleChat::new(
            w.clone(),
            shared.http.clone(),
            r.template.clone(),
        )),
        ReceiverKind::Mattermost(w) => Arc::new(chat::Mattermost::new(
            w.clone(),
            shared.http.clone(),
            r.template.clone(),
        )),
        ReceiverKind::Webhook(w) => Arc::new(webhook::Webhook::new(w.clone(), shared.http.clone())),
        ReceiverKind::Jira(j) => Arc::new(jira::Jira::new(j.clone(), shared.http.clone())),
        ReceiverKind::Github(g) => Arc::new(github::Github::new(g.clone(), shared.http.clone())),
        ReceiverKind::Pagerduty(p) => Arc::new(pagerduty::PagerDuty::new(p.clone(), shared.http.clone())),
        ReceiverKind::Alertmanager(a) => Arc::new(alertmanager::Alertmanager::new(a.clone(), shared.http.clone())),
    };
    Ok(receiver)
}

/// Builds every configured receiver, by name.
pub fn build_all(shared: &Shared) -> Result<HashMap<String, Arc<dyn Receiver>>, BuildError> {
    let mut out = HashMap::new();
    for r in &shared.settings.receivers {
        out.insert(r.name.clone(), build(r, shared)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_table() {
        let cases = [
            (400, false),
            (401, false),
            (403, false),
            (404, false),
            (408, true),
            (410, false),
            (422, false),
            (429, true),
            (500, true),
            (501, false),
            (502, true),
            (503, true),
            (504, true),
        ];
        for (status, transient) in cases {
            let e = classify_status(status, None, "");
            assert_eq!(
                matches!(e, DeliveryError::Transient { .. }),
                transient,
                "status {status}"
            );
        }
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(parse_retry_after(Some("7"), now), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(parse_retry_after(Some(&later), now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after(Some("soon"), now), None);
        assert_eq!(parse_retry_after(None, now), None);
    }
}
