//! The pages of the signed one-click links in messages (`/act/{token}`), which work without logging in: the
//! signature is the credential. A `GET` only shows what the link would do and one button (link unfurlers and mail
//! scanners fetch every link: a GET never acts); the `POST` that button sends acts, once — a used link says what
//! it did. A link that names nobody asks for a name. A forged, altered or expired link gets a 4xx page that says so.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use maud::{DOCTYPE, Markup, html};

use super::events::read_body;
use super::{ApiError, AppContext};
use crate::domain::action_link::{ActionLink, LinkRefusal};
use crate::pipeline::LinkOutcome;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:36em;padding:0 1em;color:#222}\
button{font-size:1.1em;padding:.5em 1.2em}input{font-size:1em;padding:.3em;width:100%;box-sizing:border-box}\
.refused{color:#b00}.done{color:#186}";

fn page(status: StatusCode, title: &str, body: Markup) -> HttpResponse {
    let html = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="robots" content="noindex";
                title { "Herald: " (title) }
                style { (STYLE) }
            }
            body { h1 { (title) } (body) }
        }
    };
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .insert_header(("Referrer-Policy", "no-referrer"))
        .body(html.into_string())
}

fn refused(status: StatusCode, why: &str) -> HttpResponse {
    page(status, "This link cannot be used", html! { p.refused { (why) } })
}

/// The link in the path, verified; or the page that says why not.
fn verified(ctx: &AppContext, token: &str) -> Result<ActionLink, Box<HttpResponse>> {
    match ctx.pipeline.verify_link(token) {
        None => Err(Box::new(refused(
            StatusCode::NOT_FOUND,
            "This Herald makes no one-click links (server.public_url and server.link_signing_key are not both set).",
        ))),
        Some(Ok(link)) => Ok(link),
        Some(Err(e)) => {
            let status = match e {
                LinkRefusal::Expired(_) => StatusCode::GONE,
                LinkRefusal::Forged => StatusCode::FORBIDDEN,
                LinkRefusal::Malformed => StatusCode::BAD_REQUEST,
            };
            let why = e.words(ctx.pipeline.settings().server.reader_zone());
            Err(Box::new(refused(status, &why)))
        }
    }
}

/// `GET /act/{token}`: what the link would do, and one button. Changes nothing.
pub(super) async fn confirm(path: web::Path<String>, ctx: web::Data<AppContext>) -> Result<HttpResponse, ApiError> {
    let link = match verified(&ctx, &path) {
        Ok(l) => l,
        Err(page) => return Ok(*page),
    };
    if let Some(before) = ctx.pipeline.link_used(&link.nonce).await? {
        return Ok(used(&before));
    }
    let ids = link.incidents();
    let label = match ids.len() {
        1 => link.action.label().to_string(),
        n => format!("Acknowledge all {n}"),
    };
    let mut about = Vec::new();
    for &id in ids.iter().take(LISTED) {
        about.push(what_it_acts_on(&ctx, id).await?);
    }
    let unlisted = ids.len().saturating_sub(LISTED);
    Ok(page(
        StatusCode::OK,
        &label,
        html! {
            @if ids.len() == 1 {
                p { (label) ": " (about[0]) }
            } @else {
                p { (label) " incidents, each until it resolves (those resolved by now are left alone):" }
                ul {
                    @for a in &about { li { (a) } }
                    @if unlisted > 0 { li { "… and " (unlisted) " more." } }
                }
            }
            form method="post" {
                @match &link.by {
                    Some(by) => p { "As " strong { (by) } "." },
                    None => p { label for="name" { "Your name" } br; input #name name="name" required maxlength="256" autocomplete="name"; },
                }
                p { button type="submit" { (label) } }
            }
        },
    ))
}

/// How many of a link's incidents its page lists by name.
const LISTED: usize = 50;

/// What a link acts on, in people's words, linked back to the Application's page: `pay-api (Degraded), Argo CD
/// instance argocd, firing since 2026-12-05 10:02 UTC.` An incident gone from the store is named by its number.
async fn what_it_acts_on(ctx: &AppContext, id: i64) -> Result<Markup, ApiError> {
    let Some(rec) = ctx.pipeline.incident(id).await? else {
        return Ok(html! { "incident " (id) " (no longer kept)." });
    };
    let since = ctx
        .pipeline
        .settings()
        .server
        .reader_zone()
        .stamp(rec.fired_at.unwrap_or(rec.since));
    Ok(html! {
        a href=(super::html::app_path(&rec.app)) { (rec.app.name) }
        " (" (rec.kind.words()) "), Argo CD instance " (rec.app.instance) ", "
        (super::words::state(rec.state).to_lowercase()) " since " (since) "."
    })
}

/// `POST /act/{token}`: acts once, as the link's person or the name given.
pub(super) async fn act(
    req: HttpRequest,
    path: web::Path<String>,
    payload: web::Payload,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let link = match verified(&ctx, &path) {
        Ok(l) => l,
        Err(page) => return Ok(*page),
    };
    let body = read_body(&req, payload, 4096).await?;
    let name = url::form_urlencoded::parse(&body)
        .find(|(k, _)| k == "name")
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty());
    let Some(by) = link.by.clone().or(name) else {
        return Ok(refused(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Say who you are: the name field is empty.",
        ));
    };
    if super::acks::check_words(&by, "").is_err() {
        return Ok(refused(
            StatusCode::UNPROCESSABLE_ENTITY,
            "A name is one line of at most 256 bytes.",
        ));
    }
    Ok(match ctx.pipeline.act_on_link(&link, &by).await? {
        LinkOutcome::Done(words) => page(StatusCode::OK, "Done", html! { p.done { (capitalised(&words)) "." } }),
        LinkOutcome::AlreadyUsed(before) => used(&before),
        LinkOutcome::Nothing(why) => page(
            StatusCode::CONFLICT,
            "Nothing to do",
            html! { p { (capitalised(&why)) "." } },
        ),
    })
}

/// A link used before: harmless, and says what it did.
fn used(before: &str) -> HttpResponse {
    let what = if before.is_empty() {
        "It is being used right now.".to_string()
    } else {
        format!("It did this then: {before}.")
    };
    page(
        StatusCode::OK,
        "This link was used already",
        html! { p { "Nothing was done again. " (what) } },
    )
}

pub(super) fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
