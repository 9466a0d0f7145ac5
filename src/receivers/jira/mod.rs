//! The Jira receiver: one issue per incident, in Jira Cloud (`/rest/api/3`, Basic `user:token`, ADF description,
//! `POST /search/jql`) or Data Center (`/rest/api/2`, Bearer PAT, wiki-markup description, `POST /search`).
//!
//! The issue is found again by a label derived from the fingerprint (`herald-<16 hex of sha256>`), so a crash
//! between "issue created" and "memo stored" never opens a second issue: without a memo we always search before we
//! create. Updates comment, resolve comments then applies `resolve_transition`, and a new occurrence reopens the
//! last issue (`reopen_transition`) when it was resolved within `reopen_window` (no window: any age).
//!
//! The REST calls are in `client`; the issue text is rendered as ADF (`adf`) or wiki markup (`wiki`).

mod adf;
mod client;
mod config;
#[cfg(test)]
mod tests;
mod wiki;

use chrono::{DateTime, Utc};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::http::Http;
use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::domain::{Action, Notification};
use crate::receivers::render::truncate;
use client::{FoundIssue, Transitioned};
pub use config::{Api, Config};

/// Jira rejects longer summaries.
const SUMMARY_MAX_CHARS: usize = 255;
/// Keeps descriptions well under Jira's 32 767-character limit for text fields.
const MAX_RESOURCES: usize = 50;
const MAX_MESSAGE_CHARS: usize = 2_000;

/// The label that finds an incident's issue again: Jira labels cannot hold spaces, fingerprints can.
pub fn fingerprint_label(fingerprint: &str) -> String {
    format!("herald-{}", super::ticket::fingerprint_digest(fingerprint))
}

/// What Herald remembers per thread: the issue key, and when Herald resolved it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct JiraMemo {
    key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resolved_at: Option<DateTime<Utc>>,
}

impl JiraMemo {
    fn open(key: &str) -> Memo {
        json!({ "key": key })
    }
}

pub struct Jira {
    settings: Config,
    http: Http,
    /// `{url}/rest/api/3` or `{url}/rest/api/2`.
    base: String,
    redactor: Redactor,
}

impl Jira {
    pub fn new(settings: Config, http: Http) -> Self {
        let version = match settings.api {
            Api::Cloud => 3,
            Api::Datacenter => 2,
        };
        let base = format!("{}/rest/api/{version}", settings.url.trim_end_matches('/'));
        // The token, and the Basic form it travels in, should a server echo either back.
        let token = settings.token.expose_secret();
        let redactor = match &settings.user {
            Some(user) => Redactor::default().basic(user, token),
            None => Redactor::default().secret(token),
        };
        Self {
            settings,
            http,
            base,
            redactor,
        }
    }

    fn cloud(&self) -> bool {
        self.settings.api == Api::Cloud
    }

    fn within_reopen_window(&self, issue: &FoundIssue, now: DateTime<Utc>) -> bool {
        let Some(window) = self.settings.reopen_window else {
            return true;
        };
        let Some(resolved_at) = issue.resolved_at() else {
            return false;
        };
        // A resolution "in the future" (clock skew) is as recent as it gets.
        (now - resolved_at).to_std().map(|age| age <= window).unwrap_or(true)
    }

    /// Open, update, test: comment on the issue we know or find, reopen a recent one, or create one.
    async fn fire(
        &self,
        n: &Notification,
        label: &str,
        remembered: Option<String>,
    ) -> Result<Delivered, DeliveryError> {
        if let Some(key) = remembered {
            match self.comment(&key, n).await {
                Ok(()) => {
                    return Ok(delivered(JiraMemo::open(&key), format!("commented on {key}")));
                }
                Err(e) if e.status == Some(404) => tracing::warn!(
                    receiver = %n.receiver, issue = %key,
                    "The remembered Jira issue is gone; looking for the incident's issue by label."
                ),
                Err(e) => return Err(e.into()),
            }
        }
        let found = self.search(label).await?;
        if let Some(open) = found.iter().find(|i| !i.is_resolved()) {
            self.comment(&open.key, n).await?;
            let key = &open.key;
            return Ok(delivered(
                JiraMemo::open(key),
                format!("commented on {key} (found by label)"),
            ));
        }
        if let (Some(latest), Some(reopen)) = (found.first(), &self.settings.reopen_transition)
            && self.within_reopen_window(latest, n.created_at)
        {
            let key = &latest.key;
            match self.transition(key, reopen).await? {
                Transitioned::Applied(name) => {
                    self.comment(key, n).await?;
                    return Ok(delivered(JiraMemo::open(key), format!("reopened {key} ({name})")));
                }
                // A missing incident ticket is worse than a second one: create, and say why.
                Transitioned::Unavailable(names) => tracing::warn!(
                    receiver = %n.receiver, issue = %key, transition = %reopen, available = %names,
                    "The reopen transition is not available on the last Jira issue; creating a new one."
                ),
            }
        }
        let key = self.create(n, label).await?;
        Ok(delivered(JiraMemo::open(&key), format!("created {key}")))
    }

    /// Comments on the incident's issue: the one we know, else the open one found by its label. Its key, and whether
    /// it was found by label; `None` when there is no such issue.
    async fn comment_on_issue(
        &self,
        n: &Notification,
        label: &str,
        remembered: Option<String>,
    ) -> Result<Option<(String, bool)>, DeliveryError> {
        if let Some(key) = remembered {
            match self.comment(&key, n).await {
                Ok(()) => return Ok(Some((key, false))),
                Err(e) if e.status == Some(404) => tracing::warn!(
                    receiver = %n.receiver, issue = %key,
                    "The remembered Jira issue is gone; looking for the incident's issue by label."
                ),
                Err(e) => return Err(e.into()),
            }
        }
        let found = self.search(label).await?;
        let Some(open) = found.into_iter().find(|i| !i.is_resolved()) else {
            return Ok(None);
        };
        self.comment(&open.key, n).await?;
        Ok(Some((open.key, true)))
    }

    /// Acknowledge: comment on the issue we know (or the open one we find); never reopen or create one.
    async fn acknowledge(
        &self,
        n: &Notification,
        label: &str,
        remembered: Option<String>,
    ) -> Result<Delivered, DeliveryError> {
        Ok(match self.comment_on_issue(n, label, remembered).await? {
            Some((key, by_label)) => {
                let how = if by_label { " (found by label)" } else { "" };
                delivered(JiraMemo::open(&key), format!("commented on {key}{how}"))
            }
            None => Delivered {
                memo: None,
                detail: "no open Jira issue for this incident: nothing to comment on".into(),
            },
        })
    }

    /// Resolve: comment on the issue we know (or the open one we find), then apply `resolve_transition`.
    async fn resolve(
        &self,
        n: &Notification,
        label: &str,
        remembered: Option<String>,
    ) -> Result<Delivered, DeliveryError> {
        let Some((key, _)) = self.comment_on_issue(n, label, remembered).await? else {
            return Ok(Delivered {
                memo: None,
                detail: "no open Jira issue for this incident: nothing to resolve".into(),
            });
        };
        let detail = match &self.settings.resolve_transition {
            None => format!("commented on {key}"),
            Some(wanted) => match self.transition(&key, wanted).await? {
                Transitioned::Applied(name) => format!("resolved {key} ({name})"),
                Transitioned::Unavailable(_) if self.already_done(&key).await? => {
                    format!("commented on {key} (already resolved)")
                }
                Transitioned::Unavailable(names) => {
                    return Err(DeliveryError::permanent(format!(
                        "jira resolve {key}: transition \"{wanted}\" is not available; available transitions: {names}"
                    )));
                }
            },
        };
        let memo = JiraMemo {
            key,
            resolved_at: Some(n.created_at),
        };
        let memo = serde_json::to_value(&memo).map_err(|e| DeliveryError::permanent(e.to_string()))?;
        Ok(delivered(memo, detail))
    }

    /// The issue description (and comment body): ADF on Cloud, wiki markup on Data Center.
    fn document(&self, n: &Notification) -> Value {
        if self.cloud() {
            adf::document(n)
        } else {
            Value::String(wiki::wiki(n))
        }
    }
}

/// What an issue for `n` is created with: its summary, the Cloud (ADF) and the Data Center (wiki) description.
pub(crate) fn preview(n: &Notification) -> (String, Value, String) {
    (summary(&n.ticket_title()), adf::document(n), wiki::wiki(n))
}

fn delivered(memo: Memo, detail: String) -> Delivered {
    Delivered {
        memo: Some(memo),
        detail,
    }
}

/// One line, at most 255 characters.
fn summary(title: &str) -> String {
    truncate(&super::ticket::one_line(title), SUMMARY_MAX_CHARS)
}

#[async_trait::async_trait]
impl Receiver for Jira {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let incident = super::primary_incident(n, "jira")?;
        let label = fingerprint_label(&incident.fingerprint);
        // A memo of an issue Herald resolved says nothing about what is open now: look again by label.
        let remembered = memo
            .and_then(|m| serde_json::from_value::<JiraMemo>(m.clone()).ok())
            .filter(|m| m.resolved_at.is_none())
            .map(|m| m.key);
        match n.action {
            Action::Resolve => self.resolve(n, &label, remembered).await,
            Action::Open | Action::Update | Action::Test => self.fire(n, &label, remembered).await,
            Action::Acknowledge => self.acknowledge(n, &label, remembered).await,
            Action::Digest => return Err(crate::receivers::digest_refused("jira")),
        }
    }
}
