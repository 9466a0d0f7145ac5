//! Bounds on what the event endpoint holds at once, so a burst of huge or slow bodies cannot exhaust memory or hold
//! connections forever: a byte budget shared by the requests being read (`server.max_inflight_body_bytes`) and a
//! time limit on each request (`server.body_read_timeout`, 408).
//!
//! A request takes its share of the budget as its bytes arrive, not before, and keeps it until it is answered: a
//! slow upload holds only what it has sent, so a few of them cannot keep the budget from everyone else. A request
//! whose next bytes cannot get their share within a few seconds gets 503 + Retry-After, which Argo CD retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::{HttpResponse, web};
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget is counted in KiB, so a semaphore's `u32` permits cover terabytes.
const UNIT: usize = 1024;

/// How long a request waits for its share of the budget before it is told to come back.
const WAIT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct BodyBudget {
    permits: Arc<Semaphore>,
    total: u32,
    read_timeout: Duration,
}

impl BodyBudget {
    pub fn of(server: &crate::configuration::ServerSettings) -> Self {
        let total = (server.max_inflight_body_bytes / UNIT).clamp(1, u32::MAX as usize) as u32;
        Self {
            permits: Arc::new(Semaphore::new(total as usize)),
            total,
            read_timeout: server.body_read_timeout,
        }
    }
}

/// The share of the budget one request holds: taken as its bytes arrive, given back when it is answered.
#[derive(Default)]
struct Held {
    permit: Option<OwnedSemaphorePermit>,
    /// The budget could not be had in time: the request is answered 503.
    busy: bool,
}

/// `payload` taking its share of `budget` (into `held`) for each chunk before handing the chunk on.
fn metered(budget: BodyBudget, held: Arc<Mutex<Held>>, payload: Payload) -> Payload {
    let stream = futures_util::stream::unfold((payload, 0usize, false), move |(mut payload, mut read, done)| {
        let (budget, held) = (budget.clone(), held.clone());
        async move {
            if done {
                return None;
            }
            let chunk = match payload.next().await? {
                Ok(chunk) => chunk,
                Err(e) => return Some((Err(e), (payload, read, true))),
            };
            read += chunk.len();
            let want = (read.div_ceil(UNIT) as u32).min(budget.total);
            let have = lock(&held).permit.as_ref().map_or(0, |p| p.num_permits() as u32);
            if want > have {
                match tokio::time::timeout(WAIT, budget.permits.clone().acquire_many_owned(want - have)).await {
                    Ok(Ok(more)) => {
                        let mut h = lock(&held);
                        match &mut h.permit {
                            Some(p) => p.merge(more),
                            None => h.permit = Some(more),
                        }
                    }
                    _ => {
                        lock(&held).busy = true;
                        let e = std::io::Error::other("the shared body budget is in use");
                        return Some((Err(PayloadError::Io(e)), (payload, read, true)));
                    }
                }
            }
            Some((Ok(chunk), (payload, read, false)))
        }
    });
    let boxed: std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<web::Bytes, PayloadError>>>> = Box::pin(stream);
    Payload::from(boxed)
}

fn lock(held: &Mutex<Held>) -> std::sync::MutexGuard<'_, Held> {
    // Every use is one assignment: a panic while holding it cannot leave it half-changed.
    held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
    let held = Arc::new(Mutex::new(Held::default()));
    let (http_req, payload) = req.into_parts();
    let payload = metered(budget.clone(), held.clone(), payload);
    let req = ServiceRequest::from_parts(http_req.clone(), payload);
    let result = tokio::time::timeout(budget.read_timeout, next.call(req)).await;
    let busy = std::mem::take(&mut *lock(&held)).busy;
    match result {
        Ok(_) if busy => {
            metrics::counter!("herald_events_shed_total", "reason" => "busy").increment(1);
            let resp = refuse(
                actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
                "too many large bodies are being read at once; try again",
                Some("1"),
            );
            Ok(ServiceResponse::new(http_req, resp))
        }
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
