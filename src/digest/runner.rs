//! Sending due digests, exactly once: at each scheduler tick, each team's latest slot that has no row yet is
//! claimed, and in the same transaction its deliveries (one per digest receiver) are queued in the outbox and the
//! slot marked sent. A crash before the commit leaves nothing (the slot is sent at restart); after it, the outbox
//! delivers what was queued. A slot found more than `catch_up` late (Herald was down) is recorded as skipped.

use chrono::{DateTime, Utc};

use super::Schedule;
use super::content::{Frame, Inputs, content};
use crate::configuration::{DigestSettings, Settings, TeamSettings, WhenEmpty};
use crate::domain::Digest;
use crate::domain::{Action, Body, DeliveryState, IncidentState, Notification, Thread};
use crate::store::{AppFilter, IncidentFilter, SlotState, Store, StoreError};

/// How many rows of each kind a digest reads at most: a team with more has bigger problems than a long digest.
const READ_LIMIT: i64 = 2000;
/// The same for the default team's digest, which reads every team's rows to find those of unconfigured teams.
const ADOPTING_READ_LIMIT: i64 = 20_000;

/// How long a claim holds a slot: the claim and its deliveries commit together, so only a replica that died
/// inside that transaction leaves a claim behind (on PostgreSQL the transaction is rolled back anyway).
const LEASE: chrono::Duration = chrono::Duration::minutes(5);

/// Reads what a digest of `team` is made of, through the store's API. The default team's digest also covers the
/// teams Herald has no settings for ([`Frame::covers`]): it reads every team's rows, and the content keeps those.
pub async fn inputs(store: &Store, settings: &Settings, team: &str, now: DateTime<Utc>) -> Result<Inputs, StoreError> {
    let (only, limit) = match team == settings.ownership.default_team {
        true => (None, ADOPTING_READ_LIMIT),
        false => (Some(team.to_string()), READ_LIMIT),
    };
    let apps = store
        .apps(&AppFilter {
            team: only.clone(),
            limit,
            ..Default::default()
        })
        .await?;
    let incidents = store
        .incidents(&IncidentFilter {
            state: Some(IncidentState::Firing),
            team: only,
            limit,
            ..Default::default()
        })
        .await?;
    Ok(Inputs {
        apps,
        incidents: incidents.iter().map(|r| r.full_view()).collect(),
        silences: store.silences(false, now).await?,
        dead: store.outbox(Some(DeliveryState::Dead), READ_LIMIT, None).await?,
    })
}

/// The digest `team` would get at `now` (`herald digest`); `None` when the team has no such name.
pub async fn preview(
    store: &Store,
    settings: &Settings,
    team: &str,
    now: DateTime<Utc>,
) -> Result<Option<Digest>, StoreError> {
    let Some(t) = settings.teams.get(team) else {
        return Ok(None);
    };
    let plan = t.digest.as_ref().and_then(|d| d.plan().ok());
    let receivers = team_receivers(t);
    let frame = frame(settings, (team, t, &receivers), now, plan.as_ref());
    Ok(Some(content(&frame, &inputs(store, settings, team, now).await?)))
}

/// Every receiver of the team: its own, its escalation steps' and its digest's (their dead deliveries are listed).
fn team_receivers(t: &TeamSettings) -> Vec<String> {
    let mut out = t.receivers.clone();
    out.extend(t.escalation.iter().flat_map(|s| s.receivers.iter().cloned()));
    out.extend(t.digest.iter().flat_map(|d| d.receivers.iter().flatten().cloned()));
    out.sort();
    out.dedup();
    out
}

fn frame<'a>(
    settings: &'a Settings,
    (team, t, receivers): (&'a str, &'a TeamSettings, &'a [String]),
    now: DateTime<Utc>,
    plan: Option<&(Schedule, chrono_tz::Tz)>,
) -> Frame<'a> {
    Frame {
        team,
        timezone: t.digest.as_ref().map_or("UTC", |d| d.timezone.as_str()),
        receivers,
        argocd: &settings.argocd,
        public_url: settings.server.public_url.as_deref(),
        now,
        next: plan.and_then(|(s, tz)| s.next_after(*tz, now)),
        adopts_unknown_teams: (team == settings.ownership.default_team).then_some(&settings.teams),
    }
}

/// Sends every team's due digest slot once; returns how many deliveries were queued.
pub async fn send_due(store: &Store, settings: &Settings, now: DateTime<Utc>) -> Result<usize, StoreError> {
    let mut queued = 0;
    for (team, t) in &settings.teams {
        let Some(d) = &t.digest else { continue };
        // check-config refused what does not parse; a reload that let it through sends nothing.
        let Ok(plan) = d.plan() else { continue };
        let Some(slot) = plan.0.last_at_or_before(plan.1, now) else {
            continue;
        };
        if store.digest_slot(team, slot).await?.is_some_and(|s| held(&s, now)) {
            continue;
        }
        queued += send_slot(store, settings, (team, t, d), &plan, slot, now).await?;
    }
    Ok(queued)
}

/// Whether a slot's row means it is done or being sent (a claim whose lease ran out can be taken over).
fn held(s: &crate::store::DigestSlot, now: DateTime<Utc>) -> bool {
    s.state != SlotState::Claimed || s.lease_until > now
}

/// Claims `slot` and, in the same transaction, queues its deliveries (or records it skipped or empty).
async fn send_slot(
    store: &Store,
    settings: &Settings,
    (team, t, d): (&str, &TeamSettings, &DigestSettings),
    plan: &(Schedule, chrono_tz::Tz),
    slot: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<usize, StoreError> {
    let owner = format!("digest-{}", uuid::Uuid::new_v4().simple());
    let late = now - slot;
    let catch_up = chrono::Duration::from_std(d.catch_up).unwrap_or(chrono::Duration::MAX);
    if late > catch_up {
        // A team with no slot on record has a digest just added: its last slot was never due, nothing was missed.
        let new = store.digest_slots(team, 1).await?.is_empty();
        let mut tx = store.begin().await?;
        if Store::claim_digest_slot(&mut tx, team, slot, &owner, now, now + LEASE).await? {
            Store::finish_digest_slot(&mut tx, team, slot, SlotState::Skipped, now).await?;
            if new {
                tracing::info!(team, slot = %slot, "digest added: the first one goes at the next slot");
            } else {
                metrics::counter!("herald_digest_slots_total", "state" => "skipped").increment(1);
                tracing::warn!(
                    team, slot = %slot, late = %crate::domain::notification::duration_words(late),
                    "digest slot missed by more than catch_up (Herald was down): skipped"
                );
            }
        }
        tx.commit().await?;
        return Ok(0);
    }
    // Read before the claim, outside the write transaction (SQLite has one writer).
    let receivers = team_receivers(t);
    let digest = content(
        &frame(settings, (team, t, &receivers), now, Some(plan)),
        &inputs(store, settings, team, now).await?,
    );
    let mut tx = store.begin().await?;
    if !Store::claim_digest_slot(&mut tx, team, slot, &owner, now, now + LEASE).await? {
        tx.commit().await?;
        return Ok(0); // another replica sent it meanwhile
    }
    let receivers = d.receivers_of(t, &|r: &str| {
        settings.receiver(r).is_some_and(|rs| rs.capabilities().digest)
    });
    let send = !digest.is_empty() || d.when_empty == WhenEmpty::AllGreen;
    if send {
        for receiver in &receivers {
            let thread = Thread::Digest {
                receiver: receiver.clone(),
                team: team.to_string(),
                slot,
            };
            let n = Notification::about(
                &thread,
                Action::Digest,
                digest.title(),
                format!("the scheduled digest ({}, {})", d.schedule, d.timezone),
                Body::Digest(Box::new(digest.clone())),
                now,
            );
            Store::queue(&mut tx, &thread, &n, now).await?;
        }
    }
    let state = if send { SlotState::Sent } else { SlotState::Empty };
    Store::finish_digest_slot(&mut tx, team, slot, state, now).await?;
    tx.commit().await?;
    metrics::counter!("herald_digest_slots_total", "state" => state.as_str()).increment(1);
    tracing::info!(team, slot = %slot, state = state.as_str(), receivers = receivers.len(), "digest slot done");
    Ok(if send { receivers.len() } else { 0 })
}
