//! Incidents: which conditions an Application's state is in ([`held_conditions`]), and the lifecycle decisions
//! (pending → firing → resolved) that follow ([`decide`]). Each held condition carries what a person needs to
//! read it: the problem in their words, the resources with their health and links into Argo CD, the sources with
//! the revision of each (and the commit on GitHub or GitLab), the messages once, and the hints (`hints`).
//! Pure: no I/O, "now" comes in as an argument.

pub mod hints;
mod view;

use chrono::{DateTime, Utc};

use sha2::{Digest, Sha256};
use std::collections::HashSet;

use crate::domain::{IncidentState, Kind};

use crate::argocd::Snapshot;
use crate::configuration::RulesSettings;
use crate::domain::{Incident, ResourceRef, Severity};
use crate::state::AppState;
pub use view::{first_sentence, plural};
use view::{resource_ref, resource_url, sources};

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

pub fn fingerprint(app: &crate::argocd::AppId, kind: Kind, extra: &str) -> String {
    let digest = Sha256::digest(format!("{}/{}|{}|{}", app.namespace, app.name, kind.as_str(), extra));
    hex::encode(&digest[..10])
}

fn base_view(state: &AppState, kind: Kind, severity: Severity, team: &str, argocd_url: Option<&str>) -> Incident {
    let s = &state.snapshot;
    let url = s.argocd_url.as_deref().or(argocd_url).map(|u| {
        format!(
            "{}/applications/{}/{}",
            u.trim_end_matches('/'),
            s.app.namespace,
            s.app.name
        )
    });
    Incident {
        kind,
        severity,
        state: crate::domain::IncidentState::Firing,
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
        ..Default::default()
    }
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
            if r.status == "PruneSkipped"
                && r.message.contains("requires pruning")
                && !out
                    .iter()
                    .any(|o| o.kind == r.kind && o.namespace == r.namespace && o.name == r.name)
            {
                out.push(ResourceRef {
                    status: "PruneSkipped".into(),
                    ..result_ref(r)
                });
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
    let s = &state.snapshot;
    let mut out = Vec::new();
    if !state.is_live() {
        // Being deleted, or gone: nothing about it is a problem any more; whatever is open resolves.
        return out;
    }
    let mut add = |kind: Kind, extra: &str, since: Option<DateTime<Utc>>, fill: &dyn Fn(&mut Incident)| {
        let rule = rules.rule(kind);
        if !rule.enabled {
            return;
        }
        let mut severity = rule.severity;
        if kind == Kind::Pruned && is_production(s, rules) {
            severity = rules.production().1;
        }
        let mut view = base_view(state, kind, severity, team, argocd_url);
        view.fingerprint = fingerprint(&s.app, kind, extra);
        if let Some(t) = since {
            view.since = t;
        }
        fill(&mut view);
        // Each resource links to its node in the Argo CD UI, next to the Application's link.
        if let Some(app_url) = view.app_url.clone() {
            for r in &mut view.resources {
                r.url = Some(resource_url(&app_url, r));
            }
        }
        view.hints = hints::for_incident(kind, state, &view, rules);
        out.push(Held {
            kind,
            fingerprint: view.fingerprint.clone(),
            since,
            severity,
            view,
        });
    };
    let app = s.app.to_string();
    let out_of_sync_resources: Vec<ResourceRef> = s
        .resources
        .iter()
        .filter(|r| r.status == "OutOfSync")
        .map(|r| ResourceRef {
            status: if r.requires_pruning {
                "OutOfSync (requires pruning)".into()
            } else {
                r.status.clone()
            },
            ..resource_ref(r)
        })
        .collect();
    let condition_messages: Vec<String> = s
        .conditions
        .iter()
        .map(|c| format!("{}: {}", c.r#type, c.message))
        .collect();

    if s.sync_status == "OutOfSync" {
        add(Kind::OutOfSync, "", Some(state.sync_since), &|v| {
            v.summary = format!("{app} is OutOfSync");
            v.condition = "OutOfSync".into();
            v.resources = out_of_sync_resources.clone();
            v.messages = condition_messages.clone();
        });
    }
    let prunes = pending_prunes(s);
    if !prunes.is_empty() {
        let since = state.prune_since.values().min().copied();
        add(Kind::PrunePending, "", since, &|v| {
            v.summary = format!(
                "{app}: {} removed from Git {} still running in the cluster, waiting to be pruned",
                plural(prunes.len(), "resource"),
                if prunes.len() == 1 { "is" } else { "are" }
            );
            v.condition = format!("{} waiting to be pruned", plural(prunes.len(), "resource"));
            v.resources = prunes.clone();
        });
    }
    if let Some(op) = &s.operation {
        let op_id = op.started_at.map(|t| t.to_rfc3339()).unwrap_or_default();
        // When the operation ended, by Argo CD's clock: a failed sync or a prune happened then, not when Herald heard.
        let ended = op.finished_at.or(op.started_at);
        match op.phase.as_str() {
            "Failed" | "Error" => {
                add(Kind::SyncFailed, &op_id, ended, &|v| {
                    let what = if op.phase == "Error" {
                        "sync error"
                    } else {
                        "sync failed"
                    };
                    v.summary = format!("{app}: sync {} — {}", op.phase.to_lowercase(), first_line(&op.message));
                    v.condition = match first_sentence(&op.message, 80) {
                        first if first.is_empty() => what.to_string(),
                        first => format!("{what}: {first}"),
                    };
                    v.resources = op
                        .resources
                        .iter()
                        .filter(|r| r.status == "SyncFailed" || r.hook_phase == "Failed")
                        .map(result_ref)
                        .collect();
                    // The full message once: a SyncError condition repeats the operation's message.
                    v.messages =
                        view::once(std::iter::once(op.message.clone()).chain(condition_messages.iter().cloned()));
                    v.since = op.finished_at.or(op.started_at).unwrap_or(v.since);
                });
            }
            "Running" | "Terminating" => {
                keep.insert(Kind::SyncFailed);
            }
            _ => {}
        }
        let pruned: Vec<ResourceRef> = op
            .resources
            .iter()
            .filter(|r| r.status == "Pruned")
            .map(result_ref)
            .collect();
        if !pruned.is_empty() && op.phase != "Running" {
            let before = s.previous_revision.clone();
            add(Kind::Pruned, &op_id, ended, &|v| {
                let names: Vec<String> = pruned.iter().map(|r| r.display()).collect();
                v.summary = format!("{app}: the sync deleted {} from the cluster", names.join(", "));
                v.condition = match pruned.as_slice() {
                    [one] => format!("the sync deleted {} {}", one.kind, one.name),
                    many => format!("the sync deleted {}", plural(many.len(), "resource")),
                };
                v.resources = pruned.clone();
                v.previous_revision = before.clone();
                v.since = op.finished_at.or(op.started_at).unwrap_or(v.since);
            });
        }
    }
    if s.health_status == "Degraded" || s.health_status == "Missing" {
        add(Kind::Degraded, "", Some(state.health_since), &|v| {
            v.summary = format!("{app} is {}", s.health_status);
            v.condition = s.health_status.clone();
            v.messages = s
                .health_message
                .iter()
                .filter(|m| !m.trim().is_empty())
                .cloned()
                .collect();
            // Why: each unhealthy resource with its health and Argo CD's message about it.
            v.resources = s
                .resources
                .iter()
                .filter(|r| matches!(r.health.as_deref(), Some("Degraded") | Some("Missing")))
                .map(|r| ResourceRef {
                    status: r.health.clone().unwrap_or_default(),
                    message: r.health_message.clone().unwrap_or_default(),
                    ..resource_ref(r)
                })
                .collect();
        });
    }
    let bad_condition = s
        .conditions
        .iter()
        .any(|c| c.r#type == "ComparisonError" || c.r#type == "InvalidSpecError");
    if s.sync_status == "Unknown" || bad_condition {
        let since = (s.sync_status == "Unknown").then_some(state.sync_since);
        add(Kind::SyncUnknown, "", since, &|v| {
            let error = s.conditions.iter().find(|c| c.r#type.ends_with("Error"));
            v.summary = match error {
                Some(c) => format!("{app}: {} — {}", c.r#type, first_line(&c.message)),
                None => format!("{app}: sync status is Unknown"),
            };
            v.condition = match (s.sync_status == "Unknown", error) {
                (true, Some(c)) => format!("sync status Unknown ({})", c.r#type),
                (true, None) => "sync status Unknown".into(),
                (false, Some(c)) => c.r#type.clone(),
                (false, None) => "sync status Unknown".into(),
            };
            v.messages = condition_messages.clone();
        });
    }
    out
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
        status: r.status.clone(),
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

#[cfg(test)]
mod tests;
