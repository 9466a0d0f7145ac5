//! Application state over time: compares a new [`Snapshot`] with the stored state and decides whether it is stale,
//! a duplicate, or a change — and which transitions it makes. Pure: the caller passes "now" and stores the result.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::argocd::Snapshot;

/// What Herald keeps per Application: the latest snapshot plus its own "since" times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppState {
    pub snapshot: Snapshot,
    /// When Herald first saw the current sync status (Argo CD keeps no such time).
    pub sync_since: DateTime<Utc>,
    pub health_since: DateTime<Utc>,
    /// Since when each resource requiring pruning has been seen waiting, keyed `kind/namespace/name`.
    pub prune_since: std::collections::BTreeMap<String, DateTime<Utc>>,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    /// The ordering key of the stored snapshot (body time, else receive time).
    pub observed_at: DateTime<Utc>,
    /// Hash of the state-relevant content: equal hashes are duplicates.
    pub content_hash: String,
}

/// One change Herald records in the Application's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub field: String,
    pub from: Option<String>,
    pub to: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Older than what is stored: ignored.
    Stale { stored_at: DateTime<Utc> },
    /// Same content as stored: only `last_seen` moves.
    Duplicate(Box<AppState>),
    /// New or changed: the new state and what changed.
    Changed {
        state: Box<AppState>,
        transitions: Vec<Transition>,
    },
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Stale { .. } => "stale",
            Outcome::Duplicate(_) => "duplicate",
            Outcome::Changed { .. } => "changed",
        }
    }
}

pub fn content_hash(s: &Snapshot) -> String {
    // Everything but the time and the link: the same state rendered twice is the same state.
    let mut copy = s.clone();
    copy.observed_at = None;
    copy.argocd_url = None;
    let bytes = serde_json::to_vec(&copy).unwrap_or_default();
    hex::encode(&Sha256::digest(&bytes)[..16])
}

pub fn resource_key(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind}/{namespace}/{name}")
}

fn op_key(s: &Snapshot) -> Option<String> {
    s.operation.as_ref().map(|o| {
        format!(
            "{}@{}",
            o.phase,
            o.started_at.map(|t| t.to_rfc3339()).unwrap_or_default()
        )
    })
}

/// Applies `snap` (received at `now`) on top of `prev`.
pub fn apply(prev: Option<&AppState>, snap: Snapshot, now: DateTime<Utc>) -> Outcome {
    let observed_at = snap.observed_at.unwrap_or(now);
    let hash = content_hash(&snap);
    let Some(prev) = prev else {
        let mut transitions = vec![
            Transition {
                field: "sync".into(),
                from: None,
                to: snap.sync_status.clone(),
            },
            Transition {
                field: "health".into(),
                from: None,
                to: snap.health_status.clone(),
            },
        ];
        if let Some(op) = &snap.operation {
            transitions.push(Transition {
                field: "operation".into(),
                from: None,
                to: op.phase.clone(),
            });
        }
        let prune_since = snap
            .resources
            .iter()
            .filter(|r| r.requires_pruning)
            .map(|r| (resource_key(&r.kind, &r.namespace, &r.name), now))
            .collect();
        return Outcome::Changed {
            state: Box::new(AppState {
                snapshot: snap,
                sync_since: now,
                health_since: now,
                prune_since,
                first_seen: now,
                last_seen: now,
                observed_at,
                content_hash: hash,
            }),
            transitions,
        };
    };
    if observed_at < prev.observed_at {
        return Outcome::Stale {
            stored_at: prev.observed_at,
        };
    }
    if hash == prev.content_hash {
        let mut state = prev.clone();
        state.last_seen = now;
        state.observed_at = observed_at;
        if snap.argocd_url.is_some() {
            state.snapshot.argocd_url = snap.argocd_url;
        }
        state.snapshot.observed_at = snap.observed_at;
        return Outcome::Duplicate(Box::new(state));
    }
    let old = &prev.snapshot;
    let mut transitions = Vec::new();
    let mut push = |field: &str, from: &str, to: &str| {
        if from != to {
            transitions.push(Transition {
                field: field.into(),
                from: Some(from.into()),
                to: to.into(),
            });
        }
    };
    push("sync", &old.sync_status, &snap.sync_status);
    push("health", &old.health_status, &snap.health_status);
    push("revision", &old.revisions.join(","), &snap.revisions.join(","));
    let conds = |s: &Snapshot| {
        let mut v: Vec<String> = s.conditions.iter().map(|c| c.r#type.clone()).collect();
        v.sort();
        v.dedup();
        v.join(",")
    };
    push("conditions", &conds(old), &conds(&snap));
    let pruning = |s: &Snapshot| {
        s.resources
            .iter()
            .filter(|r| r.requires_pruning)
            .map(|r| resource_key(&r.kind, &r.namespace, &r.name))
            .collect::<Vec<_>>()
            .join(",")
    };
    push("requires_pruning", &pruning(old), &pruning(&snap));
    if op_key(old) != op_key(&snap)
        && let Some(op) = &snap.operation
    {
        transitions.push(Transition {
            field: "operation".into(),
            from: old.operation.as_ref().map(|o| o.phase.clone()),
            to: op.phase.clone(),
        });
    }

    let sync_since = if old.sync_status == snap.sync_status {
        prev.sync_since
    } else {
        now
    };
    let health_since = if old.health_status == snap.health_status {
        prev.health_since
    } else {
        now
    };
    let prune_since = snap
        .resources
        .iter()
        .filter(|r| r.requires_pruning)
        .map(|r| {
            let key = resource_key(&r.kind, &r.namespace, &r.name);
            let since = prev.prune_since.get(&key).copied().unwrap_or(now);
            (key, since)
        })
        .collect();
    Outcome::Changed {
        state: Box::new(AppState {
            snapshot: snap,
            sync_since,
            health_since,
            prune_since,
            first_seen: prev.first_seen,
            last_seen: now,
            observed_at,
            content_hash: hash,
        }),
        transitions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argocd::parse_body;

    fn snap(sync: &str, ts: &str) -> Snapshot {
        let body = format!(
            r#"{{"timestamp":"{ts}","app":{{"metadata":{{"name":"a","namespace":"argocd"}},"status":{{"sync":{{"status":"{sync}"}},"health":{{"status":"Healthy"}}}}}}}}"#
        );
        parse_body(body.as_bytes(), 64).expect("valid")
    }

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("time").with_timezone(&Utc)
    }

    #[test]
    fn a_change_keeps_since_for_unchanged_fields() {
        let now = t("2025-01-01T00:00:00Z");
        let Outcome::Changed { state, .. } = apply(None, snap("OutOfSync", "2025-01-01T00:00:00Z"), now) else {
            panic!("first is a change")
        };
        let later = t("2025-01-01T00:30:00Z");
        let mut s2 = snap("OutOfSync", "2025-01-01T00:30:00Z");
        s2.revisions = vec!["abc".into()];
        let Outcome::Changed {
            state: st2,
            transitions,
        } = apply(Some(&state), s2, later)
        else {
            panic!("revision change is a change")
        };
        assert_eq!(
            st2.sync_since, now,
            "another revision while OutOfSync does not restart the clock"
        );
        assert_eq!(transitions.len(), 1);
        assert_eq!(transitions[0].field, "revision");
    }

    #[test]
    fn older_snapshots_are_stale_and_duplicates_change_nothing() {
        let now = t("2025-01-01T01:00:00Z");
        let Outcome::Changed { state, .. } = apply(None, snap("Synced", "2025-01-01T01:00:00Z"), now) else {
            panic!()
        };
        assert!(matches!(
            apply(Some(&state), snap("OutOfSync", "2025-01-01T00:00:00Z"), now),
            Outcome::Stale { .. }
        ));
        assert!(matches!(
            apply(Some(&state), snap("Synced", "2025-01-01T01:00:05Z"), now),
            Outcome::Duplicate(_)
        ));
    }
}
