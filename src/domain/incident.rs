//! The incident as the whole of Herald sees it: its kind, severity and lifecycle state as enums, the resources it
//! names and the hints that say what to do. Everything downstream of `incidents` (routing, store, receivers)
//! speaks these types; only the store turns them into text.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    #[default]
    OutOfSync,
    PrunePending,
    SyncFailed,
    Degraded,
    SyncUnknown,
    Pruned,
    /// `herald send-test`: a marked test message; never configured, never stored.
    #[serde(skip_deserializing)]
    Test,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::OutOfSync,
        Kind::PrunePending,
        Kind::SyncFailed,
        Kind::Degraded,
        Kind::SyncUnknown,
        Kind::Pruned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::OutOfSync => "out_of_sync",
            Kind::PrunePending => "prune_pending",
            Kind::SyncFailed => "sync_failed",
            Kind::Degraded => "degraded",
            Kind::SyncUnknown => "sync_unknown",
            Kind::Pruned => "pruned",
            Kind::Test => "test",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Default `for` and severity.
    pub fn defaults(self) -> (Duration, Severity) {
        match self {
            Kind::OutOfSync => (Duration::from_secs(3600), Severity::Warning),
            Kind::PrunePending => (Duration::from_secs(3600), Severity::Warning),
            Kind::SyncFailed => (Duration::ZERO, Severity::Critical),
            Kind::Degraded => (Duration::from_secs(300), Severity::Critical),
            Kind::SyncUnknown => (Duration::from_secs(600), Severity::Warning),
            Kind::Pruned | Kind::Test => (Duration::ZERO, Severity::Warning),
        }
    }

    /// Informational kinds never resolve: they fire once and are closed at once.
    pub fn is_informational(self) -> bool {
        matches!(self, Kind::Pruned)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    #[default]
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [Severity::Info, Severity::Warning, Severity::Critical]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IncidentState {
    Pending,
    #[default]
    Firing,
    Resolved,
}

impl IncidentState {
    pub fn as_str(self) -> &'static str {
        match self {
            IncidentState::Pending => "pending",
            IncidentState::Firing => "firing",
            IncidentState::Resolved => "resolved",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Self::Pending),
            "firing" => Some(Self::Firing),
            "resolved" => Some(Self::Resolved),
            _ => None,
        }
    }
}

impl std::fmt::Display for IncidentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
pub struct Incident {
    pub id: i64,
    /// Stable across occurrences of the same problem: app identity + kind (+ operation where the kind says).
    pub fingerprint: String,
    pub kind: Kind,
    pub severity: Severity,
    /// `firing` or `resolved` (pending incidents are not shown to receivers).
    pub state: IncidentState,
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
    /// Why it resolved, when it was not its condition going away (e.g. "Application deleted").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
}
