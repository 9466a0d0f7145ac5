//! Escalation steps (`escalations`): the receivers a firing incident reaches after a delay, claimed when due and
//! cancelled when the incident resolves.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Engine, Store, StoreError, WriteTx, decode, encode, skip_locked};
use crate::clock::to_millis;

#[derive(Debug, Clone)]
pub struct EscalationRecord {
    pub id: i64,
    pub incident_id: i64,
    pub step: i64,
    pub after_secs: i64,
    pub receivers: Vec<String>,
}

fn escalation_from_row(r: &AnyRow) -> Result<EscalationRecord, StoreError> {
    Ok(EscalationRecord {
        id: r.try_get("id")?,
        incident_id: r.try_get("incident_id")?,
        step: r.try_get("step")?,
        after_secs: r.try_get("after_secs")?,
        receivers: decode(&r.try_get::<String, _>("receivers")?)?,
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
    ) -> Result<(), StoreError> {
        q!("INSERT INTO escalations (incident_id, step, after_secs, due_at, receivers) VALUES ($1, $2, $3, $4, $5)")
            .bind(incident_id)
            .bind(step)
            .bind(after_secs)
            .bind(to_millis(due_at))
            .bind(encode(&receivers))
            .execute(&mut *tx.tx)
            .await?;
        Ok(())
    }

    pub async fn claim_due_escalations(
        tx: &mut WriteTx,
        engine: Engine,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<EscalationRecord>, StoreError> {
        let lock = skip_locked(engine);
        let rows = q!(format!(
            "SELECT id, incident_id, step, after_secs, receivers FROM escalations WHERE done = 0 AND due_at <= $1 \
             ORDER BY due_at LIMIT $2{lock}"
        ))
        .bind(to_millis(now))
        .bind(limit)
        .fetch_all(&mut *tx.tx)
        .await?;
        rows.iter().map(escalation_from_row).collect()
    }

    pub async fn finish_escalation(tx: &mut WriteTx, id: i64) -> Result<(), StoreError> {
        q!("UPDATE escalations SET done = 1 WHERE id = $1")
            .bind(id)
            .execute(&mut *tx.tx)
            .await?;
        Ok(())
    }

    /// Cancels the steps not reached yet; returns the receivers of the steps already sent.
    pub async fn cancel_escalations(tx: &mut WriteTx, incident_id: i64) -> Result<Vec<EscalationRecord>, StoreError> {
        q!("DELETE FROM escalations WHERE incident_id = $1 AND done = 0")
            .bind(incident_id)
            .execute(&mut *tx.tx)
            .await?;
        let rows = q!("SELECT id, incident_id, step, after_secs, receivers FROM escalations WHERE incident_id = $1")
            .bind(incident_id)
            .fetch_all(&mut *tx.tx)
            .await?;
        rows.iter().map(escalation_from_row).collect()
    }
}
