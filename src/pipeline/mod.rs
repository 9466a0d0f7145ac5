//! The pipeline that ties the pure core to the store: [`Pipeline::ingest`] runs one snapshot through
//! state → incidents → routing → grouping inside ONE transaction (a 2xx means all of it is committed), and
//! [`Pipeline::tick`] runs the durable timers (rule deadlines, group flushes, escalations, silences ending).

pub mod explain;
mod ingest;
mod scheduler;

use std::sync::Arc;

use serde::Serialize;

use crate::argocd::{Snapshot, api::ArgoCdApi};
use crate::clock::SharedClock;
use crate::configuration::Settings;
use crate::domain::{IncidentState, Kind};
use crate::routing::Router;
use crate::state;
use crate::store::{Store, StoreError};

use ingest::{Job, batch_writer};

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
