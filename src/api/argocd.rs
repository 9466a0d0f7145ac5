//! `GET /v1/argocd`: how each Argo CD instance's API source is doing, as the status page says it — its last
//! listing, its failure, a drop held back, and the projects Herald's token may no longer see (since when).

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::AppContext;

pub(super) async fn sources(ctx: web::Data<AppContext>) -> HttpResponse {
    // The summary is for people (the status page shows it): in `server.time_zone`; `since` stays RFC 3339.
    let zone = ctx.pipeline.settings().server.reader_zone();
    let instances: Vec<serde_json::Value> = (ctx.pipeline.argocd_apis().iter())
        .map(|s| {
            let r = s.status.report();
            let instance = s.api.instance();
            let denied: Vec<serde_json::Value> = (r.denied.iter())
                .map(|(project, since)| {
                    json!({
                        "project": project,
                        "since": since,
                        "summary": crate::pipeline::denied_summary(instance, project, *since, zone),
                    })
                })
                .collect();
            json!({
                "instance": instance,
                "up": r.failing_since.is_none() && r.last_ok.is_some(),
                "last_listing": r.last_ok,
                "listed": r.listed,
                "failing_since": r.failing_since,
                "last_error": r.last_error,
                "held": r.held,
                "permission_denied": denied,
            })
        })
        .collect();
    HttpResponse::Ok().json(json!({"instances": instances}))
}
