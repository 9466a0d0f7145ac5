//! `POST /v1/slack/interactions`, its HTTP only: the clicks on the buttons of the Slack bot's messages, as Slack
//! posts them (a form with one `payload` field). No Herald credential: Slack's signature is the credential. What is
//! checked and done is `pipeline::slack`'s; this handler reads the request and answers: 404 when no Slack receiver
//! has a `signing_secret`; 401 when the signing headers are missing or the timestamp is more than 5 minutes from
//! Herald's clock (checked before anything of the body is read), or when the body is not signed by a Slack receiver
//! or is a replay; 413 beyond [`MAX_BODY`]; 400 with what is wrong for a payload that is not a click on Herald's
//! buttons (Slack shows the person who clicked that it failed); otherwise 200 at once, with an ephemeral text saying
//! what was done, or why nothing was. The message is edited by the outbox like any acknowledgement (`chat.update`
//! to the configured `api_url`). Slack's `response_url` is never called: nothing in the body decides where Herald
//! sends anything.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;

use super::events::read_body;
use super::{ApiError, AppContext};
use crate::pipeline::{SignatureRefusal, SlackAnswer, check_slack_headers};

/// The largest body taken. Slack's `block_actions` payload carries the message clicked, which Herald keeps under
/// about 150 KB of Block Kit text; form encoding can double that.
pub const MAX_BODY: usize = 512 * 1024;

fn header<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

fn refused(r: SignatureRefusal) -> ApiError {
    metrics::counter!("herald_requests_refused_total", "reason" => "slack_signature").increment(1);
    tracing::info!(reason = %r, "a Slack interaction was refused");
    ApiError::Unsigned(r.to_string())
}

pub(super) async fn interaction(
    req: HttpRequest,
    payload: web::Payload,
    ctx: web::Data<AppContext>,
) -> Result<HttpResponse, ApiError> {
    let apps = ctx.pipeline.slack_apps();
    if apps.is_empty() {
        return Err(ApiError::NotFound(
            "Slack interactivity is off: no Slack receiver has a `signing_secret`".into(),
        ));
    }
    let now = ctx.pipeline.now();
    let timestamp = header(&req, "x-slack-request-timestamp");
    let signature = header(&req, "x-slack-signature");
    let headers = check_slack_headers(timestamp, signature, now).map_err(refused)?;
    let body = read_body(&req, payload, MAX_BODY).await?;
    match ctx.pipeline.answer_slack_request(&apps, &headers, &body).await? {
        SlackAnswer::Unsigned(r) => Err(refused(r)),
        SlackAnswer::Unreadable(e) => Err(ApiError::BadRequest(format!("{e}"))),
        SlackAnswer::Acted(words) => Ok(ephemeral(&super::actions::capitalised(&words))),
        SlackAnswer::Refused(text) => Ok(ephemeral(&text)),
    }
}

/// Slack takes any 200 as the click received; the text is what an ephemeral reply (shown only to the person who
/// clicked) would say.
fn ephemeral(text: &str) -> HttpResponse {
    HttpResponse::build(StatusCode::OK).json(json!({
        "response_type": "ephemeral",
        "replace_original": false,
        "text": text,
    }))
}
