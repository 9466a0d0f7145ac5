//! Applications: their stored state (`apps`: the state document zstd-compressed, a version for compare-and-set) and
//! the timeline of their status changes (`timeline`: a row per change, its transitions together). The raw bodies
//! Argo CD sent are `raws`'.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{
    Effort, Engine, Store, StoreError, WriteTx, decode, decode_doc, encode, encode_doc, execute_in_chunks,
    fetch_for_apps, fetch_for_apps_on,
};
use crate::argocd::AppId;
use crate::clock::{from_millis, to_millis};
use crate::state::{AppState, Transition};

/// A stored Application row for listings.
#[derive(Debug, Clone)]
pub struct AppRecord {
    pub team: String,
    pub state: AppState,
}

/// An Application as the writer keeps it: its row and the row's version (0: there is no row yet).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredApp {
    pub team: String,
    pub state: AppState,
    pub version: i64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TimelineEntry {
    pub at: DateTime<Utc>,
    pub field: String,
    pub from: Option<String>,
    pub to: String,
}

/// Which Applications [`Store::apps`] returns: by sync and health status, team, those not Synced+Healthy
/// (`needs_attention`), the deleted ones instead of the others (`deleted`); at most `limit`, after the cursor.
#[derive(Debug, Clone, Default)]
pub struct AppFilter {
    pub sync: Option<String>,
    pub health: Option<String>,
    pub team: Option<String>,
    pub needs_attention: bool,
    pub deleted: bool,
    /// Only this Argo CD instance's (all when `None`).
    pub instance: Option<String>,
    /// Ordered by when their trouble started (the older of the since-times not fine) instead; no cursor then.
    pub by_problem_since: bool,
    pub limit: i64,
    pub after: Option<AppCursor>,
}

/// The conditions of [`AppFilter`] but the cursor, on `$1`…`$6`.
const APP_FILTER: &str = "($1 = '' OR sync_status = $1) AND ($2 = '' OR health_status = $2) \
     AND (deleted_at IS NULL) = ($3 = 0) AND ($4 = '' OR team = $4) \
     AND ($5 = 0 OR NOT (sync_status = 'Synced' AND health_status = 'Healthy')) AND ($6 = '' OR instance = $6)";

/// When an Application's trouble started, in SQL: the older of the since-times whose status is not fine.
const PROBLEM_SINCE: &str = "CASE WHEN sync_status <> 'Synced' AND health_status <> 'Healthy' \
     THEN (CASE WHEN sync_since < health_since THEN sync_since ELSE health_since END) \
     WHEN sync_status <> 'Synced' THEN sync_since ELSE health_since END";

/// Where a page of Applications ended, in their order (OutOfSync the longest first, then by name). Opaque to
/// clients: [`AppCursor::encode`] makes the `after=` value of the `next` link.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AppCursor {
    pub sync_since: i64,
    pub namespace: String,
    pub name: String,
    #[serde(default)]
    pub instance: String,
}

impl AppCursor {
    pub fn of(s: &AppState) -> Self {
        Self {
            sync_since: to_millis(s.sync_since),
            namespace: s.snapshot.app.namespace.clone(),
            name: s.snapshot.app.name.clone(),
            instance: s.snapshot.app.instance.clone(),
        }
    }

    pub fn encode(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(encode(self))
    }

    /// `None` for anything [`AppCursor::encode`] did not make.
    pub fn decode(text: &str) -> Option<Self> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// The columns [`app_from_row`] reads.
const APP_COLUMNS: &str = "team, state_json, state_doc, last_seen, version";

/// Reads [`APP_COLUMNS`]: the compressed document, or the JSON text of a row written before it; `last_seen` from its
/// column, which duplicates move without rewriting the document.
fn app_from_row(r: &AnyRow) -> Result<AppRecord, StoreError> {
    let doc: Option<Vec<u8>> = r.try_get("state_doc")?;
    let mut state: AppState = match doc {
        Some(bytes) => decode_doc(&bytes)?,
        None => decode(&r.try_get::<String, _>("state_json")?)?,
    };
    state.last_seen = state.last_seen.max(from_millis(r.try_get("last_seen")?));
    Ok(AppRecord {
        team: r.try_get("team")?,
        state,
    })
}

/// [`stored_from_row`] with its Application's key, for a map.
fn keyed_stored(r: &AnyRow) -> Result<(AppId, StoredApp), StoreError> {
    let stored = stored_from_row(r)?;
    Ok((stored.state.snapshot.app.clone(), stored))
}

fn stored_from_row(r: &AnyRow) -> Result<StoredApp, StoreError> {
    let rec = app_from_row(r)?;
    Ok(StoredApp {
        team: rec.team,
        state: rec.state,
        version: r.try_get("version")?,
    })
}

/// Whether the state holds a resource waiting to be pruned (`requires_pruning`, or a last sync result
/// `PruneSkipped`): the `prune_pending` column /v1/prune-pending selects by; the caller narrows the rows with
/// `incidents::pending_prunes`.
fn prune_pending(s: &AppState) -> bool {
    let snap = &s.snapshot;
    snap.resources.iter().any(|r| r.requires_pruning)
        || (snap.operation.iter())
            .flat_map(|o| &o.resources)
            .any(|r| r.status == crate::argocd::ResultCode::PruneSkipped)
}

/// `last_seen` only moves forward: a replica whose cached state is older than what another wrote keeps the later.
fn latest_last_seen(engine: Engine) -> &'static str {
    match engine {
        Engine::Sqlite => "max(apps.last_seen, excluded.last_seen)",
        Engine::Postgres => "GREATEST(apps.last_seen, excluded.last_seen)",
    }
}

/// The query of [`fetch_for_apps`] that reads `columns` of the Applications in its `VALUES` list.
fn select_apps(columns: &str) -> impl Fn(&str) -> String + '_ {
    move |pairs| format!("SELECT {columns} FROM apps WHERE (instance, namespace, name) IN (VALUES {pairs})")
}

impl Store {
    /// Loads several Applications at once (team, state), for a batch of bodies.
    pub async fn load_apps(tx: &mut WriteTx, ids: &[AppId]) -> Result<HashMap<AppId, (String, AppState)>, StoreError> {
        let rows = fetch_for_apps(tx, ids, select_apps(APP_COLUMNS)).await?;
        rows.iter()
            .map(|r| {
                let rec = app_from_row(r)?;
                Ok((rec.state.snapshot.app.clone(), (rec.team, rec.state)))
            })
            .collect()
    }

    /// Reads several Applications with their versions, outside any write transaction (what the writer's cache
    /// lacks). Those without a row are left out.
    pub async fn stored_apps(&self, ids: &[AppId]) -> Result<HashMap<AppId, StoredApp>, StoreError> {
        self.read_apps(ids, APP_COLUMNS, keyed_stored).await
    }

    /// The versions of several Applications (those with a row), read in `tx` and, on PostgreSQL, their rows locked
    /// until it ends (see [`Store::locked_rows`]): what a batch checks the states it remembers against before it
    /// judges anything.
    pub async fn lock_apps(tx: &mut WriteTx, ids: &[AppId]) -> Result<HashMap<AppId, i64>, StoreError> {
        let rows = Self::locked_rows(tx, ids, "instance, namespace, name, version").await?;
        rows.iter()
            .map(|r| {
                let id = AppId {
                    instance: r.try_get("instance")?,
                    namespace: r.try_get("namespace")?,
                    name: r.try_get("name")?,
                };
                Ok((id, r.try_get("version")?))
            })
            .collect()
    }

    /// [`Store::stored_apps`] read in `tx` and, on PostgreSQL, their rows locked until it ends (see
    /// [`Store::locked_rows`]), so no other replica can write them before this transaction does.
    pub async fn lock_stored_apps(tx: &mut WriteTx, ids: &[AppId]) -> Result<HashMap<AppId, StoredApp>, StoreError> {
        let rows = Self::locked_rows(tx, ids, APP_COLUMNS).await?;
        rows.iter().map(keyed_stored).collect()
    }

    /// `columns` of the rows of `ids` (those with one), read in `tx`. On PostgreSQL the rows are locked until `tx`
    /// ends, in one order whoever asks (the key's bytes, as [`AppId`] sorts: chunks in that order, each sorted
    /// `COLLATE "C"`), so two writers over the same Applications wait for each other instead of deadlocking. On
    /// SQLite the write transaction already excludes every other writer.
    async fn locked_rows(tx: &mut WriteTx, ids: &[AppId], columns: &str) -> Result<Vec<AnyRow>, StoreError> {
        let mut sorted = ids.to_vec();
        sorted.sort();
        sorted.dedup();
        let lock = match tx.engine {
            Engine::Sqlite => "",
            Engine::Postgres => {
                " ORDER BY instance COLLATE \"C\", namespace COLLATE \"C\", name COLLATE \"C\" FOR UPDATE"
            }
        };
        let select = select_apps(columns);
        fetch_for_apps(tx, &sorted, |pairs| format!("{}{lock}", select(pairs))).await
    }

    /// `columns` of several Applications' rows (those with one), each decoded by `row`, read on a pooled
    /// connection outside any write transaction.
    async fn read_apps<T>(
        &self,
        ids: &[AppId],
        columns: &str,
        row: impl Fn(&AnyRow) -> Result<(AppId, T), StoreError>,
    ) -> Result<HashMap<AppId, T>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let rows = fetch_for_apps_on(&mut conn, self.engine, ids, select_apps(columns)).await?;
        rows.iter().map(row).collect()
    }

    /// Upserts several Applications in one statement per chunk, whatever their versions.
    pub async fn save_apps(tx: &mut WriteTx, rows: &[(&str, &AppState)]) -> Result<(), StoreError> {
        let rows: Vec<(&str, &AppState, Option<i64>)> = rows.iter().map(|(t, s)| (*t, *s, None)).collect();
        Self::upsert_apps(tx, &rows).await
    }

    /// Upserts several Applications, each only if its stored version is still the one given (0: no row yet), and
    /// moves each to the next version. [`StoreError::Conflict`] when any of them was written by someone else since:
    /// the transaction must then be dropped and the work done again on what is stored.
    pub async fn save_apps_checked(tx: &mut WriteTx, rows: &[(&str, &AppState, i64)]) -> Result<(), StoreError> {
        let rows: Vec<(&str, &AppState, Option<i64>)> = rows.iter().map(|(t, s, v)| (*t, *s, Some(*v))).collect();
        Self::upsert_apps(tx, &rows).await
    }

    async fn upsert_apps(tx: &mut WriteTx, rows: &[(&str, &AppState, Option<i64>)]) -> Result<(), StoreError> {
        let last_seen = latest_last_seen(tx.engine);
        let checked = rows.iter().any(|r| r.2.is_some());
        // Checked: the row written carries the next version, and an existing row is replaced only from the one before.
        let (next_version, only_if) = if checked {
            ("excluded.version", " WHERE apps.version = excluded.version - 1")
        } else {
            ("apps.version + 1", "")
        };
        let sql = |values: &str| {
            format!(
                "INSERT INTO apps (instance, namespace, name, uid, project, team, sync_status, health_status, sync_since, \
                 health_since, observed_at, last_seen, content_hash, state_json, state_doc, prune_pending, deleted_at, \
                 version) VALUES {values} \
                 ON CONFLICT (instance, namespace, name) DO UPDATE SET uid = excluded.uid, project = excluded.project, \
                 team = excluded.team, sync_status = excluded.sync_status, health_status = excluded.health_status, \
                 sync_since = excluded.sync_since, health_since = excluded.health_since, \
                 observed_at = excluded.observed_at, last_seen = {last_seen}, \
                 content_hash = excluded.content_hash, state_json = excluded.state_json, \
                 state_doc = excluded.state_doc, prune_pending = excluded.prune_pending, \
                 deleted_at = excluded.deleted_at, version = {next_version}{only_if}"
            )
        };
        let affected = execute_in_chunks(tx, rows, 32, 18, sql, |query, (team, s, version)| {
            let snap = &s.snapshot;
            query
                .bind(&snap.app.instance)
                .bind(&snap.app.namespace)
                .bind(&snap.app.name)
                .bind(&snap.uid)
                .bind(&snap.project)
                .bind(*team)
                .bind(snap.sync_status.as_str())
                .bind(snap.health_status.as_str())
                .bind(to_millis(s.sync_since))
                .bind(to_millis(s.health_since))
                .bind(to_millis(s.observed_at))
                .bind(to_millis(s.last_seen))
                .bind(&s.content_hash)
                .bind("")
                .bind(encode_doc(s, Effort::Fast))
                .bind(i64::from(prune_pending(s)))
                .bind(s.deleted_at.map(to_millis))
                .bind(version.map_or(1, |v| v + 1))
        })
        .await?;
        if checked && affected.iter().any(|(rows, n)| *n != *rows as u64) {
            return Err(StoreError::Conflict);
        }
        Ok(())
    }

    /// Moves `last_seen` forward for several Applications (kept in memory by the writer for duplicates, written
    /// now and then): no version change, nothing else written. On PostgreSQL the rows are locked first in the one
    /// order batches lock them ([`Store::locked_rows`]), so this cannot deadlock with another replica's batch.
    pub async fn touch_apps(tx: &mut WriteTx, rows: &[(AppId, DateTime<Utc>)]) -> Result<(), StoreError> {
        if tx.engine == Engine::Postgres {
            let ids: Vec<AppId> = rows.iter().map(|(id, _)| id.clone()).collect();
            Self::locked_rows(tx, &ids, "1").await?;
        }
        let sql = |values: &str| {
            format!(
                "UPDATE apps SET last_seen = v.column4 FROM (VALUES {values}) AS v \
                 WHERE apps.instance = v.column1 AND apps.namespace = v.column2 AND apps.name = v.column3 \
                 AND apps.last_seen < v.column4"
            )
        };
        execute_in_chunks(tx, rows, 100, 4, sql, |query, (app, at)| {
            query
                .bind(&app.instance)
                .bind(&app.namespace)
                .bind(&app.name)
                .bind(to_millis(*at))
        })
        .await?;
        Ok(())
    }

    /// Appends one timeline row per change (its transitions as JSON `[[field, from, to], …]`, compressed with the
    /// documents dictionary), several per statement.
    pub async fn add_transitions_many(
        tx: &mut WriteTx,
        rows: &[(AppId, DateTime<Utc>, Vec<Transition>)],
    ) -> Result<(), StoreError> {
        let sql =
            |values: &str| format!("INSERT INTO timeline (instance, namespace, name, at, changes_doc) VALUES {values}");
        execute_in_chunks(tx, rows, 100, 5, sql, |query, (app, at, changes)| {
            query
                .bind(&app.instance)
                .bind(&app.namespace)
                .bind(&app.name)
                .bind(to_millis(*at))
                .bind(encode_changes(changes))
        })
        .await?;
        Ok(())
    }

    /// Forgets the history before `before` (`storage.history_retention` ago): incidents resolved before it (with
    /// their places in notification groups and their escalations) and timeline entries from before it. Timeline
    /// entries are appended in time order: the purge finds the first one to keep by id, reading only those it
    /// removes. Answers how many rows went.
    pub async fn purge_history(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let at = to_millis(before);
        let mut tx = self.begin().await?;
        let mut removed = Self::purge_resolved_incidents(&mut tx, before).await?;
        // Up to the first entry to keep (none: every entry is older).
        let end = Self::first_id_from(&mut tx.tx, "timeline", "at", before, i64::MIN)
            .await?
            .unwrap_or(i64::MAX);
        removed += tx
            .exec(q!("DELETE FROM timeline WHERE id < $1 AND at < $2").bind(end).bind(at))
            .await?;
        tx.commit().await?;
        Ok(removed)
    }

    /// Forgets Applications deleted before `before`, with their timeline (their incidents stay, resolved).
    pub async fn purge_deleted_apps(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let at = to_millis(before);
        let timeline = q!("DELETE FROM timeline WHERE (instance, namespace, name) IN \
                           (SELECT instance, namespace, name FROM apps WHERE deleted_at < $1)")
        .bind(at);
        self.write_one(timeline).await?;
        let query = q!("DELETE FROM apps WHERE deleted_at < $1").bind(at);
        self.write_one(query).await
    }

    /// The Applications not deleted, with when Herald last heard of each, in `projects` (all when empty): what a
    /// complete listing from the Argo CD API is compared with.
    pub async fn live_apps(
        &self,
        instance: &str,
        projects: &[String],
    ) -> Result<Vec<(AppId, DateTime<Utc>)>, StoreError> {
        let live = self.live_apps_with_projects(instance, projects).await?;
        Ok(live.into_iter().map(|(app, seen, _)| (app, seen)).collect())
    }

    /// [`Store::live_apps`] with each one's project.
    pub async fn live_apps_with_projects(
        &self,
        instance: &str,
        projects: &[String],
    ) -> Result<Vec<(AppId, DateTime<Utc>, String)>, StoreError> {
        let rows =
            q!("SELECT namespace, name, project, last_seen FROM apps WHERE deleted_at IS NULL AND instance = $1")
                .bind(instance)
                .fetch_all(&self.pool)
                .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let project: String = r.try_get("project")?;
            if projects.is_empty() || projects.contains(&project) {
                let id = AppId::of(
                    instance,
                    r.try_get::<String, _>("namespace")?,
                    r.try_get::<String, _>("name")?,
                );
                out.push((id, from_millis(r.try_get("last_seen")?), project));
            }
        }
        Ok(out)
    }

    /// Whether any Application is stored (deleted or not): an empty store is refilled from the Argo CD API at start.
    pub async fn has_apps(&self) -> Result<bool, StoreError> {
        let row = q!("SELECT COUNT(*) AS n FROM (SELECT 1 FROM apps LIMIT 1) t")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<i64, _>("n")? > 0)
    }

    pub async fn app(&self, app: &AppId) -> Result<Option<AppRecord>, StoreError> {
        let row = q!(format!(
            "SELECT {APP_COLUMNS} FROM apps WHERE instance = $1 AND namespace = $2 AND name = $3"
        ))
        .bind(&app.instance)
        .bind(&app.namespace)
        .bind(&app.name)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(app_from_row).transpose()
    }

    /// One page of Applications, OutOfSync the longest first (see [`AppFilter`]).
    pub async fn apps(&self, f: &AppFilter) -> Result<Vec<AppRecord>, StoreError> {
        let after = f.after.clone().unwrap_or_default();
        let order = if f.by_problem_since {
            PROBLEM_SINCE
        } else {
            "sync_since"
        };
        let rows = q!(format!(
            "SELECT {APP_COLUMNS} FROM apps WHERE {APP_FILTER} \
             AND ($7 = 0 OR (sync_since, namespace, name, instance) > ($8, $9, $10, $11)) \
             ORDER BY {order} ASC, namespace, name, instance LIMIT $12"
        ))
        .bind(f.sync.as_deref().unwrap_or(""))
        .bind(f.health.as_deref().unwrap_or(""))
        .bind(i64::from(f.deleted))
        .bind(f.team.as_deref().unwrap_or(""))
        .bind(i64::from(f.needs_attention))
        .bind(f.instance.as_deref().unwrap_or(""))
        .bind(i64::from(f.after.is_some()))
        .bind(after.sync_since)
        .bind(after.namespace)
        .bind(after.name)
        .bind(after.instance)
        .bind(f.limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(app_from_row).collect()
    }

    /// Applications with a resource waiting to be pruned (`requires_pruning` or a `PruneSkipped` sync result): the
    /// rows behind `/v1/prune-pending`, chosen by the database rather than by decoding every Application; by name,
    /// at most `limit`, after `after`.
    pub async fn apps_with_pending_prunes(
        &self,
        limit: i64,
        after: Option<&AppId>,
    ) -> Result<Vec<AppRecord>, StoreError> {
        let (ns, name, instance) = after
            .map(|a| (a.namespace.as_str(), a.name.as_str(), a.instance.as_str()))
            .unwrap_or(("", "", ""));
        let sql = format!(
            "SELECT {APP_COLUMNS} FROM apps WHERE deleted_at IS NULL AND prune_pending = 1 \
             AND ($1 = 0 OR (namespace, name, instance) > ($2, $3, $4)) ORDER BY namespace, name, instance LIMIT $5"
        );
        let rows = q!(sql)
            .bind(i64::from(after.is_some()))
            .bind(ns)
            .bind(name)
            .bind(instance)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(app_from_row).collect()
    }

    /// How many Applications [`Store::apps`] would return with `f` and no limit.
    pub async fn count_apps(&self, f: &AppFilter) -> Result<usize, StoreError> {
        let row = q!(format!("SELECT COUNT(*) AS n FROM apps WHERE {APP_FILTER}"))
            .bind(f.sync.as_deref().unwrap_or(""))
            .bind(f.health.as_deref().unwrap_or(""))
            .bind(i64::from(f.deleted))
            .bind(f.team.as_deref().unwrap_or(""))
            .bind(i64::from(f.needs_attention))
            .bind(f.instance.as_deref().unwrap_or(""))
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<i64, _>("n")?.max(0) as usize)
    }

    /// The teams owning Applications that are not deleted.
    pub async fn app_teams(&self) -> Result<Vec<String>, StoreError> {
        let rows = q!("SELECT DISTINCT team FROM apps WHERE deleted_at IS NULL ORDER BY team LIMIT 500")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|r| Ok(r.try_get("team")?)).collect()
    }

    pub async fn app_counts(&self) -> Result<Vec<(String, String, i64)>, StoreError> {
        let rows = q!(
            "SELECT sync_status, health_status, COUNT(*) AS n FROM apps WHERE deleted_at IS NULL \
                       GROUP BY sync_status, health_status"
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("sync_status")?, r.try_get("health_status")?, r.try_get("n")?)))
            .collect()
    }

    /// The newest `limit` transitions of an Application, oldest first.
    pub async fn timeline(&self, app: &AppId, limit: i64) -> Result<Vec<TimelineEntry>, StoreError> {
        let rows = self.newest_of_app(TIMELINE_COLUMNS, "timeline", app, limit).await?;
        let mut out = Vec::new();
        for r in &rows {
            out.extend(timeline_entries(r)?.into_iter().rev().map(|(_, e)| e));
        }
        out.truncate(limit.max(0) as usize);
        out.reverse();
        Ok(out)
    }

    /// The transitions of an Application before `before`, newest first, at most `limit`, each with its position
    /// (see [`timeline_position`]).
    pub async fn timeline_before(
        &self,
        app: &AppId,
        before: super::HistoryBound,
        limit: i64,
    ) -> Result<Vec<(i64, TimelineEntry)>, StoreError> {
        // The rows that may hold a transition before the bound: those of an earlier instant, and at its instant
        // the rows up to the bound's (a position names its row and its place in it).
        let row_bound = before.id.div_euclid(POSITIONS);
        let rows = q!(format!(
            "SELECT {TIMELINE_COLUMNS} FROM timeline \
             WHERE instance = $1 AND namespace = $2 AND name = $3 AND (at < $4 OR (at = $4 AND id <= $5)) \
             ORDER BY at DESC, id DESC LIMIT $6"
        ))
        .bind(&app.instance)
        .bind(&app.namespace)
        .bind(&app.name)
        .bind(before.at)
        .bind(row_bound)
        // One row more: the row at the bound may hold nothing before it.
        .bind(limit.saturating_add(1))
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::new();
        for r in &rows {
            let entries = timeline_entries(r)?.into_iter().rev();
            out.extend(entries.filter(|(position, e)| to_millis(e.at) < before.at || *position < before.id));
        }
        out.truncate(limit.max(0) as usize);
        Ok(out)
    }

    /// `columns` of the newest `limit` rows of an append-only `table` about one Application, newest first.
    pub(super) async fn newest_of_app(
        &self,
        columns: &str,
        table: &str,
        app: &AppId,
        limit: i64,
    ) -> Result<Vec<AnyRow>, StoreError> {
        let rows = q!(format!(
            "SELECT {columns} FROM {table} WHERE instance = $1 AND namespace = $2 AND name = $3 \
             ORDER BY id DESC LIMIT $4"
        ))
        .bind(&app.instance)
        .bind(&app.namespace)
        .bind(&app.name)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }
}

/// How many transitions one timeline row may hold in the positions history pages count by: a change moves at most
/// the few fields `state::apply` compares.
const POSITIONS: i64 = 64;

/// Where a transition stands in an Application's history: its row's id and its place in the row, in one number that
/// orders as the transitions were derived (the row's id × [`POSITIONS`] + its index).
pub fn timeline_position(row: i64, index: usize) -> i64 {
    row.saturating_mul(POSITIONS)
        .saturating_add((index as i64).min(POSITIONS - 1))
}

/// A change's transitions as a timeline row holds them (`changes_doc`).
fn encode_changes(changes: &[Transition]) -> Vec<u8> {
    let rows: Vec<(&str, Option<&str>, &str)> = changes
        .iter()
        .map(|t| (t.field.as_str(), t.from.as_deref(), t.to.as_str()))
        .collect();
    encode_doc(&rows, Effort::Kept)
}

/// The columns [`timeline_entries`] reads.
const TIMELINE_COLUMNS: &str = "id, at, changes, changes_doc";

/// The transitions of one timeline row, oldest first, each with its position.
fn timeline_entries(r: &AnyRow) -> Result<Vec<(i64, TimelineEntry)>, StoreError> {
    let id: i64 = r.try_get("id")?;
    let at = from_millis(r.try_get("at")?);
    // Compressed, or the text of a row moved from the table of one row per transition (migration 17).
    let changes: Vec<(String, Option<String>, String)> = match r.try_get::<Option<Vec<u8>>, _>("changes_doc")? {
        Some(doc) => decode_doc(&doc)?,
        None => decode(&r.try_get::<String, _>("changes")?)?,
    };
    Ok(changes
        .into_iter()
        .enumerate()
        .map(|(i, (field, from, to))| (timeline_position(id, i), TimelineEntry { at, field, from, to }))
        .collect())
}
