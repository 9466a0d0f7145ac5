//! GitHub's REST API as Herald uses it: authenticated calls (the token redacted from every failure), rate limits
//! read from the response headers against the injected clock ([`rest_call`], shared with the commit-status
//! receiver, `receivers::github_status`), and the issue calls (find by label, create, comment, close).

use std::time::{Duration, SystemTime};

use reqwest::Method;
use reqwest::header::HeaderMap;
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Github, body};
use crate::domain::Notification;
use crate::receivers::DeliveryError;
use crate::receivers::http::{CallError, Http, classify_status, parse_json, parse_retry_after, snippet};
use crate::receivers::redact::Redactor;

const USER_AGENT: &str = concat!("herald/", env!("CARGO_PKG_VERSION"));

#[derive(Debug, Deserialize)]
pub(super) struct IssueRef {
    pub(super) number: u64,
    pub(super) html_url: Option<String>,
    /// Present on pull requests, which the issues endpoint lists too.
    pull_request: Option<Value>,
}

/// GitHub's rate limits, then the shared table: 429, or 403 with `retry-after` (secondary limit), or 403/429 with
/// `x-ratelimit-remaining: 0` (primary limit, wait until `x-ratelimit-reset`) are transient; other 403s are not.
/// `body` is already scrubbed ([`crate::receivers::http::Http::call`]).
pub(crate) fn classify(status: u16, headers: &HeaderMap, body: &str, now: SystemTime) -> DeliveryError {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let retry_after = parse_retry_after(header("retry-after"), now);
    let exhausted = header("x-ratelimit-remaining") == Some("0");
    let until_reset = header("x-ratelimit-reset")
        .and_then(|v| v.parse::<u64>().ok())
        .map(|reset| {
            let reset = SystemTime::UNIX_EPOCH + Duration::from_secs(reset);
            // At least a second: the reset time is GitHub's clock, not ours.
            reset
                .duration_since(now)
                .unwrap_or(Duration::ZERO)
                .max(Duration::from_secs(1))
        });
    if matches!(status, 403 | 429) && (retry_after.is_some() || exhausted) {
        let wait = retry_after.or(if exhausted { until_reset } else { None });
        return DeliveryError::Transient {
            reason: format!("HTTP {status} (rate limited): {}", snippet(body)),
            retry_after: wait,
        };
    }
    classify_status(status, retry_after, body)
}

/// One request to GitHub's REST API with what GitHub asks of every call (`Authorization: Bearer`, `Accept:
/// application/vnd.github+json`, `X-GitHub-Api-Version: 2022-11-28`, a `User-Agent`): a 2xx answers its body,
/// anything else [`classify`]'s failure (rate limits against `http`'s clock), the body scrubbed by `redactor`.
pub(crate) async fn rest_call(
    http: &Http,
    token: &str,
    redactor: &Redactor,
    method: Method,
    url: reqwest::Url,
    body: Option<&Value>,
) -> Result<String, CallError> {
    let mut rb = http
        .client()
        .request(method, url)
        .bearer_auth(token)
        .header(reqwest::header::ACCEPT, "application/vnd.github+json")
        .header("X-GitHub-Api-Version", "2022-11-28")
        // GitHub answers 403 to requests without one.
        .header(reqwest::header::USER_AGENT, USER_AGENT);
    if let Some(body) = body {
        rb = rb.json(body);
    }
    let classify = |status: u16, headers: &HeaderMap, body: &str| classify(status, headers, body, http.now());
    http.call(rb, redactor, classify).await
}

impl Github {
    /// Prefixes what failed and blanks out the token, should a server echo it back.
    pub(super) fn redact(&self, what: &str, e: DeliveryError) -> DeliveryError {
        self.redactor
            .apply(DeliveryError::prefixed(&format!("github {what}"), e))
    }

    /// One request; a 2xx answers its body, anything else the rate-limit-aware classification.
    pub(super) async fn call(
        &self,
        what: &str,
        method: Method,
        url: reqwest::Url,
        body: Option<&Value>,
    ) -> Result<String, CallError> {
        let token = self.settings.token.expose_secret();
        let answer = rest_call(&self.http, token, &self.redactor, method, url, body).await;
        answer.map_err(|e| e.map(|error| self.redact(what, error)))
    }

    pub(super) fn url(&self, path: &str) -> Result<reqwest::Url, DeliveryError> {
        reqwest::Url::parse(&format!("{}{path}", self.repo_url))
            .map_err(|e| DeliveryError::permanent(format!("github: invalid api_url or repo ({e})")))
    }

    /// Reads a 2xx body. An unreadable one is transient: a retry looks before it creates anything again.
    pub(super) fn parse<T: serde::de::DeserializeOwned>(&self, what: &str, body: &str) -> Result<T, DeliveryError> {
        parse_json(body).map_err(|e| self.redact(what, e))
    }

    /// The newest open issue (not pull request) carrying the fingerprint label.
    pub(super) async fn find_open_issue(&self, label: &str) -> Result<Option<IssueRef>, DeliveryError> {
        let mut url = self.url("/issues")?;
        url.query_pairs_mut()
            .append_pair("state", "open")
            .append_pair("labels", label)
            .append_pair("per_page", "100");
        let text = self.call("find issue", Method::GET, url, None).await?;
        let items: Vec<IssueRef> = self.parse("find issue", &text)?;
        Ok(items.into_iter().find(|i| i.pull_request.is_none()))
    }

    pub(super) async fn create_issue(&self, n: &Notification, label: &str) -> Result<IssueRef, DeliveryError> {
        let mut labels = vec![label.to_string()];
        for l in &self.settings.labels {
            if !l.is_empty() && !labels.contains(l) {
                labels.push(l.clone());
            }
        }
        let (title, body) = super::preview(n);
        let body = json!({ "title": title, "body": body, "labels": labels });
        let text = self
            .call("create issue", Method::POST, self.url("/issues")?, Some(&body))
            .await?;
        self.parse("create issue", &text)
    }

    pub(super) async fn comment(&self, number: u64, n: &Notification) -> Result<(), CallError> {
        let what = format!("comment on #{number}");
        let url = self
            .url(&format!("/issues/{number}/comments"))
            .map_err(|error| CallError { status: None, error })?;
        let payload = json!({ "body": body(n) });
        self.call(&what, Method::POST, url, Some(&payload)).await?;
        Ok(())
    }

    pub(super) async fn close_issue(&self, number: u64) -> Result<(), DeliveryError> {
        let url = self.url(&format!("/issues/{number}"))?;
        let payload = json!({ "state": "closed", "state_reason": "completed" });
        self.call(&format!("close #{number}"), Method::PATCH, url, Some(&payload))
            .await?;
        Ok(())
    }
}
