//! When the next timer falls due: the earliest of the pending incidents' `fire_at`, the groups' `next_flush_at` and
//! the escalation steps' `due_at`. For `herald replay`, which moves its clock from one timer to the next instead of
//! in fixed steps (a 13 s rule fires at +13 s, not at the next 30 s step). Each is answered from its `*_due` index.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{Store, StoreError};
use crate::clock::from_millis;

impl Store {
    /// The earliest time a pending incident, a group flush or an escalation step is due, if any is.
    pub async fn next_timer(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let mut next: Option<i64> = None;
        for sql in [
            "SELECT MIN(fire_at) AS t FROM incidents WHERE state = 'pending'",
            "SELECT MIN(next_flush_at) AS t FROM notify_groups WHERE next_flush_at IS NOT NULL",
            "SELECT MIN(due_at) AS t FROM escalations WHERE done = 0",
        ] {
            let row = q!(sql).fetch_one(&self.pool).await?;
            if let Some(t) = row.try_get::<Option<i64>, _>("t")? {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        }
        Ok(next.map(from_millis))
    }
}
