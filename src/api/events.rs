//! `POST`/`PUT /v1/argocd/events`: what Argo CD Notifications sends (with an `ingest` credential). Read the body
//! within the limit, parse it into a snapshot, hand it to the pipeline, answer 202 once it is committed. A body
//! the pipeline has judged before, byte for byte, is answered without parsing (`Pipeline::repeated`). Which Argo
//! CD instance a body is from is settled here (`ArgoCdSettings::identify`): a token bound to one instance sending a
//! body that names another is refused with 422 and counted (`herald_requests_refused_total{reason="instance_mismatch"}`).

use actix_web::http::header;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use futures_util::StreamExt;

use super::auth::Caller;
use super::{ApiError, AppContext};
use crate::{argocd, pipeline};

pub(super) async fn wrong_method(req: HttpRequest) -> Result<HttpResponse, ApiError> {
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

/// Reads the body with the configured limit (413 before reading when Content-Length says it is too big). A body
/// that arrives in one chunk is that chunk, not a copy; one in several is gathered into a buffer of the size
/// announced, but never more than twice what has arrived (a slow sender's share of the byte budget is what has
/// arrived, so it cannot make Herald hold memory it has not paid for).
pub(super) async fn read_body(
    req: &HttpRequest,
    mut payload: web::Payload,
    limit: usize,
) -> Result<web::Bytes, ApiError> {
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if announced.is_some_and(|len| len > limit) {
        return Err(ApiError::TooLarge(limit));
    }
    let mut first: Option<web::Bytes> = None;
    let mut gathered: Option<web::BytesMut> = None;
    let mut len = 0;
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|e| ApiError::BadRequest(format!("could not read the body: {e}")))?;
        len += chunk.len();
        if len > limit {
            return Err(ApiError::TooLarge(limit));
        }
        match (&mut gathered, first.take()) {
            (Some(buf), _) => buf.extend_from_slice(&chunk),
            (None, None) => first = Some(chunk),
            (None, Some(earlier)) => {
                let mut buf = web::BytesMut::with_capacity(announced.unwrap_or(0).min(2 * len).max(len));
                buf.extend_from_slice(&earlier);
                buf.extend_from_slice(&chunk);
                gathered = Some(buf);
            }
        }
    }
    Ok(match gathered {
        Some(buf) => buf.freeze(),
        None => first.unwrap_or_default(),
    })
}

pub(super) async fn receive_event(
    req: HttpRequest,
    payload: web::Payload,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let started = std::time::Instant::now();
    let result = receive_event_inner(&req, payload, &ctx).await;
    let outcome = match &result {
        Ok((_, o)) => *o,
        Err(ApiError::Unavailable) => "unavailable",
        Err(ApiError::Internal) => "error",
        Err(_) => "rejected",
    };
    metrics::counter!("herald_events_received_total", "outcome" => outcome).increment(1);
    if result.is_ok() {
        crate::telemetry::event_accepted();
    }
    metrics::histogram!("herald_ingest_duration_seconds").record(started.elapsed().as_secs_f64());
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
    // The Content-Type is not checked: Argo CD sends none unless configured, and the body is what counts.
    let limits = ctx.body_limits;
    let body = read_body(req, payload, limits.max_bytes).await?;
    let by_credential = req.extensions().get::<Caller>().and_then(|c| c.instance.clone());
    // The same bytes as a body already judged, its Application unchanged since: the same answer, unparsed.
    let key = pipeline::body_key(by_credential.as_deref(), &body);
    if let Some(summary) = ctx.pipeline.repeated(key) {
        return Ok((HttpResponse::Accepted().json(&summary), summary.outcome.as_str()));
    }
    let mut snap = match argocd::parse_body_typed(&body, limits.max_json_depth)? {
        Some(snap) => snap,
        // The tolerant reader takes one body at a time: its wait is a blocking thread's, never an async worker's.
        None => {
            let bytes = body.clone();
            web::block(move || argocd::parse_tolerant(&bytes)).await.map_err(|e| {
                tracing::error!(error = %e, "the tolerant reader did not finish");
                ApiError::Internal
            })??
        }
    };
    // Which Argo CD sent it: part of the Application's identity, so it is settled before anything is stored.
    snap.app.instance = (ctx.pipeline.settings().argocd)
        .identify(by_credential.as_deref(), snap.argocd_url.as_deref())
        .map_err(|e| {
            if let Some(reason) = e.reason() {
                metrics::counter!("herald_requests_refused_total", "reason" => reason).increment(1);
            }
            ApiError::Unprocessable(e.to_string())
        })?;
    // A body parse_body takes is UTF-8 (the typed reader checks it first; the tolerant one reads every string), so
    // it is kept as it came, shared with the writer rather than copied.
    let summary = ctx.pipeline.ingest_body(snap, body, key).await?;
    tracing::debug!(app = %summary.application, outcome = summary.outcome.as_str(), "event accepted");
    Ok((HttpResponse::Accepted().json(&summary), summary.outcome.as_str()))
}
