//! Incidents: which conditions an Application's state is in ([`held_conditions`]), and the lifecycle decisions
//! (pending → firing → resolved) that follow ([`decide`]). Each held condition carries what a person needs to
//! read it: the problem in their words, the resources with their health and links into Argo CD, the sources with
//! the revision of each (and the commit on GitHub or GitLab), the messages once, and the hints (`hints`).
//! Pure: no I/O, "now" comes in as an argument.

pub mod hints;
pub mod storm;
mod view;

use chrono::{DateTime, Utc};

use sha2::{Digest, Sha256};
use std::collections::HashSet;

use crate::domain::{IncidentState, Kind};

use crate::argocd::{HealthStatus, Operation, OperationPhase, ResultCode, Snapshot, SyncStatus};
use crate::configuration::RulesSettings;
use crate::domain::{Incident, ResourceRef, Severity};
use crate::state::AppState;
pub use view::link_commits;
use view::{deployment, resource_ref, resource_url, sources};
pub use view::{first_sentence, plural};

/// A condition the Application is in now, with what a person needs to know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub kind: Kind,
    pub fingerprint: String,
    /// When the condition started, if the state knows (else: when Herald first saw it).
    pub since: Option<DateTime<Utc>>,
    pub severity: Severity,
    pub view: Incident,
}

/// An incident that is not resolved, as the lifecycle needs to see it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenIncident {
    pub id: i64,
    pub kind: Kind,
    pub fingerprint: String,
    pub state: IncidentState,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// A new incident: pending until `fire_at`, or firing at once when `fire_at <= now`.
    Open {
        held: Box<Held>,
        since: DateTime<Utc>,
        fire_at: DateTime<Utc>,
        fire_now: bool,
    },
    /// The condition is gone: resolve (a pending one is dropped without a word).
    Resolve { id: i64 },
    /// Still held: refresh the details shown.
    Refresh { id: i64, held: Box<Held> },
}

/// The same for the same problem of the same Application, whatever replica computes it. An Application of the
/// default instance keeps the fingerprint it had before instances existed (`namespace/name|…`); another instance's
/// carries its name (`instance/namespace/name|…`), so two instances' `argocd/payments-api` never share one.
pub fn fingerprint(app: &crate::argocd::AppId, kind: Kind, extra: &str) -> String {
    let digest = Sha256::digest(format!("{app}|{}|{}", kind.as_str(), extra));
    hex::encode(&digest[..10])
}

fn base_view(state: &AppState, kind: Kind, severity: Severity, team: &str, argocd_url: Option<&str>) -> Incident {
    let s = &state.snapshot;
    let url = crate::argocd::app_url(argocd_url, s);
    Incident {
        kind,
        severity,
        state: crate::domain::IncidentState::Firing,
        instance: s.app.instance.clone(),
        app_namespace: s.app.namespace.clone(),
        app_name: s.app.name.clone(),
        project: s.project.clone(),
        team: team.into(),
        destination_cluster: s.destination.cluster(),
        destination_namespace: s.destination.namespace.clone().unwrap_or_default(),
        app_url: url,
        since: state.sync_since,
        revision: s
            .operation
            .as_ref()
            .and_then(|o| o.revision.clone())
            .or_else(|| s.revisions.first().cloned()),
        labels: s.labels.clone(),
        initiated_by: s.operation.as_ref().map(|o| o.initiator.describe()),
        sources: sources(s, matches!(kind, Kind::SyncFailed | Kind::Pruned)),
        deployment: follows_deployment(kind).then(|| deployment(state)).flatten(),
        ..Default::default()
    }
}

/// What the Application's last deployment that changed something changed (images, revisions with their comparison
/// on a host `links` trusts, chart versions, what its sync did to the resources), for its page.
pub fn last_deployment(
    state: &AppState,
    links: &crate::configuration::LinksSettings,
) -> Option<crate::domain::Deployment> {
    let mut view = Incident {
        deployment: deployment(state),
        ..Default::default()
    };
    link_commits(&mut view, links);
    view.deployment
}

/// Whether a problem of `kind` can follow a deployment, so that what the deployment changed is told with it: a sync
/// that failed, ran long or pruned, an Application Degraded or Progressing. Not OutOfSync or a prune waiting: they
/// come before the next deployment.
fn follows_deployment(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::SyncFailed | Kind::Pruned | Kind::Degraded | Kind::Progressing | Kind::SyncRunning
    )
}

/// Resources waiting to be pruned: `requiresPruning` in `status.resources`, or `PruneSkipped` "requires pruning"
/// in the last sync result.
pub fn pending_prunes(s: &Snapshot) -> Vec<ResourceRef> {
    let mut out: Vec<ResourceRef> = s
        .resources
        .iter()
        .filter(|r| r.requires_pruning)
        .map(|r| ResourceRef {
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            status: "requires pruning".into(),
            group: r.group.clone(),
            ..Default::default()
        })
        .collect();
    if let Some(op) = &s.operation {
        for r in &op.resources {
            if r.status == ResultCode::PruneSkipped
                && r.message.contains("requires pruning")
                && !out
                    .iter()
                    .any(|o| o.kind == r.kind && o.namespace == r.namespace && o.name == r.name)
            {
                out.push(result_ref(r));
            }
        }
    }
    out
}

/// Whether the destination is production for `rules.pruned.production`.
pub fn is_production(s: &Snapshot, rules: &RulesSettings) -> bool {
    let (m, _) = rules.production();
    let glob = |pattern: &str, value: &str| {
        globset::Glob::new(pattern)
            .map(|g| g.compile_matcher().is_match(value))
            .unwrap_or(false)
    };
    let ns = s.destination.namespace.clone().unwrap_or_default();
    let cluster = s.destination.cluster();
    m.namespaces.iter().any(|p| glob(p, &ns))
        || m.clusters.iter().any(|p| glob(p, &cluster))
        || m.labels.iter().any(|(k, v)| s.labels.get(k) == Some(v))
}

/// The conditions the state holds now, for the enabled rules. `keep` gets the kinds whose open incidents must be
/// left alone because the state cannot tell yet (a sync operation still running).
pub fn held_conditions(
    state: &AppState,
    rules: &RulesSettings,
    team: &str,
    argocd_url: Option<&str>,
    keep: &mut HashSet<Kind>,
) -> Vec<Held> {
    if !state.is_live() {
        // Being deleted, or gone: nothing about it is a problem any more; whatever is open resolves.
        return Vec::new();
    }
    if sync_in_progress(&state.snapshot) {
        keep.insert(Kind::SyncFailed);
    }
    FINDERS
        .iter()
        .filter(|(kind, _)| rules.rule(*kind).enabled)
        .filter_map(|(kind, find)| Some(hold(*kind, find(state)?, state, rules, team, argocd_url)))
        .collect()
}

/// What one kind's rule finds in a state, if anything.
type Finder = fn(&AppState) -> Option<Finding>;

/// Each kind's finder, in the order incidents are held.
const FINDERS: [(Kind, Finder); 8] = [
    (Kind::OutOfSync, out_of_sync),
    (Kind::PrunePending, prune_pending),
    (Kind::SyncFailed, sync_failed),
    (Kind::Pruned, pruned),
    (Kind::Degraded, degraded),
    (Kind::SyncUnknown, sync_unknown),
    (Kind::SyncRunning, sync_running),
    (Kind::Progressing, progressing),
];

/// What one rule finds in the state: the parts of the incident only that rule knows ([`hold`] adds the rest).
#[derive(Default)]
struct Finding {
    /// Tells occurrences of the kind apart in the fingerprint: the operation, for kinds that are one per sync.
    occurrence: String,
    since: Option<DateTime<Utc>>,
    summary: String,
    condition: String,
    resources: Vec<ResourceRef>,
    messages: Vec<String>,
    previous_revision: Option<String>,
    /// Someone asked for exactly this: a person's sync pruned only resources that were waiting to be pruned.
    /// Told as news (severity info: no FIRING, no escalation, no message to that person).
    asked_for: bool,
}

/// `finding` as a held condition of `kind`: its severity, the view's common parts, a link per resource, the hints.
fn hold(
    kind: Kind,
    finding: Finding,
    state: &AppState,
    rules: &RulesSettings,
    team: &str,
    argocd_url: Option<&str>,
) -> Held {
    let s = &state.snapshot;
    let severity = if finding.asked_for {
        Severity::Info
    } else if kind == Kind::Pruned && is_production(s, rules) {
        rules.production().1
    } else {
        rules.rule(kind).severity
    };
    let mut view = base_view(state, kind, severity, team, argocd_url);
    view.fingerprint = fingerprint(&s.app, kind, &finding.occurrence);
    if let Some(t) = finding.since {
        view.since = t;
    }
    view.summary = finding.summary;
    view.condition = finding.condition;
    view.resources = finding.resources;
    view.messages = finding.messages;
    view.previous_revision = finding.previous_revision;
    // Each resource links to its node in the Argo CD UI, next to the Application's link.
    if let Some(app_url) = view.app_url.clone() {
        for r in &mut view.resources {
            r.url = resource_url(&app_url, r);
        }
    }
    view.hints = hints::for_incident(kind, state, &view, rules);
    Held {
        kind,
        fingerprint: view.fingerprint.clone(),
        since: finding.since,
        severity,
        view,
    }
}

/// Each Application condition as `Type: message`.
fn condition_messages(s: &Snapshot) -> Vec<String> {
    s.conditions
        .iter()
        .map(|c| format!("{}: {}", c.r#type, c.message))
        .collect()
}

/// Whether a sync is still running: whether it failed cannot be told yet.
fn sync_in_progress(s: &Snapshot) -> bool {
    s.operation
        .as_ref()
        .is_some_and(|op| matches!(op.phase, OperationPhase::Running | OperationPhase::Terminating))
}

/// The operation's identity in a fingerprint (its start time), and when it ended by Argo CD's clock: a failed
/// sync or a prune happened then, not when Herald heard.
fn operation_times(op: &Operation) -> (String, Option<DateTime<Utc>>) {
    let id = op.started_at.map(|t| t.to_rfc3339()).unwrap_or_default();
    (id, op.finished_at.or(op.started_at))
}

/// OutOfSync: the sync status says so; the resources that differ from Git.
fn out_of_sync(state: &AppState) -> Option<Finding> {
    let s = &state.snapshot;
    if s.sync_status != SyncStatus::OutOfSync {
        return None;
    }
    let resources = s
        .resources
        .iter()
        .filter(|r| r.status == SyncStatus::OutOfSync)
        .map(|r| ResourceRef {
            status: if r.requires_pruning {
                format!("{} (requires pruning)", r.status)
            } else {
                r.status.to_string()
            },
            ..resource_ref(r)
        })
        .collect();
    Some(Finding {
        since: Some(state.sync_since),
        summary: format!("{} is OutOfSync", s.app),
        condition: SyncStatus::OutOfSync.to_string(),
        resources,
        messages: condition_messages(s),
        ..Default::default()
    })
}

/// PrunePending: resources removed from Git still run in the cluster ([`pending_prunes`]), since the first began.
fn prune_pending(state: &AppState) -> Option<Finding> {
    let prunes = pending_prunes(&state.snapshot);
    if prunes.is_empty() {
        return None;
    }
    let count = plural(prunes.len(), "resource");
    Some(Finding {
        since: state.prune_since.values().min().copied(),
        summary: format!(
            "{}: {count} removed from Git {} still running in the cluster, waiting to be pruned",
            state.snapshot.app,
            if prunes.len() == 1 { "is" } else { "are" }
        ),
        condition: format!("{count} waiting to be pruned"),
        resources: prunes,
        ..Default::default()
    })
}

/// SyncFailed: the last sync operation failed or erred, with the resources that failed. One incident per streak
/// of failures, not per operation: five failed syncs in a row are one problem (one ticket, the person told once),
/// refreshed with the latest failure, until a sync succeeds.
fn sync_failed(state: &AppState) -> Option<Finding> {
    let s = &state.snapshot;
    let op = s.operation.as_ref().filter(|op| op.phase.failed())?;
    let (_, ended) = operation_times(op);
    let what = if op.phase == OperationPhase::Error {
        "sync error"
    } else {
        "sync failed"
    };
    let resources = op
        .resources
        .iter()
        .filter(|r| r.status == ResultCode::SyncFailed || r.hook_phase == OperationPhase::Failed)
        .map(result_ref)
        .collect();
    Some(Finding {
        occurrence: String::new(),
        since: ended,
        summary: format!(
            "{}: sync {} — {}",
            s.app,
            op.phase.as_str().to_lowercase(),
            first_line(&op.message)
        ),
        condition: match first_sentence(&op.message, 80) {
            first if first.is_empty() => what.to_string(),
            first => format!("{what}: {first}"),
        },
        resources,
        // The full message once: a SyncError condition repeats the operation's message.
        messages: view::once(std::iter::once(op.message.clone()).chain(condition_messages(s))),
        ..Default::default()
    })
}

/// Pruned: a finished sync deleted resources from the cluster; one per operation, with the revision before it.
fn pruned(state: &AppState) -> Option<Finding> {
    let s = &state.snapshot;
    let op = s.operation.as_ref().filter(|op| op.phase != OperationPhase::Running)?;
    let pruned: Vec<ResourceRef> = op
        .resources
        .iter()
        .filter(|r| r.status == ResultCode::Pruned)
        .map(result_ref)
        .collect();
    if pruned.is_empty() {
        return None;
    }
    let (occurrence, ended) = operation_times(op);
    let names: Vec<String> = pruned.iter().map(|r| r.display()).collect();
    // A person's sync that removed only what waited to be pruned did what the prune hint said: news, not an alarm.
    // Anything else it removed (a rename in Git, say) keeps the prune an alarm.
    let by_person = op.initiator.username.as_ref().filter(|_| !op.initiator.automated);
    let awaited =
        |r: &ResourceRef| (state.awaited_prunes).contains(&crate::state::resource_key(&r.kind, &r.namespace, &r.name));
    let asked_for = by_person.is_some() && pruned.iter().all(awaited);
    let what = match pruned.as_slice() {
        [one] => format!("{} {}", one.kind, one.name),
        many => plural(many.len(), "resource"),
    };
    Some(Finding {
        occurrence,
        since: ended,
        summary: match by_person.filter(|_| asked_for) {
            Some(user) => format!(
                "{}: {user} pruned {}, which waited to be pruned",
                s.app,
                names.join(", ")
            ),
            None => format!("{}: the sync deleted {} from the cluster", s.app, names.join(", ")),
        },
        condition: match by_person.filter(|_| asked_for) {
            Some(user) => format!("{user} pruned {what} as the prune hint asked"),
            None => format!("the sync deleted {what}"),
        },
        asked_for,
        resources: pruned,
        previous_revision: s.previous_revision.clone(),
        ..Default::default()
    })
}

/// Degraded: the health is Degraded or Missing; each unhealthy resource with Argo CD's message about it.
fn degraded(state: &AppState) -> Option<Finding> {
    let s = &state.snapshot;
    if !matches!(s.health_status, HealthStatus::Degraded | HealthStatus::Missing) {
        return None;
    }
    let resources = s
        .resources
        .iter()
        .filter(|r| matches!(r.health, Some(HealthStatus::Degraded | HealthStatus::Missing)))
        .map(health_ref)
        .collect();
    Some(Finding {
        since: Some(state.health_since),
        summary: format!("{} is {}", s.app, s.health_status),
        condition: s.health_status.to_string(),
        resources,
        messages: s
            .health_message
            .iter()
            .filter(|m| !m.trim().is_empty())
            .cloned()
            .collect(),
        ..Default::default()
    })
}

/// SyncUnknown: the sync status is Unknown, or Argo CD cannot compare (a ComparisonError or InvalidSpecError).
fn sync_unknown(state: &AppState) -> Option<Finding> {
    let s = &state.snapshot;
    let unknown = s.sync_status == SyncStatus::Unknown;
    let bad_condition = s
        .conditions
        .iter()
        .any(|c| c.r#type == "ComparisonError" || c.r#type == "InvalidSpecError");
    if !unknown && !bad_condition {
        return None;
    }
    let error = s.conditions.iter().find(|c| c.r#type.ends_with("Error"));
    Some(Finding {
        // Herald times the sync status, not conditions: a comparison error alone counts from when it is first seen.
        since: unknown.then_some(state.sync_since),
        summary: match error {
            Some(c) => format!("{}: {} — {}", s.app, c.r#type, first_line(&c.message)),
            None => format!("{}: sync status is Unknown", s.app),
        },
        condition: match (unknown, error) {
            (true, Some(c)) => format!("sync status Unknown ({})", c.r#type),
            (false, Some(c)) => c.r#type.clone(),
            (_, None) => "sync status Unknown".into(),
        },
        messages: condition_messages(s),
        ..Default::default()
    })
}

/// SyncRunning: a sync operation still running (or terminating), since it started; one per operation. What it
/// waits on: the hooks still running (from the sync result, with their messages), else the resources not yet
/// healthy (a sync waits for each wave to be healthy), else Argo CD's own operation message.
fn sync_running(state: &AppState) -> Option<Finding> {
    let s = &state.snapshot;
    let op = s.operation.as_ref().filter(|_| sync_in_progress(s))?;
    let (occurrence, _) = operation_times(op);
    let hooks: Vec<ResourceRef> = (op.resources.iter())
        .filter(|r| r.hook_phase == OperationPhase::Running)
        .map(|r| ResourceRef {
            status: "hook Running".into(),
            ..result_ref(r)
        })
        .collect();
    let unhealthy = || -> Vec<ResourceRef> {
        (s.resources.iter())
            .filter(|r| r.health.as_ref().is_some_and(|h| *h != HealthStatus::Healthy))
            .map(health_ref)
            .collect()
    };
    let names = |rs: &[ResourceRef]| match rs {
        [one] => format!("{} {}", one.kind, one.name),
        many => plural(many.len(), "resource"),
    };
    let (waiting, resources) = if !hooks.is_empty() {
        let what = format!("waiting for hook {}", names(&hooks));
        (what, hooks)
    } else {
        match unhealthy() {
            rs if !rs.is_empty() => (format!("waiting for {} to be healthy", names(&rs)), rs),
            _ => (first_sentence(&op.message, 80), Vec::new()),
        }
    };
    let verb = match op.phase {
        OperationPhase::Terminating => "terminating",
        _ => "still running",
    };
    Some(Finding {
        occurrence,
        since: op.started_at,
        summary: match first_line(&op.message) {
            m if m.is_empty() => format!("{}: sync {verb}", s.app),
            m => format!("{}: sync {verb} — {m}", s.app),
        },
        condition: match waiting.is_empty() {
            true => format!("sync {verb}"),
            false => format!("sync {verb}: {waiting}"),
        },
        resources,
        messages: view::once(std::iter::once(op.message.clone())),
        ..Default::default()
    })
}

/// Progressing: the health has been Progressing since it became so; the resources still progressing, with
/// Argo CD's message about each (a rollout waiting for its replicas, say).
fn progressing(state: &AppState) -> Option<Finding> {
    let s = &state.snapshot;
    if s.health_status != HealthStatus::Progressing {
        return None;
    }
    let resources: Vec<ResourceRef> = (s.resources.iter())
        .filter(|r| r.health == Some(HealthStatus::Progressing))
        .map(health_ref)
        .collect();
    Some(Finding {
        since: Some(state.health_since),
        summary: match resources.as_slice() {
            [] => format!("{} is Progressing", s.app),
            [one] => format!("{} is Progressing: {} {} is not ready", s.app, one.kind, one.name),
            many => format!(
                "{} is Progressing: {} are not ready",
                s.app,
                plural(many.len(), "resource")
            ),
        },
        condition: HealthStatus::Progressing.to_string(),
        resources,
        messages: (s.health_message.iter())
            .filter(|m| !m.trim().is_empty())
            .cloned()
            .collect(),
        ..Default::default()
    })
}

/// Deleted (said in the owning team's `zone`): the Application `before` (its last live state) was deleted from Argo CD at `at` while `firing` were
/// firing, or in a namespace where every deletion is told (`rules.deleted.namespaces`). One per deletion: the caller
/// asks only when the Application stops being live. `None` when there is nothing to tell.
pub fn deletion(
    before: &AppState,
    firing: &[&Incident],
    rules: &RulesSettings,
    team: &str,
    argocd_url: Option<&str>,
    at: DateTime<Utc>,
    zone: crate::domain::Zone,
) -> Option<Held> {
    let s = &before.snapshot;
    let ns = s.destination.namespace.clone().unwrap_or_default();
    let watched = (rules.deleted_namespaces().iter())
        .any(|p| globset::Glob::new(p).is_ok_and(|g| g.compile_matcher().is_match(&ns)));
    if !rules.rule(Kind::Deleted).enabled || (firing.is_empty() && !watched) {
        return None;
    }
    let instance = match s.app.instance.as_str() {
        crate::argocd::DEFAULT_INSTANCE => String::new(),
        other => format!(" ({other})"),
    };
    let problems: Vec<String> = (firing.iter())
        .map(|i| match i.lasts() {
            true => format!(
                "{} for {}",
                i.problem(),
                crate::domain::notification::duration_words(at - i.since)
            ),
            false => i.problem(),
        })
        .collect();
    let (while_, closed) = match problems.as_slice() {
        [] => (String::new(), ""),
        [one] => (format!(" while {one}"), "; its incident is closed"),
        many => (format!(" while {}", many.join(", ")), "; its incidents are closed"),
    };
    let when = zone.clock(at);
    let finding = Finding {
        occurrence: s.uid.clone().unwrap_or_else(|| at.to_rfc3339()),
        since: Some(at),
        summary: format!(
            "{} was deleted from Argo CD{instance} at {when}{while_}{closed}",
            s.app.name
        ),
        condition: format!("deleted from Argo CD{instance} at {when}{while_}"),
        ..Default::default()
    };
    Some(hold(Kind::Deleted, finding, before, rules, team, argocd_url))
}

/// A resource by its health, with Argo CD's message about it.
fn health_ref(r: &crate::argocd::ResourceStatus) -> ResourceRef {
    ResourceRef {
        status: r.health.as_ref().map(HealthStatus::to_string).unwrap_or_default(),
        message: r.health_message.clone().unwrap_or_default(),
        ..resource_ref(r)
    }
}

fn first_line(s: &str) -> String {
    let line = s.lines().next().unwrap_or_default();
    if line.chars().count() > 200 {
        format!("{}…", line.chars().take(200).collect::<String>())
    } else {
        line.to_string()
    }
}

fn result_ref(r: &crate::argocd::ResultResource) -> ResourceRef {
    ResourceRef {
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
        status: r.status.to_string(),
        message: r.message.clone(),
        group: r.group.clone(),
        url: None,
    }
}

/// Compares what is held with what is open and decides. `for` comes from `rules`.
pub fn decide(
    open: &[OpenIncident],
    held: Vec<Held>,
    keep: &HashSet<Kind>,
    rules: &RulesSettings,
    now: DateTime<Utc>,
) -> Vec<Decision> {
    let mut out = Vec::new();
    let held_fps: HashSet<&str> = held.iter().map(|h| h.fingerprint.as_str()).collect();
    for inc in open {
        if !held_fps.contains(inc.fingerprint.as_str()) && !keep.contains(&inc.kind) {
            out.push(Decision::Resolve { id: inc.id });
        }
    }
    for h in held {
        match open.iter().find(|o| o.fingerprint == h.fingerprint) {
            Some(o) => out.push(Decision::Refresh {
                id: o.id,
                held: Box::new(h),
            }),
            None => {
                let since = h.since.unwrap_or(now).min(now);
                let delay = chrono::Duration::from_std(rules.rule(h.kind).r#for).unwrap_or(chrono::Duration::MAX);
                let fire_at = since.checked_add_signed(delay).unwrap_or(DateTime::<Utc>::MAX_UTC);
                let fire_at = fire_at_in_window(fire_at, None, h.view.sync_window, rules, now);
                out.push(Decision::Open {
                    held: Box::new(h),
                    since,
                    fire_at,
                    fire_now: fire_at <= now,
                });
            }
        }
    }
    out
}

/// When an `out_of_sync` fires that sync windows hold (`window`, now) or held (`before`, as stored): its `for` after
/// the window ends (never earlier than `fire_at`); or, when the window it waited for is gone before its end (taken
/// out of the AppProject), its `for` from `now` (never later than `fire_at`).
pub fn fire_at_in_window(
    fire_at: DateTime<Utc>,
    before: Option<crate::domain::SyncWindowHold>,
    window: Option<crate::domain::SyncWindowHold>,
    rules: &RulesSettings,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    let delay = chrono::Duration::from_std(rules.rule(Kind::OutOfSync).r#for).unwrap_or(chrono::Duration::MAX);
    let after = |t: DateTime<Utc>| t.checked_add_signed(delay).unwrap_or(DateTime::<Utc>::MAX_UTC);
    match (window, before) {
        (Some(w), _) => fire_at.max(after(w.until)),
        (None, Some(b)) if b.active(now) => fire_at.min(after(now)),
        _ => fire_at,
    }
}

#[cfg(test)]
mod tests;
