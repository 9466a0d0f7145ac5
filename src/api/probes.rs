//! `/healthz` (the process answers), `/readyz` (the store answers) and `/metrics` (Prometheus text: open, or for a
//! `read` credential with `server.metrics.auth`; without team names with `server.metrics.team_labels: false`).

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{HttpResponse, web};
use serde_json::json;

use super::{ApiError, AppContext};

pub(super) async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

pub(super) async fn readyz(ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    ctx.pipeline.ready().await.map_err(|e| {
        tracing::warn!(error = %e, "not ready: store unreachable");
        ApiError::Unavailable
    })?;
    Ok(HttpResponse::Ok().json(json!({"status": "ready"})))
}

pub(super) async fn metrics_endpoint(ctx: web::Data<AppContext>) -> HttpResponse {
    // The recorder is process-wide: refresh and render as one step, so concurrent scrapes don't interleave.
    static SCRAPE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one_at_a_time = SCRAPE.lock().await;
    let mut readings = ctx.pipeline.gauges().await;
    if !ctx.metrics_settings.team_labels {
        readings = readings.without_teams();
    }
    let gauges = crate::telemetry::render_gauges(&readings);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(ctx.metrics.render() + &gauges)
}

/// `/metrics` asks for a `read` credential when `server.metrics.auth` says so.
pub(super) async fn metrics_access(
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let guarded = req
        .app_data::<web::Data<AppContext>>()
        .is_some_and(|ctx| ctx.metrics_settings.auth);
    if guarded {
        super::auth::authorize(crate::configuration::Scope::Read, req, next).await
    } else {
        next.call(req).await
    }
}
