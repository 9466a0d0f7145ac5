//! The content model of a notification: what every receiver renders, whatever its format. Receivers know this
//! model only, never Argo CD payloads. The renderings live with the receivers (`receivers::render`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::incident::{Incident, IncidentState, Kind, Severity};

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
    pub incidents: Vec<Incident>,
    pub created_at: DateTime<Utc>,
}

impl Notification {
    pub fn is_resolve(&self) -> bool {
        self.action == Action::Resolve
    }
    /// The incident for per-incident receivers (the first one).
    pub fn primary(&self) -> Option<&Incident> {
        self.incidents.first()
    }
    pub fn highest_severity(&self) -> Severity {
        self.incidents
            .iter()
            .map(|i| i.severity)
            .max()
            .unwrap_or(Severity::Warning)
    }

    /// A notification used by `herald send-test` and receiver tests.
    pub fn test(receiver: &str, now: DateTime<Utc>) -> Self {
        let incident = Incident {
            id: 0,
            fingerprint: "herald-test".into(),
            kind: Kind::Test,
            severity: Severity::Info,
            state: IncidentState::Firing,
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

/// Where an outbox row stands: waiting (or being retried), delivered, or given up on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    Pending,
    Done,
    Dead,
}

impl DeliveryState {
    pub const ALL: [DeliveryState; 3] = [DeliveryState::Pending, DeliveryState::Done, DeliveryState::Dead];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Done => "done",
            DeliveryState::Dead => "dead",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Action {
    pub fn parse(s: &str) -> Option<Self> {
        [Action::Open, Action::Update, Action::Resolve, Action::Test]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}
