//! Used one-click links (`used_links`): a signed link acts once; its nonce is claimed before it acts, and what it
//! did is kept so a replay can say so. Rows are kept until the link would have expired anyway.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{Store, StoreError};
use crate::clock::to_millis;

impl Store {
    /// Claims the link `nonce` (valid until `expires`): `true` when it was never used, so the caller acts;
    /// `false` when it was (see [`Store::link_outcome`]).
    pub async fn claim_link(
        &self,
        nonce: &str,
        expires: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        tx.exec(q!("DELETE FROM used_links WHERE expires_at < $1").bind(to_millis(now)))
            .await?;
        let claimed = tx
            .exec(
                q!(
                    "INSERT INTO used_links (nonce, used_at, expires_at, outcome) VALUES ($1, $2, $3, '') \
                    ON CONFLICT (nonce) DO NOTHING"
                )
                .bind(nonce)
                .bind(to_millis(now))
                .bind(to_millis(expires)),
            )
            .await?;
        tx.commit().await?;
        Ok(claimed == 1)
    }

    /// Records what the link `nonce` did.
    pub async fn set_link_outcome(&self, nonce: &str, outcome: &str) -> Result<(), StoreError> {
        self.write_one(
            q!("UPDATE used_links SET outcome = $1 WHERE nonce = $2")
                .bind(outcome)
                .bind(nonce),
        )
        .await?;
        Ok(())
    }

    /// Gives back the claim on `nonce` when acting failed (nothing was done): the link can be used again.
    pub async fn release_link(&self, nonce: &str) -> Result<(), StoreError> {
        self.write_one(q!("DELETE FROM used_links WHERE nonce = $1 AND outcome = ''").bind(nonce))
            .await?;
        Ok(())
    }

    /// What the used link `nonce` did, if it was used (empty while it is acting).
    pub async fn link_outcome(&self, nonce: &str) -> Result<Option<String>, StoreError> {
        let row = q!("SELECT outcome FROM used_links WHERE nonce = $1")
            .bind(nonce)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get("outcome")).transpose()?)
    }
}
