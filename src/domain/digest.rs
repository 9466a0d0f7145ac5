//! The per-team digest as the whole of Herald sees it: what it says for one team at one slot. `digest` gathers it
//! and decides when it is due; the receivers render it (`receivers::render::digest`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What a digest says, for one team at one slot. Every text in it comes from Argo CD or the API and is escaped by
/// whoever renders it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Digest {
    pub team: String,
    /// When it was made: the slot's time (later for a slot sent at start after Herald was down; the time of the
    /// command for `herald digest`). Durations are counted to it.
    pub at: DateTime<Utc>,
    /// The team's time zone, for the times shown.
    pub timezone: String,
    /// The longest first.
    pub out_of_sync: Vec<OutOfSyncApp>,
    /// The longest waiting first.
    pub pending_prunes: Vec<PendingPrune>,
    /// The longest firing first.
    pub firing: Vec<FiringIncident>,
    /// Active silences that concern the team, the soonest ending first.
    pub silences: Vec<SilenceLine>,
    /// Deliveries to the team's receivers that were given up on, the oldest first.
    pub dead: Vec<DeadDelivery>,
    /// The status page showing this team (`server.public_url` + `/?team=…`), where a cut list is seen whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_url: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutOfSyncApp {
    /// `namespace/name`.
    pub app: String,
    pub since: DateTime<Utc>,
    pub revision: Option<String>,
    /// How many of its resources are waiting to be pruned.
    pub pruning: usize,
    pub url: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingPrune {
    pub app: String,
    /// `Kind namespace/name`.
    pub resource: String,
    pub since: DateTime<Utc>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FiringIncident {
    pub app: String,
    /// The problem in a few words (`OutOfSync`, `Degraded`, `sync failed`).
    pub problem: String,
    pub summary: String,
    pub since: DateTime<Utc>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SilenceLine {
    pub id: String,
    /// `team=payments, app=api-*`.
    pub matchers: String,
    pub comment: String,
    pub created_by: String,
    pub ends_at: DateTime<Utc>,
    /// It ends before the next digest: the next one will not mention it.
    pub ends_before_next: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeadDelivery {
    pub id: i64,
    pub receiver: String,
    pub title: String,
    pub error: String,
    pub created_at: DateTime<Utc>,
}

impl Digest {
    /// Nothing to report: all green.
    pub fn is_empty(&self) -> bool {
        self.out_of_sync.is_empty()
            && self.pending_prunes.is_empty()
            && self.firing.is_empty()
            && self.silences.is_empty()
            && self.dead.is_empty()
    }

    /// One line for subjects and titles: `Digest for payments: 2 OutOfSync, 1 prune pending, 1 firing`.
    pub fn title(&self) -> String {
        let counts: Vec<String> = [
            (self.out_of_sync.len(), "OutOfSync", "OutOfSync"),
            (self.pending_prunes.len(), "prune pending", "prunes pending"),
            (self.firing.len(), "incident firing", "incidents firing"),
            (self.silences.len(), "silence", "silences"),
            (self.dead.len(), "dead delivery", "dead deliveries"),
        ]
        .into_iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, one, many)| format!("{n} {}", if n == 1 { one } else { many }))
        .collect();
        if counts.is_empty() {
            format!("Digest for {}: all green", self.team)
        } else {
            format!("Digest for {}: {}", self.team, counts.join(", "))
        }
    }
}

pub use super::time::time_zone;
