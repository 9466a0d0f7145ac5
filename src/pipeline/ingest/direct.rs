//! The deliveries that go past the teams' groups, written in the transaction that decides them (so a restart
//! neither loses nor repeats them): the message to the person who started a failed or pruning sync, the change
//! events of a sync that deployed a new revision, and the commit statuses of a sync's states. Whom they go to is
//! decided in `routing::{initiator, change, sync_status}`.

use chrono::{DateTime, Utc};

use super::super::Core;
use crate::domain::{Incident, Notification, Thread};
use crate::routing;
use crate::state::AppState;
use crate::store::{Store, StoreError, WriteTx};

impl Core {
    /// An incident fired: the person who started its sync hears of it directly (see `routing::initiator`).
    pub(in crate::pipeline) async fn tell_initiator(
        &self,
        tx: &mut WriteTx,
        view: &Incident,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let direct = routing::initiator::direct(&self.settings, view, now);
        self.queue(tx, direct, now).await
    }

    /// A changed state: a sync that deployed a new revision is a change event (see `routing::change`), and each
    /// new state of a sync of a commit on GitHub a commit status (see `routing::sync_status`).
    pub(super) async fn tell_change(
        &self,
        tx: &mut WriteTx,
        prev: &AppState,
        next: &AppState,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut changes = Vec::new();
        let changes_and_statuses = routing::change::notifications(&self.settings, prev, next, now)
            .into_iter()
            .chain(routing::sync_status::notifications(&self.settings, prev, next, now));
        for (thread, n) in changes_and_statuses {
            // Queued already (by another replica, or before a restart that lost the writer's memory): once only.
            if !Store::has_thread(tx, &thread.key()).await? {
                changes.push((thread, n));
            }
        }
        self.queue(tx, changes, now).await
    }

    async fn queue(
        &self,
        tx: &mut WriteTx,
        ns: Vec<(Thread, Notification)>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let queued = !ns.is_empty();
        for (thread, n) in ns {
            self.send(tx, &thread, n, now).await?;
        }
        if queued {
            // Not a group's: no flush will ring the outbox worker for these.
            self.wake_outbox.notify_one();
        }
        Ok(())
    }
}
