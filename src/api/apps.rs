//! `/v1/apps`, `/v1/apps/{namespace}/{name}` (with its timeline and incidents), `/v1/apps/{namespace}/{name}/raw`
//! (the bodies received, to replay) and `/v1/prune-pending`.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use super::{AnswerItems, ApiError, AppContext, limit, limit_of, page_json, param, query};
use crate::argocd::AppId;
use crate::pipeline::{AppCursor, AppFilter, IncidentFilter};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AppQuery {
    sync: Option<String>,
    health: Option<String>,
    /// `true`: the deleted Applications (kept until `storage.raw_retention` ends) instead of the others.
    deleted: Option<bool>,
    team: Option<String>,
    limit: Option<i64>,
    /// The cursor of the `next` link.
    after: Option<String>,
}

fn app_json(team: &str, s: &crate::state::AppState) -> serde_json::Value {
    let snap = &s.snapshot;
    json!({
        "namespace": snap.app.namespace,
        "name": snap.app.name,
        "uid": snap.uid,
        "project": snap.project,
        "team": team,
        "destination": snap.destination,
        "labels": snap.labels,
        "annotations": snap.annotations,
        "lifecycle": s.lifecycle(),
        "deleted_at": s.deleted_at,
        "sync": {"status": snap.sync_status, "revisions": snap.revisions, "since": s.sync_since,
                 "since_at_least": s.sync_since_at_least},
        "health": {"status": snap.health_status, "message": snap.health_message, "since": s.health_since,
                   "since_at_least": s.health_since_at_least},
        "operation": snap.operation,
        "resources_requiring_pruning": snap.resources.iter().filter(|r| r.requires_pruning).collect::<Vec<_>>(),
        "resources": snap.resources,
        "conditions": snap.conditions,
        "sync_policy": snap.sync_policy,
        "first_seen": s.first_seen,
        "last_seen": s.last_seen,
        "observed_at": s.observed_at,
    })
}

/// Applications read from the store at a time, so that a page of large ones (a state is at most
/// [`crate::argocd::caps::MAX_SNAPSHOT_BYTES`]) is never all in memory at once.
const READ_BATCH: i64 = 50;

pub(super) async fn list_apps(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let q: AppQuery = query(&req)?;
    // Argo CD's statuses: a misspelt filter (`outofsync`) is an error, not an empty list.
    const SYNC: [&str; 3] = ["Synced", "OutOfSync", "Unknown"];
    const HEALTH: [&str; 6] = ["Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"];
    let one_of = |key: &'static str, valid: &'static [&'static str]| {
        move |v: &str| format!("{key} must be one of {}; not {v:?}", valid.join(", "))
    };
    let sync = param(
        q.sync.as_deref(),
        |v| SYNC.into_iter().find(|s| *s == v),
        one_of("sync", &SYNC),
    )?;
    let health = param(
        q.health.as_deref(),
        |v| HEALTH.into_iter().find(|s| *s == v),
        one_of("health", &HEALTH),
    )?;
    let after = match q.after.as_deref() {
        Some(a) => Some(AppCursor::decode(a).ok_or_else(|| {
            ApiError::BadRequest("after must be the cursor of a `next` link, as Herald wrote it".into())
        })?),
        None => None,
    };
    let filter = AppFilter {
        sync: sync.map(str::to_string),
        health: health.map(str::to_string),
        team: q.team,
        deleted: q.deleted.unwrap_or(false),
        limit: limit_of(q.limit, 100, 1000)?,
        after,
        ..Default::default()
    };
    let (mut answer, mut cursor) = (AnswerItems::default(), None);
    let mut batch = filter.clone();
    loop {
        batch.limit = (filter.limit - answer.items.len() as i64).min(READ_BATCH);
        let apps = ctx.pipeline.apps(&batch).await?;
        for a in &apps {
            if !answer.take(app_json(&a.team, &a.state)) {
                break;
            }
            cursor = Some(AppCursor::of(&a.state));
        }
        if answer.full || (apps.len() as i64) < batch.limit || answer.items.len() as i64 >= filter.limit {
            break;
        }
        batch.after = cursor.clone();
    }
    // A page cut by size is as full as one cut by `limit`: it gets a `next` link.
    let limit = if answer.full {
        answer.items.len() as i64
    } else {
        filter.limit
    };
    Ok(HttpResponse::Ok().json(page_json(&req, answer.items, limit, cursor.map(|c| c.encode()))))
}

pub(super) async fn get_app(
    path: web::Path<(String, String)>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let (namespace, name) = path.into_inner();
    let id = AppId { namespace, name };
    let Some(rec) = ctx.pipeline.app(&id).await? else {
        return Err(ApiError::NotFound(format!("no Application {id} has been seen")));
    };
    let timeline = ctx.pipeline.timeline(&id, 200).await?;
    let filter = IncidentFilter {
        app: Some(id.clone()),
        limit: 50,
        ..Default::default()
    };
    let incidents = ctx.pipeline.incidents(&filter).await?;
    let mut v = app_json(&rec.team, &rec.state);
    v["timeline"] = json!(timeline);
    v["incidents"] = json!(incidents.iter().map(|i| i.full_view()).collect::<Vec<_>>());
    Ok(HttpResponse::Ok().json(v))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuery {
    limit: Option<i64>,
}

/// The bodies received for an Application (newest first, within `storage.raw_retention`), to replay them with
/// `herald replay`.
pub(super) async fn get_raw(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let q: RawQuery = query(&req)?;
    let (namespace, name) = path.into_inner();
    let id = AppId { namespace, name };
    let bodies = ctx.pipeline.raw_bodies(&id, limit(q.limit)?).await?;
    let items: Vec<_> = bodies
        .into_iter()
        .map(|(at, body)| {
            let parsed = serde_json::from_str::<serde_json::Value>(&body).unwrap_or(serde_json::Value::String(body));
            json!({"received_at": at, "body": parsed})
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({"count": items.len(), "items": items})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PruneQuery {
    limit: Option<i64>,
    /// `namespace/name` of the last Application of the previous page.
    after: Option<String>,
}

/// Rows of one `/v1/prune-pending` answer: past them, `omitted` says how many more the page's Applications have
/// (each Application's own list is in `/v1/apps/{namespace}/{name}`).
pub const MAX_PRUNE_ROWS: usize = 2000;

/// The resources waiting to be pruned, a page of Applications at a time (their resources, the longest waiting
/// first, at most [`MAX_PRUNE_ROWS`]).
pub(super) async fn prune_pending(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let q: PruneQuery = query(&req)?;
    let after = match q.after.as_deref() {
        Some(a) => {
            let (namespace, name) = a
                .split_once('/')
                .ok_or_else(|| ApiError::BadRequest("after must be namespace/name".into()))?;
            Some(AppId {
                namespace: namespace.into(),
                name: name.into(),
            })
        }
        None => None,
    };
    let (rows, omitted, next) = ctx
        .pipeline
        .prune_pending(limit_of(q.limit, 200, 1000)?, after.as_ref(), MAX_PRUNE_ROWS)
        .await?;
    let mut v = json!({"count": rows.len(), "items": rows, "omitted": omitted});
    if let Some(next) = next {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        query.append_pair("after", &next.to_string());
        if let Some(l) = q.limit {
            query.append_pair("limit", &l.to_string());
        }
        v["next"] = json!(format!("{}?{}", req.path(), query.finish()));
    }
    Ok(HttpResponse::Ok().json(v))
}
