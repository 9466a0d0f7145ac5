//! The pipeline that ties the pure core to the store: [`Pipeline::ingest`] runs one snapshot through
//! state → incidents → routing → grouping inside ONE transaction (a 2xx means all of it is committed), and
//! [`Pipeline::tick`] runs the durable timers (rule deadlines, group flushes, escalations, silences ending).

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::argocd::{Snapshot, api::ArgoCdApi};
use crate::clock::SharedClock;
use crate::configuration::Settings;
use crate::domain::{Action, Notification};
use crate::domain::{IncidentState, Kind, Labels};
use crate::incidents::{self, Decision};
use crate::routing::grouping::{GroupView, plan_flush};
use crate::routing::{self, Router};
use crate::state::{self, Outcome};
use crate::store::{IncidentRecord, NewDelivery, Store, StoreError, WriteTx};

/// What one accepted body did, as the API answers it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IngestSummary {
    pub application: String,
    /// `changed`, `duplicate` or `stale`.
    pub outcome: &'static str,
    pub sync: String,
    pub health: String,
    pub transitions: Vec<state::Transition>,
    pub incidents: Vec<IncidentChange>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IncidentChange {
    pub kind: Kind,
    pub fingerprint: String,
    pub state: IncidentState,
}

/// The core: everything the pipeline does, without the ingest batching in front of it.
pub struct Core {
    pub settings: Arc<Settings>,
    pub store: Store,
    pub clock: SharedClock,
    /// Rung after a batch commits, so timers that became due (group_wait 0) run now, not at the next tick.
    pub wake_scheduler: Arc<tokio::sync::Notify>,
    /// Rung when the scheduler queued deliveries, so the outbox worker does not wait for its next poll.
    pub wake_outbox: Arc<tokio::sync::Notify>,
    router: Arc<Router>,
    argocd_api: Option<ArgoCdApi>,
}

/// One body waiting for the batch writer, with where to send its answer.
struct Job {
    snap: Snapshot,
    raw: Option<String>,
    reply: tokio::sync::oneshot::Sender<Result<IngestSummary, StoreError>>,
}

/// Bodies that arrive together are written in one transaction ("group commit"): each is still acknowledged only
/// after the transaction that holds it has committed, but the commit and the writer hand-over are paid once per
/// batch instead of once per body.
const MAX_BATCH: usize = 64;

#[derive(Clone)]
pub struct Pipeline {
    core: Arc<Core>,
    jobs: tokio::sync::mpsc::Sender<Job>,
}

impl std::ops::Deref for Pipeline {
    type Target = Core;
    fn deref(&self) -> &Core {
        &self.core
    }
}

impl Pipeline {
    /// Builds the pipeline and starts its batch writer (needs a Tokio runtime).
    pub fn new(settings: Arc<Settings>, store: Store, clock: SharedClock) -> Self {
        let argocd_api = settings.argocd.api.clone().map(ArgoCdApi::new);
        let core = Arc::new(Core {
            wake_scheduler: Arc::default(),
            wake_outbox: Arc::default(),
            router: Arc::new(Router::new(&settings)),
            settings,
            store,
            clock,
            argocd_api,
        });
        let (jobs, rx) = tokio::sync::mpsc::channel(4096);
        tokio::spawn(batch_writer(core.clone(), rx));
        Self { core, jobs }
    }

    /// Runs one snapshot through the whole core; returns once everything it caused is committed.
    pub async fn ingest(&self, snap: Snapshot, raw: Option<&str>) -> Result<IngestSummary, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = Job {
            snap,
            raw: raw.map(str::to_string),
            reply,
        };
        if self.jobs.send(job).await.is_err() {
            return Err(StoreError::Config("the ingest writer has stopped".into()));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(StoreError::Config("the ingest writer has stopped".into())))
    }
}

async fn batch_writer(core: Arc<Core>, mut rx: tokio::sync::mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let jobs = std::mem::take(&mut batch);
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
    apps: std::collections::HashMap<crate::argocd::AppId, (String, state::AppState)>,
    open: std::collections::HashMap<crate::argocd::AppId, Vec<IncidentRecord>>,
    /// When the batch is written (resolved_at of pending incidents that went away).
    now: DateTime<Utc>,
    dirty: Vec<crate::argocd::AppId>,
    raws: Vec<(crate::argocd::AppId, DateTime<Utc>, &'static str, String)>,
    /// Pending incidents opened in this batch (placeholder ids below 0), written at the end.
    new_pending: Vec<IncidentRecord>,
    next_placeholder: i64,
    /// Pending incidents whose condition went away: resolved at the end (a pending one notifies nobody).
    resolved_pending: Vec<i64>,
    /// Something fired or resolved: a group may be due now, so the scheduler should not wait for its tick.
    wake: bool,
    transitions: Vec<(crate::argocd::AppId, DateTime<Utc>, state::Transition)>,
}

impl Batch {
    async fn load(tx: &mut WriteTx, snaps: &[&Snapshot]) -> Result<Self, StoreError> {
        let mut ids: Vec<crate::argocd::AppId> = snaps.iter().map(|s| s.app.clone()).collect();
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
    async fn ingest_batch(&self, jobs: &[Job]) -> Result<(Vec<IngestSummary>, bool), StoreError> {
        let mut tx = self.store.begin().await?;
        let snaps: Vec<&Snapshot> = jobs.iter().map(|j| &j.snap).collect();
        let mut batch = Batch::load(&mut tx, &snaps).await?;
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            let now = self.clock.now();
            out.push(
                self.ingest_in(&mut tx, &mut batch, job.snap.clone(), job.raw.as_deref(), now)
                    .await?,
            );
        }
        let wake = batch.wake;
        batch.write(&mut tx).await?;
        tx.commit().await?;
        Ok((out, wake))
    }

    /// One snapshot in its own transaction (the scheduler's confirmation path).
    async fn ingest_alone(&self, snap: Snapshot, now: DateTime<Utc>) -> Result<IngestSummary, StoreError> {
        let mut tx = self.store.begin().await?;
        let mut batch = Batch::load(&mut tx, &[&snap]).await?;
        let summary = self.ingest_in(&mut tx, &mut batch, snap, None, now).await?;
        batch.write(&mut tx).await?;
        tx.commit().await?;
        Ok(summary)
    }

    pub fn router(&self) -> &Router {
        &self.router
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
            Outcome::Changed { state, transitions } => {
                let team = routing::owning_team(&state.snapshot, &self.settings.ownership);
                summary.sync = state.snapshot.sync_status.clone();
                summary.health = state.snapshot.health_status.clone();
                batch
                    .transitions
                    .extend(transitions.iter().map(|t| (app.clone(), now, t.clone())));
                summary.transitions = transitions;
                let mut open = batch.open.remove(&app).unwrap_or_default();
                batch.now = now;
                summary.incidents = self.evaluate(tx, batch, &state, &team, &mut open, now).await?;
                batch.open.insert(app.clone(), open);
                batch.apps.insert(app.clone(), (team, *state));
                batch.dirty.push(app.clone());
            }
        }
        Ok(summary)
    }

    /// Turns the state into incident decisions and applies them. Pending incidents (no notification yet) are
    /// written with the batch; anything that notifies is written at once. `open` is updated to what is open after.
    async fn evaluate(
        &self,
        tx: &mut WriteTx,
        batch: &mut Batch,
        state: &state::AppState,
        team: &str,
        open: &mut Vec<IncidentRecord>,
        now: DateTime<Utc>,
    ) -> Result<Vec<IncidentChange>, StoreError> {
        let open_now: Vec<incidents::OpenIncident> = open
            .iter()
            .map(|r| incidents::OpenIncident {
                id: r.id,
                kind: r.kind,
                fingerprint: r.fingerprint.clone(),
                state: r.state,
            })
            .collect();
        let app = &state.snapshot.app;
        let mut keep = HashSet::new();
        let held = incidents::held_conditions(
            state,
            &self.settings.rules,
            team,
            self.settings.argocd.url.as_deref(),
            &mut keep,
        );
        let decisions = incidents::decide(&open_now, held, &keep, &self.settings.rules, now);
        let mut changes = Vec::new();
        for d in decisions {
            match d {
                Decision::Open {
                    held,
                    since,
                    fire_at,
                    fire_now,
                } => {
                    let mut view = held.view.clone();
                    view.since = since;
                    let record = |id: i64, st: IncidentState| IncidentRecord {
                        id,
                        fingerprint: view.fingerprint.clone(),
                        kind: view.kind,
                        app: app.clone(),
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
                            Store::insert_incident(tx, &view, app, IncidentState::Firing, since, fire_at, Some(now))
                                .await?;
                        let fired = record(id, IncidentState::Firing);
                        self.on_fired(tx, &fired, now).await?;
                        batch.wake = true;
                        if !held.kind.is_informational() {
                            open.push(fired);
                        }
                    } else {
                        // Written with the batch; until then known by a negative placeholder id.
                        batch.next_placeholder -= 1;
                        let rec = record(batch.next_placeholder, IncidentState::Pending);
                        batch.new_pending.push(rec.clone());
                        open.push(rec);
                    }
                    changes.push(IncidentChange {
                        kind: held.kind,
                        fingerprint: held.fingerprint.clone(),
                        state: if fire_now && held.kind.is_informational() {
                            IncidentState::Resolved
                        } else if fire_now {
                            IncidentState::Firing
                        } else {
                            IncidentState::Pending
                        },
                    });
                }
                Decision::Resolve { id } => {
                    let Some(pos) = open.iter().position(|r| r.id == id) else {
                        continue;
                    };
                    let rec = open.remove(pos);
                    if rec.id < 0 {
                        // Opened and gone within this batch: it never needs a row.
                        batch.new_pending.retain(|p| p.id != rec.id);
                    } else if rec.state == IncidentState::Pending {
                        batch.resolved_pending.push(rec.id);
                    } else {
                        self.resolve(tx, &rec, now).await?;
                        batch.wake = true;
                    }
                    changes.push(IncidentChange {
                        kind: rec.kind,
                        fingerprint: rec.fingerprint.clone(),
                        state: IncidentState::Resolved,
                    });
                }
                Decision::Refresh { id, held } => {
                    let Some(rec) = open.iter_mut().find(|r| r.id == id) else {
                        continue;
                    };
                    let mut view = held.view.clone();
                    view.since = rec.view.since;
                    view.notes = rec.view.notes.clone();
                    if view == rec.view {
                        continue; // nothing new to show
                    }
                    rec.view = view.clone();
                    rec.severity = view.severity;
                    if id < 0 {
                        if let Some(p) = batch.new_pending.iter_mut().find(|p| p.id == id) {
                            p.view = view;
                            p.severity = rec.severity;
                        }
                    } else {
                        Store::refresh_incident(tx, id, &view).await?;
                    }
                }
            }
        }
        Ok(changes)
    }

    /// An incident starts firing: route it (unless silenced), and start its escalation ladder.
    async fn on_fired(&self, tx: &mut WriteTx, rec: &IncidentRecord, now: DateTime<Utc>) -> Result<(), StoreError> {
        let id = rec.id;
        let labels = Labels::of(&rec.full_view());
        let silences = Store::silences_tx(tx, now).await?;
        let informational = rec.kind.is_informational();
        if routing::is_silenced(&silences, &labels, now) {
            tracing::info!(incident = id, app = %rec.app, kind = %rec.kind, "incident fired while silenced: tracked, not delivered");
            Store::set_notified(tx, id, false).await?;
        } else {
            self.route_incident(tx, rec, &labels, now).await?;
        }
        if informational {
            // Informational kinds (pruned) are told once and closed at once: there is nothing to resolve.
            Store::set_incident_state(tx, id, IncidentState::Resolved, now).await?;
        }
        Ok(())
    }

    async fn route_incident(
        &self,
        tx: &mut WriteTx,
        rec: &IncidentRecord,
        labels: &Labels,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let g = &self.settings.grouping;
        let route = self.router.route(labels);
        for receiver in &route.receivers {
            let Some(rs) = self.settings.receiver(receiver) else {
                continue;
            };
            let key = routing::group_key(&g.group_by, labels, rs.per_incident());
            Store::add_to_group(tx, receiver, &key, rec.id, IncidentState::Firing, now, g).await?;
        }
        Store::set_notified(tx, rec.id, true).await?;
        let informational = rec.kind.is_informational();
        if !informational && let Some(team) = self.settings.teams.get(&rec.team) {
            let fired = rec.fired_at.unwrap_or(now);
            for (i, step) in team.escalation.iter().enumerate() {
                let due = fired + chrono::Duration::from_std(step.after).unwrap_or(chrono::Duration::MAX);
                Store::add_escalation(
                    tx,
                    rec.id,
                    i as i64 + 1,
                    step.after.as_secs() as i64,
                    due,
                    &step.receivers,
                )
                .await?;
            }
        }
        Ok(())
    }

    async fn resolve(&self, tx: &mut WriteTx, rec: &IncidentRecord, now: DateTime<Utc>) -> Result<(), StoreError> {
        Store::set_incident_state(tx, rec.id, IncidentState::Resolved, now).await?;
        if rec.state != IncidentState::Firing || !rec.notified {
            return Ok(());
        }
        let g = &self.settings.grouping;
        for (receiver, key) in Store::groups_of(tx, rec.id).await? {
            match self.settings.receiver(&receiver) {
                Some(rs) if rs.sends_resolved() => {
                    Store::add_to_group(tx, &receiver, &key, rec.id, IncidentState::Resolved, now, g).await?
                }
                _ => Store::remove_member(tx, rec.id, &receiver).await?,
            }
        }
        // Receivers an escalation step reached hear about the resolve too.
        let sent = Store::cancel_escalations(tx, rec.id).await?;
        let mut view = rec.full_view();
        view.state = IncidentState::Resolved;
        view.resolved_at = Some(now);
        for step in sent {
            for receiver in step.receivers {
                if self.settings.receiver(&receiver).is_some_and(|r| r.sends_resolved()) {
                    let n = Notification {
                        receiver: receiver.clone(),
                        action: Action::Resolve,
                        thread_key: format!("{receiver}:escalation:{}", rec.id),
                        title: format!("Resolved: {}", view.summary),
                        reason: "resolved".into(),
                        incidents: vec![view.clone()],
                        created_at: now,
                    };
                    enqueue(tx, &n, now).await?;
                }
            }
        }
        Ok(())
    }

    /// Runs every timer that is due. Each kind of timer commits on its own.
    pub async fn tick(&self) -> Result<(), StoreError> {
        self.fire_due_incidents().await?;
        self.deliver_unsilenced().await?;
        let queued = self.flush_groups().await? + self.escalate().await?;
        if queued > 0 {
            self.wake_outbox.notify_one();
        }
        Ok(())
    }

    async fn fire_due_incidents(&self) -> Result<(), StoreError> {
        loop {
            let now = self.clock.now();
            let lease = now + chrono::Duration::seconds(30);
            let mut tx = self.store.begin().await?;
            let due = Store::claim_due_incidents(&mut tx, self.store.engine(), now, lease, 100).await?;
            tx.commit().await?;
            if due.is_empty() {
                return Ok(());
            }
            for rec in due {
                self.fire_one(rec).await?;
            }
        }
    }

    /// Fires a pending incident whose `for` has elapsed — after confirming the condition with the Argo CD API
    /// when one is configured ("confirm in the cluster, not in Git").
    async fn fire_one(&self, rec: IncidentRecord) -> Result<(), StoreError> {
        let mut note = None;
        if let Some(api) = &self.argocd_api {
            match api.application(&rec.app).await {
                Ok(snap) => {
                    // Record what the cluster says; if the condition is gone this resolves the incident.
                    self.ingest_alone(snap, self.clock.now()).await?;
                }
                Err(crate::argocd::api::ApiError::NotFound(_)) => {
                    note = Some("not confirmed: the Argo CD API no longer has this Application".to_string());
                }
                Err(e) => {
                    let waited = self.clock.now() - rec.fire_at;
                    let limit = self
                        .settings
                        .argocd
                        .api
                        .as_ref()
                        .map(|a| a.confirm_wait)
                        .unwrap_or_default();
                    if waited < chrono::Duration::from_std(limit).unwrap_or_default() {
                        tracing::warn!(incident = rec.id, app = %rec.app, error = %e, "cannot confirm the condition yet; will try again");
                        return Ok(());
                    }
                    note = Some(format!("not confirmed: {e} (fired after waiting {}s)", limit.as_secs()));
                }
            }
        }
        let now = self.clock.now();
        let mut tx = self.store.begin().await?;
        let Some(mut current) = Store::incident(&mut tx, rec.id).await? else {
            return Ok(());
        };
        if current.state != IncidentState::Pending {
            return Ok(()); // resolved meanwhile (or fired by another replica)
        }
        if let Some(n) = note {
            current.view.notes.push(n);
            Store::refresh_incident(&mut tx, rec.id, &current.view).await?;
        }
        Store::set_incident_state(&mut tx, rec.id, IncidentState::Firing, now).await?;
        current.state = IncidentState::Firing;
        current.fired_at = Some(now);
        tracing::info!(incident = rec.id, app = %rec.app, kind = %rec.kind, "incident fired");
        self.on_fired(&mut tx, &current, now).await?;
        tx.commit().await
    }

    async fn deliver_unsilenced(&self) -> Result<(), StoreError> {
        let now = self.clock.now();
        let mut tx = self.store.begin().await?;
        let waiting = Store::unnotified_firing(&mut tx, 200).await?;
        if waiting.is_empty() {
            return Ok(());
        }
        let silences = Store::silences_tx(&mut tx, now).await?;
        for rec in waiting {
            let labels = Labels::of(&rec.full_view());
            if !routing::is_silenced(&silences, &labels, now) {
                tracing::info!(incident = rec.id, app = %rec.app, "silence over and incident still firing: delivering");
                self.route_incident(&mut tx, &rec, &labels, now).await?;
            }
        }
        tx.commit().await
    }

    /// Returns how many groups were flushed.
    async fn flush_groups(&self) -> Result<usize, StoreError> {
        let mut flushed = 0;
        loop {
            let now = self.clock.now();
            let mut tx = self.store.begin().await?;
            let groups = Store::claim_due_groups(&mut tx, self.store.engine(), now, 50).await?;
            if groups.is_empty() {
                tx.commit().await?;
                return Ok(flushed);
            }
            flushed += groups.len();
            for g in groups {
                self.flush_group(&mut tx, g, now).await?;
            }
            tx.commit().await?;
        }
    }

    async fn flush_group(
        &self,
        tx: &mut WriteTx,
        g: crate::store::GroupRecord,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let members = Store::members(tx, g.id).await?;
        let firing: Vec<_> = members.iter().filter(|m| m.status == IncidentState::Firing).collect();
        let resolved: Vec<_> = members
            .iter()
            .filter(|m| m.status == IncidentState::Resolved && m.dirty)
            .collect();
        let view = GroupView {
            active: g.active,
            generation: g.generation,
            firing: firing.len(),
            new_firing: firing.iter().any(|m| m.dirty),
            newly_resolved: resolved.len(),
        };
        let plan = plan_flush(view, self.settings.grouping.repeat_interval, now);
        if let Some((action, reason)) = plan.send {
            let mut incidents: Vec<_> = firing.iter().map(|m| m.incident.full_view()).collect();
            incidents.extend(resolved.iter().map(|m| m.incident.full_view()));
            let title = title(action, &incidents);
            let n = Notification {
                receiver: g.receiver.clone(),
                action,
                thread_key: format!("{}:{}:{}", g.receiver, g.group_key, plan.generation),
                title,
                reason: reason.as_str().into(),
                incidents,
                created_at: now,
            };
            enqueue(tx, &n, now).await?;
        }
        Store::finish_flush(tx, g.id, plan.active, plan.generation, now, plan.next_at).await
    }

    /// Returns how many escalation steps were due.
    async fn escalate(&self) -> Result<usize, StoreError> {
        let now = self.clock.now();
        let mut tx = self.store.begin().await?;
        let due = Store::claim_due_escalations(&mut tx, self.store.engine(), now, 100).await?;
        let count = due.len();
        for e in due {
            Store::finish_escalation(&mut tx, e.id).await?;
            let Some(rec) = Store::incident(&mut tx, e.incident_id).await? else {
                continue;
            };
            if rec.state != IncidentState::Firing {
                continue;
            }
            let view = rec.full_view();
            for receiver in &e.receivers {
                let n = Notification {
                    receiver: receiver.clone(),
                    action: Action::Open,
                    thread_key: format!("{receiver}:escalation:{}", rec.id),
                    title: format!("Escalated (step {}): {}", e.step, view.summary),
                    reason: format!(
                        "escalation step {} — still firing {} after it fired",
                        e.step,
                        humantime::format_duration(std::time::Duration::from_secs(e.after_secs as u64))
                    ),
                    incidents: vec![view.clone()],
                    created_at: now,
                };
                enqueue(&mut tx, &n, now).await?;
            }
        }
        tx.commit().await?;
        Ok(count)
    }
}

fn title(action: Action, incidents: &[crate::domain::Incident]) -> String {
    let firing = incidents.iter().filter(|i| i.state != IncidentState::Resolved).count();
    let resolved = incidents.len() - firing;
    match incidents {
        [one] if action == Action::Resolve || one.state == IncidentState::Resolved => {
            format!("Resolved: {}", one.summary)
        }
        [one] => one.summary.clone(),
        many => {
            let kind = many.first().map(|i| i.kind.as_str()).unwrap_or_default();
            let team = many.first().map(|i| i.team.as_str()).unwrap_or("");
            match (firing, resolved) {
                (0, r) => format!("Resolved: {kind} on {r} Applications of team {team}"),
                (f, 0) => format!("{kind} on {f} Applications of team {team}"),
                (f, r) => format!("{kind} on {f} Applications of team {team} ({r} resolved)"),
            }
        }
    }
}

async fn enqueue(tx: &mut WriteTx, n: &Notification, now: DateTime<Utc>) -> Result<(), StoreError> {
    // Deliveries of one thread keep their order; escalations and groups each have their own thread.
    let d = NewDelivery {
        receiver: n.receiver.clone(),
        order_key: n
            .thread_key
            .rsplit_once(':')
            .map(|(k, _)| k.to_string())
            .unwrap_or_else(|| n.thread_key.clone()),
        thread_key: n.thread_key.clone(),
        action: n.action,
        payload: serde_json::to_string(n).unwrap_or_default(),
    };
    Store::enqueue(tx, &d, now).await?;
    metrics::counter!("herald_notifications_queued_total", "receiver" => n.receiver.clone(), "action" => n.action.as_str()).increment(1);
    Ok(())
}
