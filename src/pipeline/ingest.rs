//! The ingest side: bodies that arrive together are handled by one batch writer in one transaction (`Batch`), each
//! snapshot running through state → incidents → routing inside it (`ingest_in`). The writer keeps each
//! Application's last state in memory (`cache`): a stale body or a duplicate is answered from there, and on SQLite
//! only a change — or a duplicate that moves the stored ordering time — opens a transaction at all. On PostgreSQL,
//! where other replicas write the same rows, every batch begins by locking its Applications' rows in one order.

use std::sync::Arc;
use std::time::Duration;

use actix_web::web::Bytes;
use chrono::{DateTime, Utc};
use tracing::Instrument;

use super::explain;
use super::repeats::{Answer, BodyKey, Stored, state_key};
use super::{Core, IngestOutcome, IngestSummary};
use crate::argocd::{AppId, Snapshot};
use crate::live::Live;
use crate::state::{self, Outcome};
use crate::store::{DictionaryUse, Engine, IncidentRecord, RawChain, Store, StoreError, StoredApp, WriteTx, chain_gap};

mod decisions;

use decisions::Applying;

/// Read from the Argo CD API, which gives no time of its own: what it says is the state now.
pub(super) fn from_api_now(snap: &Snapshot) -> bool {
    snap.source == crate::argocd::Source::Api && snap.observed_at.is_none()
}

/// What the batch writer is asked to do with one Application.
pub(super) enum Work {
    /// A snapshot from a webhook body (with the body, kept for replay when it changes something) or from the Argo
    /// CD API, with its content hash (computed by the caller, so not in the one writer).
    Snapshot {
        snap: Box<Snapshot>,
        hash: String,
        raw: Option<Bytes>,
        /// Where its answer is remembered for the same bytes again (see `repeats`), for a webhook body.
        repeat: Option<BodyKey>,
        /// The key of its listing item's bytes (`argocd::api::item_key`), for a listing item: remembered with the
        /// content it is read into once that is stored (see `repeats`).
        item: Option<u128>,
    },
    /// Argo CD confirmed the Application is gone (API 404, absent from a complete listing, stream DELETED).
    Delete(AppId),
}

impl Work {
    pub(super) fn snapshot(snap: Snapshot, raw: Option<Bytes>, repeat: Option<BodyKey>) -> Self {
        let hash = state::content_hash(&snap);
        Work::Snapshot {
            snap: Box::new(snap),
            hash,
            raw,
            repeat,
            item: None,
        }
    }

    /// A listing item's snapshot, with the key of the item's bytes.
    pub(super) fn listed(snap: Snapshot, item: u128) -> Self {
        let mut work = Self::snapshot(snap, None, None);
        if let Work::Snapshot { item: at, .. } = &mut work {
            *at = Some(item);
        }
        work
    }

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

/// How often the `last_seen` times of duplicates are written (see `cache::SeenTimes`).
const FLUSH_EVERY: Duration = Duration::from_secs(2);

/// A batch that met another replica's write is done again on what is stored, this many times at most.
const CONFLICT_RETRIES: usize = 5;

pub(super) async fn batch_writer(cores: Arc<Live<Core>>, mut rx: tokio::sync::mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut next_flush = tokio::time::Instant::now() + FLUSH_EVERY;
    loop {
        let received = tokio::select! {
            n = rx.recv_many(&mut batch, MAX_BATCH) => n,
            _ = tokio::time::sleep_until(next_flush) => 0,
        };
        if tokio::time::Instant::now() >= next_flush {
            cores.get().flush_seen().await;
            next_flush = tokio::time::Instant::now() + FLUSH_EVERY;
        }
        if received == 0 {
            if batch.is_empty() && rx.is_closed() && rx.is_empty() {
                break;
            }
            continue;
        }
        let jobs = std::mem::take(&mut batch);
        // The settings of the moment (a reload replaces them between batches, never within one).
        let core = cores.get();
        let works: Vec<&Work> = jobs.iter().map(|j| &j.work).collect();
        match core.ingest_batch(&works).await {
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
                    let r = core.ingest_batch(&[&job.work]).await.map(|(mut v, wake)| {
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
    cores.get().flush_seen().await;
}

/// What one batch of bodies works on and writes at the end: the Applications (taken from the writer's cache, or
/// read), their open incidents (read when the first change begins the transaction), and the rows to write in a few
/// multi-row statements instead of a round trip each per body.
#[derive(Default)]
struct Batch {
    /// Every Application of the batch, whether stored or not.
    ids: Vec<AppId>,
    apps: std::collections::HashMap<AppId, StoredApp>,
    open: std::collections::HashMap<AppId, Vec<IncidentRecord>>,
    /// `open` has been read (by the first change: a batch of duplicates reads none).
    open_read: bool,
    /// When the batch is written (resolved_at of pending incidents that went away).
    now: DateTime<Utc>,
    dirty: Vec<AppId>,
    raws: Vec<(AppId, DateTime<Utc>, &'static str, Bytes)>,
    /// Where the runs of raw bodies of the batch's Applications stand (those the writer remembers), and how long a
    /// run waits for its next body: the raw bodies are stored as differences within them.
    chains: std::collections::HashMap<AppId, RawChain>,
    chain_gap: chrono::Duration,
    /// The dictionary a run's first body is compressed with, and what the batch taught about it.
    dictionary: DictionaryUse,
    /// Pending incidents opened in this batch (placeholder ids below 0), written at the end.
    new_pending: Vec<IncidentRecord>,
    next_placeholder: i64,
    /// Pending incidents whose condition went away: resolved at the end (a pending one notifies nobody).
    resolved_pending: Vec<i64>,
    /// Something fired or resolved: a group may be due now, so the scheduler should not wait for its tick.
    wake: bool,
    /// What a storm may follow from (see `super::storms`), judged once the batch's incidents are written.
    storms: super::storms::StormTouch,
    /// Each change's transitions, one timeline row a change.
    transitions: Vec<(AppId, DateTime<Utc>, Vec<state::Transition>)>,
    /// Duplicates that moved only `last_seen`: remembered once the batch is through, written later.
    seen: Vec<(AppId, DateTime<Utc>)>,
    /// Duplicates read from the Argo CD API (by `repeats::app_key`): remembered once the batch is through, never
    /// written.
    confirmed: Vec<(u128, DateTime<Utc>)>,
    /// Listing items (the key of their bytes), with the Application and the content (hash) each was read into:
    /// remembered once the batch is through, where that content is what is stored.
    listed: Vec<(u128, AppId, String)>,
    /// What the Application being changed tells, as decided: applied by `notify::apply` once it is done.
    effects: Vec<super::notify::Effect>,
}

impl Batch {
    fn new(works: &[&Work]) -> Self {
        let mut ids: Vec<AppId> = works.iter().map(|w| w.app().clone()).collect();
        ids.sort();
        ids.dedup();
        Self {
            ids,
            ..Default::default()
        }
    }

    fn state(&self, app: &AppId) -> Option<&state::AppState> {
        self.apps.get(app).map(|e| &e.state)
    }

    async fn write(&mut self, tx: &mut WriteTx) -> Result<(), StoreError> {
        // One row per Application: a statement may not upsert the same row twice.
        self.dirty.sort();
        self.dirty.dedup();
        let rows: Vec<(&str, &state::AppState, i64)> = (self.dirty.iter())
            .filter_map(|id| self.apps.get(id).map(|e| (e.team.as_str(), &e.state, e.version)))
            .collect();
        Store::save_apps_checked(tx, &rows).await?;
        Store::add_raws(tx, &self.raws, &mut self.chains, self.chain_gap, &mut self.dictionary).await?;
        Store::insert_pending_incidents(tx, &self.new_pending).await?;
        Store::resolve_pending(tx, &self.resolved_pending, self.now).await?;
        Store::add_transitions_many(tx, &self.transitions).await
    }

    /// The rows are committed: each written Application is at its next version.
    fn committed(&mut self) {
        for id in &self.dirty {
            if let Some(entry) = self.apps.get_mut(id) {
                entry.version += 1;
            }
        }
    }

    /// The webhook bodies of the batch whose answer the same bytes would get again, judged against what is now
    /// committed: a duplicate that moves nothing but `last_seen`, or a stale body. (A change, judged now, is a
    /// duplicate of itself — where its time came with it; one without is judged at its arrival, so again a change.)
    fn answers(&self, works: &[&Work], now: DateTime<Utc>) -> Vec<(BodyKey, Answer)> {
        let mut answers = Vec::new();
        for work in works {
            let Work::Snapshot {
                snap,
                hash,
                repeat: Some(key),
                ..
            } = work
            else {
                continue;
            };
            let Some(entry) = self.apps.get(&snap.app) else {
                continue;
            };
            let stale = match state::judge(Some(&entry.state), snap, hash, now) {
                Some(Outcome::Duplicate(seen)) if !seen.moves_state(&entry.state) => false,
                Some(Outcome::Stale { .. }) => true,
                _ => continue,
            };
            answers.push((
                *key,
                Answer {
                    app: snap.app.clone(),
                    version: entry.version,
                    stale,
                    sync: entry.state.snapshot.sync_status.to_string(),
                    health: entry.state.snapshot.health_status.to_string(),
                    project: snap.project.clone(),
                    annotations: snap.project_annotations.clone(),
                },
            ));
        }
        answers
    }
}

impl Core {
    /// Handles `works` in one transaction (none when nothing is to be written), in a span of its own (`size`: how
    /// many bodies). Holds the cache throughout, so no other write of Applications in this process comes between.
    pub(super) async fn ingest_batch(&self, works: &[&Work]) -> Result<(Vec<IngestSummary>, bool), StoreError> {
        let span = tracing::info_span!("ingest_batch", size = works.len());
        async {
            let mut cache = self.cache.lock().await;
            let mut attempt = 0;
            loop {
                let mut batch = Batch::new(works);
                let mut tx = None;
                if self.store.engine() == Engine::Postgres {
                    // Other replicas write too: the batch's Applications are locked before anything is judged, so
                    // none of them can change under it, and two replicas' batches over the same Applications wait
                    // for each other instead of deadlocking halfway through their writes.
                    let mut t = self.store.begin().await?;
                    batch.apps = cache.take_locked(&mut t, &batch.ids).await?;
                    tx = Some(t);
                } else {
                    batch.apps = cache.take(&self.store, &batch.ids).await?;
                }
                batch.chains = cache.take_chains(&batch.apps);
                batch.chain_gap = chain_gap(self.settings.storage.raw_retention);
                batch.dictionary =
                    (cache.dictionaries).for_batch(self.clock.now(), self.settings.storage.raw_retention);
                match self.run_batch(&mut batch, works, tx).await {
                    Ok(out) => {
                        let wake = batch.wake;
                        self.seen.record(std::mem::take(&mut batch.seen));
                        self.seen.confirmed(std::mem::take(&mut batch.confirmed));
                        for (item, app, hash) in std::mem::take(&mut batch.listed) {
                            if batch.apps.get(&app).is_some_and(|e| e.state.content_hash == hash) {
                                self.repeats.remember_listed(item, &app, &hash);
                            }
                        }
                        batch.committed();
                        let chains = std::mem::take(&mut batch.chains);
                        (cache).put_back_chains(chains, &batch.apps, self.clock.now(), batch.chain_gap);
                        (cache.dictionaries).committed(std::mem::take(&mut batch.dictionary));
                        if self.repeats.enabled() {
                            let answers = batch.answers(works, self.clock.now());
                            let stored = (batch.apps.iter()).map(|(id, e)| {
                                let now = Stored {
                                    version: e.version,
                                    content: state_key(&e.state.content_hash),
                                    live: e.state.deleted_at.is_none(),
                                };
                                (id, now)
                            });
                            (self.repeats).committed(stored, answers);
                        }
                        cache.put_back(batch.apps);
                        return Ok((out, wake));
                    }
                    // Another replica wrote one of these Applications, or PostgreSQL broke a deadlock with another
                    // transaction by ending this one: do it all again on what is stored now.
                    Err(e) if e.is_conflict() && attempt < CONFLICT_RETRIES => {
                        attempt += 1;
                        tracing::debug!(attempt, error = %e, "batch met another writer; done again");
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Runs `works` on `batch`, in `tx` when it is already begun (PostgreSQL: with the batch's Applications locked
    /// in it).
    async fn run_batch(
        &self,
        batch: &mut Batch,
        works: &[&Work],
        mut tx: Option<WriteTx>,
    ) -> Result<Vec<IngestSummary>, StoreError> {
        let mut out = Vec::with_capacity(works.len());
        for work in works {
            let now = self.clock.now();
            out.push(match work {
                Work::Snapshot {
                    snap, hash, raw, item, ..
                } if snap.listed => {
                    // A listing item lacks what Argo CD's field table cannot carry: the stored Application's values
                    // of those, then judged like any snapshot.
                    let mut whole = (**snap).clone();
                    let stored = batch.state(&snap.app).filter(|s| s.deleted_at.is_none());
                    whole.complete_from(stored.map(|s| &s.snapshot));
                    let hash = state::content_hash(&whole);
                    if let Some(item) = item {
                        batch.listed.push((*item, whole.app.clone(), hash.clone()));
                    }
                    self.ingest_in(&mut tx, batch, &whole, &hash, None, now).await?
                }
                Work::Snapshot { snap, hash, raw, .. } => {
                    self.ingest_in(&mut tx, batch, snap, hash, raw.as_ref(), now).await?
                }
                Work::Delete(app) => self.delete_in(&mut tx, batch, app, now).await?,
            });
        }
        if tx.is_none() && !batch.dirty.is_empty() {
            tx = Some(self.store.begin().await?);
        }
        if let Some(mut tx) = tx {
            if !batch.dirty.is_empty() {
                batch.write(&mut tx).await?;
                // Before anything of this batch is told: a storm holds its members from the start.
                batch.wake |= self.storms_in(&mut tx, &batch.storms, self.clock.now()).await?;
            }
            tx.commit().await?;
        }
        Ok(out)
    }

    /// The batch's transaction for the first body that changes something: begun then (SQLite) or already (at the
    /// batch's start, PostgreSQL), with the open incidents of every Application of the batch read in it then.
    async fn tx<'t>(&self, tx: &'t mut Option<WriteTx>, batch: &mut Batch) -> Result<&'t mut WriteTx, StoreError> {
        let mut begun = match tx.take() {
            Some(t) => t,
            None => self.store.begin().await?,
        };
        if !batch.open_read {
            batch.open = Store::open_incidents_of(&mut begun, &batch.ids).await?;
            batch.open_read = true;
        }
        Ok(tx.insert(begun))
    }

    /// One snapshot in its own transaction (the scheduler's confirmation path).
    pub(super) async fn ingest_alone(&self, snap: Snapshot, _now: DateTime<Utc>) -> Result<IngestSummary, StoreError> {
        let work = Work::snapshot(snap, None, None);
        let (mut out, _) = self.ingest_batch(&[&work]).await?;
        Ok(out.remove(0))
    }

    /// One confirmed deletion in its own transaction (the scheduler's confirmation path).
    pub(super) async fn delete_alone(&self, app: &AppId, _now: DateTime<Utc>) -> Result<IngestSummary, StoreError> {
        let work = Work::Delete(app.clone());
        let (mut out, _) = self.ingest_batch(&[&work]).await?;
        Ok(out.remove(0))
    }

    /// Writes the `last_seen` times of duplicates kept in memory; on failure they wait for the next time.
    pub(super) async fn flush_seen(&self) {
        let seen = self.seen.take();
        if seen.is_empty() {
            return;
        }
        let written = async {
            let mut tx = self.store.begin().await?;
            Store::touch_apps(&mut tx, &seen).await?;
            tx.commit().await
        }
        .await;
        if let Err(e) = written {
            tracing::debug!(error = %e, "cannot write last_seen times now; will try again");
            self.seen.record(seen);
        }
    }

    /// Runs one snapshot against the batch's state of its Application: stale and duplicates from memory; a change
    /// through incidents and routing in the batch's transaction.
    async fn ingest_in(
        &self,
        tx: &mut Option<WriteTx>,
        batch: &mut Batch,
        snap: &Snapshot,
        hash: &str,
        raw: Option<&Bytes>,
        now: DateTime<Utc>,
    ) -> Result<IngestSummary, StoreError> {
        let app = &snap.app;
        let prev = batch.state(app);
        let outcome = match state::judge(prev, snap, hash, now) {
            Some(judged) => judged,
            None => state::change(prev, snap.clone(), hash.to_string(), now),
        };
        let mut summary = IngestSummary {
            application: app.to_string(),
            outcome: IngestOutcome::from(&outcome),
            sync: String::new(),
            health: String::new(),
            transitions: Vec::new(),
            incidents: Vec::new(),
        };
        match outcome {
            Outcome::Stale { .. } => {
                if let Some(p) = prev {
                    summary.sync = p.snapshot.sync_status.to_string();
                    summary.health = p.snapshot.health_status.to_string();
                }
            }
            Outcome::Duplicate(seen) => {
                if let Some(entry) = batch.apps.get_mut(app) {
                    summary.sync = entry.state.snapshot.sync_status.to_string();
                    summary.health = entry.state.snapshot.health_status.to_string();
                    if from_api_now(snap) {
                        // Argo CD's API says the stored state is the state now: nothing to write (a resync of every
                        // Application would rewrite them all). That it was seen is kept in memory.
                        batch.confirmed.push((super::repeats::app_key(app), now));
                    } else if seen.moves_state(&entry.state) {
                        batch.dirty.push(app.clone());
                    } else {
                        batch.seen.push((app.clone(), now));
                    }
                    seen.apply_to(&mut entry.state);
                }
            }
            Outcome::Changed { state, transitions } => {
                if let Some(body) = raw {
                    batch
                        .raws
                        .push((app.clone(), now, summary.outcome.as_str(), body.clone()));
                }
                let tx = self.tx(tx, batch).await?;
                self.apply_change(tx, batch, *state, transitions, &mut summary, now)
                    .await?;
            }
        }
        Ok(summary)
    }

    /// A changed state: its lifecycle, its incidents (opened, refreshed, resolved, fired and routed), its rows.
    async fn apply_change(
        &self,
        tx: &mut WriteTx,
        batch: &mut Batch,
        mut state: state::AppState,
        mut transitions: Vec<state::Transition>,
        summary: &mut IngestSummary,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let app = state.snapshot.app.clone();
        let prev = batch.apps.get(&app);
        let was = prev.map(|p| p.state.lifecycle());
        let version = prev.map_or(0, |p| p.version);
        // A body for this name that is not the stored Application (a new uid, or the stored one is gone).
        // A snapshot without a uid (a hand-written template, an Argo CD listing) says nothing about which
        // incarnation it is: never a replacement by itself.
        let replaced = prev.is_some_and(|p| {
            p.state.deleted_at.is_some()
                || (p.state.snapshot.uid.is_some()
                    && state.snapshot.uid.is_some()
                    && p.state.snapshot.uid != state.snapshot.uid)
        });
        if state.snapshot.deleting && self.api_of(&app.instance).is_none() {
            // Without its instance's API nothing else will confirm it: the deletion trigger's body is the confirmation.
            state.deleted_at = Some(now);
        }
        // The last live state of an Application that stops being live with this change, and its team then.
        let before = (prev.filter(|p| !replaced && p.state.is_live() && !state.is_live()))
            .map(|p| (p.state.clone(), p.team.clone()));
        if let Some(prev) = prev.filter(|_| !replaced && state.is_live()) {
            (batch.effects).push(super::notify::sync_of(&self.settings, &prev.state, &state, now));
        }
        if was != Some(state.lifecycle()) && (was.is_some() || !state.is_live()) {
            transitions.push(state::Transition {
                field: state::Field::Lifecycle,
                from: was.map(|w| w.to_string()),
                to: state.lifecycle().to_string(),
            });
        }
        let mut assessment = explain::assess(&self.settings, &state);
        let team = assessment.team.clone();
        summary.sync = state.snapshot.sync_status.to_string();
        summary.health = state.snapshot.health_status.to_string();
        if !transitions.is_empty() {
            batch.transitions.push((app.clone(), now, transitions.clone()));
        }
        summary.transitions = transitions;
        let mut open = batch.open.remove(&app).unwrap_or_default();
        self.apply_window(&mut assessment, &state.snapshot, &open, now);
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
        match before {
            // It stops being live now: told once (when it matters), its incidents closed.
            Some((before, team)) => {
                (summary.incidents).extend(self.close_deleted(&mut at, &before, &team, DELETED).await?)
            }
            None => {
                let reason = (!state.is_live()).then_some(DELETED);
                (summary.incidents).extend(self.evaluate(&mut at, assessment, reason).await?);
            }
        }
        batch.open.insert(app.clone(), open);
        batch.dirty.push(app.clone());
        batch.apps.insert(app, StoredApp { team, state, version });
        let effects = std::mem::take(&mut batch.effects);
        super::notify::apply(&self.teller(), tx, effects, now).await
    }

    /// Argo CD confirmed the Application is gone: it is marked deleted (hidden from the lists, kept until
    /// `storage.raw_retention` ends) and whatever is open for it resolves once, "Application deleted".
    async fn delete_in(
        &self,
        tx: &mut Option<WriteTx>,
        batch: &mut Batch,
        app: &AppId,
        now: DateTime<Utc>,
    ) -> Result<IngestSummary, StoreError> {
        let mut summary = IngestSummary {
            application: app.to_string(),
            outcome: IngestOutcome::Unknown,
            sync: String::new(),
            health: String::new(),
            transitions: Vec::new(),
            incidents: Vec::new(),
        };
        let Some(prev) = batch.apps.get(app) else {
            return Ok(summary);
        };
        summary.sync = prev.state.snapshot.sync_status.to_string();
        summary.health = prev.state.snapshot.health_status.to_string();
        let Some(state) = state::delete(&prev.state, now) else {
            summary.outcome = IngestOutcome::Duplicate;
            return Ok(summary);
        };
        summary.outcome = IngestOutcome::Deleted;
        let transition = state::Transition {
            field: state::Field::Lifecycle,
            from: Some(prev.state.lifecycle().to_string()),
            to: state.lifecycle().to_string(),
        };
        let (team, version) = (prev.team.clone(), prev.version);
        let before = prev.state.is_live().then(|| prev.state.clone());
        batch.transitions.push((app.clone(), now, vec![transition.clone()]));
        summary.transitions.push(transition);
        let tx = self.tx(tx, batch).await?;
        let mut open = batch.open.remove(app).unwrap_or_default();
        batch.now = now;
        let mut at = Applying {
            tx,
            batch,
            app,
            open: &mut open,
            now,
        };
        summary.incidents = match &before {
            Some(before) => self.close_deleted(&mut at, before, &team, DELETED).await?,
            None => self.resolve_all(&mut at, DELETED).await?,
        };
        batch.open.insert(app.clone(), open);
        batch.dirty.push(app.clone());
        batch.apps.insert(app.clone(), StoredApp { team, state, version });
        let effects = std::mem::take(&mut batch.effects);
        super::notify::apply(&self.teller(), tx, effects, now).await?;
        Ok(summary)
    }
}
