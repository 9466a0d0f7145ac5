//! `GET /v1/incidents`, filtered by state, team, kind and whether it notified anyone; each firing incident says
//! what holds it back from people now (`held`: a silence, an inhibiting incident), if anything.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;

use super::{ApiError, AppContext, id_page_of, limit, param, query, state_param};
use crate::domain::{IncidentState, Kind};
use crate::pipeline::IncidentFilter;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IncidentQuery {
    state: Option<String>,
    team: Option<String>,
    kind: Option<String>,
    /// Only this Argo CD instance's.
    instance: Option<String>,
    /// `true`: only incidents that notified someone; `false`: only those that did not.
    notified: Option<bool>,
    limit: Option<i64>,
    /// The cursor of the `next` link: the id of the last incident of the previous page.
    after: Option<i64>,
}

pub(super) async fn list_incidents(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let q: IncidentQuery = query(&req)?;
    let state = state_param(q.state.as_deref(), IncidentState::parse, "pending, firing or resolved")?;
    let kind = param(q.kind.as_deref(), Kind::parse, |k| {
        format!("kind must be one of {}; not {k:?}", Kind::list())
    })?;
    let filter = IncidentFilter {
        state,
        team: q.team,
        kind,
        instance: super::apps::known_instance(&ctx, q.instance)?,
        limit: limit(q.limit)?,
        before_id: q.after,
        notified: q.notified,
        ..Default::default()
    };
    let views: Vec<_> = (ctx.pipeline.incidents(&filter).await?.into_iter())
        .map(|i| i.into_full_view())
        .collect();
    Ok(id_page_of(&req, &views, filter.limit, |v| v.id))
}
