//! Receivers: one module per integration behind one trait, [`Receiver`], built from settings by [`build_all`].
//! A receiver turns a [`Notification`] into the integration's request and says, when it fails, whether retrying
//! can help ([`DeliveryError::Transient`] with an optional Retry-After) or not ([`DeliveryError::Permanent`]).
//! The status-code → retry table is shared by every HTTP receiver ([`http::classify_status`]), tested once for all.

pub mod alertmanager;
pub mod console;
pub mod email;
pub mod github;
pub mod googlechat;
pub mod http;
pub mod jira;
pub mod mattermost;
pub mod msteams;
pub mod pagerduty;
pub mod redact;
pub mod render;
pub mod slack;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
pub mod webhook;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::configuration::{ReceiverKind, ReceiverSettings, Settings};
use crate::domain::Notification;
use http::Http;

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

#[async_trait::async_trait]
pub trait Receiver: Send + Sync {
    /// Delivers one notification. `memo` is what this receiver returned last time for the same `thread_key`.
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError>;
}

/// Everything a receiver may need besides its own settings: one HTTP client (with the clock, for Retry-After
/// dates, signatures and alert lifetimes) and the whole configuration (e-mail reads `smtp`).
#[derive(Clone)]
pub struct Shared {
    pub http: Http,
    pub settings: Arc<Settings>,
}

impl Shared {
    pub fn new(settings: Arc<Settings>, clock: SharedClock) -> Self {
        let client = reqwest::Client::builder()
            .timeout(settings.outbox.http_timeout)
            .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self {
            http: Http::new(client, clock),
            settings,
        }
    }

    pub fn clock(&self) -> &SharedClock {
        self.http.clock()
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
        ReceiverKind::Console(c) => Arc::new(console::Console::new(c.clone(), r.template.clone())),
        ReceiverKind::Email(e) => Arc::new(
            email::Email::new(
                e.clone(),
                shared.settings.smtp.clone(),
                r.template.clone(),
                shared.clock().clone(),
            )
            .map_err(err)?,
        ),
        ReceiverKind::Slack(s) => Arc::new(slack::Slack::new(s.clone(), shared.http.clone(), r.template.clone())),
        ReceiverKind::Msteams(w) => Arc::new(msteams::Teams::new(w.clone(), shared.http.clone())),
        ReceiverKind::Googlechat(w) => Arc::new(googlechat::GoogleChat::new(
            w.clone(),
            shared.http.clone(),
            r.template.clone(),
        )),
        ReceiverKind::Mattermost(w) => Arc::new(mattermost::Mattermost::new(
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
