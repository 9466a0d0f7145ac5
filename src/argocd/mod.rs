//! What Argo CD sends: tolerant reading of the many body shapes (the `{timestamp, context, app}` envelope, a bare
//! Application, with or without Content-Type) into one strict [`Snapshot`]. Everything Herald needs is checked here,
//! once, with errors that say what is wrong and how to fix the notification template.

pub mod api;
pub mod caps;
mod held;
mod listing;
mod status;
pub mod sync_windows;
mod typed;
mod value;

pub use status::{HealthStatus, OperationPhase, ResultCode, SyncStatus};
pub use value::from_value;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

pub use crate::domain::{AppId, DEFAULT_INSTANCE};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Destination {
    pub server: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
}

impl Destination {
    /// The cluster as people name it: the destination name, else the server URL.
    pub fn cluster(&self) -> String {
        self.name.clone().or_else(|| self.server.clone()).unwrap_or_default()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncPolicy {
    pub automated: bool,
    pub prune: bool,
    pub self_heal: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Initiator {
    pub automated: bool,
    pub username: Option<String>,
}

impl Initiator {
    pub fn describe(&self) -> String {
        match (&self.username, self.automated) {
            (Some(u), _) => format!("user {u}"),
            (None, true) => "automated sync".into(),
            (None, false) => "unknown".into(),
        }
    }
}

/// A resource as reported by the last sync operation (`operationState.syncResult.resources[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultResource {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Empty (`Other("")`) when Argo CD sent none.
    pub status: ResultCode,
    pub message: String,
    /// A hook's phase; empty (`Other("")`) for a resource that is not a hook.
    pub hook_phase: OperationPhase,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    pub phase: OperationPhase,
    pub message: String,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub initiator: Initiator,
    /// The synced revision (single source); empty strings are left out.
    pub revision: Option<String>,
    /// The synced revisions of a multi-source Application (`syncResult.revisions`), one per source in order.
    #[serde(default)]
    pub revisions: Vec<String>,
    pub retry_count: i64,
    pub retry_limit: Option<i64>,
    pub resources: Vec<ResultResource>,
}

/// A resource from `status.resources[]` that is not in sync or requires pruning (synced ones are not kept).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceStatus {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The resource's own sync status; empty (`Other("")`) when Argo CD sent none.
    pub status: SyncStatus,
    pub requires_pruning: bool,
    pub health: Option<HealthStatus>,
    /// `health.message`, where Argo CD keeps per-resource health in the Application (before 3.0, or opted in).
    pub health_message: Option<String>,
}

/// Where an Application's manifests come from (`spec.source`, or each of `spec.sources`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRef {
    pub repo_url: String,
    pub path: Option<String>,
    pub chart: Option<String>,
    pub target_revision: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    pub r#type: String,
    pub message: String,
}

/// One Application as Herald understands it at one moment. Built only by [`parse_body`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub app: AppId,
    pub uid: Option<String>,
    /// `metadata.creationTimestamp`: when this incarnation of the Application (this uid) was created. Of two
    /// Applications under one name, the one created later is the newer, whatever their bodies' times say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    pub project: String,
    pub destination: Destination,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub sync_status: SyncStatus,
    pub revisions: Vec<String>,
    pub health_status: HealthStatus,
    pub health_message: Option<String>,
    pub operation: Option<Operation>,
    pub resources: Vec<ResourceStatus>,
    pub conditions: Vec<Condition>,
    pub sync_policy: SyncPolicy,
    /// `spec.source`, or `spec.sources` for a multi-source Application, in order.
    #[serde(default)]
    pub sources: Vec<SourceRef>,
    /// The revision deployed before the current one (from `status.history`), for recovery steps.
    pub previous_revision: Option<String>,
    /// The images the Application's live resources run (`status.summary.images`, `ghcr.io/acme/api:1.1`), each
    /// once, in Argo CD's order: what a deployment changed is told from them ([`crate::state::Release`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    /// `metadata.deletionTimestamp` is set: Argo CD is deleting the Application.
    pub deleting: bool,
    /// `status.health.lastTransitionTime` (Argo CD 2.14+): Argo CD's own time of the last health change.
    pub health_changed_at: Option<DateTime<Utc>>,
    /// Who told Herald: a webhook body, or the Argo CD API (resync, watch, confirmation).
    #[serde(default)]
    pub source: Source,
    /// Read from an Argo CD listing, which carries only the paths of Argo CD's field table
    /// ([`api::LIST_FIELDS`]): its uid, conditions, history and the operation's message, initiator and retries are
    /// absent, not empty. Never stored: [`Snapshot::complete_from`] takes them from the stored state first.
    #[serde(skip)]
    pub listed: bool,
    /// Link base from `context.argocdUrl`, when it is a safe link ([`crate::domain::link::safe_url`]); used only
    /// when `argocd.url` is not configured ([`ui_base`]).
    pub argocd_url: Option<String>,
    /// The Herald annotations of its AppProject (`ownership.annotation`, `ownership.receivers_annotation`), read
    /// through its instance's API (`argocd::api::ArgoCdApi::projects`, refreshed with each resync); empty without
    /// one. The Application's own annotations win (`routing::owning_team`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub project_annotations: BTreeMap<String, String>,
    /// When Argo CD saw this state: envelope `timestamp`, else the newest of `reconciledAt`,
    /// `operationState.finishedAt/startedAt`, `health.lastTransitionTime`. `None`: the body carries no time.
    pub observed_at: Option<DateTime<Utc>>,
}

impl Snapshot {
    /// What its sync operation deployed, if it succeeded (the revisions of a multi-source Application, joined).
    pub fn deployed_revision(&self) -> Option<String> {
        let op = self
            .operation
            .as_ref()
            .filter(|o| o.phase == OperationPhase::Succeeded)?;
        op.revision
            .clone()
            .or_else(|| (!op.revisions.is_empty()).then(|| op.revisions.join(",")))
    }
}

impl Snapshot {
    /// A listing item ([`Snapshot::listed`]) made whole with what only a whole Application carries, from `stored`
    /// (the live Application it is about, if any): a field the listing cannot carry is never a change. The
    /// operation's message, initiator and retries are kept only for the same operation (the same start); a sync
    /// result, and the synced revision of releases before 3.5, only when the listing has none.
    pub fn complete_from(&mut self, stored: Option<&Snapshot>) {
        if !std::mem::take(&mut self.listed) {
            return;
        }
        let Some(stored) = stored else { return };
        if self.uid.is_none() {
            self.uid.clone_from(&stored.uid);
        }
        if self.created_at.is_none() && self.uid == stored.uid {
            self.created_at = stored.created_at;
        }
        self.conditions.clone_from(&stored.conditions);
        self.previous_revision.clone_from(&stored.previous_revision);
        if self.revisions.is_empty() {
            self.revisions.clone_from(&stored.revisions);
        }
        if self.argocd_url.is_none() {
            self.argocd_url.clone_from(&stored.argocd_url);
        }
        if self.images.is_empty() {
            self.images.clone_from(&stored.images);
        }
        if let (Some(op), Some(old)) = (&mut self.operation, &stored.operation)
            && op.started_at == old.started_at
        {
            op.message.clone_from(&old.message);
            op.initiator.clone_from(&old.initiator);
            op.retry_count = old.retry_count;
            op.retry_limit = old.retry_limit;
            if op.resources.is_empty() {
                op.resources.clone_from(&old.resources);
            }
            if op.revision.is_none() && op.revisions.is_empty() {
                op.revision.clone_from(&old.revision);
                op.revisions.clone_from(&old.revisions);
            }
        }
    }
}

/// Where a snapshot came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A request from Argo CD Notifications.
    #[default]
    Webhook,
    /// Read from the Argo CD API.
    Api,
}

/// Why a body was refused. Every variant is the sender's fault (4xx) and says how to fix it.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PayloadError {
    #[error("the body is empty: the Argo CD template must send a JSON body, e.g. {{\"app\": {{{{toJson .app}}}}}}")]
    Empty,
    #[error(
        "the body is plain text, not JSON ({preview:?}). Argo CD sends the template's plain `message` when the \
         template has no `webhook.<service>` key equal to the service name: name the key `webhook.herald` for \
         `service.webhook.herald` and give it `method: POST` and a JSON `body` (see deploy/argocd/)"
    )]
    PlainText { preview: String },
    #[error("invalid JSON at line {line}, column {column}: {message}{hint}")]
    InvalidJson {
        line: usize,
        column: usize,
        message: String,
        hint: String,
    },
    #[error("JSON nested deeper than {0} levels is refused")]
    TooDeep(usize),
    #[error("the body must be a JSON object (the envelope or an Application), not {0}")]
    NotAnObject(&'static str),
    #[error(
        "no Application in the body: expected an envelope with `app` (template body `{{\"app\": {{{{toJson .app}}}}}}`) \
         or an Application object with `metadata.name`{0}"
    )]
    NoApplication(String),
    #[error("{path} is missing: {hint}")]
    Missing { path: String, hint: String },
    #[error("{path} must be {expected}, not {found}")]
    WrongType {
        path: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error(
        "{path} is \"<no value>\": the template referenced a key that does not exist (Go templates render a missing \
         key as <no value>); use {{{{toJson .app}}}} for the whole Application"
    )]
    NoValue { path: String },
    #[error("{path} is invalid: {message}")]
    Invalid { path: String, message: String },
}

/// Annotations not kept, large and of no use to Herald: kubectl's copy of the manifest and the notifications
/// controller's bookkeeping.
const DROPPED_ANNOTATIONS: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    "notified.notifications.argoproj.io",
];

/// Annotations are kept for ownership (`herald.io/team`) and routing; a value longer than this is someone's blob
/// (a manifest, a certificate) that would be stored with every state: it is left out, and so is any annotation
/// past the first [`MAX_ANNOTATIONS`].
const MAX_ANNOTATION_VALUE: usize = 2048;
const MAX_ANNOTATIONS: usize = 64;

/// A body's `context.argocdUrl` as Herald keeps it: a safe link ([`crate::domain::link::safe_url`]) without its
/// trailing slash; `None` for anything else (a line break, markup, another scheme).
fn link_base(raw: &str) -> Option<String> {
    crate::domain::link::safe_url(raw).map(|u| u.trim_end_matches('/').to_string())
}

/// The Argo CD UI an Application's links point to: the configured `argocd.url` when there is one, so a body
/// cannot choose where Herald's buttons point; else the body's `context.argocdUrl` (checked as a link when read).
/// The one place this is chosen, so that a choice per Argo CD instance can replace it.
pub fn ui_base<'a>(configured: Option<&'a str>, snap: &'a Snapshot) -> Option<&'a str> {
    configured.or(snap.argocd_url.as_deref())
}

/// The Application's page in the Argo CD UI that [`ui_base`] chooses, as a safe link.
pub fn app_url(configured: Option<&str>, snap: &Snapshot) -> Option<String> {
    crate::domain::link::app_page(ui_base(configured, snap)?, &snap.app.namespace, &snap.app.name)
}

/// Whether an annotation is kept (see [`cap_annotations`] for how many).
fn keep_annotation(key: &str, value: &str) -> bool {
    !DROPPED_ANNOTATIONS.contains(&key) && value.len() <= MAX_ANNOTATION_VALUE
}

/// The first [`MAX_ANNOTATIONS`] by name: the same ones whichever reader read them.
fn cap_annotations(annotations: &mut BTreeMap<String, String>) {
    while annotations.len() > MAX_ANNOTATIONS {
        annotations.pop_last();
    }
}

/// Refuses nesting beyond `max` before serde sees it (a cheap scan that skips strings, eight bytes at a time: it
/// reads every byte of every body).
fn check_depth(body: &[u8], max: usize) -> Result<(), PayloadError> {
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = body.get(i) {
        match b {
            b'"' => {
                i = string_end(body, i + 1);
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return Err(PayloadError::TooDeep(max));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Where the string whose content starts at `i` ends (just after its closing quote; the end of `body` if none).
fn string_end(body: &[u8], mut i: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    let has_byte = |word: u64, byte: u8| {
        let x = word ^ (ONES * u64::from(byte));
        x.wrapping_sub(ONES) & !x & HIGHS != 0
    };
    loop {
        while let Some(chunk) = body.get(i..i + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let word = u64::from_ne_bytes(word);
            if has_byte(word, b'"') || has_byte(word, b'\\') {
                break;
            }
            i += 8;
        }
        match body.get(i) {
            None => return body.len(),
            Some(b'"') => return i + 1,
            Some(b'\\') => i += 2,
            Some(_) => i += 1,
        }
    }
}

/// Parses one request body into a [`Snapshot`], bounded ([`caps::bound`]). `max_depth` bounds JSON nesting.
pub fn parse_body(body: &[u8], max_depth: usize) -> Result<Snapshot, PayloadError> {
    match parse_body_typed(body, max_depth)? {
        Some(snap) => Ok(snap),
        None => parse_tolerant(body),
    }
}

/// The quick part of [`parse_body`]: the checks every body passes (not empty, JSON, nesting within `max_depth`) and
/// the typed reader. `None`: the typed reader does not take it, and [`parse_tolerant`] must answer — which may
/// wait for another body's turn, so a caller on an async worker runs it on a blocking thread.
pub fn parse_body_typed(body: &[u8], max_depth: usize) -> Result<Option<Snapshot>, PayloadError> {
    let text_start = body.iter().position(|b| !b.is_ascii_whitespace());
    let Some(start) = text_start else {
        return Err(PayloadError::Empty);
    };
    if body[start] != b'{' && body[start] != b'[' {
        let preview: String = String::from_utf8_lossy(&body[start..body.len().min(start + 80)]).into_owned();
        return Err(PayloadError::PlainText { preview });
    }
    check_depth(body, max_depth)?;
    Ok(typed_only(body))
}

/// [`parse_body`] of a body whose nesting the caller has bounded already (a listing's item: see `listing`).
pub(crate) fn parse_shallow_body(body: &[u8]) -> Result<Snapshot, PayloadError> {
    match typed_only(body) {
        Some(snap) => Ok(snap),
        None => parse_tolerant(body),
    }
}

/// The common case, a well-formed body, read straight into what Herald keeps (`typed`). Whatever the typed reader
/// does not take — a wrong type, a missing name, bad UTF-8 — goes through [`parse_tolerant`], whose answer (the
/// snapshot, or the error naming the field) is the one given: both agree on every body they both take.
fn typed_only(body: &[u8]) -> Option<Snapshot> {
    let mut snap = typed::parse(std::str::from_utf8(body).ok()?)?;
    nil_is_absent(&mut snap);
    caps::bound(&mut snap);
    Some(snap)
}

/// The tolerant reader: a whole `Value` (about 35 bytes for each `{}` of a list: 46 MB for a hostile 4 MB body),
/// where the typed reader skips past each list's cap. One body at a time takes this way (a lock: the caller waits
/// for its turn, so it runs on a thread that may block), so a burst of bodies the typed reader refuses costs one
/// such `Value`, not one per thread.
pub fn parse_tolerant(body: &[u8]) -> Result<Snapshot, PayloadError> {
    static ONE_VALUE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_VALUE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        let text = String::from_utf8_lossy(body);
        let hint = if text.contains("<no value>") {
            ". The body contains <no value>: the template referenced a key that does not exist; use {{toJson ...}} \
             rather than hand-written JSON"
                .to_string()
        } else if e.is_syntax() || e.is_eof() {
            ". If the template writes JSON by hand, a quote inside a message breaks it: use {{toJson .app}}".to_string()
        } else {
            String::new()
        };
        PayloadError::InvalidJson {
            line: e.line(),
            column: e.column(),
            message: e.to_string().split(" at line").next().unwrap_or_default().to_string(),
            hint,
        }
    })?;
    let mut snap = from_value(&value)?;
    nil_is_absent(&mut snap);
    caps::bound(&mut snap);
    Ok(snap)
}

/// What a Go template writes for a nil value (`{{.app.status.operationState.operation.initiatedBy.username}}`
/// when Argo CD left it null).
const GO_NIL: &str = "<nil>";

/// A field a template rendered as `<nil>` had no value: it is kept as absent (an empty text, `None`, left out of a
/// list or map), so that no message shows Go's `<nil>`.
fn nil_is_absent(snap: &mut Snapshot) {
    fn text(s: &mut String) {
        if s.trim() == GO_NIL {
            s.clear();
        }
    }
    fn opt(s: &mut Option<String>) {
        if s.as_deref().is_some_and(|v| v.trim() == GO_NIL) {
            *s = None;
        }
    }
    fn list(v: &mut Vec<String>) {
        v.retain(|s| s.trim() != GO_NIL);
    }
    opt(&mut snap.uid);
    text(&mut snap.project);
    opt(&mut snap.destination.server);
    opt(&mut snap.destination.name);
    opt(&mut snap.destination.namespace);
    snap.labels.retain(|_, v| v.trim() != GO_NIL);
    snap.annotations.retain(|_, v| v.trim() != GO_NIL);
    list(&mut snap.revisions);
    opt(&mut snap.health_message);
    opt(&mut snap.previous_revision);
    if let Some(op) = &mut snap.operation {
        text(&mut op.message);
        opt(&mut op.initiator.username);
        opt(&mut op.revision);
        list(&mut op.revisions);
        for r in &mut op.resources {
            text(&mut r.message);
            // A known value is never `<nil>`: only an unknown one can be the template's nil.
            for word in [r.status.other_mut(), r.hook_phase.other_mut()].into_iter().flatten() {
                text(word);
            }
        }
    }
    for r in &mut snap.resources {
        if r.health
            .as_mut()
            .and_then(HealthStatus::other_mut)
            .is_some_and(|v| v.trim() == GO_NIL)
        {
            r.health = None;
        }
        opt(&mut r.health_message);
    }
    for c in &mut snap.conditions {
        text(&mut c.message);
    }
    for s in &mut snap.sources {
        opt(&mut s.path);
        opt(&mut s.chart);
        opt(&mut s.target_revision);
    }
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc))
}

/// An Application's name, as Kubernetes checks `metadata.name` of an Application: a DNS-1123 subdomain (at most
/// 253 characters, dot-separated parts of lowercase letters, digits and '-', each starting and ending with a letter
/// or digit). `.`, `..` and the like would otherwise reach the Argo CD API as paths of their own.
fn validate_name(path: &str, v: &str) -> Result<(), PayloadError> {
    validate_dns1123(path, v, false)
}

/// A namespace, as Kubernetes checks it: a DNS-1123 label (at most 63 characters, no dots).
fn validate_namespace(path: &str, v: &str) -> Result<(), PayloadError> {
    validate_dns1123(path, v, true)
}

fn validate_dns1123(path: &str, v: &str, label: bool) -> Result<(), PayloadError> {
    if v.contains("<no value>") {
        return Err(PayloadError::NoValue { path: path.into() });
    }
    let (what, max) = if label {
        (
            "a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or digit",
            63,
        )
    } else {
        (
            "a DNS-1123 subdomain: dot-separated parts of lowercase letters, digits and '-', each starting and \
             ending with a letter or digit",
            253,
        )
    };
    let wrong = dns1123_fault(v, label, max);
    match wrong {
        None => Ok(()),
        Some(fault) => Err(PayloadError::Invalid {
            path: path.into(),
            message: format!(
                "{:?} is not a Kubernetes name: {fault} (it must be {what}, at most {max} characters)",
                v.chars().take(64).collect::<String>()
            ),
        }),
    }
}

/// What is wrong with `v` as a DNS-1123 label (`label`) or subdomain of at most `max` bytes; `None` when nothing.
fn dns1123_fault(v: &str, label: bool, max: usize) -> Option<String> {
    if v.is_empty() {
        return Some("it is empty".into());
    }
    if v.len() > max {
        return Some(format!("it is {} characters long", v.chars().count()));
    }
    if let Some(c) = v
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '.'))
    {
        return Some(if c.is_uppercase() {
            format!("it has the upper-case letter {c:?}")
        } else {
            format!("it has the character {c:?}")
        });
    }
    if label && v.contains('.') {
        return Some("it has a '.'".into());
    }
    for part in v.split('.') {
        if part.is_empty() {
            return Some("it has an empty part between dots (or starts or ends with a dot)".into());
        }
        if part.starts_with('-') || part.ends_with('-') {
            return Some(format!("{part:?} starts or ends with '-'"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_as_kubernetes_checks_them_and_the_error_says_what_is_wrong() {
        let long = "a".repeat(254);
        for (name, fault) in [
            (".", "empty part between dots"),
            ("..", "empty part between dots"),
            ("a..b", "empty part between dots"),
            ("pay.", "empty part between dots"),
            ("Pay", "upper-case letter 'P'"),
            ("-pay", "starts or ends with '-'"),
            ("pay/x", "the character '/'"),
            ("pay%2F..", "the character '%'"),
            (long.as_str(), "254 characters long"),
        ] {
            let body = format!(r#"{{"app":{{"metadata":{{"name":"{name}"}}}}}}"#);
            let e = parse_body(body.as_bytes(), 64).expect_err(name).to_string();
            assert!(e.starts_with("app.metadata.name is invalid"), "{name}: {e}");
            assert!(e.contains(fault), "{name}: {e}");
            assert!(e.contains("DNS-1123 subdomain"), "{e}");
        }
        for name in ["pay", "pay-api.v2", "a", "0.1-x"] {
            let body = format!(r#"{{"app":{{"metadata":{{"name":"{name}"}}}}}}"#);
            assert_eq!(parse_body(body.as_bytes(), 64).expect(name).app.name, name);
        }
        // A namespace is a label: no dots, at most 63.
        for (namespace, fault) in [("team.pay", "has a '.'"), (&"n".repeat(64)[..], "64 characters long")] {
            let body = format!(r#"{{"app":{{"metadata":{{"name":"pay","namespace":"{namespace}"}}}}}}"#);
            let e = parse_body(body.as_bytes(), 64).expect_err(namespace).to_string();
            assert!(
                e.contains("app.metadata.namespace is invalid") && e.contains(fault),
                "{e}"
            );
            assert!(e.contains("DNS-1123 label"), "{e}");
        }
    }

    #[test]
    fn a_value_a_template_rendered_as_go_nil_is_absent() {
        let app = serde_json::json!({
            "metadata": {"name": "pay", "namespace": "argocd", "annotations": {"herald.io/team": "<nil>"}},
            "spec": {"source": {"repoURL": "https://git.example.com/pay.git", "targetRevision": "<nil>"}},
            "status": {
                "sync": {"status": "OutOfSync", "revision": "<nil>"},
                "health": {"status": "Degraded", "message": "<nil>"},
                "conditions": [{"type": "ComparisonError", "message": "<nil>"}],
                "operationState": {
                    "phase": "Failed",
                    "message": "<nil>",
                    "operation": {"initiatedBy": {"username": "<nil>", "automated": true}},
                    "syncResult": {"revision": "<nil>"}
                }
            }
        });
        for body in [serde_json::json!({"app": app}), app.clone()] {
            let snap = parse_body(body.to_string().as_bytes(), 64).expect("valid");
            let op = snap.operation.as_ref().expect("an operation");
            assert_eq!(op.initiator.describe(), "automated sync", "{body}");
            assert_eq!((op.message.as_str(), op.revision.as_deref()), ("", None));
            assert_eq!(snap.health_message, None);
            assert!(snap.revisions.is_empty(), "{:?}", snap.revisions);
            assert!(!snap.annotations.contains_key("herald.io/team"));
            assert_eq!(snap.sources[0].target_revision, None);
            assert!(snap.conditions.iter().all(|c| c.message.is_empty()));
            assert!(!format!("{snap:?}").contains("<nil>"), "{snap:?}");
        }
    }

    #[test]
    fn a_bare_application_is_accepted() {
        let body = br#"{"metadata":{"name":"pay","namespace":"argocd"},"status":{"sync":{"status":"OutOfSync"}}}"#;
        let s = parse_body(body, 64).expect("valid");
        assert_eq!(s.app.name, "pay");
        assert_eq!(s.sync_status, SyncStatus::OutOfSync);
        assert_eq!(s.health_status, HealthStatus::Unknown);
    }

    #[test]
    fn a_context_argocd_url_is_kept_only_as_a_safe_link_by_both_readers() {
        for (url, kept) in [
            ("https://cd.example.com/", Some("https://cd.example.com")),
            ("https://cd.example.com/ui", Some("https://cd.example.com/ui")),
            ("https://cd.example.com\n<!channel>", None),
            ("https://cd.example.com/\n[Fix-it-now](https://evil.example)", None),
            ("https://cd.example.com/\n!https://evil.example/x.png!", None),
            ("javascript:alert(1)", None),
            ("https://user:pw@cd.example.com", None),
        ] {
            let body = serde_json::json!({"context": {"argocdUrl": url}, "app": {"metadata": {"name": "pay"}}});
            let read = parse_body(body.to_string().as_bytes(), 64).expect("valid");
            let tolerant = from_value(&body).expect("valid");
            assert_eq!(read.argocd_url.as_deref(), kept, "{url:?}");
            assert_eq!(tolerant.argocd_url.as_deref(), kept, "{url:?}");
        }
    }

    #[test]
    fn the_configured_argocd_url_wins_over_the_bodys_which_serves_only_without_one() {
        let body = br#"{"context":{"argocdUrl":"https://chosen-by-sender.example"},"app":{"metadata":{"name":"pay"}}}"#;
        let mut snap = parse_body(body, 64).expect("valid");
        assert_eq!(
            app_url(Some("https://argocd.example.com"), &snap).as_deref(),
            Some("https://argocd.example.com/applications/argocd/pay")
        );
        assert_eq!(
            app_url(None, &snap).as_deref(),
            Some("https://chosen-by-sender.example/applications/argocd/pay")
        );
        snap.argocd_url = None;
        assert_eq!(app_url(None, &snap), None);
    }

    #[test]
    fn wrong_types_name_the_field() {
        let body = br#"{"app":{"metadata":{"name":5}}}"#;
        let e = parse_body(body, 64).unwrap_err().to_string();
        assert!(e.contains("app.metadata.name must be a string"), "{e}");
    }

    /// Every part of the Application the tolerant reader checks names its own field, with the `app.` prefix of the
    /// envelope (or none for a bare Application).
    #[test]
    fn each_part_names_its_field_in_errors() {
        let cases = [
            (
                r#"{"app":{"kind":"Deployment","metadata":{"name":"x"}}}"#,
                r#"app.kind is invalid: "Deployment" is not an Argo CD Application"#,
            ),
            (
                r#"{"app":{"metadata":{"name":"x","namespace":"A"}}}"#,
                r#"app.metadata.namespace is invalid: "A" is not a Kubernetes name"#,
            ),
            (
                r#"{"app":{"metadata":{"name":"x","uid":1}}}"#,
                "app.metadata.uid must be a string, not a number",
            ),
            (
                r#"{"app":{"metadata":{"name":"x","annotations":[]}}}"#,
                "app.metadata.annotations must be an object of strings, not an array",
            ),
            (
                r#"{"app":{"metadata":{"name":"x","deletionTimestamp":true}}}"#,
                "app.metadata.deletionTimestamp must be a string, not a boolean",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"spec":{"project":1}}}"#,
                "app.spec.project must be a string, not a number",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"spec":{"destination":{"name":1}}}}"#,
                "app.spec.destination.name must be a string, not a number",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"spec":{"syncPolicy":{"automated":{"selfHeal":"yes"}}}}}"#,
                "app.spec.syncPolicy.automated.selfHeal must be a boolean, not a string",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"spec":{"source":{"path":1}}}}"#,
                "app.spec.source.path must be a string, not a number",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"spec":{"sources":[{},{"chart":[]}]}}}"#,
                "app.spec.sources[1].chart must be a string, not an array",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"status":{"sync":{"revisions":["a",2]}}}}"#,
                "app.status.sync.revisions[1] must be a string, not a number",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"status":{"health":{"message":{}}}}}"#,
                "app.status.health.message must be a string, not an object",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"status":{"health":{"status":"<no value>"}}}}"#,
                "app.status.health.status is \"<no value>\"",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"status":{"operationState":"x"}}}"#,
                "app.status.operationState must be an object, not a string",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"status":{"operationState":{"syncResult":{"resources":[{"hookPhase":1}]}}}}}"#,
                "app.status.operationState.syncResult.resources[0].hookPhase must be a string, not a number",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"status":{"resources":[{"status":"OutOfSync","group":1}]}}}"#,
                "app.status.resources[0].group must be a string, not a number",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"status":{"conditions":{}}}}"#,
                "app.status.conditions must be an array, not an object",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"status":{"conditions":[{"type":1}]}}}"#,
                "app.status.conditions[0].type must be a string, not a number",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"status":{"history":{}}}}"#,
                "app.status.history must be an array, not an object",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"status":{"health":{"lastTransitionTime":1}}}}"#,
                "app.status.health.lastTransitionTime must be a string, not a number",
            ),
            (
                r#"{"app":{"metadata":{"name":"x"},"status":{"reconciledAt":1}}}"#,
                "app.status.reconciledAt must be a string, not a number",
            ),
            (
                r#"{"metadata":{"name":"x"},"status":{"conditions":[{"message":2}]}}"#,
                "status.conditions[0].message must be a string, not a number",
            ),
        ];
        for (body, expected) in cases {
            let value: Value = serde_json::from_str(body).expect("JSON");
            let e = from_value(&value).expect_err(body).to_string();
            assert!(e.starts_with(expected), "{body}: {e}");
        }
        // The envelope's time is enough: `reconciledAt` is then not read, so its type does not matter.
        let body = serde_json::json!({"timestamp": "2025-01-01T00:00:00Z",
                                      "app": {"metadata": {"name": "x"}, "status": {"reconciledAt": 1}}});
        assert!(from_value(&body).is_ok());
    }

    /// The byte-by-byte scan the fast one replaces: the reference it must agree with.
    fn depth_byte_by_byte(body: &[u8], max: usize) -> bool {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        for &b in body {
            if in_string {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => {
                    depth += 1;
                    if depth > max {
                        return false;
                    }
                }
                b'}' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        true
    }

    #[test]
    fn a_blob_in_an_annotation_is_not_kept() {
        let mut annotations: serde_json::Map<String, Value> = (0..100)
            .map(|i| (format!("k{i:03}"), Value::String("v".into())))
            .collect();
        annotations.insert("herald.io/team".into(), "payments".into());
        annotations.insert("blob".into(), "x".repeat(1_000_000).into());
        let body = serde_json::json!({"app": {"metadata": {"name": "a", "annotations": annotations},
                                              "status": {"sync": {"status": "Synced"}}}});
        let bytes = serde_json::to_vec(&body).unwrap();
        let typed = parse_body(&bytes, 64).expect("typed");
        let tolerant = from_value(&body).expect("tolerant");
        for snap in [&typed, &tolerant] {
            assert!(!snap.annotations.contains_key("blob"));
            assert_eq!(snap.annotations.len(), MAX_ANNOTATIONS);
        }
        assert_eq!(
            typed.annotations, tolerant.annotations,
            "both readers keep the same ones"
        );
    }

    #[test]
    fn the_depth_scan_agrees_with_reading_byte_by_byte() {
        let alphabet = b"{}[]\"\\ax";
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..400 {
            for _ in 0..20 {
                let body: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        alphabet[(seed % alphabet.len() as u64) as usize]
                    })
                    .collect();
                for max in [1, 3, 8] {
                    assert_eq!(
                        check_depth(&body, max).is_ok(),
                        depth_byte_by_byte(&body, max),
                        "{body:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let body = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(parse_body(body.as_bytes(), 64), Err(PayloadError::TooDeep(64)));
    }

    #[test]
    fn offsets_in_timestamps_are_honoured() {
        let body = br#"{"timestamp":"2025-10-02T18:13:13.201298+02:00","app":{"metadata":{"name":"a"}}}"#;
        let s = parse_body(body, 64).expect("valid");
        assert_eq!(
            s.observed_at.map(|t| t.to_rfc3339()),
            Some("2025-10-02T16:13:13.201298+00:00".into())
        );
    }
}
