//! The incident kinds (DESIGN §4) and their defaults.

use serde::{Deserialize, Serialize};
use std::time::Duration;

use crate::configuration::Severity;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    OutOfSync,
    PrunePending,
    SyncFailed,
    Degraded,
    SyncUnknown,
    Pruned,
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
            Kind::Pruned => (Duration::ZERO, Severity::Warning),
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
