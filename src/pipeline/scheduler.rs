//! The durable timers, run by `tick`: rule deadlines (pending incidents that fire), silences ending,
//! group flushes, escalation steps and the teams' digests; and what firing or resolving an incident writes (shared with the ingest,
//! which fires and resolves incidents too).

use chrono::{DateTime, Utc};

use super::Core;
use super::explain::plan_delivery;
use crate::domain::{Action, IncidentState, Labels, Notification};
use crate::routing;
use crate::routing::grouping::{GroupView, plan_flush};
use crate::store::{IncidentRecord, NewDelivery, Store, StoreError, WriteTx};

impl Core {
    /// An incident starts firing: route it (unless silenced), and start its escalation ladder.
    pub(super) async fn on_fired(
        &self,
        tx: &mut WriteTx,
        rec: &IncidentRecord,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let id = rec.id;
        let labels = Labels::of(&rec.full_view());
        let silences = Store::silences_tx(tx, now).await?;
        let informational = rec.kind.is_informational();
        if routing::is_silenced(&silences, &labels, now) {
            tracing::info!(incident = id, app = %rec.app, kind = %rec.kind, "incident fired while silenced: tracked, not delivered");
            Store::set_notified(tx, id, false).await?;
        } else {
            self.route_incident(tx, rec, &labels, now).await?;
            self.tell_initiator(tx, &rec.full_view(), now).await?;
        }
        if informational {
            // Informational kinds (pruned) are told once and closed at once: there is nothing to resolve.
            Store::set_incident_state(tx, id, IncidentState::Resolved, now).await?;
        }
        Ok(())
    }

    /// Sends a firing incident where [`plan_delivery`] says: into its receivers' groups, and up its team's
    /// escalation ladder.
    async fn route_incident(
        &self,
        tx: &mut WriteTx,
        rec: &IncidentRecord,
        labels: &Labels,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let plan = plan_delivery(&self.settings, &self.router, labels);
        for g in &plan.groups {
            Store::add_to_group(
                tx,
                &g.receiver,
                &g.key,
                rec.id,
                IncidentState::Firing,
                now,
                &self.settings.grouping,
            )
            .await?;
        }
        Store::set_notified(tx, rec.id, true).await?;
        let fired = rec.fired_at.unwrap_or(now);
        for (i, step) in plan.escalation.iter().enumerate() {
            let due = chrono::Duration::from_std(step.after)
                .ok()
                .and_then(|after| fired.checked_add_signed(after))
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
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
        Ok(())
    }

    pub(super) async fn resolve(
        &self,
        tx: &mut WriteTx,
        rec: &IncidentRecord,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
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
                        title: Notification::title_of(Action::Resolve, std::slice::from_ref(&view), now),
                        reason: "resolved".into(),
                        incidents: vec![view.clone()],
                        created_at: now,
                        digest: None,
                        recipient: None,
                        change: None,
                    };
                    enqueue(tx, &n, now).await?;
                }
            }
        }
        Ok(())
    }

    /// Runs every timer that is due. Each kind of timer commits on its own.
    pub(super) async fn tick(&self) -> Result<(), StoreError> {
        self.fire_due_incidents().await?;
        self.deliver_unsilenced().await?;
        let queued = self.flush_groups().await? + self.escalate().await? + self.send_digests().await?;
        if queued > 0 {
            self.wake_outbox.notify_one();
        }
        Ok(())
    }

    /// The teams' digests whose slot has come (see `crate::digest::runner`); returns how many were queued.
    async fn send_digests(&self) -> Result<usize, StoreError> {
        crate::digest::send_due(&self.store, &self.settings, self.clock.now()).await
    }

    async fn fire_due_incidents(&self) -> Result<(), StoreError> {
        loop {
            let now = self.clock.now();
            let lease = now + chrono::Duration::seconds(30);
            let mut tx = self.store.begin().await?;
            let due = Store::claim_due_incidents(&mut tx, now, lease, 100).await?;
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
                    // Gone from Argo CD: nothing to fire; the Application is deleted and what is open resolves.
                    tracing::info!(incident = rec.id, app = %rec.app, "the Argo CD API no longer has this Application: deleted");
                    self.delete_alone(&rec.app, self.clock.now()).await?;
                    return Ok(());
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
            let groups = Store::claim_due_groups(&mut tx, now, 50).await?;
            if groups.is_empty() {
                tx.commit().await?;
                return Ok(flushed);
            }
            flushed += groups.len();
            let mut messages = Vec::new();
            for g in groups {
                messages.extend(self.flush_group(&mut tx, g, now).await?);
            }
            for n in self.one_message_per_application(messages) {
                enqueue(&mut tx, &n, now).await?;
            }
            tx.commit().await?;
        }
    }

    /// Flushes one group: what it would send now, if anything (enqueued by the caller, with the other groups'
    /// messages of the same flush).
    async fn flush_group(
        &self,
        tx: &mut WriteTx,
        g: crate::store::GroupRecord,
        now: DateTime<Utc>,
    ) -> Result<Option<Notification>, StoreError> {
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
        let mut message = None;
        if let Some((action, reason)) = plan.send {
            let mut incidents: Vec<_> = firing.iter().map(|m| m.incident.full_view()).collect();
            incidents.extend(resolved.iter().map(|m| m.incident.full_view()));
            let title = Notification::title_of(action, &incidents, now);
            message = Some(Notification {
                receiver: g.receiver.clone(),
                action,
                thread_key: format!("{}:{}:{}", g.receiver, g.group_key, plan.generation),
                title,
                reason: match shared_resolution(&incidents) {
                    Some(why) if action == Action::Resolve => format!("{}: {why}", reason.as_str()),
                    _ => reason.as_str().into(),
                },
                incidents,
                created_at: now,
                digest: None,
                recipient: None,
                change: None,
            });
        }
        Store::finish_flush(tx, g.id, plan.active, plan.generation, now, plan.next_at).await?;
        Ok(message)
    }

    /// Messages of one flush for one chat receiver, each about the same single Application and with the same
    /// action, become one message with a line per problem (an Application out of sync with a prune pending is one
    /// message, not two in the same second). Ticket and paging receivers keep one notification per incident.
    /// The merged message takes the first one's thread: later messages of the others' groups start their own.
    fn one_message_per_application(&self, messages: Vec<Notification>) -> Vec<Notification> {
        let mut out: Vec<Notification> = Vec::new();
        for n in messages {
            let per_incident = self.settings.receiver(&n.receiver).is_some_and(|r| r.per_incident());
            let same = |m: &Notification| {
                !per_incident
                    && m.receiver == n.receiver
                    && m.action == n.action
                    && single_application(m).is_some()
                    && single_application(m) == single_application(&n)
            };
            match out.iter_mut().find(|m| same(m)) {
                Some(m) => {
                    m.incidents.extend(n.incidents);
                    m.title = Notification::title_of(m.action, &m.incidents, m.created_at);
                    if m.reason != n.reason {
                        m.reason = format!("{}; {}", m.reason, n.reason);
                    }
                }
                None => out.push(n),
            }
        }
        out
    }

    /// Returns how many escalation steps were due.
    async fn escalate(&self) -> Result<usize, StoreError> {
        let now = self.clock.now();
        let mut tx = self.store.begin().await?;
        let due = Store::claim_due_escalations(&mut tx, now, 100).await?;
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
                    title: format!(
                        "Escalated (step {}): {}",
                        e.step,
                        Notification::title_of(Action::Open, std::slice::from_ref(&view), now)
                    ),
                    reason: format!(
                        "escalation step {} — still firing {} after it fired",
                        e.step,
                        humantime::format_duration(std::time::Duration::from_secs(e.after_secs as u64))
                    ),
                    incidents: vec![view.clone()],
                    created_at: now,
                    digest: None,
                    recipient: None,
                    change: None,
                };
                enqueue(&mut tx, &n, now).await?;
            }
        }
        tx.commit().await?;
        Ok(count)
    }
}

/// The resolution every resolved incident of a message shares ("Application deleted"), if they share one.
fn shared_resolution(incidents: &[crate::domain::Incident]) -> Option<&str> {
    let mut resolved = incidents.iter().filter(|i| i.state == IncidentState::Resolved);
    let first = resolved.next()?.resolution.as_deref()?;
    resolved
        .all(|i| i.resolution.as_deref() == Some(first))
        .then_some(first)
}

/// The Application every incident of `n` is about, if they are all about one.
fn single_application(n: &Notification) -> Option<(&str, &str)> {
    let first = n.incidents.first()?;
    let app = (first.app_namespace.as_str(), first.app_name.as_str());
    n.incidents
        .iter()
        .all(|i| (i.app_namespace.as_str(), i.app_name.as_str()) == app)
        .then_some(app)
}

pub(super) async fn enqueue(tx: &mut WriteTx, n: &Notification, now: DateTime<Utc>) -> Result<(), StoreError> {
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
