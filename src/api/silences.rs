//! `/v1/silences`: create (matchers checked here, so a bad one is a 422 that says why; `ends_at` or `duration`;
//! `created_by` defaults to the caller's credential name), list, expire.
//!
//! A credential bound to teams (`teams:`) silences only its teams: its silence must carry a `team` matcher whose
//! value is one of its teams, written out (no glob) — matchers all have to match, so such a silence can never
//! hold another team's incident. It expires only silences bound that way to one of its teams. Anything else is a
//! 403 that says why.

use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use super::events::read_body;
use super::{ApiError, AppContext, Caller, query};
use crate::domain::labels;
use crate::routing::{Matcher, Silence};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewSilence {
    matchers: Vec<Matcher>,
    starts_at: Option<chrono::DateTime<chrono::Utc>>,
    /// When it ends; or `duration` (`"2h"`) after it starts, as `amtool silence add --duration` does.
    ends_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default, with = "crate::configuration::duration::option")]
    duration: Option<std::time::Duration>,
    /// Who asked; the caller's credential name when not given.
    created_by: Option<String>,
    #[serde(default)]
    comment: String,
}

const MAX_MATCHERS: usize = 16;
const MAX_VALUE: usize = 256;
const MAX_COMMENT: usize = 4096;

pub(super) async fn create_silence(
    req: HttpRequest,
    payload: web::Payload,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let body = read_body(&req, payload, 64 * 1024).await?;
    let new = NewSilence::parse(&body)?;
    if let Some(caller) = super::auth::team_bound(&req) {
        check_bound(&caller, &new.matchers)?;
    }
    let caller = req.extensions().get::<Caller>().map(|c| c.name.clone());
    let silence = new.into_silence(caller, ctx.pipeline.now())?;
    ctx.pipeline.add_silence(&silence).await?;
    Ok(HttpResponse::Created().json(&silence))
}

impl NewSilence {
    /// The request body as JSON; a 400 that shows the expected shape when it is not one.
    fn parse(body: &[u8]) -> Result<Self, ApiError> {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::BadRequest(format!(
                "invalid silence: {e}. Expected {{\"matchers\": [{{\"name\": \"app\", \"value\": \"pay-*\"}}], \
                 \"ends_at\": \"RFC 3339 time\" or \"duration\": \"2h\", \"created_by\": \"...\", \"comment\": \"...\"}}"
            ))
        })
    }

    /// The silence asked for, received at `now` from `caller` (its credential name), or a 422 saying what is wrong.
    fn into_silence(self, caller: Option<String>, now: chrono::DateTime<chrono::Utc>) -> Result<Silence, ApiError> {
        self.check_bounds()?;
        check_matchers(&self.matchers)?;
        let Some(created_by) = self.created_by.filter(|c| !c.trim().is_empty()).or(caller) else {
            return Err(ApiError::Unprocessable("created_by must not be empty".into()));
        };
        let starts_at = self.starts_at.unwrap_or(now);
        let ends_at = match (self.ends_at, self.duration) {
            (Some(at), None) => at,
            (None, Some(d)) => {
                starts_at
                    + chrono::Duration::from_std(d)
                        .map_err(|_| ApiError::Unprocessable(format!("duration {d:?} is too long")))?
            }
            (Some(_), Some(_)) => return Err(ApiError::Unprocessable("give ends_at or duration, not both".into())),
            (None, None) => return Err(ApiError::Unprocessable("a silence needs ends_at or duration".into())),
        };
        if ends_at <= starts_at {
            return Err(ApiError::Unprocessable("ends_at must be after starts_at".into()));
        }
        Ok(Silence {
            id: uuid::Uuid::new_v4().to_string(),
            matchers: self.matchers,
            starts_at,
            ends_at,
            created_by,
            comment: self.comment,
            created_at: now,
        })
    }

    /// At least one matcher, and bounds, so one silence cannot make every ingest slow (a 60 KB glob is matched
    /// against every incident).
    fn check_bounds(&self) -> Result<(), ApiError> {
        if self.matchers.is_empty() {
            return Err(ApiError::Unprocessable("a silence needs at least one matcher".into()));
        }
        if self.matchers.len() > MAX_MATCHERS {
            return Err(ApiError::Unprocessable(format!(
                "a silence has at most {MAX_MATCHERS} matchers"
            )));
        }
        if let Some(m) = self
            .matchers
            .iter()
            .find(|m| m.value.len() > MAX_VALUE || m.name.len() > MAX_VALUE)
        {
            return Err(ApiError::Unprocessable(format!(
                "matcher {:?}: names and values are at most {MAX_VALUE} bytes",
                m.name.chars().take(40).collect::<String>()
            )));
        }
        if self.comment.len() > MAX_COMMENT || self.created_by.as_ref().is_some_and(|c| c.len() > MAX_VALUE) {
            return Err(ApiError::Unprocessable(format!(
                "comment is at most {MAX_COMMENT} bytes, created_by at most {MAX_VALUE}"
            )));
        }
        Ok(())
    }
}

/// Each matcher names a field incidents have and its value is a valid glob.
fn check_matchers(matchers: &[Matcher]) -> Result<(), ApiError> {
    for m in matchers {
        if !labels::is_field(&m.name) {
            return Err(ApiError::Unprocessable(format!(
                "matcher name {:?} is unknown: use {}",
                m.name,
                labels::field_list()
            )));
        }
        if let Err(e) = globset::Glob::new(&m.value) {
            return Err(ApiError::Unprocessable(format!(
                "matcher value {:?} is not a valid glob: {}",
                m.value,
                e.kind()
            )));
        }
    }
    Ok(())
}

/// The teams a silence is bound to: the values of its `team` matchers that name one team (no glob character).
fn bound_teams(matchers: &[Matcher]) -> impl Iterator<Item = &str> {
    matchers
        .iter()
        .filter(|m| m.name == "team" && !m.value.contains(['*', '?', '[', ']', '{', '}', '\\', ',']))
        .map(|m| m.value.as_str())
}

/// A silence a team-bound `caller` creates is bound to one of its teams.
fn check_bound(caller: &Caller, matchers: &[Matcher]) -> Result<(), ApiError> {
    let mut bound = bound_teams(matchers).peekable();
    let Some(first) = bound.peek().copied() else {
        let example = caller
            .teams
            .names()
            .and_then(|t| t.first())
            .cloned()
            .unwrap_or_default();
        return Err(ApiError::Forbidden(format!(
            "credential {:?} acts on {}: its silence must carry a team matcher naming one of them, written out \
             (e.g. {{\"name\": \"team\", \"value\": \"{example}\"}}); nothing was created",
            caller.name,
            caller.teams.words()
        )));
    };
    if bound.any(|t| caller.teams.allows(t)) {
        return Ok(());
    }
    caller.may_act_on(first, "this silence")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SilenceQuery {
    #[serde(default)]
    expired: bool,
}

pub(super) async fn list_silences(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let q: SilenceQuery = query(&req)?;
    let now = ctx.pipeline.now();
    let list = ctx.pipeline.silences(q.expired, now).await?;
    let items: Vec<_> = list
        .iter()
        .map(|s| {
            let mut v = json!(s);
            v["active"] = json!(s.active(now));
            v["state"] = json!(s.state(now));
            v
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({"count": items.len(), "items": items})))
}

pub(super) async fn expire_silence(
    req: HttpRequest,
    path: web::Path<String>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    if let Some(caller) = super::auth::team_bound(&req) {
        let now = ctx.pipeline.now();
        let silences = ctx.pipeline.silences(false, now).await?;
        if let Some(s) = silences.iter().find(|s| s.id == id) {
            let mut bound = bound_teams(&s.matchers);
            let what = format!("silence {id:?}");
            match bound.next() {
                None => {
                    return Err(ApiError::Forbidden(format!(
                        "credential {:?} acts on {}; {what} is bound to no team (it has no team matcher): only a \
                         credential of every team expires it; nothing was changed",
                        caller.name,
                        caller.teams.words()
                    )));
                }
                Some(first) if !caller.teams.allows(first) && !bound.any(|t| caller.teams.allows(t)) => {
                    caller.may_act_on(first, &what)?;
                }
                Some(_) => {}
            }
        }
    }
    match ctx.pipeline.expire_silence(&id).await? {
        Some(expired_at) => Ok(HttpResponse::Ok().json(json!({"id": id, "expired_at": expired_at}))),
        None => Err(ApiError::NotFound(format!("no active silence {id:?}"))),
    }
}
