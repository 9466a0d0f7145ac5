//! The ServiceNow receiver: one incident record per Herald incident, through the Table API
//! (`/api/now/table/incident`), with Basic `user:password` or a Bearer token. Updates add a work note; a resolve
//! sets the state to Resolved (6) with `close_code` and close notes.
//!
//! The record carries the fingerprint in `correlation_id` (with `correlation_display: Herald`), which finds it again
//! without a memo (after a crash between "created" and "memo stored"): the active record with that correlation id.
//! The lifecycle is the tickets' shared one (`receivers::ticket`). Failures say ServiceNow's own message
//! (`{"error": {"message", "detail"}}`); 401 and 403 are permanent, 429 and 5xx transient with their Retry-After.

mod config;
#[cfg(test)]
mod tests;

use reqwest::Method;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::http::{CallError, Http};
use super::render::{self, truncate};
use super::ticket::{self, Auth, Rest, Tracker, fingerprint_digest, path_segment};
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::domain::{Notification, Severity};
pub use config::Config;

/// The incident table's `short_description` holds 160 characters.
const SHORT_DESCRIPTION_MAX_CHARS: usize = 160;
/// `correlation_id` holds 100 characters.
const CORRELATION_ID_MAX_CHARS: usize = 100;
/// Well under what a journal field holds, and what a reader reads.
const TEXT_MAX_CHARS: usize = 30_000;
/// The incident state "Resolved".
const RESOLVED: &str = "6";

/// The `correlation_id` of an incident's record: its fingerprint, unless the fingerprint is too long for the field
/// or holds `^`, which separates the conditions of an encoded query; then `herald:<16 hex of its sha256>`.
pub fn correlation_id(fingerprint: &str) -> String {
    if fingerprint.chars().count() <= CORRELATION_ID_MAX_CHARS && !fingerprint.contains('^') {
        fingerprint.to_string()
    } else {
        format!("herald:{}", fingerprint_digest(fingerprint))
    }
}

/// An incident record as Herald remembers it: its sys_id (for the API) and its number (for people).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    sys_id: String,
    #[serde(default)]
    number: String,
}

impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = if self.number.is_empty() {
            &self.sys_id
        } else {
            &self.number
        };
        f.write_str(name)
    }
}

pub struct ServiceNow {
    settings: Config,
    /// `{instance_url}/api/now/table/incident`, with the credentials.
    rest: Rest,
}

impl ServiceNow {
    pub fn new(settings: Config, http: Http) -> Self {
        let table = format!("{}/api/now/table/incident", settings.instance_url.trim_end_matches('/'));
        // Validation makes sure one of them is set; a block without either sends empty Basic credentials (a 401).
        let auth = match (&settings.token, &settings.user, &settings.password) {
            (Some(token), _, _) => Auth::Bearer(token.clone()),
            (None, user, password) => Auth::Basic(
                user.clone().unwrap_or_default(),
                password.clone().unwrap_or_else(|| SecretString::from("")),
            ),
        };
        Self {
            rest: Rest::new(http, &table, auth, explain, "servicenow"),
            settings,
        }
    }

    async fn patch(&self, what: &str, record: &Record, fields: Value) -> Result<(), CallError> {
        let url = self.rest.url(&format!("/{}", path_segment(&record.sys_id)))?;
        self.rest.send(what, Method::PATCH, url, Some(&fields)).await?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl Tracker for ServiceNow {
    type Ticket = Record;
    const KEY: &'static str = "servicenow";
    const NOUN: &'static str = "ServiceNow incident";

    fn found_by(&self) -> &'static str {
        "correlation_id"
    }

    /// `GET …/incident?sysparm_query=correlation_id=<id>^active=true&sysparm_limit=1&sysparm_fields=…`.
    async fn find_open(&self, fingerprint: &str) -> Result<Option<Record>, DeliveryError> {
        let mut url = self.rest.url("")?;
        url.query_pairs_mut()
            .append_pair(
                "sysparm_query",
                &format!(
                    "correlation_id={}^active=true^ORDERBYDESCsys_created_on",
                    correlation_id(fingerprint)
                ),
            )
            .append_pair("sysparm_limit", "1")
            .append_pair("sysparm_fields", "sys_id,number,state");
        let text = self.rest.send("find incident", Method::GET, url, None).await?;
        let found: Vec<Record> = self.rest.parse_member("find incident", &text, "result")?;
        Ok(found.into_iter().next())
    }

    /// `POST …/incident` → 201 `{"result": {"sys_id", "number", …}}`.
    async fn create(&self, n: &Notification, fingerprint: &str) -> Result<(Record, String), DeliveryError> {
        let body = incident_fields(n, fingerprint, &self.settings);
        let text = self
            .rest
            .send("create incident", Method::POST, self.rest.url("")?, Some(&body))
            .await?;
        let record: Record = self.rest.parse_member("create incident", &text, "result")?;
        let detail = format!("created {record}");
        Ok((record, detail))
    }

    /// `PATCH …/incident/{sys_id}` `{"work_notes": …}`.
    async fn update(&self, record: &Record, n: &Notification) -> Result<(), CallError> {
        let fields = json!({ "work_notes": text(n) });
        self.patch(&format!("work note on {record}"), record, fields).await
    }

    /// `PATCH …/incident/{sys_id}` `{"state": "6", "close_code", "close_notes"}`.
    async fn close(&self, record: &Record, n: &Notification) -> Result<String, CallError> {
        let fields = json!({ "state": RESOLVED, "close_code": self.settings.close_code, "close_notes": text(n) });
        self.patch(&format!("resolve {record}"), record, fields).await?;
        Ok(format!("resolved {record}"))
    }
}

/// The record created for `n`: its text, the fingerprint as `correlation_id`, urgency and impact from the severity,
/// and the configured assignment group, caller and category.
fn incident_fields(n: &Notification, fingerprint: &str, settings: &Config) -> Value {
    let level = match n.highest_severity() {
        Severity::Critical => "1",
        Severity::Warning => "2",
        Severity::Info => "3",
    };
    let (short_description, description) = preview(n);
    let mut fields = Map::new();
    fields.insert("short_description".into(), json!(short_description));
    fields.insert("description".into(), json!(description));
    fields.insert("correlation_id".into(), json!(correlation_id(fingerprint)));
    fields.insert("correlation_display".into(), json!("Herald"));
    fields.insert("urgency".into(), json!(level));
    fields.insert("impact".into(), json!(level));
    let optional = [
        ("assignment_group", &settings.assignment_group),
        ("caller_id", &settings.caller),
        ("category", &settings.category),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            fields.insert(key.into(), json!(value));
        }
    }
    Value::Object(fields)
}

/// What a record for `n` is created with: its short description (one line) and its description.
pub(crate) fn preview(n: &Notification) -> (String, String) {
    (
        truncate(&ticket::one_line(&n.ticket_title()), SHORT_DESCRIPTION_MAX_CHARS),
        text(n),
    )
}

/// Plain text: ServiceNow shows descriptions and journal entries as they are, but for `[code]…[/code]` (HTML),
/// which is broken so that text from Argo CD stays text.
fn text(n: &Notification) -> String {
    render::escape::servicenow(&truncate(&render::text(n), TEXT_MAX_CHARS))
}

/// ServiceNow's failures (`{"error": {"message": "User Not Authenticated", "detail": "…"}, "status": "failure"}`)
/// as `message (detail)`; any other body as is.
fn explain(body: &str) -> String {
    #[derive(Deserialize)]
    struct Failure {
        error: ErrorBody,
    }
    #[derive(Deserialize)]
    struct ErrorBody {
        #[serde(default)]
        message: String,
        detail: Option<String>,
    }
    match serde_json::from_str::<Failure>(body) {
        Ok(Failure { error }) if !error.message.is_empty() => match error.detail.filter(|d| !d.is_empty()) {
            Some(detail) => format!("{} ({detail})", error.message),
            None => error.message,
        },
        _ => body.to_string(),
    }
}

#[async_trait::async_trait]
impl Receiver for ServiceNow {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        ticket::deliver(self, n, memo).await
    }
}
