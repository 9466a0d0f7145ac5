//! The Redmine receiver: one issue per incident in one project, through Redmine's REST API (`/issues.json`,
//! `X-Redmine-API-Key`). Updates add a note; a resolve adds a note and sets `closed_status_id`.
//!
//! The issue is found again without a memo (after a crash between "created" and "memo stored") by the fingerprint:
//! in a custom field when `custom_field_id` is set (`cf_<id>=<fingerprint>`), else by the tag its subject ends with,
//! `[herald:<16 hex of sha256>]` (`subject=~<tag>`). The lifecycle is the tickets' shared one (`receivers::ticket`).
//!
//! A remembered issue answering 404 (deleted, or moved out of the API key's reach) is looked for again and, when
//! none is open, created anew: a missing incident ticket is worse than a second one. A 422 is permanent and says
//! Redmine's own error messages (`{"errors": [...]}`).

mod config;
#[cfg(test)]
mod tests;

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::http::{CallError, Http};
use super::render::{self, truncate};
use super::ticket::{self, Auth, Rest, Tracker, fingerprint_digest};
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::domain::Notification;
pub use config::{Config, ProjectId};

/// Redmine's subject column holds 255 characters.
const SUBJECT_MAX_CHARS: usize = 255;
/// Well under what a text column holds, and what a reader reads.
const DESCRIPTION_MAX_CHARS: usize = 60_000;
/// Issues read per search: one fingerprint rarely has more than a few, newest first.
const SEARCH_LIMIT: &str = "25";

/// The tag a subject ends with, which finds the incident's issue again without a custom field.
pub fn subject_tag(fingerprint: &str) -> String {
    format!("[herald:{}]", fingerprint_digest(fingerprint))
}

/// An issue as Herald remembers it (with when Herald closed it, in the memo).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Issue {
    id: u64,
}

impl std::fmt::Display for Issue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.id)
    }
}

/// An issue of a search answer, with what tells whether it is the incident's and still open.
#[derive(Debug, Deserialize)]
struct FoundIssue {
    id: u64,
    #[serde(default)]
    subject: String,
    status: Option<Status>,
    custom_fields: Option<Vec<CustomValue>>,
}

#[derive(Debug, Deserialize)]
struct Status {
    id: u64,
    /// Sent by Redmine 5.0 and later (#15855); older ones are told by `closed_status_id` alone.
    is_closed: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct CustomValue {
    id: u64,
    #[serde(default)]
    value: Value,
}

pub struct Redmine {
    settings: Config,
    /// `{url}`, with the API key.
    rest: Rest,
}

impl Redmine {
    pub fn new(settings: Config, http: Http) -> Self {
        let auth = Auth::Header("X-Redmine-API-Key", settings.api_key.clone());
        Self {
            rest: Rest::new(http, &settings.url, auth, explain, "redmine"),
            settings,
        }
    }

    /// Whether a search hit is the incident's issue and still open. The filter already says it is the incident's;
    /// checking again keeps a loose "contains" match (or a server ignoring an unknown filter) from adopting another.
    fn is_open_issue_of(&self, issue: &FoundIssue, fingerprint: &str) -> bool {
        let closed = issue
            .status
            .as_ref()
            .is_some_and(|s| s.is_closed == Some(true) || s.id == self.settings.closed_status_id);
        let ours = match (self.settings.custom_field_id, &issue.custom_fields) {
            (Some(field), Some(values)) => values
                .iter()
                .any(|v| v.id == field && v.value.as_str() == Some(fingerprint)),
            (Some(_), None) => true,
            (None, _) => issue.subject.contains(&subject_tag(fingerprint)),
        };
        ours && !closed
    }

    /// `PUT /issues/{id}.json` with `n` as a note, and the status `status_id` when given.
    async fn put_notes(&self, issue: &Issue, n: &Notification, status_id: Option<u64>) -> Result<(), CallError> {
        let url = self.rest.url(&format!("/issues/{}.json", issue.id))?;
        let mut fields = json!({ "notes": notes(n) });
        let what = match status_id {
            Some(status) => {
                fields["status_id"] = json!(status);
                format!("close {issue}")
            }
            None => format!("note on {issue}"),
        };
        self.rest
            .send(&what, Method::PUT, url, Some(&json!({ "issue": fields })))
            .await?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Tracker for Redmine {
    type Ticket = Issue;
    const KEY: &'static str = "redmine";
    const NOUN: &'static str = "Redmine issue";

    fn found_by(&self) -> &'static str {
        match self.settings.custom_field_id {
            Some(_) => "custom field",
            None => "subject tag",
        }
    }

    /// `GET /issues.json?project_id=…&status_id=*&sort=id:desc` with `cf_<id>=<fingerprint>` or
    /// `subject=~<tag>`: every status, so that an issue Herald closed is told from an open one here, by
    /// `is_closed` (Redmine 5.0 and later) or `closed_status_id`. Redmine ignores a filter it does not offer (a custom
    /// field not "used as a filter") and answers a wrong API key as the anonymous user (200, the public issues):
    /// hence the check of each hit.
    async fn find_open(&self, fingerprint: &str) -> Result<Option<Issue>, DeliveryError> {
        let mut url = self.rest.url("/issues.json")?;
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("project_id", &self.settings.project_id.to_string())
                .append_pair("status_id", "*")
                .append_pair("sort", "id:desc")
                .append_pair("limit", SEARCH_LIMIT);
            match self.settings.custom_field_id {
                Some(field) => query.append_pair(&format!("cf_{field}"), fingerprint),
                None => query.append_pair("subject", &format!("~{}", subject_tag(fingerprint))),
            };
        }
        let text = self.rest.send("find issue", Method::GET, url, None).await?;
        let found: Vec<FoundIssue> = self.rest.parse_member("find issue", &text, "issues")?;
        let open = found.iter().find(|i| self.is_open_issue_of(i, fingerprint));
        Ok(open.map(|i| Issue { id: i.id }))
    }

    /// `POST /issues.json` → 201 `{"issue": {"id": N, …}}`.
    async fn create(&self, n: &Notification, fingerprint: &str) -> Result<(Issue, String), DeliveryError> {
        let (subject, description) = preview(n, fingerprint);
        let mut fields = json!({
            "project_id": self.settings.project_id,
            "subject": subject,
            "description": description,
        });
        let optional = [
            ("tracker_id", self.settings.tracker_id),
            ("priority_id", self.settings.priority_id),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                fields[key] = json!(value);
            }
        }
        if let Some(field) = self.settings.custom_field_id {
            fields["custom_fields"] = json!([{ "id": field, "value": fingerprint }]);
        }
        let text = self
            .rest
            .send(
                "create issue",
                Method::POST,
                self.rest.url("/issues.json")?,
                Some(&json!({ "issue": fields })),
            )
            .await?;
        // 201 `{"issue": {"id": N, …}}`: only the id is kept.
        let issue: Issue = self.rest.parse_member("create issue", &text, "issue")?;
        let detail = format!("created {issue}");
        Ok((issue, detail))
    }

    /// `PUT /issues/{id}.json` `{"issue": {"notes": …}}` → 204.
    async fn update(&self, issue: &Issue, n: &Notification) -> Result<(), CallError> {
        self.put_notes(issue, n, None).await
    }

    /// The same PUT, with `status_id: closed_status_id`.
    async fn close(&self, issue: &Issue, n: &Notification) -> Result<String, CallError> {
        self.put_notes(issue, n, Some(self.settings.closed_status_id)).await?;
        Ok(format!("closed {issue}"))
    }
}

/// What an issue for `n` is created with: its subject (one line, ending with the fingerprint's tag) and its
/// description (CommonMark, Redmine's Markdown formatter).
pub(crate) fn preview(n: &Notification, fingerprint: &str) -> (String, String) {
    let tag = subject_tag(fingerprint);
    let title = truncate(
        &ticket::one_line(&n.ticket_title()),
        SUBJECT_MAX_CHARS - tag.chars().count() - 1,
    );
    (format!("{title} {tag}"), notes(n))
}

fn notes(n: &Notification) -> String {
    truncate(&render::markdown(n), DESCRIPTION_MAX_CHARS)
}

/// Redmine's validation failures (`{"errors": ["Subject cannot be blank", …]}`) as one line; any other body as is.
fn explain(body: &str) -> String {
    #[derive(Deserialize)]
    struct Errors {
        errors: Vec<String>,
    }
    match serde_json::from_str::<Errors>(body) {
        Ok(e) if !e.errors.is_empty() => e.errors.join("; "),
        _ => body.to_string(),
    }
}

#[async_trait::async_trait]
impl Receiver for Redmine {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        ticket::deliver(self, n, memo).await
    }
}
