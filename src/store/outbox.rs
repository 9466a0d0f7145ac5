//! The outbox (`outbox`): deliveries written in the pipeline's transaction, claimed by the worker with a lease,
//! and their results; and the receivers' memos (`memos`: what a receiver keeps per thread, such as a message id).

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Store, StoreError, WriteTx, decode, encode, execute_in_chunks, parse_column};
use crate::argocd::AppId;
use crate::clock::{from_millis, to_millis};
use crate::domain::{Action, DeliveryState, Notification, Thread};

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

/// The columns [`outbox_from_row`] reads, of the table or alias `t`. The payload is in `outbox_payloads`
/// (compressed, out of the row: a list of deliveries reads small rows), or in `payload` for a row queued before.
fn outbox_columns(t: &str) -> String {
    format!(
        "{t}.id, {t}.receiver, {t}.order_key, {t}.thread_key, {t}.action, {t}.payload, {t}.state, {t}.attempts, \
         {t}.due_at, {t}.created_at, {t}.last_error, {t}.delivered_at, \
         (SELECT p.payload_doc FROM outbox_payloads p WHERE p.outbox_id = {t}.id) AS payload_doc"
    )
}

/// The columns of a list of deliveries ([`Store::outbox_headlines`]): no payload but a row's own text (empty
/// unless queued before payloads had their table), and the headline kept with it.
const HEADLINE_COLUMNS: &str = "id, receiver, order_key, thread_key, action, payload, state, attempts, due_at, \
                                created_at, last_error, delivered_at, title, about";

fn outbox_from_row(r: &AnyRow) -> Result<OutboxRecord, StoreError> {
    let mut d = outbox_fields(r)?;
    if let Some(doc) = r.try_get::<Option<Vec<u8>>, _>("payload_doc")? {
        d.payload = String::from_utf8(super::decompress_doc(&doc)?)
            .map_err(|_| StoreError::Decode("outbox payload: not UTF-8".into()))?;
    }
    Ok(d)
}

/// A row's own columns (its payload as the row holds it: empty when it is in `outbox_payloads`).
fn outbox_fields(r: &AnyRow) -> Result<OutboxRecord, StoreError> {
    Ok(OutboxRecord {
        id: r.try_get("id")?,
        receiver: r.try_get("receiver")?,
        order_key: r.try_get("order_key")?,
        thread_key: r.try_get("thread_key")?,
        action: parse_column("outbox action", r.try_get("action")?, Action::parse)?,
        payload: r.try_get("payload")?,
        state: parse_column("outbox state", r.try_get("state")?, DeliveryState::parse)?,
        attempts: r.try_get("attempts")?,
        due_at: from_millis(r.try_get("due_at")?),
        created_at: from_millis(r.try_get("created_at")?),
        last_error: r.try_get("last_error")?,
        delivered_at: r.try_get::<Option<i64>, _>("delivered_at")?.map(from_millis),
    })
}

/// What a notification says at a glance: its title and the fingerprints of its incidents (as a JSON array, written
/// into a list as it is). Kept in its row when it is queued, so a list of deliveries reads neither the payload (a
/// group's is tens of KB) nor its table.
#[derive(Debug, Clone)]
pub struct Headline {
    pub title: String,
    pub incidents: Box<serde_json::value::RawValue>,
}

impl Headline {
    /// The headline of the notification `n` (`None` only if its fingerprints cannot be written as JSON, which a
    /// list of strings always can: the list then reads the payload, as for rows queued before headlines).
    pub fn of(n: &Notification) -> Option<Headline> {
        let fingerprints: Vec<&str> = n.incidents().iter().map(|i| i.fingerprint.as_str()).collect();
        Self::new(n.title.clone(), &fingerprints)
    }

    fn new(title: String, fingerprints: &[&str]) -> Option<Headline> {
        let incidents = serde_json::value::to_raw_value(fingerprints).ok()?;
        Some(Headline { title, incidents })
    }

    /// Read from a notification's JSON (a row queued before headlines were kept) without building the rest of it;
    /// `None` when it is not a notification.
    pub fn of_payload(payload: &str) -> Option<Headline> {
        #[derive(serde::Deserialize)]
        struct Read<'a> {
            #[serde(borrow)]
            title: std::borrow::Cow<'a, str>,
            #[serde(default, borrow)]
            incidents: Vec<Fingerprint<'a>>,
        }
        #[derive(serde::Deserialize)]
        struct Fingerprint<'a> {
            #[serde(borrow)]
            fingerprint: std::borrow::Cow<'a, str>,
        }
        let n: Read = serde_json::from_str(payload).ok()?;
        let fingerprints: Vec<&str> = n.incidents.iter().map(|i| i.fingerprint.as_ref()).collect();
        Self::new(n.title.into_owned(), &fingerprints)
    }

    /// The fingerprints of its incidents.
    pub fn fingerprints(&self) -> Vec<String> {
        serde_json::from_str(self.incidents.get()).unwrap_or_default()
    }
}

/// A delivery as the outbox list shows it: the row (without its payload) and its notification's headline, when
/// there is one.
#[derive(Debug, Clone)]
pub struct ListedDelivery {
    pub delivery: OutboxRecord,
    pub headline: Option<Headline>,
}

fn listed_from_row(r: &AnyRow) -> Result<ListedDelivery, StoreError> {
    let mut delivery = outbox_fields(r)?;
    let headline = match r.try_get::<Option<String>, _>("title")? {
        Some(title) => Some(Headline {
            title,
            incidents: serde_json::value::RawValue::from_string(
                r.try_get::<Option<String>, _>("about")?.unwrap_or_else(|| "[]".into()),
            )
            .map_err(|e| StoreError::Decode(format!("outbox headline: {e}")))?,
        }),
        // Queued before headlines were kept: read from its payload, in the row.
        None => Headline::of_payload(&delivery.payload),
    };
    delivery.payload.clear();
    Ok(ListedDelivery { delivery, headline })
}

/// A delivery as an Application's page lists it: the incident it is about and when it was first queued (a retry
/// of a dead delivery queues it again, but it stays where it happened).
#[derive(Debug, Clone)]
pub struct AboutDelivery {
    pub incident_id: i64,
    pub queued_at: DateTime<Utc>,
    pub delivery: OutboxRecord,
}

fn about_from_row(r: &AnyRow) -> Result<AboutDelivery, StoreError> {
    Ok(AboutDelivery {
        incident_id: r.try_get("incident_id")?,
        queued_at: from_millis(r.try_get("queued_at")?),
        delivery: outbox_from_row(r)?,
    })
}

/// Where a page of an Application's history ends, in one table's terms: rows before `(at, id)` (milliseconds, row
/// id), in the order `at DESC, id DESC`. `HistoryBound::NONE`: from the newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryBound {
    pub at: i64,
    pub id: i64,
}

impl HistoryBound {
    pub const NONE: HistoryBound = HistoryBound {
        at: i64::MAX,
        id: i64::MAX,
    };
}

/// What a new outbox row carries.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub receiver: String,
    pub order_key: String,
    pub thread_key: String,
    pub action: Action,
    pub payload: String,
    /// What lists show of it (`None`: a payload that is not a notification, as in tests).
    pub headline: Option<Headline>,
}

impl Store {
    /// Queues `n`, the notification of `thread`, in the caller's transaction: the one way into the outbox. The
    /// row takes the thread's key and order key, its headline, and the incidents it is about (for the
    /// Applications' pages).
    pub async fn queue(
        tx: &mut WriteTx,
        thread: &Thread,
        n: &Notification,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        debug_assert_eq!(n.thread_key, thread.key(), "a notification is queued in its own thread");
        debug_assert_eq!(
            n.receiver,
            thread.receiver(),
            "a notification is queued for its own receiver"
        );
        let d = NewDelivery {
            receiver: n.receiver.clone(),
            order_key: thread.order_key(),
            thread_key: n.thread_key.clone(),
            action: n.action,
            // Never an empty row: a notification that cannot be written fails its transaction.
            payload: serde_json::to_string(n)
                .map_err(|e| StoreError::Decode(format!("a notification could not be serialised: {e}")))?,
            headline: Headline::of(n),
        };
        let id = Store::enqueue(tx, &d, now).await?;
        // What it is about, for the Applications' pages ("who was told what, when").
        let apps: Vec<(i64, AppId)> = (n.incidents().iter())
            .filter(|i| i.id > 0)
            .map(|i| (i.id, i.app_id()))
            .collect();
        let about: Vec<(i64, &AppId)> = apps.iter().map(|(i, a)| (*i, a)).collect();
        Store::index_delivery(tx, id, &about, now).await?;
        metrics::counter!("herald_notifications_queued_total", "receiver" => n.receiver.clone(), "action" => n.action.as_str()).increment(1);
        Ok(())
    }

    /// Writes one outbox row as it is given (see [`Store::queue`]).
    pub async fn enqueue(tx: &mut WriteTx, d: &NewDelivery, now: DateTime<Utc>) -> Result<i64, StoreError> {
        let headline = d.headline.as_ref();
        let row = q!(
            "INSERT INTO outbox (receiver, order_key, thread_key, action, payload, state, attempts, due_at, \
                      created_at, title, about) VALUES ($1, $2, $3, $4, '', 'pending', 0, $5, $5, $6, $7) RETURNING id"
        )
        .bind(&d.receiver)
        .bind(&d.order_key)
        .bind(&d.thread_key)
        .bind(d.action.as_str())
        .bind(to_millis(now))
        .bind(headline.map(|h| h.title.clone()))
        .bind(headline.map(|h| h.incidents.get().to_string()))
        .fetch_one(&mut *tx.tx)
        .await?;
        let id: i64 = row.try_get("id")?;
        let payload = q!("INSERT INTO outbox_payloads (outbox_id, payload_doc) VALUES ($1, $2)")
            .bind(id)
            .bind(super::compress_doc(d.payload.as_bytes(), super::Effort::Fast));
        tx.exec(payload).await?;
        Ok(id)
    }

    /// Whether a notification of `thread_key` was ever queued (and is still kept): a change event is queued once.
    pub async fn has_thread(tx: &mut WriteTx, thread_key: &str) -> Result<bool, StoreError> {
        let query = q!("SELECT id FROM outbox WHERE thread_key = $1 LIMIT 1").bind(thread_key);
        Ok(!tx.rows(query, |_| Ok(())).await?.is_empty())
    }

    /// Claims due deliveries, the oldest pending one per order key only (open before update before resolve).
    pub async fn claim_deliveries(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<OutboxRecord>, StoreError> {
        // The lease also counts the attempt.
        let lease = "lease_owner = $3, lease_until = $4, attempts = attempts + 1";
        let pick = "SELECT o.id FROM outbox o WHERE o.state = 'pending' AND o.due_at <= $1 AND o.lease_until < $1 \
             AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.order_key = o.order_key AND p.state = 'pending' AND p.id < o.id) \
             ORDER BY o.due_at, o.id";
        let mut tx = self.begin().await?;
        let query = tx
            .lease_due("outbox", lease, pick, &outbox_columns("outbox"), now, limit)
            .bind(owner)
            .bind(to_millis(lease_until));
        let rows = query.fetch_all(&mut *tx.tx).await?;
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
        let done =
            q!("UPDATE outbox SET state = 'done', delivered_at = $1, lease_until = 0, last_error = NULL WHERE id = $2");
        tx.exec(done.bind(to_millis(now)).bind(row.id)).await?;
        if let Some(m) = memo {
            let query = q!(
                "INSERT INTO memos (receiver, thread_key, memo, updated_at) VALUES ($1, $2, $3, $4) \
                ON CONFLICT (receiver, thread_key) DO UPDATE SET memo = excluded.memo, updated_at = excluded.updated_at"
            )
            .bind(&row.receiver)
            .bind(&row.thread_key)
            .bind(encode(m))
            .bind(to_millis(now));
            tx.exec(query).await?;
        }
        tx.commit().await
    }

    /// Records a failed attempt: retry at `retry_at`, or dead.
    pub async fn failed(&self, id: i64, error: &str, retry_at: Option<DateTime<Utc>>) -> Result<(), StoreError> {
        let query = match retry_at {
            Some(at) => q!("UPDATE outbox SET due_at = $1, lease_until = 0, last_error = $2 WHERE id = $3")
                .bind(to_millis(at))
                .bind(error)
                .bind(id),
            None => q!("UPDATE outbox SET state = 'dead', lease_until = 0, last_error = $1 WHERE id = $2")
                .bind(error)
                .bind(id),
        };
        self.write_one(query).await?;
        Ok(())
    }

    /// Gives a lease back without counting the attempt (graceful shutdown).
    pub async fn release(&self, id: i64) -> Result<(), StoreError> {
        self.write_one(
            q!("UPDATE outbox SET lease_until = 0, attempts = attempts - 1 WHERE id = $1 AND state = 'pending'")
                .bind(id),
        )
        .await?;
        Ok(())
    }

    /// Puts a dead row back in the queue. Returns false when there is no dead row with that id.
    pub async fn retry_dead(&self, id: i64, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let query = q!(
            "UPDATE outbox SET state = 'pending', due_at = $1, created_at = $1, attempts = 0, lease_until = 0 \
             WHERE id = $2 AND state = 'dead'"
        )
        .bind(to_millis(now))
        .bind(id);
        Ok(self.write_one(query).await? == 1)
    }

    /// Removes the deliveries done before `before` (dead and pending ones stay); returns how many.
    pub async fn purge_delivered(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        // Their payloads and what they were about first: a row left by a crash in between joins nothing and goes
        // next time.
        for table in ["outbox_payloads", "outbox_apps"] {
            let query = q!(format!(
                "DELETE FROM {table} WHERE outbox_id IN \
                 (SELECT id FROM outbox WHERE state = 'done' AND delivered_at < $1)"
            ))
            .bind(to_millis(before));
            self.write_one(query).await?;
        }
        let query = q!("DELETE FROM outbox WHERE state = 'done' AND delivered_at < $1").bind(to_millis(before));
        self.write_one(query).await
    }

    /// Deliveries in `state` (all when `None`), newest first: at most `limit`, older than `before_id`.
    pub async fn outbox(
        &self,
        state: Option<DeliveryState>,
        limit: i64,
        before_id: Option<i64>,
    ) -> Result<Vec<OutboxRecord>, StoreError> {
        let rows = self
            .outbox_page(&outbox_columns("outbox"), state, limit, before_id)
            .await?;
        rows.iter().map(outbox_from_row).collect()
    }

    /// [`Store::outbox`] as a list shows it: each row with its headline instead of its payload.
    pub async fn outbox_headlines(
        &self,
        state: Option<DeliveryState>,
        limit: i64,
        before_id: Option<i64>,
    ) -> Result<Vec<ListedDelivery>, StoreError> {
        let rows = self.outbox_page(HEADLINE_COLUMNS, state, limit, before_id).await?;
        rows.iter().map(listed_from_row).collect()
    }

    async fn outbox_page(
        &self,
        columns: &str,
        state: Option<DeliveryState>,
        limit: i64,
        before_id: Option<i64>,
    ) -> Result<Vec<AnyRow>, StoreError> {
        // Plain comparisons where a filter is given, so the planner walks the `state, id` index (or the ids).
        let rows = q!(format!(
            "SELECT {columns} FROM outbox WHERE {} AND {} ORDER BY id DESC LIMIT $3",
            if state.is_some() { "state = $1" } else { "$1 = ''" },
            if before_id.is_some_and(|b| b != 0) {
                "id < $2"
            } else {
                "$2 = 0"
            },
        ))
        .bind(state.map_or("", DeliveryState::as_str))
        .bind(before_id.unwrap_or(0))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    /// Remembers which incidents (and their Applications) the delivery `outbox_id` is about, for the
    /// Applications' pages.
    pub async fn index_delivery(
        tx: &mut WriteTx,
        outbox_id: i64,
        about: &[(i64, &AppId)],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let sql = |values: &str| {
            format!(
                "INSERT INTO outbox_apps (outbox_id, incident_id, instance, namespace, name, created_at) VALUES {values}"
            )
        };
        // Several rows a statement: a group's message may be about hundreds of incidents.
        execute_in_chunks(tx, about, 64, 6, sql, |query, (incident, app)| {
            query
                .bind(outbox_id)
                .bind(*incident)
                .bind(&app.instance)
                .bind(&app.namespace)
                .bind(&app.name)
                .bind(to_millis(now))
        })
        .await?;
        Ok(())
    }

    /// The deliveries about an Application, newest queued first, at most `limit`, before `before` (see
    /// [`HistoryBound`]); each with the incident it is about (a delivery about two incidents of it comes once).
    pub async fn app_deliveries(
        &self,
        app: &AppId,
        before: HistoryBound,
        limit: i64,
    ) -> Result<Vec<AboutDelivery>, StoreError> {
        let rows = q!(format!(
            "SELECT a.incident_id, a.created_at AS queued_at, {} FROM outbox_apps a JOIN outbox o ON o.id = a.outbox_id \
             WHERE a.instance = $1 AND a.namespace = $2 AND a.name = $3 \
             AND (a.created_at < $4 OR (a.created_at = $4 AND a.outbox_id < $5)) \
             ORDER BY a.created_at DESC, a.outbox_id DESC, a.incident_id LIMIT $6",
            outbox_columns("o")
        ))
        .bind(&app.instance)
        .bind(&app.namespace)
        .bind(&app.name)
        .bind(before.at)
        .bind(before.id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<AboutDelivery> = Vec::with_capacity(rows.len());
        for r in &rows {
            let d = about_from_row(r)?;
            if out.last().is_none_or(|last| last.delivery.id != d.delivery.id) {
                out.push(d);
            }
        }
        Ok(out)
    }

    /// The newest `limit` deliveries about any of `incidents`, newest first, each with the incident it is about.
    pub async fn incident_deliveries(&self, incidents: &[i64], limit: i64) -> Result<Vec<AboutDelivery>, StoreError> {
        if incidents.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = incidents.iter().map(i64::to_string).collect();
        let rows = q!(format!(
            "SELECT a.incident_id, a.created_at AS queued_at, {} FROM outbox_apps a JOIN outbox o ON o.id = a.outbox_id \
             WHERE a.incident_id IN ({}) ORDER BY a.created_at DESC, a.outbox_id DESC LIMIT $1",
            outbox_columns("o"),
            ids.join(", ")
        ))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(about_from_row).collect()
    }

    /// Whether a delivery about `incident` was queued for `receiver` (and is still kept): what a Slack click on
    /// that incident, signed with that receiver's secret, must find.
    pub async fn was_told(&self, receiver: &str, incident: i64) -> Result<bool, StoreError> {
        let row = q!(
            "SELECT COUNT(*) AS n FROM outbox_apps a JOIN outbox o ON o.id = a.outbox_id \
             WHERE a.incident_id = $1 AND o.receiver = $2"
        )
        .bind(incident)
        .bind(receiver)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get::<i64, _>("n")? > 0)
    }

    /// When the oldest delivery still waiting was queued, if one is.
    pub async fn oldest_pending_delivery(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let row = q!("SELECT MIN(created_at) AS t FROM outbox WHERE state = 'pending'")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<Option<i64>, _>("t")?.map(crate::clock::from_millis))
    }

    pub async fn outbox_counts(&self) -> Result<Vec<(String, String, i64)>, StoreError> {
        let rows = q!("SELECT receiver, state, COUNT(*) AS n FROM outbox WHERE state IN ('pending', 'dead') GROUP BY receiver, state")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("receiver")?, r.try_get("state")?, r.try_get("n")?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notifications_headline_is_what_its_payload_says() {
        let mut n = crate::receivers::testing::firing_notification(Action::Open);
        let mut second = n.incidents()[0].clone();
        second.fingerprint = "second \"quoted\" one".into();
        crate::receivers::testing::incidents_of(&mut n).push(second);
        let payload = serde_json::to_string(&n).expect("json");
        let (of, read) = (
            Headline::of(&n).expect("a headline"),
            Headline::of_payload(&payload).expect("a notification"),
        );
        assert_eq!(of.title, n.title);
        assert_eq!(
            (of.title.as_str(), of.incidents.get()),
            (read.title.as_str(), read.incidents.get())
        );
        assert_eq!(
            of.fingerprints(),
            vec![n.incidents()[0].fingerprint.clone(), "second \"quoted\" one".into()]
        );
        assert!(
            Headline::of_payload("step-1").is_none(),
            "not a notification: no headline"
        );
    }
}
