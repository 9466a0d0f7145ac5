//! Storms in the pipeline: one broken cluster is one incident. In the batch writer's transaction, after the
//! batch's incidents are written and before any of them is told ([`Core::storms_in`]): the open incidents of
//! [`storm::KINDS`] of an instance where one opened are judged ([`storm::judge`]); a storm opens as an incident of
//! kind `storm` (pending until its first member fires, then routed like any incident: the default team, or a route
//! on `kind: storm`), its members name it (`incidents.storm_id`), and it resolves once more than half of them
//! recovered. The members are held by it (the delivery pipeline's storm stage) while it is open and for
//! `storm.window` after; what still fires then is told as usual. Nothing here decides who is told.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::Core;
use crate::argocd::AppId;
use crate::domain::{Incident, IncidentState, Kind};
use crate::incidents::storm::{self, Candidate, OpenStorm, Scope, Verdict};
use crate::store::{Store, StoreError, StormMember, WriteTx};

/// What a batch did that a storm may follow from: the instances where an incident of [`storm::KINDS`] opened, the
/// storms whose members resolved.
#[derive(Debug, Default)]
pub(super) struct StormTouch {
    pub(super) instances: BTreeSet<String>,
    pub(super) storms: BTreeSet<i64>,
}

impl StormTouch {
    /// An incident of `kind` opened for an Application of `instance`.
    pub(super) fn opened(&mut self, instance: &str, kind: Kind) {
        if storm::stormable(kind) && !self.instances.contains(instance) {
            self.instances.insert(instance.to_string());
        }
    }

    /// A member of the storm `storm_id` (if it is one) resolved.
    pub(super) fn resolved(&mut self, storm_id: Option<i64>) {
        self.storms.extend(storm_id);
    }

    fn is_empty(&self) -> bool {
        self.instances.is_empty() && self.storms.is_empty()
    }
}

impl Core {
    /// The batch's storm step, in its transaction once its incidents are written: storms open and are joined where
    /// `touch` opened incidents, and every storm touched is counted again (and fired, or resolved). Returns whether
    /// anything changed (the scheduler then looks now).
    pub(super) async fn storms_in(
        &self,
        tx: &mut WriteTx,
        touch: &StormTouch,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        if touch.is_empty() {
            return Ok(false);
        }
        Store::lock_storms(tx).await?;
        let open: Vec<OpenStorm> = (Store::storms_tx(tx, now).await?.into_iter())
            .filter(|s| s.ended_at.is_none())
            .collect();
        let mut changed: BTreeMap<i64, OpenStorm> = (open.iter())
            .filter(|s| touch.storms.contains(&s.id))
            .map(|s| (s.id, s.clone()))
            .collect();
        let settings = &self.settings.storm;
        for instance in touch.instances.iter().filter(|_| settings.enabled()) {
            let candidates: Vec<Candidate> = (Store::storm_candidates(tx, instance).await?.iter())
                .map(candidate)
                .collect();
            for verdict in storm::judge(&candidates, &open, settings.min_apps, settings.window) {
                let (storm, members) = match verdict {
                    Verdict::Join { storm, members } => match open.iter().find(|s| s.id == storm) {
                        Some(s) => (s.clone(), members),
                        None => continue,
                    },
                    Verdict::Open { scope, since, members } => (self.open_storm(tx, scope, since).await?, members),
                };
                Store::join_storm(tx, storm.id, &members).await?;
                changed.insert(storm.id, storm);
            }
        }
        for storm in changed.values() {
            self.follow_storm(tx, storm, now).await?;
        }
        Ok(!changed.is_empty())
    }

    /// A new storm about `scope`, begun at `since`: its incident (pending: it fires with its first member) and its
    /// row.
    async fn open_storm(&self, tx: &mut WriteTx, scope: Scope, since: DateTime<Utc>) -> Result<OpenStorm, StoreError> {
        let app = AppId::of(&scope.instance, "", scope.about());
        let occurrence = format!("{}|{}|{}", scope.cluster, scope.kind, since.to_rfc3339());
        let view = Incident {
            fingerprint: crate::incidents::fingerprint(&app, Kind::Storm, &occurrence),
            kind: Kind::Storm,
            severity: self.settings.storm.severity,
            state: IncidentState::Pending,
            instance: scope.instance.clone(),
            app_name: scope.about(),
            team: self.settings.ownership.default_team.clone(),
            destination_cluster: scope.cluster.clone(),
            since,
            ..Default::default()
        };
        let never = DateTime::<Utc>::MAX_UTC;
        let id = Store::insert_incident(tx, &view, &app, IncidentState::Pending, since, never, None).await?;
        let storm = OpenStorm {
            id,
            scope,
            since,
            ended_at: None,
        };
        Store::insert_storm(tx, id, &storm).await?;
        tracing::warn!(storm = id, about = %storm.scope.about(), kind = %storm.scope.kind, "storm: many Applications with one problem at once; their incidents are held by it");
        Ok(storm)
    }

    /// Counts the storm's members again: it says how many now; it fires when one of them fires, and resolves once
    /// more than half recovered.
    async fn follow_storm(&self, tx: &mut WriteTx, storm: &OpenStorm, now: DateTime<Utc>) -> Result<(), StoreError> {
        let Some(mut rec) = Store::incident(tx, storm.id).await? else {
            return Ok(());
        };
        if rec.state == IncidentState::Resolved {
            return Ok(());
        }
        let members: Vec<StormMember> = Store::storm_members(tx, storm.id).await?;
        let firing = members.iter().any(|m| m.state == IncidentState::Firing);
        let shared = shared_message(tx, &members).await?;
        let views: Vec<Incident> = members.iter().map(|m| member_view(m, shared.as_deref())).collect();
        let recovered = views.iter().filter(|v| v.state == IncidentState::Resolved).count();
        let over = storm::over(views.len(), recovered);
        let zone = self.zone_of(&self.settings.ownership.default_team);
        let words = storm::describe(&storm.scope, storm.since, &views, over, zone);
        let mut view = rec.view.clone();
        view.summary = words.summary;
        view.condition = words.condition;
        view.messages = words.messages;
        if over {
            view.resolution = Some(format!("{recovered} of {} Applications recovered", views.len()));
            Store::refresh_incident(tx, rec.id, &view).await?;
            Store::end_storm(tx, storm.id, now).await?;
            rec.view = view;
            tracing::info!(
                storm = rec.id,
                recovered,
                members = views.len(),
                "storm over: its members still firing are told after storm.window"
            );
            return super::notify::resolved(&self.settings, tx, &rec, now).await;
        }
        if view != rec.view {
            Store::refresh_incident(tx, rec.id, &view).await?;
            rec.view = view;
        }
        if firing && rec.state == IncidentState::Pending {
            super::notify::pending_storm_fired(&self.teller(), tx, rec, now).await?;
        }
        Ok(())
    }
}

/// An open incident as a storm's candidate.
fn candidate(m: &StormMember) -> Candidate {
    Candidate {
        id: m.id,
        instance: m.app.instance.clone(),
        cluster: m.cluster.clone(),
        kind: m.kind,
        since: m.since,
    }
}

/// The first message all of `members` share, read from the first one's view alone: the only one read whole.
async fn shared_message(tx: &mut WriteTx, members: &[StormMember]) -> Result<Option<String>, StoreError> {
    let Some(first) = members.first() else { return Ok(None) };
    if first.message_key.is_empty() || members.iter().any(|m| m.message_key != first.message_key) {
        return Ok(None);
    }
    Ok(Store::incident(tx, first.id)
        .await?
        .and_then(|rec| rec.view.messages.into_iter().next()))
}

/// A member as [`storm::describe`] reads it: what its row's columns say, with the message all members share as
/// its first (none when they do not all share one — which is all `describe` asks of the messages).
fn member_view(m: &StormMember, shared: Option<&str>) -> Incident {
    Incident {
        id: m.id,
        kind: m.kind,
        instance: m.app.instance.clone(),
        app_namespace: m.app.namespace.clone(),
        app_name: m.app.name.clone(),
        team: m.team.clone(),
        state: m.state,
        since: m.since,
        destination_cluster: m.cluster.clone(),
        messages: shared.map(str::to_string).into_iter().collect(),
        ..Default::default()
    }
}

/// A storm as the status page and `GET /v1/storms` show it: its incident, what it is about, its members counted.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StormView {
    /// The storm incident (kind `storm`).
    pub incident: Incident,
    /// `cluster https://10.20.30.40:6443`, `Argo CD instance us`.
    pub about: String,
    /// The members' kind.
    pub problem: Kind,
    pub since: DateTime<Utc>,
    /// When it ended, if it did: its members still firing are told `storm.window` after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    pub members: crate::store::StormCount,
}

impl super::Pipeline {
    /// The storms holding their members now (open, or over less than `storm.window` ago), oldest first.
    pub async fn storms(&self) -> Result<Vec<StormView>, super::PipelineError> {
        let core = self.core();
        let now = self.now();
        let storms: Vec<OpenStorm> = (core
            .store
            .storms(super::notify::storms_ended_after(&core.settings, now))
            .await?
            .into_iter())
        .filter(|s| s.holds(core.settings.storm.window, now))
        .collect();
        if storms.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = storms.iter().map(|s| s.id).collect();
        let counts = core.store.storm_counts(&ids).await?;
        let incidents = core.store.incidents_by_id(&ids).await?;
        Ok((storms.into_iter())
            .filter_map(|s| {
                let incident = incidents.iter().find(|r| r.id == s.id)?.full_view();
                let members = (counts.iter().find(|(id, _)| *id == s.id)).map_or_else(Default::default, |c| c.1);
                Some(StormView {
                    incident,
                    about: s.scope.about(),
                    problem: s.scope.kind,
                    since: s.since,
                    ended_at: s.ended_at,
                    members,
                })
            })
            .collect())
    }
}
