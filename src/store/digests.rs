//! Digest slots (`digests`): one row per (team, scheduled instant), claimed with a lease inside the transaction
//! that queues the digest's deliveries and marked `sent` (or `skipped`) in it, so each slot is sent once whatever
//! the number of replicas or restarts.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Store, StoreError, WriteTx, parse_column};
use crate::clock::{from_millis, to_millis};

/// Where a digest slot stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SlotState {
    /// A replica holds it until `lease_until` (only seen inside that replica's transaction, or after a crash).
    Claimed,
    /// Its deliveries are queued in the outbox.
    Sent,
    /// Nothing to report and `when_empty: skip`: nothing sent.
    Empty,
    /// Missed by more than `catch_up` (Herald was down): not sent.
    Skipped,
}

impl SlotState {
    pub fn as_str(self) -> &'static str {
        match self {
            SlotState::Claimed => "claimed",
            SlotState::Sent => "sent",
            SlotState::Empty => "empty",
            SlotState::Skipped => "skipped",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [
            SlotState::Claimed,
            SlotState::Sent,
            SlotState::Empty,
            SlotState::Skipped,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DigestSlot {
    pub team: String,
    pub slot_at: DateTime<Utc>,
    pub state: SlotState,
    pub claimed_by: String,
    pub lease_until: DateTime<Utc>,
    pub sent_at: Option<DateTime<Utc>>,
}

const SLOT_COLUMNS: &str = "team, slot_at, state, claimed_by, lease_until, sent_at";

fn slot_from_row(r: &AnyRow) -> Result<DigestSlot, StoreError> {
    Ok(DigestSlot {
        team: r.try_get("team")?,
        slot_at: from_millis(r.try_get("slot_at")?),
        state: parse_column("digest slot state", r.try_get("state")?, SlotState::parse)?,
        claimed_by: r.try_get("claimed_by")?,
        lease_until: from_millis(r.try_get("lease_until")?),
        sent_at: r.try_get::<Option<i64>, _>("sent_at")?.map(from_millis),
    })
}

impl Store {
    /// The slot's row, if any replica has claimed, sent or skipped it.
    pub async fn digest_slot(&self, team: &str, slot_at: DateTime<Utc>) -> Result<Option<DigestSlot>, StoreError> {
        let row = q!(format!(
            "SELECT {SLOT_COLUMNS} FROM digests WHERE team = $1 AND slot_at = $2"
        ))
        .bind(team)
        .bind(to_millis(slot_at))
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(slot_from_row).transpose()
    }

    /// The team's slots, the newest first (at most `limit`).
    pub async fn digest_slots(&self, team: &str, limit: i64) -> Result<Vec<DigestSlot>, StoreError> {
        let rows = q!(format!(
            "SELECT {SLOT_COLUMNS} FROM digests WHERE team = $1 ORDER BY slot_at DESC LIMIT $2"
        ))
        .bind(team)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(slot_from_row).collect()
    }

    /// Claims the slot for `owner` until `lease_until`: inserts its row, or takes over a claim whose lease ran out
    /// (a replica that died holding it). Returns whether this call got it. The row's key is (team, slot_at), so on
    /// PostgreSQL a second replica's insert waits for the first one's transaction and then finds the slot taken.
    pub async fn claim_digest_slot(
        tx: &mut WriteTx,
        team: &str,
        slot_at: DateTime<Utc>,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let query = q!("INSERT INTO digests (team, slot_at, state, claimed_by, lease_until) \
                         VALUES ($1, $2, 'claimed', $3, $4) \
                         ON CONFLICT (team, slot_at) DO UPDATE SET claimed_by = excluded.claimed_by, \
                         lease_until = excluded.lease_until \
                         WHERE digests.state = 'claimed' AND digests.lease_until <= $5")
        .bind(team)
        .bind(to_millis(slot_at))
        .bind(owner)
        .bind(to_millis(lease_until))
        .bind(to_millis(now));
        Ok(tx.exec(query).await? == 1)
    }

    /// Records how a claimed slot ended (`sent` or `skipped`), in the claim's transaction.
    pub async fn finish_digest_slot(
        tx: &mut WriteTx,
        team: &str,
        slot_at: DateTime<Utc>,
        state: SlotState,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let query = q!("UPDATE digests SET state = $1, sent_at = $2, lease_until = 0 WHERE team = $3 AND slot_at = $4")
            .bind(state.as_str())
            .bind((state == SlotState::Sent).then(|| to_millis(now)))
            .bind(team)
            .bind(to_millis(slot_at));
        tx.exec(query).await?;
        Ok(())
    }
}
