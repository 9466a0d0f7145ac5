//! The GitHub Issues receiver: one issue per incident in one repository, labelled with a label derived from the
//! fingerprint (`herald:<16 hex of sha256>`) so it is found again even when Herald crashed between "created" and
//! "memo stored": without a memo we always look for an open issue before we create one. Updates comment; resolve
//! comments and closes the issue as completed. Primary and secondary rate limits come back as transient failures
//! carrying how long to wait.
//!
//! The REST calls and the rate-limit classification are in `client`.

mod client;
mod config;
#[cfg(test)]
mod tests;

use chrono::{DateTime, Utc};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::http::Http;
use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::domain::{Action, Notification};
use crate::receivers::render;
use crate::receivers::render::truncate;
pub use config::Config;

/// GitHub's limits on issue titles and bodies.
const TITLE_MAX_CHARS: usize = 256;
const BODY_MAX_CHARS: usize = 65_000;

/// The label that finds an incident's issue again.
pub fn fingerprint_label(fingerprint: &str) -> String {
    let digest = hex::encode(Sha256::digest(fingerprint.as_bytes()));
    format!("herald:{}", &digest[..16])
}

/// What Herald remembers per thread: the issue number, and when Herald closed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct GithubMemo {
    number: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resolved_at: Option<DateTime<Utc>>,
}

pub struct Github {
    settings: Config,
    http: Http,
    /// `{api_url}/repos/{owner}/{name}`.
    repo_url: String,
    redactor: Redactor,
}

impl Github {
    pub fn new(settings: Config, http: Http) -> Self {
        let repo_url = format!(
            "{}/repos/{}",
            settings.api_url.trim_end_matches('/'),
            settings.repo.trim_matches('/')
        );
        let redactor = Redactor::default().secret(settings.token.expose_secret());
        Self {
            settings,
            http,
            repo_url,
            redactor,
        }
    }

    /// Comments on the remembered issue; `Ok(false)` when it is gone (deleted: 410, or not found: 404).
    async fn comment_remembered(&self, number: u64, n: &Notification) -> Result<bool, DeliveryError> {
        match self.comment(number, n).await {
            Ok(()) => Ok(true),
            Err(e) if matches!(e.status, Some(404 | 410)) => {
                tracing::warn!(
                    receiver = %n.receiver, issue = number,
                    "The remembered GitHub issue is gone; looking for the incident's issue by label."
                );
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Open, update, test: comment on the issue we know or find, or create one.
    async fn fire(&self, n: &Notification, label: &str, remembered: Option<u64>) -> Result<Delivered, DeliveryError> {
        if let Some(number) = remembered
            && self.comment_remembered(number, n).await?
        {
            return Ok(delivered(number, None, format!("commented on #{number}")));
        }
        if let Some(found) = self.find_open(label).await? {
            let number = found.number;
            self.comment(number, n).await?;
            return Ok(delivered(
                number,
                None,
                format!("commented on #{number} (found by label)"),
            ));
        }
        let created = self.create(n, label).await?;
        let link = created.html_url.as_deref().unwrap_or_default();
        Ok(delivered(
            created.number,
            None,
            format!("created #{} {link}", created.number).trim_end().to_string(),
        ))
    }

    /// Resolve: comment on the issue we know (or the open one we find), then close it as completed.
    async fn resolve(
        &self,
        n: &Notification,
        label: &str,
        remembered: Option<u64>,
    ) -> Result<Delivered, DeliveryError> {
        let mut number = None;
        if let Some(known) = remembered
            && self.comment_remembered(known, n).await?
        {
            number = Some(known);
        }
        let number = match number {
            Some(known) => known,
            None => {
                let Some(found) = self.find_open(label).await? else {
                    return Ok(Delivered {
                        memo: None,
                        detail: "no open GitHub issue for this incident: nothing to resolve".into(),
                    });
                };
                self.comment(found.number, n).await?;
                found.number
            }
        };
        self.close(number).await?;
        Ok(delivered(number, Some(n.created_at), format!("closed #{number}")))
    }
}

fn delivered(number: u64, resolved_at: Option<DateTime<Utc>>, detail: String) -> Delivered {
    let memo = GithubMemo { number, resolved_at };
    Delivered {
        memo: serde_json::to_value(memo).ok(),
        detail,
    }
}

/// What an issue for `n` is created with: its title and body.
pub(crate) fn preview(n: &Notification) -> (String, String) {
    (truncate(&one_line(&n.title), TITLE_MAX_CHARS), body(n))
}

fn body(n: &Notification) -> String {
    truncate(&render::markdown(n), BODY_MAX_CHARS)
}

fn one_line(s: &str) -> String {
    render::escape::one_line(s)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[async_trait::async_trait]
impl Receiver for Github {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let incident = n
            .primary()
            .ok_or_else(|| DeliveryError::permanent("github: the notification carries no incident"))?;
        let label = fingerprint_label(&incident.fingerprint);
        // A memo of an issue Herald closed says nothing about what is open now: look again by label.
        let remembered = memo
            .and_then(|m| serde_json::from_value::<GithubMemo>(m.clone()).ok())
            .filter(|m| m.resolved_at.is_none())
            .map(|m| m.number);
        match n.action {
            Action::Resolve => self.resolve(n, &label, remembered).await,
            Action::Open | Action::Update | Action::Test => self.fire(n, &label, remembered).await,
            Action::Digest => Err(crate::receivers::digest_refused("github")),
        }
    }
}
