//! `POST /v1/incidents/{id}/ack` and `/unack` (scope `respond`, which `admin` implies): someone takes an incident
//! — until it resolves, until a time (`until`) or for a while (`for: "2h"`), with a comment — or gives it back.
//! Who took it is the caller's credential name (a person's name, never a token); only without credentials (no
//! `server.auth`) does the body's `by` say it. A credential bound to teams (`teams:`) acts on its teams' incidents
//! only: another team's is a 403 that names both.

use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::events::read_body;
use super::{ApiError, AppContext, Caller};
use crate::domain::Acknowledgement;
use crate::pipeline::AckOutcome;

/// A comment is at most this many bytes, a name at most [`MAX_NAME`].
pub const MAX_COMMENT: usize = 4096;
pub const MAX_NAME: usize = 256;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AckBody {
    /// When the acknowledgement ends; or `for` (`"2h"`) from now; neither: until the incident resolves.
    until: Option<DateTime<Utc>>,
    #[serde(default, rename = "for", with = "crate::configuration::duration::option")]
    for_: Option<std::time::Duration>,
    #[serde(default)]
    comment: String,
    /// Who, when no credentials are configured (otherwise the credential's name).
    by: Option<String>,
}

pub(super) async fn acknowledge(
    req: HttpRequest,
    path: web::Path<String>,
    payload: web::Payload,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let id = incident_id(&path)?;
    super::auth::may_act_on_incident(&req, &ctx, id).await?;
    let body = read_body(&req, payload, 16 * 1024).await?;
    let ask: AckBody = if body.iter().all(u8::is_ascii_whitespace) {
        AckBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::BadRequest(format!(
                "invalid acknowledgement: {e}. Expected {{\"for\": \"2h\"}} or {{\"until\": \"RFC 3339 time\"}} \
                 (or neither: until it resolves), and optionally \"comment\": \"...\""
            ))
        })?
    };
    let caller = req.extensions().get::<Caller>().map(|c| c.name.clone());
    let now = ctx.pipeline.now();
    let ack = ask.into_ack(caller, now)?;
    answer(id, ctx.pipeline.acknowledge(id, ack).await?)
}

pub(super) async fn unacknowledge(
    req: HttpRequest,
    path: web::Path<String>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let id = incident_id(&path)?;
    super::auth::may_act_on_incident(&req, &ctx, id).await?;
    answer(id, ctx.pipeline.unacknowledge(id).await?)
}

fn incident_id(path: &str) -> Result<i64, ApiError> {
    path.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::BadRequest(format!("incident id must be a positive number, not {path:?}")))
}

fn answer(id: i64, outcome: AckOutcome) -> Result<HttpResponse, ApiError> {
    match outcome {
        AckOutcome::Done(rec) => Ok(HttpResponse::Ok().json(rec.full_view())),
        AckOutcome::NotFound => Err(ApiError::NotFound(format!("no incident {id}"))),
        AckOutcome::Resolved(_) => Err(ApiError::Conflict(format!(
            "incident {id} is resolved: there is nothing to acknowledge (if it fires again, that is a new incident)"
        ))),
    }
}

impl AckBody {
    fn into_ack(self, caller: Option<String>, now: DateTime<Utc>) -> Result<Acknowledgement, ApiError> {
        let by = match (caller, self.by) {
            (Some(name), _) => name,
            (None, Some(by)) if !by.trim().is_empty() => by.trim().to_string(),
            (None, _) => {
                return Err(ApiError::Unprocessable(
                    "say who acknowledges: \"by\": \"your name\" (no credential names you)".into(),
                ));
            }
        };
        let until = acknowledged_until(self.until, self.for_, now)?;
        check_words(&by, &self.comment)?;
        Ok(Acknowledgement {
            by,
            at: now,
            until,
            comment: self.comment,
        })
    }
}

/// When an acknowledgement asked at `now` ends: at `until`, after `for`, or (neither) when the incident resolves.
pub fn acknowledged_until(
    until: Option<DateTime<Utc>>,
    for_: Option<std::time::Duration>,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, ApiError> {
    let until = match (until, for_) {
        (Some(_), Some(_)) => return Err(ApiError::Unprocessable("give until or for, not both".into())),
        (Some(at), None) => Some(at),
        (None, Some(d)) => Some(
            chrono::Duration::from_std(d)
                .ok()
                .and_then(|d| now.checked_add_signed(d))
                .ok_or_else(|| ApiError::Unprocessable(format!("for {d:?} is too long")))?,
        ),
        (None, None) => None,
    };
    if until.is_some_and(|u| u <= now) {
        return Err(ApiError::Unprocessable(
            "until must be in the future (leave it out to acknowledge until the incident resolves)".into(),
        ));
    }
    Ok(until)
}

/// A name and a comment within bounds, and a name that is one line of text.
pub fn check_words(by: &str, comment: &str) -> Result<(), ApiError> {
    if by.len() > MAX_NAME || by.chars().any(char::is_control) {
        return Err(ApiError::Unprocessable(format!(
            "the name is one line of at most {MAX_NAME} bytes"
        )));
    }
    if comment.len() > MAX_COMMENT {
        return Err(ApiError::Unprocessable(format!(
            "the comment is at most {MAX_COMMENT} bytes (it has {})",
            comment.len()
        )));
    }
    Ok(())
}
