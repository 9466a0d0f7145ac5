//! Storms: many Applications sharing a destination cluster (or, across clusters, one Argo CD instance) entering the
//! same problem within `storm.window` of each other are one problem of the shared thing. [`judge`] says which open
//! incidents join an open storm and which make a new one; [`describe`] says a storm in people's words. Pure: the
//! pipeline (`pipeline::storms`) reads the incidents, asks, and writes what it is told.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::domain::{Incident, IncidentState, Kind};

/// The problems a storm is made of: those a cluster or an Argo CD instance in trouble gives every Application at
/// once (the sync status Unknown or a ComparisonError when Argo CD cannot reach the cluster; Degraded; syncs
/// failing).
pub const KINDS: [Kind; 3] = [Kind::SyncUnknown, Kind::Degraded, Kind::SyncFailed];

/// Whether incidents of `kind` can make a storm.
pub fn stormable(kind: Kind) -> bool {
    KINDS.contains(&kind)
}

/// What a storm is about: one problem of one destination cluster of an Argo CD instance, or of the instance's
/// Applications across its clusters (`cluster` empty).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Scope {
    pub instance: String,
    /// The destination cluster (its server URL, or its name), or empty: the whole instance.
    pub cluster: String,
    /// The members' kind.
    pub kind: Kind,
}

impl Scope {
    /// `cluster https://10.20.30.40:6443`, `cluster in-cluster (instance us)`, `Argo CD`, `Argo CD instance us`:
    /// the storm's name, where an incident has its Application's.
    pub fn about(&self) -> String {
        let default = crate::domain::is_default_instance(&self.instance);
        match (self.cluster.is_empty(), default) {
            (false, true) => format!("cluster {}", self.cluster),
            (false, false) => format!("cluster {} (instance {})", self.cluster, self.instance),
            (true, true) => "Argo CD".to_string(),
            (true, false) => format!("Argo CD instance {}", self.instance),
        }
    }
}

/// An open incident that may be a storm's member.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub id: i64,
    pub instance: String,
    pub cluster: String,
    pub kind: Kind,
    /// When its problem began.
    pub since: DateTime<Utc>,
}

/// A storm that holds its members: open, or over less than `storm.window` ago (its members still firing are told
/// then).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenStorm {
    /// The storm incident's id.
    pub id: i64,
    pub scope: Scope,
    /// When its first member's problem began: an incident of its scope that began since then joins it while open.
    pub since: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
}

impl OpenStorm {
    /// Whether it holds its members at `now`: while open, and for `window` after it ended (the Applications still
    /// recovering then are not told one by one).
    pub fn holds(&self, window: std::time::Duration, now: DateTime<Utc>) -> bool {
        let grace = chrono::Duration::from_std(window).unwrap_or_default();
        self.ended_at.is_none_or(|end| now < end + grace)
    }
}

/// What [`judge`] decides.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Incidents that join an open storm.
    Join { storm: i64, members: Vec<i64> },
    /// A new storm, with its members (oldest first) and when the first began.
    Open {
        scope: Scope,
        since: DateTime<Utc>,
        members: Vec<i64>,
    },
}

/// Decides for `candidates` (open incidents of [`KINDS`] in no storm): each joins the open storm of its cluster
/// (else of its instance) that began before it; of the others, `min_apps` of one cluster and one kind that began
/// within `window` of each other make a storm of that cluster; then those left, across two or more clusters of
/// one instance, a storm of the instance.
pub fn judge(
    candidates: &[Candidate],
    open: &[OpenStorm],
    min_apps: usize,
    window: std::time::Duration,
) -> Vec<Verdict> {
    if min_apps == 0 {
        return Vec::new();
    }
    let mut verdicts = Vec::new();
    let mut joins: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    let mut left = Vec::new();
    for c in candidates {
        match storm_of(c, open) {
            Some(storm) => joins.entry(storm).or_default().push(c.id),
            None => left.push(c),
        }
    }
    verdicts.extend((joins.into_iter()).map(|(storm, members)| Verdict::Join { storm, members }));
    let window = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::MAX);
    let by_cluster = group(&left, |c| Scope {
        instance: c.instance.clone(),
        cluster: c.cluster.clone(),
        kind: c.kind,
    });
    let mut taken = Vec::new();
    for (scope, list) in by_cluster {
        if let Some((since, members)) = burst(&list, min_apps, window) {
            taken.extend(members.iter().copied());
            verdicts.push(Verdict::Open { scope, since, members });
        }
    }
    let rest: Vec<&Candidate> = left.into_iter().filter(|c| !taken.contains(&c.id)).collect();
    let by_instance = group(&rest, |c| Scope {
        instance: c.instance.clone(),
        cluster: String::new(),
        kind: c.kind,
    });
    for (scope, list) in by_instance {
        let Some((since, members)) = burst(&list, min_apps, window) else {
            continue;
        };
        let mut clusters: Vec<&str> = (list.iter())
            .filter(|c| members.contains(&c.id))
            .map(|c| c.cluster.as_str())
            .collect();
        clusters.sort();
        clusters.dedup();
        if clusters.len() > 1 {
            verdicts.push(Verdict::Open { scope, since, members });
        }
    }
    verdicts
}

/// The open storm `c` joins: its cluster's, else its instance's, of its kind, begun before it.
fn storm_of(c: &Candidate, open: &[OpenStorm]) -> Option<i64> {
    let fits = |s: &&OpenStorm, cluster: &str| {
        s.ended_at.is_none()
            && s.scope.instance == c.instance
            && s.scope.kind == c.kind
            && s.scope.cluster == cluster
            && c.since >= s.since
    };
    (open.iter().find(|s| fits(s, &c.cluster)))
        .or_else(|| open.iter().find(|s| fits(s, "")))
        .map(|s| s.id)
}

fn group<'a>(list: &[&'a Candidate], key: impl Fn(&Candidate) -> Scope) -> BTreeMap<Scope, Vec<&'a Candidate>> {
    let mut out: BTreeMap<Scope, Vec<&Candidate>> = BTreeMap::new();
    for c in list {
        out.entry(key(c)).or_default().push(c);
    }
    out
}

/// The first `min_apps` of `list` whose problems began within `window` of each other: when the first of them
/// began, and every one of `list` that began since then (oldest first).
fn burst(list: &[&Candidate], min_apps: usize, window: chrono::Duration) -> Option<(DateTime<Utc>, Vec<i64>)> {
    let mut sorted: Vec<&Candidate> = list.to_vec();
    sorted.sort_by_key(|c| (c.since, c.id));
    let start = (0..sorted.len()).find(|&i| {
        let end = sorted[i]
            .since
            .checked_add_signed(window)
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        sorted[i..].iter().take_while(|c| c.since <= end).count() >= min_apps
    })?;
    Some((sorted[start].since, sorted[start..].iter().map(|c| c.id).collect()))
}

/// A storm in people's words.
#[derive(Debug, Clone, PartialEq)]
pub struct Description {
    /// `cluster https://10.20.30.40:6443: 37 Applications Unknown since 10:02 UTC (connection refused)`.
    pub summary: String,
    /// The same without what it is about (the title's words): `37 Applications Unknown since 10:02 UTC
    /// (connection refused), 29 recovered`.
    pub condition: String,
    /// The message they share, if they share one; then the Applications of each team.
    pub messages: Vec<String>,
}

/// At most this many teams are listed in a storm's messages (the rest are counted).
const MAX_TEAMS: usize = 20;
/// At most this many Applications are named for a team.
const MAX_NAMES: usize = 10;

/// Describes the storm about `scope` that began at `since`, of `members` (their incidents, resolved ones too); one
/// that is `over` says how many recovered in its resolution instead.
pub fn describe(
    scope: &Scope,
    since: DateTime<Utc>,
    members: &[Incident],
    over: bool,
    zone: crate::domain::Zone,
) -> Description {
    let recovered = members.iter().filter(|m| m.state == IncidentState::Resolved).count();
    let words = match scope.kind {
        Kind::SyncUnknown => "Unknown",
        Kind::Degraded => "Degraded",
        Kind::SyncFailed => "failing to sync",
        other => other.as_str(),
    };
    let shared = shared_message(members);
    let cause = shared
        .as_deref()
        .map(cause_of)
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    let recovered = match recovered {
        _ if over => String::new(),
        0 => String::new(),
        n => format!(", {n} recovered"),
    };
    let condition = format!(
        "{} {words} since {}{cause}{recovered}",
        super::plural(members.len(), "Application"),
        zone.clock(since)
    );
    let mut messages: Vec<String> = shared.into_iter().map(|m| format!("They all say: {m}")).collect();
    messages.extend(by_team(members));
    Description {
        summary: format!("{}: {condition}", scope.about()),
        condition,
        messages,
    }
}

/// The first message every member has (Argo CD's condition or health message), if they all have the same.
fn shared_message(members: &[Incident]) -> Option<String> {
    let first = |m: &Incident| m.messages.first().map(|s| s.trim().to_string());
    let one = first(members.first()?)?;
    (!one.is_empty() && members.iter().all(|m| first(m).as_deref() == Some(one.as_str()))).then_some(one)
}

/// The root cause of a Go error chain (`…: dial tcp 10.20.30.40:6443: connect: connection refused` →
/// `connection refused`): its last part, where it is short enough to say in a title; else its first sentence.
fn cause_of(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default().trim();
    match line.rsplit_once(": ") {
        Some((_, last)) if !last.trim().is_empty() && last.chars().count() <= 60 => last.trim().to_string(),
        _ => super::first_sentence(line, 60),
    }
}

/// `team payments: pay-api, pay-worker (recovered)`: who owns what the storm holds.
fn by_team(members: &[Incident]) -> Vec<String> {
    let mut teams: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for m in members {
        let name = match m.state {
            IncidentState::Resolved => format!("{} (recovered)", m.app_title()),
            _ => m.app_title(),
        };
        teams.entry(m.team.as_str()).or_default().push(name);
    }
    let count = teams.len();
    let mut lines: Vec<String> = (teams.into_iter().take(MAX_TEAMS))
        .map(|(team, mut names)| {
            names.sort();
            let more = names.len().saturating_sub(MAX_NAMES);
            names.truncate(MAX_NAMES);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("team {team}: {}{more}", names.join(", "))
        })
        .collect();
    if count > MAX_TEAMS {
        lines.push(format!("and {} more teams", count - MAX_TEAMS));
    }
    lines
}

/// Whether the storm is over: more than half of its members recovered (or none is left).
pub fn over(members: usize, recovered: usize) -> bool {
    members == 0 || recovered * 2 > members
}

#[cfg(test)]
mod tests;
