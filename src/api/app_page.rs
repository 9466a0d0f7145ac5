//! `GET /apps/{namespace}/{name}` and `/apps/{instance}/{namespace}/{name}`: one Application's page, server-rendered
//! HTML like the status page (no scripts, readable on a phone). The Application now (sync and health and since
//! when, the resources not in sync, a link to Argo CD); its open incidents, each with who was told what and when,
//! its acknowledgement or silence, the next escalation step ("pager in 12 min") and, for a caller allowed to, the
//! Acknowledge and Silence forms (`forms`); and its history — every transition and every notification, newest
//! first, [`PAGE`] lines a page, `?before=` the cursor of the "older" link. Times in `?tz=` (else
//! `server.time_zone`). An unknown Application is a 404 page, a malformed path, cursor or zone a 400 page.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;

use super::forms::Forms;
use super::html::{app_path, document, link, or_error_page, respond, zone};
use super::words::{self, Zone, capitalised};
use super::{ApiError, AppContext, query};
use crate::argocd::{AppId, DEFAULT_INSTANCE};
use crate::domain::IncidentState;
use crate::pipeline::{
    AboutDelivery, HistoryCursor, HistoryItem, HistoryPage, IncidentFilter, IncidentRecord, Pipeline,
};

/// Lines of history a page.
pub const PAGE: i64 = 50;

/// The longest namespace or name a path may carry (Kubernetes names are at most 253 characters).
const MAX_SEGMENT: usize = 253;

/// Open incidents shown, and the deliveries about them.
const OPEN_SHOWN: i64 = 50;
const TOLD_SHOWN: i64 = 200;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageQuery {
    tz: Option<String>,
    before: Option<String>,
}

/// `GET /apps/{namespace}/{name}`: a default-instance Application's page.
pub(super) async fn page(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    ctx: web::Data<AppContext>,
) -> HttpResponse {
    let (namespace, name) = path.into_inner();
    or_error_page(answer(&req, DEFAULT_INSTANCE, &namespace, &name, &ctx).await)
}

/// `GET /apps/{instance}/{namespace}/{name}`: `instance` is a configured Argo CD instance (or `default`).
pub(super) async fn instance_page(
    req: HttpRequest,
    path: web::Path<(String, String, String)>,
    ctx: web::Data<AppContext>,
) -> HttpResponse {
    let (instance, namespace, name) = path.into_inner();
    or_error_page(answer(&req, &instance, &namespace, &name, &ctx).await)
}

/// A path's segment as a name: not empty, not `.` or `..`, no control character, at most [`MAX_SEGMENT`].
fn segment<'a>(what: &str, s: &'a str) -> Result<&'a str, ApiError> {
    let bad = s.is_empty() || s == "." || s == ".." || s.len() > MAX_SEGMENT || s.chars().any(char::is_control);
    if bad {
        let shown: String = s.chars().take(40).filter(|c| !c.is_control()).collect();
        return Err(ApiError::BadRequest(format!(
            "{what} {shown:?} is not an Application's {what}: at most {MAX_SEGMENT} characters, no control \
             characters, not . or .."
        )));
    }
    Ok(s)
}

async fn answer(
    req: &HttpRequest,
    instance: &str,
    namespace: &str,
    name: &str,
    ctx: &AppContext,
) -> Result<HttpResponse, ApiError> {
    let id = app_id(ctx, instance, namespace, name)?;
    let settings = ctx.pipeline.settings();
    let q: PageQuery = query(req)?;
    let zone = zone(ctx, q.tz.as_deref())?;
    let before = match q.before.as_deref() {
        Some(b) => Some(HistoryCursor::decode(b).ok_or_else(|| {
            ApiError::BadRequest("before must be the cursor of an \"older\" link, as Herald wrote it".into())
        })?),
        None => None,
    };
    let p = &ctx.pipeline;
    let Some(rec) = p.app(&id).await? else {
        return Err(ApiError::NotFound(format!("no Application {id} has been seen")));
    };
    let now = p.now();
    let open = open_incidents(p, &id).await?;
    let ids: Vec<i64> = open.iter().map(|i| i.id).collect();
    let told = p.told(&ids, TOLD_SHOWN).await?;
    let escalations = next_escalations(p, &open).await?;
    let history = p.history(&id, before.as_ref(), PAGE).await?;
    let forms = Forms::for_request(req, ctx);
    let here = link(&app_path(&id), &[], &zone);
    let s = &rec.state;
    let snap = &s.snapshot;
    let body = html! {
        p { a href=(link("/", &[], &zone)) { "Herald" } " › Application" }
        h1 #app { (id) }
        p #about {
            "Team " strong { (rec.team) } ", project " (snap.project) ". "
            @if let Some(l) = p.app_link(s) { a #argocd href=(l) { "Open in Argo CD" } " · " }
            a href={ "/v1" (app_path(&id)) } { "as JSON" }
            @if let Some(at) = s.deleted_at { br; strong.warning { "Deleted at " (zone.time(at)) "." } }
        }
        p { "As of " span #now { (zone.time(now)) } ". Times in " (zone.tz.name()) "." }
        (now_section(s, &zone, now))
        (deployment_section(s, &settings.links))
        (incidents_section(&open, &told, &escalations, &forms, &here, &zone, now))
        (history_section(&id, &history, before.is_some(), &zone, now))
    };
    Ok(respond(StatusCode::OK, document(&id.to_string(), false, body)))
}

/// The Application the path names: each segment a name, the instance a configured one.
fn app_id(ctx: &AppContext, instance: &str, namespace: &str, name: &str) -> Result<AppId, ApiError> {
    let instance = segment("instance", instance)?;
    let (namespace, name) = (segment("namespace", namespace)?, segment("name", name)?);
    let settings = ctx.pipeline.settings();
    if settings.argocd.instance(instance).is_none() {
        return Err(ApiError::NotFound(format!(
            "no Argo CD instance named {instance:?} is configured ({}): /apps/{{instance}}/{{namespace}}/{{name}}, \
             or /apps/{{namespace}}/{{name}} for the default instance",
            settings.argocd.names()
        )));
    }
    Ok(AppId::of(instance, namespace, name))
}

/// The Application's firing incidents, then its pending ones (the first [`OPEN_SHOWN`] of each).
async fn open_incidents(p: &Pipeline, id: &AppId) -> Result<Vec<IncidentRecord>, ApiError> {
    let mut open = Vec::new();
    for state in [IncidentState::Firing, IncidentState::Pending] {
        open.extend(
            p.incidents(&IncidentFilter {
                app: Some(id.clone()),
                state: Some(state),
                limit: OPEN_SHOWN,
                ..Default::default()
            })
            .await?,
        );
    }
    Ok(open)
}

/// The next escalation step of each firing incident of `open` that has one.
async fn next_escalations(
    p: &Pipeline,
    open: &[IncidentRecord],
) -> Result<Vec<(i64, (crate::store::EscalationRecord, DateTime<Utc>))>, ApiError> {
    let mut escalations = Vec::new();
    for i in open.iter().filter(|i| i.state == IncidentState::Firing) {
        if let Some(next) = p.next_escalation(i.id).await? {
            escalations.push((i.id, next));
        }
    }
    Ok(escalations)
}

/// Sync and health, since when, the last operation when it did not succeed, and the resources not in sync.
fn now_section(s: &crate::state::AppState, zone: &Zone, now: DateTime<Utc>) -> Markup {
    let snap = &s.snapshot;
    let since = |at: DateTime<Utc>, at_least: bool| {
        format!("{}since {}", if at_least { "at least " } else { "" }, zone.time(at))
    };
    html! {
        h2 #status { "Now" }
        p #sync {
            span class={ "badge " (snap.sync_status) } { (snap.sync_status) } " "
            (words::status_for(snap.sync_status.as_str(), s.sync_since, now)) ", " (since(s.sync_since, s.sync_since_at_least))
        }
        p #health {
            span class={ "badge " (snap.health_status) } { (snap.health_status) } " "
            (words::status_for(snap.health_status.as_str(), s.health_since, now)) ", " (since(s.health_since, s.health_since_at_least))
            @if let Some(m) = snap.health_message.as_ref().filter(|m| !m.is_empty()) { ": " (m) }
        }
        @if let Some(op) = snap.operation.as_ref().filter(|o| o.phase.to_string() != "Succeeded") {
            p #operation { "Last sync: " strong { (op.phase) } @if !op.message.is_empty() { ": " (op.message) } }
        }
        @if snap.resources.is_empty() { p.empty { "Every resource is in sync." } } @else {
            div.scroll { table #resources {
                tr { th { "Resource" } th { "Sync" } th { "Health" } th { "Requires pruning" } }
                @for r in &snap.resources {
                    tr {
                        td { (r.kind) "/" @if !r.namespace.is_empty() { (r.namespace) "/" } (r.name) }
                        td { (r.status) }
                        td { (r.health.clone().unwrap_or_default()) @if let Some(m) = &r.health_message { ": " (m) } }
                        td { (if r.requires_pruning { "yes" } else { "no" }) }
                    }
                }
            } }
        }
    }
}

/// What the last deployment that changed something changed: images, revisions (linked to the comparison on a
/// trusted Git host), chart versions, and what its sync did to the resources.
fn deployment_section(s: &crate::state::AppState, links: &crate::configuration::LinksSettings) -> Markup {
    let Some(d) = crate::incidents::last_deployment(s, links) else {
        return html! {};
    };
    let facts = crate::receivers::render::deployment_facts(&d);
    html! {
        h2 #deployment { "Last deployment" }
        ul #deployment-changes {
            @for f in &facts {
                li {
                    (f.label) ": "
                    @match f.link.as_deref().filter(|l| crate::domain::link::is_safe(l)) {
                        Some(l) => a href=(l) { (f.value) },
                        None => (f.value),
                    }
                }
            }
        }
    }
}

/// The open incidents: each in words, acknowledged or silenced, the next escalation step, who was told, the forms.
fn incidents_section(
    open: &[IncidentRecord],
    told: &[AboutDelivery],
    escalations: &[(i64, (crate::store::EscalationRecord, DateTime<Utc>))],
    forms: &Forms,
    here: &str,
    zone: &Zone,
    now: DateTime<Utc>,
) -> Markup {
    html! {
        h2 #incidents { "Open incidents (" (open.len()) ")" }
        @if open.is_empty() { p.empty { "None." } }
        @for i in open {
            div.incident id={ "incident-" (i.id) } {
                h3 {
                    span class=(i.severity) { (words::incident(i, now)) }
                    " — " (words::state(i.state))
                    @if i.state == IncidentState::Pending { ", " (words::fires_in(i.fire_at, now)) }
                    @else if let Some(at) = i.fired_at { " since " (zone.short(at, now)) }
                }
                @if !i.view.summary.is_empty() { p { (i.view.summary) } }
                @if let Some(a) = &i.ack { p.acknowledged { (capitalised(&words::acknowledgement(a, i.state, zone, now))) "." } }
                @if let Some(h) = &i.view.held {
                    @if !matches!(h, crate::domain::Hold::Acknowledged { .. }) {
                        p.silenced { "Not told now: " (words::held(h, zone, now)) "." }
                    }
                }
                @for (_, (step, due)) in escalations.iter().filter(|(id, _)| *id == i.id) {
                    p.escalation {
                        "Next: " (crate::configuration::step_reaches(&step.receivers, step.on_call.as_deref())) " "
                        (if *due <= now { "now".to_string() } else { format!("in {}", crate::domain::notification::duration_words(*due - now)) })
                        " (escalation step " (step.step) ", at " (zone.short(*due, now)) ")"
                        @if i.ack.as_ref().is_some_and(|a| a.active(now)) { ", held back while acknowledged" }
                        "."
                    }
                }
                @let mine: Vec<&AboutDelivery> = told.iter().filter(|d| d.incident_id == i.id).collect();
                @if mine.is_empty() { p.empty { "No one has been told yet." } } @else {
                    ul.told { @for d in mine { li { span.nowrap { (zone.short(d.queued_at, now)) } " — " (delivery_line(d, zone, now)) } } }
                }
                (forms.for_incident(i, here))
            }
        }
    }
}

/// `chat told: pay-api: OutOfSync for over 1 h (fired) — delivered at 10:01 CET`.
fn delivery_line(d: &AboutDelivery, zone: &Zone, now: DateTime<Utc>) -> Markup {
    let (title, reason) = title_and_reason(&d.delivery.payload);
    html! {
        strong { (d.delivery.receiver) } " " (words::action(d.delivery.action))
        @if !title.is_empty() { ": " (title) }
        @if !reason.is_empty() { " (" (reason) ")" }
        " — " (words::delivery(&d.delivery, zone, now))
    }
}

/// A queued notification's title and reason (`fired`, `escalation step 1 (after 1h)`), read from its payload.
fn title_and_reason(payload: &str) -> (String, String) {
    #[derive(Deserialize)]
    struct Told {
        #[serde(default)]
        title: String,
        #[serde(default)]
        reason: String,
    }
    serde_json::from_str::<Told>(payload)
        .map(|t| (t.title, t.reason))
        .unwrap_or_default()
}

/// Every transition and notification, newest first, with the "older" link.
fn history_section(id: &AppId, history: &HistoryPage, paged: bool, zone: &Zone, now: DateTime<Utc>) -> Markup {
    let path = app_path(id);
    html! {
        h2 #history { "History" }
        @if history.items.is_empty() { p.empty { "Nothing (older)." } } @else {
            div.scroll { table #history-table {
                tr { th { "When" } th { "What" } }
                @for item in &history.items {
                    tr {
                        td.nowrap { (zone.time(item.at())) }
                        td { @match item {
                            HistoryItem::Transition(t) => (words::transition(t)),
                            HistoryItem::Delivery(d) => { "Incident " (d.incident_id) ": " (delivery_line(d, zone, now)) },
                        } }
                    }
                }
            } }
        }
        nav #pages {
            @if paged { a #newest href=(link(&path, &[], zone)) { "newest" } }
            @if let Some(c) = &history.older {
                a #older rel="next" href=(link(&path, &[("before", &c.encode())], zone)) { "older" }
            }
        }
    }
}
