//! Storms (`storms`, and `incidents.storm_id` naming each member's): which storms hold their members, the open
//! incidents that may join one, a storm's members and their count. A storm's own incident is an incident like any
//! other (kind `storm`); this row says what it is about.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::incidents::{INCIDENT_COLUMNS, app_from_row, incident_from_row, storm_columns, view_from_row};
use super::{IncidentRecord, Store, StoreError, WriteTx, parse_column, values};
use crate::argocd::AppId;
use crate::clock::{from_millis, to_millis};
use crate::domain::{IncidentState, Kind};
use crate::incidents::storm::{KINDS, OpenStorm, Scope};

/// The storms open, or ended after `$1`.
const HOLDING: &str = "SELECT incident_id, instance, cluster, kind, since, ended_at FROM storms \
                       WHERE ended_at IS NULL OR ended_at > $1 ORDER BY incident_id";

fn storm_from_row(r: &AnyRow) -> Result<OpenStorm, StoreError> {
    Ok(OpenStorm {
        id: r.try_get("incident_id")?,
        scope: Scope {
            instance: r.try_get("instance")?,
            cluster: r.try_get("cluster")?,
            kind: parse_column("storm kind", r.try_get("kind")?, Kind::parse)?,
        },
        since: from_millis(r.try_get("since")?),
        ended_at: r.try_get::<Option<i64>, _>("ended_at")?.map(from_millis),
    })
}

/// What storms read of an incident: its columns, never its compressed view — a storm of 2,000 Applications is
/// judged and described again with each batch that touches it, and reading every member's view cost most of the
/// writer's time then. Rows written before migration 0022 (no `cluster`) are read whole, once each.
#[derive(Debug, Clone, PartialEq)]
pub struct StormMember {
    pub id: i64,
    pub kind: Kind,
    pub app: AppId,
    pub team: String,
    pub state: IncidentState,
    pub since: DateTime<Utc>,
    /// The Application's destination cluster (the view's `destination_cluster`).
    pub cluster: String,
    /// A key of its first message as stored; empty when it has none (see `incidents::storm_columns`).
    pub message_key: String,
}

/// The columns [`member_from_row`] reads: a row's view only where the row predates its storm columns.
const MEMBER_COLUMNS: &str = "id, kind, instance, namespace, name, team, state, since, cluster, message_key, \
                              CASE WHEN cluster IS NULL THEN view_doc END AS old_doc, \
                              CASE WHEN cluster IS NULL THEN view_json END AS old_json";

fn member_from_row(r: &AnyRow) -> Result<StormMember, StoreError> {
    let (cluster, message_key) = match r.try_get::<Option<String>, _>("cluster")? {
        Some(cluster) => (
            cluster,
            r.try_get::<Option<String>, _>("message_key")?.unwrap_or_default(),
        ),
        None => storm_columns(&view_from_row(r, "old_doc", "old_json")?),
    };
    Ok(StormMember {
        id: r.try_get("id")?,
        kind: parse_column("incident kind", r.try_get("kind")?, Kind::parse)?,
        app: app_from_row(r)?,
        team: r.try_get("team")?,
        state: parse_column("incident state", r.try_get("state")?, IncidentState::parse)?,
        since: from_millis(r.try_get("since")?),
        cluster,
        message_key,
    })
}

/// How many members a storm has, and how many of them are in each state (resolved: recovered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct StormCount {
    pub members: usize,
    pub recovered: usize,
    pub firing: usize,
    pub pending: usize,
}

impl Store {
    /// The storms open, or ended after `ended_after` (they still hold their members; see [`OpenStorm::holds`]).
    pub async fn storms_tx(tx: &mut WriteTx, ended_after: DateTime<Utc>) -> Result<Vec<OpenStorm>, StoreError> {
        tx.rows(q!(HOLDING).bind(to_millis(ended_after)), storm_from_row).await
    }

    /// [`Store::storms_tx`] outside a write transaction (the lists that say what holds each incident).
    pub async fn storms(&self, ended_after: DateTime<Utc>) -> Result<Vec<OpenStorm>, StoreError> {
        let rows = q!(HOLDING).bind(to_millis(ended_after)).fetch_all(&self.pool).await?;
        rows.iter().map(storm_from_row).collect()
    }

    /// On PostgreSQL, waits for any other replica deciding storms to commit: what is counted is then what all of
    /// them wrote (taken last in a batch, after its Applications' rows, so it never waits in a cycle).
    pub async fn lock_storms(tx: &mut WriteTx) -> Result<(), StoreError> {
        if tx.engine == super::Engine::Postgres {
            // The key is Herald's own: "storm" read as a number.
            tx.exec(q!("SELECT pg_advisory_xact_lock(1937010541)")).await?;
        }
        Ok(())
    }

    /// The open incidents of `instance` that may make or join a storm (of [`KINDS`], in no storm).
    pub async fn storm_candidates(tx: &mut WriteTx, instance: &str) -> Result<Vec<StormMember>, StoreError> {
        let kinds = KINDS.map(|k| format!("'{}'", k.as_str())).join(", ");
        let sql = format!(
            "SELECT {MEMBER_COLUMNS} FROM incidents WHERE state IN ('pending', 'firing') AND storm_id IS NULL \
             AND instance = $1 AND kind IN ({kinds}) ORDER BY id"
        );
        tx.rows(q!(sql).bind(instance), member_from_row).await
    }

    /// Opens the storm whose incident is `incident_id`.
    pub async fn insert_storm(tx: &mut WriteTx, incident_id: i64, storm: &OpenStorm) -> Result<(), StoreError> {
        let query = q!("INSERT INTO storms (incident_id, instance, cluster, kind, since) VALUES ($1, $2, $3, $4, $5)")
            .bind(incident_id)
            .bind(&storm.scope.instance)
            .bind(&storm.scope.cluster)
            .bind(storm.scope.kind.as_str())
            .bind(to_millis(storm.since));
        tx.exec(query).await?;
        Ok(())
    }

    /// The incidents `members` are the storm `storm_id`'s from now on.
    pub async fn join_storm(tx: &mut WriteTx, storm_id: i64, members: &[i64]) -> Result<(), StoreError> {
        for chunk in members.chunks(100) {
            let list = values(chunk.len(), 1, 2);
            let sql = format!("UPDATE incidents SET storm_id = $1 WHERE id IN (VALUES {list})");
            let query = chunk.iter().fold(q!(sql).bind(storm_id), |q, id| q.bind(*id));
            tx.exec(query).await?;
        }
        Ok(())
    }

    /// The storm `storm_id` ended at `at`.
    pub async fn end_storm(tx: &mut WriteTx, storm_id: i64, at: DateTime<Utc>) -> Result<(), StoreError> {
        let query = q!("UPDATE storms SET ended_at = $1 WHERE incident_id = $2")
            .bind(to_millis(at))
            .bind(storm_id);
        tx.exec(query).await?;
        Ok(())
    }

    /// The storm `storm_id`'s members, resolved ones too, oldest first.
    pub async fn storm_members(tx: &mut WriteTx, storm_id: i64) -> Result<Vec<StormMember>, StoreError> {
        let sql = format!("SELECT {MEMBER_COLUMNS} FROM incidents WHERE storm_id = $1 ORDER BY id");
        tx.rows(q!(sql).bind(storm_id), member_from_row).await
    }

    /// The incidents `ids` (the storms' own).
    pub async fn incidents_by_id(&self, ids: &[i64]) -> Result<Vec<IncidentRecord>, StoreError> {
        let mut out = Vec::new();
        for chunk in ids.chunks(100) {
            let sql = format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE id IN (VALUES {})",
                values(chunk.len(), 1, 1)
            );
            let query = chunk.iter().fold(q!(sql), |q, id| q.bind(*id));
            for row in query.fetch_all(&self.pool).await? {
                out.push(incident_from_row(&row)?);
            }
        }
        Ok(out)
    }

    /// How many members each storm of `ids` has, and how many recovered (from the index alone).
    pub async fn storm_counts(&self, ids: &[i64]) -> Result<Vec<(i64, StormCount)>, StoreError> {
        let mut out = Vec::new();
        for chunk in ids.chunks(100) {
            let sql = format!(
                "SELECT storm_id, state, COUNT(*) AS n FROM incidents WHERE storm_id IN (VALUES {}) \
                 GROUP BY storm_id, state",
                values(chunk.len(), 1, 1)
            );
            let query = chunk.iter().fold(q!(sql), |q, id| q.bind(*id));
            for row in query.fetch_all(&self.pool).await? {
                let (id, state, n): (i64, String, i64) =
                    (row.try_get("storm_id")?, row.try_get("state")?, row.try_get("n")?);
                let at = match out.iter().position(|(s, _)| *s == id) {
                    Some(at) => at,
                    None => {
                        out.push((id, StormCount::default()));
                        out.len() - 1
                    }
                };
                let (count, n) = (&mut out[at].1, n.max(0) as usize);
                count.members += n;
                match state.as_str() {
                    "resolved" => count.recovered += n,
                    "firing" => count.firing += n,
                    _ => count.pending += n,
                }
            }
        }
        Ok(out)
    }
}
