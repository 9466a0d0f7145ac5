//! What the HTML pages (the status page, an Application's page) share: their style and frame, their links (which
//! keep the reader's `?tz=`), the time zone they speak in, and their error pages — a client mistake gets a page
//! with its status that says what is wrong, never the API's JSON, never a 5xx for bad input.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use maud::{DOCTYPE, Markup, html};

use super::words::Zone;
use super::{ApiError, AppContext};

pub const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1em;color:#222;max-width:1200px}\
.scroll{overflow-x:auto}table{border-collapse:collapse;margin-bottom:1em;min-width:60%}\
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}\
.warning{color:#a60}.critical{color:#b00;font-weight:bold}.info{color:#346}.empty,.more{color:#777}\
h2{margin-top:1.2em;font-size:1.2em}.badge{display:inline-block;padding:1px 6px;border-radius:3px;color:#fff;\
font-size:.9em;white-space:nowrap}.Synced,.Healthy{background:#18be94}.OutOfSync,.Missing{background:#f4c030;color:#222}\
.Unknown{background:#ccd6dd;color:#222}.Progressing{background:#0dadea}.Degraded{background:#e96d76}\
.Suspended{background:#766f94}nav a{margin-right:.8em}.nowrap{white-space:nowrap}a{color:#0b5cad}\
form.act{display:inline-block;margin:.3em .6em .3em 0;padding:.3em .5em;border:1px solid #ddd;border-radius:4px}\
form.act input,form.act select,form.act button{font-size:.9em;margin:.1em}.refused{color:#b00}\
details.todo,details.acts{margin:.2em 0}details summary{cursor:pointer;color:#0969da}details.todo p{margin:.2em 0 .2em 1em}\
.acknowledged,.silenced{color:#186}\
@media (max-width:600px){body{margin:.5em}td,th{padding:3px 4px;font-size:.9em}form.act{display:block}}";

/// A whole page: `title`, refreshing itself every 30 s when `refresh`.
pub fn document(title: &str, refresh: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="robots" content="noindex";
                @if refresh { meta http-equiv="refresh" content="30"; }
                title { "Herald — " (title) }
                style { (STYLE) }
            }
            body { (body) }
        }
    }
}

/// A page answered with `status`, not cached.
pub fn respond(status: StatusCode, page: Markup) -> HttpResponse {
    HttpResponse::build(status)
        .insert_header(super::no_store())
        .insert_header(("Referrer-Policy", "same-origin"))
        .content_type("text/html; charset=utf-8")
        .body(page.into_string())
}

/// The page for an error: its status, and what is wrong (a 5xx says no more than the API's JSON would).
pub fn error_page(e: &ApiError) -> HttpResponse {
    let status = e.status_code();
    let title = match status.as_u16() {
        400 => "Bad request",
        403 => "Not allowed",
        404 => "Not found",
        405 => "Use the page's button",
        409 => "Nothing to do",
        422 => "Cannot do that",
        _ => "Herald cannot answer now",
    };
    let mut message = e.to_string();
    if message.len() > 600 {
        let mut end = 600;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    let page = document(
        title,
        false,
        html! {
            h1 { (title) }
            p.refused #error { (message) }
            p { a href="/" { "Herald's status page" } }
        },
    );
    let mut resp = respond(status, page);
    // What the JSON answer would carry: when to come back, which methods work.
    for (name, value) in e.error_response().headers() {
        if matches!(name.as_str(), "retry-after" | "www-authenticate") {
            resp.headers_mut().insert(name.clone(), value.clone());
        }
    }
    resp
}

/// A page handler's answer, its error as a page.
pub fn or_error_page(r: Result<HttpResponse, ApiError>) -> HttpResponse {
    r.unwrap_or_else(|e| error_page(&e))
}

/// The zone a page speaks in: `?tz=` when given (an unknown one is a 400 that says so), else `server.time_zone`.
pub fn zone(ctx: &AppContext, tz: Option<&str>) -> Result<Zone, ApiError> {
    match tz.filter(|t| !t.trim().is_empty()) {
        Some(name) => crate::domain::digest::time_zone(name.trim())
            .map(|tz| Zone { tz, chosen: true })
            .map_err(|e| ApiError::BadRequest(format!("tz: {e}"))),
        None => Ok(Zone {
            tz: ctx.pipeline.settings().server.zone(),
            chosen: false,
        }),
    }
}

/// `path` with `params` and the reader's zone as its query.
pub fn link(path: &str, params: &[(&str, &str)], zone: &Zone) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in params {
        query.append_pair(k, v);
    }
    if let Some((k, v)) = zone.param() {
        query.append_pair(k, &v);
    }
    let query = query.finish();
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    }
}

/// An Application's page: `/apps/{namespace}/{name}`, or `/apps/{instance}/{namespace}/{name}` outside the
/// default instance; each segment percent-encoded.
pub fn app_path(app: &crate::argocd::AppId) -> String {
    let segment = |s: &str| -> String {
        url::form_urlencoded::byte_serialize(s.as_bytes())
            .collect::<String>()
            .replace('+', "%20")
    };
    if app.is_default_instance() {
        format!("/apps/{}/{}", segment(&app.namespace), segment(&app.name))
    } else {
        format!(
            "/apps/{}/{}/{}",
            segment(&app.instance),
            segment(&app.namespace),
            segment(&app.name)
        )
    }
}
