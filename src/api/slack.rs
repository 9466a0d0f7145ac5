//! `POST /v1/slack/interactions`: the clicks on the buttons of the Slack bot's messages ("Acknowledge",
//! "Silence 1 h"), as Slack posts them (a form with one `payload` field). No Herald credential: Slack's signature
//! is the credential. In order, before anything of the body is read: the signing headers are there and the
//! timestamp is within 5 minutes of Herald's clock (else 401); then the body (at most [`MAX_BODY`], else 413) must
//! be signed with the signing secret of a Slack receiver (`slack.signing_secret`, compared in constant time) and
//! never seen before (remembered in the store for the window, so a replay to any replica is refused: 401). Only
//! then is the payload read: one that is not a click on Herald's buttons gets 400 with what is wrong (Slack shows
//! the person who clicked that it failed). A click acts only on an incident that was sent to the receiver whose
//! secret signed it (a delivery about it in the outbox), and — with `slack_users: known` — only for a Slack user
//! `people` maps to a person; otherwise it is answered 200 with an ephemeral text saying why nothing was done. It
//! acts through the same pipeline calls as the one-click links, as the person `people.<name>.slack` names (else
//! `@name (Slack)`), and is answered 200 at once; the message is edited by the outbox like any acknowledgement
//! (`chat.update` to the configured `api_url`). Slack's `response_url` is never called: nothing in the body decides
//! where Herald sends anything. An incident that is gone or resolved is a 200 whose ephemeral text says so.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use secrecy::ExposeSecret;
use serde_json::json;

use super::events::read_body;
use super::{ApiError, AppContext};
use crate::domain::slack_interaction::{self, MAX_AGE, SignatureRefusal};
use crate::pipeline::{LinkOutcome, SlackApp};
use crate::receivers::slack::SlackUsers;

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
    let ts = slack_interaction::fresh_timestamp(timestamp, now).map_err(refused)?;
    let Some(signature) = signature else {
        return Err(refused(SignatureRefusal::Missing("X-Slack-Signature")));
    };
    let body = read_body(&req, payload, MAX_BODY).await?;
    let keys: Vec<&[u8]> = apps
        .iter()
        .map(|a| a.signing_secret.expose_secret().as_bytes())
        .collect();
    let k = slack_interaction::signed_by(&keys, timestamp.unwrap_or_default().trim(), Some(signature), &body)
        .map_err(refused)?;
    // One Slack app may post through several receivers (one per channel): every receiver with the secret that
    // signed the click is that app.
    let secret = apps[k].signing_secret.expose_secret();
    let same_app: Vec<&SlackApp> = apps
        .iter()
        .filter(|a| a.signing_secret.expose_secret() == secret)
        .collect();
    let receiver = &apps[k].receiver;
    let expires = chrono::DateTime::from_timestamp(ts, 0).unwrap_or(now) + MAX_AGE;
    if !(ctx.pipeline)
        .claim_slack_request(&slack_interaction::replay_key(signature), expires)
        .await?
    {
        return Err(refused(SignatureRefusal::Replayed));
    }
    let click = slack_interaction::parse(&body).map_err(|e| {
        tracing::info!(receiver = %receiver, error = %e, "a signed Slack interaction Herald cannot act on");
        ApiError::BadRequest(format!("{e}"))
    })?;
    // The receiver whose secret signed the click is the Slack app it came from: it acts only on what that app was
    // sent (ids are small integers: any other would let one team's app act on every team's incidents).
    let mut told = None;
    for a in &same_app {
        if ctx.pipeline.sent_to(&a.receiver, click.incident).await? {
            told = Some(*a);
            break;
        }
    }
    let Some(app) = told else {
        tracing::warn!(
            receiver = %receiver,
            incident = click.incident,
            slack_user = %click.user_id,
            "a Slack click on an incident that was not sent to this Slack app was refused"
        );
        metrics::counter!("herald_requests_refused_total", "reason" => "slack_other_incident").increment(1);
        return Ok(ephemeral(&format!(
            "Nothing was done: incident {} was not sent to this Slack app (Herald's receiver {receiver}), so it \
             cannot act on it",
            click.incident
        )));
    };
    let receiver = &app.receiver;
    let person = ctx.pipeline.slack_person(&click.user_id);
    if app.users == SlackUsers::Known && person.is_none() {
        tracing::info!(
            receiver = %receiver,
            slack_user = %click.user_id,
            "a Slack click by a user not in people was refused (slack_users: known)"
        );
        metrics::counter!("herald_requests_refused_total", "reason" => "slack_unknown_user").increment(1);
        return Ok(ephemeral(&format!(
            "Nothing was done: this Slack app takes clicks only from people Herald knows, and your Slack user id \
             {} is not in Herald's people (people.<name>.slack); ask whoever runs Herald to add it",
            click.user_id
        )));
    }
    // A person Herald knows is named as Herald knows them; anyone else as Slack names them.
    let by = person.unwrap_or_else(|| click.by());
    let outcome = ctx
        .pipeline
        .act_on_incident(
            click.incident,
            click.action,
            &by,
            "from a Slack button",
            &format!("Slack user {}", click.user_id),
        )
        .await?;
    let words = match outcome {
        LinkOutcome::Done(w) | LinkOutcome::AlreadyUsed(w) | LinkOutcome::Nothing(w) => w,
    };
    tracing::info!(
        receiver = %receiver,
        incident = click.incident,
        action = click.action.as_str(),
        by = %by,
        slack_user = %click.user_id,
        outcome = %words,
        "a Slack button was clicked"
    );
    Ok(ephemeral(&super::actions::capitalised(&words)))
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
