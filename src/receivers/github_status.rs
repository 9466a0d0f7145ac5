//! The GitHub commit-status receiver (`github_status: {api_url, token}`): each state of a sync of an Application
//! whose source is on GitHub is posted as the status of the commit it syncs (`POST
//! {api_url}/repos/{owner}/{repo}/statuses/{sha}`), `pending` while Argo CD's operation runs, then `success`,
//! `failure` or `error`, under the context `argocd/<app>`. Which syncs, once each, is decided upstream
//! (`routing::sync_status`); this module sends one status. It takes no incidents.
//!
//! Calls and rate limits are the GitHub issues receiver's (`github::rest_call`): 401, 404 and 422 are permanent
//! (each said in words), 403 and 429 transient when GitHub says it is a rate limit (primary: until
//! `x-ratelimit-reset`; secondary: `retry-after`), other 403s permanent, 5xx transient.

use std::sync::Arc;

use reqwest::Method;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::github::rest_call;
use super::http::{CallError, Http};
use super::redact::Redactor;
use super::{
    Capabilities, Delivered, DeliveryError, Integration, Memo, Receiver, Sections, Shared, digest_refused,
    incident_refused,
};
use crate::configuration::{ConfigError, ReceiverSettings, check_url};
use crate::domain::notification::short_revision as short;
use crate::domain::{Action, Body, CommitState, CommitStatus, Notification};
use crate::receivers::render::{escape, truncate};

/// GitHub keeps at most this many characters of a status's `description`.
pub const DESCRIPTION_MAX_CHARS: usize = 140;

/// `github_status: {api_url, token}` (`token_file` works).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "default_api_url")]
    pub api_url: String,
    pub token: SecretString,
}

fn default_api_url() -> String {
    "https://api.github.com".into()
}

impl Config {
    /// The host whose repositories this API serves, from `api_url`: `api.github.com` serves `github.com`; a GitHub
    /// Enterprise Server's `https://ghe.example/api/v3` serves `ghe.example`; GitHub Enterprise Cloud's
    /// `https://api.acme.ghe.com` serves `acme.ghe.com`. Any other URL (a proxy in front of api.github.com) serves
    /// `github.com`.
    pub fn repo_host(&self) -> String {
        let Ok(url) = url::Url::parse(&self.api_url) else {
            return "github.com".into();
        };
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        if url.path().trim_end_matches('/').ends_with("/api/v3") {
            return host;
        }
        match host.strip_prefix("api.") {
            Some(rest) if rest.ends_with(".ghe.com") => rest.to_string(),
            _ => "github.com".into(),
        }
    }
}

impl Integration for Config {
    /// A commit status per state of each sync; no incidents.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            commit_statuses: true,
            ..Capabilities::SYNCS_ONLY
        }
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        check_url(errors, &format!("{path}.api_url"), &self.api_url);
    }

    fn build(&self, _r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(GithubStatus::new(self.clone(), shared.http.clone())))
    }
}

pub struct GithubStatus {
    settings: Config,
    http: Http,
    redactor: Redactor,
}

impl GithubStatus {
    pub fn new(settings: Config, http: Http) -> Self {
        let redactor = Redactor::default().secret(settings.token.expose_secret());
        Self {
            settings,
            http,
            redactor,
        }
    }

    /// `{api_url}` with `segments` appended, each one path segment.
    fn url(&self, segments: &[&str]) -> Result<reqwest::Url, DeliveryError> {
        let invalid = || DeliveryError::permanent("github status: api_url is not a base URL");
        let mut url = reqwest::Url::parse(&self.settings.api_url).map_err(|_| invalid())?;
        url.path_segments_mut()
            .map_err(|_| invalid())?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    async fn call(
        &self,
        what: &str,
        method: Method,
        url: reqwest::Url,
        body: Option<&Value>,
    ) -> Result<String, DeliveryError> {
        let token = self.settings.token.expose_secret();
        rest_call(&self.http, token, &self.redactor, method, url, body)
            .await
            .map_err(|e| {
                self.redactor
                    .apply(DeliveryError::prefixed(&format!("github status: {what}"), explained(e)))
            })
    }

    async fn post(&self, s: &CommitStatus) -> Result<Delivered, DeliveryError> {
        let Some((owner, name)) = s.repo.split_once('/') else {
            return Err(DeliveryError::permanent(format!(
                "github status: {:?} is not owner/name",
                s.repo
            )));
        };
        let url = self.url(&["repos", owner, name, "statuses", &s.sha])?;
        let what = format!("{} on {}@{}", s.state.as_str(), s.repo, short(&s.sha));
        self.call(&what, Method::POST, url, Some(&status_body(s))).await?;
        Ok(Delivered {
            memo: None,
            detail: format!("posted {what} ({})", s.context()),
        })
    }

    /// `herald send-test`: no commit to post a status on, so the token is checked instead (`GET /rate_limit`,
    /// which answers any valid token and counts against no limit).
    async fn check_token(&self) -> Result<Delivered, DeliveryError> {
        let text = self
            .call("check token", Method::GET, self.url(&["rate_limit"])?, None)
            .await?;
        let left = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["rate"]["remaining"].as_u64());
        Ok(Delivered {
            memo: None,
            detail: match left {
                Some(n) => format!(
                    "the token works (GET /rate_limit: {n} requests left this hour); statuses are posted at the next sync"
                ),
                None => "the token works (GET /rate_limit); statuses are posted at the next sync".into(),
            },
        })
    }
}

/// GitHub's answers in words where its status alone does not say what to fix; the retry decision is kept.
fn explained(e: CallError) -> DeliveryError {
    let hint = match e.status {
        Some(401) => "the token is not valid (expired or revoked?)",
        Some(403) if matches!(e.error, DeliveryError::Permanent { .. }) => {
            "the token may not post statuses here: a fine-grained token needs \"Commit statuses: write\" on the \
             repository, a classic one the `repo:status` scope"
        }
        Some(404) => "no such repository, or the token cannot see it",
        Some(422) => {
            "GitHub refused the status as invalid: the commit is not in that repository (a sha from another \
             repository or a fork?), or it already has 1000 statuses of this context"
        }
        _ => return e.error,
    };
    e.error.map_reason(|reason| format!("{hint}: {reason}"))
}

/// The request body: `state`, `context`, a `description` of at most 140 characters, and `target_url` when known.
pub fn status_body(s: &CommitStatus) -> Value {
    let mut body = json!({
        "state": s.state.as_str(),
        "description": description(s),
        "context": s.context(),
    });
    if let Some(u) = &s.target_url {
        body["target_url"] = json!(u);
    }
    body
}

/// What the status says in one line: `Sync running, started by alice`, `Synced by alice: successfully synced`,
/// `Sync failed, started by alice: <Argo CD's message>`, cut to GitHub's 140 characters.
pub fn description(s: &CommitStatus) -> String {
    let by = &s.initiator;
    let head = match s.state {
        CommitState::Pending => format!("Sync running, started by {by}"),
        CommitState::Success => format!("Synced by {by}"),
        CommitState::Failure => format!("Sync failed, started by {by}"),
        CommitState::Error => format!("Sync error, started by {by}"),
    };
    let message = crate::receivers::ticket::one_line(&s.message);
    let text = match message.is_empty() || s.state == CommitState::Pending {
        true => head,
        false => format!("{head}: {message}"),
    };
    truncate(&escape::one_line(&text), DESCRIPTION_MAX_CHARS)
}

#[async_trait::async_trait]
impl Receiver for GithubStatus {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        match (&n.body, n.action) {
            (Body::CommitStatus(s), _) => self.post(s).await,
            (_, Action::Test) => self.check_token().await,
            (Body::Digest(_), _) => Err(digest_refused("github status")),
            _ => Err(incident_refused("github status")),
        }
    }
}

#[cfg(test)]
mod tests;
