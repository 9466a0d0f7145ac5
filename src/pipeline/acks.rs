//! Acknowledgements: someone takes an incident (`ack`) or gives it back (`unack`). The acknowledgement is kept on
//! the incident's row; the delivery pipeline's acknowledge stage reads it at every send (no repeats, no further
//! escalation step while it holds). Taking an incident also tells, through the outbox, the receivers that take
//! acknowledgements in every thread the incident was told in: PagerDuty acknowledges, a ticket gets a comment, the
//! Slack bot's message is edited — in the same transaction as the acknowledgement, so neither is lost.

use super::{Pipeline, PipelineError};
use crate::domain::{Acknowledgement, IncidentState};
use crate::store::{IncidentRecord, Store};

/// What an acknowledge or unacknowledge did.
#[derive(Debug, Clone, PartialEq)]
pub enum AckOutcome {
    /// Done: the incident as it is now.
    Done(Box<IncidentRecord>),
    NotFound,
    /// A resolved incident: there is nothing to take; a new occurrence starts unacknowledged.
    Resolved(Box<IncidentRecord>),
}

impl Pipeline {
    /// `ack` of incident `id`: recorded (replacing an earlier one), and told where the incident was told.
    pub async fn acknowledge(&self, id: i64, ack: Acknowledgement) -> Result<AckOutcome, PipelineError> {
        let core = self.core();
        let now = core.clock.now();
        let mut tx = core.store.begin().await?;
        let Some(mut rec) = Store::incident(&mut tx, id).await? else {
            return Ok(AckOutcome::NotFound);
        };
        if rec.state == IncidentState::Resolved {
            return Ok(AckOutcome::Resolved(Box::new(rec)));
        }
        Store::set_acknowledgement(&mut tx, id, Some(&ack)).await?;
        rec.ack = Some(ack);
        let told = super::notify::acknowledged(&core.settings, &mut tx, std::slice::from_ref(&rec), now).await?;
        tx.commit().await?;
        tracing::info!(incident = id, app = %rec.app, by = %rec.ack.as_ref().map_or("", |a| a.by.as_str()), told, "incident acknowledged");
        if told > 0 {
            core.wake_outbox.notify_one();
        }
        Ok(AckOutcome::Done(Box::new(rec)))
    }

    /// `ack` of every incident of `ids` that is still firing or pending, in one transaction, told once per thread
    /// (a group's message hears "Acknowledged by bob: 40 problems", not forty replies). Answers the incidents
    /// acknowledged, and how many of `ids` were resolved or gone.
    pub async fn acknowledge_all(
        &self,
        ids: &[i64],
        ack: Acknowledgement,
    ) -> Result<(Vec<IncidentRecord>, usize), PipelineError> {
        let core = self.core();
        let now = core.clock.now();
        let mut tx = core.store.begin().await?;
        let mut done = Vec::new();
        for &id in ids {
            let Some(mut rec) = Store::incident(&mut tx, id)
                .await?
                .filter(|r| r.state != IncidentState::Resolved)
            else {
                continue;
            };
            Store::set_acknowledgement(&mut tx, id, Some(&ack)).await?;
            rec.ack = Some(ack.clone());
            done.push(rec);
        }
        let told = super::notify::acknowledged(&core.settings, &mut tx, &done, now).await?;
        tx.commit().await?;
        tracing::info!(incidents = done.len(), by = %ack.by, told, "incidents acknowledged together");
        if told > 0 {
            core.wake_outbox.notify_one();
        }
        let gone = ids.len() - done.len();
        Ok((done, gone))
    }

    /// `unack` of incident `id`: the acknowledgement is removed; repeats and escalation resume at their next look
    /// (within `grouping.group_interval`).
    pub async fn unacknowledge(&self, id: i64) -> Result<AckOutcome, PipelineError> {
        let core = self.core();
        let mut tx = core.store.begin().await?;
        let Some(mut rec) = Store::incident(&mut tx, id).await? else {
            return Ok(AckOutcome::NotFound);
        };
        if rec.state == IncidentState::Resolved {
            return Ok(AckOutcome::Resolved(Box::new(rec)));
        }
        Store::set_acknowledgement(&mut tx, id, None).await?;
        tx.commit().await?;
        tracing::info!(incident = id, app = %rec.app, "incident no longer acknowledged");
        rec.ack = None;
        Ok(AckOutcome::Done(Box::new(rec)))
    }
}
