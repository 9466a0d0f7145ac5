//! `GET /v1/incidents`, filtered by state, team and kind.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use super::{ApiError, AppContext, limit, param, query};
use crate::domain::{IncidentState, Kind};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IncidentQuery {
    state: Option<String>,
    team: Option<String>,
    kind: Option<String>,
    limit: Option<i64>,
}

pub(super) async fn list_incidents(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let q: IncidentQuery = query(&req)?;
    let state = param(q.state.as_deref(), IncidentState::parse, |s| {
        format!("state must be pending, firing or resolved, not {s:?}")
    })?;
    let kind = param(q.kind.as_deref(), Kind::parse, |k| {
        format!(
            "kind must be one of out_of_sync, prune_pending, sync_failed, degraded, sync_unknown, pruned; not {k:?}"
        )
    })?;
    let list = ctx
        .pipeline
        .incidents(state, q.team.as_deref(), kind, None, limit(q.limit)?)
        .await?;
    let items: Vec<_> = list.iter().map(|i| i.full_view()).collect();
    Ok(HttpResponse::Ok().json(json!({"count": items.len(), "items": items})))
}
