//! How a changed Application's incidents follow its conditions: open (pending, or firing at once), refresh,
//! resolve — each decision of `incidents::decide` applied to the incidents' rows in the batch's transaction. What
//! tells someone (an incident fired or resolved) is returned as a `notify::Effect` in the batch, which
//! `notify::apply` carries out in the same transaction once the Application is done.

use chrono::{DateTime, Utc};

use super::super::Core;
use super::super::IncidentChange;
use super::super::explain::Assessment;
use super::super::notify::{self, Effect};
use super::Batch;
use crate::argocd::AppId;
use crate::domain::IncidentState;
use crate::incidents::{self, Decision, Held};
use crate::routing;
use crate::store::{IncidentRecord, Store, StoreError, WriteTx};

impl Core {
    /// Compares the conditions held with the incidents open and applies each decision. Pending incidents (no
    /// notification yet) are written with the batch; anything that notifies is written at once. `at.open` is
    /// updated to what is open after.
    pub(super) async fn evaluate(
        &self,
        at: &mut Applying<'_>,
        assessment: Assessment,
        resolution: Option<&str>,
    ) -> Result<Vec<IncidentChange>, StoreError> {
        let open_now: Vec<incidents::OpenIncident> = at
            .open
            .iter()
            .map(|r| incidents::OpenIncident {
                id: r.id,
                kind: r.kind,
                fingerprint: r.fingerprint.clone(),
                state: r.state,
            })
            .collect();
        let decisions = incidents::decide(
            &open_now,
            assessment.held,
            &assessment.keep,
            &self.settings.rules,
            at.now,
        );
        let mut changes = Vec::new();
        for d in decisions {
            match d {
                Decision::Open {
                    held,
                    since,
                    fire_at,
                    fire_now,
                } => changes.push(self.open_incident(at, &held, since, fire_at, fire_now).await?),
                Decision::Resolve { id } => changes.extend(self.resolve_open(at, id, resolution).await?),
                Decision::Refresh { id, held } => self.refresh_open(at, id, &held).await?,
            }
        }
        Ok(changes)
    }

    /// A new incident: firing at once (written now, and routed) or pending (written with the batch).
    async fn open_incident(
        &self,
        at: &mut Applying<'_>,
        held: &Held,
        since: DateTime<Utc>,
        fire_at: DateTime<Utc>,
        fire_now: bool,
    ) -> Result<IncidentChange, StoreError> {
        let now = at.now;
        at.batch.storms.opened(&at.app.instance, held.kind);
        let mut view = held.view.clone();
        view.since = since;
        // Who started the sync, in every receiver's message (the person is told when it fires).
        view.notes.extend(routing::initiator::note(&self.settings, &view, now));
        let record = |id: i64, st: IncidentState| IncidentRecord {
            id,
            fingerprint: view.fingerprint.clone(),
            kind: view.kind,
            app: at.app.clone(),
            team: view.team.clone(),
            severity: view.severity,
            state: st,
            since,
            fire_at,
            fired_at: fire_now.then_some(now),
            resolved_at: None,
            notified: false,
            view: view.clone(),
            ack: None,
            storm_id: None,
        };
        if fire_now {
            let id =
                Store::insert_incident(at.tx, &view, at.app, IncidentState::Firing, since, fire_at, Some(now)).await?;
            let fired = record(id, IncidentState::Firing);
            let open = notify::candidates(at.open);
            (at.batch.effects).push(Effect::Fired {
                rec: fired.clone(),
                open,
            });
            at.batch.wake = true;
            if !held.kind.is_informational() {
                at.open.push(fired);
            }
        } else {
            // Written with the batch; until then known by a negative placeholder id.
            at.batch.next_placeholder -= 1;
            let rec = record(at.batch.next_placeholder, IncidentState::Pending);
            at.batch.new_pending.push(rec.clone());
            at.open.push(rec);
        }
        Ok(IncidentChange {
            kind: held.kind,
            fingerprint: held.fingerprint.clone(),
            state: if fire_now && held.kind.is_informational() {
                IncidentState::Resolved
            } else if fire_now {
                IncidentState::Firing
            } else {
                IncidentState::Pending
            },
        })
    }

    /// The condition of an open incident went away (or, with `resolution`, the Application itself). `None` when it
    /// is not open (any more).
    async fn resolve_open(
        &self,
        at: &mut Applying<'_>,
        id: i64,
        resolution: Option<&str>,
    ) -> Result<Option<IncidentChange>, StoreError> {
        let Some(pos) = at.open.iter().position(|r| r.id == id) else {
            return Ok(None);
        };
        let mut rec = at.open.remove(pos);
        at.batch.storms.resolved(rec.storm_id);
        if let Some(why) = resolution
            && rec.id > 0
            && rec.state != IncidentState::Pending
        {
            // Kept with the incident, so the resolve message says why.
            rec.view.resolution = Some(why.to_string());
            Store::refresh_incident(at.tx, rec.id, &rec.view).await?;
        }
        if rec.id < 0 {
            // Opened and gone within this batch: it never needs a row.
            at.batch.new_pending.retain(|p| p.id != rec.id);
        } else if rec.state == IncidentState::Pending {
            at.batch.resolved_pending.push(rec.id);
        }
        let change = IncidentChange {
            kind: rec.kind,
            fingerprint: rec.fingerprint.clone(),
            state: IncidentState::Resolved,
        };
        if rec.id > 0 && rec.state != IncidentState::Pending {
            at.batch.effects.push(Effect::Resolved(rec));
            at.batch.wake = true;
        }
        Ok(Some(change))
    }

    /// The Application stops being live (deleted in Argo CD; `before` is its last live state): its team is told
    /// once, when something was firing or its namespace is one where every deletion is told
    /// ([`incidents::deletion`]). Its open incidents are resolved first, so that what is told is true.
    pub(super) async fn close_deleted(
        &self,
        at: &mut Applying<'_>,
        before: &crate::state::AppState,
        team: &str,
        why: &str,
    ) -> Result<Vec<IncidentChange>, StoreError> {
        let firing: Vec<crate::domain::Incident> = (at.open.iter())
            .filter(|r| r.id > 0 && r.state == IncidentState::Firing && !r.kind.is_informational())
            .map(|r| r.full_view())
            .collect();
        let firing: Vec<&crate::domain::Incident> = firing.iter().collect();
        let news = incidents::deletion(
            before,
            &firing,
            &self.settings.rules,
            team,
            self.settings.argocd.ui_url(&before.snapshot.app.instance),
            at.now,
            self.zone_of(team),
        )
        .map(|mut held| {
            incidents::link_commits(&mut held.view, &self.settings.links);
            held
        });
        let mut changes = self.resolve_all(at, why).await?;
        if let Some(held) = news {
            let now = at.now;
            changes.push(self.open_incident(at, &held, now, now, true).await?);
        }
        Ok(changes)
    }

    /// Resolves every incident open for the Application, saying why.
    pub(super) async fn resolve_all(
        &self,
        at: &mut Applying<'_>,
        why: &str,
    ) -> Result<Vec<IncidentChange>, StoreError> {
        let ids: Vec<i64> = at.open.iter().map(|r| r.id).collect();
        let mut changes = Vec::with_capacity(ids.len());
        for id in ids {
            changes.extend(self.resolve_open(at, id, Some(why)).await?);
        }
        Ok(changes)
    }

    /// The condition still holds: show its new details, if any.
    async fn refresh_open(&self, at: &mut Applying<'_>, id: i64, held: &Held) -> Result<(), StoreError> {
        let Some(rec) = at.open.iter_mut().find(|r| r.id == id) else {
            return Ok(());
        };
        let mut view = held.view.clone();
        view.since = rec.view.since;
        view.notes = rec.view.notes.clone();
        if view == rec.view {
            return Ok(()); // nothing new to show
        }
        let fire_at = match rec.state {
            IncidentState::Pending => {
                let rules = &self.settings.rules;
                incidents::fire_at_in_window(rec.fire_at, rec.view.sync_window, view.sync_window, rules, at.now)
            }
            _ => rec.fire_at,
        };
        let moved = fire_at != rec.fire_at;
        rec.view = view.clone();
        rec.severity = view.severity;
        rec.fire_at = fire_at;
        if id < 0 {
            if let Some(p) = at.batch.new_pending.iter_mut().find(|p| p.id == id) {
                p.view = view;
                p.severity = rec.severity;
                p.fire_at = fire_at;
            }
        } else {
            Store::refresh_incident(at.tx, id, &view).await?;
            if moved {
                // Its `for` starts when the sync window that holds it ends.
                Store::set_incident_state(at.tx, id, IncidentState::Pending, fire_at).await?;
            }
        }
        Ok(())
    }
}

/// Where one Application's incident decisions are applied: its transaction, its batch, the incidents open for it.
pub(super) struct Applying<'a> {
    pub(super) tx: &'a mut WriteTx,
    pub(super) batch: &'a mut Batch,
    pub(super) app: &'a AppId,
    pub(super) open: &'a mut Vec<IncidentRecord>,
    pub(super) now: DateTime<Utc>,
}
