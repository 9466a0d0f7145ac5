//! Which syncs are told as changes: a successful sync that deployed a revision other than the last one Herald
//! stored for the Application goes to the `pagerduty` receivers with `change_events: true` that hear of it, once
//! per (Application, revision). Pure: the stored state and the new one in, notifications out.

use chrono::{DateTime, Utc};

use crate::argocd::Snapshot;
use crate::configuration::{ReceiverKind, Settings, TeamSettings};
use crate::domain::notification::short_revision as short;
use crate::domain::{Action, Change, Notification};
use crate::routing::owning_team;
use crate::state::AppState;

/// What a successful sync deployed (the revisions of a multi-source Application, joined); none for any other
/// operation state.
fn deployed(s: &Snapshot) -> Option<String> {
    let op = s.operation.as_ref().filter(|o| o.phase == "Succeeded")?;
    op.revision
        .clone()
        .or_else(|| (!op.revisions.is_empty()).then(|| op.revisions.join(",")))
}

/// The change `next` tells after `prev` (the state stored for the same Application), if it deployed something
/// new. The last deployed revision is the stored one when the stored operation succeeded; else (a sync was running
/// or failed in between) Argo CD's own history in `next` says what was deployed before: a sync of the revision
/// already deployed is not a change.
pub fn change_of(settings: &Settings, prev: &AppState, next: &AppState, now: DateTime<Utc>) -> Option<Change> {
    let s = &next.snapshot;
    let revision = deployed(s)?;
    let before = match prev.snapshot.operation.as_ref() {
        Some(op) if op.phase == "Succeeded" => deployed(&prev.snapshot),
        _ => s.previous_revision.clone(),
    };
    if before.as_deref() == Some(revision.as_str()) {
        return None;
    }
    let op = s.operation.as_ref()?;
    let initiator = match (&op.initiator.username, op.initiator.automated) {
        (Some(user), _) => user.clone(),
        (None, true) => "automated".into(),
        (None, false) => "unknown".into(),
    };
    Some(Change {
        app_namespace: s.app.namespace.clone(),
        app_name: s.app.name.clone(),
        project: s.project.clone(),
        destination_namespace: s.destination.namespace.clone().unwrap_or_default(),
        revision,
        previous_revision: before,
        initiator,
        finished_at: op.finished_at.unwrap_or(now),
        app_url: crate::argocd::app_url(settings.argocd.url.as_deref(), s),
    })
}

/// Whether a team names `receiver` among its receivers or escalation steps.
fn named_by(team: &TeamSettings, receiver: &str) -> bool {
    team.receivers.iter().any(|r| r == receiver)
        || (team.escalation.iter()).any(|s| s.receivers.iter().any(|r| r == receiver))
}

/// The `pagerduty` receivers with `change_events: true` that hear of a change to an Application of `team`: a
/// receiver some team names is that team's service and hears of its Applications only; a receiver no team names
/// (a central "changes" service) hears of every Application.
fn change_receivers<'a>(settings: &'a Settings, team: &str) -> Vec<&'a str> {
    (settings.receivers.iter())
        .filter(|r| matches!(&r.kind, ReceiverKind::Pagerduty(c) if c.change_events))
        .map(|r| r.name.as_str())
        .filter(|name| {
            let owners: Vec<&String> = (settings.teams.iter())
                .filter(|(_, t)| named_by(t, name))
                .map(|(team, _)| team)
                .collect();
            owners.is_empty() || owners.iter().any(|t| t.as_str() == team)
        })
        .collect()
}

/// One notification per change-events receiver that hears of the Application ([`change_receivers`]), in the
/// thread of (Application, revision): the outbox keeps one of each, whatever replays the body.
pub fn notifications(settings: &Settings, prev: &AppState, next: &AppState, now: DateTime<Utc>) -> Vec<Notification> {
    let team = owning_team(&next.snapshot, &settings.ownership);
    let receivers = change_receivers(settings, &team);
    if receivers.is_empty() {
        return Vec::new();
    }
    let Some(change) = change_of(settings, prev, next, now) else {
        return Vec::new();
    };
    let title = format!(
        "{} synced to {} by {}",
        change.app_name,
        short(&change.revision),
        change.initiator
    );
    receivers
        .into_iter()
        .map(|receiver| Notification {
            receiver: receiver.to_string(),
            action: Action::Open,
            thread_key: format!(
                "{receiver}:change:{}/{}:{}",
                change.app_namespace, change.app_name, change.revision
            ),
            title: title.clone(),
            reason: "synced to a new revision".into(),
            incidents: Vec::new(),
            created_at: now,
            recipient: None,
            change: Some(change.clone()),
            digest: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argocd::parse_body;
    use crate::state::{Outcome, apply};

    const OLD: &str = "1111111111111111111111111111111111111111";
    const NEW: &str = "2222222222222222222222222222222222222222";

    /// The state of `payments` with an operation in `phase` at `revision`, Argo CD's history being `history`.
    fn state(phase: &str, revision: &str, history: &[&str]) -> AppState {
        let history: Vec<serde_json::Value> = (history.iter()).map(|r| serde_json::json!({"revision": r})).collect();
        let body = serde_json::json!({
            "metadata": {"name": "payments", "namespace": "argocd"},
            "spec": {"project": "shop", "destination": {"namespace": "pay"}},
            "status": {"sync": {"status": "Synced"}, "health": {"status": "Healthy"}, "history": history,
                "operationState": {"phase": phase, "startedAt": "2025-01-01T00:00:00Z",
                    "finishedAt": "2025-01-01T00:01:00Z", "operation": {"initiatedBy": {"automated": true}},
                    "syncResult": {"revision": revision}}}
        });
        let snap = parse_body(body.to_string().as_bytes(), 64).expect("valid body");
        match apply(None, snap, Utc::now()) {
            Outcome::Changed { state, .. } => *state,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn settings() -> Settings {
        Settings::from_yaml(
            "argocd: {url: 'https://cd.example.com'}\nreceivers: [{name: pd, pagerduty: {routing_key: k, change_events: true}}, {name: quiet, pagerduty: {routing_key: k}}]",
        )
        .expect("valid")
    }

    #[test]
    fn a_successful_sync_to_another_revision_is_a_change_for_each_receiver_that_wants_them() {
        let out = notifications(
            &settings(),
            &state("Succeeded", OLD, &[OLD]),
            &state("Succeeded", NEW, &[OLD, NEW]),
            Utc::now(),
        );

        assert_eq!(out.len(), 1, "not `quiet`");
        assert_eq!(out[0].receiver, "pd");
        assert_eq!(out[0].thread_key, format!("pd:change:argocd/payments:{NEW}"));
        assert_eq!(out[0].title, "payments synced to 2222222 by automated");
        let change = out[0].change.as_ref().expect("a change");
        assert_eq!(change.previous_revision.as_deref(), Some(OLD));
        assert_eq!(change.destination_namespace, "pay");
        assert_eq!(
            change.app_url.as_deref(),
            Some("https://cd.example.com/applications/argocd/payments")
        );
    }

    #[test]
    fn the_same_revision_again_a_failed_sync_or_a_resync_of_what_is_deployed_is_no_change() {
        let s = settings();
        let now = Utc::now();
        let deployed = state("Succeeded", NEW, &[OLD, NEW]);
        assert!(notifications(&s, &deployed, &state("Succeeded", NEW, &[OLD, NEW]), now).is_empty());
        assert!(notifications(&s, &deployed, &state("Failed", OLD, &[OLD, NEW]), now).is_empty());
        let running = state("Running", NEW, &[OLD, NEW]);
        assert!(notifications(&s, &running, &state("Succeeded", NEW, &[OLD, NEW, NEW]), now).is_empty());
        assert_eq!(
            notifications(&s, &running, &state("Succeeded", "v2", &[OLD, NEW, "v2"]), now).len(),
            1,
            "after a running sync, Argo CD's history says what was deployed before"
        );
    }

    #[test]
    fn a_team_s_change_receiver_hears_of_its_own_applications_only_and_a_central_one_of_all() {
        let s = Settings::from_yaml(
            "ownership: {projects: {shop: payments}}\n\
             teams: {payments: {receivers: [pd-pay]}, search: {receivers: [pd-search-main], escalation: [{after: 1h, receivers: [pd-search]}]}}\n\
             receivers: [{name: pd-pay, pagerduty: {routing_key: k, change_events: true}},\
             {name: pd-search, pagerduty: {routing_key: k, change_events: true}},\
             {name: pd-search-main, pagerduty: {routing_key: k, change_events: true}},\
             {name: pd-central, pagerduty: {routing_key: k, change_events: true}}]",
        )
        .expect("valid");

        let out = notifications(
            &s,
            &state("Succeeded", OLD, &[OLD]),
            &state("Succeeded", NEW, &[OLD, NEW]),
            Utc::now(),
        );

        let receivers: Vec<&str> = out.iter().map(|n| n.receiver.as_str()).collect();
        assert_eq!(receivers, ["pd-pay", "pd-central"], "not search's services");
    }
}
