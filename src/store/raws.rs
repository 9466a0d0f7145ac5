//! The raw bodies Argo CD sent (`raw_events`), kept for replay, stored as differences: an Application's bodies form
//! runs ("chains", the `chain` column), whose first row holds the whole body zstd-compressed and each later row only
//! what differs from the body before it (zstd with that body as its dictionary), so a body much like the last one
//! costs tens of bytes instead of kilobytes.
//!
//! What keeps every stored body readable:
//! - a run holds at most [`MAX_CHAIN`] bodies, so a read decompresses at most that many;
//! - a run is continued only by the writer that wrote its last body and remembers it ([`RawChain`], kept by the
//!   pipeline's writer, checked against the Application's version on PostgreSQL), and only within the gap
//!   [`chain_gap`] after it; otherwise the body starts a run of its own;
//! - the purge removes a body past the retention only with its whole run: a run any of whose bodies is still within
//!   the retention stays (so a body may outlive `storage.raw_retention` by its run's length, at most `MAX_CHAIN`
//!   bodies each less than the gap apart);
//! - a dictionary is purged only once every row up to the last that used it (`last_row`) is (and it is older than
//!   the retention; the writer's current one is younger, see [`Dictionaries::for_batch`]).
//!
//! The first body of a run is compressed with the writer's current dictionary when it has one ([`RawDictionary`],
//! the `dict` column; the dictionaries are rows of `raw_dictionaries`): the bodies of one Argo CD are much alike
//! across Applications (the same keys, repositories, namespaces, resource kinds), so a whole body stored against
//! bodies of other Applications takes a few hundred bytes instead of two to three kilobytes. The writer makes its
//! dictionaries from the bodies it stores ([`Dictionaries`]): a body the current dictionary does not know well is
//! kept, and after enough bodies the known ones and the new ones make the next dictionary.
//!
//! Rows written before runs existed (`chain` NULL) hold their whole body, compressed (`body_z`) or as text (`body`);
//! rows written before dictionaries (`dict` NULL) start their run compressed alone.

use std::collections::HashMap;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Store, StoreError, WriteTx, compress, decompress, execute_in_chunks};
use crate::argocd::AppId;
use crate::clock::{from_millis, to_millis};
use std::collections::VecDeque;
use std::sync::Arc;

/// The most bodies in one run (its first, whole, and the differences after it): what a read may have to
/// decompress, and one whole body in this many.
pub const MAX_CHAIN: usize = 16;

/// The longest a run waits for its next body: an hour, or half the retention when that is shorter. The purge
/// relies on it: the body after one past the retention came within the gap, so looking that far past the retention
/// finds every run still in use.
pub fn chain_gap(retention: std::time::Duration) -> chrono::Duration {
    let half = chrono::Duration::from_std(retention / 2).unwrap_or(chrono::Duration::MAX);
    half.min(chrono::Duration::hours(1))
}

/// A body shorter than this starts a run of its own: nothing to gain from a difference, and zstd ignores a
/// dictionary this small when compressing.
const MIN_DICTIONARY: usize = 64;

/// Where an Application's run of raw bodies stands, as its writer remembers it: the next body is stored as what
/// differs from `last`.
#[derive(Debug, Clone)]
pub struct RawChain {
    id: i64,
    len: usize,
    last: Bytes,
    at: DateTime<Utc>,
}

impl RawChain {
    /// What remembering it costs in memory.
    pub fn weight(&self) -> usize {
        self.last.len() + 64
    }

    /// When its last body was received.
    pub fn last_at(&self) -> DateTime<Utc> {
        self.at
    }

    /// Whether a body at `at` may be stored as a difference from this run's last one.
    fn continues_at(&self, at: DateTime<Utc>, gap: chrono::Duration) -> bool {
        self.len < MAX_CHAIN && self.last.len() >= MIN_DICTIONARY && at >= self.at && at - self.at < gap
    }
}

/// Starts a new run for `app` at `at` (its last body set by the caller); answers its name.
fn start_run(chains: &mut HashMap<AppId, RawChain>, app: &AppId, at: DateTime<Utc>) -> i64 {
    let id = new_id();
    let run = RawChain {
        id,
        len: 1,
        last: Bytes::new(),
        at,
    };
    chains.insert(app.clone(), run);
    id
}

/// `body` stored as what differs from `previous` (zstd with it as the dictionary, checksummed).
fn compress_against(previous: &[u8], body: &[u8]) -> Result<Vec<u8>, StoreError> {
    super::compress_with(body, previous)
}

/// The body stored as `frame`, a difference from `previous`.
fn decompress_against(previous: &[u8], frame: &[u8]) -> Result<Vec<u8>, StoreError> {
    super::decompress_with(frame, previous, "raw body (difference)")
}

/// The most bytes of bodies a dictionary holds (its samples, one body each, the oldest dropped first). zstd at this
/// level finds matches anywhere in it; it costs its size twice in memory (the samples and the compressor's copy),
/// and its size compressed once per dictionary in the store.
const DICTIONARY_BYTES: usize = 128 << 10;
/// A body the current dictionary compresses less than this many times over is new to it: kept for the next one.
const NOVEL_RATIO: usize = 12;
/// New bodies kept for the next dictionary, at most (each tested against those kept before it, so that one body
/// sent by 500 Applications is kept once).
const PENDING: usize = 8;
/// Runs started with a dictionary before the next one is made (when it has new bodies to learn): every dictionary
/// is stored, so this many bodies at least share its cost (128 KB compress to about 30 KB, 60 bytes each).
const STARTS_PER_DICTIONARY: usize = 512;

/// A dictionary the first body of a run is compressed with: bodies of other Applications, one after the other
/// (zstd's raw-content dictionary). Stored once in `raw_dictionaries`, with the first row that uses it.
pub struct RawDictionary {
    id: i64,
    created_at: DateTime<Utc>,
    /// Its content as stored (compressed): the compressor holds the content itself, the writer its samples.
    content_z: Vec<u8>,
    /// A compression context with the dictionary loaded (zstd prepares it once, not per body).
    compressor: std::sync::Mutex<zstd::zstd_safe::CCtx<'static>>,
    /// Whether a committed transaction stored it.
    stored: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for RawDictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawDictionary")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl RawDictionary {
    fn new(id: i64, created_at: DateTime<Utc>, content: &[u8]) -> Result<Self, StoreError> {
        use zstd::zstd_safe::{CCtx, CParameter};
        let failed = super::cannot_compress;
        let mut cctx = CCtx::create();
        cctx.set_parameter(CParameter::CompressionLevel(super::ZSTD_LEVEL))
            .map_err(failed)?;
        // A checksum: a body read with another dictionary is an error, not other bytes.
        cctx.set_parameter(CParameter::ChecksumFlag(true)).map_err(failed)?;
        cctx.load_dictionary(content).map_err(failed)?;
        Ok(Self {
            id,
            created_at,
            content_z: compress(content),
            compressor: std::sync::Mutex::new(cctx),
            stored: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// `body` compressed with this dictionary.
    fn compress(&self, body: &[u8]) -> Result<Vec<u8>, StoreError> {
        let failed = super::cannot_compress;
        let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(body.len()));
        let mut cctx = self
            .compressor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cctx.compress2(&mut out, body).map_err(failed)?;
        out.shrink_to_fit();
        Ok(out)
    }

    fn is_stored(&self) -> bool {
        self.stored.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What storing a batch's bodies taught the writer about its dictionary: the bodies new to it, how many runs it
/// started. Given back to [`Dictionaries::committed`] once the batch is committed.
#[derive(Debug, Default)]
pub struct DictionaryUse {
    dictionary: Option<Arc<RawDictionary>>,
    novel: Vec<Sample>,
    /// How many new bodies the writer still has room for: no more are copied (a batch of hundreds of bodies, all
    /// new before the first dictionary, would otherwise copy them all, megabytes, to keep eight).
    room: usize,
    starts: usize,
}

impl DictionaryUse {
    /// A run started with `body`, stored as `frame` (against the dictionary, if there is one): a body new to it is
    /// kept to learn from, while there is room.
    fn started(&mut self, body: &[u8], frame: &[u8], at: DateTime<Utc>) {
        self.starts += 1;
        if (self.dictionary.is_none() || is_novel(frame, body))
            && self.novel.len() < self.room
            // A body of megabytes would push every other sample out.
            && body.len() <= DICTIONARY_BYTES / 4
        {
            self.novel.push((Bytes::copy_from_slice(body), at));
        }
    }
}

/// A body to learn from, with when it was received: a body is not learnt from, nor kept in a dictionary being made,
/// once it is half the retention old (see [`Dictionaries::for_batch`]).
type Sample = (Bytes, DateTime<Utc>);

/// The writer's dictionaries: the current one, the bodies it was made of, and the bodies new to it since. Kept by
/// the pipeline's writer beside its runs (not shared: each replica makes its own; any replica reads them all).
#[derive(Default)]
pub struct Dictionaries {
    current: Option<Arc<RawDictionary>>,
    samples: VecDeque<Sample>,
    pending: Vec<Sample>,
    starts: usize,
}

impl Dictionaries {
    /// The dictionary to store the next batch's bodies with: the current one, or a new one when there are new
    /// bodies to learn and the current one has started enough runs (or there is none yet), or when the current
    /// one is half the retention `retention` old. Then the bodies received before half the retention ago are
    /// forgotten (none left: no dictionary until new ones are learnt). So a dictionary is used for at most half the
    /// retention and holds bodies at most half the retention old when it is made; the bodies stored with it are
    /// purged after the retention (and their runs), and the dictionary once no body uses it and it is older than
    /// the retention (the one in use never is): a body's text lives in dictionaries at most twice the retention.
    /// Making one costs a few milliseconds, now and then.
    pub fn for_batch(&mut self, now: DateTime<Utc>, retention: std::time::Duration) -> DictionaryUse {
        let learn = !self.pending.is_empty() && (self.current.is_none() || self.starts >= STARTS_PER_DICTIONARY);
        let half = chrono::Duration::from_std(retention / 2).unwrap_or(chrono::Duration::MAX);
        let old = (self.current.as_ref()).is_some_and(|d| now - d.created_at >= half);
        if learn || old {
            let recent = |(_, at): &Sample| now - *at < half;
            self.pending.retain(recent);
            self.samples.retain(recent);
            self.learn();
            self.current = None;
            self.starts = 0;
            if !self.samples.is_empty() {
                match RawDictionary::new(new_id(), now, &concat(&self.samples)) {
                    Ok(dictionary) => self.current = Some(Arc::new(dictionary)),
                    Err(e) => tracing::warn!(error = %e, "no new dictionary for raw bodies"),
                }
            }
        }
        DictionaryUse {
            dictionary: self.current.clone(),
            room: PENDING.saturating_sub(self.pending.len()),
            ..DictionaryUse::default()
        }
    }

    /// The pending bodies join the samples, each unless those before it already make it well known; the oldest
    /// samples go beyond `DICTIONARY_BYTES`.
    fn learn(&mut self) {
        let mut kept: Vec<Sample> = Vec::new();
        for (body, at) in std::mem::take(&mut self.pending) {
            let known = !kept.is_empty()
                && super::compress_with(&body, &concat(&kept)).is_ok_and(|frame| !is_novel(&frame, &body));
            if !known {
                kept.push((body, at));
            }
        }
        self.samples.extend(kept);
        let mut bytes: usize = self.samples.iter().map(|(s, _)| s.len()).sum();
        while bytes > DICTIONARY_BYTES
            && let Some((oldest, _)) = self.samples.pop_front()
        {
            bytes -= oldest.len();
        }
    }

    /// A committed batch's use: its dictionary is stored, its new bodies wait for the next one.
    pub fn committed(&mut self, used: DictionaryUse) {
        if let Some(d) = &used.dictionary
            && used.starts > 0
        {
            d.stored.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let same = match (&used.dictionary, &self.current) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            return;
        }
        self.starts += used.starts;
        for body in used.novel {
            if self.pending.len() < PENDING {
                self.pending.push(body);
            }
        }
    }
}

/// Bodies one after the other: a raw-content dictionary.
fn concat<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Vec<u8> {
    samples.into_iter().flat_map(|(s, _)| s.iter().copied()).collect()
}

/// A new name for a run or a dictionary: it only needs to differ from the others (random, 63 bits).
fn new_id() -> i64 {
    (uuid::Uuid::new_v4().as_u64_pair().0 >> 1) as i64
}

/// Whether a body compressed to `frame` is new to the dictionary it was compressed with.
fn is_novel(frame: &[u8], body: &[u8]) -> bool {
    frame.len() * NOVEL_RATIO > body.len()
}

/// One stored row as read: enough to rebuild its body.
struct StoredRaw {
    id: i64,
    at: DateTime<Utc>,
    chain: Option<i64>,
    dict: Option<i64>,
    body_z: Option<Vec<u8>>,
    body: String,
}

fn raw_from_row(r: &AnyRow) -> Result<StoredRaw, StoreError> {
    Ok(StoredRaw {
        id: r.try_get("id")?,
        at: from_millis(r.try_get("received_at")?),
        chain: r.try_get("chain")?,
        dict: r.try_get("dict")?,
        body_z: r.try_get("body_z")?,
        body: r.try_get("body")?,
    })
}

/// One body as stored: its run, its frame (the difference from the body before it, or the whole body compressed,
/// with the dictionary's id when compressed against it).
type EncodedRaw = (i64, Vec<u8>, Option<i64>);

/// `body` of `app` received `at`, encoded: it continues its Application's run in `chains` when it may (the
/// difference from the run's last body); when that body does not predict this one well (another variant of the
/// Application, much changed), a new run against the dictionary if that is smaller. `chains` then holds where the
/// run stands.
fn encode_raw(
    app: &AppId,
    at: DateTime<Utc>,
    body: &[u8],
    chains: &mut HashMap<AppId, RawChain>,
    gap: chrono::Duration,
    dictionary: &mut DictionaryUse,
) -> Result<EncodedRaw, StoreError> {
    let run = chains.get(app).filter(|c| c.continues_at(at, gap));
    let difference = run
        .map(|run| compress_against(&run.last, body).map(|d| (run.id, d)))
        .transpose()?;
    let started = match (&dictionary.dictionary, &difference) {
        (Some(d), None) => Some(d.compress(body)?),
        (Some(d), Some((_, diff))) if is_novel(diff, body) => Some(d.compress(body)?),
        _ => None,
    };
    let encoded = match (difference, started) {
        (Some((id, diff)), started) if started.as_ref().is_none_or(|s| s.len() >= diff.len()) => {
            if let Some(run) = chains.get_mut(app) {
                run.len += 1;
            }
            (id, diff, None)
        }
        (_, started) => {
            let (frame, dict) = match (started, &dictionary.dictionary) {
                (Some(frame), Some(d)) => (frame, Some(d.id)),
                _ => (compress(body), None),
            };
            dictionary.started(body, &frame, at);
            (start_run(chains, app, at), frame, dict)
        }
    };
    if let Some(run) = chains.get_mut(app) {
        // A copy at its size: the request's buffer may be larger than the body.
        run.last = Bytes::copy_from_slice(body);
        run.at = at;
    }
    Ok(encoded)
}

/// A row of `raw_events` as written: the Application, when it was received, the outcome, then its encoding.
type RawRow<'a> = (&'a AppId, DateTime<Utc>, &'a str, i64, Vec<u8>, Option<i64>);

/// The encoded rows into `raw_events`, several per statement, in order.
async fn insert_raw_rows(tx: &mut WriteTx, encoded: &[RawRow<'_>]) -> Result<(), StoreError> {
    let sql = |values: &str| {
        format!(
            "INSERT INTO raw_events (received_at, instance, namespace, name, outcome, body, body_z, chain, dict) \
             VALUES {values}"
        )
    };
    execute_in_chunks(
        tx,
        encoded,
        64,
        9,
        sql,
        |query, (app, at, outcome, chain, frame, dict)| {
            query
                .bind(to_millis(*at))
                .bind(&app.instance)
                .bind(&app.namespace)
                .bind(&app.name)
                .bind(*outcome)
                .bind("")
                .bind(frame.clone())
                .bind(*chain)
                .bind(*dict)
        },
    )
    .await?;
    Ok(())
}

const RAW_COLUMNS: &str = "id, received_at, chain, dict, body, body_z";

impl Store {
    /// Appends raw bodies, several per statement, in order: each continues its Application's run in `chains` when
    /// it may (see [`RawChain`]; `gap` from [`chain_gap`]) and is stored as what differs from the body before it,
    /// else starts a run with its whole body. `chains` then holds where each Application's run stands.
    pub async fn add_raws<B: AsRef<[u8]>>(
        tx: &mut WriteTx,
        rows: &[(AppId, DateTime<Utc>, &str, B)],
        chains: &mut HashMap<AppId, RawChain>,
        gap: chrono::Duration,
        dictionary: &mut DictionaryUse,
    ) -> Result<(), StoreError> {
        let mut encoded = Vec::with_capacity(rows.len());
        for (app, at, outcome, body) in rows {
            let (chain, frame, dict) = encode_raw(app, *at, body.as_ref(), chains, gap, dictionary)?;
            encoded.push((app, *at, *outcome, chain, frame, dict));
        }
        let uses_dictionary = encoded.iter().any(|row| row.5.is_some());
        // The dictionary is stored with the first rows that use it (again after a transaction that failed: it may
        // have been stored by then, hence the conflict clause).
        if let Some(d) = &dictionary.dictionary
            && !d.is_stored()
            && uses_dictionary
        {
            let query = q!(
                "INSERT INTO raw_dictionaries (id, created_at, content_z) VALUES ($1, $2, $3) \
                          ON CONFLICT (id) DO NOTHING"
            )
            .bind(d.id)
            .bind(to_millis(d.created_at))
            .bind(d.content_z.clone());
            tx.exec(query).await?;
        }
        insert_raw_rows(tx, &encoded).await?;
        // The dictionary's last row so far: it is in use until that row is purged.
        if let Some(d) = &dictionary.dictionary
            && uses_dictionary
        {
            let query =
                q!("UPDATE raw_dictionaries SET last_row = (SELECT MAX(id) FROM raw_events) WHERE id = $1").bind(d.id);
            tx.exec(query).await?;
        }
        Ok(())
    }

    /// Removes the raw bodies received before `before`, each only with its whole run (`gap` from [`chain_gap`]: a
    /// run still in use has a body within it after `before`).
    ///
    /// Rows are found by id, which grows with the time they were received (there is no index of that time): the
    /// first row to keep is the first received at or after `before` (reading only the rows that go), and the runs
    /// in use are those of the rows after it, up to the first received a minute past the gap (a batch is written
    /// within seconds of its bodies' arrival, so a row received within the gap has an id below that).
    pub async fn purge_raw(&self, before: DateTime<Utc>, gap: chrono::Duration) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let first_kept = Self::first_id_from(&mut conn, "raw_events", "received_at", before, i64::MIN).await?;
        let past_gap = before + gap + chrono::Duration::minutes(1);
        let end = match first_kept {
            Some(id) => Self::first_id_from(&mut conn, "raw_events", "received_at", past_gap, id).await?,
            None => None,
        };
        drop(conn);
        // Without a row to keep, every row goes (the runs in use are those of no row).
        let query = q!(
            "DELETE FROM raw_events WHERE id < $1 AND received_at < $2 AND (chain IS NULL OR chain NOT IN \
                        (SELECT chain FROM raw_events WHERE id >= $1 AND id < $4 \
                        AND received_at >= $2 AND received_at <= $3 AND chain IS NOT NULL))"
        )
        .bind(first_kept.unwrap_or(i64::MAX))
        .bind(to_millis(before))
        .bind(to_millis(before + gap))
        .bind(end.unwrap_or(i64::MAX));
        self.write_one(query).await
    }

    /// Removes the dictionaries made before `before` that no row uses: every row up to the last that used one
    /// (`last_row`) is purged. Give it the retention ago: the writer makes a new dictionary at half the retention,
    /// so the one it uses is never removed (see [`Dictionaries::for_batch`]).
    pub async fn purge_raw_dictionaries(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let query = q!(
            "DELETE FROM raw_dictionaries WHERE created_at < $1 AND (last_row IS NULL OR last_row < \
                        COALESCE((SELECT MIN(id) FROM raw_events), 9223372036854775807))"
        )
        .bind(to_millis(before));
        self.write_one(query).await
    }

    /// The newest `limit` bodies received for an Application, newest first, each rebuilt from its run.
    pub async fn raw_bodies(&self, app: &AppId, limit: i64) -> Result<Vec<(DateTime<Utc>, String)>, StoreError> {
        let rows = self.newest_of_app(RAW_COLUMNS, "raw_events", app, limit).await?;
        let mut rows: Vec<StoredRaw> = rows.iter().map(raw_from_row).collect::<Result<_, _>>()?;
        rows.reverse();
        // The oldest body read may be a difference: the bodies of its run before it come first.
        let mut earlier = Vec::new();
        if let Some(first) = rows.first()
            && let Some(chain) = first.chain
        {
            let before = q!(format!(
                "SELECT {RAW_COLUMNS} FROM raw_events WHERE instance = $1 AND namespace = $2 AND name = $3 \
                 AND id < $4 ORDER BY id DESC LIMIT $5"
            ))
            .bind(&app.instance)
            .bind(&app.namespace)
            .bind(&app.name)
            .bind(first.id)
            .bind(MAX_CHAIN as i64)
            .fetch_all(&self.pool)
            .await?;
            for r in &before {
                let raw = raw_from_row(r)?;
                if raw.chain != Some(chain) {
                    break;
                }
                earlier.push(raw);
            }
            earlier.reverse();
        }
        let wanted = earlier.len();
        let mut ids: Vec<i64> = earlier.iter().chain(&rows).filter_map(|r| r.dict).collect();
        ids.sort_unstable();
        ids.dedup();
        let dictionaries = self.raw_dictionaries(&ids).await?;
        let mut bodies = rebuild(earlier.into_iter().chain(rows), &dictionaries)?;
        bodies.drain(..wanted);
        bodies.reverse();
        Ok(bodies)
    }

    /// The dictionaries `ids` (their content), by id.
    async fn raw_dictionaries(&self, ids: &[i64]) -> Result<HashMap<i64, Vec<u8>>, StoreError> {
        let mut out = HashMap::new();
        for id in ids {
            let row = q!("SELECT content_z FROM raw_dictionaries WHERE id = $1")
                .bind(*id)
                .fetch_optional(&self.pool)
                .await?;
            if let Some(row) = row {
                let content: Vec<u8> = row.try_get("content_z")?;
                out.insert(*id, decompress(&content)?);
            }
        }
        Ok(out)
    }
}

/// The bodies of `rows` (one Application's, oldest first, each run from its first row on), oldest first.
/// A run's first row may be compressed with one of `dictionaries`.
fn rebuild(
    rows: impl IntoIterator<Item = StoredRaw>,
    dictionaries: &HashMap<i64, Vec<u8>>,
) -> Result<Vec<(DateTime<Utc>, String)>, StoreError> {
    let mut out: Vec<(DateTime<Utc>, String)> = Vec::new();
    // The run of the body before (its text is the last one out), if it was in one.
    let mut run: Option<i64> = None;
    for raw in rows {
        let previous = out.last().map(|(_, text)| text.as_bytes());
        let bytes = match (&raw.body_z, raw.chain, previous) {
            (None, _, _) => raw.body.into_bytes(),
            (Some(frame), Some(chain), Some(previous)) if run == Some(chain) => decompress_against(previous, frame)?,
            (Some(frame), _, _) => match raw.dict {
                None => decompress(frame)?,
                Some(id) => {
                    let dictionary = dictionaries
                        .get(&id)
                        .ok_or_else(|| StoreError::Decode(format!("raw body: dictionary {id} is missing")))?;
                    super::decompress_with(frame, dictionary, "raw body (with a dictionary)")?
                }
            },
        };
        run = raw.chain;
        let text = String::from_utf8(bytes).map_err(|e| StoreError::Decode(format!("raw body: {e}")))?;
        out.push((raw.at, text));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_reads_back_byte_exact_only_with_its_dictionary() {
        let previous = br#"{"app":{"metadata":{"name":"pay"},"status":{"sync":{"status":"Synced"},"health":{"status":"Healthy"}}}}"#;
        let body = br#"{"app":{"metadata":{"name":"pay"},"status":{"sync":{"status":"OutOfSync"},"health":{"status":"Healthy"}}}}"#;
        let frame = compress_against(previous, body).expect("compress");
        assert!(frame.len() < compress(body).len(), "{} bytes", frame.len());
        assert_eq!(decompress_against(previous, &frame).expect("read"), body.to_vec());
        assert!(
            decompress_against(body, &frame).is_err(),
            "another dictionary is an error, not other bytes"
        );
        assert!(decompress(&frame).is_err(), "and so is none");
    }

    /// A body like an Argo CD one of Application `name`, variant `k` (each variant its own set of resources).
    fn body(name: &str, k: usize) -> Bytes {
        let resources: Vec<_> = (0..30)
            .map(|r| {
                // Like a revision or an image digest: nothing in common from one variant to the next.
                let digest = format!("{:016x}", ((k * 1000 + r) as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                serde_json::json!({"kind": "Deployment", "name": format!("svc-{k}-{r}"), "namespace": format!("team-{k}"),
                    "status": "Synced", "health": {"status": "Healthy"}, "version": "v1", "group": "apps",
                    "image": format!("registry.example.com/svc@sha256:{digest}")})
            })
            .collect();
        let body = serde_json::json!({"app": {"metadata": {"name": name, "uid": format!("uid-{name}")},
            "spec": {"source": {"repoURL": format!("https://git.example.com/variant-{k}.git")}},
            "status": {"sync": {"status": "Synced"}, "resources": resources}}});
        Bytes::from(body.to_string())
    }

    /// One batch of run starts through `dictionaries`: the bodies' sizes as stored, the use given back as if
    /// committed.
    fn starts(dictionaries: &mut Dictionaries, now: DateTime<Utc>, bodies: &[Bytes]) -> Vec<usize> {
        let mut used = dictionaries.for_batch(now, std::time::Duration::from_secs(7 * 24 * 3600));
        let mut sizes = Vec::new();
        for body in bodies {
            let frame = match &used.dictionary {
                Some(d) => d.compress(body).expect("compress"),
                None => compress(body),
            };
            used.started(body, &frame, now);
            sizes.push(frame.len());
        }
        dictionaries.committed(used);
        sizes
    }

    #[test]
    fn the_writer_learns_new_bodies_once_each_and_makes_dictionaries_sparingly() {
        let now = Utc::now();
        let mut dictionaries = Dictionaries::default();
        // Variant 0, sent by 50 Applications: alone at first, then against a dictionary holding it once.
        let zero: Vec<Bytes> = (0..50).map(|i| body(&format!("a{i}"), 0)).collect();
        let alone = starts(&mut dictionaries, now, &zero[..5]);
        assert!(dictionaries.current.is_none());
        let learnt = starts(&mut dictionaries, now, &zero[5..]);
        let first = dictionaries
            .current
            .clone()
            .expect("a dictionary once there were bodies to learn");
        assert_eq!(dictionaries.samples.len(), 1, "five bodies alike are one sample");
        assert!(learnt.iter().all(|n| n * 10 < alone[0]), "{learnt:?} against {alone:?}");
        // Variant 1 is new to it: kept, but the next dictionary waits for enough runs to share its cost.
        let one: Vec<Bytes> = (0..10).map(|i| body(&format!("b{i}"), 1)).collect();
        let before = starts(&mut dictionaries, now, &one);
        assert!(Arc::ptr_eq(&first, dictionaries.current.as_ref().expect("kept")));
        assert!(!dictionaries.pending.is_empty());
        let spent = STARTS_PER_DICTIONARY - dictionaries.starts;
        let filler: Vec<Bytes> = (0..spent).map(|i| zero[i % zero.len()].clone()).collect();
        starts(&mut dictionaries, now, &filler);
        let after = starts(&mut dictionaries, now, &one);
        let second = dictionaries.current.clone().expect("a second one");
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!(dictionaries.samples.len(), 2);
        assert!(after[0] * 5 < before[0], "{after:?} against {before:?}");
        // Nothing new: no new dictionary, however many runs.
        starts(&mut dictionaries, now, &filler);
        starts(&mut dictionaries, now, &filler);
        assert!(Arc::ptr_eq(&second, dictionaries.current.as_ref().expect("kept")));
        // At half the retention it is made again, of the bodies received since: none, so none until new ones
        // are learnt (a body's text is not kept in dictionaries for ever).
        let later = now + chrono::Duration::days(4);
        starts(&mut dictionaries, later, &zero[..1]);
        assert!(dictionaries.current.is_none() && dictionaries.samples.is_empty());
        starts(&mut dictionaries, later, &zero[..1]);
        let third = dictionaries.current.clone().expect("made of what came since");
        assert_ne!(third.id, second.id);
        assert_eq!(dictionaries.samples.len(), 1);
        assert_eq!(dictionaries.samples[0].1, later);
    }

    #[test]
    fn a_huge_body_is_not_learnt_and_a_failed_batch_stores_its_dictionary_again() {
        let now = Utc::now();
        let mut dictionaries = Dictionaries::default();
        let huge = Bytes::from(vec![b'x'; DICTIONARY_BYTES]);
        starts(&mut dictionaries, now, &[huge]);
        assert!(dictionaries.pending.is_empty());
        starts(&mut dictionaries, now, &[body("a", 0)]);
        // The batch that would store the dictionary fails: not committed, so the next one stores it.
        let used = dictionaries.for_batch(now, std::time::Duration::from_secs(3600));
        let dictionary = used.dictionary.clone().expect("made");
        drop(used);
        assert!(!dictionary.is_stored());
        starts(&mut dictionaries, now, &[body("b", 0)]);
        assert!(dictionary.is_stored(), "stored by the batch that committed");
    }

    #[test]
    fn a_run_is_continued_within_its_gap_and_length_only() {
        let at = Utc::now();
        let gap = chain_gap(std::time::Duration::from_secs(7 * 24 * 3600));
        assert_eq!(gap, chrono::Duration::hours(1));
        assert_eq!(
            chain_gap(std::time::Duration::from_secs(60)),
            chrono::Duration::seconds(30)
        );
        let run = RawChain {
            id: 1,
            len: 1,
            last: Bytes::from(vec![b'x'; MIN_DICTIONARY]),
            at,
        };
        assert!(run.continues_at(at + chrono::Duration::minutes(59), gap));
        assert!(!run.continues_at(at + chrono::Duration::minutes(60), gap));
        assert!(
            !run.continues_at(at - chrono::Duration::seconds(1), gap),
            "not back in time"
        );
        let full = RawChain {
            len: MAX_CHAIN,
            ..run.clone()
        };
        assert!(!full.continues_at(at, gap));
        let tiny = RawChain {
            last: Bytes::from_static(b"{}"),
            ..run
        };
        assert!(!tiny.continues_at(at, gap));
    }
}
