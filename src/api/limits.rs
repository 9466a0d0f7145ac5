//! Bounds on what the event endpoint holds at once, so a burst of huge or slow bodies cannot exhaust memory or hold
//! connections forever: a byte budget shared by the requests being read (`server.max_inflight_body_bytes`; a request
//! that cannot get its share within a few seconds gets 503 + Retry-After, which Argo CD retries) and a time limit on
//! each request (`server.body_read_timeout`, 408).

use std::sync::Arc;
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::{HttpResponse, web};
use tokio::sync::Semaphore;

/// The budget is counted in KiB, so a semaphore's `u32` permits cover terabytes.
const UNIT: usize = 1024;

/// How long a request waits for its share of the budget before it is told to come back.
const WAIT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct BodyBudget {
    permits: Arc<Semaphore>,
    total: u32,
    max_body: usize,
    read_timeout: Duration,
}

impl BodyBudget {
    pub fn of(server: &crate::configuration::ServerSettings) -> Self {
        let total = (server.max_inflight_body_bytes / UNIT).clamp(1, u32::MAX as usize) as u32;
        Self {
            permits: Arc::new(Semaphore::new(total as usize)),
            total,
            max_body: server.max_body_bytes,
            read_timeout: server.body_read_timeout,
        }
    }

    /// The share a request needs: what its Content-Length says (the largest allowed when it says nothing).
    fn share(&self, req: &ServiceRequest) -> u32 {
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(self.max_body)
            .min(self.max_body);
        (declared.div_ceil(UNIT) as u32).clamp(1, self.total)
    }
}

fn refuse(status: actix_web::http::StatusCode, message: &str, retry_after: Option<&str>) -> HttpResponse {
    let mut resp = HttpResponse::build(status);
    if let Some(s) = retry_after {
        resp.insert_header((header::RETRY_AFTER, s));
    }
    resp.json(serde_json::json!({"error": message, "status": status.as_u16()}))
}

/// The middleware on `/v1/argocd/events`.
pub async fn bounded(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(budget) = req.app_data::<web::Data<BodyBudget>>().map(|b| b.get_ref().clone()) else {
        return next.call(req).await.map(ServiceResponse::map_into_boxed_body);
    };
    let share = budget.share(&req);
    let Ok(Ok(permit)) = tokio::time::timeout(WAIT, budget.permits.clone().acquire_many_owned(share)).await else {
        metrics::counter!("herald_events_shed_total", "reason" => "busy").increment(1);
        let resp = refuse(
            actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
            "too many large bodies are being read at once; try again",
            Some("1"),
        );
        return Ok(req.into_response(resp));
    };
    let (http_req, payload) = req.into_parts();
    let req = ServiceRequest::from_parts(http_req.clone(), payload);
    let result = tokio::time::timeout(budget.read_timeout, next.call(req)).await;
    drop(permit);
    match result {
        Ok(r) => r.map(ServiceResponse::map_into_boxed_body),
        Err(_) => {
            metrics::counter!("herald_events_shed_total", "reason" => "timeout").increment(1);
            let message = format!(
                "the request was not received and handled within server.body_read_timeout ({}s)",
                budget.read_timeout.as_secs()
            );
            let resp = refuse(actix_web::http::StatusCode::REQUEST_TIMEOUT, &message, None);
            Ok(ServiceResponse::new(http_req, resp))
        }
    }
}
