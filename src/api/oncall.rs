//! `GET /v1/oncall[?schedule=NAME][&at=TIME]`: who each schedule has on call (until when, and by what: an override,
//! the rotation or the calendar), with its calendar's state; `herald oncall` prints it.

use actix_web::{HttpRequest, HttpResponse, web};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::json;

use super::{ApiError, AppContext, query};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OnCallQuery {
    schedule: Option<String>,
    at: Option<String>,
}

pub(super) async fn on_call(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let q: OnCallQuery = query(&req)?;
    let at = match q.at.as_deref() {
        None => ctx.pipeline.now(),
        Some(text) => DateTime::parse_from_rfc3339(text.trim())
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| {
                ApiError::BadRequest(format!(
                    "at: {:?} is not an RFC 3339 time (such as 2026-03-30T09:00:00Z or 2026-03-30T11:00:00+02:00)",
                    text.chars().take(64).collect::<String>()
                ))
            })?,
    };
    let schedules =
        (ctx.pipeline.on_call(q.schedule.as_deref(), Some(at))).map_err(|e| ApiError::NotFound(e.to_string()))?;
    Ok(HttpResponse::Ok().json(json!({"at": at, "count": schedules.len(), "items": schedules})))
}
