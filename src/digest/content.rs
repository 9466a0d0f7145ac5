//! What a team's digest says, computed from what the store holds (pure: the runner and `herald digest` read the
//! store and call [`content`]).

use chrono::{DateTime, Utc};

use crate::domain::digest::{DeadDelivery, Digest, FiringIncident, OutOfSyncApp, PendingPrune, SilenceLine};
use crate::domain::{Incident, IncidentState, Labels};
use crate::routing::Silence;
use crate::store::{AppRecord, OutboxRecord};

/// Everything a digest is made of, as read from the store; [`content`] keeps the team's part.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Applications (any team; deleted ones are not read).
    pub apps: Vec<AppRecord>,
    /// Firing incidents (any team).
    pub incidents: Vec<Incident>,
    /// Silences not ended yet.
    pub silences: Vec<Silence>,
    /// Dead deliveries (any receiver).
    pub dead: Vec<OutboxRecord>,
}

/// Whose digest, and what frames it.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    pub team: &'a str,
    pub timezone: &'a str,
    /// The receivers whose dead deliveries concern the team (its own, its escalation steps' and its digest's).
    pub receivers: &'a [String],
    /// The Argo CD instances: each one's `url` for links (when an Application's body carried none), and whether
    /// there are several (the lists then group by instance).
    pub argocd: &'a crate::configuration::ArgoCdSettings,
    /// `server.public_url`: where Herald's status page is, for the link under a cut list.
    pub public_url: Option<&'a str>,
    /// When this digest is for.
    pub now: DateTime<Utc>,
    /// When the next one is due: silences ending before it are marked.
    pub next: Option<DateTime<Utc>>,
    /// For the default team (`ownership.default_team`): the configured teams. An Application owned by a team not
    /// among them (`team: search`, no `teams.search`) is routed to the default team, so its digest lists it too.
    pub adopts_unknown_teams: Option<&'a std::collections::BTreeMap<String, crate::configuration::TeamSettings>>,
}

impl Frame<'_> {
    /// Whether what belongs to `team` belongs in this digest: the frame's own team's, and for the default team,
    /// that of every team Herald has no settings for.
    pub fn covers(&self, team: &str) -> bool {
        team == self.team || self.adopts_unknown_teams.is_some_and(|known| !known.contains_key(team))
    }
}

/// The digest of `frame.team`: its Applications OutOfSync (longest first), its resources waiting to be pruned, its
/// firing incidents, the active silences that concern it and the dead deliveries of its receivers.
pub fn content(frame: &Frame<'_>, inputs: &Inputs) -> Digest {
    let team = frame.team;
    let (out_of_sync, pending_prunes) = applications(frame, &inputs.apps);
    let firing_views: Vec<&Incident> = inputs
        .incidents
        .iter()
        .filter(|i| frame.covers(&i.team) && i.state == IncidentState::Firing)
        .collect();
    let mut firing: Vec<FiringIncident> = firing_views
        .iter()
        .map(|i| FiringIncident {
            app: crate::domain::AppId::of(&i.instance, &i.app_namespace, &i.app_name).to_string(),
            problem: i.problem(),
            summary: i.summary.clone(),
            since: i.fired_at.unwrap_or(i.since),
        })
        .collect();
    firing.sort_by(|a, b| {
        (instance_of(&a.app).cmp(instance_of(&b.app)))
            .then(a.since.cmp(&b.since))
            .then_with(|| a.app.cmp(&b.app))
    });
    Digest {
        team: team.into(),
        at: frame.now,
        timezone: frame.timezone.into(),
        out_of_sync,
        pending_prunes,
        firing,
        silences: silences(frame, &inputs.silences, &firing_views),
        dead: dead(frame, &inputs.dead),
        status_url: frame
            .public_url
            .and_then(|u| crate::domain::link::status_page(u, Some(team))),
    }
}

/// The instance an Application's name in a digest line belongs to (`instance/namespace/name`, or `namespace/name`
/// for the default instance, which sorts first): with several instances, each one's lines stay together.
fn instance_of(app: &str) -> &str {
    match app.split('/').collect::<Vec<_>>().as_slice() {
        [instance, _, _] => instance,
        _ => "",
    }
}

/// The team's Applications OutOfSync (the longest first) and its resources waiting to be pruned (the longest
/// waiting first).
fn applications(frame: &Frame<'_>, apps: &[AppRecord]) -> (Vec<OutOfSyncApp>, Vec<PendingPrune>) {
    let mut out_of_sync = Vec::new();
    let mut pending_prunes = Vec::new();
    let mine = apps
        .iter()
        .filter(|a| frame.covers(&a.team) && a.state.deleted_at.is_none());
    for a in mine {
        let s = &a.state;
        let snap = &s.snapshot;
        let name = snap.app.to_string();
        let prunes = crate::incidents::pending_prunes(snap);
        for r in &prunes {
            let key = crate::state::resource_key(&r.kind, &r.namespace, &r.name);
            let place = if r.namespace.is_empty() {
                r.name.clone()
            } else {
                format!("{}/{}", r.namespace, r.name)
            };
            pending_prunes.push(PendingPrune {
                app: name.clone(),
                resource: format!("{} {place}", r.kind),
                since: s.prune_since.get(&key).copied().unwrap_or(s.last_seen),
            });
        }
        if snap.sync_status == crate::argocd::SyncStatus::OutOfSync {
            out_of_sync.push(OutOfSyncApp {
                url: crate::argocd::app_url(frame.argocd.ui_url(&snap.app.instance), snap),
                app: name,
                since: s.sync_since,
                revision: snap.revisions.first().cloned(),
                pruning: prunes.len(),
            });
        }
    }
    out_of_sync.sort_by(|a, b| {
        (instance_of(&a.app).cmp(instance_of(&b.app)))
            .then(a.since.cmp(&b.since))
            .then_with(|| a.app.cmp(&b.app))
    });
    pending_prunes.sort_by(|a, b| {
        (instance_of(&a.app).cmp(instance_of(&b.app)))
            .then(a.since.cmp(&b.since))
            .then_with(|| a.resource.cmp(&b.resource))
    });
    (out_of_sync, pending_prunes)
}

/// The active silences that concern the team, the soonest ending first.
fn silences(frame: &Frame<'_>, all: &[Silence], firing: &[&Incident]) -> Vec<SilenceLine> {
    let mut out: Vec<SilenceLine> = all
        .iter()
        .filter(|s| s.active(frame.now) && concerns(s, frame.team, firing))
        .map(|s| SilenceLine {
            id: s.id.clone(),
            matchers: s
                .matchers
                .iter()
                .map(|m| format!("{}={}", m.name, m.value))
                .collect::<Vec<_>>()
                .join(", "),
            comment: s.comment.clone(),
            created_by: s.created_by.clone(),
            ends_at: s.ends_at,
            ends_before_next: frame.next.is_some_and(|next| s.ends_at <= next),
        })
        .collect();
    out.sort_by(|a, b| a.ends_at.cmp(&b.ends_at).then_with(|| a.id.cmp(&b.id)));
    out
}

/// The dead deliveries of the team's receivers, the oldest first.
fn dead(frame: &Frame<'_>, rows: &[OutboxRecord]) -> Vec<DeadDelivery> {
    let mut out: Vec<DeadDelivery> = rows
        .iter()
        .filter(|d| frame.receivers.contains(&d.receiver))
        .map(|d| DeadDelivery {
            id: d.id,
            receiver: d.receiver.clone(),
            // The payload is the queued notification: its title says what was not delivered.
            title: serde_json::from_str::<serde_json::Value>(&d.payload)
                .ok()
                .and_then(|v| v.get("title").and_then(|t| t.as_str()).map(str::to_string))
                .unwrap_or_default(),
            error: d.last_error.clone().unwrap_or_default(),
            created_at: d.created_at,
        })
        .collect();
    out.sort_by_key(|d| (d.created_at, d.id));
    out
}

/// A silence concerns the team when it names the team, or mutes one of its firing incidents.
fn concerns(s: &Silence, team: &str, incidents: &[&Incident]) -> bool {
    s.matchers.iter().any(|m| m.name == "team" && m.is_match(team))
        || incidents.iter().any(|i| s.matches(&Labels::of(i)))
}

#[cfg(test)]
#[path = "content_tests.rs"]
mod tests;
