//! The durable timers, run by `tick`: rule deadlines (pending incidents that fire), held incidents released,
//! group flushes, escalation steps and the teams' digests; and what firing or resolving an incident writes (shared
//! with the ingest, which fires and resolves incidents too). Every "who is told" question goes to
//! `super::delivery`; this file only asks and writes what it answers.

use chrono::{DateTime, Utc};

use super::Core;
use super::delivery::{self, Decision, DeliveryPlan, Facts, Own};
use crate::argocd::AppId;
use crate::domain::{Action, Body, Hold, IncidentState, Labels, Notification, Occurrence, Thread};
use crate::incidents::storm::OpenStorm;
use crate::routing::grouping::GroupView;
use crate::routing::inhibit::Candidate;
use crate::routing::{self, Silence};
use crate::store::{IncidentRecord, Store, StoreError, WriteTx};

impl Core {
    /// One Application's open incidents as inhibition's sources.
    pub(super) fn candidates(open: &[IncidentRecord]) -> Vec<Candidate> {
        open.iter()
            .filter(|r| r.state != IncidentState::Resolved)
            .map(|r| Candidate {
                labels: r.labels(),
                state: r.state,
                fire_at: r.fire_at,
            })
            .collect()
    }

    /// [`Core::candidates`] of several Applications, each computed once.
    pub(super) fn candidates_by_app(
        open: &std::collections::HashMap<crate::argocd::AppId, Vec<IncidentRecord>>,
    ) -> std::collections::HashMap<crate::argocd::AppId, Vec<Candidate>> {
        open.iter()
            .map(|(app, list)| (app.clone(), Self::candidates(list)))
            .collect()
    }

    /// What the delivery pipeline knows now: the configuration, the silences, one Application's open incidents, the
    /// storm the incident is a member of.
    pub(super) fn facts<'a>(
        &'a self,
        silences: &'a [Silence],
        open: &'a [Candidate],
        storm: Option<&'a OpenStorm>,
        now: DateTime<Utc>,
    ) -> Facts<'a> {
        Facts {
            settings: &self.settings,
            router: &self.router,
            inhibitor: &self.inhibitor,
            silences,
            open,
            storm,
            now,
        }
    }

    /// An incident starts firing: the delivery pipeline says whether it is held back (then it waits, see
    /// [`Core::deliver_held`]) or where it goes. `open` are the open incidents of its Application.
    pub(super) async fn on_fired(
        &self,
        tx: &mut WriteTx,
        rec: &IncidentRecord,
        now: DateTime<Utc>,
        open: &[IncidentRecord],
    ) -> Result<(), StoreError> {
        let id = rec.id;
        let labels = rec.labels();
        let silences = Store::silences_tx(tx, now).await?;
        let storms = self.holding_storms(tx, now).await?;
        let candidates = Self::candidates(open);
        let facts = self.facts(&silences, &candidates, storm_of(&storms, rec), now);
        match delivery::decide(&facts, &labels, Own::of(rec)) {
            Decision::Hold(why) => {
                tracing::info!(incident = id, app = %rec.app, kind = %rec.kind, held = %why.describe(crate::domain::Zone::UTC), "incident fired while held back: tracked, not delivered");
                Store::set_notified(tx, id, false).await?;
                if let Hold::Storm {
                    storm_id,
                    ended_at: None,
                    ..
                } = why
                {
                    // The storm is told when its first member fires.
                    Box::pin(self.fire_storm(tx, storm_id, now)).await?;
                }
            }
            Decision::Deliver(plan) => {
                self.route_incident(tx, rec, &plan, now).await?;
                self.tell_initiator(tx, &rec.full_view(), now).await?;
            }
        }
        if rec.kind.is_informational() {
            // Events are told once and closed at once: there is nothing to resolve.
            Store::set_incident_state(tx, id, IncidentState::Resolved, now).await?;
        }
        Ok(())
    }

    /// Sends a firing incident where the delivery pipeline planned: into its receivers' groups, and up its team's
    /// escalation ladder.
    async fn route_incident(
        &self,
        tx: &mut WriteTx,
        rec: &IncidentRecord,
        plan: &DeliveryPlan,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        if !plan.route.refused.is_empty() {
            tracing::warn!(
                incident = rec.id, app = %rec.app, team = %rec.team, refused = %plan.route.refused.join(", "),
                "the Application's annotation asks for receivers its team does not allow (teams.<team>.allowed_receivers): not used"
            );
            metrics::counter!("herald_annotation_receivers_refused_total").increment(plan.route.refused.len() as u64);
        }
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
                step.on_call.as_deref(),
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
                    let thread = Thread::Escalation {
                        receiver,
                        incident: rec.id,
                    };
                    let n = Notification::about(
                        &thread,
                        Action::Resolve,
                        Notification::title_of(Action::Resolve, std::slice::from_ref(&view), now),
                        "resolved".into(),
                        Body::Incidents(vec![view.clone()]),
                        now,
                    );
                    self.send(tx, &thread, n, now).await?;
                }
            }
        }
        Ok(())
    }

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
        self.on_fired(&mut tx, &current, now, &open).await?;
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
        let storms = self.holding_storms(&mut tx, now).await?;
        let apps: Vec<_> = waiting.iter().map(|r| r.app.clone()).collect();
        let open = Self::candidates_by_app(&Store::open_incidents_of(&mut tx, &apps).await?);
        for rec in waiting {
            let candidates = open.get(&rec.app).map_or(&[][..], Vec::as_slice);
            let labels = rec.labels();
            let facts = self.facts(&silences, candidates, storm_of(&storms, &rec), now);
            if let Decision::Deliver(plan) = delivery::decide(&facts, &labels, Own::of(&rec)) {
                tracing::info!(incident = rec.id, app = %rec.app, "no longer held back and still firing: delivering");
                self.route_incident(&mut tx, &rec, &plan, now).await?;
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
            let silences = Store::silences_tx(&mut tx, now).await?;
            let storms = self.holding_storms(&mut tx, now).await?;
            let mut messages = Vec::new();
            for g in groups {
                messages.extend(self.flush_group(&mut tx, g, (&silences, &storms), now).await?);
            }
            for (thread, n) in self.one_message_per_application(messages) {
                self.send(&mut tx, &thread, n, now).await?;
            }
            tx.commit().await?;
        }
    }

    /// Flushes one group: what it would send now, if anything (enqueued by the caller, with the other groups'
    /// messages of the same flush). Each firing member is asked the holding stages again: a silenced or inhibited
    /// incident is left out and never repeated; an event is told once, then leaves the group.
    async fn flush_group(
        &self,
        tx: &mut WriteTx,
        g: crate::store::GroupRecord,
        (silences, storms): (&[Silence], &[OpenStorm]),
        now: DateTime<Utc>,
    ) -> Result<Option<(Thread, Notification)>, StoreError> {
        let members = Store::members(tx, g.id).await?;
        let apps: Vec<_> = members.iter().map(|m| m.incident.app.clone()).collect();
        let open = Self::candidates_by_app(&Store::open_incidents_of(tx, &apps).await?);
        let (mut firing, mut held, mut events, mut resolved) = (Vec::new(), 0, Vec::new(), Vec::new());
        for m in &members {
            match (m.status, m.incident.kind.occurrence()) {
                (IncidentState::Firing, Occurrence::Event) if m.dirty => events.push(m),
                (IncidentState::Firing, Occurrence::Condition) => {
                    let candidates = open.get(&m.incident.app).map_or(&[][..], Vec::as_slice);
                    let labels = m.incident.labels();
                    let facts = self.facts(silences, candidates, storm_of(storms, &m.incident), now);
                    match delivery::hold(&facts, &labels, Own::of(&m.incident)) {
                        Some(_) => held += 1,
                        None => firing.push(m),
                    }
                }
                (IncidentState::Resolved, _) if m.dirty => resolved.push(m),
                _ => {}
            }
        }
        let view = GroupView {
            active: g.active,
            generation: g.generation,
            firing: firing.len(),
            new_firing: firing.iter().any(|m| m.dirty),
            held,
            newly_resolved: resolved.len(),
            new_events: events.len(),
        };
        let plan = delivery::dedup(view, &self.settings, now);
        let mut message = None;
        if let Some((action, reason)) = plan.send {
            let mut incidents: Vec<_> = firing.iter().map(|m| m.incident.full_view()).collect();
            incidents.extend(events.iter().map(|m| m.incident.full_view()));
            incidents.extend(resolved.iter().map(|m| m.incident.full_view()));
            let title = Notification::title_of(action, &incidents, now);
            let thread = Thread::Group {
                receiver: g.receiver.clone(),
                group_key: g.group_key.clone(),
                generation: plan.generation,
            };
            let n = Notification::about(
                &thread,
                action,
                title,
                match shared_resolution(&incidents) {
                    Some(why) if action == Action::Resolve => format!("{}: {why}", reason.as_str()),
                    _ => reason.as_str().into(),
                },
                Body::Incidents(incidents),
                now,
            );
            message = Some((thread, n));
        }
        // Events are told once: whether or not this flush sent them (it always does), they leave the group.
        let told: Vec<i64> = (members.iter())
            .filter(|m| m.incident.kind.is_informational())
            .map(|m| m.incident.id)
            .collect();
        Store::remove_members(tx, g.id, &told).await?;
        Store::finish_flush(tx, g.id, plan.active, plan.generation, now, plan.next_at).await?;
        Ok(message)
    }

    /// Messages of one flush for one chat receiver, each about the same single Application and with the same
    /// action, become one message with a line per problem (an Application out of sync with a prune pending is one
    /// message, not two in the same second). Ticket and paging receivers keep one notification per incident.
    /// The merged message takes the first one's thread: later messages of the others' groups start their own.
    fn one_message_per_application(&self, messages: Vec<(Thread, Notification)>) -> Vec<(Thread, Notification)> {
        let mut out: Vec<(Thread, Notification)> = Vec::new();
        for (thread, n) in messages {
            let per_incident = self.settings.receiver(&n.receiver).is_some_and(|r| r.per_incident());
            let same = |m: &Notification| {
                !per_incident
                    && m.receiver == n.receiver
                    && m.action == n.action
                    && single_application(m).is_some()
                    && single_application(m) == single_application(&n)
            };
            match out.iter_mut().find(|(_, m)| same(m)) {
                Some((_, m)) => {
                    if let (Body::Incidents(more), Body::Incidents(to)) = (n.body, &mut m.body) {
                        to.extend(more);
                    }
                    m.title = Notification::title_of(m.action, m.incidents(), m.created_at);
                    if m.reason != n.reason {
                        m.reason = format!("{}; {}", m.reason, n.reason);
                    }
                }
                None => out.push((thread, n)),
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
        let silences = Store::silences_tx(&mut tx, now).await?;
        let storms = self.holding_storms(&mut tx, now).await?;
        for e in due {
            let Some(rec) = Store::incident(&mut tx, e.incident_id).await? else {
                Store::finish_escalation(&mut tx, e.id).await?;
                continue;
            };
            if rec.state != IncidentState::Firing {
                Store::finish_escalation(&mut tx, e.id).await?;
                continue;
            }
            let view = rec.full_view();
            let open = Store::open_incidents(&mut tx, &rec.app).await?;
            let candidates = Self::candidates(&open);
            let facts = self.facts(&silences, &candidates, storm_of(&storms, &rec), now);
            if let Some(why) = delivery::hold(&facts, &Labels::of(&view), Own::of(&rec)) {
                // Not now: the step waits for the silence or the acknowledgement to end (or looks again after
                // group_interval: an unacknowledge, an inhibiting incident resolved) and is sent then if the
                // incident still fires.
                let interval =
                    now + chrono::Duration::from_std(self.settings.grouping.group_interval).unwrap_or_default();
                let again = match &why {
                    Hold::Silenced { until, .. } => *until,
                    Hold::Acknowledged { until: Some(until), .. } => (*until).min(interval),
                    Hold::SyncWindow { until, .. } => (*until).min(interval),
                    Hold::Muted { until: Some(until), .. } => (*until).min(interval),
                    // A storm over holds for storm.window more.
                    Hold::Storm {
                        ended_at: Some(end), ..
                    } => {
                        let grace = chrono::Duration::from_std(self.settings.storm.window).unwrap_or_default();
                        (*end + grace).min(interval)
                    }
                    _ => interval,
                };
                tracing::info!(incident = rec.id, step = e.step, held = %why.describe(crate::domain::Zone::UTC), "escalation step held back");
                Store::postpone_escalation(&mut tx, e.id, again).await?;
                continue;
            }
            Store::finish_escalation(&mut tx, e.id).await?;
            for receiver in &e.receivers {
                let thread = Thread::Escalation {
                    receiver: receiver.clone(),
                    incident: rec.id,
                };
                let n = Notification::about(
                    &thread,
                    Action::Open,
                    format!(
                        "Escalated (step {}): {}",
                        e.step,
                        Notification::title_of(Action::Open, std::slice::from_ref(&view), now)
                    ),
                    format!(
                        "escalation step {} — still firing {} after it fired",
                        e.step,
                        humantime::format_duration(std::time::Duration::from_secs(e.after_secs as u64))
                    ),
                    Body::Incidents(vec![view.clone()]),
                    now,
                );
                self.send(&mut tx, &thread, n, now).await?;
            }
            if let Some(schedule) = &e.on_call {
                // Whoever is on call now, not when the incident fired.
                let copy = self.calendars.copy(schedule).and_then(|c| c.calendar);
                let step = routing::on_call::Step {
                    number: e.step,
                    after: std::time::Duration::from_secs(e.after_secs.max(0) as u64),
                    schedule,
                };
                for (thread, n) in routing::on_call::reach(&self.settings, copy.as_deref(), &step, &view, now) {
                    self.send(&mut tx, &thread, n, now).await?;
                }
            }
        }
        tx.commit().await?;
        Ok(count)
    }
}

/// The storm `rec` is a member of, among `storms`.
pub(super) fn storm_of<'a>(storms: &'a [OpenStorm], rec: &IncidentRecord) -> Option<&'a OpenStorm> {
    let id = rec.storm_id?;
    storms.iter().find(|s| s.id == id)
}

/// The resolution every resolved incident of a message shares ("Application deleted"), if they share one.
fn shared_resolution(incidents: &[crate::domain::Incident]) -> Option<&str> {
    let mut resolved = incidents.iter().filter(|i| i.state == IncidentState::Resolved);
    let first = resolved.next()?.resolution.as_deref()?;
    resolved
        .all(|i| i.resolution.as_deref() == Some(first))
        .then_some(first)
}

/// The Application (in its Argo CD instance) every incident of `n` is about, if they are all about one.
fn single_application(n: &Notification) -> Option<AppId> {
    let app = n.incidents().first()?.app_id();
    n.incidents().iter().all(|i| i.app_id() == app).then_some(app)
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
