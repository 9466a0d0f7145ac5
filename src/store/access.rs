//! The Argo CD projects Herald's token may no longer see (`argocd_access`): one row per (instance, project) while
//! a GET with that project answers 403. Written in the transaction that queues the default team's message, so a
//! denial starts and ends once, whichever replica saw it.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{Store, StoreError, WriteTx};
use crate::clock::{from_millis, to_millis};

impl Store {
    /// The projects of `instance` Herald may not see, with when that was first seen, by project name.
    pub async fn denied_projects(&self, instance: &str) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        let rows = q!("SELECT project, denied_since FROM argocd_access WHERE instance = $1 ORDER BY project")
            .bind(instance)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("project")?, from_millis(r.try_get("denied_since")?))))
            .collect()
    }

    /// Records that `project` of `instance` is denied since `at`: true when it was not already (the denial starts
    /// now, and this transaction tells of it).
    pub async fn deny_project(
        tx: &mut WriteTx,
        instance: &str,
        project: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let query = q!(
            "INSERT INTO argocd_access (instance, project, denied_since) VALUES ($1, $2, $3) \
             ON CONFLICT (instance, project) DO NOTHING"
        )
        .bind(instance)
        .bind(project)
        .bind(to_millis(at));
        Ok(tx.exec(query).await? > 0)
    }

    /// Records that `project` of `instance` is seen again: when it was denied since, if it was (the denial ends
    /// now, and this transaction tells of it).
    pub async fn allow_project(
        tx: &mut WriteTx,
        instance: &str,
        project: &str,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        let query = q!("DELETE FROM argocd_access WHERE instance = $1 AND project = $2 RETURNING denied_since")
            .bind(instance)
            .bind(project);
        let rows = tx.rows(query, |r| Ok(from_millis(r.try_get("denied_since")?))).await?;
        Ok(rows.into_iter().next())
    }
}
