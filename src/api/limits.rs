//! Bounds on what the event endpoint holds at once, so a burst of huge or slow bodies cannot exhaust memory or hold
//! connections forever: a byte budget shared by the requests being read (`server.max_inflight_body_bytes`) and a
//! time limit on each request (`server.body_read_timeout`, 408).
//!
//! A request reserves its share (its Content-Length, or the largest body allowed) before its body is read: a burst
//! of large bodies is read a few at a time, each whole, rather than all at once and none to the end. A request that
//! cannot get its share within a few seconds gets 503 + Retry-After, which Argo CD retries. The reservation is kept
//! only while the body arrives at a sender's pace ([`MIN_RATE`] after [`GRACE`]): a slower one gives back all but
//! what it has sent and takes its share as its bytes arrive, so slow uploads cannot keep the budget from others.
//!
//! A request refused before its body was read whole (413, 503, 401, 408, …) is answered with `Connection: close`
//! ([`close_refused`]): the connection is not kept for a next request behind the unread bytes, so a refused upload
//! cannot hold a socket and the kernel's buffers after its sender has gone.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// How long any body may take before its pace is judged.
const GRACE: Duration = Duration::from_secs(1);

/// Bytes per second below which a body keeps only what it has sent (a 4 MB body from Argo CD arrives in well under
/// a second on any cluster network).
const MIN_RATE: f64 = 256.0 * 1024.0;

/// How often a body that sends nothing is looked at.
const TICK: Duration = Duration::from_millis(250);

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

    /// The share a request reserves: what its Content-Length says (the largest allowed when it says nothing).
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

/// The share of the budget one request holds, given back when it is answered.
#[derive(Default)]
struct Held {
    permit: Option<OwnedSemaphorePermit>,
    /// More budget could not be had in time: the request is answered 503.
    busy: bool,
}

/// Where a body's reading stands.
struct Reading {
    payload: Payload,
    read: usize,
    started: Instant,
    /// Judged slow: holds only what it has read, and takes more as it reads.
    metered: bool,
    done: bool,
}

impl Reading {
    fn too_slow(&self) -> bool {
        let elapsed = self.started.elapsed();
        elapsed > GRACE && (self.read as f64) < MIN_RATE * elapsed.as_secs_f64()
    }

    /// The payload's next chunk. While it waits, a reading judged too slow is metered from then on: it keeps only
    /// the permits of what it has read.
    async fn next_read(&mut self, budget: &BodyBudget, held: &Mutex<Held>) -> Option<Result<web::Bytes, PayloadError>> {
        loop {
            if self.metered {
                return self.payload.next().await;
            }
            match tokio::time::timeout(TICK, self.payload.next()).await {
                Ok(next) => return next,
                Err(_) if self.too_slow() => {
                    keep_only(held, self.read, budget);
                    self.metered = true;
                }
                Err(_) => {}
            }
        }
    }
}

/// Holds the permits for `read` bytes in all, taking what `held` lacks from `budget` (waiting at most [`WAIT`]);
/// `false` when the budget stays in use that long (`held` is then marked busy).
async fn reserve(budget: &BodyBudget, held: &Mutex<Held>, read: usize) -> bool {
    let want = units(read, budget);
    let have = lock(held).permit.as_ref().map_or(0, |p| p.num_permits() as u32);
    if want > have {
        match tokio::time::timeout(WAIT, budget.permits.clone().acquire_many_owned(want - have)).await {
            Ok(Ok(more)) => {
                let mut h = lock(held);
                match &mut h.permit {
                    Some(p) => p.merge(more),
                    None => h.permit = Some(more),
                }
            }
            _ => {
                lock(held).busy = true;
                return false;
            }
        }
    }
    true
}

/// Permits for `read` bytes.
fn units(read: usize, budget: &BodyBudget) -> u32 {
    (read.div_ceil(UNIT) as u32).min(budget.total)
}

/// Gives back what `held` has beyond `read` bytes.
fn keep_only(held: &Mutex<Held>, read: usize, budget: &BodyBudget) {
    let keep = units(read, budget) as usize;
    if let Some(p) = &mut lock(held).permit
        && p.num_permits() > keep
    {
        drop(p.split(p.num_permits() - keep));
    }
}

/// `payload` within its share of `budget` (held in `held`): see the module's comment.
fn metered(budget: BodyBudget, held: Arc<Mutex<Held>>, payload: Payload) -> Payload {
    let start = Reading {
        payload,
        read: 0,
        started: Instant::now(),
        metered: false,
        done: false,
    };
    let stream = futures_util::stream::unfold(start, move |mut r| {
        let (budget, held) = (budget.clone(), held.clone());
        async move {
            if r.done {
                return None;
            }
            let next = r.next_read(&budget, &held).await;
            let chunk = match next? {
                Ok(chunk) => chunk,
                Err(e) => {
                    r.done = true;
                    return Some((Err(e), r));
                }
            };
            r.read += chunk.len();
            if !r.metered && r.too_slow() {
                keep_only(&held, r.read, &budget);
                r.metered = true;
            }
            if !reserve(&budget, &held, r.read).await {
                r.done = true;
                let e = std::io::Error::other("the shared body budget is in use");
                return Some((Err(PayloadError::Io(e)), r));
            }
            Some((Ok(chunk), r))
        }
    });
    let boxed: std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<web::Bytes, PayloadError>>>> = Box::pin(stream);
    Payload::from(boxed)
}

fn lock(held: &Mutex<Held>) -> std::sync::MutexGuard<'_, Held> {
    // Every use is one short change: a panic while holding it cannot leave it half-changed.
    held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn refuse(status: actix_web::http::StatusCode, message: &str, retry_after: Option<&str>) -> HttpResponse {
    let mut resp = HttpResponse::build(status);
    if let Some(s) = retry_after {
        resp.insert_header((header::RETRY_AFTER, s));
    }
    resp.json(serde_json::json!({"error": message, "status": status.as_u16()}))
}

/// 503 + Retry-After: the budget is in use.
fn busy() -> HttpResponse {
    metrics::counter!("herald_events_shed_total", "reason" => "busy").increment(1);
    refuse(
        actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
        "too many large bodies are being read at once; try again",
        Some("1"),
    )
}

/// The middleware on every route: an error answer to a request that came with a body closes the connection, since
/// the body may not have been read (a refusal answers before reading it). actix-web keeps such a connection open
/// when the handler has let go of the body — to read a chunked body to its end for the next request, which a
/// sender that gave up never sends — so the body is held here until the answer has been written: actix-web then
/// sees a body nobody read, answers with `Connection: close`, and closes once the sender stops or
/// `client_disconnect_timeout` passes.
pub async fn close_refused(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let headers = req.headers();
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || (headers.get(header::CONTENT_LENGTH))
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > 0);
    if !has_body {
        return next.call(req).await.map(ServiceResponse::map_into_boxed_body);
    }
    let body = std::rc::Rc::new(std::cell::RefCell::new(actix_web::HttpMessage::take_payload(&mut req)));
    let reader = body.clone();
    let stream = futures_util::stream::poll_fn(move |cx| reader.borrow_mut().poll_next_unpin(cx));
    let boxed: std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<web::Bytes, PayloadError>>>> = Box::pin(stream);
    req.set_payload(Payload::from(boxed));
    let res = next.call(req).await?.map_into_boxed_body();
    if res.status().is_client_error() || res.status().is_server_error() {
        return Ok(res.map_body(|_, answer| BoxBody::new(HoldingBody { answer, _body: body })));
    }
    Ok(res)
}

/// An answer that keeps the request's body alive until it has been written (see [`close_refused`]).
struct HoldingBody {
    answer: BoxBody,
    _body: std::rc::Rc<std::cell::RefCell<Payload>>,
}

impl MessageBody for HoldingBody {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> actix_web::body::BodySize {
        self.answer.size()
    }

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<web::Bytes, Self::Error>>> {
        std::pin::Pin::new(&mut self.answer).poll_next(cx)
    }
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
        return Ok(req.into_response(busy()));
    };
    let held = Arc::new(Mutex::new(Held {
        permit: Some(permit),
        busy: false,
    }));
    // The body is metered in place; the request itself kept for the answer when the handler runs out of time
    // (`ServiceRequest::from_parts` with a clone would log a warning per request in debug builds).
    let mut req = req;
    let payload = actix_web::HttpMessage::take_payload(&mut req);
    req.set_payload(metered(budget.clone(), held.clone(), payload));
    let http_req = req.request().clone();
    let result = tokio::time::timeout(budget.read_timeout, next.call(req)).await;
    let shed = std::mem::take(&mut *lock(&held)).busy;
    match result {
        Ok(_) if shed => Ok(ServiceResponse::new(http_req, busy())),
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
