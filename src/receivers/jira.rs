//! The Jira receiver: one issue per incident, in Jira Cloud (`/rest/api/3`, Basic `user:token`, ADF description,
//! `POST /search/jql`) or Data Center (`/rest/api/2`, Bearer PAT, wiki-markup description, `POST /search`).
//!
//! The issue is found again by a label derived from the fingerprint (`herald-<16 hex of sha256>`), so a crash
//! between "issue created" and "memo stored" never opens a second issue: without a memo we always search before we
//! create. Updates comment, resolve comments then applies `resolve_transition`, and a new occurrence reopens the
//! last issue (`reopen_transition`) when it was resolved within `reopen_window` (no window: any age).

use chrono::{DateTime, Utc};
use reqwest::Method;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::http::{Http, transport_error};
use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::configuration::{JiraApi, JiraSettings};
use crate::domain::{Action, Notification};
use crate::receivers::render;
use crate::receivers::render::truncate;

/// Jira rejects longer summaries.
const SUMMARY_MAX_CHARS: usize = 255;
/// Issues per search page, and how many pages we read at most (one fingerprint rarely has more than a few).
const SEARCH_PAGE_SIZE: u64 = 50;
const SEARCH_MAX_PAGES: usize = 10;
/// Keeps descriptions well under Jira's 32 767-character limit for text fields.
const MAX_RESOURCES: usize = 50;
const MAX_MESSAGE_CHARS: usize = 2_000;

/// The label that finds an incident's issue again: Jira labels cannot hold spaces, fingerprints can.
pub fn fingerprint_label(fingerprint: &str) -> String {
    let digest = hex::encode(Sha256::digest(fingerprint.as_bytes()));
    format!("herald-{}", &digest[..16])
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

/// A failed call. Keeps the status so a remembered issue that is gone (404) can be looked up again.
struct CallError {
    status: Option<u16>,
    error: DeliveryError,
}

impl From<CallError> for DeliveryError {
    fn from(e: CallError) -> Self {
        e.error
    }
}

#[derive(Debug, Default, Deserialize)]
struct SearchPage {
    #[serde(default)]
    issues: Vec<FoundIssue>,
    #[serde(default, rename = "isLast")]
    is_last: Option<bool>,
    #[serde(default, rename = "nextPageToken")]
    next_page_token: Option<String>,
    #[serde(default)]
    total: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
struct FoundIssue {
    key: String,
    #[serde(default)]
    fields: IssueFields,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct IssueFields {
    #[serde(default)]
    status: Option<IssueStatus>,
    #[serde(default)]
    resolutiondate: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct IssueStatus {
    #[serde(default, rename = "statusCategory")]
    category: Option<StatusCategory>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct StatusCategory {
    #[serde(default)]
    key: Option<String>,
}

impl FoundIssue {
    /// The status category says it when Jira sends it; the resolution date otherwise.
    fn is_resolved(&self) -> bool {
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

    fn resolved_at(&self) -> Option<DateTime<Utc>> {
        parse_jira_time(self.fields.resolutiondate.as_deref()?)
    }
}

/// Jira writes `2024-05-01T10:00:00.000+0000` (no colon in the offset); accept RFC 3339 too.
fn parse_jira_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .or_else(|_| DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%z"))
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[derive(Debug, Deserialize)]
struct Transitions {
    #[serde(default)]
    transitions: Vec<TransitionRef>,
}

#[derive(Debug, Deserialize)]
struct TransitionRef {
    id: String,
    #[serde(default)]
    name: String,
}

enum Transitioned {
    Applied(String),
    /// The wanted transition is not offered from the issue's current status: the names that are.
    Unavailable(String),
}

pub struct Jira {
    settings: JiraSettings,
    http: Http,
    /// `{url}/rest/api/3` or `{url}/rest/api/2`.
    base: String,
    redactor: Redactor,
}

impl Jira {
    pub fn new(settings: JiraSettings, http: Http) -> Self {
        let version = match settings.api {
            JiraApi::Cloud => 3,
            JiraApi::Datacenter => 2,
        };
        let base = format!("{}/rest/api/{version}", settings.url.trim_end_matches('/'));
        // The token, and the Basic form it travels in on Cloud, should a server echo either back.
        use base64::Engine as _;
        let token = settings.token.expose_secret();
        let mut redactor = Redactor::default().secret(token);
        if let Some(user) = &settings.user {
            redactor = redactor.secret(&base64::engine::general_purpose::STANDARD.encode(format!("{user}:{token}")));
        }
        Self {
            settings,
            http,
            base,
            redactor,
        }
    }

    fn cloud(&self) -> bool {
        self.settings.api == JiraApi::Cloud
    }

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
    async fn call(&self, what: &str, method: Method, path: &str, body: Option<&Value>) -> Result<String, CallError> {
        let mut rb = self
            .authorize(self.http.client().request(method, format!("{}{path}", self.base)))
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = body {
            rb = rb.json(body);
        }
        let resp = rb.send().await.map_err(|e| CallError {
            status: None,
            error: self.redact(what, transport_error(e)),
        })?;
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let error = self.redact(what, self.http.error_from_response(resp).await);
            return Err(CallError {
                status: Some(status),
                error,
            });
        }
        resp.text().await.map_err(|e| CallError {
            status: Some(status),
            error: self.redact(what, transport_error(e)),
        })
    }

    /// Reads a 2xx body. An unreadable one is transient: a retry searches before it creates anything again.
    fn parse<T: serde::de::DeserializeOwned>(&self, what: &str, body: &str) -> Result<T, DeliveryError> {
        serde_json::from_str(body)
            .map_err(|e| self.redact(what, DeliveryError::transient(format!("unexpected response ({e})"))))
    }

    /// Issues carrying the fingerprint label, newest first.
    async fn search(&self, label: &str) -> Result<Vec<FoundIssue>, DeliveryError> {
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

    async fn create(&self, n: &Notification, label: &str) -> Result<String, DeliveryError> {
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
                "summary": summary(&n.title),
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

    async fn comment(&self, key: &str, n: &Notification) -> Result<(), CallError> {
        // The same rendering as the description: the title, the reason ("resolved", "escalation step 1") and the
        // incident's state say what changed.
        let body = json!({ "body": self.document(n) });
        let path = format!("/issue/{}/comment", path_segment(key));
        self.call(&format!("comment on {key}"), Method::POST, &path, Some(&body))
            .await?;
        Ok(())
    }

    /// Applies the transition named `wanted` (case-insensitive) or whose id is `wanted`.
    async fn transition(&self, key: &str, wanted: &str) -> Result<Transitioned, DeliveryError> {
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
    async fn already_done(&self, key: &str) -> Result<bool, DeliveryError> {
        let what = format!("read {key}");
        let path = format!("/issue/{}?fields=status,resolutiondate", path_segment(key));
        let text = self.call(&what, Method::GET, &path, None).await?;
        let issue: FoundIssue = self.parse(&what, &text)?;
        Ok(issue.is_resolved())
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

    /// Resolve: comment on the issue we know (or the open one we find), then apply `resolve_transition`.
    async fn resolve(
        &self,
        n: &Notification,
        label: &str,
        remembered: Option<String>,
    ) -> Result<Delivered, DeliveryError> {
        let mut commented = None;
        if let Some(key) = remembered {
            match self.comment(&key, n).await {
                Ok(()) => commented = Some(key),
                Err(e) if e.status == Some(404) => tracing::warn!(
                    receiver = %n.receiver, issue = %key,
                    "The remembered Jira issue is gone; looking for the incident's issue by label."
                ),
                Err(e) => return Err(e.into()),
            }
        }
        let key = match commented {
            Some(key) => key,
            None => {
                let found = self.search(label).await?;
                let Some(open) = found.into_iter().find(|i| !i.is_resolved()) else {
                    return Ok(Delivered {
                        memo: None,
                        detail: "no open Jira issue for this incident: nothing to resolve".into(),
                    });
                };
                self.comment(&open.key, n).await?;
                open.key
            }
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
            Value::String(wiki(n))
        }
    }
}

fn delivered(memo: Memo, detail: String) -> Delivered {
    Delivered {
        memo: Some(memo),
        detail,
    }
}

/// Issue keys are `PAY-12`; anything else is percent-encoded rather than trusted into a path.
fn path_segment(key: &str) -> String {
    url::form_urlencoded::byte_serialize(key.as_bytes()).collect()
}

/// One line, at most 255 characters.
fn summary(title: &str) -> String {
    let line: String = title.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate(&line, SUMMARY_MAX_CHARS)
}

#[async_trait::async_trait]
impl Receiver for Jira {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let incident = n
            .primary()
            .ok_or_else(|| DeliveryError::permanent("jira: the notification carries no incident"))?;
        let label = fingerprint_label(&incident.fingerprint);
        // A memo of an issue Herald resolved says nothing about what is open now: look again by label.
        let remembered = memo
            .and_then(|m| serde_json::from_value::<JiraMemo>(m.clone()).ok())
            .filter(|m| m.resolved_at.is_none())
            .map(|m| m.key);
        match n.action {
            Action::Resolve => self.resolve(n, &label, remembered).await,
            Action::Open | Action::Update | Action::Test => self.fire(n, &label, remembered).await,
        }
    }
}

/// Atlassian Document Format for Cloud descriptions and comments.
mod adf {
    use serde_json::{Value, json};

    use super::{MAX_MESSAGE_CHARS, MAX_RESOURCES, truncate};
    use crate::domain::Notification;
    use crate::receivers::render;

    /// ADF refuses empty text nodes: an empty string gives no node at all.
    fn text(s: &str, marks: Value) -> Vec<Value> {
        if s.is_empty() {
            return vec![];
        }
        if marks.as_array().is_some_and(|m| m.is_empty()) {
            vec![json!({ "type": "text", "text": s })]
        } else {
            vec![json!({ "type": "text", "text": s, "marks": marks })]
        }
    }

    fn plain(s: &str) -> Vec<Value> {
        text(s, json!([]))
    }

    fn strong(s: &str) -> Vec<Value> {
        text(s, json!([{ "type": "strong" }]))
    }

    fn em(s: &str) -> Vec<Value> {
        text(s, json!([{ "type": "em" }]))
    }

    fn code(s: &str) -> Vec<Value> {
        text(s, json!([{ "type": "code" }]))
    }

    fn link(s: &str, href: &str) -> Vec<Value> {
        text(s, json!([{ "type": "link", "attrs": { "href": href } }]))
    }

    fn paragraph(content: Vec<Value>) -> Value {
        json!({ "type": "paragraph", "content": content })
    }

    fn heading(level: u8, s: &str) -> Value {
        json!({ "type": "heading", "attrs": { "level": level }, "content": plain(s) })
    }

    fn bullet_list(items: Vec<Vec<Value>>) -> Value {
        let items: Vec<Value> = items
            .into_iter()
            .map(|content| json!({ "type": "listItem", "content": [paragraph(content)] }))
            .collect();
        json!({ "type": "bulletList", "content": items })
    }

    fn table(header: &[&str], rows: Vec<Vec<String>>) -> Value {
        let cell = |kind: &str, s: &str| json!({ "type": kind, "attrs": {}, "content": [paragraph(plain(s))] });
        let mut out = vec![json!({
            "type": "tableRow",
            "content": header.iter().map(|h| cell("tableHeader", h)).collect::<Vec<_>>(),
        })];
        for row in rows {
            out.push(json!({
                "type": "tableRow",
                "content": row.iter().map(|c| cell("tableCell", c)).collect::<Vec<_>>(),
            }));
        }
        json!({
            "type": "table",
            "attrs": { "isNumberColumnEnabled": false, "layout": "default" },
            "content": out,
        })
    }

    fn code_block(s: &str) -> Value {
        json!({ "type": "codeBlock", "attrs": {}, "content": plain(s) })
    }

    pub fn document(n: &Notification) -> Value {
        let mut content = vec![heading(3, &n.title)];
        if !n.reason.is_empty() {
            content.push(paragraph(em(&n.reason)));
        }
        for i in &n.incidents {
            content.push(heading(
                4,
                &format!("[{}] {}", i.state.as_str().to_uppercase(), i.summary),
            ));
            let facts: Vec<Vec<Value>> = render::facts(i)
                .into_iter()
                .map(|(k, v)| {
                    let mut item = strong(&format!("{k}: "));
                    if k == "Argo CD" {
                        item.extend(link(&v, &v));
                    } else {
                        item.extend(plain(&v));
                    }
                    item
                })
                .collect();
            content.push(bullet_list(facts));
            if !i.resources.is_empty() {
                content.push(heading(5, "Resources"));
                let rows = i
                    .resources
                    .iter()
                    .take(MAX_RESOURCES)
                    .map(|r| {
                        vec![
                            r.kind.clone(),
                            r.namespace.clone(),
                            r.name.clone(),
                            r.status.clone(),
                            truncate(&r.message, MAX_MESSAGE_CHARS),
                        ]
                    })
                    .collect();
                content.push(table(&["Kind", "Namespace", "Name", "Status", "Message"], rows));
                if i.resources.len() > MAX_RESOURCES {
                    let more = i.resources.len() - MAX_RESOURCES;
                    content.push(paragraph(em(&format!("… and {more} more resources"))));
                }
            }
            for m in &i.messages {
                content.push(code_block(&truncate(m, MAX_MESSAGE_CHARS)));
            }
            if !i.hints.is_empty() {
                content.push(heading(5, "What to do"));
                let hints = i
                    .hints
                    .iter()
                    .map(|h| {
                        let mut item = strong(&format!("{}: ", h.title));
                        item.extend(plain(&h.text));
                        item
                    })
                    .collect();
                content.push(bullet_list(hints));
            }
            for note in &i.notes {
                content.push(paragraph(em(&format!("Note: {note}"))));
            }
            if let Some(url) = &i.app_url {
                let mut p = plain("Open ");
                p.extend(link(&format!("{} in Argo CD", i.app_name), url));
                content.push(paragraph(p));
            }
            let mut p = plain("Herald fingerprint: ");
            p.extend(code(&i.fingerprint));
            content.push(paragraph(p));
        }
        json!({ "version": 1, "type": "doc", "content": content })
    }
}

/// Jira wiki markup for Data Center descriptions and comments.
fn wiki(n: &Notification) -> String {
    // Characters that would start markup (links, tables, macros, bold, italics, images) are escaped.
    fn esc(s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            match c {
                '{' | '}' | '[' | ']' | '|' | '*' | '_' | '!' | '\\' => {
                    out.push('\\');
                    out.push(c);
                }
                '\n' | '\r' => out.push(' '),
                _ => out.push(c),
            }
        }
        out
    }
    let mut s = format!("h3. {}\n\n", esc(&n.title));
    if !n.reason.is_empty() {
        s.push_str(&format!("_{}_\n\n", esc(&n.reason)));
    }
    for i in &n.incidents {
        s.push_str(&format!(
            "h4. \\[{}\\] {}\n\n",
            esc(&i.state.as_str().to_uppercase()),
            esc(&i.summary)
        ));
        for (k, v) in render::facts(i) {
            if k == "Argo CD" {
                s.push_str(&format!(
                    "* *{k}*: [{}|{}]\n",
                    esc(&i.app_name),
                    v.replace(['|', ']', ' '], "")
                ));
            } else {
                s.push_str(&format!("* *{k}*: {}\n", esc(&v)));
            }
        }
        if !i.resources.is_empty() {
            s.push_str("\nh5. Resources\n||Kind||Namespace||Name||Status||Message||\n");
            let cell = |c: &str| {
                if c.is_empty() { " ".to_string() } else { esc(c) }
            };
            for r in i.resources.iter().take(MAX_RESOURCES) {
                s.push_str(&format!(
                    "|{}|{}|{}|{}|{}|\n",
                    cell(&r.kind),
                    cell(&r.namespace),
                    cell(&r.name),
                    cell(&r.status),
                    cell(&truncate(&r.message, MAX_MESSAGE_CHARS))
                ));
            }
            if i.resources.len() > MAX_RESOURCES {
                s.push_str(&format!(
                    "_… and {} more resources_\n",
                    i.resources.len() - MAX_RESOURCES
                ));
            }
        }
        for m in &i.messages {
            let m = truncate(m, MAX_MESSAGE_CHARS).replace("{noformat}", "{ noformat}");
            s.push_str(&format!("\n{{noformat}}\n{m}\n{{noformat}}\n"));
        }
        if !i.hints.is_empty() {
            s.push_str("\nh5. What to do\n");
            for h in &i.hints {
                s.push_str(&format!("* *{}*: {}\n", esc(&h.title), esc(&h.text)));
            }
        }
        for note in &i.notes {
            s.push_str(&format!("\n_Note: {}_\n", esc(note)));
        }
        s.push_str(&format!("\nHerald fingerprint: {{{{{}}}}}\n", esc(&i.fingerprint)));
    }
    s
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::TimeZone;
    use secrecy::SecretString;
    use serde_json::{Value, json};
    use wiremock::matchers::{any, body_partial_json, method, path};
    use wiremock::{Mock, MockServer, Request, ResponseTemplate};

    use super::*;
    use crate::domain::{Hint, Incident, ResourceRef};
    use crate::receivers::testing;

    const TOKEN: &str = "jira-token-s3cr3t-5b1f";
    const FINGERPRINT: &str = "argocd/payments:degraded";
    const APP_URL: &str = "https://argocd.example.com/applications/argocd/payments";

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 1, 12, 0, 0).unwrap()
    }

    fn incident() -> Incident {
        Incident {
            id: 7,
            fingerprint: FINGERPRINT.into(),
            kind: crate::domain::Kind::Degraded,
            severity: crate::domain::Severity::Critical,
            state: crate::domain::IncidentState::Firing,
            summary: "payments is Degraded: Deployment/payments-api has 0/3 ready replicas".into(),
            app_namespace: "argocd".into(),
            app_name: "payments".into(),
            project: "shop".into(),
            team: "payments".into(),
            destination_cluster: "in-cluster".into(),
            destination_namespace: "payments".into(),
            app_url: Some(APP_URL.into()),
            since: now() - chrono::Duration::minutes(20),
            fired_at: Some(now()),
            resources: vec![ResourceRef {
                kind: "Deployment".into(),
                namespace: "payments".into(),
                name: "payments-api".into(),
                status: "Degraded".into(),
                message: "Deployment exceeded its progress deadline".into(),
            }],
            messages: vec!["Back-off pulling image \"payments:1.2.3\"".into()],
            hints: vec![Hint {
                id: "image_pull".into(),
                title: "Check the image".into(),
                text: "The tag may not exist in the registry.".into(),
            }],
            ..Default::default()
        }
    }

    fn note(action: Action) -> Notification {
        Notification {
            receiver: "team-jira".into(),
            action,
            thread_key: FINGERPRINT.into(),
            title: "[FIRING] payments is Degraded".into(),
            reason: match action {
                Action::Resolve => "resolved".into(),
                Action::Update => "escalation step 1 (after 1h)".into(),
                _ => "fired".into(),
            },
            incidents: vec![incident()],
            created_at: now(),
        }
    }

    fn settings(server: &MockServer, api: JiraApi) -> JiraSettings {
        JiraSettings {
            url: format!("{}/", server.uri()),
            api,
            project: "PAY".into(),
            issue_type: "Task".into(),
            user: (api == JiraApi::Cloud).then(|| "bot@example.com".to_string()),
            token: SecretString::from(TOKEN),
            labels: vec!["argocd".into(), "on call".into()],
            resolve_transition: Some("done".into()),
            reopen_transition: Some("Reopen".into()),
            reopen_window: Some(Duration::from_secs(24 * 3600)),
        }
    }

    fn jira(server: &MockServer, api: JiraApi) -> Jira {
        Jira::new(settings(server, api), testing::http())
    }

    fn base(api: JiraApi) -> &'static str {
        match api {
            JiraApi::Cloud => "/rest/api/3",
            JiraApi::Datacenter => "/rest/api/2",
        }
    }

    fn search_path(api: JiraApi) -> &'static str {
        match api {
            JiraApi::Cloud => "/rest/api/3/search/jql",
            JiraApi::Datacenter => "/rest/api/2/search",
        }
    }

    fn label() -> String {
        fingerprint_label(FINGERPRINT)
    }

    /// Any request no other mock expects fails the test (on drop of the server).
    async fn refuse_anything_else(server: &MockServer) {
        Mock::given(any())
            .respond_with(ResponseTemplate::new(599))
            .with_priority(u8::MAX)
            .expect(0)
            .named("an unexpected request")
            .mount(server)
            .await;
    }

    fn issue(key: &str, category: &str, resolved: Option<DateTime<Utc>>) -> Value {
        json!({
            "id": "10001",
            "key": key,
            "fields": {
                "status": { "name": category, "statusCategory": { "key": category } },
                "labels": [label()],
                "resolutiondate": resolved.map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3f%z").to_string()),
            }
        })
    }

    async fn search_finds(server: &MockServer, api: JiraApi, issues: Vec<Value>) {
        let body = match api {
            JiraApi::Cloud => json!({ "issues": issues, "isLast": true }),
            JiraApi::Datacenter => {
                json!({ "startAt": 0, "maxResults": 50, "total": issues.len(), "issues": issues })
            }
        };
        Mock::given(method("POST"))
            .and(path(search_path(api)))
            .and(body_partial_json(json!({
                "jql": format!("project = \"PAY\" AND labels = \"{}\" ORDER BY created DESC", label()),
                "fields": ["status", "labels", "resolutiondate"],
            })))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
            .expect(1)
            .named("search by fingerprint label")
            .mount(server)
            .await;
    }

    async fn comment_expected(server: &MockServer, api: JiraApi, key: &str, times: u64) {
        Mock::given(method("POST"))
            .and(path(format!("{}/issue/{key}/comment", base(api))))
            .respond_with(ResponseTemplate::new(201).set_body_json(json!({ "id": "100" })))
            .expect(times)
            .named("comment")
            .mount(server)
            .await;
    }

    async fn create_expected(server: &MockServer, api: JiraApi, times: u64) {
        Mock::given(method("POST"))
            .and(path(format!("{}/issue", base(api))))
            .respond_with(ResponseTemplate::new(201).set_body_json(json!({
                "id": "10042", "key": "PAY-42", "self": "https://jira.example.com/rest/api/2/issue/10042",
            })))
            .expect(times)
            .named("create issue")
            .mount(server)
            .await;
    }

    async fn transitions_offered(server: &MockServer, api: JiraApi, key: &str) {
        Mock::given(method("GET"))
            .and(path(format!("{}/issue/{key}/transitions", base(api))))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "transitions": [
                    { "id": "11", "name": "To Do" },
                    { "id": "31", "name": "Done" },
                    { "id": "41", "name": "Reopen" },
                ]
            })))
            .expect(1)
            .named("list transitions")
            .mount(server)
            .await;
    }

    async fn transition_expected(server: &MockServer, api: JiraApi, key: &str, id: &str) {
        Mock::given(method("POST"))
            .and(path(format!("{}/issue/{key}/transitions", base(api))))
            .and(body_partial_json(json!({ "transition": { "id": id } })))
            .respond_with(ResponseTemplate::new(204))
            .expect(1)
            .named("apply transition")
            .mount(server)
            .await;
    }

    async fn bodies(server: &MockServer, method_name: &str, p: &str) -> Vec<Value> {
        server
            .received_requests()
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.method.as_str() == method_name && r.url.path() == p)
            .map(|r| r.body_json::<Value>().unwrap())
            .collect()
    }

    fn nodes_of_type<'a>(v: &'a Value, kind: &str, out: &mut Vec<&'a Value>) {
        match v {
            Value::Object(o) => {
                if o.get("type").and_then(Value::as_str) == Some(kind) {
                    out.push(v);
                }
                o.values().for_each(|c| nodes_of_type(c, kind, out));
            }
            Value::Array(a) => a.iter().for_each(|c| nodes_of_type(c, kind, out)),
            _ => {}
        }
    }

    fn error_text(e: &DeliveryError) -> String {
        format!("{e} {e:?}")
    }

    #[tokio::test]
    async fn cloud_open_searches_by_label_then_creates_one_issue_described_in_adf() {
        let server = MockServer::start().await;
        search_finds(&server, JiraApi::Cloud, vec![]).await;
        create_expected(&server, JiraApi::Cloud, 1).await;
        refuse_anything_else(&server).await;

        let out = jira(&server, JiraApi::Cloud)
            .deliver(&note(Action::Open), None)
            .await
            .unwrap();

        assert_eq!(out.memo, Some(json!({ "key": "PAY-42" })));
        assert_eq!(out.detail, "created PAY-42");
        let requests = server.received_requests().await.unwrap();
        use base64::Engine as _;
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("bot@example.com:{TOKEN}"));
        for r in &requests {
            assert_eq!(r.headers["authorization"], format!("Basic {basic}").as_str());
        }
        let created = bodies(&server, "POST", "/rest/api/3/issue").await;
        let fields = &created[0]["fields"];
        assert_eq!(fields["project"], json!({ "key": "PAY" }));
        assert_eq!(fields["issuetype"], json!({ "name": "Task" }));
        assert_eq!(fields["summary"], "[FIRING] payments is Degraded");
        assert_eq!(fields["labels"], json!([label(), "argocd", "on-call"]));
        let doc = &fields["description"];
        assert_eq!(doc["type"], "doc");
        assert_eq!(doc["version"], 1);
        let mut texts = vec![];
        nodes_of_type(doc, "text", &mut texts);
        assert!(
            texts.iter().all(|t| !t["text"].as_str().unwrap().is_empty()),
            "ADF refuses empty text nodes"
        );
        let all_text: String = texts.iter().map(|t| t["text"].as_str().unwrap()).collect();
        assert!(all_text.contains("payments-api"), "{all_text}");
        assert!(all_text.contains("Check the image"), "{all_text}");
        let mut tables = vec![];
        nodes_of_type(doc, "table", &mut tables);
        assert_eq!(tables.len(), 1, "resources are a table");
        assert_eq!(
            tables[0]["content"].as_array().unwrap().len(),
            2,
            "a header row and one resource"
        );
        let mut headings = vec![];
        nodes_of_type(doc, "heading", &mut headings);
        assert!(!headings.is_empty());
        assert!(
            texts
                .iter()
                .any(|t| t["marks"][0]["type"] == "link" && t["marks"][0]["attrs"]["href"] == APP_URL),
            "links to the application in Argo CD"
        );
    }

    #[tokio::test]
    async fn cloud_searches_with_search_jql_and_never_calls_the_retired_search_endpoint() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/rest/api/3/search"))
            .respond_with(ResponseTemplate::new(410).set_body_string("Gone"))
            .expect(0)
            .named("the retired /rest/api/3/search")
            .mount(&server)
            .await;
        search_finds(&server, JiraApi::Cloud, vec![issue("PAY-7", "indeterminate", None)]).await;
        comment_expected(&server, JiraApi::Cloud, "PAY-7", 1).await;
        refuse_anything_else(&server).await;

        let out = jira(&server, JiraApi::Cloud)
            .deliver(&note(Action::Open), None)
            .await
            .unwrap();

        assert_eq!(out.memo, Some(json!({ "key": "PAY-7" })));
        let search = bodies(&server, "POST", "/rest/api/3/search/jql").await;
        assert_eq!(search[0]["maxResults"], 50);
    }

    #[tokio::test]
    async fn datacenter_open_uses_api_2_a_bearer_token_and_wiki_markup() {
        let server = MockServer::start().await;
        search_finds(&server, JiraApi::Datacenter, vec![]).await;
        create_expected(&server, JiraApi::Datacenter, 1).await;
        refuse_anything_else(&server).await;

        let out = jira(&server, JiraApi::Datacenter)
            .deliver(&note(Action::Open), None)
            .await
            .unwrap();

        assert_eq!(out.memo, Some(json!({ "key": "PAY-42" })));
        for r in server.received_requests().await.unwrap() {
            assert_eq!(r.headers["authorization"], format!("Bearer {TOKEN}").as_str());
        }
        let created = bodies(&server, "POST", "/rest/api/2/issue").await;
        let fields = &created[0]["fields"];
        assert_eq!(fields["labels"], json!([label(), "argocd", "on-call"]));
        let description = fields["description"]
            .as_str()
            .expect("plain-text description on Data Center");
        assert!(description.starts_with("h3. "), "{description}");
        assert!(
            description.contains("||Kind||Namespace||Name||Status||Message||"),
            "{description}"
        );
        assert!(
            description.contains("|Deployment|payments|payments-api|Degraded|"),
            "{description}"
        );
        assert!(description.contains(&format!("[payments|{APP_URL}]")), "{description}");
        assert!(
            description.contains("{noformat}\nBack-off pulling image"),
            "{description}"
        );
    }

    #[tokio::test]
    async fn an_issue_found_again_by_its_label_gets_a_comment_and_no_second_issue() {
        for api in [JiraApi::Cloud, JiraApi::Datacenter] {
            let server = MockServer::start().await;
            // What a crash after "created" but before "memo stored" leaves behind.
            search_finds(
                &server,
                api,
                vec![
                    issue("PAY-9", "new", None),
                    issue("PAY-3", "done", Some(now() - chrono::Duration::days(30))),
                ],
            )
            .await;
            comment_expected(&server, api, "PAY-9", 1).await;
            create_expected(&server, api, 0).await;
            refuse_anything_else(&server).await;

            let out = jira(&server, api).deliver(&note(Action::Open), None).await.unwrap();

            assert_eq!(out.memo, Some(json!({ "key": "PAY-9" })), "{api:?}");
            assert_eq!(out.detail, "commented on PAY-9 (found by label)");
        }
    }

    #[tokio::test]
    async fn cloud_search_follows_the_next_page_token() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/rest/api/3/search/jql"))
            .and(body_partial_json(json!({ "nextPageToken": "page-2" })))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "issues": [issue("PAY-2", "indeterminate", None)], "isLast": true,
            })))
            .expect(1)
            .with_priority(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/rest/api/3/search/jql"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "issues": [issue("PAY-5", "done", Some(now() - chrono::Duration::days(9)))],
                "isLast": false,
                "nextPageToken": "page-2",
            })))
            .expect(1)
            .mount(&server)
            .await;
        comment_expected(&server, JiraApi::Cloud, "PAY-2", 1).await;
        refuse_anything_else(&server).await;

        let out = jira(&server, JiraApi::Cloud)
            .deliver(&note(Action::Open), None)
            .await
            .unwrap();

        assert_eq!(out.memo, Some(json!({ "key": "PAY-2" })));
    }

    #[tokio::test]
    async fn an_update_comments_on_the_remembered_issue_without_searching() {
        for api in [JiraApi::Cloud, JiraApi::Datacenter] {
            let server = MockServer::start().await;
            comment_expected(&server, api, "PAY-12", 1).await;
            refuse_anything_else(&server).await;

            let memo = json!({ "key": "PAY-12" });
            let out = jira(&server, api)
                .deliver(&note(Action::Update), Some(&memo))
                .await
                .unwrap();

            assert_eq!(out.memo, Some(json!({ "key": "PAY-12" })));
            assert_eq!(out.detail, "commented on PAY-12");
            let comment = &bodies(&server, "POST", &format!("{}/issue/PAY-12/comment", base(api))).await[0];
            let rendered = comment["body"].to_string();
            assert!(rendered.contains("escalation step 1 (after 1h)"), "{api:?}: {rendered}");
            assert!(rendered.contains("payments is Degraded"), "{api:?}: {rendered}");
        }
    }

    #[tokio::test]
    async fn resolve_comments_then_applies_the_resolve_transition_found_by_name() {
        for api in [JiraApi::Cloud, JiraApi::Datacenter] {
            let server = MockServer::start().await;
            comment_expected(&server, api, "PAY-12", 1).await;
            transitions_offered(&server, api, "PAY-12").await;
            transition_expected(&server, api, "PAY-12", "31").await;
            refuse_anything_else(&server).await;

            let memo = json!({ "key": "PAY-12" });
            let out = jira(&server, api)
                .deliver(&note(Action::Resolve), Some(&memo))
                .await
                .unwrap();

            assert_eq!(out.detail, "resolved PAY-12 (Done)");
            assert_eq!(
                out.memo,
                Some(json!({ "key": "PAY-12", "resolved_at": "2025-03-01T12:00:00Z" }))
            );
            let order: Vec<String> = server
                .received_requests()
                .await
                .unwrap()
                .iter()
                .map(|r| format!("{} {}", r.method, r.url.path()))
                .collect();
            let b = base(api);
            assert_eq!(
                order,
                [
                    format!("POST {b}/issue/PAY-12/comment"),
                    format!("GET {b}/issue/PAY-12/transitions"),
                    format!("POST {b}/issue/PAY-12/transitions"),
                ]
            );
        }
    }

    #[tokio::test]
    async fn the_resolve_transition_may_be_given_by_id() {
        let server = MockServer::start().await;
        comment_expected(&server, JiraApi::Cloud, "PAY-12", 1).await;
        transitions_offered(&server, JiraApi::Cloud, "PAY-12").await;
        transition_expected(&server, JiraApi::Cloud, "PAY-12", "31").await;
        refuse_anything_else(&server).await;
        let mut s = settings(&server, JiraApi::Cloud);
        s.resolve_transition = Some("31".into());

        let memo = json!({ "key": "PAY-12" });
        let out = Jira::new(s, testing::http())
            .deliver(&note(Action::Resolve), Some(&memo))
            .await
            .unwrap();

        assert_eq!(out.detail, "resolved PAY-12 (Done)");
    }

    #[tokio::test]
    async fn a_resolve_transition_that_does_not_exist_is_permanent_and_names_the_available_ones() {
        let server = MockServer::start().await;
        comment_expected(&server, JiraApi::Cloud, "PAY-12", 1).await;
        transitions_offered(&server, JiraApi::Cloud, "PAY-12").await;
        Mock::given(method("GET"))
            .and(path("/rest/api/3/issue/PAY-12"))
            .respond_with(ResponseTemplate::new(200).set_body_json(issue("PAY-12", "indeterminate", None)))
            .expect(1)
            .mount(&server)
            .await;
        refuse_anything_else(&server).await;
        let mut s = settings(&server, JiraApi::Cloud);
        s.resolve_transition = Some("Close Issue".into());

        let memo = json!({ "key": "PAY-12" });
        let err = Jira::new(s, testing::http())
            .deliver(&note(Action::Resolve), Some(&memo))
            .await
            .unwrap_err();

        let DeliveryError::Permanent { reason } = err else {
            panic!("{err:?}")
        };
        assert!(reason.contains("\"Close Issue\""), "{reason}");
        assert!(reason.contains("To Do (11), Done (31), Reopen (41)"), "{reason}");
    }

    #[tokio::test]
    async fn resolving_an_issue_someone_already_closed_succeeds() {
        let server = MockServer::start().await;
        comment_expected(&server, JiraApi::Cloud, "PAY-12", 1).await;
        Mock::given(method("GET"))
            .and(path("/rest/api/3/issue/PAY-12/transitions"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({ "transitions": [{ "id": "41", "name": "Reopen" }] })),
            )
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/rest/api/3/issue/PAY-12"))
            .respond_with(ResponseTemplate::new(200).set_body_json(issue("PAY-12", "done", Some(now()))))
            .expect(1)
            .mount(&server)
            .await;
        refuse_anything_else(&server).await;

        let memo = json!({ "key": "PAY-12" });
        let out = jira(&server, JiraApi::Cloud)
            .deliver(&note(Action::Resolve), Some(&memo))
            .await
            .unwrap();

        assert_eq!(out.detail, "commented on PAY-12 (already resolved)");
    }

    #[tokio::test]
    async fn a_new_occurrence_reopens_the_issue_resolved_within_the_window() {
        for api in [JiraApi::Cloud, JiraApi::Datacenter] {
            let server = MockServer::start().await;
            search_finds(
                &server,
                api,
                vec![issue("PAY-12", "done", Some(now() - chrono::Duration::hours(2)))],
            )
            .await;
            transitions_offered(&server, api, "PAY-12").await;
            transition_expected(&server, api, "PAY-12", "41").await;
            comment_expected(&server, api, "PAY-12", 1).await;
            create_expected(&server, api, 0).await;
            refuse_anything_else(&server).await;

            // The memo of the earlier resolve: Herald looks again rather than trusting it.
            let memo = json!({ "key": "PAY-12", "resolved_at": "2025-03-01T10:00:00Z" });
            let out = jira(&server, api)
                .deliver(&note(Action::Open), Some(&memo))
                .await
                .unwrap();

            assert_eq!(out.detail, "reopened PAY-12 (Reopen)", "{api:?}");
            assert_eq!(out.memo, Some(json!({ "key": "PAY-12" })));
        }
    }

    #[tokio::test]
    async fn an_issue_resolved_before_the_window_gets_a_new_issue_instead() {
        let server = MockServer::start().await;
        search_finds(
            &server,
            JiraApi::Cloud,
            vec![issue("PAY-12", "done", Some(now() - chrono::Duration::hours(25)))],
        )
        .await;
        create_expected(&server, JiraApi::Cloud, 1).await;
        refuse_anything_else(&server).await;

        let out = jira(&server, JiraApi::Cloud)
            .deliver(&note(Action::Open), None)
            .await
            .unwrap();

        assert_eq!(out.detail, "created PAY-42");
    }

    #[tokio::test]
    async fn without_a_reopen_transition_a_resolved_issue_is_never_reopened() {
        let server = MockServer::start().await;
        search_finds(&server, JiraApi::Cloud, vec![issue("PAY-12", "done", Some(now()))]).await;
        create_expected(&server, JiraApi::Cloud, 1).await;
        refuse_anything_else(&server).await;
        let mut s = settings(&server, JiraApi::Cloud);
        s.reopen_transition = None;

        let out = Jira::new(s, testing::http())
            .deliver(&note(Action::Open), None)
            .await
            .unwrap();

        assert_eq!(out.detail, "created PAY-42");
    }

    #[tokio::test]
    async fn a_reopen_transition_the_workflow_does_not_offer_falls_back_to_a_new_issue() {
        let server = MockServer::start().await;
        search_finds(&server, JiraApi::Cloud, vec![issue("PAY-12", "done", Some(now()))]).await;
        Mock::given(method("GET"))
            .and(path("/rest/api/3/issue/PAY-12/transitions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "transitions": [] })))
            .expect(1)
            .mount(&server)
            .await;
        create_expected(&server, JiraApi::Cloud, 1).await;
        refuse_anything_else(&server).await;

        let out = jira(&server, JiraApi::Cloud)
            .deliver(&note(Action::Open), None)
            .await
            .unwrap();

        assert_eq!(out.detail, "created PAY-42");
    }

    #[tokio::test]
    async fn a_remembered_issue_that_was_deleted_is_replaced() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/rest/api/3/issue/PAY-1/comment"))
            .respond_with(
                ResponseTemplate::new(404).set_body_json(json!({ "errorMessages": ["Issue does not exist"] })),
            )
            .expect(1)
            .mount(&server)
            .await;
        search_finds(&server, JiraApi::Cloud, vec![]).await;
        create_expected(&server, JiraApi::Cloud, 1).await;
        refuse_anything_else(&server).await;

        let memo = json!({ "key": "PAY-1" });
        let out = jira(&server, JiraApi::Cloud)
            .deliver(&note(Action::Update), Some(&memo))
            .await
            .unwrap();

        assert_eq!(out.memo, Some(json!({ "key": "PAY-42" })));
    }

    #[tokio::test]
    async fn resolve_without_a_memo_resolves_the_open_issue_found_by_label() {
        let server = MockServer::start().await;
        search_finds(
            &server,
            JiraApi::Datacenter,
            vec![issue("PAY-9", "indeterminate", None)],
        )
        .await;
        comment_expected(&server, JiraApi::Datacenter, "PAY-9", 1).await;
        transitions_offered(&server, JiraApi::Datacenter, "PAY-9").await;
        transition_expected(&server, JiraApi::Datacenter, "PAY-9", "31").await;
        refuse_anything_else(&server).await;

        let out = jira(&server, JiraApi::Datacenter)
            .deliver(&note(Action::Resolve), None)
            .await
            .unwrap();

        assert_eq!(out.detail, "resolved PAY-9 (Done)");
    }

    #[tokio::test]
    async fn resolve_with_nothing_open_changes_nothing() {
        let server = MockServer::start().await;
        search_finds(&server, JiraApi::Cloud, vec![issue("PAY-3", "done", Some(now()))]).await;
        refuse_anything_else(&server).await;

        let out = jira(&server, JiraApi::Cloud)
            .deliver(&note(Action::Resolve), None)
            .await
            .unwrap();

        assert_eq!(out.memo, None);
        assert!(out.detail.contains("nothing to resolve"), "{}", out.detail);
    }

    #[tokio::test]
    async fn rate_limited_is_transient_with_the_servers_retry_after() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/rest/api/3/search/jql"))
            .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "30"))
            .expect(1)
            .mount(&server)
            .await;
        refuse_anything_else(&server).await;

        let err = jira(&server, JiraApi::Cloud)
            .deliver(&note(Action::Open), None)
            .await
            .unwrap_err();

        assert!(
            matches!(&err, DeliveryError::Transient { retry_after: Some(d), .. } if *d == Duration::from_secs(30)),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn statuses_are_classified_by_the_shared_table() {
        let cases = [
            (500, true),
            (502, true),
            (503, true),
            (400, false),
            (401, false),
            (403, false),
            (404, false),
        ];
        for (status, transient) in cases {
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .and(path("/rest/api/2/issue/PAY-12/comment"))
                .respond_with(ResponseTemplate::new(status).set_body_json(json!({ "errorMessages": ["nope"] })))
                .expect(1)
                .mount(&server)
                .await;
            // A 404 on a remembered issue looks for it again; nothing is found and a new one is created…
            if status == 404 {
                search_finds(&server, JiraApi::Datacenter, vec![]).await;
                Mock::given(method("POST"))
                    .and(path("/rest/api/2/issue"))
                    .respond_with(ResponseTemplate::new(404).set_body_string("project PAY does not exist"))
                    .expect(1)
                    .mount(&server)
                    .await;
            }
            refuse_anything_else(&server).await;

            let memo = json!({ "key": "PAY-12" });
            let err = jira(&server, JiraApi::Datacenter)
                .deliver(&note(Action::Update), Some(&memo))
                .await
                .unwrap_err();

            // …and that 404 is permanent.
            assert_eq!(
                matches!(err, DeliveryError::Transient { .. }),
                transient,
                "HTTP {status}: {err:?}"
            );
            assert!(error_text(&err).contains(&format!("HTTP {status}")), "{err:?}");
        }
    }

    #[tokio::test]
    async fn a_create_rejected_as_bad_request_is_permanent_and_says_why() {
        let server = MockServer::start().await;
        search_finds(&server, JiraApi::Cloud, vec![]).await;
        Mock::given(method("POST"))
            .and(path("/rest/api/3/issue"))
            .respond_with(ResponseTemplate::new(400).set_body_json(json!({
                "errorMessages": [], "errors": { "issuetype": "Specify a valid issue type" }
            })))
            .expect(1)
            .mount(&server)
            .await;
        refuse_anything_else(&server).await;

        let err = jira(&server, JiraApi::Cloud)
            .deliver(&note(Action::Open), None)
            .await
            .unwrap_err();

        let DeliveryError::Permanent { reason } = err else {
            panic!("{err:?}")
        };
        assert!(reason.starts_with("jira create issue: HTTP 400"), "{reason}");
        assert!(reason.contains("Specify a valid issue type"), "{reason}");
    }

    /// A server that answers 401 repeating the credentials it was sent, in every form.
    struct EchoCredentials;

    impl wiremock::Respond for EchoCredentials {
        fn respond(&self, request: &Request) -> ResponseTemplate {
            use base64::Engine as _;
            let auth = request
                .headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let decoded = auth
                .strip_prefix("Basic ")
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            ResponseTemplate::new(401).set_body_string(format!("bad credentials: {auth} ({decoded})"))
        }
    }

    #[tokio::test]
    async fn the_token_never_appears_in_errors() {
        for api in [JiraApi::Cloud, JiraApi::Datacenter] {
            let server = MockServer::start().await;
            Mock::given(any())
                .respond_with(EchoCredentials)
                .expect(1)
                .mount(&server)
                .await;

            let err = jira(&server, api).deliver(&note(Action::Open), None).await.unwrap_err();

            let text = error_text(&err);
            assert!(matches!(err, DeliveryError::Permanent { .. }), "{text}");
            assert!(text.contains("bad credentials"), "{text}");
            assert!(!text.contains(TOKEN), "{api:?}: {text}");
            use base64::Engine as _;
            let basic = base64::engine::general_purpose::STANDARD.encode(format!("bot@example.com:{TOKEN}"));
            assert!(!text.contains(&basic), "{api:?}: {text}");
        }
        // Nothing listens there: a transport error, without the token either.
        let mut s = settings(&MockServer::start().await, JiraApi::Cloud);
        s.url = "http://127.0.0.1:9".into();
        let err = Jira::new(s, testing::http())
            .deliver(&note(Action::Open), None)
            .await
            .unwrap_err();
        assert!(matches!(err, DeliveryError::Transient { .. }), "{err:?}");
        assert!(!error_text(&err).contains(TOKEN));
    }

    #[test]
    fn the_fingerprint_label_is_sixteen_hex_digits_without_spaces() {
        let l = fingerprint_label("argocd/payments: a fingerprint with spaces");
        assert_eq!(l.len(), "herald-".len() + 16);
        assert!(l.starts_with("herald-"));
        assert!(l["herald-".len()..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(l, fingerprint_label("argocd/payments: a fingerprint with spaces"));
        assert_ne!(l, fingerprint_label("argocd/orders: a fingerprint with spaces"));
    }

    #[test]
    fn summaries_are_one_line_of_at_most_255_characters() {
        let long = format!("first line\nsecond {}", "é".repeat(400));
        let s = summary(&long);
        assert_eq!(s.chars().count(), 255);
        assert!(!s.contains('\n'));
        assert!(s.starts_with("first line second é"));
        assert!(s.ends_with('…'));
        assert_eq!(summary("short"), "short");
    }

    #[test]
    fn jira_dates_parse_with_or_without_a_colon_in_the_offset() {
        let expected = Utc.with_ymd_and_hms(2024, 5, 1, 8, 0, 0).unwrap();
        assert_eq!(parse_jira_time("2024-05-01T10:00:00.000+0200"), Some(expected));
        assert_eq!(parse_jira_time("2024-05-01T08:00:00Z"), Some(expected));
        assert_eq!(parse_jira_time("yesterday"), None);
    }

    #[test]
    fn empty_fields_leave_no_empty_text_nodes_in_adf() {
        let mut n = note(Action::Test);
        n.reason.clear();
        n.incidents[0].resources[0].namespace.clear();
        n.incidents[0].resources[0].message.clear();
        n.incidents[0].team.clear();
        let doc = adf::document(&n);
        let mut texts = vec![];
        nodes_of_type(&doc, "text", &mut texts);
        assert!(texts.iter().all(|t| !t["text"].as_str().unwrap().is_empty()));
    }
}
