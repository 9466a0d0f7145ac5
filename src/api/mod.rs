//! HTTP handlers only: parse, call the pipeline, map errors ([`ApiError`]). One room per resource (`events`, `apps`,
//! `incidents`, `silences`, `outbox`, `probes`, the HTML `status_page` and `app_page` with their `forms`, sharing
//! `html` and `words`); this module wires the routes, each with the scope it needs (`auth`, route middleware,
//! slowed down for guessers by `throttle`), and holds what they share: the [`AppContext`] and the query helpers. `forgery` is the middleware every route sits behind (Host, Content-Type and
//! cross-site checks).

mod acks;
mod actions;
mod app_page;
mod apps;
mod argocd;
mod auth;
mod error;
mod events;
mod forgery;
mod forms;
mod html;
mod incidents;
mod limits;
mod oncall;
mod outbox;
mod probes;
mod silences;
mod slack;
mod status_page;
mod throttle;
mod words;

use std::sync::Arc;

use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};

use crate::pipeline::Pipeline;

pub use apps::MAX_PRUNE_ROWS;
pub use auth::{Auth, Caller};
pub use error::ApiError;
pub use forgery::guard as refuse_forgeries;
pub use forms::FormKey;
pub use limits::{BodyBudget, close_refused};

/// What every handler can reach.
pub struct AppContext {
    pub pipeline: Pipeline,
    pub auth: Auth,
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    pub body_limits: BodyLimits,
    /// The `Host` names requests may carry (`server.allowed_hosts`).
    pub hosts: crate::configuration::AllowedHosts,
    /// Signs the tokens of the pages' forms (see `forms`).
    pub form_key: FormKey,
    /// Who may read `/metrics`, and whether it names teams (`server.metrics`).
    pub metrics_settings: crate::configuration::MetricsSettings,
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

/// The routes, each with the scope it needs (see [`auth`]): probes need none, metrics none unless
/// `server.metrics.auth` (then `read`); events need `ingest`;
/// reading the API and the pages needs `read`; acknowledging incidents needs `respond` (or `admin`); the raw
/// bodies received, silences and retries need `admin`. The signed one-click links and Slack's button clicks carry
/// their own signature instead; the pages' forms are routed with `read` and check the scope they need themselves,
/// to answer with a page (see `forms`).
pub fn configure(cfg: &mut web::ServiceConfig) {
    probe_routes(cfg);
    page_routes(cfg);
    api_routes(cfg);
    cfg.default_service(web::to(not_found));
}

/// The probes and the metrics: no credential (the metrics' own check aside).
fn probe_routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/healthz")
            .route(web::get().to(probes::healthz))
            .route(web::head().to(probes::healthz)),
    )
    .route("/readyz", web::get().to(probes::readyz))
    .route(
        "/metrics",
        web::get()
            .to(probes::metrics_endpoint)
            .wrap(actix_web::middleware::from_fn(probes::metrics_access)),
    );
}

/// The pages and their forms, the signed one-click links, Slack's button clicks.
fn page_routes(cfg: &mut web::ServiceConfig) {
    use crate::configuration::Scope::Read;
    cfg.route("/", needing(Read, web::get().to(status_page::page)))
        .route("/apps/{namespace}/{name}", needing(Read, web::get().to(app_page::page)))
        .route(
            "/apps/{instance}/{namespace}/{name}",
            needing(Read, web::get().to(app_page::instance_page)),
        )
        .route("/incidents/{id}/ack", needing(Read, web::post().to(forms::acknowledge)))
        .route("/incidents/{id}/silence", needing(Read, web::post().to(forms::silence)))
        .route("/incidents/{id}/ack", web::get().to(forms::not_by_get))
        .route("/incidents/{id}/silence", web::get().to(forms::not_by_get))
        // Signed one-click links: the signature is the credential (see `actions`).
        .route("/act/{token}", web::get().to(actions::confirm))
        .route("/act/{token}", web::post().to(actions::act))
        // Slack's button clicks: Slack's signature is the credential (see `slack`).
        .route("/v1/slack/interactions", web::post().to(slack::interaction));
}

/// The API under `/v1`: events in, and what Herald knows out.
fn api_routes(cfg: &mut web::ServiceConfig) {
    use crate::configuration::Scope::{Admin, Ingest, Read, Respond};
    cfg.service(
        web::resource("/v1/argocd/events")
            .wrap(actix_web::middleware::from_fn(limits::bounded))
            .route(needing(Ingest, web::post().to(events::receive_event)))
            .route(needing(Ingest, web::put().to(events::receive_event)))
            .route(web::route().to(events::wrong_method)),
    )
    .route("/v1/openapi.json", web::get().to(openapi))
    .route("/v1/apps", needing(Read, web::get().to(apps::list_apps)))
    .route(
        "/v1/apps/{namespace}/{name}",
        needing(Read, web::get().to(apps::get_app)),
    )
    // The bodies as received carry Helm values and last-applied-configuration annotations (secrets, often): admin.
    // `/v1/apps/{instance}/{namespace}/{name}`, or the default instance's `…/{namespace}/{name}/raw` (which the
    // handler checks for `admin`): see `apps::three_segments`.
    .route(
        "/v1/apps/{instance}/{namespace}/{name}",
        needing(Read, web::get().to(apps::three_segments)),
    )
    .route(
        "/v1/apps/{instance}/{namespace}/{name}/raw",
        needing(Admin, web::get().to(apps::get_instance_raw)),
    )
    .route("/v1/incidents", needing(Read, web::get().to(incidents::list_incidents)))
    .route(
        "/v1/incidents/{id}/ack",
        needing(Respond, web::post().to(acks::acknowledge)),
    )
    .route(
        "/v1/incidents/{id}/unack",
        needing(Respond, web::post().to(acks::unacknowledge)),
    )
    .route("/v1/prune-pending", needing(Read, web::get().to(apps::prune_pending)))
    .route("/v1/argocd", needing(Read, web::get().to(argocd::sources)))
    .route("/v1/oncall", needing(Read, web::get().to(oncall::on_call)))
    .route("/v1/silences", needing(Read, web::get().to(silences::list_silences)))
    .route("/v1/silences", needing(Admin, web::post().to(silences::create_silence)))
    .route(
        "/v1/silences/{id}",
        needing(Admin, web::delete().to(silences::expire_silence)),
    )
    .route("/v1/outbox", needing(Read, web::get().to(outbox::list_outbox)))
    .route(
        "/v1/outbox/{id}/retry",
        needing(Admin, web::post().to(outbox::retry_outbox)),
    );
}

/// `route`, for callers whose credential allows `scope` only.
fn needing(scope: crate::configuration::Scope, route: actix_web::Route) -> actix_web::Route {
    route.wrap(actix_web::middleware::from_fn(auth::needs(scope)))
}

async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound(format!(
        "no such endpoint: {} {}",
        req.method(),
        req.path()
    )))
}

/// The `limit` query parameter: 100 unless given, at most 1000 (as the API description says): a default page is
/// what a person reads, and what a busy store can answer in a few milliseconds.
fn limit(l: Option<i64>) -> Result<i64, ApiError> {
    limit_of(l, 100, 1000)
}

/// The `limit` query parameter: `default` unless given, at most `max` (a page must fit in memory).
fn limit_of(l: Option<i64>, default: i64, max: i64) -> Result<i64, ApiError> {
    match l {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::BadRequest(format!("limit must be between 1 and {max}"))),
    }
}

/// One page of a list as the answer: JSON with `count`, `items`, and — when the page is full (`limit` items, or
/// cut by size) — `next`, this request's path and query with `after` set to the cursor after its last item. The
/// items are already written (each once, by [`AnswerItems::take`]).
fn page_response(req: &HttpRequest, answer: AnswerItems, limit: i64, cursor: Option<String>) -> HttpResponse {
    let full = answer.full || answer.count as i64 == limit;
    let mut body = Vec::with_capacity(answer.items.len() + 256);
    body.extend_from_slice(b"{\"count\":");
    body.extend_from_slice(answer.count.to_string().as_bytes());
    body.extend_from_slice(b",\"items\":[");
    body.extend_from_slice(&answer.items);
    body.push(b']');
    if full && let Some(cursor) = cursor {
        let pairs = url::form_urlencoded::parse(req.query_string().as_bytes())
            .filter(|(k, _)| k != "after")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .chain(std::iter::once(("after".to_string(), cursor)));
        let query = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        body.extend_from_slice(b",\"next\":");
        // A string always serialises.
        let _ = serde_json::to_writer(&mut body, &format!("{}?{query}", req.path()));
    }
    body.push(b'}');
    HttpResponse::Ok().content_type("application/json").body(body)
}

/// The query string as `T`; unknown or malformed parameters are a 400 that names them.
fn query<T: serde::de::DeserializeOwned>(req: &HttpRequest) -> Result<T, ApiError> {
    web::Query::<T>::from_query(req.query_string())
        .map(|q| q.into_inner())
        .map_err(|e| ApiError::BadRequest(format!("bad query string: {e}")))
}

/// An optional query parameter parsed with `parse`; a value it refuses is a 400 whose message `refused` writes.
fn param<T>(
    value: Option<&str>,
    parse: impl Fn(&str) -> Option<T>,
    refused: impl Fn(&str) -> String,
) -> Result<Option<T>, ApiError> {
    value
        .map(|v| parse(v).ok_or_else(|| ApiError::BadRequest(refused(v))))
        .transpose()
}

/// The `state` query parameter of a list, parsed with `parse`; another value is a 400 that names the `states` there are.
fn state_param<T>(value: Option<&str>, parse: impl Fn(&str) -> Option<T>, states: &str) -> Result<Option<T>, ApiError> {
    param(value, parse, |s| format!("state must be {states}, not {s:?}"))
}

/// A page of a list stops growing past this many bytes of items (one item is always given): its `next` link goes
/// on after the last item given, as when a page has `limit` items.
pub const MAX_ANSWER_BYTES: usize = 8 << 20;

/// The items of one answer, up to [`MAX_ANSWER_BYTES`]: the first is always taken, the others while they fit.
/// Each is written as JSON once, when taken (the page is their concatenation, see [`page_response`]).
#[derive(Default)]
pub(super) struct AnswerItems {
    /// The items taken, as JSON separated by commas.
    items: Vec<u8>,
    pub count: usize,
    /// An item did not fit: the page is cut by size (and gets a `next` link as if full).
    pub full: bool,
}

impl AnswerItems {
    /// Takes `v` if it fits; `false` (and `full`) when it does not.
    pub fn take<T: serde::Serialize + ?Sized>(&mut self, v: &T) -> bool {
        let start = self.items.len();
        if self.count > 0 {
            self.items.push(b',');
        }
        if serde_json::to_writer(&mut self.items, v).is_err() {
            // Herald's own types always serialise; an item that did not is left out rather than half written.
            self.items.truncate(start);
            return true;
        }
        if self.count > 0 && self.items.len() > MAX_ANSWER_BYTES {
            self.items.truncate(start);
            self.full = true;
            return false;
        }
        self.count += 1;
        true
    }
}

/// [`id_page_with`] whose rows are written as they are.
fn id_page_of<T: serde::Serialize>(req: &HttpRequest, rows: &[T], limit: i64, id: impl Fn(&T) -> i64) -> HttpResponse {
    id_page_with(req, rows, limit, id, |answer, r| answer.take(r))
}

/// One page of rows listed newest first by id, as the response (see [`page_response`]): `take` puts a row in the
/// answer (`false`: it did not fit), and the cursor of the `next` link is the last row's id. At most
/// [`MAX_ANSWER_BYTES`] of items.
fn id_page_with<T>(
    req: &HttpRequest,
    rows: &[T],
    limit: i64,
    id: impl Fn(&T) -> i64,
    mut take: impl FnMut(&mut AnswerItems, &T) -> bool,
) -> HttpResponse {
    let (mut answer, mut cursor) = (AnswerItems::default(), None);
    for r in rows {
        if !take(&mut answer, r) {
            break;
        }
        cursor = Some(id(r).to_string());
    }
    page_response(req, answer, limit, cursor)
}

/// Shared state for the HTTP server.
pub fn data(ctx: AppContext) -> web::Data<AppContext> {
    web::Data::from(Arc::new(ctx))
}

/// A `no-store` header value, for pages that must not be cached.
pub fn no_store() -> (header::HeaderName, HeaderValue) {
    (header::CACHE_CONTROL, HeaderValue::from_static("no-store"))
}

/// The API's contract (`docs/openapi.json`, kept in the repository and checked by Schemathesis in `scripts/test`).
/// Public: it says nothing a caller could not learn from the answers.
async fn openapi() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(include_str!("../../docs/openapi.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_page_of_large_rows_stops_at_the_byte_bound_and_links_to_the_rest() {
        let req = actix_web::test::TestRequest::get()
            .uri("/v1/incidents?limit=1000&state=firing")
            .to_http_request();
        let rows: Vec<i64> = (1..=30).rev().collect();
        let text = "x".repeat(512 * 1024);

        let answer = id_page_with(
            &req,
            &rows,
            1000,
            |r| *r,
            |answer, r| answer.take(&serde_json::json!({"id": r, "text": text})),
        );

        let bytes = actix_web::body::to_bytes(answer.into_body()).await.expect("body");
        assert!(bytes.len() <= MAX_ANSWER_BYTES + 1024, "{} bytes", bytes.len());
        let page: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        let count = page["count"].as_i64().expect("count");
        assert!((1..30).contains(&count), "{count} of 30 rows");
        let last = page["items"][count as usize - 1]["id"].as_i64().expect("id");
        assert_eq!(
            page["next"],
            format!("/v1/incidents?limit=1000&state=firing&after={last}"),
            "the rest follows"
        );
    }
}
