//! All SQL. One [`Store`] over sqlx's `Any` driver so the same statements run on SQLite (embedded default, WAL) and
//! PostgreSQL (several replicas); the few engine differences (claims with `FOR UPDATE SKIP LOCKED`, JSON queries) are
//! chosen in this module and nowhere else. Times are stored as epoch milliseconds, documents as JSON text.
//!
//! This file owns the connection: [`Store`], [`WriteTx`], [`StoreError`], [`Engine`], migrations, and the helpers
//! every table uses (the `q!` macro, JSON encode/decode, the `VALUES` placeholder list, `WriteTx::exec` and `rows`,
//! the claim or lease of due rows with `skip_locked`). Each table family has its own file, each adding to
//! `impl Store`: `apps` (Applications, timeline), `raws` (the raw bodies, stored as differences), `incidents`,
//! `groups` (notification groups and their members), `escalations`, `outbox` (deliveries and receiver memos),
//! `silences`, `digests` (digest slots).
//!
//! Writes happen in [`WriteTx`]: on SQLite one writer at a time (an in-process lock, so writers queue instead of
//! spinning on SQLITE_BUSY); on PostgreSQL plain transactions with row locks.
//!
//! One calling rule for the whole store: work that is part of a larger write (the pipeline's one transaction per
//! request, a worker's claim) is an associated function taking `&mut WriteTx` (`Store::save_apps(&mut tx, …)`), so
//! the caller decides when it commits; standalone reads and self-contained writes are `&self` methods
//! (`store.silences(…)`, `store.failed(…)`). Those reads use the pool; those writes open and commit their own short
//! transaction (`write_one` for a single statement), so on SQLite they queue for the writer lock like the rest.

use std::borrow::Cow;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use secrecy::ExposeSecret;
use sqlx::AnyConnection;
use sqlx::any::{AnyArguments, AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{Any, AnyPool, SqlSafeStr, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::argocd::AppId;
use crate::clock::to_millis;
use crate::configuration::{SqliteSynchronous, StorageSettings};

/// Builds a query from SQL assembled at run time (column lists, `VALUES` lists, engine clauses). Every value still
/// goes through a bind; only trusted fragments are formatted in.
macro_rules! q {
    ($sql:expr) => {
        sqlx::query(sqlx::AssertSqlSafe($sql))
    };
}

mod access;
mod apps;
mod digests;
mod escalations;
mod groups;
mod incidents;
mod leases;
mod links;
mod listing_guard;
mod outbox;
mod raws;
mod silences;
mod slack_requests;
mod storms;
mod timers;

pub use apps::{AppCursor, AppFilter, AppRecord, StoredApp, TimelineEntry};
pub use digests::{DigestSlot, SlotState};
pub use escalations::EscalationRecord;
pub use groups::{GroupRecord, MemberRecord};
pub use incidents::{IncidentFilter, IncidentRecord};
pub use listing_guard::HeldDropRow;
pub use outbox::{AboutDelivery, Headline, HistoryBound, ListedDelivery, NewDelivery, OutboxRecord};
pub use raws::{Dictionaries, DictionaryUse, MAX_CHAIN, RawChain, chain_gap};
pub use storms::{StormCount, StormMember};

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
    /// Another replica wrote an Application since this one read it (the version did not match): read it again.
    #[error("an Application was changed by another writer at the same time")]
    Conflict,
}

impl StoreError {
    /// Whether the work may be done again at once on what is stored now: another replica wrote one of its
    /// Applications ([`StoreError::Conflict`]), or PostgreSQL chose its transaction as a deadlock's victim (40P01)
    /// or could not serialize it (40001). Nothing of it was written.
    pub fn is_conflict(&self) -> bool {
        match self {
            StoreError::Conflict => true,
            StoreError::Db(sqlx::Error::Database(e)) => matches!(e.code().as_deref(), Some("40P01" | "40001")),
            _ => false,
        }
    }

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
        ) || matches!(self, StoreError::Db(sqlx::Error::Database(_)) | StoreError::Conflict)
    }
}

fn decode<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Decode(e.to_string()))
}

fn encode<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// zstd level for stored documents and bodies: a fast level (literals left as they are), about 4:1 on Argo CD JSON
/// at a third of level 1's cost, which spends most of its time building entropy tables for these small inputs.
const ZSTD_LEVEL: i32 = -1;

thread_local! {
    /// One compression context per thread, reused: a fresh one per body costs more than compressing it.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::zstd_safe::CCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
    /// Reused buffers for a document's JSON and for compressed output before it is copied out at its size: a large
    /// allocation per body made the allocator consolidate its free lists each time (a tenth of the CPU).
    static JSON_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    static OUT_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A zstd error code while compressing, as the store's error.
fn cannot_compress(code: usize) -> StoreError {
    StoreError::Decode(format!("cannot compress: {}", zstd::zstd_safe::get_error_name(code)))
}

/// `bytes` zstd-compressed, with `dictionary` (empty: none). A frame made with a dictionary carries a checksum, so
/// reading it with another dictionary is an error rather than other bytes ([`decompress_with`]).
fn compress_with(bytes: &[u8], dictionary: &[u8]) -> Result<Vec<u8>, StoreError> {
    use zstd::zstd_safe::{CCtx, CParameter};
    let failed = cannot_compress;
    OUT_BUFFER.with(|out| {
        let out = &mut *out.borrow_mut();
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(bytes.len()));
        COMPRESSOR.with(|cell| {
            let mut cell = cell.borrow_mut();
            let cctx = cell.get_or_insert_with(CCtx::create);
            cctx.set_parameter(CParameter::CompressionLevel(ZSTD_LEVEL))
                .map_err(failed)?;
            cctx.set_parameter(CParameter::ChecksumFlag(!dictionary.is_empty()))
                .map_err(failed)?;
            if dictionary.is_empty() {
                return cctx.compress2(out, bytes).map_err(failed);
            }
            cctx.load_dictionary(dictionary).map_err(failed)?;
            let written = cctx.compress2(out, bytes).map_err(failed);
            // The dictionary is not kept for the next body (nor its memory).
            cctx.load_dictionary(&[]).map_err(failed)?;
            written
        })?;
        Ok(out.as_slice().to_vec())
    })
}

/// `bytes`, zstd-compressed (with no dictionary this only fails to allocate: then an empty frame, which reads as
/// an error, not as other bytes).
fn compress(bytes: &[u8]) -> Vec<u8> {
    compress_with(bytes, &[]).unwrap_or_default()
}

/// The dictionary stored documents are compressed with (Application states, incident views, delivery payloads):
/// documents as Herald writes them, made from the Application objects in `tests/fixtures/argocd/objects` by
/// `scripts/dictionary/make.py`. A document finds its keys and Herald's own texts in it and stores in about half
/// the bytes (a view of 1.4 KB: 880 bytes alone, 430 with it).
///
/// It is part of the storage format: every document is read with it, and documents written before it (compressed
/// alone) read the same with it (they never refer to it). Never change the file; another dictionary would need a
/// marker in each row.
static DOCUMENTS: &[u8] = include_bytes!("documents.dict");

/// How hard a document is compressed: with [`ZSTD_LEVEL`] (`Fast`) when it is rewritten often or large (an
/// Application's state, written on every change; a delivery's payload), at level 6 (`Kept`) when it stays for the
/// history and is small (an incident's view, a change's transitions): the entropy coding and longer search pay there
/// (an incident view of 1.3 KB stores in 390 bytes at -1, 333 at 6) and cost about 10 µs a document: every
/// document at 6 put zstd at 12.7 % of `herald-bench`'s CPU, 9.3 % with states and payloads at -1.
#[derive(Debug, Clone, Copy)]
enum Effort {
    Fast,
    Kept,
}

/// [`DOCUMENTS`] prepared for compressing at each [`Effort`].
static DOCUMENTS_FAST: std::sync::LazyLock<zstd::zstd_safe::CDict<'static>> =
    std::sync::LazyLock::new(|| zstd::zstd_safe::CDict::create(DOCUMENTS, ZSTD_LEVEL));
static DOCUMENTS_KEPT: std::sync::LazyLock<zstd::zstd_safe::CDict<'static>> =
    std::sync::LazyLock::new(|| zstd::zstd_safe::CDict::create(DOCUMENTS, KEPT_LEVEL));

/// zstd level for [`Effort::Kept`].
const KEPT_LEVEL: i32 = 6;

/// One compression context for documents, which refers to the prepared [`DOCUMENTS`] of each document's effort:
/// not one per thread (each thread's context sized for the dictionary cost resident memory on every thread that
/// wrote a document), nor one per effort (its tables are sized for the larger and reused).
static DOCUMENT_COMPRESSOR: std::sync::LazyLock<std::sync::Mutex<zstd::zstd_safe::CCtx<'static>>> =
    std::sync::LazyLock::new(|| std::sync::Mutex::new(zstd::zstd_safe::CCtx::create()));

/// A stored document, zstd-compressed with [`DOCUMENTS`] at `effort`; an empty frame, which reads as an error, if
/// compressing fails (it only fails to allocate).
fn compress_doc(bytes: &[u8], effort: Effort) -> Vec<u8> {
    let dictionary: &'static zstd::zstd_safe::CDict<'static> = match effort {
        Effort::Fast => &DOCUMENTS_FAST,
        Effort::Kept => &DOCUMENTS_KEPT,
    };
    let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(bytes.len()));
    let mut cctx = DOCUMENT_COMPRESSOR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match cctx.ref_cdict(dictionary).and_then(|_| cctx.compress2(&mut out, bytes)) {
        Ok(_) => {
            out.shrink_to_fit();
            out
        }
        Err(_) => Vec::new(),
    }
}

/// [`DOCUMENTS`] prepared for reading once (not loaded per document).
static DOCUMENTS_FOR_READING: std::sync::LazyLock<zstd::zstd_safe::DDict<'static>> =
    std::sync::LazyLock::new(|| zstd::zstd_safe::DDict::create(DOCUMENTS));

/// A stored document decompressed (with [`DOCUMENTS`], whether or not it was written with it).
fn decompress_doc(frame: &[u8]) -> Result<Vec<u8>, StoreError> {
    decompress_by(frame, "compressed document", |dctx, out| {
        dctx.decompress_using_ddict(out, frame, &DOCUMENTS_FOR_READING)
    })
}

/// The largest document or body a stored frame may claim to hold: anything above is a damaged row, not an
/// allocation to try.
const MAX_FRAME_CONTENT: u64 = 256 << 20;

thread_local! {
    /// One decompression context per thread, reused: creating one allocates and clears more than a stored
    /// document's whole size, which made it the dearest part of reading a page of incidents.
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::zstd_safe::DCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// `frame` (one zstd frame that records its size) decompressed, with `dictionary` (empty: none). `what` names the
/// column in the error.
fn decompress_with(frame: &[u8], dictionary: &[u8], what: &str) -> Result<Vec<u8>, StoreError> {
    decompress_by(frame, what, |dctx, out| {
        dctx.decompress_using_dict(out, frame, dictionary)
    })
}

/// `frame` decompressed by `run` with the thread's context, into a buffer of the size the frame records.
fn decompress_by(
    frame: &[u8],
    what: &str,
    run: impl FnOnce(&mut zstd::zstd_safe::DCtx<'static>, &mut Vec<u8>) -> zstd::zstd_safe::SafeResult,
) -> Result<Vec<u8>, StoreError> {
    let broken = |why: &str| StoreError::Decode(format!("{what}: {why}"));
    let size = match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(n)) if n <= MAX_FRAME_CONTENT => n as usize,
        _ => return Err(broken("no valid size")),
    };
    let mut out = Vec::with_capacity(size);
    DECOMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        let dctx = cell.get_or_insert_with(zstd::zstd_safe::DCtx::create);
        run(dctx, &mut out).map_err(|e| broken(zstd::zstd_safe::get_error_name(e)))
    })?;
    Ok(out)
}

fn decompress(bytes: &[u8]) -> Result<Vec<u8>, StoreError> {
    decompress_with(bytes, &[], "compressed column")
}

/// A document as stored in a compressed column: JSON, zstd-compressed at `effort`.
fn encode_doc<T: serde::Serialize>(v: &T, effort: Effort) -> Vec<u8> {
    JSON_BUFFER.with(|json| {
        let json = &mut *json.borrow_mut();
        json.clear();
        if serde_json::to_writer(&mut *json, v).is_err() {
            json.clear();
            json.extend_from_slice(b"null");
        }
        compress_doc(json, effort)
    })
}

fn decode_doc<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(&decompress_doc(bytes)?).map_err(|e| StoreError::Decode(e.to_string()))
}

/// A stored text column that must be one of an enum's names (`parse` returns `None` for anything else).
fn parse_column<T>(what: &str, value: String, parse: impl FnOnce(&str) -> Option<T>) -> Result<T, StoreError> {
    parse(&value).ok_or_else(|| StoreError::Decode(format!("{what} {value}")))
}

/// A query whose arguments are owned (binds copy their values), so helpers can pass it around.
type AnyQuery = sqlx::query::Query<'static, Any, AnyArguments>;

/// Decodes one row of a query's answer (`incident_from_row`, `outbox_from_row`, …).
type FromRow<T> = fn(&AnyRow) -> Result<T, StoreError>;

/// The placeholders of a multi-row `VALUES` list: `rows` groups of `cols`, numbered from `$first`.
/// `values(2, 2, 1)` is `($1, $2), ($3, $4)`.
fn values(rows: usize, cols: usize, first: usize) -> String {
    (0..rows)
        .map(|row| {
            let row_first = first + row * cols;
            let params: Vec<String> = (row_first..row_first + cols).map(|n| format!("${n}")).collect();
            format!("({})", params.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The placeholders of a multi-row `VALUES` list that holds all of a statement's parameters. SQLite gets anonymous
/// `?`: it looks a numbered parameter's name up in a list, once per parameter, which is quadratic in a statement of
/// several hundred parameters (a tenth of the writer's time before this); PostgreSQL gets `$1…`.
fn placeholders(engine: Engine, rows: usize, cols: usize) -> String {
    match engine {
        Engine::Postgres => values(rows, cols, 1),
        Engine::Sqlite => {
            let row = format!("({})", vec!["?"; cols].join(", "));
            vec![row; rows].join(", ")
        }
    }
}

/// Runs one statement per chunk of `rows` (`per_statement` rows each, to stay under the engines' parameter limits).
/// `sql` gets the chunk's `VALUES` list (`cols` placeholders a row, from `$1`); `bind` binds one row in that order.
/// Answers, per chunk, its number of rows and how many rows its statement affected (for optimistic checks).
async fn execute_in_chunks<T>(
    tx: &mut WriteTx,
    rows: &[T],
    per_statement: usize,
    cols: usize,
    sql: impl Fn(&str) -> String,
    bind: impl Fn(AnyQuery, &T) -> AnyQuery,
) -> Result<Vec<(usize, u64)>, StoreError> {
    let mut affected = Vec::new();
    for chunk in rows.chunks(per_statement) {
        let query = chunk
            .iter()
            .fold(q!(sql(&placeholders(tx.engine, chunk.len(), cols))), &bind);
        affected.push((chunk.len(), tx.exec(query).await?));
    }
    Ok(affected)
}

/// The rows of a query about several Applications, 100 at a time: `sql` gets the `VALUES` list of a chunk's
/// `(instance, namespace, name)` triples, for a `WHERE (instance, namespace, name) IN (VALUES …)` (which SQLite
/// answers with one index search per triple; a join with the `VALUES` made it walk every firing incident).
async fn fetch_for_apps(
    tx: &mut WriteTx,
    ids: &[AppId],
    sql: impl Fn(&str) -> String,
) -> Result<Vec<AnyRow>, StoreError> {
    fetch_for_apps_on(&mut tx.tx, tx.engine, ids, sql).await
}

/// [`fetch_for_apps`] on any connection (a pooled one for reads outside a write transaction).
async fn fetch_for_apps_on(
    conn: &mut AnyConnection,
    engine: Engine,
    ids: &[AppId],
    sql: impl Fn(&str) -> String,
) -> Result<Vec<AnyRow>, StoreError> {
    let mut out = Vec::new();
    for chunk in ids.chunks(100) {
        let query = chunk
            .iter()
            .fold(q!(sql(&placeholders(engine, chunk.len(), 3))), |q, id| {
                q.bind(&id.instance).bind(&id.namespace).bind(&id.name)
            });
        out.extend(query.fetch_all(&mut *conn).await?);
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// Row locks that let several replicas claim due rows at once without waiting on each other (PostgreSQL);
/// SQLite has one writer and needs none.
fn skip_locked(engine: Engine) -> &'static str {
    match engine {
        Engine::Postgres => " FOR UPDATE SKIP LOCKED",
        Engine::Sqlite => "",
    }
}

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    /// SQLite: the one connection write transactions use (`None`: they take one from `pool`). One writer at a time
    /// is all SQLite allows anyway; with its own connection the pages and prepared statements it needs are cached
    /// once, not in each of the pool's connections in turn (8 copies, a third of the process's memory under load).
    writer: Option<AnyPool>,
    engine: Engine,
    write_lock: Option<Arc<Mutex<()>>>,
}

/// A write transaction (holding the SQLite writer lock, where there is one).
pub struct WriteTx {
    pub tx: Transaction<'static, Any>,
    engine: Engine,
    _guard: Option<OwnedMutexGuard<()>>,
}

impl WriteTx {
    pub async fn commit(self) -> Result<(), StoreError> {
        self.tx.commit().await?;
        Ok(())
    }

    /// Runs one statement in this transaction; answers how many rows it affected.
    async fn exec(&mut self, query: AnyQuery) -> Result<u64, StoreError> {
        Ok(query.execute(&mut *self.tx).await?.rows_affected())
    }

    /// The rows a query answers in this transaction, each decoded by `from_row`.
    async fn rows<T>(&mut self, query: AnyQuery, from_row: FromRow<T>) -> Result<Vec<T>, StoreError> {
        query.fetch_all(&mut *self.tx).await?.iter().map(from_row).collect()
    }

    /// `pick`, a `SELECT` of the rows due at `$1` (soonest first), limited to `$2` rows and, on PostgreSQL, locked
    /// in a way other replicas skip instead of waiting on, so two workers never claim the same row.
    fn due(&self, pick: &str) -> String {
        format!("{pick} LIMIT $2{}", skip_locked(self.engine))
    }

    /// A query that claims the rows `pick` selects (see [`WriteTx::due`]): `$1` is bound to `now`, `$2` to `limit`.
    fn claim_due(&self, pick: &str, now: DateTime<Utc>, limit: i64) -> AnyQuery {
        q!(self.due(pick)).bind(to_millis(now)).bind(limit)
    }

    /// A query that leases the rows whose ids `pick` selects (see [`WriteTx::due`]) and answers them:
    /// `UPDATE {table} SET {lease} WHERE id IN (…) RETURNING {columns}`. `$1` is bound to `now`, `$2` to `limit`;
    /// the caller binds the lease's own parameters (`$3`…).
    fn lease_due(
        &self,
        table: &str,
        lease: &str,
        pick: &str,
        columns: &str,
        now: DateTime<Utc>,
        limit: i64,
    ) -> AnyQuery {
        let sql = format!(
            "UPDATE {table} SET {lease} WHERE id IN ({}) RETURNING {columns}",
            self.due(pick)
        );
        q!(sql).bind(to_millis(now)).bind(limit)
    }
}

/// One migration: its version and name, and its SQL for each engine (a file of the same name in
/// `migrations/sqlite/` and in `migrations/postgres/`).
struct MigrationFile {
    version: i64,
    name: &'static str,
    sqlite: &'static str,
    postgres: &'static str,
}

/// The [`MigrationFile`] `$file` (version and name as given), read from both engines' migration folders.
macro_rules! migration {
    ($version:literal, $name:literal, $file:literal) => {
        MigrationFile {
            version: $version,
            name: $name,
            sqlite: include_str!(concat!("../../migrations/sqlite/", $file)),
            postgres: include_str!(concat!("../../migrations/postgres/", $file)),
        }
    };
}

/// Every migration, oldest first; each engine runs its own SQL of each.
const MIGRATIONS: [MigrationFile; 22] = [
    migration!(1, "init", "0001_init.sql"),
    migration!(2, "lifecycle", "0002_lifecycle.sql"),
    migration!(3, "compact", "0003_compact.sql"),
    migration!(4, "digests", "0004_digests.sql"),
    migration!(5, "listing_guard", "0005_listing_guard.sql"),
    migration!(6, "outbox_thread", "0006_outbox_thread.sql"),
    migration!(7, "instances", "0007_instances.sql"),
    migration!(8, "acknowledgements", "0008_acknowledgements.sql"),
    migration!(9, "slack_requests", "0009_slack_requests.sql"),
    migration!(10, "outbox_apps", "0010_outbox_apps.sql"),
    migration!(11, "read_indexes", "0011_read_indexes.sql"),
    migration!(12, "smaller_rows", "0012_smaller_rows.sql"),
    migration!(13, "background_indexes", "0013_background_indexes.sql"),
    migration!(14, "outbox_payloads", "0014_outbox_payloads.sql"),
    migration!(15, "raw_dictionaries", "0015_raw_dictionaries.sql"),
    migration!(16, "history_retention", "0016_history_retention.sql"),
    migration!(17, "timeline", "0017_timeline.sql"),
    migration!(18, "fewer_indexes", "0018_fewer_indexes.sql"),
    migration!(19, "argocd_access", "0019_argocd_access.sql"),
    migration!(20, "storms", "0020_storms.sql"),
    migration!(21, "on_call", "0021_on_call.sql"),
    migration!(22, "storm_columns", "0022_storm_columns.sql"),
];

fn migrator(engine: Engine) -> Migrator {
    Migrator {
        migrations: Cow::Owned(
            MIGRATIONS
                .iter()
                .map(|m| {
                    let sql = match engine {
                        Engine::Sqlite => m.sqlite,
                        Engine::Postgres => m.postgres,
                    };
                    Migration::new(
                        m.version,
                        Cow::Borrowed(m.name),
                        MigrationType::Simple,
                        sql.into_sql_str(),
                        false,
                    )
                })
                .collect(),
        ),
        ..Migrator::DEFAULT
    }
}

/// The pool settings both pools share; on SQLite every connection gets the pragmas below.
fn pool_options(engine: Engine, sync: SqliteSynchronous) -> AnyPoolOptions {
    AnyPoolOptions::new()
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
                    // A small page cache per connection (2 MiB), and no memory map of the file: the writer's
                    // cache of Applications spares most reads, and every page read through a 256 MiB map counted
                    // in the process's resident memory (a third of it under load). Each connection keeps its
                    // own cache: the writes' pages are cached in the writer's (`Store::writer`).
                    conn.execute("PRAGMA cache_size = -2048").await?;
                    // Checkpoints run in the background (Store::checkpoint), not in the writer's commit.
                    conn.execute("PRAGMA wal_autocheckpoint = 0").await?;
                    // A log restarted by a checkpoint is cut back to this size (see `checkpoint`).
                    conn.execute("PRAGMA journal_size_limit = 67108864").await?;
                    conn.execute("PRAGMA foreign_keys = ON").await?;
                }
                Ok(())
            })
        })
}

/// Creates the store's directory (and any missing parent) readable by Herald's user only (0700): the store holds
/// Helm values, last-applied configurations and delivery payloads. An existing directory is left as it is.
fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the SQLite database file, when it does not exist yet, readable and writable by Herald's user only
/// (0600), before SQLite opens it: SQLite gives its `-wal` and `-shm` files the database file's mode. An existing
/// file keeps its mode.
fn private_file(path: &std::path::Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// A SQLite `url`, its file and directory created for Herald's user only (unless in memory or read-only), and
/// opened read-write-create unless the URL says how.
fn sqlite_file(url: String) -> Result<String, StoreError> {
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
        private_dir(dir).map_err(|e| StoreError::Config(format!("cannot create {}: {e}", dir.display())))?;
    }
    if path != ":memory:" && !path.is_empty() && !url.contains("mode=ro") && !url.contains("mode=memory") {
        private_file(std::path::Path::new(&path))
            .map_err(|e| StoreError::Config(format!("cannot create {path}: {e}")))?;
    }
    Ok(if url.contains('?') {
        url
    } else {
        format!("{url}?mode=rwc")
    })
}

impl Store {
    /// Connects (creating the SQLite file and its directory when needed, for Herald's user only) and applies
    /// migrations.
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
            sqlite_file(url)?
        } else {
            url
        };
        let options: AnyConnectOptions = url
            .parse()
            .map_err(|e: sqlx::Error| StoreError::Config(format!("storage.url is not valid: {e}")))?;
        let sync = settings.sqlite_synchronous;
        let pool = pool_options(engine, sync)
            .max_connections(settings.max_connections.max(2))
            .connect_with(options.clone())
            .await?;
        migrator(engine).run(&pool).await?;
        let writer = match engine {
            Engine::Sqlite => Some(
                pool_options(engine, sync)
                    .max_connections(1)
                    .connect_with(options)
                    .await?,
            ),
            Engine::Postgres => None,
        };
        Ok(Self {
            pool,
            writer,
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
        let tx = self.writer.as_ref().unwrap_or(&self.pool).begin().await?;
        Ok(WriteTx {
            tx,
            engine: self.engine,
            _guard: guard,
        })
    }

    /// SQLite: copies the write-ahead log into the database without blocking the writer (PASSIVE), so commits
    /// never stall on a long checkpoint, then restarts the log. A no-op on PostgreSQL.
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        if self.engine == Engine::Sqlite {
            q!("PRAGMA wal_checkpoint(PASSIVE)").execute(&self.pool).await?;
            // Under steady writes a passive checkpoint never catches up with the log, which then only grows (a GB in
            // a minute at full speed) and is never restarted. So the little written since is copied too and the log
            // restarted, with the writer held back for that moment.
            let _writer = match &self.write_lock {
                Some(l) => Some(l.lock().await),
                None => None,
            };
            q!("PRAGMA wal_checkpoint(RESTART)").execute(&self.pool).await?;
        }
        Ok(())
    }

    /// Runs one statement in a write transaction of its own (on SQLite it then waits for the writer lock like any
    /// other write instead of meeting SQLITE_BUSY); answers how many rows it affected.
    /// The id of the first row of the append-only `table` from id `from` on whose `time_column` is at or after
    /// `at` (`None`: every such row is older): where a purge of the rows before `at` stops. Ids grow with that time,
    /// so it reads only the rows the purge removes (there is no index of the time).
    async fn first_id_from(
        conn: &mut sqlx::AnyConnection,
        table: &str,
        time_column: &str,
        at: DateTime<Utc>,
        from: i64,
    ) -> Result<Option<i64>, StoreError> {
        let sql = format!("SELECT id FROM {table} WHERE id >= $1 AND {time_column} >= $2 ORDER BY id LIMIT 1");
        let row = q!(sql).bind(from).bind(to_millis(at)).fetch_optional(conn).await?;
        Ok(row.map(|r| sqlx::Row::try_get::<i64, _>(&r, "id")).transpose()?)
    }

    async fn write_one(&self, query: AnyQuery) -> Result<u64, StoreError> {
        let mut tx = self.begin().await?;
        let affected = tx.exec(query).await?;
        tx.commit().await?;
        Ok(affected)
    }

    pub async fn ping(&self) -> Result<(), StoreError> {
        q!("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn close(&self) {
        if let Some(writer) = &self.writer {
            writer.close().await;
        }
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::values;

    #[test]
    fn values_numbers_the_placeholders_row_by_row() {
        assert_eq!(values(2, 2, 1), "($1, $2), ($3, $4)");
        assert_eq!(values(3, 1, 2), "($2), ($3), ($4)");
        assert_eq!(values(1, 3, 1), "($1, $2, $3)");
        assert_eq!(values(0, 3, 1), "");
    }

    #[test]
    fn sqlite_gets_anonymous_placeholders_and_postgres_numbered_ones() {
        use super::{Engine, placeholders};
        assert_eq!(placeholders(Engine::Sqlite, 2, 3), "(?, ?, ?), (?, ?, ?)");
        assert_eq!(placeholders(Engine::Postgres, 2, 2), "($1, $2), ($3, $4)");
    }

    /// An incident view as Herald stores one, of an Application the dictionary was not made from.
    fn view() -> Vec<u8> {
        serde_json::json!({"id": 0, "fingerprint": "72351f592bfeb922dbab", "kind": "prune_pending",
            "severity": "warning", "state": "firing",
            "summary": "argocd/billing-api: 1 resource removed from Git is still running in the cluster, waiting to be pruned",
            "app_namespace": "argocd", "app_name": "billing-api", "project": "payments", "team": "payments",
            "destination_cluster": "https://kubernetes.default.svc", "destination_namespace": "billing",
            "app_url": "https://argocd.example.com/applications/argocd/billing-api",
            "since": "2026-12-03T15:13:02.003515485Z", "fired_at": null, "resolved_at": null,
            "revision": "9f1c0e4b8a7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b", "previous_revision": null,
            "initiated_by": "automated sync",
            "resources": [{"kind": "CronJob", "namespace": "billing", "name": "reminders",
                           "status": "requires pruning", "message": "", "group": "batch"}],
            "messages": [], "labels": {}, "notes": [], "condition": "1 resource waiting to be pruned"})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn documents_are_smaller_with_the_dictionary_and_those_written_before_it_read_the_same() {
        use super::{Effort, compress, compress_doc, decompress, decompress_doc};
        let doc = view();
        let with = compress_doc(&doc, Effort::Fast);
        let kept = compress_doc(&doc, Effort::Kept);
        assert_eq!(
            decompress_doc(&kept).expect("read"),
            doc,
            "either effort reads the same way"
        );
        assert!(kept.len() < with.len(), "{} against {} bytes", kept.len(), with.len());
        let alone = compress(&doc);
        assert_eq!(
            decompress(&alone).expect("read"),
            doc,
            "the context left without the dictionary"
        );
        assert!(
            with.len() * 3 < alone.len() * 2,
            "{} against {} bytes",
            with.len(),
            alone.len()
        );
        assert_eq!(decompress_doc(&with).expect("read"), doc);
        // A row written before the dictionary: compressed alone, read with the dictionary loaded.
        assert_eq!(decompress_doc(&alone).expect("read"), doc);
        assert_ne!(decompress(&with).ok(), Some(doc), "not readable without the dictionary");
    }

    #[test]
    fn the_documents_dictionary_is_the_committed_one() {
        // Part of the storage format: every stored document needs these very bytes to be read.
        use sha2::Digest;
        let digest = sha2::Sha256::digest(super::DOCUMENTS);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::DOCUMENTS.len(), 32_323);
        assert_eq!(hex, "90be32d60ba1a4e0f07a281e5eef03ff022b82026771b267f2f3aaca85affacf");
    }
}
