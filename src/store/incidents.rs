//! Incidents (`incidents`, each one's view zstd-compressed in `view_doc`): [`IncidentRecord`] and its row decoding,
//! opening and resolving, the claim of pending incidents whose `for` has elapsed, and the listings.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::{
    Effort, Store, StoreError, WriteTx, compress_doc, decode, decode_doc, encode, execute_in_chunks, parse_column,
    values,
};
use crate::argocd::AppId;
use crate::clock::{from_millis, to_millis};
use crate::domain::{Acknowledgement, Incident, IncidentState, Kind, Severity};

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
    /// Who acknowledged it, if anyone (its own columns: the view never holds it).
    pub ack: Option<Acknowledgement>,
    /// The storm it is a member of, if any (the storm incident's id; see `pipeline::storms`).
    pub storm_id: Option<i64>,
}

impl IncidentRecord {
    /// The labels matchers see (`Labels::of` the full view), without copying the view first.
    pub fn labels(&self) -> crate::domain::Labels {
        let mut labels = crate::domain::Labels::of(&self.view);
        labels.severity = self.severity;
        labels
    }

    /// The view with the record's live fields filled in.
    pub fn full_view(&self) -> Incident {
        self.clone().into_full_view()
    }

    /// [`IncidentRecord::full_view`], taking the record (its view is not copied): the columns put into it as a row
    /// read is ([`from_columns`]: they may have moved since, firing or resolving), with its acknowledgement.
    pub fn into_full_view(mut self) -> Incident {
        from_columns(&mut self);
        self.view.acknowledged = self.ack;
        self.view
    }
}

/// The columns [`incident_from_row`] reads.
pub(super) const INCIDENT_COLUMNS: &str = "id, fingerprint, kind, instance, namespace, name, team, severity, state, \
                                           since, fire_at, fired_at, resolved_at, notified, view_json, view_doc, \
                                           acked_by, acked_at, ack_until, ack_comment, storm_id";

pub(super) fn incident_from_row(r: &AnyRow) -> Result<IncidentRecord, StoreError> {
    let mut record = IncidentRecord {
        id: r.try_get("id")?,
        fingerprint: r.try_get("fingerprint")?,
        kind: parse_column("incident kind", r.try_get("kind")?, Kind::parse)?,
        app: app_from_row(r)?,
        team: r.try_get("team")?,
        severity: parse_column("incident severity", r.try_get("severity")?, Severity::parse)?,
        state: parse_column("incident state", r.try_get("state")?, IncidentState::parse)?,
        since: from_millis(r.try_get("since")?),
        fire_at: from_millis(r.try_get("fire_at")?),
        fired_at: r.try_get::<Option<i64>, _>("fired_at")?.map(from_millis),
        resolved_at: r.try_get::<Option<i64>, _>("resolved_at")?.map(from_millis),
        notified: r.try_get::<i64, _>("notified")? != 0,
        view: view_from_row(r, "view_doc", "view_json")?,
        ack: match r.try_get::<Option<String>, _>("acked_by")? {
            None => None,
            Some(by) => Some(Acknowledgement {
                by,
                at: from_millis(r.try_get::<Option<i64>, _>("acked_at")?.unwrap_or_default()),
                until: r.try_get::<Option<i64>, _>("ack_until")?.map(from_millis),
                comment: r.try_get::<Option<String>, _>("ack_comment")?.unwrap_or_default(),
            }),
        },
        storm_id: r.try_get("storm_id")?,
    };
    from_columns(&mut record);
    Ok(record)
}

/// The Application an incident's row is about (its `instance`, `namespace` and `name` columns).
pub(super) fn app_from_row(r: &AnyRow) -> Result<AppId, StoreError> {
    Ok(AppId {
        instance: r.try_get("instance")?,
        namespace: r.try_get("namespace")?,
        name: r.try_get("name")?,
    })
}

/// An incident's stored view from the columns `doc` (compressed) and `json` (the JSON text of a row written before
/// views were compressed), as [`stored_view`] leaves it.
pub(super) fn view_from_row(r: &AnyRow, doc: &str, json: &str) -> Result<Incident, StoreError> {
    match r.try_get::<Option<Vec<u8>>, _>(doc)? {
        Some(doc) => decode_doc(&doc),
        None => decode(&r.try_get::<Option<String>, _>(json)?.unwrap_or_default()),
    }
}

/// The fields of a view its row's columns hold: the stored view leaves them blank ([`stored_view`]) and reading puts
/// them back, so the row does not hold them twice (for views stored before, the columns hold the same).
fn from_columns(record: &mut IncidentRecord) {
    let v = &mut record.view;
    v.id = record.id;
    v.fingerprint.clone_from(&record.fingerprint);
    v.kind = record.kind;
    v.instance.clone_from(&record.app.instance);
    v.app_namespace.clone_from(&record.app.namespace);
    v.app_name.clone_from(&record.app.name);
    v.team.clone_from(&record.team);
    v.severity = record.severity;
    v.state = record.state;
    v.since = record.since;
    v.fired_at = record.fired_at;
    v.resolved_at = record.resolved_at;
}

/// A view with the fields its row's columns hold left blank (see [`from_columns`]).
fn without_columns(view: &Incident) -> Incident {
    Incident {
        id: 0,
        fingerprint: String::new(),
        instance: crate::domain::default_instance(),
        app_namespace: String::new(),
        app_name: String::new(),
        team: String::new(),
        since: DateTime::<Utc>::UNIX_EPOCH,
        fired_at: None,
        resolved_at: None,
        ..view.clone()
    }
}

/// One text field of a stored incident holds at most this many bytes, and a list at most [`MAX_ITEMS`] entries:
/// a 2 MB operation message must not become megabytes per row and per delivery.
const MAX_FIELD: usize = 16 * 1024;
const MAX_ITEMS: usize = 100;

fn cap(s: &mut String) {
    if s.len() > MAX_FIELD {
        let mut end = MAX_FIELD;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("… (cut)");
    }
}

/// What storms read of an incident without its view (`incidents.cluster`, `incidents.message_key`, migration
/// 0022): its destination cluster, and a key of its first message as stored (capped, trimmed; empty when it has none).
pub(super) fn storm_columns(view: &Incident) -> (String, String) {
    let keyed = |text: &str| match text.trim() {
        "" => String::new(),
        text => format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes())),
    };
    let key = match view.messages.first() {
        None => String::new(),
        Some(first) if first.len() <= MAX_FIELD => keyed(first),
        // Copied only to cut it as `capped_view` stores it.
        Some(first) => {
            let mut stored = first.clone();
            cap(&mut stored);
            keyed(&stored)
        }
    };
    (view.destination_cluster.clone(), key)
}

/// The incident as stored (`view_doc`): [`capped_view`] without what the row's columns hold, zstd-compressed.
fn stored_view(view: &Incident) -> Vec<u8> {
    compress_doc(capped_view(&without_columns(view)).as_bytes(), Effort::Kept)
}

/// The incident's JSON with every text capped, long lists cut with a note saying how much was left out.
fn capped_view(view: &Incident) -> String {
    let fits = |s: &str| s.len() <= MAX_FIELD;
    let small = fits(&view.summary)
        && view.messages.len() <= MAX_ITEMS
        && view.resources.len() <= MAX_ITEMS
        && view.messages.iter().all(|m| fits(m))
        && view.resources.iter().all(|r| fits(&r.message) && fits(&r.name))
        && view.hints.iter().all(|h| fits(&h.text))
        && view.notes.iter().all(|n| fits(n));
    if small {
        return encode(view);
    }
    let mut v = view.clone();
    cap(&mut v.summary);
    if v.resources.len() > MAX_ITEMS {
        let left = v.resources.len() - MAX_ITEMS;
        v.resources.truncate(MAX_ITEMS);
        v.notes.push(format!("{left} more resources are not shown"));
    }
    if v.messages.len() > MAX_ITEMS {
        let left = v.messages.len() - MAX_ITEMS;
        v.messages.truncate(MAX_ITEMS);
        v.notes.push(format!("{left} more messages are not shown"));
    }
    v.messages.iter_mut().for_each(cap);
    for r in &mut v.resources {
        cap(&mut r.message);
        cap(&mut r.name);
    }
    v.hints.iter_mut().for_each(|h| cap(&mut h.text));
    v.notes.iter_mut().for_each(cap);
    encode(&v)
}

/// Which incidents [`Store::incidents`] returns: by state, team, kind and Application; newest first (or the soonest
/// to fire first, for pending ones); at most `limit`, older than `before_id` (the cursor).
#[derive(Debug, Clone, Default)]
pub struct IncidentFilter {
    pub state: Option<IncidentState>,
    pub team: Option<String>,
    pub kind: Option<Kind>,
    pub app: Option<AppId>,
    /// Only this Argo CD instance's (all when `None`).
    pub instance: Option<String>,
    pub soonest_first: bool,
    pub limit: i64,
    pub before_id: Option<i64>,
    /// Only incidents that notified someone (`Some(true)`), or only those that did not (`Some(false)`).
    pub notified: Option<bool>,
}

/// The incidents resolved before `$1`: what the history purge removes (from the partial index of migration 0016).
const RESOLVED_BEFORE: &str = "FROM incidents WHERE state = 'resolved' AND resolved_at < $1";

impl Store {
    /// Removes the incidents resolved before `before`, with their places in notification groups and their
    /// escalation steps (part of [`Store::purge_history`]); answers how many incidents went.
    pub(super) async fn purge_resolved_incidents(tx: &mut WriteTx, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let at = to_millis(before);
        tx.exec(q!("DELETE FROM storms WHERE ended_at < $1").bind(at)).await?;
        for table in ["group_members", "escalations"] {
            let sql = format!("DELETE FROM {table} WHERE incident_id IN (SELECT id {RESOLVED_BEFORE})");
            tx.exec(q!(sql).bind(at)).await?;
        }
        tx.exec(q!(format!("DELETE {RESOLVED_BEFORE}")).bind(at)).await
    }

    /// The open incidents of several Applications at once.
    pub async fn open_incidents_of(
        tx: &mut WriteTx,
        ids: &[AppId],
    ) -> Result<HashMap<AppId, Vec<IncidentRecord>>, StoreError> {
        open_incidents_on(&mut tx.tx, tx.engine, ids).await
    }

    /// [`Store::open_incidents_of`] outside a write transaction (a list that says what holds each incident back).
    /// The open incidents already in `known` (the page being answered) are taken from there: only the others are
    /// read and decoded, after a first read of which incidents are open, from the index alone.
    pub async fn open_incidents_read(
        &self,
        ids: &[AppId],
        known: &[IncidentRecord],
    ) -> Result<HashMap<AppId, Vec<IncidentRecord>>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let mut conn = self.pool.acquire().await?;
        let open = super::fetch_for_apps_on(&mut conn, self.engine, ids, open_of_apps("id")).await?;
        let known: HashMap<i64, &IncidentRecord> = known.iter().map(|r| (r.id, r)).collect();
        let mut records = Vec::with_capacity(open.len());
        let mut missing = Vec::new();
        for row in &open {
            let id: i64 = row.try_get("id")?;
            match known.get(&id) {
                Some(rec) => records.push((*rec).clone()),
                None => missing.push(id),
            }
        }
        for chunk in missing.chunks(100) {
            // Still open: it may have resolved since the first read.
            let sql = format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE id IN (VALUES {}) AND state IN ('pending', 'firing')",
                super::placeholders(self.engine, chunk.len(), 1)
            );
            let query = chunk.iter().fold(q!(sql), |q, id| q.bind(*id));
            for row in query.fetch_all(&mut *conn).await? {
                records.push(incident_from_row(&row)?);
            }
        }
        Ok(by_app(records))
    }

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
        let (cluster, message_key) = storm_columns(view);
        let row = q!(
            "INSERT INTO incidents (fingerprint, kind, instance, namespace, name, team, severity, state, since, \
                      fire_at, fired_at, view_json, view_doc, cluster, message_key) \
                      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, '', $12, $13, $14) RETURNING id"
        )
        .bind(&view.fingerprint)
        .bind(view.kind.as_str())
        .bind(&app.instance)
        .bind(&app.namespace)
        .bind(&app.name)
        .bind(&view.team)
        .bind(view.severity.as_str())
        .bind(state.as_str())
        .bind(to_millis(since))
        .bind(to_millis(fire_at))
        .bind(fired_at.map(to_millis))
        .bind(stored_view(view))
        .bind(cluster)
        .bind(message_key)
        .fetch_one(&mut *tx.tx)
        .await?;
        Ok(row.try_get("id")?)
    }

    /// Inserts pending incidents, several per statement.
    pub async fn insert_pending_incidents(tx: &mut WriteTx, rows: &[IncidentRecord]) -> Result<(), StoreError> {
        let sql = |values: &str| {
            format!(
                "INSERT INTO incidents (fingerprint, kind, instance, namespace, name, team, severity, state, since, \
                 fire_at, view_json, view_doc, cluster, message_key) VALUES {values}"
            )
        };
        execute_in_chunks(tx, rows, 32, 14, sql, |query, r| {
            let (cluster, message_key) = storm_columns(&r.view);
            query
                .bind(&r.fingerprint)
                .bind(r.kind.as_str())
                .bind(&r.app.instance)
                .bind(&r.app.namespace)
                .bind(&r.app.name)
                .bind(&r.team)
                .bind(r.severity.as_str())
                .bind(r.state.as_str())
                .bind(to_millis(r.since))
                .bind(to_millis(r.fire_at))
                .bind("")
                .bind(stored_view(&r.view))
                .bind(cluster)
                .bind(message_key)
        })
        .await?;
        Ok(())
    }

    /// Resolves pending incidents (nothing was sent for them), several per statement.
    pub async fn resolve_pending(tx: &mut WriteTx, ids: &[i64], at: DateTime<Utc>) -> Result<(), StoreError> {
        for chunk in ids.chunks(100) {
            let list = values(chunk.len(), 1, 2);
            let sql = format!("UPDATE incidents SET state = 'resolved', resolved_at = $1 WHERE id IN (VALUES {list})");
            let query = chunk.iter().fold(q!(sql).bind(to_millis(at)), |q, id| q.bind(*id));
            tx.exec(query).await?;
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
        let (cluster, message_key) = storm_columns(view);
        let query = q!(
            "UPDATE incidents SET view_json = '', view_doc = $1, severity = $2, team = $3, cluster = $4, \
                        message_key = $5 WHERE id = $6"
        )
        .bind(stored_view(view))
        .bind(view.severity.as_str())
        .bind(&view.team)
        .bind(cluster)
        .bind(message_key)
        .bind(id);
        tx.exec(query).await?;
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
        tx.exec(q!(sql).bind(to_millis(at)).bind(id)).await?;
        Ok(())
    }

    /// Records who acknowledged incident `id` (replacing an earlier acknowledgement), or clears it (`None`).
    pub async fn set_acknowledgement(
        tx: &mut WriteTx,
        id: i64,
        ack: Option<&Acknowledgement>,
    ) -> Result<(), StoreError> {
        let query =
            q!("UPDATE incidents SET acked_by = $1, acked_at = $2, ack_until = $3, ack_comment = $4 WHERE id = $5")
                .bind(ack.map(|a| a.by.clone()))
                .bind(ack.map(|a| to_millis(a.at)))
                .bind(ack.and_then(|a| a.until.map(to_millis)))
                .bind(ack.map(|a| a.comment.clone()))
                .bind(id);
        tx.exec(query).await?;
        Ok(())
    }

    pub async fn set_notified(tx: &mut WriteTx, id: i64, notified: bool) -> Result<(), StoreError> {
        tx.exec(
            q!("UPDATE incidents SET notified = $1 WHERE id = $2")
                .bind(notified as i64)
                .bind(id),
        )
        .await?;
        Ok(())
    }

    /// Claims pending incidents whose `for` has elapsed (lease so another replica skips them meanwhile).
    pub async fn claim_due_incidents(
        tx: &mut WriteTx,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<IncidentRecord>, StoreError> {
        let pick = "SELECT id FROM incidents WHERE state = 'pending' AND fire_at <= $1 AND lease_until < $1 \
                    ORDER BY fire_at";
        let query = tx
            .lease_due("incidents", "lease_until = $3", pick, INCIDENT_COLUMNS, now, limit)
            .bind(to_millis(lease_until));
        tx.rows(query, incident_from_row).await
    }

    /// Firing incidents that were silenced when they fired (not notified yet).
    pub async fn unnotified_firing(tx: &mut WriteTx, limit: i64) -> Result<Vec<IncidentRecord>, StoreError> {
        let query = q!(format!(
            "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE state = 'firing' AND notified = 0 ORDER BY id LIMIT $1"
        ))
        .bind(limit);
        tx.rows(query, incident_from_row).await
    }

    /// One page of incidents, newest first (see [`IncidentFilter`]).
    pub async fn incidents(&self, f: &IncidentFilter) -> Result<Vec<IncidentRecord>, StoreError> {
        let (ns, name) = f
            .app
            .as_ref()
            .map(|a| (a.namespace.as_str(), a.name.as_str()))
            .unwrap_or(("", ""));
        let instance = (f.app.as_ref().map(|a| a.instance.as_str()))
            .or(f.instance.as_deref())
            .unwrap_or("");
        let order = if f.soonest_first { "fire_at ASC, id" } else { "id DESC" };
        // Each filter given is a plain comparison the planner can use an index for (`state, id`; the
        // Application's); one not given is a constant test of its empty parameter, so the binds stay in place.
        let given = |yes: bool, sql: &'static str, absent: &'static str| if yes { sql } else { absent };
        let rows = q!(format!(
            "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE {} AND {} AND {} AND {} AND {} AND {} AND {} \
             ORDER BY {order} LIMIT $7",
            given(f.state.is_some(), "state = $1", "$1 = ''"),
            given(f.team.as_deref().is_some_and(|t| !t.is_empty()), "team = $2", "$2 = ''"),
            given(f.kind.is_some(), "kind = $3", "$3 = ''"),
            given(!ns.is_empty(), "namespace = $4 AND name = $5", "$4 = '' AND $5 = $5"),
            given(f.before_id.is_some_and(|b| b != 0), "id < $6", "$6 = 0"),
            given(f.notified.is_some(), "notified = $8", "$8 < 0"),
            given(!instance.is_empty(), "instance = $9", "$9 = ''"),
        ))
        .bind(f.state.map_or("", IncidentState::as_str))
        .bind(f.team.as_deref().unwrap_or(""))
        .bind(f.kind.map_or("", Kind::as_str))
        .bind(ns)
        .bind(name)
        .bind(f.before_id.unwrap_or(0))
        .bind(f.limit)
        .bind(f.notified.map_or(-1i64, i64::from))
        .bind(instance)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(incident_from_row).collect()
    }

    /// How many incidents are in `state` (of `team`, when given).
    pub async fn count_incidents(
        &self,
        state: IncidentState,
        team: Option<&str>,
        instance: Option<&str>,
    ) -> Result<usize, StoreError> {
        let row = q!(
            "SELECT COUNT(*) AS n FROM incidents WHERE state = $1 AND ($2 = '' OR team = $2) \
                      AND ($3 = '' OR instance = $3)"
        )
        .bind(state.as_str())
        .bind(team.unwrap_or(""))
        .bind(instance.unwrap_or(""))
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get::<i64, _>("n")?.max(0) as usize)
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
}

/// Open incidents by Application, each Application's in one order on both engines (what inhibition and the
/// answers list first): firing before pending, each oldest first. Sorted here: an `ORDER BY` made SQLite walk every
/// open incident of the store in that order rather than search each Application's and sort them.
fn by_app(records: Vec<IncidentRecord>) -> HashMap<AppId, Vec<IncidentRecord>> {
    let mut out: HashMap<AppId, Vec<IncidentRecord>> = HashMap::new();
    for rec in records {
        out.entry(rec.app.clone()).or_default().push(rec);
    }
    for list in out.values_mut() {
        list.sort_by(|a, b| (a.state.as_str(), a.id).cmp(&(b.state.as_str(), b.id)));
    }
    out
}

/// The pending and firing incidents of the Applications `ids`, by Application, read on `conn`.
async fn open_incidents_on(
    conn: &mut sqlx::AnyConnection,
    engine: super::Engine,
    ids: &[AppId],
) -> Result<HashMap<AppId, Vec<IncidentRecord>>, StoreError> {
    let rows = super::fetch_for_apps_on(conn, engine, ids, open_of_apps(INCIDENT_COLUMNS)).await?;
    Ok(by_app(rows.iter().map(incident_from_row).collect::<Result<_, _>>()?))
}

/// The query of [`super::fetch_for_apps_on`] that reads `columns` of the open incidents of its Applications.
fn open_of_apps(columns: &str) -> impl Fn(&str) -> String + '_ {
    move |pairs| {
        format!(
            "SELECT {columns} FROM incidents WHERE (instance, namespace, name) IN (VALUES {pairs}) \
             AND state IN ('pending', 'firing')"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_labels_are_those_of_its_full_view() {
        let rec = IncidentRecord {
            id: 7,
            fingerprint: "f".into(),
            kind: Kind::SyncFailed,
            app: AppId {
                instance: "eu".into(),
                namespace: "argocd".into(),
                name: "pay".into(),
            },
            team: "payments".into(),
            // Raised since the view was stored: the record's column is what holds.
            severity: Severity::Critical,
            state: IncidentState::Firing,
            since: Utc::now(),
            fire_at: Utc::now(),
            fired_at: None,
            resolved_at: None,
            notified: true,
            view: Incident {
                instance: "eu".into(),
                team: "payments".into(),
                kind: Kind::SyncFailed,
                app_namespace: "argocd".into(),
                app_name: "pay".into(),
                fingerprint: "f".into(),
                severity: Severity::Warning,
                labels: [("tier".to_string(), "1".to_string())].into(),
                ..Default::default()
            },
            ack: None,
            storm_id: None,
        };
        assert_eq!(rec.labels(), crate::domain::Labels::of(&rec.full_view()));
        assert_eq!(rec.labels().severity, Severity::Critical);
    }

    #[test]
    fn a_huge_incident_is_stored_capped() {
        let view = Incident {
            summary: "s".repeat(100_000),
            messages: vec!["m".repeat(2_000_000); 3],
            resources: (0..250)
                .map(|i| crate::domain::ResourceRef {
                    name: format!("r{i}"),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let stored = capped_view(&view);
        assert!(stored.len() < 120 * 1024, "{} bytes", stored.len());
        let back: Incident = decode(&stored).expect("decodes");
        assert!(back.summary.ends_with("… (cut)"));
        assert_eq!(back.resources.len(), MAX_ITEMS);
        assert!(
            back.notes.iter().any(|n| n == "150 more resources are not shown"),
            "{:?}",
            back.notes
        );
        let doc: Incident = decode_doc(&stored_view(&view)).expect("the stored document decodes");
        let back: Incident = decode(&capped_view(&without_columns(&view))).expect("decodes");
        assert_eq!(doc, back, "and is the capped view, compressed");
        let small = Incident::default();
        assert_eq!(
            capped_view(&small),
            encode(&small),
            "a normal incident is stored as it is"
        );
    }

    #[test]
    fn a_stored_view_leaves_its_columns_out_and_reads_back_whole() {
        let at = |s: &str| s.parse::<DateTime<Utc>>().expect("time");
        let view = Incident {
            id: 7,
            fingerprint: "04641ca576f9ea5e0b63".into(),
            kind: Kind::OutOfSync,
            severity: Severity::Critical,
            state: IncidentState::Resolved,
            summary: "argocd/pay is OutOfSync".into(),
            instance: "eu".into(),
            app_namespace: "argocd".into(),
            app_name: "pay".into(),
            team: "payments".into(),
            since: at("2026-12-03T17:47:06.870383332Z"),
            fired_at: Some(at("2026-12-03T18:47:06Z")),
            resolved_at: Some(at("2026-12-03T19:00:00Z")),
            ..Default::default()
        };
        let stored =
            String::from_utf8(super::super::decompress_doc(&stored_view(&view)).expect("read")).expect("utf-8");
        for held in ["04641ca576f9ea5e0b63", "\"pay\"", "payments", "eu", "2026-12-03"] {
            assert!(
                !stored.contains(held),
                "{held} is in the row's columns, not its view: {stored}"
            );
        }
        assert!(stored.contains("argocd/pay is OutOfSync"));
        let mut record = IncidentRecord {
            id: 7,
            fingerprint: view.fingerprint.clone(),
            kind: view.kind,
            app: AppId::of("eu", "argocd", "pay"),
            team: view.team.clone(),
            severity: view.severity,
            state: view.state,
            since: view.since,
            fire_at: view.since,
            fired_at: view.fired_at,
            resolved_at: view.resolved_at,
            notified: true,
            view: decode_doc(&stored_view(&view)).expect("decodes"),
            ack: None,
            storm_id: None,
        };
        from_columns(&mut record);
        assert_eq!(record.view, view);
    }
}
