//! The pipeline: the one door the HTTP handlers, the CLI and the service loops go through, so none of them reaches
//! the store. [`Pipeline::ingest`] runs one snapshot through state → incidents → routing → grouping inside ONE
//! transaction (a 2xx means all of it is committed; bodies that arrive together share it, see `ingest`),
//! [`Pipeline::tick`] runs the durable timers (`scheduler`), and the read methods answer what the API and the
//! status page show. [`explain`] holds the decisions themselves, pure, for `herald route` too.

mod access;
mod acks;
mod cache;
pub mod delivery;
pub mod explain;
mod history;
mod ingest;
mod links;
mod notify;
mod on_call;
mod repeats;
mod scheduler;
mod slack;
mod source_status;
mod storms;
mod windows;

pub use access::denied_summary;
pub use acks::AckOutcome;
pub use history::{HistoryCursor, HistoryItem, HistoryPage};
pub use links::{LinkOutcome, SilenceEnd};
pub use on_call::{CalendarState, ScheduleNow, UnknownSchedule, refresh_loop};
pub use slack::{SignatureRefusal, SlackAnswer, SlackApp, check_headers as check_slack_headers};
pub use source_status::{ApiSource, HeldDrop, SourceReport};
pub use storms::StormView;
pub use windows::{ProjectWindows, window_hold};

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tracing::Instrument;

use crate::argocd::{AppId, Snapshot, api::ArgoCdApi};
use crate::clock::SharedClock;
use crate::configuration::Settings;
use crate::domain::{DeliveryState, IncidentState, Kind};
use crate::live::Live;
use crate::routing::inhibit::Inhibitor;
use crate::routing::{Router, Silence};
use crate::state;
use crate::store::{Store, StoreError};
use crate::telemetry::GaugeReadings;

use actix_web::web::Bytes;
use ingest::{Job, Work, batch_writer};
pub use repeats::{BodyKey, app_key, body_key};

/// The records the read methods return.
pub use crate::store::HeldDropRow;
pub use crate::store::{
    AboutDelivery, AppCursor, AppFilter, AppRecord, IncidentFilter, IncidentRecord, ListedDelivery, OutboxRecord,
    TimelineEntry,
};

/// What one accepted body did, as the API answers it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IngestSummary {
    pub application: String,
    pub outcome: IngestOutcome,
    pub sync: String,
    pub health: String,
    pub transitions: Vec<state::Transition>,
    pub incidents: Vec<IncidentChange>,
}

/// What became of one body (or one deletion Argo CD confirmed), as the API answers and the raw body is stored.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum IngestOutcome {
    /// New or changed: stored, with its transitions and incidents.
    Changed,
    /// The same content as stored (or, for a deletion, deleted already): only when it was seen moves.
    Duplicate,
    /// Older than what is stored: ignored.
    Stale,
    /// A deletion: the Application leaves the lists and what is open for it resolves.
    Deleted,
    /// A deletion of an Application Herald never saw.
    Unknown,
}

impl IngestOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            IngestOutcome::Changed => "changed",
            IngestOutcome::Duplicate => "duplicate",
            IngestOutcome::Stale => "stale",
            IngestOutcome::Deleted => "deleted",
            IngestOutcome::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for IngestOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// State's judgement of a body, named for the summary.
impl From<&state::Outcome> for IngestOutcome {
    fn from(outcome: &state::Outcome) -> Self {
        match outcome {
            state::Outcome::Stale { .. } => IngestOutcome::Stale,
            state::Outcome::Duplicate(_) => IngestOutcome::Duplicate,
            state::Outcome::Changed { .. } => IngestOutcome::Changed,
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IncidentChange {
    pub kind: Kind,
    pub fingerprint: String,
    pub state: IncidentState,
}

/// What can go wrong behind the pipeline's door.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The batch writer task is gone (the runtime is shutting down).
    #[error("the ingest writer has stopped")]
    WriterStopped,
}

impl PipelineError {
    /// Whether the store is unreachable or busy (try again) rather than anything being wrong.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, PipelineError::Store(e) if e.is_unavailable())
    }
}

/// One resource waiting to be pruned: a row of `GET /v1/prune-pending` and of the status page.
#[derive(Debug, Serialize)]
pub struct PruneRow {
    pub instance: String,
    pub app_namespace: String,
    pub app: String,
    pub team: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `requires pruning` or `PruneSkipped`.
    pub status: String,
    pub waiting_since: DateTime<Utc>,
    pub prune_enabled: bool,
}

/// Everything the pipeline does, without the ingest batching in front of it. Private: the [`Pipeline`] is the
/// door; `ingest` and `scheduler` add the behaviour.
struct Core {
    settings: Arc<Settings>,
    store: Store,
    clock: SharedClock,
    /// Rung after a batch commits, so timers that became due (group_wait 0) run now, not at the next tick.
    wake_scheduler: Arc<tokio::sync::Notify>,
    /// Rung when the scheduler queued deliveries, so the outbox worker does not wait for its next poll.
    wake_outbox: Arc<tokio::sync::Notify>,
    router: Arc<Router>,
    inhibitor: Arc<Inhibitor>,
    /// Each Argo CD instance's API, where one is configured, with how it is doing (status page,
    /// `herald_argocd_api_up{instance}`).
    argocd_apis: Arc<Vec<InstanceApi>>,
    /// The writer's memory of each Application's state: held by whoever writes Applications, for the whole write.
    cache: Arc<tokio::sync::Mutex<cache::AppCache>>,
    /// When duplicates were last seen, not yet written.
    seen: Arc<cache::SeenTimes>,
    /// The answers for bodies seen before, byte for byte (see `repeats`).
    repeats: Arc<repeats::Repeats>,
    /// The schedules' calendars (`schedules.<name>.ical`), kept across reloads (see `crate::oncall::calendars`).
    calendars: Arc<crate::oncall::Calendars>,
}

#[derive(Clone)]
pub struct Pipeline {
    /// The current core; a reload (SIGHUP) replaces it whole with one built on the new settings, and each
    /// operation takes the core it started with to its end (see `crate::live`).
    core: Arc<Live<Core>>,
    jobs: tokio::sync::mpsc::Sender<Job>,
}

impl Pipeline {
    /// Builds the pipeline and starts its batch writer (needs a Tokio runtime).
    pub fn new(settings: Arc<Settings>, store: Store, clock: SharedClock) -> Self {
        let argocd_apis = (settings.argocd.all().into_iter())
            .filter_map(|i| {
                let api = ArgoCdApi::new(i.name, i.api?.clone());
                Some(InstanceApi {
                    status: Arc::new(ApiSource::new(i.name)),
                    api,
                    projects: Arc::default(),
                    windows: Arc::default(),
                })
            })
            .collect();
        let only_writer = store.engine() == crate::store::Engine::Sqlite;
        let calendars = Arc::new(crate::oncall::Calendars::default());
        calendars.load(&settings, clock.now());
        let core = Arc::new(Live::new(Core {
            wake_scheduler: Arc::default(),
            wake_outbox: Arc::default(),
            router: Arc::new(Router::new(&settings)),
            inhibitor: Arc::new(Inhibitor::new(&settings)),
            settings,
            store,
            clock,
            argocd_apis: Arc::new(argocd_apis),
            cache: Arc::new(tokio::sync::Mutex::new(cache::AppCache::new())),
            seen: Arc::default(),
            // Only this process writes Applications on SQLite; on PostgreSQL another replica may.
            repeats: Arc::new(repeats::Repeats::new(only_writer)),
            calendars,
        }));
        let (jobs, rx) = tokio::sync::mpsc::channel(4096);
        tokio::spawn(batch_writer(core.clone(), rx));
        Self { core, jobs }
    }

    /// The core an operation runs with, to its end.
    fn core(&self) -> Arc<Core> {
        self.core.get()
    }

    /// Runs one snapshot through the whole core; returns once everything it caused is committed. `raw`, the body it
    /// came in, is kept (for replay) when the snapshot changes something.
    pub async fn ingest(&self, mut snap: Snapshot, raw: Option<Bytes>) -> Result<IngestSummary, PipelineError> {
        self.clamp_future_time(&mut snap);
        self.add_project_annotations(&mut snap);
        let work = Work::snapshot(snap, raw, None);
        if let Some(summary) = self.unchanged(&work) {
            return Ok(summary);
        }
        self.submit(work).await
    }

    /// [`Pipeline::ingest`] for an item of an Argo CD listing (the key of its bytes: `argocd::api::item_key`),
    /// remembered with the content it is read into, so the same bytes again are not parsed while that content is
    /// what is stored ([`Pipeline::item_memory`]).
    pub async fn ingest_listed(&self, mut snap: Snapshot, item: u128) -> Result<IngestSummary, PipelineError> {
        self.clamp_future_time(&mut snap);
        self.add_project_annotations(&mut snap);
        let work = Work::listed(snap, item);
        if let Some(summary) = self.unchanged(&work) {
            return Ok(summary);
        }
        self.submit(work).await
    }

    /// What a listing asks of each item before parsing it: whether its bytes are known as what is stored for its
    /// Application (`None` where another replica may write Applications: every item is parsed).
    pub fn item_memory(&self) -> Option<crate::argocd::api::ItemMemory> {
        let repeats = self.core().repeats.clone();
        repeats
            .enabled()
            .then(|| Arc::new(move |item| repeats.listed_unchanged(item)) as crate::argocd::api::ItemMemory)
    }

    /// An item of a listing the item memory knew (`app`: [`app_key`]): seen now, nothing read or written.
    pub fn confirm_listed(&self, app: u128) {
        let core = self.core();
        core.seen.confirmed([(app, core.clock.now())]);
        metrics::counter!("herald_argocd_unchanged_total").increment(1);
    }

    /// An Application read from the Argo CD API whose stored state is live with the same content (see `repeats`): a
    /// duplicate, answered without the writer, reading and writing nothing.
    fn unchanged(&self, work: &Work) -> Option<IngestSummary> {
        let Work::Snapshot { snap, hash, .. } = work else {
            return None;
        };
        let core = self.core();
        if !ingest::from_api_now(snap) || !core.repeats.unchanged(&snap.app, hash) {
            return None;
        }
        core.seen.confirmed([(app_key(&snap.app), core.clock.now())]);
        metrics::counter!("herald_argocd_unchanged_total").increment(1);
        Some(IngestSummary {
            application: snap.app.to_string(),
            outcome: IngestOutcome::Duplicate,
            sync: snap.sync_status.to_string(),
            health: snap.health_status.to_string(),
            transitions: Vec::new(),
            incidents: Vec::new(),
        })
    }

    /// [`Pipeline::ingest`] for a webhook body, whose answer is remembered under `key` ([`body_key`] of its bytes)
    /// where the same bytes would get it again (see [`Pipeline::repeated`]).
    pub async fn ingest_body(
        &self,
        mut snap: Snapshot,
        raw: Bytes,
        key: BodyKey,
    ) -> Result<IngestSummary, PipelineError> {
        // A body dated ahead is taken as now: its answer depends on when it comes, so none is remembered.
        let key = (!self.clamp_future_time(&mut snap)).then_some(key);
        self.add_project_annotations(&mut snap);
        self.submit(Work::snapshot(snap, Some(raw), key)).await
    }

    /// The answer for a body seen before byte for byte (`key`, see [`body_key`]), without parsing it: while nothing
    /// was written for its Application since it was judged, and its AppProject's Herald annotations are the same, it
    /// is the same duplicate (now seen again) or stale body. `None`: it must be parsed and ingested.
    pub fn repeated(&self, key: BodyKey) -> Option<IngestSummary> {
        let core = self.core();
        let answer = core.repeats.answer(key)?;
        // The annotations `add_project_annotations` would give the body now (none read: the body's own, none).
        let annotations_now = core.project_annotations(&answer.app.instance, &answer.project);
        if annotations_now.unwrap_or_default() != answer.annotations {
            return None;
        }
        if !answer.stale {
            core.seen.record([(answer.app.clone(), core.clock.now())]);
        }
        metrics::counter!("herald_events_repeated_total").increment(1);
        Some(IngestSummary {
            application: answer.app.to_string(),
            outcome: if answer.stale {
                IngestOutcome::Stale
            } else {
                IngestOutcome::Duplicate
            },
            sync: answer.sync,
            health: answer.health,
            transitions: Vec::new(),
            incidents: Vec::new(),
        })
    }

    /// The Herald annotations of the snapshot's AppProject, where its instance's API has read them.
    fn add_project_annotations(&self, snap: &mut Snapshot) {
        if let Some(a) = self.core().project_annotations(&snap.app.instance, &snap.project) {
            snap.project_annotations = a;
        }
    }

    /// A body dated far in the future (a wrong clock, or a hostile sender) would make every later body of the
    /// Application stale: beyond `server.max_clock_skew` its time is taken as now.
    fn clamp_future_time(&self, snap: &mut Snapshot) -> bool {
        let now = self.now();
        let skew = chrono::Duration::from_std(self.core().settings.server.max_clock_skew).unwrap_or_default();
        if let Some(t) = snap.observed_at
            && t > now + skew
        {
            tracing::warn!(app = %snap.app, body_time = %t, "a body dated ahead of Herald's clock by more than server.max_clock_skew is taken as now");
            metrics::counter!("herald_clock_skew_clamped_total").increment(1);
            snap.observed_at = Some(now);
            return true;
        }
        false
    }

    /// Argo CD confirmed `app` is gone: it leaves the lists and its open incidents resolve ("Application deleted").
    /// The summary's outcome is `Deleted`, `Duplicate` (deleted already) or `Unknown` (never seen).
    pub async fn delete(&self, app: AppId) -> Result<IngestSummary, PipelineError> {
        self.submit(Work::Delete(app)).await
    }

    async fn submit(&self, work: Work) -> Result<IngestSummary, PipelineError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = Job { work, reply };
        if self.jobs.send(job).await.is_err() {
            return Err(PipelineError::WriterStopped);
        }
        match answer.await {
            Ok(result) => Ok(result?),
            Err(_) => Err(PipelineError::WriterStopped),
        }
    }

    /// Runs every timer that is due (see `scheduler`); returns how many ran.
    pub async fn tick(&self) -> Result<usize, PipelineError> {
        let span = tracing::info_span!("scheduler_tick");
        Ok(self.core().tick().instrument(span).await?)
    }

    /// Resolves when an ingest made a timer due, so the scheduler loop need not wait for its next tick.
    pub async fn timers_due(&self) {
        self.core().wake_scheduler.notified().await
    }

    /// Rung whenever deliveries were queued: what the outbox worker waits on besides its poll interval.
    pub fn deliveries_queued(&self) -> Arc<tokio::sync::Notify> {
        self.core().wake_outbox.clone()
    }

    /// Removes what is past its retention: raw bodies, the dictionaries no body uses any more, and deleted
    /// Applications (`storage.raw_retention`), resolved incidents and timeline entries (`storage.history_retention`),
    /// delivered outbox rows (`outbox.retention`); returns how many rows went.
    pub async fn purge_expired(&self) -> Result<u64, PipelineError> {
        let ago = |d: std::time::Duration| self.now() - chrono::Duration::from_std(d).unwrap_or_default();
        let core = self.core();
        let retention = core.settings.storage.raw_retention;
        let before = ago(retention);
        let gap = crate::store::chain_gap(retention);
        let raws = core.store.purge_raw(before, gap).await?;
        let raws = raws + core.store.purge_raw_dictionaries(before).await?;
        let history = core
            .store
            .purge_history(ago(core.settings.storage.history_retention))
            .await?;
        let delivered = core.store.purge_delivered(ago(core.settings.outbox.retention)).await?;
        // Rows go behind the writer's back: it forgets what it remembers, under its lock.
        let mut cache = core.cache.lock().await;
        let purged = core.store.purge_deleted_apps(before).await;
        cache.clear();
        if !matches!(purged, Ok(0)) {
            core.repeats.clear();
        }
        Ok(raws + history + delivered + purged?)
    }

    /// The pipeline's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.core().clock.now()
    }

    /// Whether the store answers.
    pub async fn ready(&self) -> Result<(), PipelineError> {
        Ok(self.core().store.ping().await?)
    }

    /// Applications by sync and health status, open incidents, queued and dead deliveries, for the gauges. A count
    /// the store cannot give now is left out.
    pub async fn gauges(&self) -> GaugeReadings {
        let core = self.core();
        let store = &core.store;
        GaugeReadings {
            applications: counted("Applications", store.app_counts().await),
            incidents: counted("incidents", store.incident_counts().await),
            outbox: counted("deliveries", store.outbox_counts().await),
            oldest_pending_seconds: match store.oldest_pending_delivery().await {
                Ok(t) => t.map(|t| (self.now() - t).num_seconds().max(0)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the oldest pending delivery for /metrics");
                    None
                }
            },
        }
    }

    /// How many Applications are not Synced+Healthy (of `team`, when given).
    pub async fn count_needing_attention(
        &self,
        team: Option<&str>,
        instance: Option<&str>,
    ) -> Result<usize, PipelineError> {
        let filter = AppFilter {
            team: team.map(str::to_string),
            instance: instance.map(str::to_string),
            needs_attention: true,
            ..Default::default()
        };
        Ok(self.core().store.count_apps(&filter).await?)
    }

    /// How many incidents are in `state` (of `team`, when given).
    pub async fn count_incidents(
        &self,
        state: IncidentState,
        team: Option<&str>,
        instance: Option<&str>,
    ) -> Result<usize, PipelineError> {
        Ok(self.core().store.count_incidents(state, team, instance).await?)
    }

    /// The teams a person may filter by: the configured ones and those owning Applications.
    pub async fn team_names(&self) -> Vec<String> {
        let mut teams: Vec<String> = self.core().settings.teams.keys().cloned().collect();
        teams.extend(counted("teams", self.core().store.app_teams().await));
        teams.sort();
        teams.dedup();
        teams
    }

    /// The Application's page in Argo CD, when the URL is known (`argocd.url`, else `context.argocdUrl`).
    pub fn app_link(&self, s: &state::AppState) -> Option<String> {
        let settings = &self.core().settings;
        crate::argocd::app_url(settings.argocd.ui_url(&s.snapshot.app.instance), &s.snapshot)
    }

    /// The settings the pipeline decides with now (an API handler's view; the core's own methods read theirs).
    pub fn settings(&self) -> Arc<Settings> {
        self.core().settings.clone()
    }

    /// One page of Applications (see [`AppFilter`]).
    pub async fn apps(&self, filter: &AppFilter) -> Result<Vec<AppRecord>, PipelineError> {
        let core = self.core();
        let mut apps = core.store.apps(filter).await?;
        for a in &mut apps {
            core.seen.overlay(&mut a.state);
        }
        Ok(apps)
    }

    pub async fn app(&self, id: &AppId) -> Result<Option<AppRecord>, PipelineError> {
        let core = self.core();
        let mut app = core.store.app(id).await?;
        if let Some(a) = &mut app {
            core.seen.overlay(&mut a.state);
        }
        Ok(app)
    }

    /// What changed for an Application, newest first.
    pub async fn timeline(&self, id: &AppId, limit: i64) -> Result<Vec<TimelineEntry>, PipelineError> {
        Ok(self.core().store.timeline(id, limit).await?)
    }

    /// The bodies received for an Application (newest first, within `storage.raw_retention`).
    pub async fn raw_bodies(&self, id: &AppId, limit: i64) -> Result<Vec<(DateTime<Utc>, String)>, PipelineError> {
        Ok(self.core().store.raw_bodies(id, limit).await?)
    }

    /// The incident `id`, as [`Pipeline::incidents`] shows it; `None` once it is no longer kept.
    pub async fn incident(&self, id: i64) -> Result<Option<IncidentRecord>, PipelineError> {
        // The list's cursor read from just above `id`, one row: the incident itself, if it is still there.
        let filter = IncidentFilter {
            before_id: Some(id.saturating_add(1)),
            limit: 1,
            ..Default::default()
        };
        Ok(self.incidents(&filter).await?.into_iter().find(|r| r.id == id))
    }

    /// One page of incidents (see [`IncidentFilter`]), each firing one marked with what holds it back from people
    /// now, if anything (a silence, an inhibiting incident, a sync window): asked of the delivery pipeline, as a
    /// send would; each pending one a sync window holds, with it.
    pub async fn incidents(&self, filter: &IncidentFilter) -> Result<Vec<IncidentRecord>, PipelineError> {
        let core = self.core();
        let mut list = core.store.incidents(filter).await?;
        let now = self.now();
        // A pending out_of_sync a sync window holds: its `for` starts when the window ends.
        for rec in list.iter_mut().filter(|r| r.state == IncidentState::Pending) {
            rec.view.held = (rec.view.sync_window.filter(|w| w.active(now))).map(|w| w.hold());
        }
        if !list.iter().any(|r| r.state == IncidentState::Firing) {
            return Ok(list);
        }
        let silences = core.store.silences(false, now).await?;
        let storms = core
            .store
            .storms(notify::storms_ended_after(&core.settings, now))
            .await?;
        // One read for the Applications with a firing incident on the page that a rule may inhibit: their open
        // incidents, as a send would see them (inhibition's sources; no other hold needs them).
        let mut apps: Vec<AppId> = (list.iter().filter(|r| r.state == IncidentState::Firing))
            .filter(|r| core.inhibitor.may_inhibit(&r.labels()))
            .map(|r| r.app.clone())
            .collect();
        apps.sort();
        apps.dedup();
        let open = notify::candidates_by_app(&core.store.open_incidents_read(&apps, &list).await?);
        let teller = core.teller();
        for rec in list.iter_mut().filter(|r| r.state == IncidentState::Firing) {
            let candidates = open.get(&rec.app).map_or(&[][..], Vec::as_slice);
            let facts = teller.facts(&silences, candidates, notify::storm_of(&storms, rec), now);
            rec.view.held = delivery::hold(&facts, &rec.labels(), delivery::Own::of(rec));
        }
        Ok(list)
    }

    /// The resources waiting to be pruned of at most `limit` Applications (by name, after `after`), the longest
    /// waiting first; with the last Application read, the cursor of the next page (`None`: no more).
    /// The resources waiting to be pruned of a page of `limit` Applications (after `after`): at most `max_rows`,
    /// the longest waiting first, with how many more there are in those Applications, and the next page's cursor.
    pub async fn prune_pending(
        &self,
        limit: i64,
        after: Option<&AppId>,
        max_rows: usize,
    ) -> Result<(Vec<PruneRow>, usize, Option<AppId>), PipelineError> {
        let apps = self.core().store.apps_with_pending_prunes(limit, after).await?;
        let next = (apps.len() as i64 == limit)
            .then(|| apps.last().map(|a| a.state.snapshot.app.clone()))
            .flatten();
        let mut rows = Vec::new();
        let mut omitted = 0;
        for mut a in apps {
            self.core().seen.overlay(&mut a.state);
            let s = &a.state;
            for r in crate::incidents::pending_prunes(&s.snapshot) {
                let key = state::resource_key(&r.kind, &r.namespace, &r.name);
                rows.push(PruneRow {
                    instance: s.snapshot.app.instance.clone(),
                    app_namespace: s.snapshot.app.namespace.clone(),
                    app: s.snapshot.app.name.clone(),
                    team: a.team.clone(),
                    kind: r.kind,
                    namespace: r.namespace,
                    name: r.name,
                    status: r.status,
                    waiting_since: s.prune_since.get(&key).copied().unwrap_or(s.last_seen),
                    prune_enabled: s.snapshot.sync_policy.prune,
                });
            }
            // Never more than one Application's rows beyond `max_rows` held at once.
            if rows.len() > max_rows {
                rows.sort_by_key(|r| r.waiting_since);
                omitted += rows.len() - max_rows;
                rows.truncate(max_rows);
            }
        }
        rows.sort_by_key(|r| r.waiting_since);
        Ok((rows, omitted, next))
    }

    pub async fn add_silence(&self, silence: &Silence) -> Result<(), PipelineError> {
        Ok(self.core().store.add_silence(silence).await?)
    }

    /// The silences not yet ended at `now` (all of them with `include_expired`).
    pub async fn silences(&self, include_expired: bool, now: DateTime<Utc>) -> Result<Vec<Silence>, PipelineError> {
        Ok(self.core().store.silences(include_expired, now).await?)
    }

    /// Ends an active silence now; returns when, or `None` if there is no active silence `id`.
    pub async fn expire_silence(&self, id: &str) -> Result<Option<DateTime<Utc>>, PipelineError> {
        let now = self.now();
        Ok(self.core().store.expire_silence(id, now).await?.then_some(now))
    }

    /// Deliveries, newest first: at most `limit`, older than `before_id`.
    pub async fn outbox(
        &self,
        state: Option<DeliveryState>,
        limit: i64,
        before_id: Option<i64>,
    ) -> Result<Vec<OutboxRecord>, PipelineError> {
        Ok(self.core().store.outbox(state, limit, before_id).await?)
    }

    /// [`Pipeline::outbox`] as a list shows it: each delivery with its notification's headline, not its payload.
    pub async fn outbox_headlines(
        &self,
        state: Option<DeliveryState>,
        limit: i64,
        before_id: Option<i64>,
    ) -> Result<Vec<ListedDelivery>, PipelineError> {
        Ok(self.core().store.outbox_headlines(state, limit, before_id).await?)
    }

    /// Puts a dead delivery back in the queue; `false` if there is no dead delivery `id`.
    pub async fn retry_delivery(&self, id: i64) -> Result<bool, PipelineError> {
        Ok(self.core().store.retry_dead(id, self.now()).await?)
    }
}

/// Counts for the gauges, or none when the store cannot give them now.
fn counted<T>(what: &str, counts: Result<Vec<T>, StoreError>) -> Vec<T> {
    counts.unwrap_or_else(|e| {
        tracing::debug!(error = %e, "cannot count {what} for the gauges");
        Vec::new()
    })
}

/// The Argo CD API as a second source (see `crate::resync`): the lease that makes one replica list per interval, what
/// a complete listing is compared with, and how the source is doing.
impl Pipeline {
    /// The Argo CD instances with an API configured, each with its client and how it is doing.
    pub fn argocd_apis(&self) -> Arc<Vec<InstanceApi>> {
        self.core().argocd_apis.clone()
    }

    /// What the last listing of `instance` (on any replica) lacked and held back, if anything.
    pub async fn held_drop(&self, instance: &str) -> Result<Option<HeldDropRow>, PipelineError> {
        Ok(self.core().store.held_drop(instance).await?)
    }

    /// Holds back the deletion of what `source`'s listing lacked, for its next listing to agree with.
    pub async fn hold_drop(&self, source: &InstanceApi, held: HeldDropRow) -> Result<(), PipelineError> {
        self.core().store.hold_drop(source.api.instance(), &held).await?;
        source.status.held(HeldDrop {
            at: held.at,
            count: held.apps.len(),
            stored: held.stored,
        });
        Ok(())
    }

    /// Nothing of `source`'s is held back any more.
    pub async fn release_drop(&self, source: &InstanceApi) -> Result<(), PipelineError> {
        self.core().store.release_drop(source.api.instance()).await?;
        source.status.released();
        Ok(())
    }

    /// Claims `instance`'s resync for `interval` (true: this replica lists now; the others skip until it ends).
    pub async fn claim_resync(
        &self,
        instance: &str,
        owner: &str,
        interval: std::time::Duration,
    ) -> Result<bool, PipelineError> {
        let now = self.now();
        let until = now + chrono::Duration::from_std(interval).unwrap_or(chrono::Duration::MAX / 2);
        let lease = resync_lease(instance);
        Ok(self.core().store.claim_lease(&lease, owner, now, until).await?)
    }

    /// `instance`'s Applications not deleted (in `projects`, all when empty) with when Herald last heard of each,
    /// and the project each is stored in.
    pub async fn live_apps(
        &self,
        instance: &str,
        projects: &[String],
    ) -> Result<Vec<(AppId, DateTime<Utc>, String)>, PipelineError> {
        let core = self.core();
        let mut live = core.store.live_apps_with_projects(instance, projects).await?;
        for (app, last_seen, _) in &mut live {
            if let Some(at) = core.seen.latest(app) {
                *last_seen = (*last_seen).max(at);
            }
        }
        Ok(live)
    }

    /// Whether the store knows any Application (an empty one is refilled by a listing at start).
    pub async fn has_apps(&self) -> Result<bool, PipelineError> {
        Ok(self.core().store.has_apps().await?)
    }
}

impl Core {
    /// What the acts of `notify` read, from this core.
    fn teller(&self) -> notify::Teller<'_> {
        notify::Teller {
            settings: &self.settings,
            router: &self.router,
            inhibitor: &self.inhibitor,
            calendars: &self.calendars,
            wake_outbox: &self.wake_outbox,
        }
    }

    /// `instance`'s API, when it has one.
    fn api_of(&self, instance: &str) -> Option<&InstanceApi> {
        self.argocd_apis.iter().find(|s| s.api.instance() == instance)
    }

    /// The Herald annotations of `instance`'s AppProject `project`, where its API has read them.
    fn project_annotations(&self, instance: &str, project: &str) -> Option<std::collections::BTreeMap<String, String>> {
        let source = self.api_of(instance)?;
        let projects = source.projects.read().unwrap_or_else(|e| e.into_inner());
        projects.get(project).cloned()
    }
}

/// One Argo CD instance's API as a source of state: the client, and how it is doing on this replica.
#[derive(Clone)]
pub struct InstanceApi {
    pub api: ArgoCdApi,
    pub status: Arc<ApiSource>,
    /// Its AppProjects' Herald annotations by project name, as the last resync read them (kept when a read fails).
    pub projects: Arc<std::sync::RwLock<ProjectAnnotations>>,
    /// Its AppProjects' sync windows, as the last reading on this replica found them; `None` until one succeeds.
    pub windows: Arc<std::sync::RwLock<Option<ProjectWindows>>>,
}

/// AppProject name → its Herald annotations.
pub type ProjectAnnotations = std::collections::HashMap<String, std::collections::BTreeMap<String, String>>;

/// The lease of an instance's resync: the default instance's keeps the name it had before instances existed.
fn resync_lease(instance: &str) -> String {
    if instance == crate::argocd::DEFAULT_INSTANCE {
        "argocd-resync".into()
    } else {
        format!("argocd-resync:{instance}")
    }
}

/// Reload (SIGHUP): the settings a running pipeline decides with.
impl Pipeline {
    /// Decides with `settings` from the next operation on: rules, ownership, teams, routes, grouping, receivers.
    /// The store, the clock, the Argo CD API client and its status stay those the pipeline was built with (a restart
    /// changes them), so the caller keeps `storage` and `argocd.api` as they were.
    pub fn reload(&self, settings: Arc<Settings>) {
        let old = self.core();
        // Files are read again; a URL's copy is kept while the schedule names the same URL.
        old.calendars.load(&settings, old.clock.now());
        self.core.replace(Core {
            router: Arc::new(Router::new(&settings)),
            inhibitor: Arc::new(Inhibitor::new(&settings)),
            settings,
            store: old.store.clone(),
            clock: old.clock.clone(),
            wake_scheduler: old.wake_scheduler.clone(),
            wake_outbox: old.wake_outbox.clone(),
            argocd_apis: old.argocd_apis.clone(),
            // The writer's memory of what is stored stays true whatever the settings.
            cache: old.cache.clone(),
            seen: old.seen.clone(),
            // What a body was judged may depend on settings (the clock-skew limit): judged again.
            repeats: {
                old.repeats.clear_answers();
                old.repeats.clone()
            },
            // Files are read again; a URL's copy is kept while the schedule names the same URL.
            calendars: old.calendars.clone(),
        });
    }

    /// The pipeline's clock, for what is built beside it (receivers on reload).
    pub fn clock(&self) -> SharedClock {
        self.core().clock.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::IngestOutcome;

    #[test]
    fn an_outcome_is_answered_and_stored_as_its_lowercase_word() {
        for (outcome, word) in [
            (IngestOutcome::Changed, "changed"),
            (IngestOutcome::Duplicate, "duplicate"),
            (IngestOutcome::Stale, "stale"),
            (IngestOutcome::Deleted, "deleted"),
            (IngestOutcome::Unknown, "unknown"),
        ] {
            assert_eq!(outcome.as_str(), word);
            assert_eq!(serde_json::to_value(outcome).expect("json"), word);
        }
    }
}
