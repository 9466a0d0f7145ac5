//! `/v1/apps`, `/v1/apps/{namespace}/{name}` (with its timeline and incidents), `/v1/apps/{namespace}/{name}/raw`
//! (the bodies received, to replay) and `/v1/prune-pending`. The two-segment paths are the default Argo CD
//! instance's; `/v1/apps/{instance}/{namespace}/{name}[/raw]` names any instance (see [`three_segments`] for how
//! `/v1/apps/a/b/c` is told apart).

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use super::{AnswerItems, ApiError, AppContext, limit, limit_of, page_response, param, query};
use crate::argocd::{AppId, DEFAULT_INSTANCE, HealthStatus, SyncStatus};
use crate::configuration::Scope;
use crate::pipeline::{AppCursor, AppFilter, IncidentFilter};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AppQuery {
    sync: Option<String>,
    health: Option<String>,
    /// `true`: the deleted Applications (kept until `storage.raw_retention` ends) instead of the others.
    deleted: Option<bool>,
    team: Option<String>,
    /// Only this Argo CD instance's.
    instance: Option<String>,
    limit: Option<i64>,
    /// The cursor of the `next` link.
    after: Option<String>,
}

fn app_json(team: &str, s: &crate::state::AppState) -> serde_json::Value {
    let snap = &s.snapshot;
    json!({
        "instance": snap.app.instance,
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
    let sync = param(q.sync.as_deref(), SyncStatus::known, |v| {
        format!("sync must be one of {}; not {v:?}", SyncStatus::list())
    })?;
    let health = param(q.health.as_deref(), HealthStatus::known, |v| {
        format!("health must be one of {}; not {v:?}", HealthStatus::list())
    })?;
    let after = match q.after.as_deref() {
        Some(a) => Some(AppCursor::decode(a).ok_or_else(|| {
            ApiError::BadRequest("after must be the cursor of a `next` link, as Herald wrote it".into())
        })?),
        None => None,
    };
    let filter = AppFilter {
        sync: sync.map(|s| s.to_string()),
        health: health.map(|h| h.to_string()),
        team: q.team,
        instance: known_instance(&ctx, q.instance)?,
        deleted: q.deleted.unwrap_or(false),
        limit: limit_of(q.limit, 100, 1000)?,
        after,
        ..Default::default()
    };
    let (mut answer, mut cursor) = (AnswerItems::default(), None);
    let mut batch = filter.clone();
    loop {
        batch.limit = (filter.limit - answer.count as i64).min(READ_BATCH);
        let apps = ctx.pipeline.apps(&batch).await?;
        for a in &apps {
            if !answer.take(&app_json(&a.team, &a.state)) {
                break;
            }
            cursor = Some(AppCursor::of(&a.state));
        }
        if answer.full || (apps.len() as i64) < batch.limit || answer.count as i64 >= filter.limit {
            break;
        }
        batch.after = cursor.clone();
    }
    // A page cut by size is as full as one cut by `limit`: it gets a `next` link.
    Ok(page_response(&req, answer, filter.limit, cursor.map(|c| c.encode())))
}

/// An `instance=` filter: a configured instance's name (a misspelt one is an error, not an empty list).
pub(super) fn known_instance(ctx: &AppContext, instance: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(name) = instance else { return Ok(None) };
    let settings = ctx.pipeline.settings();
    if settings.argocd.instance(&name).is_some() {
        return Ok(Some(name));
    }
    let known = settings.argocd.names();
    Err(ApiError::BadRequest(format!(
        "instance must be a configured Argo CD instance ({}); not {name:?}",
        known
    )))
}

/// `GET /v1/apps/{namespace}/{name}`: a default-instance Application.
pub(super) async fn get_app(
    path: web::Path<(String, String)>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let (namespace, name) = path.into_inner();
    app_answer(AppId::new(namespace, name), &ctx).await
}

/// `GET /v1/apps/{instance}/{namespace}/{name}/raw`.
pub(super) async fn get_instance_raw(
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let (instance, namespace, name) = path.into_inner();
    raw_answer(&req, AppId::of(instance, namespace, name), &ctx).await
}

/// `GET /v1/apps/{a}/{b}/{c}`: `a`'s Application `b/c` when `a` is a configured instance other than the default;
/// else, when `c` is `raw`, the bodies of the default instance's `a/b` (which need `admin`, checked here: the route
/// itself needs only `read`); else, when `a` is `default`, the default instance's `b/c`. The default instance's `raw`
/// bodies of a namespace that is also an instance's name are at `/v1/apps/default/{namespace}/{name}/raw`.
pub(super) async fn three_segments(
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let (a, b, c) = path.into_inner();
    let settings = ctx.pipeline.settings();
    if a != DEFAULT_INSTANCE && settings.argocd.instance(&a).is_some() {
        return app_answer(AppId::of(a, b, c), &ctx).await;
    }
    if c == "raw" {
        super::auth::also_needs(&req, &ctx, Scope::Admin)?;
        return raw_answer(&req, AppId::new(a, b), &ctx).await;
    }
    if a == DEFAULT_INSTANCE {
        return app_answer(AppId::new(b, c), &ctx).await;
    }
    let known = settings.argocd.names();
    Err(ApiError::NotFound(format!(
        "no Argo CD instance named {a:?} is configured ({}): /v1/apps/{{instance}}/{{namespace}}/{{name}}, or \
         /v1/apps/{{namespace}}/{{name}} for the default instance",
        known
    )))
}

/// An Application with its timeline and incidents.
async fn app_answer(id: AppId, ctx: &AppContext) -> Result<HttpResponse, ApiError> {
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
async fn raw_answer(req: &HttpRequest, id: AppId, ctx: &AppContext) -> Result<HttpResponse, ApiError> {
    let q: RawQuery = query(req)?;
    // The bodies carry the Application's secrets, often: an admin bound to teams reads its teams' only.
    if let Some(caller) = super::auth::team_bound(req)
        && let Some(app) = ctx.pipeline.app(&id).await?
    {
        caller.may_act_on(&app.team, &format!("the Application {}/{}", id.namespace, id.name))?;
    }
    let bodies = ctx.pipeline.raw_bodies(&id, limit(q.limit)?).await?;
    let items: Vec<_> = bodies
        .into_iter()
        .map(|(at, body)| {
            let parsed = serde_json::from_str::<serde_json::Value>(&body).unwrap_or(serde_json::Value::String(body));
            json!({"received_at": at, "body": parsed})
        })
        .collect();
    // Which Application, of which Argo CD instance: `herald replay` gives the bodies to that instance.
    Ok(HttpResponse::Ok().json(json!({
        "instance": id.instance,
        "namespace": id.namespace,
        "name": id.name,
        "count": items.len(),
        "items": items,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PruneQuery {
    limit: Option<i64>,
    /// `namespace/name` (or `instance/namespace/name`) of the last Application of the previous page.
    after: Option<String>,
}

/// Rows of one `/v1/prune-pending` answer: past them, `omitted` says how many more the page's Applications have
/// (each Application's own list is in `/v1/apps/{namespace}/{name}`).
pub const MAX_PRUNE_ROWS: usize = 2000;

/// The resources waiting to be pruned, a page of Applications at a time (their resources, the longest waiting
/// first, at most [`MAX_PRUNE_ROWS`]).
pub(super) async fn prune_pending(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let q: PruneQuery = query(&req)?;
    let after =
        match q.after.as_deref() {
            Some(a) => Some(AppId::parse_path(a).ok_or_else(|| {
                ApiError::BadRequest("after must be namespace/name, or instance/namespace/name".into())
            })?),
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
