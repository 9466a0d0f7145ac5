//! Signed requests from Slack seen (`slack_requests`): each is claimed by a hash of its signature before it acts,
//! so a replay of the same request is refused on every replica and after a restart. Rows are kept until the
//! request's timestamp leaves the window in which Slack's signature is taken, then purged.

use chrono::{DateTime, Utc};

use super::{Store, StoreError};
use crate::clock::to_millis;

impl Store {
    /// Claims the request remembered as `key` (acceptable until `expires`): `true` when it was never seen, so the
    /// caller acts; `false` for a replay. Requests whose window closed are forgotten first.
    pub async fn claim_slack_request(
        &self,
        key: &str,
        expires: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        tx.exec(q!("DELETE FROM slack_requests WHERE expires_at < $1").bind(to_millis(now)))
            .await?;
        let claimed = tx
            .exec(
                q!(
                    "INSERT INTO slack_requests (signature_hash, expires_at) VALUES ($1, $2) \
                    ON CONFLICT (signature_hash) DO NOTHING"
                )
                .bind(key)
                .bind(to_millis(expires)),
            )
            .await?;
        tx.commit().await?;
        Ok(claimed == 1)
    }
}
