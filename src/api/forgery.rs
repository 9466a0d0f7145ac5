//! Requests a browser can be made to send on someone's behalf, refused before any route sees them:
//! - a `Host` Herald does not answer to (`server.allowed_hosts`): 421. DNS rebinding — a page on `evil.example`
//!   that resolves to 127.0.0.1 — reaches a loopback Herald with `Host: evil.example`.
//! - a state-changing request (`POST`, `PUT`, `PATCH`, `DELETE`) with a body that is not JSON: 415. A page on
//!   another site can only send a form or `text/plain` without asking first (CORS), and Herald answers no CORS
//!   preflight. No Content-Type at all is accepted: Argo CD sends none unless told to. Two routes take forms on
//!   purpose, because their own signature (not anything a browser adds) is what lets them act: a signed link's
//!   confirmation page (`/act/…`) and Slack's button clicks (`POST /v1/slack/interactions`, form-encoded by Slack).
//! - a state-changing request a browser marks as coming from another site (`Sec-Fetch-Site: cross-site` or
//!   `same-site`, or an `Origin` whose host or port is not the request's), unless it carries a bearer token (which a browser
//!   never adds by itself, unlike remembered Basic credentials): 403.
//!
//! The pages run no scripts; their only forms (Acknowledge and Silence, `forms`) post a form body to
//! `/incidents/{id}/ack|silence`, the one place besides the signed links' `/act/` where a form is taken — each
//! carries a CSRF token bound to the caller, the incident and the hour. Every other change goes through the JSON
//! API. The probes (`/healthz`, `/readyz`) answer whatever the `Host`: the kubelet calls them by
//! the pod's IP.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, header};
use actix_web::middleware::Next;
use actix_web::{Error, ResponseError, web};

use super::{ApiError, AppContext};
use crate::configuration::{AllowedHosts, HostName};

/// The middleware on every route.
pub async fn guard(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let refusal = req
        .app_data::<web::Data<AppContext>>()
        .and_then(|ctx| refusal(&req, &ctx.hosts));
    match refusal {
        Some(e) => {
            metrics::counter!("herald_requests_refused_total", "reason" => reason(&e)).increment(1);
            let resp = e.error_response();
            Ok(req.into_response(resp))
        }
        None => next.call(req).await.map(ServiceResponse::map_into_boxed_body),
    }
}

fn reason(e: &ApiError) -> &'static str {
    match e {
        ApiError::MisdirectedRequest(_) => "host",
        ApiError::UnsupportedMediaType(_) => "content_type",
        _ => "cross_site",
    }
}

/// Why this request is refused, if it is.
fn refusal(req: &ServiceRequest, hosts: &AllowedHosts) -> Option<ApiError> {
    if matches!(req.path(), "/healthz" | "/readyz") {
        return None;
    }
    let host = request_host(req);
    if !hosts.allows(&host) {
        return Some(ApiError::MisdirectedRequest(format!(
            "this Herald does not answer to the host {host:?}: add it to server.allowed_hosts{}",
            match hosts {
                AllowedHosts::Only(names) => format!(
                    " (now {})",
                    names.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
                AllowedHosts::Any => String::new(),
            }
        )));
    }
    if !matches!(
        *req.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    ) {
        return None;
    }
    let headers = req.headers();
    // A signed link's confirmation page posts a form to itself: the link's signature, not a credential the browser
    // adds, is what lets it act, so a form there is no forgery. The pages' Acknowledge and Silence forms carry a
    // token only Herald's own page could have handed out (see `forms`). Slack posts its button clicks as a form,
    // signed with the app's signing secret (checked by the route). The cross-site check below still applies.
    let slack_click = *req.method() == Method::POST && req.path() == "/v1/slack/interactions";
    let form = req.path().starts_with("/act/") || is_page_form(req.path()) || slack_click;
    if let Some(ct) = headers.get(header::CONTENT_TYPE)
        && !form
        && !is_json(ct.to_str().unwrap_or(""))
    {
        return Some(ApiError::UnsupportedMediaType(format!(
            "{} {} takes a JSON body: send Content-Type: application/json (or none); {:?} is refused, so that a \
             web page cannot post a form here on someone's behalf",
            req.method(),
            req.path(),
            ct.to_str().unwrap_or("(not text)")
        )));
    }
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.get(..7))
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer "));
    if !bearer && let Some(from) = cross_site(req, &host) {
        return Some(ApiError::Forbidden(format!(
            "{} {} refused: the browser says it comes from {from}. Change Herald from its own pages, the CLI or \
             with a bearer token",
            req.method(),
            req.path()
        )));
    }
    None
}

/// `/incidents/{id}/ack` or `/incidents/{id}/silence`: the pages' forms (not the JSON API under `/v1`).
fn is_page_form(path: &str) -> bool {
    path.strip_prefix("/incidents/")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(id, action)| !id.is_empty() && matches!(action, "ack" | "silence"))
}

/// The `Host` the request names (HTTP/2 `:authority` when there is no header); empty when none.
fn request_host(req: &ServiceRequest) -> String {
    req.headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default()
}

/// `application/json`, or a `+json` type, with any parameters.
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Where a browser says a request comes from, when that is another site: `Sec-Fetch-Site` when sent (every current
/// browser does), else `Origin` compared with `Host`.
fn cross_site(req: &ServiceRequest, host: &str) -> Option<String> {
    let headers = req.headers();
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return match site.to_ascii_lowercase().as_str() {
            "same-origin" | "none" => None,
            other => Some(format!("another site (Sec-Fetch-Site: {other})")),
        };
    }
    let origin = headers.get(header::ORIGIN)?.to_str().unwrap_or("null");
    let origin_url = url::Url::parse(origin).ok();
    let origin_host = (origin_url.as_ref()).and_then(|u| {
        u.host_str()
            .and_then(HostName::parse)
            .map(|h| (h.name, u.port_or_known_default()))
    });
    match (origin_host, HostName::parse(host)) {
        (Some((name, port)), Some(h)) if name == h.name && same_port(port, h.port) => None,
        _ => Some(format!("another origin ({origin:?})")),
    }
}

/// An origin is a scheme, a host and a port: a page served on another port of the same host is another origin.
/// A `Host` without a port was reached on its scheme's default port, which Herald cannot see behind a proxy that
/// ends TLS: 80 and 443 are both taken as it.
fn same_port(origin: Option<u16>, host: Option<u16>) -> bool {
    match (origin, host) {
        (Some(o), Some(h)) => o == h,
        (Some(o), None) => matches!(o, 80 | 443),
        (None, _) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn refused(req: TestRequest, hosts: &AllowedHosts) -> Option<u16> {
        refusal(&req.to_srv_request(), hosts).map(|e| e.status_code().as_u16())
    }

    fn loopback() -> AllowedHosts {
        crate::configuration::Settings::from_yaml("")
            .expect("defaults")
            .server
            .hosts()
    }

    #[test]
    fn a_foreign_host_is_refused_but_the_probes_answer_any() {
        let get = |host: &str, path: &str| TestRequest::get().uri(path).insert_header((header::HOST, host));
        assert_eq!(refused(get("127.0.0.1:8080", "/v1/apps"), &loopback()), None);
        assert_eq!(refused(get("evil.example:8080", "/v1/apps"), &loopback()), Some(421));
        assert_eq!(refused(get("evil.example:8080", "/"), &loopback()), Some(421));
        assert_eq!(refused(get("10.1.2.3:8080", "/healthz"), &loopback()), None);
        assert_eq!(refused(get("evil.example", "/v1/apps"), &AllowedHosts::Any), None);
    }

    #[test]
    fn a_state_change_needs_a_json_body_or_none() {
        let post = |ct: Option<&str>| {
            let r = TestRequest::post()
                .uri("/v1/silences")
                .insert_header((header::HOST, "localhost:8080"));
            match ct {
                Some(ct) => r.insert_header((header::CONTENT_TYPE, ct)),
                None => r,
            }
        };
        for ok in [
            None,
            Some("application/json"),
            Some("application/json; charset=utf-8"),
            Some("application/merge-patch+json"),
        ] {
            assert_eq!(refused(post(ok), &loopback()), None, "{ok:?}");
        }
        for bad in [
            "text/plain",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
        ] {
            assert_eq!(refused(post(Some(bad)), &loopback()), Some(415), "{bad}");
        }
        let slack = |method: Method, path: &str| {
            TestRequest::default()
                .method(method)
                .uri(path)
                .insert_header((header::HOST, "localhost:8080"))
                .insert_header((header::CONTENT_TYPE, "application/x-www-form-urlencoded"))
        };
        assert_eq!(
            refused(slack(Method::POST, "/v1/slack/interactions"), &loopback()),
            None,
            "Slack's clicks are forms, signed"
        );
        for (m, p) in [
            (Method::PUT, "/v1/slack/interactions"),
            (Method::POST, "/v1/slack/interactions/x"),
            (Method::POST, "/v1/slack"),
        ] {
            assert_eq!(refused(slack(m.clone(), p), &loopback()), Some(415), "{m} {p}");
        }
        let page_form = TestRequest::post()
            .uri("/incidents/12/ack")
            .insert_header((header::HOST, "localhost:8080"))
            .insert_header((header::CONTENT_TYPE, "application/x-www-form-urlencoded"));
        assert_eq!(
            refused(page_form, &loopback()),
            None,
            "a page's form (it carries its own token)"
        );
        let api_form = TestRequest::post()
            .uri("/v1/incidents/12/ack")
            .insert_header((header::HOST, "localhost:8080"))
            .insert_header((header::CONTENT_TYPE, "application/x-www-form-urlencoded"));
        assert_eq!(refused(api_form, &loopback()), Some(415), "the API takes JSON only");
        let get_form = TestRequest::get()
            .uri("/v1/apps")
            .insert_header((header::HOST, "localhost"))
            .insert_header((header::CONTENT_TYPE, "text/plain"));
        assert_eq!(refused(get_form, &loopback()), None, "a read changes nothing");
    }

    #[test]
    fn an_origin_on_another_port_of_the_same_host_is_another_site() {
        let post = |host: &str, origin: &str| {
            TestRequest::post()
                .uri("/v1/silences")
                .insert_header((header::HOST, host.to_string()))
                .insert_header((header::CONTENT_TYPE, "application/json"))
                .insert_header(("authorization", "Basic b3BzOnBhc3N3b3Jk"))
                .insert_header((header::ORIGIN, origin.to_string()))
        };
        for (host, origin, status) in [
            ("herald.example", "https://herald.example", None),
            ("herald.example", "http://herald.example", None),
            ("herald.example", "https://herald.example:8443", Some(403)),
            ("herald.example:8443", "https://herald.example:8443", None),
            ("herald.example:8443", "https://herald.example", Some(403)),
            ("127.0.0.1:8080", "http://127.0.0.1:9999", Some(403)),
            ("127.0.0.1:8080", "http://127.0.0.1:8080", None),
        ] {
            assert_eq!(
                refused(post(host, origin), &AllowedHosts::Any),
                status,
                "Host {host}, Origin {origin}"
            );
        }
    }

    #[test]
    fn a_cross_site_state_change_is_refused_unless_it_carries_a_bearer_token() {
        let post = |headers: &[(&str, &str)]| {
            let mut r = TestRequest::post()
                .uri("/v1/silences")
                .insert_header((header::HOST, "127.0.0.1:8080"))
                .insert_header((header::CONTENT_TYPE, "application/json"));
            for (k, v) in headers {
                r = r.insert_header((*k, *v));
            }
            r
        };
        let basic = ("authorization", "Basic b3BzOnBhc3N3b3Jk");
        for (headers, status) in [
            (vec![basic, ("sec-fetch-site", "cross-site")], Some(403)),
            (vec![basic, ("sec-fetch-site", "same-site")], Some(403)),
            (vec![("sec-fetch-site", "cross-site")], Some(403)),
            (vec![basic, ("origin", "https://evil.example")], Some(403)),
            (vec![basic, ("origin", "null")], Some(403)),
            (vec![basic, ("sec-fetch-site", "same-origin")], None),
            (vec![basic, ("origin", "http://127.0.0.1:8080")], None),
            (vec![basic, ("origin", "http://127.0.0.1:9999")], Some(403)),
            (vec![basic, ("origin", "http://127.0.0.1")], Some(403)),
            (vec![basic, ("origin", "file://")], Some(403)),
            (vec![basic], None),
            (
                vec![
                    ("authorization", "Bearer admin-token-0123456"),
                    ("sec-fetch-site", "cross-site"),
                ],
                None,
            ),
        ] {
            assert_eq!(refused(post(&headers), &loopback()), status, "{headers:?}");
        }
    }
}
