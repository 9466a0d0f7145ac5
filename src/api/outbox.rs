//! `/v1/outbox`: the deliveries, newest first, and `POST /v1/outbox/{id}/retry` for a dead one.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use super::{ApiError, AppContext, id_page_with, limit, query, state_param};
use crate::domain::DeliveryState;
use crate::pipeline::ListedDelivery;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutboxQuery {
    state: Option<String>,
    limit: Option<i64>,
    /// The cursor of the `next` link: the id of the last delivery of the previous page.
    after: Option<i64>,
}

pub(super) async fn list_outbox(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let q: OutboxQuery = query(&req)?;
    let state = state_param(q.state.as_deref(), DeliveryState::parse, "pending, done or dead")?;
    let limit = limit(q.limit)?;
    let rows = ctx.pipeline.outbox_headlines(state, limit, q.after).await?;
    Ok(id_page_with(
        &req,
        &rows,
        limit,
        |r| r.delivery.id,
        |answer, r| answer.take(&delivery_json(r)),
    ))
}

/// A delivery as the list shows it: the row, with its notification's title and incidents when it has them.
#[derive(serde::Serialize)]
struct Listed<'a> {
    #[serde(flatten)]
    delivery: &'a crate::pipeline::OutboxRecord,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    incidents: Option<&'a serde_json::value::RawValue>,
}

fn delivery_json(r: &ListedDelivery) -> Listed<'_> {
    Listed {
        delivery: &r.delivery,
        title: r.headline.as_ref().map(|h| h.title.as_str()),
        incidents: r.headline.as_ref().map(|h| &*h.incidents),
    }
}

pub(super) async fn retry_outbox(
    req: HttpRequest,
    path: web::Path<String>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    if let Some(caller) = super::auth::team_bound(&req) {
        // A message may be about several teams' incidents (a digest, a group): retrying is everyone's business.
        return Err(ApiError::Forbidden(format!(
            "credential {:?} acts on {}; retrying a delivery (which may be about any team's incidents) needs an \
             admin credential without teams",
            caller.name,
            caller.teams.words()
        )));
    }
    let raw = path.into_inner();
    let id: i64 = raw
        .parse()
        .map_err(|_| ApiError::BadRequest(format!("outbox id must be a number, not {raw:?}")))?;
    if ctx.pipeline.retry_delivery(id).await? {
        Ok(HttpResponse::Accepted().json(json!({"id": id, "state": "pending"})))
    } else {
        Err(ApiError::NotFound(format!("no dead outbox row {id}")))
    }
}
