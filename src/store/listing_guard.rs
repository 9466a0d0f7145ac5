//! The Argo CD listing's held drop (`listing_guard`): the Applications a listing lacked when that was more than
//! `argocd.api.max_drop_share` of those stored. One row at most per Argo CD instance; the next listing of that
//! instance, on any replica, reads it to decide whether it agrees.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{Store, StoreError, decode, encode};
use crate::argocd::AppId;
use crate::clock::{from_millis, to_millis};

/// The row of an instance's held drop: the default instance's keeps the name it had before instances existed.
fn row(instance: &str) -> String {
    if instance == crate::argocd::DEFAULT_INSTANCE {
        "argocd-listing".into()
    } else {
        format!("argocd-listing:{instance}")
    }
}

/// A drop held back: the Applications the listing at `at` lacked, out of `stored`.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldDropRow {
    pub apps: HashSet<AppId>,
    pub at: DateTime<Utc>,
    pub stored: usize,
}

impl Store {
    pub async fn held_drop(&self, instance: &str) -> Result<Option<HeldDropRow>, StoreError> {
        let row = q!("SELECT apps, held_at, stored FROM listing_guard WHERE name = $1")
            .bind(row(instance))
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let apps: Vec<AppId> = decode(&row.try_get::<String, _>("apps")?)?;
        Ok(Some(HeldDropRow {
            apps: apps.into_iter().collect(),
            at: from_millis(row.try_get("held_at")?),
            stored: usize::try_from(row.try_get::<i64, _>("stored")?).unwrap_or(0),
        }))
    }

    /// Holds back `apps` (replacing what was held).
    pub async fn hold_drop(&self, instance: &str, held: &HeldDropRow) -> Result<(), StoreError> {
        let mut apps: Vec<&AppId> = held.apps.iter().collect();
        apps.sort();
        let query = q!(
            "INSERT INTO listing_guard (name, apps, held_at, stored) VALUES ($1, $2, $3, $4) \
                        ON CONFLICT (name) DO UPDATE SET apps = excluded.apps, held_at = excluded.held_at, \
                        stored = excluded.stored"
        )
        .bind(row(instance))
        .bind(encode(&apps))
        .bind(to_millis(held.at))
        .bind(i64::try_from(held.stored).unwrap_or(i64::MAX));
        self.write_one(query).await?;
        Ok(())
    }

    /// Nothing is held back any more.
    pub async fn release_drop(&self, instance: &str) -> Result<(), StoreError> {
        self.write_one(q!("DELETE FROM listing_guard WHERE name = $1").bind(row(instance)))
            .await?;
        Ok(())
    }
}
