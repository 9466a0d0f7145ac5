//! Jira's REST API as the receiver uses it: authenticated calls classified by the shared status table (the token
//! redacted), the label search (Cloud's token-paged `/search/jql`, Data Center's offset-paged `/search`), issue
//! creation, comments and transitions.

use chrono::{DateTime, Utc};
use reqwest::Method;
use reqwest::header::HeaderMap;
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Jira, summary};
use crate::domain::Notification;
use crate::receivers::DeliveryError;
use crate::receivers::http::{CallError, parse_json};

/// Issues per search page, and how many pages we read at most (one fingerprint rarely has more than a few).
const SEARCH_PAGE_SIZE: u64 = 50;
const SEARCH_MAX_PAGES: usize = 10;

#[derive(Debug, Default, Deserialize)]
pub(super) struct SearchPage {
    #[serde(default)]
    issues: Vec<FoundIssue>,
    #[serde(default, rename = "isLast")]
    is_last: Option<bool>,
    #[serde(default, rename = "nextPageToken")]
    next_page_token: Option<String>,
    total: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct FoundIssue {
    pub(super) key: String,
    #[serde(default)]
    fields: IssueFields,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct IssueFields {
    status: Option<IssueStatus>,
    resolutiondate: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct IssueStatus {
    #[serde(default, rename = "statusCategory")]
    category: Option<StatusCategory>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct StatusCategory {
    key: Option<String>,
}

impl FoundIssue {
    /// The status category says it when Jira sends it; the resolution date otherwise.
    pub(super) fn is_resolved(&self) -> bool {
        match self
            .fields
            .status
            .as_ref()
            .and_then(|s| s.category.as_ref())
            .and_then(|c| c.key.as_deref())
        {
            Some(category) => category == "done",
            None => self.fields.resolutiondate.is_some(),
        }
    }

    pub(super) fn resolved_at(&self) -> Option<DateTime<Utc>> {
        parse_jira_time(self.fields.resolutiondate.as_deref()?)
    }
}

/// Jira writes `2024-05-01T10:00:00.000+0000` (no colon in the offset); accept RFC 3339 too.
pub(super) fn parse_jira_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .or_else(|_| DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%z"))
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[derive(Debug, Deserialize)]
pub(super) struct Transitions {
    #[serde(default)]
    transitions: Vec<TransitionRef>,
}

#[derive(Debug, Deserialize)]
struct TransitionRef {
    id: String,
    #[serde(default)]
    name: String,
}

pub(super) enum Transitioned {
    Applied(String),
    /// The wanted transition is not offered from the issue's current status: the names that are.
    Unavailable(String),
}

impl Jira {
    /// Cloud: Basic `user:token`. Data Center: Bearer PAT (or Basic when a `user` is configured).
    fn authorize(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let token = self.settings.token.expose_secret();
        match &self.settings.user {
            Some(user) => rb.basic_auth(user, Some(token)),
            None => rb.bearer_auth(token),
        }
    }

    /// Prefixes what failed and blanks out the token (and its Basic form), should a server echo them back.
    fn redact(&self, what: &str, e: DeliveryError) -> DeliveryError {
        self.redactor.apply(DeliveryError::prefixed(&format!("jira {what}"), e))
    }

    /// One request; a 2xx answers its body (possibly empty), anything else the shared classification.
    pub(super) async fn call(
        &self,
        what: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<String, CallError> {
        let mut rb = self
            .authorize(self.http.client().request(method, format!("{}{path}", self.base)))
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = body {
            rb = rb.json(body);
        }
        let classify =
            |status: u16, headers: &HeaderMap, body: &str| self.http.classify(status, headers, body, &self.redactor);
        let answer = self.http.call(rb, &self.redactor, classify).await;
        answer.map_err(|e| e.map(|error| self.redact(what, error)))
    }

    /// Reads a 2xx body. An unreadable one is transient: a retry searches before it creates anything again.
    pub(super) fn parse<T: serde::de::DeserializeOwned>(&self, what: &str, body: &str) -> Result<T, DeliveryError> {
        parse_json(body).map_err(|e| self.redact(what, e))
    }

    /// Issues carrying the fingerprint label, newest first.
    pub(super) async fn search(&self, label: &str) -> Result<Vec<FoundIssue>, DeliveryError> {
        let jql = format!(
            "project = \"{}\" AND labels = \"{label}\" ORDER BY created DESC",
            self.settings.project.replace('\\', "\\\\").replace('"', "\\\"")
        );
        let fields = ["status", "labels", "resolutiondate"];
        let mut found = Vec::new();
        let mut next_page_token: Option<String> = None;
        for _ in 0..SEARCH_MAX_PAGES {
            // Cloud: the old `/rest/api/3/search` answers 410 Gone; `/search/jql` pages with a token.
            let (path, body) = if self.cloud() {
                let mut body = json!({ "jql": jql, "fields": fields, "maxResults": SEARCH_PAGE_SIZE });
                if let Some(token) = &next_page_token {
                    body["nextPageToken"] = json!(token);
                }
                ("/search/jql", body)
            } else {
                let body = json!({
                    "jql": jql, "fields": fields, "maxResults": SEARCH_PAGE_SIZE, "startAt": found.len(),
                });
                ("/search", body)
            };
            let text = self.call("search", Method::POST, path, Some(&body)).await?;
            let page: SearchPage = self.parse("search", &text)?;
            let got = page.issues.len();
            found.extend(page.issues);
            let more = if self.cloud() {
                next_page_token = page.next_page_token;
                page.is_last != Some(true) && next_page_token.is_some()
            } else {
                got > 0 && page.total.is_some_and(|t| (found.len() as u64) < t)
            };
            if !more {
                break;
            }
        }
        Ok(found)
    }

    pub(super) async fn create(&self, n: &Notification, label: &str) -> Result<String, DeliveryError> {
        let mut labels = vec![label.to_string()];
        for l in &self.settings.labels {
            // Jira refuses labels with spaces: keep the configured ones usable.
            let l: String = l.split_whitespace().collect::<Vec<_>>().join("-");
            if !l.is_empty() && !labels.contains(&l) {
                labels.push(l);
            }
        }
        let body = json!({
            "fields": {
                "project": { "key": self.settings.project },
                "issuetype": { "name": self.settings.issue_type },
                "summary": summary(&n.ticket_title()),
                "description": self.document(n),
                "labels": labels,
            }
        });
        let text = self.call("create issue", Method::POST, "/issue", Some(&body)).await?;
        #[derive(Deserialize)]
        struct Created {
            key: String,
        }
        let created: Created = self.parse("create issue", &text)?;
        Ok(created.key)
    }

    pub(super) async fn comment(&self, key: &str, n: &Notification) -> Result<(), CallError> {
        // The same rendering as the description: the title, the reason ("resolved", "escalation step 1") and the
        // incident's state say what changed.
        let body = json!({ "body": self.document(n) });
        let path = format!("/issue/{}/comment", path_segment(key));
        self.call(&format!("comment on {key}"), Method::POST, &path, Some(&body))
            .await?;
        Ok(())
    }

    /// Applies the transition named `wanted` (case-insensitive) or whose id is `wanted`.
    pub(super) async fn transition(&self, key: &str, wanted: &str) -> Result<Transitioned, DeliveryError> {
        let what = format!("transitions of {key}");
        let path = format!("/issue/{}/transitions", path_segment(key));
        let text = self.call(&what, Method::GET, &path, None).await?;
        let offered: Transitions = self.parse(&what, &text)?;
        let wanted_lower = wanted.to_lowercase();
        let Some(t) = offered
            .transitions
            .iter()
            .find(|t| t.id == wanted || t.name.to_lowercase() == wanted_lower)
        else {
            let names: Vec<String> = offered
                .transitions
                .iter()
                .map(|t| format!("{} ({})", t.name, t.id))
                .collect();
            let names = if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            };
            return Ok(Transitioned::Unavailable(names));
        };
        let body = json!({ "transition": { "id": t.id } });
        self.call(&format!("transition {key}"), Method::POST, &path, Some(&body))
            .await?;
        Ok(Transitioned::Applied(t.name.clone()))
    }

    /// Whether the issue is already in a "done" status (someone closed it by hand).
    pub(super) async fn already_done(&self, key: &str) -> Result<bool, DeliveryError> {
        let what = format!("read {key}");
        let path = format!("/issue/{}?fields=status,resolutiondate", path_segment(key));
        let text = self.call(&what, Method::GET, &path, None).await?;
        let issue: FoundIssue = self.parse(&what, &text)?;
        Ok(issue.is_resolved())
    }
}

/// Issue keys are `PAY-12`; anything else is percent-encoded rather than trusted into a path.
fn path_segment(key: &str) -> String {
    url::form_urlencoded::byte_serialize(key.as_bytes()).collect()
}
