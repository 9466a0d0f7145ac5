//! Escalation steps (`escalations`): the receivers a firing incident reaches after a delay, claimed when due and
//! cancelled when the incident resolves.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Store, StoreError, WriteTx, decode, encode};
use crate::clock::to_millis;

#[derive(Debug, Clone)]
pub struct EscalationRecord {
    pub id: i64,
    pub incident_id: i64,
    pub step: i64,
    pub after_secs: i64,
    pub receivers: Vec<String>,
    /// The schedule whose person on call the step reaches (`escalation[].on_call`).
    pub on_call: Option<String>,
}

/// The columns [`escalation_from_row`] reads.
const ESCALATION_COLUMNS: &str = "id, incident_id, step, after_secs, receivers, on_call";

fn escalation_from_row(r: &AnyRow) -> Result<EscalationRecord, StoreError> {
    Ok(EscalationRecord {
        id: r.try_get("id")?,
        incident_id: r.try_get("incident_id")?,
        step: r.try_get("step")?,
        after_secs: r.try_get("after_secs")?,
        receivers: decode(&r.try_get::<String, _>("receivers")?)?,
        on_call: r.try_get("on_call")?,
    })
}

impl Store {
    pub async fn add_escalation(
        tx: &mut WriteTx,
        incident_id: i64,
        step: i64,
        after_secs: i64,
        due_at: DateTime<Utc>,
        receivers: &[String],
        on_call: Option<&str>,
    ) -> Result<(), StoreError> {
        let query = q!(
            "INSERT INTO escalations (incident_id, step, after_secs, due_at, receivers, on_call) \
             VALUES ($1, $2, $3, $4, $5, $6)"
        )
        .bind(incident_id)
        .bind(step)
        .bind(after_secs)
        .bind(to_millis(due_at))
        .bind(encode(&receivers))
        .bind(on_call);
        tx.exec(query).await?;
        Ok(())
    }

    /// Claims the steps due at `now` (row-locked, see `WriteTx::claim_due`), soonest first.
    pub async fn claim_due_escalations(
        tx: &mut WriteTx,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<EscalationRecord>, StoreError> {
        let pick =
            format!("SELECT {ESCALATION_COLUMNS} FROM escalations WHERE done = 0 AND due_at <= $1 ORDER BY due_at");
        tx.rows(tx.claim_due(&pick, now, limit), escalation_from_row).await
    }

    pub async fn finish_escalation(tx: &mut WriteTx, id: i64) -> Result<(), StoreError> {
        tx.exec(q!("UPDATE escalations SET done = 1 WHERE id = $1").bind(id))
            .await?;
        Ok(())
    }

    /// A step due now that is held back (silenced, inhibited): due again at `at`.
    pub async fn postpone_escalation(tx: &mut WriteTx, id: i64, at: DateTime<Utc>) -> Result<(), StoreError> {
        tx.exec(
            q!("UPDATE escalations SET due_at = $1 WHERE id = $2")
                .bind(to_millis(at))
                .bind(id),
        )
        .await?;
        Ok(())
    }

    /// Cancels the steps not reached yet; returns the receivers of the steps already sent.
    pub async fn cancel_escalations(tx: &mut WriteTx, incident_id: i64) -> Result<Vec<EscalationRecord>, StoreError> {
        tx.exec(q!("DELETE FROM escalations WHERE incident_id = $1 AND done = 0").bind(incident_id))
            .await?;
        let sent = q!(format!(
            "SELECT {ESCALATION_COLUMNS} FROM escalations WHERE incident_id = $1"
        ))
        .bind(incident_id);
        tx.rows(sent, escalation_from_row).await
    }

    /// The incident's next escalation step not yet sent, with when it is due.
    pub async fn next_escalation(
        &self,
        incident_id: i64,
    ) -> Result<Option<(EscalationRecord, DateTime<Utc>)>, StoreError> {
        let row = q!(format!(
            "SELECT {ESCALATION_COLUMNS}, due_at FROM escalations WHERE incident_id = $1 AND done = 0 \
             ORDER BY due_at, step LIMIT 1"
        ))
        .bind(incident_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok((
                escalation_from_row(&r)?,
                crate::clock::from_millis(r.try_get("due_at")?),
            ))
        })
        .transpose()
    }

    /// The escalation steps of an incident already sent.
    pub async fn sent_escalations(tx: &mut WriteTx, incident_id: i64) -> Result<Vec<EscalationRecord>, StoreError> {
        let sent = q!(format!(
            "SELECT {ESCALATION_COLUMNS} FROM escalations WHERE incident_id = $1 AND done = 1 ORDER BY step"
        ))
        .bind(incident_id);
        tx.rows(sent, escalation_from_row).await
    }
}
