//! Receivers: one module per integration behind one trait, [`Receiver`]. A receiver turns a [`Notification`] into
//! the integration's request and says, when it fails, whether retrying can help ([`DeliveryError::Transient`] with
//! an optional Retry-After) or not ([`DeliveryError::Permanent`]).
//!
//! This module owns the registry: [`ReceiverKind`] has one variant per integration, holding that integration's own
//! settings block, and each block implements [`Integration`]: what the integration can do ([`Capabilities`]), how
//! its block is checked, and how its receiver is built. Adding a receiver is described in `docs/receivers.md`.

pub mod alertmanager;
pub mod console;
pub mod discord;
#[cfg(test)]
mod echo_tests;
pub mod email;
pub mod github;
pub mod github_status;
#[cfg(test)]
mod golden;
pub mod googlechat;
pub mod grafana;
pub mod http;
pub mod incoming_webhook;
#[cfg(test)]
mod injection_tests;
pub mod jira;
#[cfg(test)]
mod limits_tests;
pub mod matrix;
pub mod mattermost;
pub mod msteams;
pub mod pagerduty;
pub mod preview;
pub mod redact;
pub mod redmine;
pub mod render;
pub mod servicenow;
pub mod slack;
pub mod telegram;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
pub mod ticket;
pub mod webhook;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::clock::SharedClock;
use crate::configuration::{ConfigError, ReceiverSettings, Settings};
use crate::domain::{Contact, Incident, Notification};
use email::SmtpSettings;
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

/// The incident a per-incident receiver (ticket, page, alert) acts on: the notification's first; `who` names the
/// receiver in the failure when there is none.
pub fn primary_incident<'n>(n: &'n Notification, who: &str) -> Result<&'n Incident, DeliveryError> {
    n.primary()
        .ok_or_else(|| DeliveryError::permanent(format!("{who}: the notification carries no incident")))
}

/// One integration's delivery. What it can do ([`Capabilities`]) is asked of its settings block instead
/// ([`Integration::capabilities`]): the pipeline needs it before any receiver is built.
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
        let client = http::client_builder()
            .timeout(settings.outbox.http_timeout)
            .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
            .build()
            // Only a TLS backend that cannot start fails here: a default client would silently lose the timeouts and
            // the same-origin redirect policy, so Herald stops instead, saying why.
            .unwrap_or_else(|e| panic!("cannot build the HTTP client for the receivers: {e}"));
        Self {
            http: Http::new(client, clock),
            settings,
        }
    }

    pub fn clock(&self) -> &SharedClock {
        self.http.clock()
    }
}

/// What the pipeline and the outbox need to know about an integration before anything is sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capabilities {
    /// One notification per incident (one ticket, one page) rather than one per group.
    pub per_incident: bool,
    /// Whether resolves are sent when the receiver's `send_resolved` is not set.
    pub sends_resolved: bool,
    /// Messages per second at most when `rate_limit_per_second` is not set (`None`: no limit).
    pub default_rate: Option<f64>,
    /// Receives what no team claims when the default team has no receivers, so nothing is dropped silently.
    pub fallback: bool,
    /// Gets the team digests (chat, e-mail, webhooks, console); ticket and paging receivers do not.
    pub digest: bool,
    /// Can send a message to one person, to their address of this kind (`people.<username>.email`, `.slack`):
    /// the e-mail receiver, a Slack bot. `people_receivers` picks among the receivers that can.
    pub reaches_person: Option<Contact>,
    /// Sends a change event for each sync that deployed a new revision (PagerDuty with `change_events: true`).
    pub change_events: bool,
    /// Told when someone acknowledges an incident it was sent ([`crate::domain::Action::Acknowledge`]): a
    /// PagerDuty acknowledge, a comment on the ticket, the Slack bot's message edited in place.
    pub acknowledgements: bool,
    /// Takes incidents: every receiver but those told of syncs only (GitHub commit statuses, Grafana
    /// annotations), which routes, escalation steps and annotations cannot name and the teams' receiver lists
    /// only scope ([`crate::routing::change::receivers_hearing_of`]).
    pub incidents: bool,
    /// Posts a commit status for each state of a sync (`github_status`): pending, success, failure, error.
    pub commit_statuses: bool,
}

impl Capabilities {
    /// One message per group; resolves only with `send_resolved: true` (chat, e-mail, webhooks).
    pub const MESSAGES: Capabilities = Capabilities {
        per_incident: false,
        sends_resolved: false,
        default_rate: None,
        fallback: false,
        digest: true,
        reaches_person: None,
        change_events: false,
        acknowledgements: false,
        incidents: true,
        commit_statuses: false,
    };
    /// One message per group whose first message is edited to show the resolve (Slack's bot, Matrix): resolves
    /// are sent, and one message per second stays clear of the limits chat servers put on a sender.
    pub const EDITED_MESSAGES: Capabilities = Capabilities {
        per_incident: false,
        sends_resolved: true,
        default_rate: Some(1.0),
        fallback: false,
        digest: true,
        reaches_person: None,
        change_events: false,
        acknowledgements: false,
        incidents: true,
        commit_statuses: false,
    };
    /// One ticket, page or alert per incident, resolved with it.
    pub const PER_INCIDENT: Capabilities = Capabilities {
        per_incident: true,
        sends_resolved: true,
        default_rate: None,
        fallback: false,
        digest: false,
        reaches_person: None,
        change_events: false,
        acknowledgements: false,
        incidents: true,
        commit_statuses: false,
    };
    /// [`Capabilities::PER_INCIDENT`], told of acknowledgements (tickets, pages).
    pub const ACKNOWLEDGED_PER_INCIDENT: Capabilities = Capabilities {
        acknowledgements: true,
        ..Capabilities::PER_INCIDENT
    };
    /// Told of syncs, never of incidents (GitHub commit statuses, Grafana annotations): no digest, no resolve,
    /// nothing to acknowledge; which syncs is said by `change_events` or `commit_statuses`.
    pub const SYNCS_ONLY: Capabilities = Capabilities {
        per_incident: true,
        sends_resolved: false,
        default_rate: None,
        fallback: false,
        digest: false,
        reaches_person: None,
        change_events: false,
        acknowledgements: false,
        incidents: false,
        commit_statuses: false,
    };
}

/// What a receiver told of syncs only answers if it is ever handed an incident or a digest: configuration keeps
/// it out of routes, escalation steps and digests, and retrying would not change that.
pub fn incident_refused(who: &str) -> DeliveryError {
    DeliveryError::permanent(format!(
        "{who}: takes no incidents (it is told of syncs only; name it in no route or escalation step)"
    ))
}

/// What a ticket or paging receiver answers if it is ever handed a digest: it gets none (configuration refuses
/// one in `teams.<t>.digest.receivers`, and a digest carries no incident), and retrying would not change that.
pub fn digest_refused(who: &str) -> DeliveryError {
    DeliveryError::permanent(format!("{who}: a digest is not sent to ticket or paging receivers"))
}

/// An integration's settings block (`slack: {...}`, `jira: {...}`). No method has a default: an integration that
/// forgets one does not compile.
pub trait Integration {
    fn capabilities(&self) -> Capabilities;
    /// Checks the block beyond what its types say; `path` is the block's key path (`receivers[3].slack`).
    fn validate(&self, path: &str, sections: &Sections<'_>, errors: &mut Vec<ConfigError>);
    /// The receiver for this block; an error says what is wrong with the settings.
    fn build(&self, receiver: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String>;
}

/// The sections outside `receivers[]` that a receiver block may depend on.
pub struct Sections<'a> {
    pub smtp: Option<&'a SmtpSettings>,
}

/// The registry's keys without their settings: one per integration, named as in a `receivers[]` entry. What is
/// listed per integration (the previews, `--render`) is derived from [`ReceiverType::ALL`]; a test checks it against
/// [`ReceiverKind`]'s variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReceiverType {
    Console,
    Email,
    Slack,
    Msteams,
    Googlechat,
    Mattermost,
    Matrix,
    Discord,
    Telegram,
    Webhook,
    Jira,
    Github,
    Pagerduty,
    Alertmanager,
    Redmine,
    Servicenow,
    GithubStatus,
    Grafana,
}

impl ReceiverType {
    /// Every integration, in the order of [`ReceiverKind`].
    pub const ALL: [ReceiverType; 18] = [
        ReceiverType::Console,
        ReceiverType::Email,
        ReceiverType::Slack,
        ReceiverType::Msteams,
        ReceiverType::Googlechat,
        ReceiverType::Mattermost,
        ReceiverType::Matrix,
        ReceiverType::Discord,
        ReceiverType::Telegram,
        ReceiverType::Webhook,
        ReceiverType::Jira,
        ReceiverType::Github,
        ReceiverType::Pagerduty,
        ReceiverType::Alertmanager,
        ReceiverType::Redmine,
        ReceiverType::Servicenow,
        ReceiverType::GithubStatus,
        ReceiverType::Grafana,
    ];

    /// The block's key in a `receivers[]` entry (`slack`, `jira`…).
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiverType::Console => "console",
            ReceiverType::Email => "email",
            ReceiverType::Slack => "slack",
            ReceiverType::Msteams => "msteams",
            ReceiverType::Googlechat => "googlechat",
            ReceiverType::Mattermost => "mattermost",
            ReceiverType::Matrix => "matrix",
            ReceiverType::Discord => "discord",
            ReceiverType::Telegram => "telegram",
            ReceiverType::Webhook => "webhook",
            ReceiverType::Jira => "jira",
            ReceiverType::Github => "github",
            ReceiverType::Pagerduty => "pagerduty",
            ReceiverType::Alertmanager => "alertmanager",
            ReceiverType::Redmine => "redmine",
            ReceiverType::Servicenow => "servicenow",
            ReceiverType::GithubStatus => "github_status",
            ReceiverType::Grafana => "grafana",
        }
    }

    pub fn parse(s: &str) -> Option<ReceiverType> {
        ReceiverType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl std::fmt::Display for ReceiverType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The registry: one variant per integration, named by its key in a `receivers[]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReceiverKind {
    Console(console::Config),
    Email(email::Config),
    Slack(slack::Config),
    Msteams(msteams::Config),
    Googlechat(googlechat::Config),
    Mattermost(mattermost::Config),
    Matrix(matrix::Config),
    Discord(discord::Config),
    Telegram(telegram::Config),
    Webhook(webhook::Config),
    Jira(jira::Config),
    Github(github::Config),
    Pagerduty(pagerduty::Config),
    Alertmanager(alertmanager::Config),
    Redmine(redmine::Config),
    Servicenow(servicenow::Config),
    #[serde(rename = "github_status")]
    GithubStatus(github_status::Config),
    Grafana(grafana::Config),
}

impl ReceiverKind {
    /// The registry's one match: each variant's type and its block. Everything else about an integration is
    /// asked of the block ([`Integration`]), so a new variant is complete once this arm compiles.
    fn entry(&self) -> (ReceiverType, &dyn Integration) {
        match self {
            ReceiverKind::Console(c) => (ReceiverType::Console, c),
            ReceiverKind::Email(c) => (ReceiverType::Email, c),
            ReceiverKind::Slack(c) => (ReceiverType::Slack, c),
            ReceiverKind::Msteams(c) => (ReceiverType::Msteams, c),
            ReceiverKind::Googlechat(c) => (ReceiverType::Googlechat, c),
            ReceiverKind::Mattermost(c) => (ReceiverType::Mattermost, c),
            ReceiverKind::Matrix(c) => (ReceiverType::Matrix, c),
            ReceiverKind::Discord(c) => (ReceiverType::Discord, c),
            ReceiverKind::Telegram(c) => (ReceiverType::Telegram, c),
            ReceiverKind::Webhook(c) => (ReceiverType::Webhook, c),
            ReceiverKind::Jira(c) => (ReceiverType::Jira, c),
            ReceiverKind::Github(c) => (ReceiverType::Github, c),
            ReceiverKind::Pagerduty(c) => (ReceiverType::Pagerduty, c),
            ReceiverKind::Alertmanager(c) => (ReceiverType::Alertmanager, c),
            ReceiverKind::Redmine(c) => (ReceiverType::Redmine, c),
            ReceiverKind::Servicenow(c) => (ReceiverType::Servicenow, c),
            ReceiverKind::GithubStatus(c) => (ReceiverType::GithubStatus, c),
            ReceiverKind::Grafana(c) => (ReceiverType::Grafana, c),
        }
    }

    pub fn receiver_type(&self) -> ReceiverType {
        self.entry().0
    }

    /// The block's key in a `receivers[]` entry (`slack`, `jira`…).
    pub fn type_name(&self) -> &'static str {
        self.receiver_type().as_str()
    }

    pub fn integration(&self) -> &dyn Integration {
        self.entry().1
    }

    pub fn capabilities(&self) -> Capabilities {
        self.integration().capabilities()
    }

    /// The host whose repositories a commit-status receiver posts to (`github.com`, a GitHub Enterprise host);
    /// `None` for every other receiver.
    pub fn commit_status_host(&self) -> Option<String> {
        match self {
            ReceiverKind::GithubStatus(c) => Some(c.repo_host()),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("receivers[{name}]: {message}")]
pub struct BuildError {
    pub name: String,
    pub message: String,
}

/// The receiver `r` describes, seeing only safe links ([`LinksChecked`]).
pub fn build(r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, BuildError> {
    match r.kind.integration().build(r, shared) {
        Ok(inner) => Ok(Arc::new(LinksChecked(inner))),
        Err(message) => Err(BuildError {
            name: r.name.clone(),
            message,
        }),
    }
}

/// A receiver handed every notification with its unsafe links removed ([`crate::domain::link::checked`]): a
/// link reaches a target only as an http(s) URL written back from its parse, whatever the rendering or template.
struct LinksChecked(Arc<dyn Receiver>);

#[async_trait::async_trait]
impl Receiver for LinksChecked {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        self.0.deliver(&crate::domain::link::checked(n), memo).await
    }
}

/// Builds every configured receiver, by name.
pub fn build_all(shared: &Shared) -> Result<HashMap<String, Arc<dyn Receiver>>, BuildError> {
    let mut out = HashMap::new();
    for r in &shared.settings.receivers {
        out.insert(r.name.clone(), build(r, shared)?);
    }
    Ok(out)
}
