//! Acknowledgements: someone takes an incident (`ack`) or gives it back (`unack`). The acknowledgement is kept on
//! the incident's row; the delivery pipeline's acknowledge stage reads it at every send (no repeats, no further
//! escalation step while it holds). Taking an incident also tells, through the outbox, the receivers that take
//! acknowledgements in every thread the incident was told in: PagerDuty acknowledges, a ticket gets a comment, the
//! Slack bot's message is edited — in the same transaction as the acknowledgement, so neither is lost.

use chrono::{DateTime, Utc};

use super::{Core, Pipeline, PipelineError};
use crate::domain::{Acknowledgement, Action, IncidentState, Notification, Thread};
use crate::store::{IncidentRecord, Store, StoreError, WriteTx};

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
        let told = core.tell_acknowledged(&mut tx, &rec, now).await?;
        tx.commit().await?;
        tracing::info!(incident = id, app = %rec.app, by = %rec.ack.as_ref().map_or("", |a| a.by.as_str()), told, "incident acknowledged");
        if told > 0 {
            core.wake_outbox.notify_one();
        }
        Ok(AckOutcome::Done(Box::new(rec)))
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

impl Core {
    /// Queues an [`Action::Acknowledge`] for each thread a firing incident was told in (its groups' messages and
    /// the escalation steps sent), to the receivers that take acknowledgements; returns how many.
    async fn tell_acknowledged(
        &self,
        tx: &mut WriteTx,
        rec: &IncidentRecord,
        now: DateTime<Utc>,
    ) -> Result<usize, StoreError> {
        if rec.state != IncidentState::Firing || !rec.notified {
            return Ok(0);
        }
        let mut threads = Store::told_threads(tx, rec.id).await?;
        for step in Store::sent_escalations(tx, rec.id).await? {
            threads.extend(step.receivers.into_iter().map(|receiver| Thread::Escalation {
                receiver,
                incident: rec.id,
            }));
        }
        threads.sort_by_key(|t| (t.receiver().to_string(), t.key()));
        threads.dedup();
        let view = rec.full_view();
        let Some(ack) = &view.acknowledged else {
            return Ok(0);
        };
        let reason = ack.words(view.state, now);
        let title = format!(
            "Acknowledged by {}: {}",
            ack.by,
            Notification::title_of(Action::Update, std::slice::from_ref(&view), now)
        );
        let mut told = 0;
        for thread in threads {
            if !self
                .settings
                .receiver(thread.receiver())
                .is_some_and(|r| r.kind.capabilities().acknowledgements)
            {
                continue;
            }
            let n = Notification::about(
                &thread,
                Action::Acknowledge,
                title.clone(),
                reason.clone(),
                vec![view.clone()],
                now,
            );
            self.send(tx, &thread, n, now).await?;
            told += 1;
        }
        Ok(told)
    }
}
