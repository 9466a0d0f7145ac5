//! Argo CD's sync windows in the pipeline: each instance's AppProjects as this replica last read them (their Herald
//! annotations and their windows, [`Core::read_projects`]), asked of an Application (`argocd::sync_windows`), and
//! what follows for its `out_of_sync` incident. While Argo CD may not sync the Application its OutOfSync is
//! expected: the incident is held (`Incident::sync_window`, shown in the lists and by `herald route`), its `for`
//! starts when the window ends (its `fire_at` moved out, in the store), and while it fires its repeats and
//! escalation steps are held (`delivery::sync_window`); its resolve is still sent. Only `out_of_sync` is held: a
//! failed sync or a degraded Application is still news.
//!
//! A window that lets a person sync by hand (`manualSync`) holds only Applications with automated sync: the others
//! wait for a person anyway, who may sync them.
//!
//! The windows live in memory; what they decided lives in the store (the incident's `sync_window` and `fire_at`).
//! Until this replica has read the AppProjects (after a start; on a replica that does not list) what is stored is
//! kept as it is, and a pending `out_of_sync` that comes due has them read first (`scheduler::fire_one`): nothing
//! is lost by a restart, and nothing fires because the windows were not known.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::explain::Assessment;
use super::{Core, InstanceApi, Pipeline, PipelineError};
use crate::argocd::Snapshot;
use crate::argocd::sync_windows::{self, SyncWindow, Target};
use crate::domain::{IncidentState, Kind, SyncWindowHold};
use crate::incidents;
use crate::store::{IncidentFilter, IncidentRecord, Store, StoreError};

/// AppProject name → its sync windows (only projects with any).
pub type ProjectWindows = HashMap<String, Vec<SyncWindow>>;

/// How many open `out_of_sync` incidents of an instance one reading of the AppProjects looks at again.
const MOST_JUDGED: i64 = 2000;

/// What the windows say of an Application now, on this replica.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum WindowAnswer {
    /// Its instance's AppProjects have not been read here (or it has no API): nobody knows.
    Unknown,
    /// Nothing keeps Argo CD from syncing it (or a person may, and it has no automated sync).
    Free,
    Held(SyncWindowHold),
}

impl WindowAnswer {
    /// The hold to store, `stored` being what the incident has: kept while the windows are unknown.
    fn hold(self, stored: Option<SyncWindowHold>, now: DateTime<Utc>) -> Option<SyncWindowHold> {
        match self {
            WindowAnswer::Held(w) => Some(w),
            WindowAnswer::Free => None,
            WindowAnswer::Unknown => stored.filter(|w| w.active(now)),
        }
    }
}

/// Whether `windows` (of the Application's project) hold the `out_of_sync` of `snap` at `now`: they keep Argo CD's
/// automated sync from syncing it, and a person too or the Application syncs itself (automated sync).
pub fn window_hold(windows: &[SyncWindow], snap: &Snapshot, now: DateTime<Utc>) -> Option<SyncWindowHold> {
    let d = &snap.destination;
    let target = Target {
        name: &snap.app.name,
        namespace: d.namespace.as_deref().unwrap_or_default(),
        server: d.server.as_deref(),
        cluster_name: d.name.as_deref(),
    };
    (sync_windows::blocked(windows, &target, now))
        .filter(|b| !b.manual_sync || snap.sync_policy.automated)
        .map(|b| SyncWindowHold {
            until: b.until,
            manual_sync: b.manual_sync,
        })
}

impl Core {
    /// Whether sync windows keep Argo CD from syncing the Application of `snap` at `now`.
    pub(super) fn window_of(&self, snap: &Snapshot, now: DateTime<Utc>) -> WindowAnswer {
        let Some(source) = self.api_of(&snap.app.instance) else {
            return WindowAnswer::Unknown;
        };
        let known = source.windows.read().unwrap_or_else(|e| e.into_inner());
        let Some(projects) = known.as_ref() else {
            return WindowAnswer::Unknown;
        };
        let Some(windows) = projects.get(&snap.project) else {
            return WindowAnswer::Free;
        };
        match window_hold(windows, snap, now) {
            Some(w) => WindowAnswer::Held(w),
            None => WindowAnswer::Free,
        }
    }

    /// Marks the assessment's `out_of_sync` with the sync window that holds it, if any (`open`: the Application's
    /// open incidents, whose stored hold is kept while the windows are unknown here).
    pub(super) fn apply_window(
        &self,
        assessment: &mut Assessment,
        snap: &Snapshot,
        open: &[IncidentRecord],
        now: DateTime<Utc>,
    ) {
        let Some(h) = assessment.held.iter_mut().find(|h| h.kind == Kind::OutOfSync) else {
            return;
        };
        let stored = (open.iter().find(|r| r.fingerprint == h.fingerprint)).and_then(|r| r.view.sync_window);
        h.view.sync_window = self.window_of(snap, now).hold(stored, now);
    }

    /// Reads `source`'s AppProjects: their Herald annotations (items read before with other annotations are read
    /// again) and their sync windows, kept on this replica. `false` when they cannot be read (what was read before
    /// is kept).
    pub(super) async fn read_projects(&self, source: &InstanceApi) -> bool {
        let ownership = &self.settings.ownership;
        let keep = [ownership.annotation.as_str(), ownership.receivers_annotation.as_str()];
        match source.api.projects(&keep).await {
            Ok(read) => {
                let mut known = source.projects.write().unwrap_or_else(|e| e.into_inner());
                if *known != read.annotations {
                    self.repeats.forget_listed();
                    *known = read.annotations;
                }
                *source.windows.write().unwrap_or_else(|e| e.into_inner()) = Some(read.windows);
                true
            }
            Err(e) => {
                tracing::warn!(
                    instance = source.api.instance(),
                    error = %e,
                    "cannot read the AppProjects (their herald annotations and sync windows are not used until they \
                     can be read: the read-only account needs `projects, get`)"
                );
                false
            }
        }
    }

    /// Writes `window` as the hold of `rec` (an open `out_of_sync`): a pending one fires its `for` after the window
    /// ends (`fire_at` moved out), or its `for` after now when a window it waited for is gone early. Whether
    /// anything was written.
    pub(super) async fn hold_in_window(
        &self,
        rec: &IncidentRecord,
        window: Option<SyncWindowHold>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.store.begin().await?;
        let Some(mut current) = Store::incident(&mut tx, rec.id).await? else {
            return Ok(false);
        };
        let rules = &self.settings.rules;
        let fire_at = incidents::fire_at_in_window(current.fire_at, current.view.sync_window, window, rules, now);
        let moved = current.state == IncidentState::Pending && fire_at != current.fire_at;
        let changed = current.state != IncidentState::Resolved && current.view.sync_window != window;
        if changed {
            current.view.sync_window = window;
            Store::refresh_incident(&mut tx, rec.id, &current.view).await?;
        }
        if moved {
            Store::set_incident_state(&mut tx, rec.id, IncidentState::Pending, fire_at).await?;
        }
        tx.commit().await?;
        Ok(changed || moved)
    }
}

impl Pipeline {
    /// Reads `source`'s AppProjects (see [`Core::read_projects`]), then judges every open `out_of_sync` of its
    /// instance again against their windows (one may have started or ended since its Application last changed).
    pub async fn read_projects(&self, source: &InstanceApi) {
        let core = self.core();
        if !core.read_projects(source).await {
            return;
        }
        if let Err(e) = self.apply_sync_windows(source).await {
            tracing::warn!(instance = source.api.instance(), error = %e, "cannot apply the sync windows to the open out_of_sync incidents; the next resync does");
        }
    }

    /// Each open `out_of_sync` of `source`'s instance held or released by the windows as they are now; returns how
    /// many changed.
    pub async fn apply_sync_windows(&self, source: &InstanceApi) -> Result<usize, PipelineError> {
        let core = self.core();
        let now = self.now();
        let mut changed = 0;
        for state in [IncidentState::Pending, IncidentState::Firing] {
            let filter = IncidentFilter {
                kind: Some(Kind::OutOfSync),
                state: Some(state),
                instance: Some(source.api.instance().to_string()),
                limit: MOST_JUDGED,
                soonest_first: true,
                ..Default::default()
            };
            for rec in core.store.incidents(&filter).await? {
                let Some(app) = core.store.app(&rec.app).await? else {
                    continue;
                };
                let window = core.window_of(&app.state.snapshot, now).hold(rec.view.sync_window, now);
                if window != rec.view.sync_window {
                    changed += usize::from(core.hold_in_window(&rec, window, now).await?);
                }
            }
        }
        if changed > 0 {
            core.wake_scheduler.notify_one();
        }
        Ok(changed)
    }
}
