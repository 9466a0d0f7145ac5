//! The Bot API as the receiver calls it: `POST {api_url}/bot{token}/{method}` with a JSON body, answered
//! `{ok: true, result}` or `{ok: false, error_code, description, parameters: {retry_after, migrate_to_chat_id}}`,
//! read into the retry decision (429 waits `retry_after`; 5xx transient; 401, 403, 404 and other 4xx permanent,
//! saying what to fix). The token is part of the URL: no URL is ever quoted, and every text is scrubbed.

use std::time::Duration;

use reqwest::header::CONTENT_TYPE;
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::Value;

use super::Telegram;
use crate::receivers::DeliveryError;
use crate::receivers::http::{JSON_UTF8, classify_status, snippet, transport_error};

/// A failed call, with Telegram's `description` kept so callers can react to one ("message is not modified").
pub(super) struct ApiError {
    pub(super) description: String,
    pub(super) error: DeliveryError,
}

impl From<DeliveryError> for ApiError {
    fn from(error: DeliveryError) -> Self {
        Self {
            description: String::new(),
            error,
        }
    }
}

/// What every Bot API method answers.
#[derive(Debug, Deserialize)]
struct Answer {
    ok: bool,
    #[serde(default)]
    result: Value,
    error_code: Option<u16>,
    #[serde(default)]
    description: String,
    parameters: Option<Parameters>,
}

/// `ResponseParameters`: why a request failed, for the client to act on.
#[derive(Debug, Deserialize)]
struct Parameters {
    retry_after: Option<u64>,
    migrate_to_chat_id: Option<i64>,
}

/// Telegram's error as a retry decision; `description` is already scrubbed.
fn classify(
    code: u16,
    description: &str,
    parameters: Option<&Parameters>,
    header_wait: Option<Duration>,
) -> DeliveryError {
    let detail = snippet(description);
    let migrated = parameters.and_then(|p| p.migrate_to_chat_id);
    match code {
        429 => DeliveryError::Transient {
            reason: format!("HTTP 429: flood control ({detail})"),
            retry_after: parameters
                .and_then(|p| p.retry_after)
                .map(Duration::from_secs)
                .or(header_wait),
        },
        500..=599 => DeliveryError::Transient {
            reason: format!("HTTP {code}: {detail}"),
            retry_after: header_wait,
        },
        401 | 404 => DeliveryError::permanent(format!(
            "HTTP {code}: bot_token is not a valid token: set the one @BotFather gave ({detail})"
        )),
        403 => DeliveryError::permanent(format!(
            "HTTP 403: the bot may not post in this chat (blocked by the user, or removed from the group or \
             channel): add the bot again, or unblock it ({detail})"
        )),
        400 if migrated.is_some() => DeliveryError::permanent(format!(
            "HTTP 400: the group became a supergroup: set chat_id to {} ({detail})",
            migrated.unwrap_or_default()
        )),
        _ => DeliveryError::permanent(format!("HTTP {code}: {detail}")),
    }
}

impl Telegram {
    /// Calls the Bot API `method` with `body` and answers its `result`.
    pub(super) async fn call(&self, method: &str, body: &Value) -> Result<Value, ApiError> {
        let who = format!("telegram {method}");
        let fail = |e: DeliveryError| ApiError::from(self.redactor.apply(DeliveryError::prefixed(&who, e)));
        let url = format!("{}/bot{}/{method}", self.api_url, self.bot_token.expose_secret());
        let request = (self.http.client().post(url))
            .header(CONTENT_TYPE, JSON_UTF8)
            .body(serde_json::to_vec(body).unwrap_or_default());
        let resp = request.send().await.map_err(|e| fail(transport_error(e)))?;
        let status = resp.status().as_u16();
        let header_wait = self.http.retry_after(resp.headers());
        let text = self.redactor.scrub(&resp.text().await.unwrap_or_default());
        let Ok(answer) = serde_json::from_str::<Answer>(&text) else {
            if resp_ok(status) {
                // Something between Herald and Telegram answered; the message may not have been sent.
                return Err(fail(DeliveryError::transient(format!(
                    "the answer is not the Bot API's: {}",
                    snippet(&text)
                ))));
            }
            return Err(fail(classify_status(status, header_wait, &text)));
        };
        if answer.ok && resp_ok(status) {
            return Ok(answer.result);
        }
        let code = answer.error_code.unwrap_or(status);
        let error = classify(code, &answer.description, answer.parameters.as_ref(), header_wait);
        Err(ApiError {
            description: answer.description.clone(),
            error: fail(error).error,
        })
    }
}

fn resp_ok(status: u16) -> bool {
    (200..300).contains(&status)
}
