//! `/healthz` (the process answers), `/readyz` (the store answers) and `/metrics` (Prometheus text).

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
    let gauges = crate::telemetry::render_gauges(&ctx.pipeline.gauges().await);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(ctx.metrics.render() + &gauges)
}
