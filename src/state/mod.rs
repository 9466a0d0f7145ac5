//! Application state over time: compares a new [`Snapshot`] with the stored state and decides whether it is stale,
//! a duplicate, or a change — and which transitions it makes — and follows the Application's life: created, being
//! deleted, deleted ([`delete`]), created again under the same name (a new `metadata.uid`). Pure: the caller passes
//! "now" and stores the result.

mod hash;

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::argocd::Snapshot;

pub use hash::content_hash;

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
    /// `sync_since` / `health_since` are lower bounds: Herald first saw this Application through the Argo CD API
    /// (a resync after a wiped store, say), not when its status changed.
    #[serde(default)]
    pub sync_since_at_least: bool,
    #[serde(default)]
    pub health_since_at_least: bool,
    /// When Argo CD confirmed the Application is gone (the API answered 404, a complete listing lacked it, the
    /// stream said DELETED, or a deletion body arrived with no API configured to confirm by).
    #[serde(default)]
    pub deleted_at: Option<DateTime<Utc>>,
    /// The resources that were waiting to be pruned (as [`resource_key`]s) when the current sync operation
    /// started: a sync that prunes exactly those did what the prune hint asked.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub awaited_prunes: std::collections::BTreeSet<String>,
    /// The revision the last successful sync Herald saw deployed, and when that sync finished (Argo CD's time):
    /// kept across the states in between (a running or failed sync), so the same deployment is never a change
    /// twice and an older sync arriving late never reads as a rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed: Option<(String, Option<DateTime<Utc>>)>,
    /// What ran before the last operation that changed what runs (images, revisions, chart versions): a problem
    /// after a deployment is told what changed from it to now (`incidents::view::deployment`). An operation that
    /// changes nothing (a self-heal, a sync of the same commit) leaves it, so the deployment before stays the one
    /// told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Before>,
    /// What ran just before the current operation started, until that operation changes something (then it
    /// becomes [`AppState::before`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_operation: Option<Before>,
}

/// What an Application runs, as far as a deployment changes it: the images of its live resources and the revision
/// of each source (a Helm source's revision is its chart's version). Kept in the stored state (a document: no
/// column, no migration).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// `status.summary.images`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    /// One per source, in order: what the last operation synced (`syncResult.revision(s)`, else the operation's
    /// `sync.revision`), else what Argo CD compares with (`status.sync.revision(s)`). Empty: unknown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<String>,
}

impl Release {
    pub fn of(s: &Snapshot) -> Self {
        let synced = s.operation.as_ref().map(|op| {
            if op.revisions.is_empty() {
                op.revision.iter().cloned().collect()
            } else {
                op.revisions.clone()
            }
        });
        Self {
            images: s.images.clone(),
            revisions: synced
                .filter(|r: &Vec<String>| !r.is_empty())
                .unwrap_or_else(|| s.revisions.clone()),
        }
    }
}

/// A [`Release`] and the operation (its start) that replaced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Before {
    pub release: Release,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<DateTime<Utc>>,
}

/// Where an Application is in its life, as `/v1/apps` and the timeline's `lifecycle` transitions name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lifecycle {
    Active,
    /// Argo CD is deleting it (`metadata.deletionTimestamp`).
    Deleting,
    /// Argo CD confirmed it is gone.
    Deleted,
}

impl Lifecycle {
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Active => "active",
            Lifecycle::Deleting => "deleting",
            Lifecycle::Deleted => "deleted",
        }
    }
}

impl std::fmt::Display for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AppState {
    /// `Deleting` while Argo CD deletes it, `Deleted` once confirmed gone, else `Active`.
    pub fn lifecycle(&self) -> Lifecycle {
        if self.deleted_at.is_some() {
            Lifecycle::Deleted
        } else if self.snapshot.deleting {
            Lifecycle::Deleting
        } else {
            Lifecycle::Active
        }
    }

    /// Whether incidents may be open for it: not while it is being deleted or after.
    pub fn is_live(&self) -> bool {
        self.deleted_at.is_none() && !self.snapshot.deleting
    }
}

/// One change Herald records in the Application's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub field: Field,
    pub from: Option<String>,
    pub to: String,
}

/// What a [`Transition`] is a change of; stored (in the timeline, in recorded events) by its name, `sync`…
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    Sync,
    Health,
    /// The sync operation's phase.
    Operation,
    Revision,
    Conditions,
    RequiresPruning,
    /// Active, being deleted, deleted (see [`AppState::lifecycle`]).
    Lifecycle,
}

impl Field {
    const ALL: [Field; 7] = [
        Field::Sync,
        Field::Health,
        Field::Operation,
        Field::Revision,
        Field::Conditions,
        Field::RequiresPruning,
        Field::Lifecycle,
    ];

    /// The name it is stored by.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Sync => "sync",
            Field::Health => "health",
            Field::Operation => "operation",
            Field::Revision => "revision",
            Field::Conditions => "conditions",
            Field::RequiresPruning => "requires_pruning",
            Field::Lifecycle => "lifecycle",
        }
    }

    /// The field a stored name is ([`Field::as_str`] read back); `None` for a name this Herald does not know.
    pub fn from_stored(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Older than what is stored: ignored.
    Stale { stored_at: DateTime<Utc> },
    /// Same content as stored: only when it was seen moves.
    Duplicate(Seen),
    /// New or changed: the new state and what changed.
    Changed {
        state: Box<AppState>,
        transitions: Vec<Transition>,
    },
}

/// What a duplicate moves in the stored state: when it was seen, its time, the link base it carried.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub last_seen: DateTime<Utc>,
    pub observed_at: DateTime<Utc>,
    pub snapshot_observed_at: Option<DateTime<Utc>>,
    pub argocd_url: Option<String>,
}

impl Seen {
    /// Whether it moves more than `last_seen` in `state`: the ordering key or the link must be stored before the
    /// body is acknowledged (a later, older body is judged stale by them); `last_seen` alone need not be.
    pub fn moves_state(&self, state: &AppState) -> bool {
        self.observed_at != state.observed_at
            || self.snapshot_observed_at != state.snapshot.observed_at
            || (self.argocd_url.is_some() && self.argocd_url != state.snapshot.argocd_url)
    }

    pub fn apply_to(self, state: &mut AppState) {
        state.last_seen = self.last_seen;
        state.observed_at = self.observed_at;
        if self.argocd_url.is_some() {
            state.snapshot.argocd_url = self.argocd_url;
        }
        state.snapshot.observed_at = self.snapshot_observed_at;
    }
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
    let hash = content_hash(&snap);
    match judge(prev, &snap, &hash, now) {
        Some(outcome) => outcome,
        None => change(prev, snap, hash, now),
    }
}

/// The stored state `snap` is compared with: none when `snap` is about another Application under the same name;
/// `Err` (stale) when the stored Application is gone.
fn compared_with<'a>(
    prev: Option<&'a AppState>,
    snap: &Snapshot,
    observed_at: DateTime<Utc>,
) -> Result<Option<&'a AppState>, Outcome> {
    let Some(p) = prev else { return Ok(None) };
    let stale = || Outcome::Stale {
        stored_at: p.observed_at.max(p.deleted_at.unwrap_or(p.observed_at)),
    };
    match incarnation(p, snap, observed_at) {
        Incarnation::Newer => Ok(None),
        // A late body of an earlier incarnation does not replace the later one.
        Incarnation::Earlier => Err(stale()),
        // A late body about an Application that is gone does not bring it back.
        Incarnation::Same if p.deleted_at.is_some() => Err(stale()),
        Incarnation::Same => Ok(Some(p)),
    }
}

/// Whether `snap` (with its [`content_hash`] `hash`) is stale or a duplicate of `prev`, decided without taking the
/// snapshot (the writer answers most bodies this way); `None`: it is a change, for [`change`].
pub fn judge(prev: Option<&AppState>, snap: &Snapshot, hash: &str, now: DateTime<Utc>) -> Option<Outcome> {
    let observed_at = snap.observed_at.unwrap_or(now);
    let prev = match compared_with(prev, snap, observed_at) {
        Err(stale) => return Some(stale),
        Ok(None) => return None,
        Ok(Some(p)) => p,
    };
    if second(observed_at) < second(ordering_time(prev)) && !later_operation(&prev.snapshot, snap) {
        return Some(Outcome::Stale {
            stored_at: prev.observed_at,
        });
    }
    (hash == prev.content_hash).then(|| {
        Outcome::Duplicate(Seen {
            last_seen: now,
            observed_at,
            snapshot_observed_at: snap.observed_at,
            argocd_url: snap.argocd_url.clone(),
        })
    })
}

/// The time a new body must not be older than to count: the stored body's, but never later than when Herald
/// received it (`last_seen`) — a body cannot describe a moment after it arrived. A body dated a few minutes ahead
/// (within `server.max_clock_skew`, so not clamped) would otherwise make every truly-current body after it stale
/// until the clock caught up — a failed sync among them.
fn ordering_time(prev: &AppState) -> DateTime<Utc> {
    prev.observed_at.min(prev.last_seen)
}

/// A time at Argo CD's precision: its times are whole seconds (`metav1.Time`, the template's `timestamp`), while
/// Herald's own — a body clamped to its arrival, an API read dated when it is read — have fractions. Compared
/// whole, a genuine body of the second a stored state was read or clamped to is not older than it.
fn second(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::SubsecRound;
    t.trunc_subsecs(0)
}

/// Argo CD's own order, which comes before the body times: an operation that started after the stored one's is a
/// later state, whatever the bodies' clocks say — of the same Application. Another incarnation's operations (an
/// older `metadata.uid` than the stored one) are not in that order: its late body is stale by its time, or two
/// incarnations' bodies arriving in turn would replace each other back and forth.
fn later_operation(stored: &Snapshot, new: &Snapshot) -> bool {
    if stored.uid.is_some() && new.uid.is_some() && stored.uid != new.uid {
        return false;
    }
    let started = |s: &Snapshot| s.operation.as_ref().and_then(|o| o.started_at);
    matches!((started(stored), started(new)), (Some(a), Some(b)) if b > a)
}

/// The first state of an Application.
fn first_state(snap: Snapshot, hash: String, now: DateTime<Utc>, observed_at: DateTime<Utc>) -> Outcome {
    let mut transitions = vec![
        Transition {
            field: Field::Sync,
            from: None,
            to: snap.sync_status.to_string(),
        },
        Transition {
            field: Field::Health,
            from: None,
            to: snap.health_status.to_string(),
        },
    ];
    if let Some(op) = &snap.operation {
        transitions.push(Transition {
            field: Field::Operation,
            from: None,
            to: op.phase.to_string(),
        });
    }
    let prune_since = snap
        .resources
        .iter()
        .filter(|r| r.requires_pruning)
        .map(|r| (resource_key(&r.kind, &r.namespace, &r.name), now))
        .collect();
    // Seen first through the API, Herald did not watch the status change: "now" is only a lower bound, and
    // Argo CD's own health time is better where it has one.
    let from_api = snap.source == crate::argocd::Source::Api;
    let health_since = match snap.health_changed_at {
        Some(t) if from_api => t.min(now),
        _ => now,
    };
    let deployed = deployment(&snap);
    Outcome::Changed {
        state: Box::new(AppState {
            snapshot: snap,
            sync_since: now,
            health_since,
            prune_since,
            first_seen: now,
            last_seen: now,
            observed_at,
            content_hash: hash,
            sync_since_at_least: from_api,
            health_since_at_least: from_api && health_since == now,
            deleted_at: None,
            awaited_prunes: Default::default(),
            deployed,
            before: None,
            before_operation: None,
        }),
        transitions,
    }
}

/// `snap` (with its [`content_hash`] `hash`) on top of `prev`, which [`judge`] found it neither stale nor a duplicate
/// of: the new state and its transitions.
pub fn change(prev: Option<&AppState>, snap: Snapshot, hash: String, now: DateTime<Utc>) -> Outcome {
    let observed_at = snap.observed_at.unwrap_or(now);
    let prev = match compared_with(prev, &snap, observed_at) {
        Err(stale) => return stale,
        Ok(None) => return first_state(snap, hash, now, observed_at),
        Ok(Some(p)) => p,
    };
    let transitions = transitions(&prev.snapshot, &snap);
    Outcome::Changed {
        state: Box::new(next_state(prev, snap, hash, now, observed_at)),
        transitions,
    }
}

/// A field of the Application's timeline: its name and its value in a snapshot, as text.
/// Borrowed where the snapshot holds it as it is, so an unchanged field costs no copy.
type TimelineField = (Field, fn(&Snapshot) -> Cow<'_, str>);

/// The fields whose changes the timeline records, besides the operation.
const TIMELINE_FIELDS: [TimelineField; 5] = [
    (Field::Sync, |s| Cow::Borrowed(s.sync_status.as_str())),
    (Field::Health, |s| Cow::Borrowed(s.health_status.as_str())),
    (Field::Revision, |s| Cow::Owned(s.revisions.join(","))),
    (Field::Conditions, condition_types),
    (Field::RequiresPruning, requiring_pruning),
];

/// What changed from `old` to `new`, field by field, for the Application's timeline.
fn transitions(old: &Snapshot, new: &Snapshot) -> Vec<Transition> {
    let mut out: Vec<Transition> = TIMELINE_FIELDS
        .iter()
        .filter_map(|(field, value)| {
            let (from, to) = (value(old), value(new));
            (from != to).then(|| Transition {
                field: *field,
                from: Some(from.into_owned()),
                to: to.into_owned(),
            })
        })
        .collect();
    if op_key(old) != op_key(new)
        && let Some(op) = &new.operation
    {
        out.push(Transition {
            field: Field::Operation,
            from: old.operation.as_ref().map(|o| o.phase.to_string()),
            to: op.phase.to_string(),
        });
    }
    out
}

/// The types of the Application's conditions, sorted, each once.
fn condition_types(s: &Snapshot) -> Cow<'_, str> {
    let mut v: Vec<String> = s.conditions.iter().map(|c| c.r#type.clone()).collect();
    v.sort();
    v.dedup();
    Cow::Owned(v.join(","))
}

/// What `s`'s sync deployed and when it finished, if it succeeded.
fn deployment(s: &Snapshot) -> Option<(String, Option<DateTime<Utc>>)> {
    Some((s.deployed_revision()?, s.operation.as_ref().and_then(|o| o.finished_at)))
}

/// The resources that require pruning, as [`resource_key`]s.
fn requiring_pruning(s: &Snapshot) -> Cow<'_, str> {
    let keys: Vec<String> = (s.resources.iter())
        .filter(|r| r.requires_pruning)
        .map(|r| resource_key(&r.kind, &r.namespace, &r.name))
        .collect();
    Cow::Owned(keys.join(","))
}

/// The state after `snap` changed `prev`: each "since" time moves to `now` only when its field changed.
fn next_state(
    prev: &AppState,
    snap: Snapshot,
    hash: String,
    now: DateTime<Utc>,
    observed_at: DateTime<Utc>,
) -> AppState {
    let same_sync = prev.snapshot.sync_status == snap.sync_status;
    // The last deployment: this snapshot's when it deployed something no older than the one kept.
    let deployed = match (deployment(&snap), &prev.deployed) {
        (Some(new), Some((_, Some(kept_at)))) if new.1.is_some_and(|at| at < *kept_at) => prev.deployed.clone(),
        (Some(new), _) => Some(new),
        (None, _) => prev.deployed.clone(),
    };
    // A new operation (another start time): what waited to be pruned just before it is what it was asked to prune.
    let started = |s: &Snapshot| s.operation.as_ref().map(|o| o.started_at);
    let awaited_prunes = if started(&snap) == started(&prev.snapshot) {
        prev.awaited_prunes.clone()
    } else {
        prev.prune_since.keys().cloned().collect()
    };
    let (before, before_operation) = befores(prev, &snap);
    let same_health = prev.snapshot.health_status == snap.health_status;
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
    AppState {
        snapshot: snap,
        sync_since: if same_sync { prev.sync_since } else { now },
        health_since: if same_health { prev.health_since } else { now },
        prune_since,
        first_seen: prev.first_seen,
        last_seen: now,
        observed_at,
        content_hash: hash,
        sync_since_at_least: prev.sync_since_at_least && same_sync,
        health_since_at_least: prev.health_since_at_least && same_health,
        deleted_at: None,
        awaited_prunes,
        deployed,
        before,
        before_operation,
    }
}

/// [`AppState::before`] and [`AppState::before_operation`] once `snap` follows `prev`: a new operation (another
/// start) remembers what ran just before it; once what runs differs from that within the same operation, the
/// operation changed something and what ran before it is the deployment's "before". Changes seen without a new
/// operation (drift, or the only body of an operation Herald saw) count against the last operation's "before".
fn befores(prev: &AppState, snap: &Snapshot) -> (Option<Before>, Option<Before>) {
    let started = |s: &Snapshot| s.operation.as_ref().and_then(|o| o.started_at);
    let now = Release::of(snap);
    let pending = if started(snap) != started(&prev.snapshot) {
        Some(Before {
            release: Release::of(&prev.snapshot),
            operation: started(snap),
        })
    } else {
        prev.before_operation.clone()
    };
    let pending = pending.or_else(|| {
        // Stored before these were kept: the previous snapshot is the best "before" there is.
        Some(Before {
            release: Release::of(&prev.snapshot),
            operation: started(snap),
        })
    });
    let before = match &pending {
        Some(p) if p.operation == started(snap) && p.release != now => pending.clone(),
        _ => prev.before.clone(),
    };
    (before, pending)
}

/// Which Application under the stored one's name a body is about.
#[derive(Debug, PartialEq, Eq)]
enum Incarnation {
    /// The stored one.
    Same,
    /// One created after it (the name deleted and created again): a new Application.
    Newer,
    /// One created before it: a late body of an Application that is no more.
    Earlier,
}

/// Which incarnation `snap` is of, against `prev`: a different `metadata.uid` is another one, ordered by
/// [`created_later`]; a body without a uid newer than the stored one's deletion is a new one.
fn incarnation(prev: &AppState, snap: &Snapshot, observed_at: DateTime<Utc>) -> Incarnation {
    match (&prev.snapshot.uid, &snap.uid) {
        (Some(a), Some(b)) if a != b => {
            if created_later(prev, snap, observed_at) {
                Incarnation::Newer
            } else {
                Incarnation::Earlier
            }
        }
        (Some(_), Some(_)) => Incarnation::Same,
        _ if prev.deleted_at.is_some_and(|d| observed_at > d) && !snap.deleting => Incarnation::Newer,
        _ => Incarnation::Same,
    }
}

/// Whether `snap`'s Application was created after `prev`'s (another uid under the same name). Kubernetes' own
/// order first: the later `metadata.creationTimestamp`, whatever the bodies' times say. Without it (or in the same
/// second), the bodies' times to the fraction, and last the uids: a strict order, so that of two incarnations'
/// bodies arriving in turn one stays and the other is stale — never each replacing the other back and forth (at
/// whole seconds, two bodies of one second would each have been the newer).
fn created_later(prev: &AppState, snap: &Snapshot, observed_at: DateTime<Utc>) -> bool {
    if let (Some(stored), Some(new)) = (prev.snapshot.created_at, snap.created_at)
        && stored != new
    {
        return new > stored;
    }
    let stored = ordering_time(prev);
    if observed_at != stored {
        return observed_at > stored;
    }
    snap.uid > prev.snapshot.uid
}

/// Argo CD confirmed the Application is gone: the state to store, or `None` when it was already deleted.
pub fn delete(prev: &AppState, now: DateTime<Utc>) -> Option<AppState> {
    if prev.deleted_at.is_some() {
        return None;
    }
    let mut state = prev.clone();
    state.deleted_at = Some(now);
    state.last_seen = now;
    Some(state)
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

    /// The state `apply` moves to where the test expects a change; anything else fails the test with `why`.
    fn changed(prev: Option<&AppState>, s: Snapshot, now: DateTime<Utc>, why: &str) -> AppState {
        match apply(prev, s, now) {
            Outcome::Changed { state, .. } => *state,
            _ => panic!("{why}"),
        }
    }

    /// The state an Application's first snapshot creates (always a change).
    fn first(s: Snapshot, now: DateTime<Utc>) -> AppState {
        changed(None, s, now, "the first snapshot is a change")
    }

    /// A captured body of `tests/fixtures/argocd/captured/`.
    fn captured(name: &str) -> Snapshot {
        let path = format!("{}/tests/fixtures/argocd/captured/{name}", env!("CARGO_MANIFEST_DIR"));
        parse_body(&std::fs::read(path).expect("a captured body"), 64).expect("valid")
    }

    #[test]
    fn what_ran_before_a_deployment_is_kept_through_its_running_state() {
        // 017: chart 6.9.0 running image 6.9.0; 020: the sync to 6.9.2 running (image still 6.9.0); 022: done.
        let (s017, s020, s022) = (
            captured("017_sync_podinfo_3_4.json"),
            captured("020_sync_podinfo_4_3.json"),
            captured("022_remove_podinfo_2_1.json"),
        );
        let ran = Release {
            images: vec!["ghcr.io/stefanprodan/aaaaaaa:6.9.0".into()],
            revisions: vec!["6.9.0".into()],
        };
        assert_eq!(Release::of(&s017), ran);
        let now = t("2025-10-02T17:10:00Z");
        let state = first(s017.clone(), now);
        assert_eq!(state.before, None, "nothing was deployed while Herald watched");
        let running = changed(Some(&state), s020, now, "the sync started");
        assert_eq!(running.before.as_ref().map(|b| &b.release), Some(&ran));
        let done = changed(Some(&running), s022.clone(), now, "the sync ended");
        assert_eq!(done.before.as_ref().map(|b| &b.release), Some(&ran));
        assert_eq!(
            Release::of(&done.snapshot),
            Release {
                images: vec!["ghcr.io/stefanprodan/aaaaaaa:6.9.2".into()],
                revisions: vec!["6.9.2".into()],
            }
        );
        // Without the running state (017 then 022): the same.
        let direct = changed(Some(&state), s022.clone(), now, "the sync ended");
        assert_eq!(direct.before, done.before);
        // A later sync that changes nothing (a self-heal) leaves the deployment before it told.
        let mut heal = s022;
        let op = heal.operation.as_mut().expect("an operation");
        op.started_at = Some(t("2025-10-02T17:20:00Z"));
        op.finished_at = Some(t("2025-10-02T17:20:05Z"));
        heal.observed_at = Some(t("2025-10-02T17:20:05Z"));
        let healed = changed(Some(&done), heal, now, "another sync");
        assert_eq!(healed.before, done.before);
        assert_ne!(healed.before_operation, done.before_operation);
    }

    #[test]
    fn a_state_stored_before_releases_were_kept_reads_and_learns_them() {
        let now = t("2025-10-02T17:10:00Z");
        let state = first(captured("017_sync_podinfo_3_4.json"), now);
        let mut stored = serde_json::to_value(&state).expect("a state");
        assert!(stored.get("before").is_none() && stored.get("before_operation").is_none());
        stored.as_object_mut().expect("an object").remove("before");
        let read: AppState = serde_json::from_value(stored).expect("an older state reads");
        let done = changed(
            Some(&read),
            captured("022_remove_podinfo_2_1.json"),
            now,
            "the sync ended",
        );
        assert_eq!(
            done.before.map(|b| b.release.images),
            Some(vec!["ghcr.io/stefanprodan/aaaaaaa:6.9.0".to_string()])
        );
    }

    #[test]
    fn a_change_keeps_since_for_unchanged_fields() {
        let now = t("2025-01-01T00:00:00Z");
        let state = first(snap("OutOfSync", "2025-01-01T00:00:00Z"), now);
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
        assert_eq!(transitions[0].field, Field::Revision);
    }

    /// An OutOfSync snapshot of the Application with `uid` (a new uid under the same name is a new Application).
    fn out_of_sync_as(uid: &str, ts: &str) -> Snapshot {
        let mut s = snap("OutOfSync", ts);
        s.uid = Some(uid.into());
        s
    }

    #[test]
    fn a_deleted_application_stays_deleted_until_a_new_one_takes_its_name() {
        let now = t("2025-01-01T00:00:00Z");
        let state = first(out_of_sync_as("u1", "2025-01-01T00:00:00Z"), now);
        assert_eq!(state.lifecycle(), Lifecycle::Active);
        let mut deleting = out_of_sync_as("u1", "2025-01-01T00:10:00Z");
        deleting.deleting = true;
        let state = changed(Some(&state), deleting, now, "deletion is a change");
        assert_eq!(state.lifecycle(), Lifecycle::Deleting);
        assert!(!state.is_live());
        let gone = delete(&state, t("2025-01-01T00:11:00Z")).expect("deleted");
        assert_eq!(gone.lifecycle(), Lifecycle::Deleted);
        for (l, word) in [
            (Lifecycle::Active, "active"),
            (Lifecycle::Deleting, "deleting"),
            (Lifecycle::Deleted, "deleted"),
        ] {
            assert_eq!(
                serde_json::to_value(l).expect("json"),
                word,
                "shown as the word it always was"
            );
            assert_eq!(l.to_string(), word, "and recorded so in the timeline");
        }
        assert_eq!(delete(&gone, t("2025-01-01T00:12:00Z")), None, "deleted once");

        let late = out_of_sync_as("u1", "2025-01-01T00:20:00Z");
        assert!(
            matches!(apply(Some(&gone), late, now), Outcome::Stale { .. }),
            "the same uid stays gone"
        );

        let later = t("2025-01-01T01:00:00Z");
        let new = changed(
            Some(&gone),
            out_of_sync_as("u2", "2025-01-01T01:00:00Z"),
            later,
            "a new uid is a new Application",
        );
        assert_eq!(new.lifecycle(), Lifecycle::Active);
        assert_eq!(new.first_seen, later);
        assert_eq!(new.sync_since, later, "the clock starts again");
    }

    #[test]
    fn a_new_uid_under_a_live_name_starts_a_new_application() {
        let now = t("2025-01-01T00:00:00Z");
        let state = first(out_of_sync_as("u1", "2025-01-01T00:00:00Z"), now);
        let later = t("2025-01-01T00:50:00Z");
        let new = changed(
            Some(&state),
            out_of_sync_as("u2", "2025-01-01T00:50:00Z"),
            later,
            "a new uid is a change",
        );
        assert_eq!(
            new.sync_since, later,
            "the old Application's OutOfSync time is not inherited"
        );
    }

    #[test]
    fn first_seen_through_the_api_since_times_are_lower_bounds() {
        let now = t("2025-01-01T02:00:00Z");
        let mut s = snap("OutOfSync", "2025-01-01T02:00:00Z");
        s.source = crate::argocd::Source::Api;
        s.health_changed_at = Some(t("2025-01-01T00:30:00Z"));
        let state = first(s.clone(), now);
        assert!(
            state.sync_since_at_least,
            "Argo CD keeps no sync time: now is a lower bound"
        );
        assert_eq!(
            state.health_since,
            t("2025-01-01T00:30:00Z"),
            "Argo CD's own health time"
        );
        assert!(!state.health_since_at_least);
        s.source = crate::argocd::Source::Webhook;
        let state = first(s, now);
        assert!(!state.sync_since_at_least);
        assert_eq!(state.health_since, now);
    }

    #[test]
    fn a_body_dated_ahead_of_the_clock_does_not_make_the_present_stale() {
        let now = t("2025-01-01T01:00:00Z");
        let ahead = first(snap("Synced", "2025-01-01T01:04:50Z"), now);
        let later = t("2025-01-01T01:00:10Z");
        assert!(
            matches!(
                apply(Some(&ahead), snap("OutOfSync", "2025-01-01T01:00:10Z"), later),
                Outcome::Changed { .. }
            ),
            "a body dated now is not older than a body dated ahead of now"
        );
        assert!(
            matches!(
                apply(Some(&ahead), snap("OutOfSync", "2025-01-01T00:59:00Z"), later),
                Outcome::Stale { .. }
            ),
            "a body older than now still is"
        );
    }

    #[test]
    fn a_body_clamped_to_its_arrival_does_not_make_a_genuine_body_of_the_same_second_stale() {
        // A body dated far ahead was clamped to its arrival, 10:00:05.700: Argo CD's next body is dated 10:00:05.
        let arrival = t("2025-01-01T10:00:05.700Z");
        let mut clamped = snap("Synced", "2025-01-01T10:00:05Z");
        clamped.observed_at = Some(arrival);
        let state = first(clamped, arrival);
        let genuine = snap("OutOfSync", "2025-01-01T10:00:05Z");
        assert!(
            matches!(
                apply(Some(&state), genuine, t("2025-01-01T10:00:05.900Z")),
                Outcome::Changed { .. }
            ),
            "Argo CD's times are whole seconds: the same second is not older"
        );
        let older = snap("OutOfSync", "2025-01-01T10:00:04Z");
        assert!(matches!(apply(Some(&state), older, arrival), Outcome::Stale { .. }));
    }

    #[test]
    fn a_webhook_of_the_second_an_api_read_was_stored_is_not_stale() {
        let read_at = t("2025-01-01T10:00:05.300Z");
        let mut listed = snap("OutOfSync", "2025-01-01T10:00:05Z");
        listed.source = crate::argocd::Source::Api;
        listed.observed_at = None;
        let state = first(listed, read_at);
        let webhook = snap("Synced", "2025-01-01T10:00:05Z");
        assert!(
            matches!(
                apply(Some(&state), webhook, t("2025-01-01T10:00:05.800Z")),
                Outcome::Changed { .. }
            ),
            "the body Argo CD sent in the second Herald read the API is as new as the read"
        );
    }

    #[test]
    fn a_later_operation_is_newer_whatever_the_body_times_say() {
        let now = t("2025-01-01T01:00:00Z");
        let op = |started: &str| crate::argocd::Operation {
            phase: "Failed".into(),
            started_at: Some(t(started)),
            ..Default::default()
        };
        let mut stored = snap("Synced", "2025-01-01T01:00:00Z");
        stored.operation = Some(op("2025-01-01T00:50:00Z"));
        let state = first(stored, now);
        let mut late_clock = snap("OutOfSync", "2025-01-01T00:58:00Z");
        late_clock.operation = Some(op("2025-01-01T00:57:00Z"));
        assert!(
            matches!(apply(Some(&state), late_clock.clone(), now), Outcome::Changed { .. }),
            "the operation started after the stored one's"
        );
        late_clock.operation = Some(op("2025-01-01T00:50:00Z"));
        assert!(matches!(apply(Some(&state), late_clock, now), Outcome::Stale { .. }));
    }

    #[test]
    fn two_incarnations_bodies_arriving_in_turn_do_not_replace_each_other_back_and_forth() {
        let now = t("2025-01-01T02:00:00Z");
        let op = |started: &str| crate::argocd::Operation {
            phase: "Succeeded".into(),
            started_at: Some(t(started)),
            ..Default::default()
        };
        // The older incarnation's body: an earlier time, but an operation that started later than the new one's.
        let mut old = snap("OutOfSync", "2025-01-01T00:30:00Z");
        old.uid = Some("uid-old".into());
        old.operation = Some(op("2025-01-01T00:29:00Z"));
        let mut new = snap("Synced", "2025-01-01T01:00:00Z");
        new.uid = Some("uid-new".into());
        new.operation = Some(op("2025-01-01T00:10:00Z"));
        let state = first(new, now);
        assert!(
            matches!(apply(Some(&state), old, now), Outcome::Stale { .. }),
            "the earlier incarnation's late body is stale by its time"
        );
    }

    /// Replays bodies in turn, `rounds` times, as a busy receiver gets Argo CD's re-sends; returns how many of the
    /// last round were changes, and the uid stored at the end.
    fn in_turn(bodies: &[Snapshot], rounds: usize) -> (usize, Option<String>) {
        let now = t("2025-10-02T17:00:00Z");
        let mut state: Option<AppState> = None;
        let mut changes = 0;
        for _ in 0..rounds {
            changes = 0;
            for body in bodies {
                if let Outcome::Changed { state: s, .. } = apply(state.as_ref(), body.clone(), now) {
                    state = Some(*s);
                    changes += 1;
                }
            }
        }
        (changes, state.and_then(|s| s.snapshot.uid))
    }

    #[test]
    fn three_incarnations_bodies_of_one_second_settle_on_the_one_created_last() {
        // As the side-by-side benchmark sends them: three captured Applications under one name, their bodies
        // dated within one second (16:06:22.5, .6, .7), each arriving again and again. Compared at whole seconds,
        // each was the newer and every body was a change, for ever.
        let body = |uid: &str, created: &str, at: &str| {
            let mut s = out_of_sync_as(uid, at);
            s.created_at = Some(t(created));
            s
        };
        let bodies = [
            body("uid-a", "2025-10-02T15:30:00Z", "2025-10-02T16:06:22.773035Z"),
            body("uid-b", "2025-10-02T15:20:00Z", "2025-10-02T16:06:22.517138Z"),
            body("uid-c", "2025-10-02T15:32:45Z", "2025-10-02T16:06:22.646120Z"),
        ];
        assert_eq!(
            in_turn(&bodies, 3),
            (0, Some("uid-c".into())),
            "the one created last stays, in every order"
        );
        let mut reversed = bodies.clone();
        reversed.reverse();
        assert_eq!(in_turn(&reversed, 3), (0, Some("uid-c".into())));
    }

    #[test]
    fn of_two_incarnations_the_one_created_later_is_newer_whatever_the_bodies_times_say() {
        let now = t("2025-01-01T02:00:00Z");
        let mut earlier = out_of_sync_as("uid-1", "2025-01-01T01:00:00Z");
        earlier.created_at = Some(t("2024-06-01T00:00:00Z"));
        // The name deleted and created again; its first body is dated before the late body of the first.
        let mut later = snap("Synced", "2025-01-01T00:59:59Z");
        later.uid = Some("uid-2".into());
        later.created_at = Some(t("2025-01-01T00:59:00Z"));
        let state = first(earlier.clone(), now);
        let state = changed(Some(&state), later, now, "the one created later replaces");
        assert_eq!(state.snapshot.uid.as_deref(), Some("uid-2"));
        assert!(
            matches!(apply(Some(&state), earlier, now), Outcome::Stale { .. }),
            "a late body of the one created before is stale, however new its time"
        );
    }

    #[test]
    fn without_creation_times_two_incarnations_are_ordered_strictly() {
        // The same second: the fraction decides; the very same time: the uids. Never both ways.
        let a = out_of_sync_as("uid-a", "2025-01-01T00:00:00.250Z");
        let b = out_of_sync_as("uid-b", "2025-01-01T00:00:00.500Z");
        assert_eq!(in_turn(&[a.clone(), b.clone()], 3), (0, Some("uid-b".into())));
        assert_eq!(in_turn(&[b, a], 3), (0, Some("uid-b".into())));
        let c = out_of_sync_as("uid-c", "2025-01-01T00:00:00Z");
        let d = out_of_sync_as("uid-d", "2025-01-01T00:00:00Z");
        assert_eq!(in_turn(&[c.clone(), d.clone()], 3), (0, Some("uid-d".into())));
        assert_eq!(in_turn(&[d, c], 3), (0, Some("uid-d".into())));
    }

    #[test]
    fn older_snapshots_are_stale_and_duplicates_change_nothing() {
        let now = t("2025-01-01T01:00:00Z");
        let state = first(snap("Synced", "2025-01-01T01:00:00Z"), now);
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
