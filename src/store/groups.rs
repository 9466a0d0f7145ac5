//! Notification groups (`notify_groups`) and their members (`group_members`): joining a group at the flush its
//! caller planned (the timing rule is `routing::grouping::next_flush_at`, asked by `pipeline::notify` with what
//! [`Store::group_schedule`] reads), claiming due groups, and recording a flush.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::incidents::{INCIDENT_COLUMNS, incident_from_row};
use super::{IncidentRecord, Store, StoreError, WriteTx, parse_column};
use crate::clock::{from_millis, to_millis};
use crate::domain::{IncidentState, Thread};
use crate::routing::grouping::GroupSchedule;

/// A notification group row.
#[derive(Debug, Clone)]
pub struct GroupRecord {
    pub id: i64,
    pub receiver: String,
    pub group_key: String,
    pub active: bool,
    pub generation: i64,
    pub last_flush_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
pub struct MemberRecord {
    pub incident: IncidentRecord,
    /// `Firing` or `Resolved`: what the group's next message says of this incident.
    pub status: IncidentState,
    pub dirty: bool,
}

fn group_from_row(r: &AnyRow) -> Result<GroupRecord, StoreError> {
    Ok(GroupRecord {
        id: r.try_get("id")?,
        receiver: r.try_get("receiver")?,
        group_key: r.try_get("group_key")?,
        active: r.try_get::<i64, _>("active")? != 0,
        generation: r.try_get("generation")?,
        last_flush_at: r.try_get::<Option<i64>, _>("last_flush_at")?.map(from_millis),
    })
}

/// A member row of [`Store::members`]: the incident's columns, then `member_status` and `member_dirty`.
fn member_from_row(r: &AnyRow) -> Result<MemberRecord, StoreError> {
    Ok(MemberRecord {
        incident: incident_from_row(r)?,
        status: parse_column("group member status", r.try_get("member_status")?, IncidentState::parse)?,
        dirty: r.try_get::<i64, _>("member_dirty")? != 0,
    })
}

impl Store {
    /// What the (receiver, key) group says of its flushes, for `routing::grouping::next_flush_at`; `None` when
    /// there is no such group yet.
    pub async fn group_schedule(
        tx: &mut WriteTx,
        receiver: &str,
        key: &str,
    ) -> Result<Option<GroupSchedule>, StoreError> {
        let row =
            q!("SELECT active, next_flush_at, last_flush_at FROM notify_groups WHERE receiver = $1 AND group_key = $2")
                .bind(receiver)
                .bind(key)
                .fetch_optional(&mut *tx.tx)
                .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        Ok(Some(GroupSchedule {
            active: row.try_get::<i64, _>("active")? != 0,
            last_flush_at: row.try_get::<Option<i64>, _>("last_flush_at")?.map(from_millis),
            next_flush_at: row.try_get::<Option<i64>, _>("next_flush_at")?.map(from_millis),
        }))
    }

    /// Adds (or updates) an incident in the (receiver, key) group, creating the group if need be, and plans the
    /// group's next flush at `next_flush_at` (the caller's, from `routing::grouping::next_flush_at` and
    /// [`Store::group_schedule`] in the same transaction).
    pub async fn add_to_group(
        tx: &mut WriteTx,
        receiver: &str,
        key: &str,
        incident_id: i64,
        status: IncidentState,
        next_flush_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let row = q!(
            "INSERT INTO notify_groups (receiver, group_key, active, generation, next_flush_at) VALUES ($1, $2, 0, 0, $3) \
             ON CONFLICT (receiver, group_key) DO UPDATE SET next_flush_at = excluded.next_flush_at RETURNING id"
        )
        .bind(receiver)
        .bind(key)
        .bind(to_millis(next_flush_at))
        .fetch_one(&mut *tx.tx)
        .await?;
        let group_id: i64 = row.try_get("id")?;
        let query = q!(
            "INSERT INTO group_members (group_id, incident_id, status, dirty) VALUES ($1, $2, $3, 1) \
            ON CONFLICT (group_id, incident_id) DO UPDATE SET status = excluded.status, dirty = 1"
        )
        .bind(group_id)
        .bind(incident_id)
        .bind(status.as_str());
        tx.exec(query).await?;
        Ok(())
    }

    /// The groups an incident is in, with their receivers.
    pub async fn groups_of(tx: &mut WriteTx, incident_id: i64) -> Result<Vec<(String, String)>, StoreError> {
        let query = q!(
            "SELECT g.receiver, g.group_key FROM notify_groups g JOIN group_members m ON m.group_id = g.id \
                       WHERE m.incident_id = $1"
        )
        .bind(incident_id);
        tx.rows(query, |r| Ok((r.try_get("receiver")?, r.try_get("group_key")?)))
            .await
    }

    /// The threads a firing incident was told in: the current one of each group it is a member of whose current
    /// message was sent.
    pub async fn told_threads(tx: &mut WriteTx, incident_id: i64) -> Result<Vec<Thread>, StoreError> {
        let query = q!(
            "SELECT g.receiver, g.group_key, g.generation FROM notify_groups g JOIN group_members m \
             ON m.group_id = g.id WHERE m.incident_id = $1 AND g.active = 1 ORDER BY g.receiver"
        )
        .bind(incident_id);
        tx.rows(query, |r| {
            let receiver: String = r.try_get("receiver")?;
            let key: String = r.try_get("group_key")?;
            let generation: i64 = r.try_get("generation")?;
            Ok(Thread::Group {
                receiver,
                group_key: key,
                generation,
            })
        })
        .await
    }

    pub async fn remove_member(tx: &mut WriteTx, incident_id: i64, receiver: &str) -> Result<(), StoreError> {
        let query = q!("DELETE FROM group_members WHERE incident_id = $1 AND group_id IN \
            (SELECT id FROM notify_groups WHERE receiver = $2)")
        .bind(incident_id)
        .bind(receiver);
        tx.exec(query).await?;
        Ok(())
    }

    /// Removes the incidents `ids` from one group (events, once told).
    pub async fn remove_members(tx: &mut WriteTx, group_id: i64, ids: &[i64]) -> Result<(), StoreError> {
        for id in ids {
            let query = q!("DELETE FROM group_members WHERE group_id = $1 AND incident_id = $2")
                .bind(group_id)
                .bind(*id);
            tx.exec(query).await?;
        }
        Ok(())
    }

    /// Claims the groups whose flush is due at `now` (row-locked, see `WriteTx::claim_due`), soonest first.
    pub async fn claim_due_groups(
        tx: &mut WriteTx,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<GroupRecord>, StoreError> {
        let pick = "SELECT id, receiver, group_key, active, generation, last_flush_at FROM notify_groups \
                    WHERE next_flush_at IS NOT NULL AND next_flush_at <= $1 ORDER BY next_flush_at";
        tx.rows(tx.claim_due(pick, now, limit), group_from_row).await
    }

    pub async fn members(tx: &mut WriteTx, group_id: i64) -> Result<Vec<MemberRecord>, StoreError> {
        let cols: String = INCIDENT_COLUMNS
            .split(", ")
            .map(|c| format!("i.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ");
        let query = q!(format!(
            "SELECT {cols}, m.status AS member_status, m.dirty AS member_dirty FROM group_members m \
             JOIN incidents i ON i.id = m.incident_id WHERE m.group_id = $1 ORDER BY i.namespace, i.name, i.instance, i.id"
        ))
        .bind(group_id);
        tx.rows(query, member_from_row).await
    }

    /// Records a flush: clears dirty flags, drops resolved members, sets the thread state and the next flush.
    pub async fn finish_flush(
        tx: &mut WriteTx,
        group_id: i64,
        active: bool,
        generation: i64,
        now: DateTime<Utc>,
        next_flush_at: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        tx.exec(q!("DELETE FROM group_members WHERE group_id = $1 AND status = 'resolved'").bind(group_id))
            .await?;
        tx.exec(q!("UPDATE group_members SET dirty = 0 WHERE group_id = $1").bind(group_id))
            .await?;
        let query = q!(
            "UPDATE notify_groups SET active = $1, generation = $2, last_flush_at = $3, next_flush_at = $4 WHERE id = $5"
        )
        .bind(active as i64)
        .bind(generation)
        .bind(to_millis(now))
        .bind(next_flush_at.map(to_millis))
        .bind(group_id);
        tx.exec(query).await?;
        Ok(())
    }
}
