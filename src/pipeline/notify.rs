//! From a decision to an outbox row, in one place: the acts — an incident fired, resolved or acknowledged, an
//! escalation step due, a group flushed, a change or a commit status of a sync, the person who started a sync
//! told — each a function over the write transaction of whoever decided it (the ingest, a timer, a click), so a
//! restart neither loses nor repeats what it queues. Who is told is asked of `delivery`'s stages (pure, in
//! `super::delivery`) and of `routing`; every notification goes out through [`finish`] into the outbox.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};

use super::delivery::{self, Decision, DeliveryPlan, Facts, Own};
use crate::argocd::AppId;
use crate::configuration::Settings;
use crate::domain::{Action, Body, Hold, Incident, IncidentState, Labels, Notification, Occurrence, Thread};
use crate::incidents::storm::OpenStorm;
use crate::oncall::Calendars;
use crate::routing::grouping::GroupView;
use crate::routing::inhibit::{Candidate, Inhibitor};
use crate::routing::{self, Router, Silence};
use crate::state::AppState;
use crate::store::{EscalationRecord, GroupRecord, IncidentRecord, Store, StoreError, WriteTx};

/// What every act reads: the settings, the routing and inhibition `delivery` asks, the schedules' calendars an
/// on-call step reads, and the outbox worker's bell for what no group flush rings it for.
pub(super) struct Teller<'a> {
    pub(super) settings: &'a Settings,
    pub(super) router: &'a Router,
    pub(super) inhibitor: &'a Inhibitor,
    pub(super) calendars: &'a Calendars,
    pub(super) wake_outbox: &'a tokio::sync::Notify,
}

impl Teller<'_> {
    /// What the delivery pipeline knows now: the configuration, the silences, one Application's open incidents, the
    /// storm the incident is a member of.
    pub(super) fn facts<'f>(
        &'f self,
        silences: &'f [Silence],
        open: &'f [Candidate],
        storm: Option<&'f OpenStorm>,
        now: DateTime<Utc>,
    ) -> Facts<'f> {
        Facts {
            settings: self.settings,
            router: self.router,
            inhibitor: self.inhibitor,
            silences,
            open,
            storm,
            now,
        }
    }
}

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

/// [`candidates`] of several Applications, each computed once.
pub(super) fn candidates_by_app(open: &HashMap<AppId, Vec<IncidentRecord>>) -> HashMap<AppId, Vec<Candidate>> {
    open.iter().map(|(app, list)| (app.clone(), candidates(list))).collect()
}

/// The storm `rec` is a member of, among `storms`.
pub(super) fn storm_of<'a>(storms: &'a [OpenStorm], rec: &IncidentRecord) -> Option<&'a OpenStorm> {
    let id = rec.storm_id?;
    storms.iter().find(|s| s.id == id)
}

/// The storms that may hold an incident at `now`: open, or ended within `storm.window`.
pub(super) async fn holding_storms(
    settings: &Settings,
    tx: &mut WriteTx,
    now: DateTime<Utc>,
) -> Result<Vec<OpenStorm>, StoreError> {
    Store::storms_tx(tx, storms_ended_after(settings, now)).await
}

/// Storms that ended after this may still hold their members.
pub(super) fn storms_ended_after(settings: &Settings, now: DateTime<Utc>) -> DateTime<Utc> {
    now - chrono::Duration::from_std(settings.storm.window).unwrap_or_default()
}

/// Queues `n`, the notification of `thread`, finished: its signed links (`super::links::add_links`), the link to
/// the status page of its team (`server.public_url`) and the time zone its times are read in (the team's). Every
/// notification the pipeline sends goes this way.
pub(super) async fn finish(
    settings: &Settings,
    tx: &mut WriteTx,
    thread: &Thread,
    mut n: Notification,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    if let Some(team) = n.incidents().first().map(|i| i.team.clone()) {
        n.zone = super::links::zone_of(settings, &team);
    }
    super::links::add_links(settings, &mut n, now);
    let n = n.with_status_page(settings.server.public_url.as_deref());
    Store::queue(tx, thread, &n, now).await
}

/// What the ingest decided that tells someone, in the order it decided it: applied by [`apply`] in the batch's
/// transaction once every decision about the Application is made (and its firing incidents' rows written).
pub(super) enum Effect {
    /// A sync's change events and commit statuses (`routing::change`, `routing::sync_status`), to queue unless
    /// their threads were queued before.
    SyncTold(Vec<(Thread, Notification)>),
    /// An incident fired at once; `open`: its Application's open incidents then, as inhibition's sources.
    Fired { rec: IncidentRecord, open: Vec<Candidate> },
    /// A firing (or pending) incident resolved.
    Resolved(IncidentRecord),
}

/// Applies what the ingest decided for one Application, in order, in the batch's transaction.
pub(super) async fn apply(
    t: &Teller<'_>,
    tx: &mut WriteTx,
    effects: Vec<Effect>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    for effect in effects {
        match effect {
            Effect::SyncTold(told) => sync_told(t, tx, told, now).await?,
            Effect::Fired { rec, open } => fired_among(t, tx, &rec, &open, now).await?,
            Effect::Resolved(rec) => resolved(t.settings, tx, &rec, now).await?,
        }
    }
    Ok(())
}

/// An incident starts firing: the delivery pipeline says whether it is held back (then it waits for the
/// scheduler's `deliver_held`) or where it goes. `open` are the open incidents of its Application.
pub(super) async fn fired(
    t: &Teller<'_>,
    tx: &mut WriteTx,
    rec: &IncidentRecord,
    now: DateTime<Utc>,
    open: &[IncidentRecord],
) -> Result<(), StoreError> {
    fired_among(t, tx, rec, &candidates(open), now).await
}

/// [`fired`], its Application's open incidents given as inhibition's sources (`candidates`).
async fn fired_among(
    t: &Teller<'_>,
    tx: &mut WriteTx,
    rec: &IncidentRecord,
    candidates: &[Candidate],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let id = rec.id;
    let labels = rec.labels();
    let silences = Store::silences_tx(tx, now).await?;
    let storms = holding_storms(t.settings, tx, now).await?;
    let facts = t.facts(&silences, candidates, storm_of(&storms, rec), now);
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
                Box::pin(storm_fired(t, tx, storm_id, now)).await?;
            }
        }
        Decision::Deliver(plan) => {
            routed(t.settings, tx, rec, &plan, now).await?;
            person_told(t, tx, &rec.full_view(), now).await?;
        }
    }
    if rec.kind.is_informational() {
        // Events are told once and closed at once: there is nothing to resolve.
        Store::set_incident_state(tx, id, IncidentState::Resolved, now).await?;
    }
    Ok(())
}

/// The storm `storm_id` fires now if it is pending (one of its members fired).
pub(super) async fn storm_fired(
    t: &Teller<'_>,
    tx: &mut WriteTx,
    storm_id: i64,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    match Store::incident(tx, storm_id).await? {
        Some(rec) if rec.state == IncidentState::Pending => pending_storm_fired(t, tx, rec, now).await,
        _ => Ok(()),
    }
}

/// A pending storm fires: it is told as any incident is.
pub(super) async fn pending_storm_fired(
    t: &Teller<'_>,
    tx: &mut WriteTx,
    mut rec: IncidentRecord,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    Store::set_incident_state(tx, rec.id, IncidentState::Firing, now).await?;
    rec.state = IncidentState::Firing;
    rec.fired_at = Some(now);
    tracing::info!(incident = rec.id, about = %rec.view.app_name, "storm fired");
    Box::pin(fired(t, tx, &rec, now, &[])).await
}

/// Sends a firing incident where the delivery pipeline planned: into its receivers' groups, and up its team's
/// escalation ladder.
pub(super) async fn routed(
    settings: &Settings,
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
        group_joined(settings, tx, (&g.receiver, &g.key), rec.id, IncidentState::Firing, now).await?;
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

/// An incident joins the (receiver, key) group as `status` (or its status there changes): the group's next flush
/// is planned again (`routing::grouping::next_flush_at`).
async fn group_joined(
    settings: &Settings,
    tx: &mut WriteTx,
    (receiver, key): (&str, &str),
    incident_id: i64,
    status: IncidentState,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let existing = Store::group_schedule(tx, receiver, key).await?;
    let next = routing::grouping::next_flush_at(existing, &settings.grouping, now);
    Store::add_to_group(tx, receiver, key, incident_id, status, next).await
}

/// An incident resolves: its groups hear of it (receivers that send resolves), and so do the receivers an
/// escalation step reached.
pub(super) async fn resolved(
    settings: &Settings,
    tx: &mut WriteTx,
    rec: &IncidentRecord,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    Store::set_incident_state(tx, rec.id, IncidentState::Resolved, now).await?;
    if rec.state != IncidentState::Firing || !rec.notified {
        return Ok(());
    }
    for (receiver, key) in Store::groups_of(tx, rec.id).await? {
        match settings.receiver(&receiver) {
            Some(rs) if rs.sends_resolved() => {
                group_joined(settings, tx, (&receiver, &key), rec.id, IncidentState::Resolved, now).await?
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
            if settings.receiver(&receiver).is_some_and(|r| r.sends_resolved()) {
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
                finish(settings, tx, &thread, n, now).await?;
            }
        }
    }
    Ok(())
}

/// Queues one [`Action::Acknowledge`] for each thread the firing incidents of `recs` were told in (their
/// groups' messages and the escalation steps sent), about those of them told there, to the receivers that take
/// acknowledgements; returns how many.
pub(super) async fn acknowledged(
    settings: &Settings,
    tx: &mut WriteTx,
    recs: &[IncidentRecord],
    now: DateTime<Utc>,
) -> Result<usize, StoreError> {
    let mut told_in: BTreeMap<(String, String), (Thread, Vec<Incident>)> = BTreeMap::new();
    for rec in recs.iter().filter(|r| r.state == IncidentState::Firing && r.notified) {
        let mut threads = Store::told_threads(tx, rec.id).await?;
        for step in Store::sent_escalations(tx, rec.id).await? {
            threads.extend(step.receivers.into_iter().map(|receiver| Thread::Escalation {
                receiver,
                incident: rec.id,
            }));
        }
        let view = rec.full_view();
        for thread in threads {
            let key = (thread.receiver().to_string(), thread.key());
            let entry = told_in.entry(key).or_insert_with(|| (thread, Vec::new()));
            if !entry.1.iter().any(|v| v.id == view.id) {
                entry.1.push(view.clone());
            }
        }
    }
    let mut told = 0;
    for (thread, views) in told_in.into_values() {
        let Some(ack) = views.first().and_then(|v| v.acknowledged.clone()) else {
            continue;
        };
        if !settings
            .receiver(thread.receiver())
            .is_some_and(|r| r.kind.capabilities().acknowledgements)
        {
            continue;
        }
        let zone = super::links::zone_of(settings, &views[0].team);
        let reason = ack.words(IncidentState::Firing, now, zone);
        let title = format!(
            "Acknowledged by {}: {}",
            ack.by,
            Notification::title_of(Action::Update, &views, now)
        );
        let n = Notification::about(&thread, Action::Acknowledge, title, reason, Body::Incidents(views), now);
        finish(settings, tx, &thread, n, now).await?;
        told += 1;
    }
    Ok(told)
}

/// An escalation step is due (claimed by the scheduler): sent to its receivers and, with `on_call`, to whoever is
/// on call now — or, while a hold applies, postponed to when it may end. Ended without a word when its incident
/// is gone or no longer firing.
pub(super) async fn escalation_step(
    t: &Teller<'_>,
    tx: &mut WriteTx,
    e: EscalationRecord,
    (silences, storms): (&[Silence], &[OpenStorm]),
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let rec = match Store::incident(tx, e.incident_id).await? {
        Some(rec) if rec.state == IncidentState::Firing => rec,
        _ => return Store::finish_escalation(tx, e.id).await,
    };
    let view = rec.full_view();
    let open = Store::open_incidents(tx, &rec.app).await?;
    let candidates = candidates(&open);
    let facts = t.facts(silences, &candidates, storm_of(storms, &rec), now);
    if let Some(why) = delivery::hold(&facts, &Labels::of(&view), Own::of(&rec)) {
        // Not now: the step waits for the silence or the acknowledgement to end (or looks again after
        // group_interval: an unacknowledge, an inhibiting incident resolved) and is sent then if the incident
        // still fires.
        let again = step_again(t.settings, &why, now);
        tracing::info!(incident = rec.id, step = e.step, held = %why.describe(crate::domain::Zone::UTC), "escalation step held back");
        return Store::postpone_escalation(tx, e.id, again).await;
    }
    Store::finish_escalation(tx, e.id).await?;
    for (thread, n) in step_messages(&e, &view, now) {
        finish(t.settings, tx, &thread, n, now).await?;
    }
    if let Some(schedule) = &e.on_call {
        // Whoever is on call now, not when the incident fired.
        let copy = t.calendars.copy(schedule).and_then(|c| c.calendar);
        let step = routing::on_call::Step {
            number: e.step,
            after: std::time::Duration::from_secs(e.after_secs.max(0) as u64),
            schedule,
        };
        for (thread, n) in routing::on_call::reach(t.settings, copy.as_deref(), &step, &view, now) {
            finish(t.settings, tx, &thread, n, now).await?;
        }
    }
    Ok(())
}

/// An escalation step's message to each of its receivers, about the incident `view`.
fn step_messages(e: &EscalationRecord, view: &Incident, now: DateTime<Utc>) -> Vec<(Thread, Notification)> {
    let title = Notification::title_of(Action::Open, std::slice::from_ref(view), now);
    let still = humantime::format_duration(std::time::Duration::from_secs(e.after_secs as u64));
    (e.receivers.iter())
        .map(|receiver| {
            Notification::escalation(
                receiver,
                e.incident_id,
                view,
                format!("Escalated (step {}): {title}", e.step),
                format!("escalation step {} — still firing {still} after it fired", e.step),
                now,
            )
        })
        .collect()
}

/// When a held escalation step looks again: when the hold ends, or after `group_interval` at the latest for a
/// hold that may end sooner (an unacknowledge, an inhibiting incident resolved).
fn step_again(settings: &Settings, why: &Hold, now: DateTime<Utc>) -> DateTime<Utc> {
    let interval = now + chrono::Duration::from_std(settings.grouping.group_interval).unwrap_or_default();
    match why {
        Hold::Silenced { until, .. } => *until,
        Hold::Acknowledged { until: Some(until), .. } => (*until).min(interval),
        Hold::SyncWindow { until, .. } => (*until).min(interval),
        Hold::Muted { until: Some(until), .. } => (*until).min(interval),
        // A storm over holds for storm.window more.
        Hold::Storm {
            ended_at: Some(end), ..
        } => {
            let grace = chrono::Duration::from_std(settings.storm.window).unwrap_or_default();
            (*end + grace).min(interval)
        }
        _ => interval,
    }
}

/// Due groups flushed together (claimed by the scheduler): each group's message, if it sends one now, then one
/// message per Application for each chat receiver ([`one_message_per_application`]), queued.
pub(super) async fn groups_flushed(
    t: &Teller<'_>,
    tx: &mut WriteTx,
    groups: Vec<GroupRecord>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let silences = Store::silences_tx(tx, now).await?;
    let storms = holding_storms(t.settings, tx, now).await?;
    let mut messages = Vec::new();
    for g in groups {
        messages.extend(group_flushed(t, tx, g, (&silences, &storms), now).await?);
    }
    for (thread, n) in one_message_per_application(t.settings, messages) {
        finish(t.settings, tx, &thread, n, now).await?;
    }
    Ok(())
}

/// Flushes one group: what it would send now, if anything (queued by the caller, with the other groups' messages
/// of the same flush). Each firing member is asked the holding stages again: a silenced or inhibited incident is
/// left out and never repeated; an event is told once, then leaves the group.
async fn group_flushed(
    t: &Teller<'_>,
    tx: &mut WriteTx,
    g: GroupRecord,
    (silences, storms): (&[Silence], &[OpenStorm]),
    now: DateTime<Utc>,
) -> Result<Option<(Thread, Notification)>, StoreError> {
    let members = Store::members(tx, g.id).await?;
    let apps: Vec<_> = members.iter().map(|m| m.incident.app.clone()).collect();
    let open = candidates_by_app(&Store::open_incidents_of(tx, &apps).await?);
    let (mut firing, mut held, mut events, mut resolved) = (Vec::new(), 0, Vec::new(), Vec::new());
    for m in &members {
        match (m.status, m.incident.kind.occurrence()) {
            (IncidentState::Firing, Occurrence::Event) if m.dirty => events.push(m),
            (IncidentState::Firing, Occurrence::Condition) => {
                let candidates = open.get(&m.incident.app).map_or(&[][..], Vec::as_slice);
                let labels = m.incident.labels();
                let facts = t.facts(silences, candidates, storm_of(storms, &m.incident), now);
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
    let plan = delivery::dedup(view, t.settings, now);
    let message = plan.send.map(|(action, reason)| {
        let incidents: Vec<Incident> = (firing.iter().chain(&events).chain(&resolved))
            .map(|m| m.incident.full_view())
            .collect();
        group_message(&g, plan.generation, (action, reason), incidents, now)
    });
    // Events are told once: whether or not this flush sent them (it always does), they leave the group.
    let told: Vec<i64> = (members.iter())
        .filter(|m| m.incident.kind.is_informational())
        .map(|m| m.incident.id)
        .collect();
    Store::remove_members(tx, g.id, &told).await?;
    Store::finish_flush(tx, g.id, plan.active, plan.generation, now, plan.next_at).await?;
    Ok(message)
}

/// A group's message about `incidents` for the flush's `(action, reason)`, in the thread of its `generation`.
fn group_message(
    g: &GroupRecord,
    generation: i64,
    (action, reason): (Action, routing::grouping::FlushReason),
    incidents: Vec<Incident>,
    now: DateTime<Utc>,
) -> (Thread, Notification) {
    let thread = Thread::Group {
        receiver: g.receiver.clone(),
        group_key: g.group_key.clone(),
        generation,
    };
    let reason = match shared_resolution(&incidents) {
        Some(why) if action == Action::Resolve => format!("{}: {why}", reason.as_str()),
        _ => reason.as_str().into(),
    };
    let title = Notification::title_of(action, &incidents, now);
    let n = Notification::about(&thread, action, title, reason, Body::Incidents(incidents), now);
    (thread, n)
}

/// Messages of one flush for one chat receiver, each about the same single Application and with the same
/// action, become one message with a line per problem (an Application out of sync with a prune pending is one
/// message, not two in the same second). Ticket and paging receivers keep one notification per incident.
/// The merged message takes the first one's thread: later messages of the others' groups start their own.
fn one_message_per_application(
    settings: &Settings,
    messages: Vec<(Thread, Notification)>,
) -> Vec<(Thread, Notification)> {
    let mut out: Vec<(Thread, Notification)> = Vec::new();
    for (thread, n) in messages {
        let per_incident = settings.receiver(&n.receiver).is_some_and(|r| r.per_incident());
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

/// The resolution every resolved incident of a message shares ("Application deleted"), if they share one.
fn shared_resolution(incidents: &[Incident]) -> Option<&str> {
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

/// An incident fired: the person who started its sync hears of it directly (see `routing::initiator`).
pub(super) async fn person_told(
    t: &Teller<'_>,
    tx: &mut WriteTx,
    view: &Incident,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let direct = routing::initiator::direct(t.settings, view, now);
    queue_direct(t, tx, direct, now).await
}

/// What a changed state tells of its sync: a sync that deployed a new revision is a change event (see
/// `routing::change`), and each new state of a sync of a commit on GitHub a commit status (see
/// `routing::sync_status`). Pure: queued by [`Effect::SyncTold`].
pub(super) fn sync_of(settings: &Settings, prev: &AppState, next: &AppState, now: DateTime<Utc>) -> Effect {
    let told = routing::change::notifications(settings, prev, next, now)
        .into_iter()
        .chain(routing::sync_status::notifications(settings, prev, next, now))
        .collect();
    Effect::SyncTold(told)
}

/// A sync's change events and commit statuses queued, each once.
async fn sync_told(
    t: &Teller<'_>,
    tx: &mut WriteTx,
    told: Vec<(Thread, Notification)>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut changes = Vec::new();
    for (thread, n) in told {
        // Queued already (by another replica, or before a restart that lost the writer's memory): once only.
        if !Store::has_thread(tx, &thread.key()).await? {
            changes.push((thread, n));
        }
    }
    queue_direct(t, tx, changes, now).await
}

/// Queues deliveries that go past the teams' groups, and rings the outbox worker: no flush will for these.
async fn queue_direct(
    t: &Teller<'_>,
    tx: &mut WriteTx,
    ns: Vec<(Thread, Notification)>,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let queued = !ns.is_empty();
    for (thread, n) in ns {
        finish(t.settings, tx, &thread, n, now).await?;
    }
    if queued {
        t.wake_outbox.notify_one();
    }
    Ok(())
}
