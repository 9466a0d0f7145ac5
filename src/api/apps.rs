//! `/v1/apps`, `/v1/apps/{namespace}/{name}` (with its timeline and incidents), `/v1/apps/{namespace}/{name}/raw`
//! (the bodies received, to replay) and `/v1/prune-pending`.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use super::{ApiError, AppContext, limit, param, query};
use crate::argocd::AppId;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AppQuery {
    sync: Option<String>,
    health: Option<String>,
    limit: Option<i64>,
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
        "sync": {"status": snap.sync_status, "revisions": snap.revisions, "since": s.sync_since},
        "health": {"status": snap.health_status, "message": snap.health_message, "since": s.health_since},
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
    let apps = ctx.pipeline.apps(sync, health, limit(q.limit)?).await?;
    let items: Vec<_> = apps.iter().map(|a| app_json(&a.team, &a.state)).collect();
    Ok(HttpResponse::Ok().json(json!({"count": items.len(), "items": items})))
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
    let incidents = ctx.pipeline.incidents(None, None, None, Some(&id), 50).await?;
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

pub(super) async fn prune_pending(ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let items = ctx.pipeline.prune_pending().await?;
    Ok(HttpResponse::Ok().json(json!({"count": items.len(), "items": items})))
}
