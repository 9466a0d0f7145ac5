//! The durable timers, run by `tick`: rule deadlines (pending incidents that fire, after confirming them with the
//! Argo CD API), held incidents released, group flushes, escalation steps and the teams' digests. Each timer claims
//! what is due and hands it to `super::notify`, which writes what it tells in the timer's transaction.

use chrono::{DateTime, Utc};

use super::Core;
use super::delivery::{self, Decision, Own};
use super::notify;
use crate::domain::IncidentState;
use crate::store::{IncidentRecord, Store, StoreError};

impl Core {
    /// Runs every timer that is due. Each kind of timer commits on its own. Returns how many timers ran (none: the
    /// pass found nothing due).
    pub(super) async fn tick(&self) -> Result<usize, StoreError> {
        let fired = self.fire_due_incidents().await?;
        let released = self.deliver_held().await?;
        let queued = self.flush_groups().await? + self.escalate().await? + self.send_digests().await?;
        if queued > 0 {
            self.wake_outbox.notify_one();
        }
        Ok(fired + released + queued)
    }

    /// The teams' digests whose slot has come (see `crate::digest::runner`); returns how many were queued.
    async fn send_digests(&self) -> Result<usize, StoreError> {
        crate::digest::send_due(&self.store, &self.settings, self.clock.now()).await
    }

    /// Returns how many incidents were due.
    async fn fire_due_incidents(&self) -> Result<usize, StoreError> {
        let mut fired = 0;
        loop {
            let now = self.clock.now();
            let lease = now + chrono::Duration::seconds(30);
            let mut tx = self.store.begin().await?;
            let due = Store::claim_due_incidents(&mut tx, now, lease, 100).await?;
            tx.commit().await?;
            if due.is_empty() {
                return Ok(fired);
            }
            fired += due.len();
            for rec in due {
                self.fire_one(rec).await?;
            }
        }
    }

    /// Fires a pending incident whose `for` has elapsed — after confirming the condition with the Argo CD API
    /// when one is configured ("confirm in the cluster, not in Git").
    async fn fire_one(&self, rec: IncidentRecord) -> Result<(), StoreError> {
        let mut note = None;
        // The Application as Argo CD has it now, when it could be asked: whether a sync window holds it.
        let mut confirmed = None;
        // Only the Application's own instance can confirm it (or say it is gone): another instance's 404 means
        // nothing about it.
        if let Some(source) = self.api_of(&rec.app.instance) {
            use crate::argocd::api::Confirmation;
            // Asked in its project: without one Argo CD answers 403 for a missing Application (see `confirm`).
            let project = rec.view.project.as_str();
            if rec.kind == crate::domain::Kind::OutOfSync && source.windows.read().is_ok_and(|w| w.is_none()) {
                // Not read on this replica yet (a start, or a replica that does not list): read before it fires.
                self.read_projects(source).await;
            }
            match source.api.confirm(&rec.app, project).await {
                Ok(Confirmation::Present(snap) | Confirmation::Moved(snap)) => {
                    self.project_seen(source, project).await?;
                    confirmed = Some(snap.clone());
                    // Record what the cluster says; if the condition is gone this resolves the incident.
                    self.ingest_alone(*snap, self.clock.now()).await?;
                }
                Ok(Confirmation::Gone) => {
                    // Gone from Argo CD: nothing to fire; the Application is deleted and what is open resolves.
                    tracing::info!(incident = rec.id, app = %rec.app, "the Argo CD API no longer has this Application: deleted");
                    self.project_seen(source, project).await?;
                    self.delete_alone(&rec.app, self.clock.now()).await?;
                    return Ok(());
                }
                Ok(Confirmation::Denied) => {
                    // Herald may not see its project: nothing can be confirmed, so it neither fires nor resets;
                    // it is asked again when its claim ends (and fires then if the condition is confirmed).
                    tracing::warn!(incident = rec.id, app = %rec.app, project, "cannot confirm the condition: the Argo CD token may not see this project (403); the incident waits");
                    self.project_denied(source, project).await?;
                    return Ok(());
                }
                Err(e) => {
                    let waited = self.clock.now() - rec.fire_at;
                    let limit = source.api.settings().confirm_wait;
                    if waited < chrono::Duration::from_std(limit).unwrap_or_default() {
                        tracing::warn!(incident = rec.id, app = %rec.app, error = %e, "cannot confirm the condition yet; will try again");
                        return Ok(());
                    }
                    note = Some(format!("not confirmed: {e} (fired after waiting {}s)", limit.as_secs()));
                }
            }
        }
        let now = self.clock.now();
        if let Some(snap) = confirmed.filter(|_| rec.kind == crate::domain::Kind::OutOfSync)
            && self.held_by_window(&rec, &snap, now).await?
        {
            return Ok(());
        }
        let mut tx = self.store.begin().await?;
        let Some(mut current) = Store::incident(&mut tx, rec.id).await? else {
            return Ok(());
        };
        let open = Store::open_incidents(&mut tx, &rec.app).await?;
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
        notify::fired(&self.teller(), &mut tx, &current, now, &open).await?;
        tx.commit().await
    }

    /// A due `out_of_sync` whose Application a sync window holds now (a window that started after it was opened,
    /// with nothing changed since): its `for` starts when the window ends. Whether it is held.
    async fn held_by_window(
        &self,
        rec: &IncidentRecord,
        snap: &crate::argocd::Snapshot,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let super::windows::WindowAnswer::Held(window) = self.window_of(snap, now) else {
            return Ok(false);
        };
        tracing::info!(incident = rec.id, app = %rec.app, until = %window.until, "due, but a sync window holds the Application: its `for` starts when the window ends");
        self.hold_in_window(rec, Some(window), now).await?;
        Ok(true)
    }

    /// Firing incidents never delivered because they were held back when they fired: delivered once nothing
    /// holds them any more (the silence ended, the inhibiting incident resolved).
    /// Returns how many incidents held back until now were delivered.
    async fn deliver_held(&self) -> Result<usize, StoreError> {
        let now = self.clock.now();
        let mut tx = self.store.begin().await?;
        let waiting = Store::unnotified_firing(&mut tx, 200).await?;
        if waiting.is_empty() {
            return Ok(0);
        }
        let mut released = 0;
        let silences = Store::silences_tx(&mut tx, now).await?;
        let storms = notify::holding_storms(&self.settings, &mut tx, now).await?;
        let apps: Vec<_> = waiting.iter().map(|r| r.app.clone()).collect();
        let open = notify::candidates_by_app(&Store::open_incidents_of(&mut tx, &apps).await?);
        let teller = self.teller();
        for rec in waiting {
            let candidates = open.get(&rec.app).map_or(&[][..], Vec::as_slice);
            let labels = rec.labels();
            let facts = teller.facts(&silences, candidates, notify::storm_of(&storms, &rec), now);
            if let Decision::Deliver(plan) = delivery::decide(&facts, &labels, Own::of(&rec)) {
                tracing::info!(incident = rec.id, app = %rec.app, "no longer held back and still firing: delivering");
                notify::routed(&self.settings, &mut tx, &rec, &plan, now).await?;
                released += 1;
            }
        }
        tx.commit().await?;
        Ok(released)
    }

    /// Returns how many groups were flushed.
    async fn flush_groups(&self) -> Result<usize, StoreError> {
        let mut flushed = 0;
        loop {
            let now = self.clock.now();
            let mut tx = self.store.begin().await?;
            let groups = Store::claim_due_groups(&mut tx, now, 50).await?;
            if groups.is_empty() {
                tx.commit().await?;
                return Ok(flushed);
            }
            flushed += groups.len();
            notify::groups_flushed(&self.teller(), &mut tx, groups, now).await?;
            tx.commit().await?;
        }
    }

    /// Returns how many escalation steps were due.
    async fn escalate(&self) -> Result<usize, StoreError> {
        let now = self.clock.now();
        let mut tx = self.store.begin().await?;
        let due = Store::claim_due_escalations(&mut tx, now, 100).await?;
        let count = due.len();
        let silences = Store::silences_tx(&mut tx, now).await?;
        let storms = notify::holding_storms(&self.settings, &mut tx, now).await?;
        let teller = self.teller();
        for e in due {
            notify::escalation_step(&teller, &mut tx, e, (&silences, &storms), now).await?;
        }
        tx.commit().await?;
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use crate::domain::{Action, Incident, IncidentState, Kind, Notification};

    #[test]
    fn a_prune_told_when_it_happens_never_reads_as_resolved() {
        // Informational incidents are closed the moment they fire, before their group flushes.
        let pruned = Incident {
            kind: Kind::Pruned,
            state: IncidentState::Resolved,
            summary: "payments: the sync deleted ConfigMap/payments/payments-config".into(),
            ..Default::default()
        };

        for incidents in [vec![pruned.clone()], vec![pruned.clone(), pruned]] {
            let t = Notification::title_of(Action::Open, &incidents, chrono::Utc::now());
            assert!(!t.to_lowercase().contains("resolved"), "{t}");
        }
    }
}
