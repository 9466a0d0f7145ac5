//! The content model of a notification — what every receiver renders, whatever its format — and the shared
//! renderings (plain text, Markdown, HTML). Receivers know this model only, never Argo CD payloads.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Where a notification stands in its thread's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Something started firing: open a ticket / post a message.
    Open,
    /// Still firing (repeat, escalation step, details changed): comment / reply in thread.
    Update,
    /// Everything in it recovered: close / resolve / edit.
    Resolve,
    /// `herald send-test`: a clearly marked test message.
    Test,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Open => "open",
            Action::Update => "update",
            Action::Resolve => "resolve",
            Action::Test => "test",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub status: String,
    pub message: String,
}

impl ResourceRef {
    pub fn display(&self) -> String {
        if self.namespace.is_empty() {
            format!("{}/{}", self.kind, self.name)
        } else {
            format!("{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hint {
    /// Stable id (`missing_crd`, `prune_disabled`, …).
    pub id: String,
    pub title: String,
    pub text: String,
}

/// One incident as a person needs to see it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IncidentView {
    pub id: i64,
    /// Stable across occurrences of the same problem: app identity + kind (+ operation where the kind says).
    pub fingerprint: String,
    pub kind: String,
    pub severity: String,
    /// `firing` or `resolved`.
    pub state: String,
    /// One line: what happened.
    pub summary: String,
    pub app_namespace: String,
    pub app_name: String,
    pub project: String,
    pub team: String,
    pub destination_cluster: String,
    pub destination_namespace: String,
    /// Link to the Application in Argo CD, when the URL is known.
    pub app_url: Option<String>,
    /// When the condition started (Herald's own clock).
    pub since: DateTime<Utc>,
    pub fired_at: Option<DateTime<Utc>>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub revision: Option<String>,
    pub previous_revision: Option<String>,
    pub initiated_by: Option<String>,
    pub resources: Vec<ResourceRef>,
    pub messages: Vec<String>,
    pub hints: Vec<Hint>,
    pub labels: std::collections::BTreeMap<String, String>,
    /// e.g. "not confirmed: Argo CD API unreachable".
    pub notes: Vec<String>,
}

/// What a receiver is asked to deliver: one message about one group of incidents (or one incident, for ticket
/// and paging receivers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    pub receiver: String,
    pub action: Action,
    /// Stable key of the conversation this message belongs to (a group, or an incident's fingerprint). Receivers
    /// that thread or ticket use it to find what they created before.
    pub thread_key: String,
    /// One line for subjects and titles.
    pub title: String,
    /// Why this message now ("fired", "escalation step 1 (after 1h)", "still firing", "resolved").
    pub reason: String,
    pub incidents: Vec<IncidentView>,
    pub created_at: DateTime<Utc>,
}

impl Notification {
    pub fn is_resolve(&self) -> bool {
        self.action == Action::Resolve
    }
    /// The incident for per-incident receivers (the first one).
    pub fn primary(&self) -> Option<&IncidentView> {
        self.incidents.first()
    }
    pub fn highest_severity(&self) -> &str {
        let rank = |s: &str| match s {
            "critical" => 3,
            "warning" => 2,
            "info" => 1,
            _ => 0,
        };
        self.incidents
            .iter()
            .map(|i| i.severity.as_str())
            .max_by_key(|s| rank(s))
            .unwrap_or("warning")
    }

    /// A notification used by `herald send-test` and receiver tests.
    pub fn test(receiver: &str, now: DateTime<Utc>) -> Self {
        let incident = IncidentView {
            id: 0,
            fingerprint: "herald-test".into(),
            kind: "test".into(),
            severity: "info".into(),
            state: "firing".into(),
            summary: "[TEST] Herald test notification: nothing is wrong".into(),
            app_namespace: "argocd".into(),
            app_name: "herald-test".into(),
            project: "default".into(),
            team: "test".into(),
            since: now,
            fired_at: Some(now),
            ..Default::default()
        };
        Self {
            receiver: receiver.into(),
            action: Action::Test,
            thread_key: format!("herald-test-{}", now.timestamp()),
            title: "[TEST] Herald test notification".into(),
            reason: "sent by `herald send-test` to check this receiver".into(),
            incidents: vec![incident],
            created_at: now,
        }
    }
}

pub mod render;
