//! Which syncs are told as changes: a successful sync that deployed a revision other than the last one Herald
//! stored for the Application goes to the change-events receivers (`pagerduty` with `change_events: true`,
//! `grafana`) that hear of it, once
//! per (Application, revision, operation). Pure: the stored state and the new one in, notifications out (the
//! pipeline also skips a change whose thread is already in the outbox: a restart or a second replica).

use chrono::{DateTime, Utc};

use crate::configuration::{ReceiverSettings, Settings, TeamSettings};
use crate::domain::notification::short_revision as short;
use crate::domain::{Action, Body, Change, Notification, Thread};
use crate::routing::owning_team;
use crate::state::AppState;

/// The change `next` tells after `prev` (the state stored for the same Application), if it deployed something
/// new: once per deployment. What was deployed before is the last deployment Herald saw (kept across running and
/// failed syncs, see `AppState::deployed`), else Argo CD's own history in `next`. A sync of the revision already
/// deployed is not a change, and neither is a sync that finished before the last deployment (a late body must
/// not read as a rollback).
pub fn change_of(settings: &Settings, prev: &AppState, next: &AppState, now: DateTime<Utc>) -> Option<Change> {
    let s = &next.snapshot;
    let revision = s.deployed_revision()?;
    let op = s.operation.as_ref()?;
    if let (Some((_, Some(last_at))), Some(at)) = (&prev.deployed, op.finished_at)
        && at < *last_at
    {
        return None;
    }
    let before = match &prev.deployed {
        Some((rev, _)) => Some(rev.clone()),
        None => s.previous_revision.clone(),
    };
    if before.as_deref() == Some(revision.as_str()) {
        return None;
    }
    let initiator = match (&op.initiator.username, op.initiator.automated) {
        (Some(user), _) => user.clone(),
        (None, true) => "automated".into(),
        (None, false) => "unknown".into(),
    };
    Some(Change {
        instance: s.app.instance.clone(),
        app_namespace: s.app.namespace.clone(),
        app_name: s.app.name.clone(),
        project: s.project.clone(),
        destination_namespace: s.destination.namespace.clone().unwrap_or_default(),
        revision,
        previous_revision: before,
        initiator,
        finished_at: op.finished_at.unwrap_or(now),
        app_url: crate::argocd::app_url(settings.argocd.ui_url(&s.app.instance), s),
        team: owning_team(s, &settings.ownership),
    })
}

/// Whether a team names `receiver` among its receivers or escalation steps.
fn named_by(team: &TeamSettings, receiver: &str) -> bool {
    team.receivers.iter().any(|r| r == receiver)
        || (team.escalation.iter()).any(|s| s.receivers.iter().any(|r| r == receiver))
}

/// The receivers `wants` picks (those that send change events, those that post commit statuses) that hear of an
/// Application of `team`: a receiver some team names (in `teams.<t>.receivers` or an escalation step) is that
/// team's service and hears of its Applications only; a receiver no team names (a central "changes" service)
/// hears of every Application. The one rule for every receiver told of syncs rather than incidents.
pub(crate) fn receivers_hearing_of<'a>(
    settings: &'a Settings,
    team: &str,
    wants: impl Fn(&ReceiverSettings) -> bool,
) -> Vec<&'a ReceiverSettings> {
    (settings.receivers.iter())
        .filter(|r| wants(r))
        .filter(|r| {
            let owners: Vec<&String> = (settings.teams.iter())
                .filter(|(_, t)| named_by(t, &r.name))
                .map(|(team, _)| team)
                .collect();
            owners.is_empty() || owners.iter().any(|t| t.as_str() == team)
        })
        .collect()
}

/// The receivers that send change events (`Capabilities::change_events`: PagerDuty's with `change_events: true`,
/// Grafana's annotations) that hear of a change to an Application of `team` ([`receivers_hearing_of`]).
fn change_receivers<'a>(settings: &'a Settings, team: &str) -> Vec<&'a str> {
    receivers_hearing_of(settings, team, |r| r.capabilities().change_events)
        .into_iter()
        .map(|r| r.name.as_str())
        .collect()
}

/// One notification per change-events receiver that hears of the Application ([`change_receivers`]), in the
/// thread of (instance, Application, revision, operation): the outbox keeps one of each, whatever replays the body.
pub fn notifications(
    settings: &Settings,
    prev: &AppState,
    next: &AppState,
    now: DateTime<Utc>,
) -> Vec<(Thread, Notification)> {
    let team = owning_team(&next.snapshot, &settings.ownership);
    let receivers = change_receivers(settings, &team);
    if receivers.is_empty() {
        return Vec::new();
    }
    let Some(change) = change_of(settings, prev, next, now) else {
        return Vec::new();
    };
    let started = next.snapshot.operation.as_ref().and_then(|o| o.started_at);
    let title = format!(
        "{} synced to {} by {}",
        change.app_title(),
        short(&change.revision),
        change.initiator
    );
    receivers
        .into_iter()
        .map(|receiver| {
            let thread = Thread::Change {
                receiver: receiver.to_string(),
                app: next.snapshot.app.clone(),
                revision: change.revision.clone(),
                started,
            };
            let n = Notification::about(
                &thread,
                Action::Open,
                title.clone(),
                "synced to a new revision".into(),
                Body::Change(Box::new(change.clone())),
                now,
            );
            (thread, n)
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

    /// [`notifications`], each in the thread it names.
    fn notifications(settings: &Settings, prev: &AppState, next: &AppState, now: DateTime<Utc>) -> Vec<Notification> {
        (super::notifications(settings, prev, next, now).into_iter())
            .map(|(thread, n)| {
                assert_eq!(
                    (thread.receiver(), thread.key()),
                    (n.receiver.as_str(), n.thread_key.clone())
                );
                n
            })
            .collect()
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
        assert_eq!(
            out[0].thread_key,
            format!("pd:change:argocd/payments:{NEW}@1735689600000")
        );
        assert_eq!(out[0].title, "payments synced to 2222222 by automated");
        let change = out[0].change().expect("a change");
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

    /// `state` with its sync finished at `finished` (RFC 3339), started a minute before.
    fn at(mut s: AppState, finished: &str) -> AppState {
        let t = chrono::DateTime::parse_from_rfc3339(finished)
            .expect("time")
            .with_timezone(&Utc);
        if let Some(op) = s.snapshot.operation.as_mut() {
            op.finished_at = Some(t);
            op.started_at = Some(t - chrono::Duration::minutes(1));
        }
        if let Some((_, at)) = s.deployed.as_mut() {
            *at = Some(t);
        }
        s
    }

    #[test]
    fn one_deployment_is_one_change_and_a_late_body_is_no_rollback() {
        let s = settings();
        let now = Utc::now();
        // bob deployed NEW; a running automated sync came in between; the same deployment's later body is no change.
        let deployed = at(state("Succeeded", NEW, &[OLD, NEW]), "2025-01-01T16:57:43Z");
        let mut running = at(state("Running", NEW, &[OLD, NEW]), "2025-01-01T17:00:00Z");
        running.deployed = deployed.deployed.clone();
        let again = at(state("Succeeded", NEW, &[OLD, NEW, NEW]), "2025-01-01T17:01:00Z");
        assert!(
            notifications(&s, &running, &again, now).is_empty(),
            "the same revision after a running sync"
        );
        // A body of an older sync (finished 16:20:59) arriving after the 16:57:43 one: no invented rollback.
        let late = at(state("Succeeded", OLD, &[OLD]), "2025-01-01T16:20:59Z");
        assert!(
            notifications(&s, &deployed, &late, now).is_empty(),
            "a late body is not a change"
        );
        // A later sync of another revision is one change, its thread naming the operation.
        let next = at(state("Succeeded", "v3", &[OLD, NEW, "v3"]), "2025-01-01T18:00:00Z");
        let out = notifications(&s, &deployed, &next, now);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].change().and_then(|c| c.previous_revision.as_deref()), Some(NEW));
        assert!(
            out[0].thread_key.ends_with(":v3@1735754340000"),
            "{}",
            out[0].thread_key
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
