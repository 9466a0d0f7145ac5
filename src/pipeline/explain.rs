//! What the pipeline decides about an Application before anything is written, as pure functions the ingest itself
//! calls: who owns the state and which conditions it holds ([`assess`]). [`explain`] strings it together with the
//! delivery pipeline (`super::delivery`) for `herald route`, so what the command shows is what the service would
//! do: where each incident goes, and whether it is held back (inhibited by another incident of the Application).

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::delivery::{self, DeliveryPlan, Facts};
use crate::argocd::{AppId, Snapshot};
use crate::configuration::Settings;
use crate::domain::{Hold, IncidentState, Kind, Labels};
use crate::incidents::{self, Held};
use crate::routing::inhibit::{Candidate, Inhibitor};
use crate::routing::{self, Router};
use crate::state::{self, AppState, Outcome};

/// The owning team of a state and the conditions it holds now: what the ingest decides before it compares with
/// what is open.
#[derive(Debug, Clone)]
pub struct Assessment {
    pub team: String,
    pub held: Vec<Held>,
    /// Kinds whose open incidents must be left alone because the state cannot tell yet (a sync still running).
    pub keep: HashSet<Kind>,
}

pub fn assess(settings: &Settings, state: &AppState) -> Assessment {
    let team = routing::owning_team(&state.snapshot, &settings.ownership);
    let mut keep = HashSet::new();
    let mut held = incidents::held_conditions(
        state,
        &settings.rules,
        &team,
        settings.argocd.ui_url(&state.snapshot.app.instance),
        &mut keep,
    );
    // What the Application asks for itself (self-service), else what its AppProject asks for; routing decides what
    // of it the team allows.
    let key = &settings.ownership.receivers_annotation;
    let snap = &state.snapshot;
    let asked: Vec<String> = (snap.annotations.get(key).or_else(|| snap.project_annotations.get(key)))
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    for h in &mut held {
        h.view.asked_receivers = asked.clone();
        incidents::link_commits(&mut h.view, &settings.links);
    }
    Assessment { team, held, keep }
}

/// What `herald route` shows for one Application.
#[derive(Debug, Clone)]
pub struct Explanation {
    pub app: AppId,
    pub team: String,
    pub incidents: Vec<ExplainedIncident>,
}

#[derive(Debug, Clone)]
pub struct ExplainedIncident {
    pub held: Held,
    /// The rule's `for`: how long the condition must hold before the incident fires.
    pub fires_after: Duration,
    pub delivery: DeliveryPlan,
    /// Held back once it fires, while the other incidents shown fire too (inhibited).
    pub hold: Option<Hold>,
}

/// The decisions for `snap` seen for the first time at `now`, its AppProject having `windows` (its sync windows).
/// `None` only if the state module stops treating a first snapshot as a change.
pub fn explain(
    settings: &Settings,
    snap: Snapshot,
    windows: &[crate::argocd::sync_windows::SyncWindow],
    now: DateTime<Utc>,
) -> Option<Explanation> {
    let Outcome::Changed { state, .. } = state::apply(None, snap, now) else {
        return None;
    };
    let router = Router::new(settings);
    let inhibitor = Inhibitor::new(settings);
    let mut assessment = assess(settings, &state);
    if let Some(h) = assessment.held.iter_mut().find(|h| h.kind == Kind::OutOfSync) {
        h.view.sync_window = super::window_hold(windows, &state.snapshot, now);
    }
    // Each incident as it would be once all of them fire: which are inhibited by which.
    let open: Vec<Candidate> = (assessment.held.iter())
        .map(|h| Candidate {
            labels: Labels::of(&h.view),
            state: IncidentState::Firing,
            fire_at: now,
        })
        .collect();
    let facts = Facts {
        settings,
        router: &router,
        inhibitor: &inhibitor,
        silences: &[],
        open: &open,
        storm: None,
        now,
    };
    let incidents = assessment
        .held
        .into_iter()
        .map(|held| {
            let labels = Labels::of(&held.view);
            ExplainedIncident {
                fires_after: settings.rules.rule(held.kind).r#for,
                delivery: delivery::plan(settings, &router, &labels),
                hold: delivery::hold(
                    &facts,
                    &labels,
                    delivery::Own {
                        ack: None,
                        window: held.view.sync_window.as_ref(),
                    },
                ),
                held,
            }
        })
        .collect();
    Some(Explanation {
        app: state.snapshot.app.clone(),
        team: assessment.team,
        incidents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(yaml: &str) -> Settings {
        Settings::from_yaml(yaml).expect("valid settings")
    }

    fn out_of_sync_app() -> Snapshot {
        let body = serde_json::json!({
            "metadata": {"name": "pay", "namespace": "argocd", "labels": {"team": "payments"}},
            "spec": {"project": "default", "destination": {"namespace": "pay", "server": "https://kubernetes.default.svc"}},
            "status": {"sync": {"status": "OutOfSync"}, "health": {"status": "Healthy"}}
        });
        crate::argocd::parse_body(body.to_string().as_bytes(), 64).expect("a valid Application")
    }

    const TEAMS: &str = "
receivers: [{name: chat, console: {}}, {name: pager, console: {}}]
teams:
  payments:
    receivers: [chat]
    escalation: [{after: 1h, receivers: [pager]}]
";

    #[test]
    fn an_out_of_sync_application_goes_to_its_teams_receivers_with_its_escalation_ladder() {
        let s = settings(TEAMS);
        let e = explain(&s, out_of_sync_app(), &[], Utc::now()).expect("a first snapshot is a change");
        assert_eq!(e.team, "payments");
        let [incident] = e.incidents.as_slice() else {
            panic!("one incident expected, got {:?}", e.incidents);
        };
        assert_eq!(incident.held.kind, Kind::OutOfSync);
        assert_eq!(incident.delivery.route.receivers, ["chat"]);
        assert!(incident.delivery.route.matched_routes.is_empty());
        assert_eq!(incident.delivery.groups.len(), 1);
        assert_eq!(incident.delivery.groups[0].receiver, "chat");
        let steps: Vec<_> = incident.delivery.escalation.iter().map(|s| &s.receivers).collect();
        assert_eq!(steps, [&vec!["pager".to_string()]]);
    }

    #[test]
    fn an_informational_incident_is_not_escalated() {
        let s = settings(TEAMS);
        let mut labels = Labels::of(
            &explain(&s, out_of_sync_app(), &[], Utc::now()).unwrap().incidents[0]
                .held
                .view,
        );
        labels.kind = Kind::Pruned;
        let plan = delivery::plan(&s, &Router::new(&s), &labels);
        assert_eq!(plan.route.receivers, ["chat"]);
        assert!(plan.escalation.is_empty());
    }
}
