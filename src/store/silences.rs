//! Silences (`silences`): stored as the API creates them; matching them against incidents is `routing`'s job.

use chrono::{DateTime, Utc};
use sqlx::{Any, Row};

use super::{Store, StoreError, WriteTx, decode, encode};
use crate::clock::{from_millis, to_millis};
use crate::routing::Silence;

impl Store {
    pub async fn add_silence(&self, s: &Silence) -> Result<(), StoreError> {
        let query = q!(
            "INSERT INTO silences (id, matchers, starts_at, ends_at, created_by, comment, created_at) \
            VALUES ($1, $2, $3, $4, $5, $6, $7)"
        )
        .bind(&s.id)
        .bind(encode(&s.matchers))
        .bind(to_millis(s.starts_at))
        .bind(to_millis(s.ends_at))
        .bind(&s.created_by)
        .bind(&s.comment)
        .bind(to_millis(s.created_at));
        self.write_one(query).await?;
        Ok(())
    }

    /// Ends a silence now. Returns false when it does not exist or has already ended.
    pub async fn expire_silence(&self, id: &str, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let query = q!("UPDATE silences SET ends_at = $1 WHERE id = $2 AND ends_at > $1")
            .bind(to_millis(now))
            .bind(id);
        Ok(self.write_one(query).await? == 1)
    }

    async fn silences_on<'e, E>(exec: E, all: bool, now: DateTime<Utc>) -> Result<Vec<Silence>, StoreError>
    where
        E: sqlx::Executor<'e, Database = Any>,
    {
        let rows = q!(
            "SELECT id, matchers, starts_at, ends_at, created_by, comment, created_at FROM silences \
                       WHERE $1 = 1 OR ends_at > $2 ORDER BY created_at DESC"
        )
        .bind(all as i64)
        .bind(to_millis(now))
        .fetch_all(exec)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Silence {
                    id: r.try_get("id")?,
                    matchers: decode(&r.try_get::<String, _>("matchers")?)?,
                    starts_at: from_millis(r.try_get("starts_at")?),
                    ends_at: from_millis(r.try_get("ends_at")?),
                    created_by: r.try_get("created_by")?,
                    comment: r.try_get("comment")?,
                    created_at: from_millis(r.try_get("created_at")?),
                })
            })
            .collect()
    }

    pub async fn silences(&self, include_expired: bool, now: DateTime<Utc>) -> Result<Vec<Silence>, StoreError> {
        Self::silences_on(&self.pool, include_expired, now).await
    }

    pub async fn silences_tx(tx: &mut WriteTx, now: DateTime<Utc>) -> Result<Vec<Silence>, StoreError> {
        Self::silences_on(&mut *tx.tx, false, now).await
    }
}
