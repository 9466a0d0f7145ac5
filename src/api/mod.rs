//! HTTP handlers only: authenticate, parse, call the pipeline, map errors. One error type,
//! [`ApiError`], maps client mistakes to 4xx with a message that says what to fix, a store outage to 503 (so Argo CD
//! retries), and anything else to an opaque 500 whose cause is logged.

mod auth;
pub mod status_page;

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::json;

use crate::argocd::{self, AppId, PayloadError};
use crate::domain::labels;
use crate::pipeline::Pipeline;
use crate::pipeline::PipelineError;
use crate::routing::{Matcher, Silence};

pub use auth::Auth;

/// What every handler can reach.
pub struct AppContext {
    pub pipeline: Pipeline,
    pub auth: Auth,
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    pub body_limits: BodyLimits,
}

/// What the event endpoint accepts (`server.max_body_bytes`, `server.max_json_depth`).
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    pub max_bytes: usize,
    pub max_json_depth: usize,
}

impl BodyLimits {
    pub fn of(server: &crate::configuration::ServerSettings) -> Self {
        Self {
            max_bytes: server.max_body_bytes,
            max_json_depth: server.max_json_depth,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unprocessable(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("the body is larger than server.max_body_bytes ({0} bytes)")]
    TooLarge(usize),
    #[error("authentication required")]
    Unauthorized { basic: bool },
    #[error("the store is unavailable; try again")]
    Unavailable,
    #[error("internal error")]
    Internal,
}

impl From<PayloadError> for ApiError {
    fn from(e: PayloadError) -> Self {
        match e {
            PayloadError::Empty
            | PayloadError::PlainText { .. }
            | PayloadError::InvalidJson { .. }
            | PayloadError::TooDeep(_) => ApiError::BadRequest(e.to_string()),
            _ => ApiError::Unprocessable(e.to_string()),
        }
    }
}

impl From<PipelineError> for ApiError {
    fn from(e: PipelineError) -> Self {
        if e.is_unavailable() {
            tracing::warn!(error = %e, "store unavailable");
            ApiError::Unavailable
        } else {
            tracing::error!(error = %e, "store error");
            ApiError::Internal
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut resp = HttpResponse::build(self.status_code());
        match self {
            ApiError::Unauthorized { basic } => {
                let challenge = if *basic {
                    "Bearer realm=\"herald\", Basic realm=\"herald\""
                } else {
                    "Bearer realm=\"herald\""
                };
                resp.insert_header((header::WWW_AUTHENTICATE, challenge));
            }
            ApiError::Unavailable => {
                resp.insert_header((header::RETRY_AFTER, "5"));
            }
            ApiError::MethodNotAllowed(_) => {
                resp.insert_header((header::ALLOW, "POST, PUT"));
            }
            _ => {}
        }
        resp.json(json!({"error": self.to_string(), "status": self.status_code().as_u16()}))
    }
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz))
        .route("/metrics", web::get().to(metrics_endpoint))
        .route("/", web::get().to(status_page::page))
        .service(
            web::resource("/v1/argocd/events")
                .route(web::post().to(receive_event))
                .route(web::put().to(receive_event))
                .route(web::route().to(wrong_method)),
        )
        .route("/v1/apps", web::get().to(list_apps))
        .route("/v1/apps/{namespace}/{name}", web::get().to(get_app))
        .route("/v1/apps/{namespace}/{name}/raw", web::get().to(get_raw))
        .route("/v1/incidents", web::get().to(list_incidents))
        .route("/v1/prune-pending", web::get().to(prune_pending))
        .route("/v1/silences", web::get().to(list_silences))
        .route("/v1/silences", web::post().to(create_silence))
        .route("/v1/silences/{id}", web::delete().to(expire_silence))
        .route("/v1/outbox", web::get().to(list_outbox))
        .route("/v1/outbox/{id}/retry", web::post().to(retry_outbox))
        .default_service(web::to(not_found));
}

async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound(format!(
        "no such endpoint: {} {}",
        req.method(),
        req.path()
    )))
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

async fn readyz(ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    ctx.pipeline.ready().await.map_err(|e| {
        tracing::warn!(error = %e, "not ready: store unreachable");
        ApiError::Unavailable
    })?;
    Ok(HttpResponse::Ok().json(json!({"status": "ready"})))
}

async fn metrics_endpoint(ctx: web::Data<AppContext>) -> HttpResponse {
    // The recorder is process-wide: refresh and render as one step, so concurrent scrapes don't interleave.
    static SCRAPE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one_at_a_time = SCRAPE.lock().await;
    crate::telemetry::set_gauges(&ctx.pipeline.gauges().await);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(ctx.metrics.render())
}

async fn wrong_method(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(if req.method() == actix_web::http::Method::GET {
        ApiError::MethodNotAllowed(
            "GET is what Argo CD sends when the template has no `webhook.<service>` key equal to the service name \
             (it then sends the plain `message`). Name the key `webhook.herald` for `service.webhook.herald`, with \
             `method: POST` and a JSON `body` (see deploy/argocd/)."
                .into(),
        )
    } else {
        ApiError::MethodNotAllowed(format!("{} is not accepted here: use POST (or PUT)", req.method()))
    })
}

/// Reads the body with the configured limit (413 before reading when Content-Length says it is too big).
async fn read_body(req: &HttpRequest, mut payload: web::Payload, limit: usize) -> Result<web::BytesMut, ApiError> {
    if let Some(len) = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        && len > limit
    {
        return Err(ApiError::TooLarge(limit));
    }
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| ApiError::BadRequest(format!("could not read the body: {e}")))?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

async fn receive_event(
    req: HttpRequest,
    payload: web::Payload,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let started = std::time::Instant::now();
    let result = receive_event_inner(&req, payload, &ctx).await;
    let outcome = match &result {
        Ok((_, o)) => *o,
        Err(ApiError::Unauthorized { .. }) => "unauthorized",
        Err(ApiError::Unavailable) => "unavailable",
        Err(ApiError::Internal) => "error",
        Err(_) => "rejected",
    };
    metrics::counter!("herald_events_received_total", "outcome" => outcome).increment(1);
    metrics::histogram!("herald_ingest_seconds").record(started.elapsed().as_secs_f64());
    if let Err(e) = &result
        && matches!(
            e,
            ApiError::BadRequest(_) | ApiError::Unprocessable(_) | ApiError::TooLarge(_)
        )
    {
        tracing::info!(error = %e, "event refused");
    }
    result.map(|(r, _)| r)
}

async fn receive_event_inner(
    req: &HttpRequest,
    payload: web::Payload,
    ctx: &AppContext,
) -> Result<(HttpResponse, &'static str), ApiError> {
    ctx.auth.check(req)?;
    // The Content-Type is not checked: Argo CD sends none unless configured, and the body is what counts.
    let limits = ctx.body_limits;
    let body = read_body(req, payload, limits.max_bytes).await?;
    let snap = argocd::parse_body(&body, limits.max_json_depth)?;
    let raw = std::str::from_utf8(&body).map_err(|_| ApiError::BadRequest("the body is not UTF-8".into()))?;
    let summary = ctx.pipeline.ingest(snap, Some(raw)).await?;
    tracing::debug!(app = %summary.application, outcome = summary.outcome, "event accepted");
    Ok((HttpResponse::Accepted().json(&summary), summary.outcome))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AppQuery {
    sync: Option<String>,
    health: Option<String>,
    limit: Option<i64>,
}

fn limit(l: Option<i64>) -> Result<i64, ApiError> {
    match l {
        None => Ok(1000),
        Some(n) if (1..=10_000).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::BadRequest("limit must be between 1 and 10000".into())),
    }
}

fn query<T: serde::de::DeserializeOwned>(req: &HttpRequest) -> Result<T, ApiError> {
    web::Query::<T>::from_query(req.query_string())
        .map(|q| q.into_inner())
        .map_err(|e| ApiError::BadRequest(format!("bad query string: {e}")))
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

async fn list_apps(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    ctx.auth.check(&req)?;
    let q: AppQuery = query(&req)?;
    let apps = ctx
        .pipeline
        .apps(q.sync.as_deref(), q.health.as_deref(), limit(q.limit)?)
        .await?;
    let items: Vec<_> = apps.iter().map(|a| app_json(&a.team, &a.state)).collect();
    Ok(HttpResponse::Ok().json(json!({"count": items.len(), "items": items})))
}

async fn get_app(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    ctx.auth.check(&req)?;
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
async fn get_raw(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    ctx.auth.check(&req)?;
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IncidentQuery {
    state: Option<String>,
    team: Option<String>,
    kind: Option<String>,
    limit: Option<i64>,
}

async fn list_incidents(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    ctx.auth.check(&req)?;
    let q: IncidentQuery = query(&req)?;
    let state = match &q.state {
        Some(s) => Some(
            crate::domain::IncidentState::parse(s)
                .ok_or_else(|| ApiError::BadRequest(format!("state must be pending, firing or resolved, not {s:?}")))?,
        ),
        None => None,
    };
    let kind = match &q.kind {
        Some(k) => Some(crate::domain::Kind::parse(k).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "kind must be one of out_of_sync, prune_pending, sync_failed, degraded, sync_unknown, pruned; not {k:?}"
            ))
        })?),
        None => None,
    };
    let list = ctx
        .pipeline
        .incidents(state, q.team.as_deref(), kind, None, limit(q.limit)?)
        .await?;
    let items: Vec<_> = list.iter().map(|i| i.full_view()).collect();
    Ok(HttpResponse::Ok().json(json!({"count": items.len(), "items": items})))
}

async fn prune_pending(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    ctx.auth.check(&req)?;
    let items = ctx.pipeline.prune_pending().await?;
    Ok(HttpResponse::Ok().json(json!({"count": items.len(), "items": items})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewSilence {
    matchers: Vec<Matcher>,
    #[serde(default)]
    starts_at: Option<chrono::DateTime<chrono::Utc>>,
    ends_at: chrono::DateTime<chrono::Utc>,
    created_by: String,
    #[serde(default)]
    comment: String,
}

async fn create_silence(
    req: HttpRequest,
    payload: web::Payload,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    ctx.auth.check(&req)?;
    let body = read_body(&req, payload, 64 * 1024).await?;
    let new: NewSilence = serde_json::from_slice(&body).map_err(|e| {
        ApiError::BadRequest(format!(
            "invalid silence: {e}. Expected {{\"matchers\": [{{\"name\": \"app\", \"value\": \"pay-*\"}}], \
             \"ends_at\": \"RFC 3339 time\", \"created_by\": \"...\", \"comment\": \"...\"}}"
        ))
    })?;
    if new.matchers.is_empty() {
        return Err(ApiError::Unprocessable("a silence needs at least one matcher".into()));
    }
    for m in &new.matchers {
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
    if new.created_by.trim().is_empty() {
        return Err(ApiError::Unprocessable("created_by must not be empty".into()));
    }
    let now = ctx.pipeline.now();
    let starts_at = new.starts_at.unwrap_or(now);
    if new.ends_at <= starts_at {
        return Err(ApiError::Unprocessable("ends_at must be after starts_at".into()));
    }
    let silence = Silence {
        id: uuid::Uuid::new_v4().to_string(),
        matchers: new.matchers,
        starts_at,
        ends_at: new.ends_at,
        created_by: new.created_by,
        comment: new.comment,
        created_at: now,
    };
    ctx.pipeline.add_silence(&silence).await?;
    Ok(HttpResponse::Created().json(&silence))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SilenceQuery {
    #[serde(default)]
    expired: bool,
}

async fn list_silences(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    ctx.auth.check(&req)?;
    let q: SilenceQuery = query(&req)?;
    let now = ctx.pipeline.now();
    let list = ctx.pipeline.silences(q.expired, now).await?;
    let items: Vec<_> = list
        .iter()
        .map(|s| {
            let mut v = json!(s);
            v["active"] = json!(s.active(now));
            v
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({"count": items.len(), "items": items})))
}

async fn expire_silence(
    req: HttpRequest,
    path: web::Path<String>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    ctx.auth.check(&req)?;
    let id = path.into_inner();
    match ctx.pipeline.expire_silence(&id).await? {
        Some(expired_at) => Ok(HttpResponse::Ok().json(json!({"id": id, "expired_at": expired_at}))),
        None => Err(ApiError::NotFound(format!("no active silence {id:?}"))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutboxQuery {
    state: Option<String>,
    limit: Option<i64>,
}

async fn list_outbox(req: HttpRequest, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    ctx.auth.check(&req)?;
    let q: OutboxQuery = query(&req)?;
    let state = match &q.state {
        Some(s) => Some(
            crate::domain::DeliveryState::parse(s)
                .ok_or_else(|| ApiError::BadRequest(format!("state must be pending, done or dead, not {s:?}")))?,
        ),
        None => None,
    };
    let rows = ctx.pipeline.outbox(state, limit(q.limit)?).await?;
    let items: Vec<_> = rows
        .iter()
        .map(|r| {
            let mut v = json!(r);
            if let Ok(n) = serde_json::from_str::<crate::domain::Notification>(&r.payload) {
                v["title"] = json!(n.title);
                v["incidents"] = json!(n.incidents.iter().map(|i| &i.fingerprint).collect::<Vec<_>>());
            }
            v
        })
        .collect();
    Ok(HttpResponse::Ok().json(json!({"count": items.len(), "items": items})))
}

async fn retry_outbox(
    req: HttpRequest,
    path: web::Path<String>,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    ctx.auth.check(&req)?;
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

/// Shared state for the HTTP server.
pub fn data(ctx: AppContext) -> web::Data<AppContext> {
    web::Data::from(Arc::new(ctx))
}

/// A `no-store` header value, for pages that must not be cached.
pub fn no_store() -> (header::HeaderName, HeaderValue) {
    (header::CACHE_CONTROL, HeaderValue::from_static("no-store"))
}
