//! All SQL. One [`Store`] over sqlx's `Any` driver so the same statements run on SQLite (embedded default, WAL) and
//! PostgreSQL (several replicas); the few engine differences (claims with `FOR UPDATE SKIP LOCKED`) are chosen here
//! and nowhere else. Times are stored as epoch milliseconds, documents as JSON text.
//!
//! Writes happen in [`WriteTx`]: on SQLite one writer at a time (an in-process lock, so writers queue instead of
//! spinning on SQLITE_BUSY); on PostgreSQL plain transactions with row locks.

use std::borrow::Cow;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use secrecy::ExposeSecret;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{Any, AnyPool, Row, SqlSafeStr, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::argocd::AppId;
use crate::clock::{from_millis, to_millis};
use crate::configuration::{SqliteSynchronous, StorageSettings};
use crate::domain::Incident;
use crate::domain::{Action, DeliveryState, IncidentState, Kind, Severity};
use crate::routing::Silence;
use crate::state::{AppState, Transition};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data could not be read: {0}")]
    Decode(String),
    #[error("{0}")]
    Config(String),
}

impl StoreError {
    /// Whether the database is unreachable or busy (→ 503, try again) rather than the request being wrong.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            StoreError::Db(sqlx::Error::PoolTimedOut)
                | StoreError::Db(sqlx::Error::Io(_))
                | StoreError::Db(sqlx::Error::PoolClosed)
                | StoreError::Db(sqlx::Error::Protocol(_))
                | StoreError::Db(sqlx::Error::Tls(_))
                | StoreError::Db(sqlx::Error::WorkerCrashed)
        ) || matches!(self, StoreError::Db(sqlx::Error::Database(_)))
    }
}

fn decode<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Decode(e.to_string()))
}

fn encode<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    engine: Engine,
    write_lock: Option<Arc<Mutex<()>>>,
}

/// A write transaction (holding the SQLite writer lock, where there is one).
pub struct WriteTx {
    pub tx: Transaction<'static, Any>,
    _guard: Option<OwnedMutexGuard<()>>,
}

impl WriteTx {
    pub async fn commit(self) -> Result<(), StoreError> {
        self.tx.commit().await?;
        Ok(())
    }
}

fn migrator(engine: Engine) -> Migrator {
    let sql: &'static str = match engine {
        Engine::Sqlite => include_str!("../../migrations/sqlite/0001_init.sql"),
        Engine::Postgres => include_str!("../../migrations/postgres/0001_init.sql"),
    };
    Migrator {
        migrations: Cow::Owned(vec![Migration::new(
            1,
            Cow::Borrowed("init"),
            MigrationType::Simple,
            sql.into_sql_str(),
            false,
        )]),
        ..Migrator::DEFAULT
    }
}

/// An incident row.
#[derive(Debug, Clone, PartialEq)]
pub struct IncidentRecord {
    pub id: i64,
    pub fingerprint: String,
    pub kind: Kind,
    pub app: AppId,
    pub team: String,
    pub severity: Severity,
    pub state: IncidentState,
    pub since: DateTime<Utc>,
    pub fire_at: DateTime<Utc>,
    pub fired_at: Option<DateTime<Utc>>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub notified: bool,
    pub view: Incident,
}

impl IncidentRecord {
    /// The view with the record's live fields filled in.
    pub fn full_view(&self) -> Incident {
        let mut v = self.view.clone();
        v.id = self.id;
        v.state = self.state;
        v.severity = self.severity;
        v.since = self.since;
        v.fired_at = self.fired_at;
        v.resolved_at = self.resolved_at;
        v
    }
}

const INCIDENT_COLUMNS: &str = "id, fingerprint, kind, namespace, name, team, severity, state, since, fire_at, \
                                fired_at, resolved_at, notified, view_json";

fn incident_from_row(r: &AnyRow) -> Result<IncidentRecord, StoreError> {
    let state: String = r.try_get("state")?;
    let kind: String = r.try_get("kind")?;
    let severity: String = r.try_get("severity")?;
    Ok(IncidentRecord {
        id: r.try_get("id")?,
        fingerprint: r.try_get("fingerprint")?,
        kind: parse_kind(&kind)?,
        app: AppId {
            namespace: r.try_get("namespace")?,
            name: r.try_get("name")?,
        },
        team: r.try_get("team")?,
        severity: Severity::parse(&severity)
            .ok_or_else(|| StoreError::Decode(format!("incident severity {severity}")))?,
        state: IncidentState::parse(&state).ok_or_else(|| StoreError::Decode(format!("incident state {state}")))?,
        since: from_millis(r.try_get("since")?),
        fire_at: from_millis(r.try_get("fire_at")?),
        fired_at: r.try_get::<Option<i64>, _>("fired_at")?.map(from_millis),
        resolved_at: r.try_get::<Option<i64>, _>("resolved_at")?.map(from_millis),
        notified: r.try_get::<i64, _>("notified")? != 0,
        view: decode(&r.try_get::<String, _>("view_json")?)?,
    })
}

fn parse_kind(s: &str) -> Result<Kind, StoreError> {
    Kind::parse(s).ok_or_else(|| StoreError::Decode(format!("incident kind {s}")))
}

/// A stored Application row for listings.
#[derive(Debug, Clone)]
pub struct AppRecord {
    pub team: String,
    pub state: AppState,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TimelineEntry {
    pub at: DateTime<Utc>,
    pub field: String,
    pub from: Option<String>,
    pub to: String,
}

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

#[derive(Debug, Clone)]
pub struct EscalationRecord {
    pub id: i64,
    pub incident_id: i64,
    pub step: i64,
    pub after_secs: i64,
    pub receivers: Vec<String>,
}

fn escalation_from_row(r: &AnyRow) -> Result<EscalationRecord, StoreError> {
    Ok(EscalationRecord {
        id: r.try_get("id")?,
        incident_id: r.try_get("incident_id")?,
        step: r.try_get("step")?,
        after_secs: r.try_get("after_secs")?,
        receivers: decode(&r.try_get::<String, _>("receivers")?)?,
    })
}

/// An outbox row as the API shows it and the worker claims it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OutboxRecord {
    pub id: i64,
    pub receiver: String,
    pub order_key: String,
    pub thread_key: String,
    pub action: Action,
    #[serde(skip)]
    pub payload: String,
    pub state: DeliveryState,
    pub attempts: i64,
    pub due_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub last_error: Option<String>,
    pub delivered_at: Option<DateTime<Utc>>,
}

const OUTBOX_COLUMNS: &str = "id, receiver, order_key, thread_key, action, payload, state, attempts, due_at, created_at, last_error, delivered_at";

fn outbox_from_row(r: &AnyRow) -> Result<OutboxRecord, StoreError> {
    let action: String = r.try_get("action")?;
    let state: String = r.try_get("state")?;
    Ok(OutboxRecord {
        id: r.try_get("id")?,
        receiver: r.try_get("receiver")?,
        order_key: r.try_get("order_key")?,
        thread_key: r.try_get("thread_key")?,
        action: Action::parse(&action).ok_or_else(|| StoreError::Decode(format!("outbox action {action}")))?,
        payload: r.try_get("payload")?,
        state: DeliveryState::parse(&state).ok_or_else(|| StoreError::Decode(format!("outbox state {state}")))?,
        attempts: r.try_get("attempts")?,
        due_at: from_millis(r.try_get("due_at")?),
        created_at: from_millis(r.try_get("created_at")?),
        last_error: r.try_get("last_error")?,
        delivered_at: r.try_get::<Option<i64>, _>("delivered_at")?.map(from_millis),
    })
}

/// What a new outbox row carries.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub receiver: String,
    pub order_key: String,
    pub thread_key: String,
    pub action: Action,
    pub payload: String,
}

/// Row locks that let several replicas claim due rows at once without waiting on each other (PostgreSQL);
/// SQLite has one writer and needs none.
fn skip_locked(engine: Engine) -> &'static str {
    match engine {
        Engine::Postgres => " FOR UPDATE SKIP LOCKED",
        Engine::Sqlite => "",
    }
}

macro_rules! q {
    ($sql:expr) => {
        sqlx::query(sqlx::AssertSqlSafe($sql))
    };
}

impl Store {
    /// Connects (creating the SQLite file and its directory when needed) and applies migrations.
    pub async fn connect(settings: &StorageSettings) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let url = settings.url.expose_secret().to_string();
        let engine = if url.starts_with("sqlite:") {
            Engine::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Engine::Postgres
        } else {
            return Err(StoreError::Config(
                "storage.url must start with sqlite: or postgres://".into(),
            ));
        };
        let url = if engine == Engine::Sqlite {
            let path = url
                .trim_start_matches("sqlite://")
                .trim_start_matches("sqlite:")
                .split('?')
                .next()
                .unwrap_or_default()
                .to_string();
            if path != ":memory:"
                && let Some(dir) = std::path::Path::new(&path).parent()
                && !dir.as_os_str().is_empty()
            {
                std::fs::create_dir_all(dir)
                    .map_err(|e| StoreError::Config(format!("cannot create {}: {e}", dir.display())))?;
            }
            if url.contains('?') {
                url
            } else {
                format!("{url}?mode=rwc")
            }
        } else {
            url
        };
        let options: AnyConnectOptions = url
            .parse()
            .map_err(|e: sqlx::Error| StoreError::Config(format!("storage.url is not valid: {e}")))?;
        let sync = settings.sqlite_synchronous;
        let pool = AnyPoolOptions::new()
            .max_connections(settings.max_connections.max(2))
            .acquire_timeout(std::time::Duration::from_secs(3))
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    if engine == Engine::Sqlite {
                        use sqlx::Executor;
                        conn.execute("PRAGMA journal_mode = WAL").await?;
                        conn.execute(match sync {
                            SqliteSynchronous::Normal => "PRAGMA synchronous = NORMAL",
                            SqliteSynchronous::Full => "PRAGMA synchronous = FULL",
                        })
                        .await?;
                        conn.execute("PRAGMA busy_timeout = 5000").await?;
                        // Keep the hot pages in memory instead of re-reading them through the kernel.
                        conn.execute("PRAGMA cache_size = -65536").await?;
                        conn.execute("PRAGMA mmap_size = 268435456").await?;
                        // Checkpoints run in the background (Store::checkpoint), not in the writer's commit.
                        conn.execute("PRAGMA wal_autocheckpoint = 0").await?;
                        conn.execute("PRAGMA foreign_keys = ON").await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        migrator(engine).run(&pool).await?;
        Ok(Self {
            pool,
            engine,
            write_lock: (engine == Engine::Sqlite).then(|| Arc::new(Mutex::new(()))),
        })
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    pub async fn begin(&self) -> Result<WriteTx, StoreError> {
        let guard = match &self.write_lock {
            Some(l) => Some(l.clone().lock_owned().await),
            None => None,
        };
        let tx = self.pool.begin().await?;
        Ok(WriteTx { tx, _guard: guard })
    }

    /// SQLite: copies the write-ahead log into the database without blocking the writer (PASSIVE), so commits
    /// never stall on a checkpoint. A no-op on PostgreSQL.
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        if self.engine == Engine::Sqlite {
            q!("PRAGMA wal_checkpoint(PASSIVE)").execute(&self.pool).await?;
        }
        Ok(())
    }

    pub async fn ping(&self) -> Result<(), StoreError> {
        q!("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    // ---------------------------------------------------------------- Applications

    /// Loads several Applications at once (team, state), for a batch of bodies.
    pub async fn load_apps(
        tx: &mut WriteTx,
        ids: &[AppId],
    ) -> Result<std::collections::HashMap<AppId, (String, AppState)>, StoreError> {
        let mut out = std::collections::HashMap::new();
        for chunk in ids.chunks(100) {
            let pairs = (0..chunk.len())
                .map(|i| format!("(${}, ${})", 2 * i + 1, 2 * i + 2))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!("SELECT team, state_json FROM apps WHERE (namespace, name) IN (VALUES {pairs})");
            let mut query = q!(sql);
            for id in chunk {
                query = query.bind(&id.namespace).bind(&id.name);
            }
            for r in query.fetch_all(&mut *tx.tx).await? {
                let state: AppState = decode(&r.try_get::<String, _>("state_json")?)?;
                out.insert(state.snapshot.app.clone(), (r.try_get("team")?, state));
            }
        }
        Ok(out)
    }

    /// The open incidents of several Applications at once.
    pub async fn open_incidents_of(
        tx: &mut WriteTx,
        ids: &[AppId],
    ) -> Result<std::collections::HashMap<AppId, Vec<IncidentRecord>>, StoreError> {
        let mut out: std::collections::HashMap<AppId, Vec<IncidentRecord>> = std::collections::HashMap::new();
        for chunk in ids.chunks(100) {
            let pairs = (0..chunk.len())
                .map(|i| format!("(${}, ${})", 2 * i + 1, 2 * i + 2))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE (namespace, name) IN (VALUES {pairs}) \
                 AND state IN ('pending', 'firing')"
            );
            let mut query = q!(sql);
            for id in chunk {
                query = query.bind(&id.namespace).bind(&id.name);
            }
            for r in query.fetch_all(&mut *tx.tx).await? {
                let rec = incident_from_row(&r)?;
                out.entry(rec.app.clone()).or_default().push(rec);
            }
        }
        Ok(out)
    }

    /// Upserts several Applications in one statement per chunk.
    pub async fn save_apps(tx: &mut WriteTx, rows: &[(&str, &AppState)]) -> Result<(), StoreError> {
        const COLS: usize = 13;
        for chunk in rows.chunks(32) {
            let values = (0..chunk.len())
                .map(|i| {
                    let p: Vec<String> = (1..=COLS).map(|c| format!("${}", i * COLS + c)).collect();
                    format!("({})", p.join(", "))
                })
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "INSERT INTO apps (namespace, name, uid, project, team, sync_status, health_status, sync_since, \
                 health_since, observed_at, last_seen, content_hash, state_json) VALUES {values} \
                 ON CONFLICT (namespace, name) DO UPDATE SET uid = excluded.uid, project = excluded.project, \
                 team = excluded.team, sync_status = excluded.sync_status, health_status = excluded.health_status, \
                 sync_since = excluded.sync_since, health_since = excluded.health_since, \
                 observed_at = excluded.observed_at, last_seen = excluded.last_seen, \
                 content_hash = excluded.content_hash, state_json = excluded.state_json"
            );
            let mut query = q!(sql);
            for (team, s) in chunk {
                let snap = &s.snapshot;
                query = query
                    .bind(snap.app.namespace.clone())
                    .bind(snap.app.name.clone())
                    .bind(snap.uid.clone())
                    .bind(snap.project.clone())
                    .bind(team.to_string())
                    .bind(snap.sync_status.clone())
                    .bind(snap.health_status.clone())
                    .bind(to_millis(s.sync_since))
                    .bind(to_millis(s.health_since))
                    .bind(to_millis(s.observed_at))
                    .bind(to_millis(s.last_seen))
                    .bind(s.content_hash.clone())
                    .bind(encode(s));
            }
            query.execute(&mut *tx.tx).await?;
        }
        Ok(())
    }

    /// Appends raw bodies, several per statement.
    pub async fn add_raws(tx: &mut WriteTx, rows: &[(AppId, DateTime<Utc>, &str, String)]) -> Result<(), StoreError> {
        for chunk in rows.chunks(64) {
            let values = (0..chunk.len())
                .map(|i| {
                    format!(
                        "(${}, ${}, ${}, ${}, ${})",
                        5 * i + 1,
                        5 * i + 2,
                        5 * i + 3,
                        5 * i + 4,
                        5 * i + 5
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!("INSERT INTO raw_events (received_at, namespace, name, outcome, body) VALUES {values}");
            let mut query = q!(sql);
            for (app, at, outcome, body) in chunk {
                query = query
                    .bind(to_millis(*at))
                    .bind(app.namespace.clone())
                    .bind(app.name.clone())
                    .bind(outcome.to_string())
                    .bind(body.clone());
            }
            query.execute(&mut *tx.tx).await?;
        }
        Ok(())
    }

    /// Appends timeline entries, several per statement.
    pub async fn add_transitions_many(
        tx: &mut WriteTx,
        rows: &[(AppId, DateTime<Utc>, Transition)],
    ) -> Result<(), StoreError> {
        for chunk in rows.chunks(64) {
            let values = (0..chunk.len())
                .map(|i| {
                    let p: Vec<String> = (1..=6).map(|c| format!("${}", i * 6 + c)).collect();
                    format!("({})", p.join(", "))
                })
                .collect::<Vec<_>>()
                .join(", ");
            let sql =
                format!("INSERT INTO transitions (namespace, name, at, field, from_value, to_value) VALUES {values}");
            let mut query = q!(sql);
            for (app, at, t) in chunk {
                query = query
                    .bind(app.namespace.clone())
                    .bind(app.name.clone())
                    .bind(to_millis(*at))
                    .bind(t.field.clone())
                    .bind(t.from.clone())
                    .bind(t.to.clone());
            }
            query.execute(&mut *tx.tx).await?;
        }
        Ok(())
    }

    pub async fn purge_raw(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let r = q!("DELETE FROM raw_events WHERE received_at < $1")
            .bind(to_millis(before))
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected())
    }

    pub async fn raw_bodies(&self, app: &AppId, limit: i64) -> Result<Vec<(DateTime<Utc>, String)>, StoreError> {
        let rows =
            q!("SELECT received_at, body FROM raw_events WHERE namespace = $1 AND name = $2 ORDER BY id DESC LIMIT $3")
                .bind(&app.namespace)
                .bind(&app.name)
                .bind(limit)
                .fetch_all(&self.pool)
                .await?;
        rows.iter()
            .map(|r| Ok((from_millis(r.try_get("received_at")?), r.try_get("body")?)))
            .collect()
    }

    pub async fn app(&self, app: &AppId) -> Result<Option<AppRecord>, StoreError> {
        let row = q!("SELECT team, state_json FROM apps WHERE namespace = $1 AND name = $2")
            .bind(&app.namespace)
            .bind(&app.name)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(AppRecord {
                team: r.try_get("team")?,
                state: decode(&r.try_get::<String, _>("state_json")?)?,
            })
        })
        .transpose()
    }

    /// Applications, optionally filtered by sync and health status, OutOfSync the longest first.
    pub async fn apps(
        &self,
        sync: Option<&str>,
        health: Option<&str>,
        limit: i64,
    ) -> Result<Vec<AppRecord>, StoreError> {
        let rows = q!(
            "SELECT team, state_json FROM apps WHERE ($1 = '' OR sync_status = $1) AND ($2 = '' OR health_status = $2) \
                       ORDER BY sync_since ASC, namespace, name LIMIT $3"
        )
        .bind(sync.unwrap_or(""))
        .bind(health.unwrap_or(""))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(AppRecord {
                    team: r.try_get("team")?,
                    state: decode(&r.try_get::<String, _>("state_json")?)?,
                })
            })
            .collect()
    }

    /// Applications whose stored state mentions a resource waiting to be pruned (`requires_pruning` or a
    /// `PruneSkipped` sync result): the rows behind `/v1/prune-pending`, without decoding every Application.
    pub async fn apps_with_pending_prunes(&self) -> Result<Vec<AppRecord>, StoreError> {
        let rows = q!(
            "SELECT team, state_json FROM apps WHERE state_json LIKE '%\"requires_pruning\":true%' \
                       OR state_json LIKE '%\"PruneSkipped\"%'"
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(AppRecord {
                    team: r.try_get("team")?,
                    state: decode(&r.try_get::<String, _>("state_json")?)?,
                })
            })
            .collect()
    }

    pub async fn app_counts(&self) -> Result<Vec<(String, String, i64)>, StoreError> {
        let rows = q!("SELECT sync_status, health_status, COUNT(*) AS n FROM apps GROUP BY sync_status, health_status")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("sync_status")?, r.try_get("health_status")?, r.try_get("n")?)))
            .collect()
    }

    pub async fn timeline(&self, app: &AppId, limit: i64) -> Result<Vec<TimelineEntry>, StoreError> {
        let rows = q!(
            "SELECT at, field, from_value, to_value FROM transitions WHERE namespace = $1 AND name = $2 \
                       ORDER BY id DESC LIMIT $3"
        )
        .bind(&app.namespace)
        .bind(&app.name)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<TimelineEntry> = rows
            .iter()
            .map(|r| {
                Ok(TimelineEntry {
                    at: from_millis(r.try_get("at")?),
                    field: r.try_get("field")?,
                    from: r.try_get("from_value")?,
                    to: r.try_get("to_value")?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        out.reverse();
        Ok(out)
    }

    // ---------------------------------------------------------------- Incidents

    pub async fn open_incidents(tx: &mut WriteTx, app: &AppId) -> Result<Vec<IncidentRecord>, StoreError> {
        Ok(Self::open_incidents_of(tx, std::slice::from_ref(app))
            .await?
            .remove(app)
            .unwrap_or_default())
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn insert_incident(
        tx: &mut WriteTx,
        view: &Incident,
        app: &AppId,
        state: IncidentState,
        since: DateTime<Utc>,
        fire_at: DateTime<Utc>,
        fired_at: Option<DateTime<Utc>>,
    ) -> Result<i64, StoreError> {
        let row = q!(
            "INSERT INTO incidents (fingerprint, kind, namespace, name, team, severity, state, since, fire_at, \
                      fired_at, view_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id"
        )
        .bind(&view.fingerprint)
        .bind(view.kind.as_str())
        .bind(&app.namespace)
        .bind(&app.name)
        .bind(&view.team)
        .bind(view.severity.as_str())
        .bind(state.as_str())
        .bind(to_millis(since))
        .bind(to_millis(fire_at))
        .bind(fired_at.map(to_millis))
        .bind(encode(view))
        .fetch_one(&mut *tx.tx)
        .await?;
        Ok(row.try_get("id")?)
    }

    /// Inserts pending incidents, several per statement.
    pub async fn insert_pending_incidents(tx: &mut WriteTx, rows: &[IncidentRecord]) -> Result<(), StoreError> {
        for chunk in rows.chunks(32) {
            let values = (0..chunk.len())
                .map(|i| {
                    let p: Vec<String> = (1..=10).map(|c| format!("${}", i * 10 + c)).collect();
                    format!("({})", p.join(", "))
                })
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "INSERT INTO incidents (fingerprint, kind, namespace, name, team, severity, state, since, fire_at, \
                 view_json) VALUES {values}"
            );
            let mut query = q!(sql);
            for r in chunk {
                query = query
                    .bind(r.fingerprint.clone())
                    .bind(r.kind.as_str())
                    .bind(r.app.namespace.clone())
                    .bind(r.app.name.clone())
                    .bind(r.team.clone())
                    .bind(r.severity.as_str())
                    .bind(r.state.as_str())
                    .bind(to_millis(r.since))
                    .bind(to_millis(r.fire_at))
                    .bind(encode(&r.view));
            }
            query.execute(&mut *tx.tx).await?;
        }
        Ok(())
    }

    /// Resolves pending incidents (nothing was sent for them), several per statement.
    pub async fn resolve_pending(tx: &mut WriteTx, ids: &[i64], at: DateTime<Utc>) -> Result<(), StoreError> {
        for chunk in ids.chunks(100) {
            let list = (0..chunk.len())
                .map(|i| format!("${}", i + 2))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!("UPDATE incidents SET state = 'resolved', resolved_at = $1 WHERE id IN ({list})");
            let mut query = q!(sql).bind(to_millis(at));
            for id in chunk {
                query = query.bind(*id);
            }
            query.execute(&mut *tx.tx).await?;
        }
        Ok(())
    }

    pub async fn incident(tx: &mut WriteTx, id: i64) -> Result<Option<IncidentRecord>, StoreError> {
        let row = q!(format!("SELECT {INCIDENT_COLUMNS} FROM incidents WHERE id = $1"))
            .bind(id)
            .fetch_optional(&mut *tx.tx)
            .await?;
        row.as_ref().map(incident_from_row).transpose()
    }

    pub async fn refresh_incident(tx: &mut WriteTx, id: i64, view: &Incident) -> Result<(), StoreError> {
        q!("UPDATE incidents SET view_json = $1, severity = $2, team = $3 WHERE id = $4")
            .bind(encode(view))
            .bind(view.severity.as_str())
            .bind(&view.team)
            .bind(id)
            .execute(&mut *tx.tx)
            .await?;
        Ok(())
    }

    pub async fn set_incident_state(
        tx: &mut WriteTx,
        id: i64,
        state: IncidentState,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let sql = match state {
            IncidentState::Firing => "UPDATE incidents SET state = 'firing', fired_at = $1 WHERE id = $2",
            IncidentState::Resolved => "UPDATE incidents SET state = 'resolved', resolved_at = $1 WHERE id = $2",
            IncidentState::Pending => "UPDATE incidents SET state = 'pending', fire_at = $1 WHERE id = $2",
        };
        q!(sql).bind(to_millis(at)).bind(id).execute(&mut *tx.tx).await?;
        Ok(())
    }

    pub async fn set_notified(tx: &mut WriteTx, id: i64, notified: bool) -> Result<(), StoreError> {
        q!("UPDATE incidents SET notified = $1 WHERE id = $2")
            .bind(notified as i64)
            .bind(id)
            .execute(&mut *tx.tx)
            .await?;
        Ok(())
    }

    /// Claims pending incidents whose `for` has elapsed (lease so another replica skips them meanwhile).
    pub async fn claim_due_incidents(
        tx: &mut WriteTx,
        engine: Engine,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<IncidentRecord>, StoreError> {
        let lock = skip_locked(engine);
        let sql = format!(
            "UPDATE incidents SET lease_until = $1 WHERE id IN (SELECT id FROM incidents WHERE state = 'pending' \
             AND fire_at <= $2 AND lease_until < $2 ORDER BY fire_at LIMIT $3{lock}) RETURNING {INCIDENT_COLUMNS}"
        );
        let rows = q!(sql)
            .bind(to_millis(lease_until))
            .bind(to_millis(now))
            .bind(limit)
            .fetch_all(&mut *tx.tx)
            .await?;
        rows.iter().map(incident_from_row).collect()
    }

    /// Firing incidents that were silenced when they fired (not notified yet).
    pub async fn unnotified_firing(tx: &mut WriteTx, limit: i64) -> Result<Vec<IncidentRecord>, StoreError> {
        let rows = q!(format!(
            "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE state = 'firing' AND notified = 0 ORDER BY id LIMIT $1"
        ))
        .bind(limit)
        .fetch_all(&mut *tx.tx)
        .await?;
        rows.iter().map(incident_from_row).collect()
    }

    pub async fn incidents(
        &self,
        state: Option<IncidentState>,
        team: Option<&str>,
        kind: Option<Kind>,
        app: Option<&AppId>,
        limit: i64,
    ) -> Result<Vec<IncidentRecord>, StoreError> {
        let (ns, name) = app.map(|a| (a.namespace.as_str(), a.name.as_str())).unwrap_or(("", ""));
        let rows = q!(format!(
            "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE ($1 = '' OR state = $1) AND ($2 = '' OR team = $2) \
             AND ($3 = '' OR kind = $3) AND ($4 = '' OR (namespace = $4 AND name = $5)) ORDER BY id DESC LIMIT $6"
        ))
        .bind(state.map_or("", IncidentState::as_str))
        .bind(team.unwrap_or(""))
        .bind(kind.map_or("", Kind::as_str))
        .bind(ns)
        .bind(name)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(incident_from_row).collect()
    }

    pub async fn incident_counts(&self) -> Result<Vec<(String, String, String, i64)>, StoreError> {
        let rows = q!(
            "SELECT state, kind, team, COUNT(*) AS n FROM incidents WHERE state IN ('pending', 'firing') \
                       GROUP BY state, kind, team"
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("state")?,
                    r.try_get("kind")?,
                    r.try_get("team")?,
                    r.try_get("n")?,
                ))
            })
            .collect()
    }

    // ---------------------------------------------------------------- Groups

    /// Adds (or updates) an incident in the (receiver, key) group and schedules the group's flush.
    pub async fn add_to_group(
        tx: &mut WriteTx,
        receiver: &str,
        key: &str,
        incident_id: i64,
        status: IncidentState,
        now: DateTime<Utc>,
        timing: &crate::configuration::GroupingSettings,
    ) -> Result<(), StoreError> {
        let now_ms = to_millis(now);
        let wait = timing.group_wait.as_millis() as i64;
        let interval = timing.group_interval.as_millis() as i64;
        q!("INSERT INTO notify_groups (receiver, group_key, active, generation, next_flush_at) VALUES ($1, $2, 0, 0, $3) \
            ON CONFLICT (receiver, group_key) DO NOTHING")
        .bind(receiver)
        .bind(key)
        .bind(now_ms + wait)
        .execute(&mut *tx.tx)
        .await?;
        let row = q!(
            "SELECT id, active, next_flush_at, last_flush_at FROM notify_groups WHERE receiver = $1 AND group_key = $2"
        )
        .bind(receiver)
        .bind(key)
        .fetch_one(&mut *tx.tx)
        .await?;
        let id: i64 = row.try_get("id")?;
        let active = row.try_get::<i64, _>("active")? != 0;
        let next: Option<i64> = row.try_get("next_flush_at")?;
        let last: Option<i64> = row.try_get("last_flush_at")?;
        // A new group waits group_wait; a group that already notified waits group_interval since its last flush.
        let earliest = match (active, last) {
            (true, Some(l)) => (l + interval).max(now_ms),
            _ => now_ms + wait,
        };
        let next = Some(match next {
            Some(n) => n.min(earliest.max(now_ms)),
            None => earliest,
        });
        q!("UPDATE notify_groups SET next_flush_at = $1 WHERE id = $2")
            .bind(next)
            .bind(id)
            .execute(&mut *tx.tx)
            .await?;
        q!(
            "INSERT INTO group_members (group_id, incident_id, status, dirty) VALUES ($1, $2, $3, 1) \
            ON CONFLICT (group_id, incident_id) DO UPDATE SET status = excluded.status, dirty = 1"
        )
        .bind(id)
        .bind(incident_id)
        .bind(status.as_str())
        .execute(&mut *tx.tx)
        .await?;
        Ok(())
    }

    /// The groups an incident is in, with their receivers.
    pub async fn groups_of(tx: &mut WriteTx, incident_id: i64) -> Result<Vec<(String, String)>, StoreError> {
        let rows = q!(
            "SELECT g.receiver, g.group_key FROM notify_groups g JOIN group_members m ON m.group_id = g.id \
                       WHERE m.incident_id = $1"
        )
        .bind(incident_id)
        .fetch_all(&mut *tx.tx)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("receiver")?, r.try_get("group_key")?)))
            .collect()
    }

    pub async fn remove_member(tx: &mut WriteTx, incident_id: i64, receiver: &str) -> Result<(), StoreError> {
        q!("DELETE FROM group_members WHERE incident_id = $1 AND group_id IN \
            (SELECT id FROM notify_groups WHERE receiver = $2)")
        .bind(incident_id)
        .bind(receiver)
        .execute(&mut *tx.tx)
        .await?;
        Ok(())
    }

    pub async fn claim_due_groups(
        tx: &mut WriteTx,
        engine: Engine,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<GroupRecord>, StoreError> {
        let lock = skip_locked(engine);
        let rows = q!(format!(
            "SELECT id, receiver, group_key, active, generation, last_flush_at FROM notify_groups \
             WHERE next_flush_at IS NOT NULL AND next_flush_at <= $1 ORDER BY next_flush_at LIMIT $2{lock}"
        ))
        .bind(to_millis(now))
        .bind(limit)
        .fetch_all(&mut *tx.tx)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(GroupRecord {
                    id: r.try_get("id")?,
                    receiver: r.try_get("receiver")?,
                    group_key: r.try_get("group_key")?,
                    active: r.try_get::<i64, _>("active")? != 0,
                    generation: r.try_get("generation")?,
                    last_flush_at: r.try_get::<Option<i64>, _>("last_flush_at")?.map(from_millis),
                })
            })
            .collect()
    }

    pub async fn members(tx: &mut WriteTx, group_id: i64) -> Result<Vec<MemberRecord>, StoreError> {
        let cols: String = INCIDENT_COLUMNS
            .split(", ")
            .map(|c| format!("i.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let rows = q!(format!(
            "SELECT {cols}, m.status AS member_status, m.dirty AS member_dirty FROM group_members m \
             JOIN incidents i ON i.id = m.incident_id WHERE m.group_id = $1 ORDER BY i.namespace, i.name, i.id"
        ))
        .bind(group_id)
        .fetch_all(&mut *tx.tx)
        .await?;
        rows.iter()
            .map(|r| {
                let status: String = r.try_get("member_status")?;
                Ok(MemberRecord {
                    incident: incident_from_row(r)?,
                    status: IncidentState::parse(&status)
                        .ok_or_else(|| StoreError::Decode(format!("group member status {status}")))?,
                    dirty: r.try_get::<i64, _>("member_dirty")? != 0,
                })
            })
            .collect()
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
        q!("DELETE FROM group_members WHERE group_id = $1 AND status = 'resolved'")
            .bind(group_id)
            .execute(&mut *tx.tx)
            .await?;
        q!("UPDATE group_members SET dirty = 0 WHERE group_id = $1")
            .bind(group_id)
            .execute(&mut *tx.tx)
            .await?;
        q!("UPDATE notify_groups SET active = $1, generation = $2, last_flush_at = $3, next_flush_at = $4 WHERE id = $5")
            .bind(active as i64)
            .bind(generation)
            .bind(to_millis(now))
            .bind(next_flush_at.map(to_millis))
            .bind(group_id)
            .execute(&mut *tx.tx)
            .await?;
        Ok(())
    }

    // ---------------------------------------------------------------- Escalations

    pub async fn add_escalation(
        tx: &mut WriteTx,
        incident_id: i64,
        step: i64,
        after_secs: i64,
        due_at: DateTime<Utc>,
        receivers: &[String],
    ) -> Result<(), StoreError> {
        q!("INSERT INTO escalations (incident_id, step, after_secs, due_at, receivers) VALUES ($1, $2, $3, $4, $5)")
            .bind(incident_id)
            .bind(step)
            .bind(after_secs)
            .bind(to_millis(due_at))
            .bind(encode(&receivers))
            .execute(&mut *tx.tx)
            .await?;
        Ok(())
    }

    pub async fn claim_due_escalations(
        tx: &mut WriteTx,
        engine: Engine,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<EscalationRecord>, StoreError> {
        let lock = skip_locked(engine);
        let rows = q!(format!(
            "SELECT id, incident_id, step, after_secs, receivers FROM escalations WHERE done = 0 AND due_at <= $1 \
             ORDER BY due_at LIMIT $2{lock}"
        ))
        .bind(to_millis(now))
        .bind(limit)
        .fetch_all(&mut *tx.tx)
        .await?;
        rows.iter().map(escalation_from_row).collect()
    }

    pub async fn finish_escalation(tx: &mut WriteTx, id: i64) -> Result<(), StoreError> {
        q!("UPDATE escalations SET done = 1 WHERE id = $1")
            .bind(id)
            .execute(&mut *tx.tx)
            .await?;
        Ok(())
    }

    /// Cancels the steps not reached yet; returns the receivers of the steps already sent.
    pub async fn cancel_escalations(tx: &mut WriteTx, incident_id: i64) -> Result<Vec<EscalationRecord>, StoreError> {
        q!("DELETE FROM escalations WHERE incident_id = $1 AND done = 0")
            .bind(incident_id)
            .execute(&mut *tx.tx)
            .await?;
        let rows = q!("SELECT id, incident_id, step, after_secs, receivers FROM escalations WHERE incident_id = $1")
            .bind(incident_id)
            .fetch_all(&mut *tx.tx)
            .await?;
        rows.iter().map(escalation_from_row).collect()
    }

    // ---------------------------------------------------------------- Outbox

    pub async fn enqueue(tx: &mut WriteTx, d: &NewDelivery, now: DateTime<Utc>) -> Result<i64, StoreError> {
        let row = q!("INSERT INTO outbox (receiver, order_key, thread_key, action, payload, state, attempts, due_at, created_at) \
                      VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6) RETURNING id")
        .bind(&d.receiver)
        .bind(&d.order_key)
        .bind(&d.thread_key)
        .bind(d.action.as_str())
        .bind(&d.payload)
        .bind(to_millis(now))
        .fetch_one(&mut *tx.tx)
        .await?;
        Ok(row.try_get("id")?)
    }

    /// Claims due deliveries, the oldest pending one per order key only (open before update before resolve).
    pub async fn claim_deliveries(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<OutboxRecord>, StoreError> {
        let lock = skip_locked(self.engine);
        let sql = format!(
            "UPDATE outbox SET lease_owner = $1, lease_until = $2, attempts = attempts + 1 WHERE id IN (\
             SELECT o.id FROM outbox o WHERE o.state = 'pending' AND o.due_at <= $3 AND o.lease_until < $3 \
             AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.order_key = o.order_key AND p.state = 'pending' AND p.id < o.id) \
             ORDER BY o.due_at, o.id LIMIT $4{lock}) RETURNING {OUTBOX_COLUMNS}"
        );
        let mut tx = self.begin().await?;
        let rows = q!(sql)
            .bind(owner)
            .bind(to_millis(lease_until))
            .bind(to_millis(now))
            .bind(limit)
            .fetch_all(&mut *tx.tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(outbox_from_row).collect()
    }

    pub async fn memo(&self, receiver: &str, thread_key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let row = q!("SELECT memo FROM memos WHERE receiver = $1 AND thread_key = $2")
            .bind(receiver)
            .bind(thread_key)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| decode(&r.try_get::<String, _>("memo")?)).transpose()
    }

    /// Records a successful delivery (and the receiver's memo) in one transaction.
    pub async fn delivered(
        &self,
        row: &OutboxRecord,
        memo: Option<&serde_json::Value>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        q!("UPDATE outbox SET state = 'done', delivered_at = $1, lease_until = 0, last_error = NULL WHERE id = $2")
            .bind(to_millis(now))
            .bind(row.id)
            .execute(&mut *tx.tx)
            .await?;
        if let Some(m) = memo {
            q!(
                "INSERT INTO memos (receiver, thread_key, memo, updated_at) VALUES ($1, $2, $3, $4) \
                ON CONFLICT (receiver, thread_key) DO UPDATE SET memo = excluded.memo, updated_at = excluded.updated_at"
            )
            .bind(&row.receiver)
            .bind(&row.thread_key)
            .bind(encode(m))
            .bind(to_millis(now))
            .execute(&mut *tx.tx)
            .await?;
        }
        tx.commit().await
    }

    /// Records a failed attempt: retry at `retry_at`, or dead.
    pub async fn failed(&self, id: i64, error: &str, retry_at: Option<DateTime<Utc>>) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        match retry_at {
            Some(at) => {
                q!("UPDATE outbox SET due_at = $1, lease_until = 0, last_error = $2 WHERE id = $3")
                    .bind(to_millis(at))
                    .bind(error)
                    .bind(id)
                    .execute(&mut *tx.tx)
                    .await?
            }
            None => {
                q!("UPDATE outbox SET state = 'dead', lease_until = 0, last_error = $1 WHERE id = $2")
                    .bind(error)
                    .bind(id)
                    .execute(&mut *tx.tx)
                    .await?
            }
        };
        tx.commit().await
    }

    /// Gives a lease back without counting the attempt (graceful shutdown).
    pub async fn release(&self, id: i64) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        q!("UPDATE outbox SET lease_until = 0, attempts = attempts - 1 WHERE id = $1 AND state = 'pending'")
            .bind(id)
            .execute(&mut *tx.tx)
            .await?;
        tx.commit().await
    }

    /// Puts a dead row back in the queue. Returns false when there is no dead row with that id.
    pub async fn retry_dead(&self, id: i64, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let r = q!(
            "UPDATE outbox SET state = 'pending', due_at = $1, created_at = $1, attempts = 0, lease_until = 0 \
                    WHERE id = $2 AND state = 'dead'"
        )
        .bind(to_millis(now))
        .bind(id)
        .execute(&mut *tx.tx)
        .await?;
        tx.commit().await?;
        Ok(r.rows_affected() == 1)
    }

    pub async fn outbox(&self, state: Option<DeliveryState>, limit: i64) -> Result<Vec<OutboxRecord>, StoreError> {
        let rows = q!(format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE ($1 = '' OR state = $1) ORDER BY id DESC LIMIT $2"
        ))
        .bind(state.map_or("", DeliveryState::as_str))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(outbox_from_row).collect()
    }

    pub async fn outbox_counts(&self) -> Result<Vec<(String, String, i64)>, StoreError> {
        let rows = q!("SELECT receiver, state, COUNT(*) AS n FROM outbox WHERE state IN ('pending', 'dead') GROUP BY receiver, state")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("receiver")?, r.try_get("state")?, r.try_get("n")?)))
            .collect()
    }

    // ---------------------------------------------------------------- Silences

    pub async fn add_silence(&self, s: &Silence) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        q!(
            "INSERT INTO silences (id, matchers, starts_at, ends_at, created_by, comment, created_at) \
            VALUES ($1, $2, $3, $4, $5, $6, $7)"
        )
        .bind(&s.id)
        .bind(encode(&s.matchers))
        .bind(to_millis(s.starts_at))
        .bind(to_millis(s.ends_at))
        .bind(&s.created_by)
        .bind(&s.comment)
        .bind(to_millis(s.created_at))
        .execute(&mut *tx.tx)
        .await?;
        tx.commit().await
    }

    /// Ends a silence now. Returns false when it does not exist or has already ended.
    pub async fn expire_silence(&self, id: &str, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let r = q!("UPDATE silences SET ends_at = $1 WHERE id = $2 AND ends_at > $1")
            .bind(to_millis(now))
            .bind(id)
            .execute(&mut *tx.tx)
            .await?;
        tx.commit().await?;
        Ok(r.rows_affected() == 1)
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
