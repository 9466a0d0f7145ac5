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
//!   bodies each less than the gap apart).
//!
//! Rows written before runs existed (`chain` NULL) hold their whole body, compressed (`body_z`) or as text (`body`).

use std::collections::HashMap;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Store, StoreError, WriteTx, compress, decompress, execute_in_chunks};
use crate::argocd::AppId;
use crate::clock::{from_millis, to_millis};

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

/// `body` stored as what differs from `previous` (zstd with it as the dictionary, checksummed).
fn compress_against(previous: &[u8], body: &[u8]) -> Result<Vec<u8>, StoreError> {
    super::compress_with(body, previous)
}

/// The body stored as `frame`, a difference from `previous`.
fn decompress_against(previous: &[u8], frame: &[u8]) -> Result<Vec<u8>, StoreError> {
    super::decompress_with(frame, previous, "raw body (difference)")
}

/// One stored row as read: enough to rebuild its body.
struct StoredRaw {
    id: i64,
    at: DateTime<Utc>,
    chain: Option<i64>,
    body_z: Option<Vec<u8>>,
    body: String,
}

fn raw_from_row(r: &AnyRow) -> Result<StoredRaw, StoreError> {
    Ok(StoredRaw {
        id: r.try_get("id")?,
        at: from_millis(r.try_get("received_at")?),
        chain: r.try_get("chain")?,
        body_z: r.try_get("body_z")?,
        body: r.try_get("body")?,
    })
}

const RAW_COLUMNS: &str = "id, received_at, chain, body, body_z";

impl Store {
    /// Appends raw bodies, several per statement, in order: each continues its Application's run in `chains` when
    /// it may (see [`RawChain`]; `gap` from [`chain_gap`]) and is stored as what differs from the body before it,
    /// else starts a run with its whole body. `chains` then holds where each Application's run stands.
    pub async fn add_raws<B: AsRef<[u8]>>(
        tx: &mut WriteTx,
        rows: &[(AppId, DateTime<Utc>, &str, B)],
        chains: &mut HashMap<AppId, RawChain>,
        gap: chrono::Duration,
    ) -> Result<(), StoreError> {
        let mut encoded = Vec::with_capacity(rows.len());
        for (app, at, outcome, body) in rows {
            let body = body.as_ref();
            let (chain, frame) = match chains.get_mut(app).filter(|c| c.continues_at(*at, gap)) {
                Some(run) => {
                    let frame = compress_against(&run.last, body)?;
                    run.len += 1;
                    (run.id, frame)
                }
                None => {
                    // A run's name only needs to differ from the other runs of the same Application.
                    let id = (uuid::Uuid::new_v4().as_u64_pair().0 >> 1) as i64;
                    chains.insert(
                        app.clone(),
                        RawChain {
                            id,
                            len: 1,
                            last: Bytes::new(),
                            at: *at,
                        },
                    );
                    (id, compress(body))
                }
            };
            if let Some(run) = chains.get_mut(app) {
                // A copy at its size: the request's buffer may be larger than the body.
                run.last = Bytes::copy_from_slice(body);
                run.at = *at;
            }
            encoded.push((app, *at, *outcome, chain, frame));
        }
        let sql = |values: &str| {
            format!(
                "INSERT INTO raw_events (received_at, instance, namespace, name, outcome, body, body_z, chain) \
                 VALUES {values}"
            )
        };
        execute_in_chunks(tx, &encoded, 64, 8, sql, |query, (app, at, outcome, chain, frame)| {
            query
                .bind(to_millis(*at))
                .bind(&app.instance)
                .bind(&app.namespace)
                .bind(&app.name)
                .bind(*outcome)
                .bind("")
                .bind(frame.clone())
                .bind(*chain)
        })
        .await?;
        Ok(())
    }

    /// Removes the raw bodies received before `before`, each only with its whole run (`gap` from [`chain_gap`]: a
    /// run still in use has a body within it after `before`).
    pub async fn purge_raw(&self, before: DateTime<Utc>, gap: chrono::Duration) -> Result<u64, StoreError> {
        let query = q!(
            "DELETE FROM raw_events WHERE received_at < $1 AND (chain IS NULL OR chain NOT IN \
                        (SELECT chain FROM raw_events WHERE received_at >= $1 AND received_at <= $2 \
                        AND chain IS NOT NULL))"
        )
        .bind(to_millis(before))
        .bind(to_millis(before + gap));
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
        let mut bodies = rebuild(earlier.into_iter().chain(rows))?;
        bodies.drain(..wanted);
        bodies.reverse();
        Ok(bodies)
    }
}

/// The bodies of `rows` (one Application's, oldest first, each run from its first row on), oldest first.
fn rebuild(rows: impl IntoIterator<Item = StoredRaw>) -> Result<Vec<(DateTime<Utc>, String)>, StoreError> {
    let mut out: Vec<(DateTime<Utc>, String)> = Vec::new();
    // The run of the body before (its text is the last one out), if it was in one.
    let mut run: Option<i64> = None;
    for raw in rows {
        let previous = out.last().map(|(_, text)| text.as_bytes());
        let bytes = match (&raw.body_z, raw.chain, previous) {
            (None, _, _) => raw.body.into_bytes(),
            (Some(frame), Some(chain), Some(previous)) if run == Some(chain) => decompress_against(previous, frame)?,
            (Some(frame), _, _) => decompress(frame)?,
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
