//! The GitHub Issues receiver: one issue per incident in one repository, labelled with a label derived from the
//! fingerprint (`herald:<16 hex of sha256>`) so it is found again even when Herald crashed between "created" and
//! "memo stored": without a memo we always look for an open issue before we create one. Updates comment; resolve
//! comments and closes the issue as completed. Primary and secondary rate limits come back as transient failures
//! carrying how long to wait.
//!
//! The REST calls and the rate-limit classification are in `client`; the lifecycle is the tickets' shared one
//! (`receivers::ticket`).

mod client;
mod config;
#[cfg(test)]
mod tests;

use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use super::http::{CallError, Http};
use super::redact::Redactor;
use super::ticket::{self, Tracker, fingerprint_digest};
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::domain::Notification;
use crate::receivers::render;
use crate::receivers::render::truncate;
pub(crate) use client::rest_call;
pub use config::Config;

/// GitHub's limits on issue titles and bodies.
const TITLE_MAX_CHARS: usize = 256;
const BODY_MAX_CHARS: usize = 65_000;

/// The label that finds an incident's issue again.
pub fn fingerprint_label(fingerprint: &str) -> String {
    format!("herald:{}", fingerprint_digest(fingerprint))
}

/// An issue as Herald remembers it (with when Herald closed it, in the memo).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Issue {
    number: u64,
}

impl std::fmt::Display for Issue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.number)
    }
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
}

#[async_trait::async_trait]
impl Tracker for Github {
    type Ticket = Issue;
    const KEY: &'static str = "github";
    const NOUN: &'static str = "GitHub issue";

    fn found_by(&self) -> &'static str {
        "label"
    }

    async fn find_open(&self, fingerprint: &str) -> Result<Option<Issue>, DeliveryError> {
        let found = self.find_open_issue(&fingerprint_label(fingerprint)).await?;
        Ok(found.map(|i| Issue { number: i.number }))
    }

    async fn create(&self, n: &Notification, fingerprint: &str) -> Result<(Issue, String), DeliveryError> {
        let created = self.create_issue(n, &fingerprint_label(fingerprint)).await?;
        let link = created.html_url.as_deref().unwrap_or_default();
        let detail = format!("created #{} {link}", created.number).trim_end().to_string();
        Ok((Issue { number: created.number }, detail))
    }

    async fn update(&self, issue: &Issue, n: &Notification) -> Result<(), CallError> {
        self.comment(issue.number, n).await
    }

    /// Comments, then closes the issue as completed.
    async fn close(&self, issue: &Issue, n: &Notification) -> Result<String, CallError> {
        self.comment(issue.number, n).await?;
        let number = issue.number;
        self.close_issue(number)
            .await
            .map_err(|error| CallError { status: None, error })?;
        Ok(format!("closed #{number}"))
    }
}

/// What an issue for `n` is created with: its title and body.
pub(crate) fn preview(n: &Notification) -> (String, String) {
    (truncate(&ticket::one_line(&n.ticket_title()), TITLE_MAX_CHARS), body(n))
}

fn body(n: &Notification) -> String {
    truncate(&render::markdown(n), BODY_MAX_CHARS)
}

#[async_trait::async_trait]
impl Receiver for Github {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        ticket::deliver(self, n, memo).await
    }
}
