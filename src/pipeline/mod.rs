//! The pipeline: the one door the HTTP handlers, the CLI and the service loops go through, so none of them reaches
//! the store. [`Pipeline::ingest`] runs one snapshot through state → incidents → routing → grouping inside ONE
//! transaction (a 2xx means all of it is committed; bodies that arrive together share it, see `ingest`),
//! [`Pipeline::tick`] runs the durable timers (`scheduler`), and the read methods answer what the API and the
//! status page show. [`explain`] holds the decisions themselves, pure, for `herald route` too.

mod cache;
pub mod explain;
mod ingest;
mod scheduler;
mod source_status;

pub use source_status::{ApiSource, SourceReport};

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tracing::Instrument;

use crate::argocd::{AppId, Snapshot, api::ArgoCdApi};
use crate::clock::SharedClock;
use crate::configuration::Settings;
use crate::domain::{DeliveryState, IncidentState, Kind};
use crate::routing::{Router, Silence};
use crate::state;
use crate::store::{Store, StoreError};
use crate::telemetry::GaugeReadings;

use actix_web::web::Bytes;
use ingest::{Job, Work, batch_writer};

/// The records the read methods return.
pub use crate::store::{AppRecord, IncidentRecord, OutboxRecord, TimelineEntry};

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
    argocd_api: Option<ArgoCdApi>,
    /// How the Argo CD API source is doing, for the status page and `herald_argocd_api_up`.
    api_source: Arc<ApiSource>,
    /// The writer's memory of each Application's state: held by whoever writes Applications, for the whole write.
    cache: tokio::sync::Mutex<cache::AppCache>,
    /// When duplicates were last seen, not yet written.
    seen: cache::SeenTimes,
}

#[derive(Clone)]
pub struct Pipeline {
    core: Arc<Core>,
    jobs: tokio::sync::mpsc::Sender<Job>,
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
            api_source: Arc::default(),
            cache: tokio::sync::Mutex::new(cache::AppCache::new()),
            seen: cache::SeenTimes::default(),
        });
        let (jobs, rx) = tokio::sync::mpsc::channel(4096);
        tokio::spawn(batch_writer(core.clone(), rx));
        Self { core, jobs }
    }

    /// Runs one snapshot through the whole core; returns once everything it caused is committed. `raw`, the body it
    /// came in, is kept (for replay) when the snapshot changes something.
    pub async fn ingest(&self, snap: Snapshot, raw: Option<Bytes>) -> Result<IngestSummary, PipelineError> {
        self.submit(Work::snapshot(snap, raw)).await
    }

    /// Argo CD confirmed `app` is gone: it leaves the lists and its open incidents resolve ("Application deleted").
    /// The summary's outcome is `deleted`, `duplicate` (deleted already) or `unknown` (never seen).
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

    /// Runs every timer that is due (see `scheduler`).
    pub async fn tick(&self) -> Result<(), PipelineError> {
        let span = tracing::info_span!("scheduler_tick");
        Ok(self.core.tick().instrument(span).await?)
    }

    /// Resolves when an ingest made a timer due, so the scheduler loop need not wait for its next tick.
    pub async fn timers_due(&self) {
        self.core.wake_scheduler.notified().await
    }

    /// Rung whenever deliveries were queued: what the outbox worker waits on besides its poll interval.
    pub fn deliveries_queued(&self) -> Arc<tokio::sync::Notify> {
        self.core.wake_outbox.clone()
    }

    /// Removes the raw bodies, and the Applications deleted, longer ago than `storage.raw_retention`; returns how
    /// many rows went.
    pub async fn purge_raw_bodies(&self) -> Result<u64, PipelineError> {
        let retention = chrono::Duration::from_std(self.core.settings.storage.raw_retention).unwrap_or_default();
        let before = self.now() - retention;
        let raws = self.core.store.purge_raw(before).await?;
        // Rows go behind the writer's back: it forgets what it remembers, under its lock.
        let mut cache = self.core.cache.lock().await;
        let purged = self.core.store.purge_deleted_apps(before).await;
        cache.clear();
        Ok(raws + purged?)
    }

    /// The pipeline's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.core.clock.now()
    }

    /// Whether the store answers.
    pub async fn ready(&self) -> Result<(), PipelineError> {
        Ok(self.core.store.ping().await?)
    }

    /// Applications by sync and health status, open incidents, queued and dead deliveries, for the gauges. A count
    /// the store cannot give now is left out.
    pub async fn gauges(&self) -> GaugeReadings {
        let store = &self.core.store;
        GaugeReadings {
            applications: counted("Applications", store.app_counts().await),
            incidents: counted("incidents", store.incident_counts().await),
            outbox: counted("deliveries", store.outbox_counts().await),
        }
    }

    /// Applications, filtered by sync and health status; the deleted ones instead with `deleted`.
    pub async fn apps(
        &self,
        sync: Option<&str>,
        health: Option<&str>,
        deleted: bool,
        limit: i64,
    ) -> Result<Vec<AppRecord>, PipelineError> {
        let mut apps = self.core.store.apps(sync, health, deleted, limit).await?;
        for a in &mut apps {
            self.core.seen.overlay(&mut a.state);
        }
        Ok(apps)
    }

    pub async fn app(&self, id: &AppId) -> Result<Option<AppRecord>, PipelineError> {
        let mut app = self.core.store.app(id).await?;
        if let Some(a) = &mut app {
            self.core.seen.overlay(&mut a.state);
        }
        Ok(app)
    }

    /// What changed for an Application, newest first.
    pub async fn timeline(&self, id: &AppId, limit: i64) -> Result<Vec<TimelineEntry>, PipelineError> {
        Ok(self.core.store.timeline(id, limit).await?)
    }

    /// The bodies received for an Application (newest first, within `storage.raw_retention`).
    pub async fn raw_bodies(&self, id: &AppId, limit: i64) -> Result<Vec<(DateTime<Utc>, String)>, PipelineError> {
        Ok(self.core.store.raw_bodies(id, limit).await?)
    }

    pub async fn incidents(
        &self,
        state: Option<IncidentState>,
        team: Option<&str>,
        kind: Option<Kind>,
        app: Option<&AppId>,
        limit: i64,
    ) -> Result<Vec<IncidentRecord>, PipelineError> {
        Ok(self.core.store.incidents(state, team, kind, app, limit).await?)
    }

    /// Every resource waiting to be pruned, the longest waiting first.
    pub async fn prune_pending(&self) -> Result<Vec<PruneRow>, PipelineError> {
        let apps = self.core.store.apps_with_pending_prunes().await?;
        let mut rows = Vec::new();
        for mut a in apps {
            self.core.seen.overlay(&mut a.state);
            let s = &a.state;
            for r in crate::incidents::pending_prunes(&s.snapshot) {
                let key = state::resource_key(&r.kind, &r.namespace, &r.name);
                rows.push(PruneRow {
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
        }
        rows.sort_by_key(|r| r.waiting_since);
        Ok(rows)
    }

    pub async fn add_silence(&self, silence: &Silence) -> Result<(), PipelineError> {
        Ok(self.core.store.add_silence(silence).await?)
    }

    /// The silences not yet ended at `now` (all of them with `include_expired`).
    pub async fn silences(&self, include_expired: bool, now: DateTime<Utc>) -> Result<Vec<Silence>, PipelineError> {
        Ok(self.core.store.silences(include_expired, now).await?)
    }

    /// Ends an active silence now; returns when, or `None` if there is no active silence `id`.
    pub async fn expire_silence(&self, id: &str) -> Result<Option<DateTime<Utc>>, PipelineError> {
        let now = self.now();
        Ok(self.core.store.expire_silence(id, now).await?.then_some(now))
    }

    /// Deliveries, newest first.
    pub async fn outbox(&self, state: Option<DeliveryState>, limit: i64) -> Result<Vec<OutboxRecord>, PipelineError> {
        Ok(self.core.store.outbox(state, limit).await?)
    }

    /// Puts a dead delivery back in the queue; `false` if there is no dead delivery `id`.
    pub async fn retry_delivery(&self, id: i64) -> Result<bool, PipelineError> {
        Ok(self.core.store.retry_dead(id, self.now()).await?)
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
    /// The Argo CD API client, when `argocd.api` is configured.
    pub fn argocd_api(&self) -> Option<&ArgoCdApi> {
        self.core.argocd_api.as_ref()
    }

    /// How the Argo CD API source is doing.
    pub fn api_source(&self) -> &ApiSource {
        &self.core.api_source
    }

    /// Claims the resync for `interval` (true: this replica lists now; the others skip until it ends).
    pub async fn claim_resync(&self, owner: &str, interval: std::time::Duration) -> Result<bool, PipelineError> {
        let now = self.now();
        let until = now + chrono::Duration::from_std(interval).unwrap_or(chrono::Duration::MAX / 2);
        Ok(self.core.store.claim_lease(RESYNC_LEASE, owner, now, until).await?)
    }

    /// The Applications not deleted (in `projects`, all when empty) with when Herald last heard of each.
    pub async fn live_apps(&self, projects: &[String]) -> Result<Vec<(AppId, DateTime<Utc>)>, PipelineError> {
        let mut live = self.core.store.live_apps(projects).await?;
        for (app, last_seen) in &mut live {
            if let Some(at) = self.core.seen.latest(app) {
                *last_seen = (*last_seen).max(at);
            }
        }
        Ok(live)
    }

    /// Whether the store knows any Application (an empty one is refilled by a listing at start).
    pub async fn has_apps(&self) -> Result<bool, PipelineError> {
        Ok(self.core.store.has_apps().await?)
    }
}

const RESYNC_LEASE: &str = "argocd-resync";
