//! Named leases (`leases`): a periodic job that must run on one replica per interval (the Argo CD API resync) claims
//! its row until the next run is due; a replica that finds the row still held skips the run.

use chrono::{DateTime, Utc};

use super::{Store, StoreError};
use crate::clock::to_millis;

impl Store {
    /// Claims `name` for `owner` until `until` when it is free (never claimed, or its time has come); returns whether
    /// this call got it. One statement, so two replicas cannot both get it.
    pub async fn claim_lease(
        &self,
        name: &str,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let query = q!("INSERT INTO leases (name, owner, until) VALUES ($1, $2, $3) \
                        ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until \
                        WHERE leases.until <= $4")
        .bind(name)
        .bind(owner)
        .bind(to_millis(until))
        .bind(to_millis(now));
        Ok(self.write_one(query).await? == 1)
    }

    /// Makes `name` free at once (a replica that wants the job run now, e.g. after the event stream broke).
    pub async fn release_lease(&self, name: &str) -> Result<(), StoreError> {
        self.write_one(q!("UPDATE leases SET until = 0 WHERE name = $1").bind(name))
            .await?;
        Ok(())
    }
}
