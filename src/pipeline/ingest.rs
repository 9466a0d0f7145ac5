//! The ingest side: bodies that arrive together are written in one transaction by one batch writer (`Batch`),
//! and each snapshot runs through state → incidents → routing inside it (`ingest_in`).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tracing::Instrument;

use super::explain::{self, Assessment};
use super::{Core, IncidentChange, IngestSummary};
use crate::argocd::{AppId, Snapshot};
use crate::domain::IncidentState;
use crate::incidents::{self, Decision, Held};
use crate::live::Live;
use crate::state::{self, Outcome};
use crate::store::{IncidentRecord, Store, StoreError, WriteTx};

/// What the batch writer is asked to do with one Application.
pub(super) enum Work {
    /// A snapshot from a webhook body (with the body, kept for replay) or from the Argo CD API.
    Snapshot { snap: Box<Snapshot>, raw: Option<String> },
    /// Argo CD confirmed the Application is gone (API 404, absent from a complete listing, stream DELETED).
    Delete(AppId),
}

impl Work {
    fn app(&self) -> &AppId {
        match self {
            Work::Snapshot { snap, .. } => &snap.app,
            Work::Delete(app) => app,
        }
    }
}

/// One piece of work waiting for the batch writer, with where to send its answer.
pub(super) struct Job {
    pub(super) work: Work,
    pub(super) reply: tokio::sync::oneshot::Sender<Result<IngestSummary, StoreError>>,
}

/// Why incidents resolve when the Application itself goes away.
const DELETED: &str = "Application deleted";
const REPLACED: &str = "Application deleted (a new Application now has its name)";

/// Bodies that arrive together are written in one transaction ("group commit"): each is still acknowledged only
/// after the transaction that holds it has committed, but the commit and the writer hand-over are paid once per
/// batch instead of once per body.
const MAX_BATCH: usize = 64;

pub(super) async fn batch_writer(cores: Arc<Live<Core>>, mut rx: tokio::sync::mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let jobs = std::mem::take(&mut batch);
        // The settings of the moment (a reload replaces them between batches, never within one).
        let core = cores.get();
        match core.ingest_batch(&jobs).await {
            Ok((summaries, wake)) => {
                if wake {
                    core.wake_scheduler.notify_one();
                }
                for (job, summary) in jobs.into_iter().zip(summaries) {
                    let _ = job.reply.send(Ok(summary));
                }
            }
            Err(e) if jobs.len() > 1 => {
                // Retry one by one, so one body's trouble is not every body's.
                tracing::warn!(error = %e, size = jobs.len(), "batch failed; retrying its bodies one by one");
                for job in jobs {
                    let r = core
                        .ingest_batch(std::slice::from_ref(&job))
                        .await
                        .map(|(mut v, wake)| {
                            if wake {
                                core.wake_scheduler.notify_one();
                            }
                            v.remove(0)
                        });
                    let _ = job.reply.send(r);
                }
            }
            Err(e) => {
                if let Some(job) = jobs.into_iter().next() {
                    let _ = job.reply.send(Err(e));
                }
            }
        }
    }
}

/// What one transaction of bodies reads up front and writes at the end: the Applications and their open incidents
/// are loaded in two queries, and the state rows, raw bodies and timeline entries are written in a few multi-row
/// statements, instead of a round trip each per body.
#[derive(Default)]
struct Batch {
    apps: std::collections::HashMap<AppId, (String, state::AppState)>,
    open: std::collections::HashMap<AppId, Vec<IncidentRecord>>,
    /// When the batch is written (resolved_at of pending incidents that went away).
    now: DateTime<Utc>,
    dirty: Vec<AppId>,
    raws: Vec<(AppId, DateTime<Utc>, &'static str, String)>,
    /// Pending incidents opened in this batch (placeholder ids below 0), written at the end.
    new_pending: Vec<IncidentRecord>,
    next_placeholder: i64,
    /// Pending incidents whose condition went away: resolved at the end (a pending one notifies nobody).
    resolved_pending: Vec<i64>,
    /// Something fired or resolved: a group may be due now, so the scheduler should not wait for its tick.
    wake: bool,
    transitions: Vec<(AppId, DateTime<Utc>, state::Transition)>,
}

impl Batch {
    async fn load(tx: &mut WriteTx, apps: &[&AppId]) -> Result<Self, StoreError> {
        let mut ids: Vec<AppId> = apps.iter().map(|a| (*a).clone()).collect();
        ids.sort();
        ids.dedup();
        Ok(Self {
            apps: Store::load_apps(tx, &ids).await?,
            open: Store::open_incidents_of(tx, &ids).await?,
            ..Default::default()
        })
    }

    async fn write(mut self, tx: &mut WriteTx) -> Result<(), StoreError> {
        // One row per Application: a statement may not upsert the same row twice.
        self.dirty.sort();
        self.dirty.dedup();
        let rows: Vec<(&str, &state::AppState)> = self
            .dirty
            .iter()
            .filter_map(|id| self.apps.get(id).map(|(team, s)| (team.as_str(), s)))
            .collect();
        Store::save_apps(tx, &rows).await?;
        Store::add_raws(tx, &self.raws).await?;
        Store::insert_pending_incidents(tx, &self.new_pending).await?;
        Store::resolve_pending(tx, &self.resolved_pending, self.now).await?;
        Store::add_transitions_many(tx, &self.transitions).await
    }
}

impl Core {
    /// Writes `jobs` in one transaction, in a span of its own (`size`: how many bodies).
    async fn ingest_batch(&self, jobs: &[Job]) -> Result<(Vec<IngestSummary>, bool), StoreError> {
        let span = tracing::info_span!("ingest_batch", size = jobs.len());
        async {
            let mut tx = self.store.begin().await?;
            let apps: Vec<&AppId> = jobs.iter().map(|j| j.work.app()).collect();
            let mut batch = Batch::load(&mut tx, &apps).await?;
            let mut out = Vec::with_capacity(jobs.len());
            for job in jobs {
                let now = self.clock.now();
                out.push(match &job.work {
                    Work::Snapshot { snap, raw } => {
                        self.ingest_in(&mut tx, &mut batch, (**snap).clone(), raw.as_deref(), now)
                            .await?
                    }
                    Work::Delete(app) => self.delete_in(&mut tx, &mut batch, app, now).await?,
                });
            }
            let wake = batch.wake;
            batch.write(&mut tx).await?;
            tx.commit().await?;
            Ok((out, wake))
        }
        .instrument(span)
        .await
    }

    /// One snapshot in its own transaction (the scheduler's confirmation path).
    pub(super) async fn ingest_alone(&self, snap: Snapshot, now: DateTime<Utc>) -> Result<IngestSummary, StoreError> {
        let mut tx = self.store.begin().await?;
        let mut batch = Batch::load(&mut tx, &[&snap.app]).await?;
        let summary = self.ingest_in(&mut tx, &mut batch, snap, None, now).await?;
        batch.write(&mut tx).await?;
        tx.commit().await?;
        Ok(summary)
    }

    /// One confirmed deletion in its own transaction (the scheduler's confirmation path).
    pub(super) async fn delete_alone(&self, app: &AppId, now: DateTime<Utc>) -> Result<IngestSummary, StoreError> {
        let mut tx = self.store.begin().await?;
        let mut batch = Batch::load(&mut tx, &[app]).await?;
        let summary = self.delete_in(&mut tx, &mut batch, app, now).await?;
        batch.write(&mut tx).await?;
        tx.commit().await?;
        Ok(summary)
    }

    async fn ingest_in(
        &self,
        tx: &mut WriteTx,
        batch: &mut Batch,
        snap: Snapshot,
        raw: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<IngestSummary, StoreError> {
        let app = snap.app.clone();
        let prev = batch.apps.get(&app).map(|(_, s)| s);
        let outcome = state::apply(prev, snap, now);
        if let Some(body) = raw {
            batch.raws.push((app.clone(), now, outcome.label(), body.to_string()));
        }
        let mut summary = IngestSummary {
            application: app.to_string(),
            outcome: outcome.label(),
            sync: String::new(),
            health: String::new(),
            transitions: Vec::new(),
            incidents: Vec::new(),
        };
        match outcome {
            Outcome::Stale { .. } => {
                if let Some(p) = prev {
                    summary.sync = p.snapshot.sync_status.clone();
                    summary.health = p.snapshot.health_status.clone();
                }
            }
            Outcome::Duplicate(state) => {
                summary.sync = state.snapshot.sync_status.clone();
                summary.health = state.snapshot.health_status.clone();
                let team = batch.apps.get(&app).map(|(t, _)| t.clone()).unwrap_or_default();
                batch.apps.insert(app.clone(), (team, *state));
                batch.dirty.push(app.clone());
            }
            Outcome::Changed {
                mut state,
                mut transitions,
            } => {
                let was = prev.map(|p| p.lifecycle());
                // A body for this name that is not the stored Application (a new uid, or the stored one is gone).
                let replaced = prev.is_some_and(|p| {
                    p.deleted_at.is_some() || (p.snapshot.uid.is_some() && p.snapshot.uid != state.snapshot.uid)
                });
                if state.snapshot.deleting && self.argocd_api.is_none() {
                    // Without the API nothing else will confirm it: the deletion trigger's body is the confirmation.
                    state.deleted_at = Some(now);
                }
                if was != Some(state.lifecycle()) && (was.is_some() || !state.is_live()) {
                    transitions.push(state::Transition {
                        field: "lifecycle".into(),
                        from: was.map(str::to_string),
                        to: state.lifecycle().into(),
                    });
                }
                let assessment = explain::assess(&self.settings, &state);
                let team = assessment.team.clone();
                summary.sync = state.snapshot.sync_status.clone();
                summary.health = state.snapshot.health_status.clone();
                batch
                    .transitions
                    .extend(transitions.iter().map(|t| (app.clone(), now, t.clone())));
                summary.transitions = transitions;
                let mut open = batch.open.remove(&app).unwrap_or_default();
                batch.now = now;
                let mut at = Applying {
                    tx,
                    batch,
                    app: &app,
                    open: &mut open,
                    now,
                };
                if replaced {
                    // The old Application's incidents end here; the new one's start from nothing.
                    summary.incidents = self.resolve_all(&mut at, REPLACED).await?;
                }
                let reason = (!state.is_live()).then_some(DELETED);
                summary
                    .incidents
                    .extend(self.evaluate(&mut at, assessment, reason).await?);
                batch.open.insert(app.clone(), open);
                batch.apps.insert(app.clone(), (team, *state));
                batch.dirty.push(app.clone());
            }
        }
        Ok(summary)
    }

    /// Compares the conditions held with the incidents open and applies each decision. Pending incidents (no
    /// notification yet) are written with the batch; anything that notifies is written at once. `at.open` is
    /// updated to what is open after.
    async fn evaluate(
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
        let mut view = held.view.clone();
        view.since = since;
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
        };
        if fire_now {
            let id =
                Store::insert_incident(at.tx, &view, at.app, IncidentState::Firing, since, fire_at, Some(now)).await?;
            let fired = record(id, IncidentState::Firing);
            self.on_fired(at.tx, &fired, now).await?;
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
        } else {
            self.resolve(at.tx, &rec, at.now).await?;
            at.batch.wake = true;
        }
        Ok(Some(IncidentChange {
            kind: rec.kind,
            fingerprint: rec.fingerprint.clone(),
            state: IncidentState::Resolved,
        }))
    }

    /// Resolves every incident open for the Application, saying why.
    async fn resolve_all(&self, at: &mut Applying<'_>, why: &str) -> Result<Vec<IncidentChange>, StoreError> {
        let ids: Vec<i64> = at.open.iter().map(|r| r.id).collect();
        let mut changes = Vec::with_capacity(ids.len());
        for id in ids {
            changes.extend(self.resolve_open(at, id, Some(why)).await?);
        }
        Ok(changes)
    }

    /// Argo CD confirmed the Application is gone: it is marked deleted (hidden from the lists, kept until
    /// `storage.raw_retention` ends) and whatever is open for it resolves once, "Application deleted".
    async fn delete_in(
        &self,
        tx: &mut WriteTx,
        batch: &mut Batch,
        app: &AppId,
        now: DateTime<Utc>,
    ) -> Result<IngestSummary, StoreError> {
        let mut summary = IngestSummary {
            application: app.to_string(),
            outcome: "unknown",
            sync: String::new(),
            health: String::new(),
            transitions: Vec::new(),
            incidents: Vec::new(),
        };
        let Some((team, prev)) = batch.apps.get(app) else {
            return Ok(summary);
        };
        summary.sync = prev.snapshot.sync_status.clone();
        summary.health = prev.snapshot.health_status.clone();
        let Some(state) = state::delete(prev, now) else {
            summary.outcome = "duplicate";
            return Ok(summary);
        };
        summary.outcome = "deleted";
        let transition = state::Transition {
            field: "lifecycle".into(),
            from: Some(prev.lifecycle().into()),
            to: state.lifecycle().into(),
        };
        let team = team.clone();
        batch.transitions.push((app.clone(), now, transition.clone()));
        summary.transitions.push(transition);
        let mut open = batch.open.remove(app).unwrap_or_default();
        batch.now = now;
        let mut at = Applying {
            tx,
            batch,
            app,
            open: &mut open,
            now,
        };
        summary.incidents = self.resolve_all(&mut at, DELETED).await?;
        batch.open.insert(app.clone(), open);
        batch.apps.insert(app.clone(), (team, state));
        batch.dirty.push(app.clone());
        Ok(summary)
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
        rec.view = view.clone();
        rec.severity = view.severity;
        if id < 0 {
            if let Some(p) = at.batch.new_pending.iter_mut().find(|p| p.id == id) {
                p.view = view;
                p.severity = rec.severity;
            }
        } else {
            Store::refresh_incident(at.tx, id, &view).await?;
        }
        Ok(())
    }
}

/// Where one Application's incident decisions are applied: its transaction, its batch, the incidents open for it.
struct Applying<'a> {
    tx: &'a mut WriteTx,
    batch: &'a mut Batch,
    app: &'a AppId,
    open: &'a mut Vec<IncidentRecord>,
    now: DateTime<Utc>,
}
