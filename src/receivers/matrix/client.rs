//! The client-server API as the receiver uses it: one call, `PUT /_matrix/client/v3/rooms/{roomId}/send/
//! m.room.message/{txnId}`, with a transaction ID derived from the delivery so that a retry of the same delivery
//! is deduplicated by the homeserver instead of posted twice; and the reading of Matrix errors
//! (`{errcode, error, retry_after_ms}`) into the retry decision.

use std::time::{Duration, SystemTime};

use reqwest::header::{CONTENT_TYPE, HeaderMap};
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::Matrix;
use crate::domain::Notification;
use crate::receivers::DeliveryError;
use crate::receivers::http::{JSON_UTF8, classify_status, parse_json, parse_retry_after, snippet};

/// The transaction ID of one request of one delivery: the same notification (a retry of the same outbox row
/// carries the same thread, action and creation time) and the same step give the same ID, which the homeserver
/// answers with the event it already has. `step` tells apart two requests of one delivery (an edit, a new post).
pub(super) fn txn_id(n: &Notification, step: &str) -> String {
    let mut digest = Sha256::new();
    for part in [
        n.receiver.as_str(),
        n.thread_key.as_str(),
        n.action.as_str(),
        &n.created_at.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
        step,
    ] {
        digest.update(part.as_bytes());
        // A separator no field contains, so ("ab", "c") and ("a", "bc") differ.
        digest.update([0u8]);
    }
    format!("herald-{}", &hex::encode(digest.finalize())[..32])
}

/// A Matrix error body: `{"errcode": "M_FORBIDDEN", "error": "…", "retry_after_ms": 2000}`.
#[derive(Debug, Deserialize)]
struct MatrixError {
    errcode: String,
    #[serde(default)]
    error: String,
    retry_after_ms: Option<u64>,
}

/// What to do about an error code the receiver cannot fix by retrying.
fn advice(errcode: &str) -> &'static str {
    match errcode {
        "M_UNKNOWN_TOKEN" => "the access token is unknown or expired: log the user in again and set access_token",
        "M_MISSING_TOKEN" => "no access token was sent: set access_token",
        "M_FORBIDDEN" => "the user may not post in this room: invite it, join it, or raise its power level",
        _ => "refused by the homeserver",
    }
}

/// Matrix's errors, then the shared table: 429 (`M_LIMIT_EXCEEDED`) waits `retry_after_ms` (or `Retry-After`);
/// 401 and 403 say which credential or membership is missing; everything else is the shared status table.
/// `body` is already scrubbed ([`crate::receivers::http::Http::call`]).
pub(super) fn classify(status: u16, headers: &HeaderMap, body: &str, now: SystemTime) -> DeliveryError {
    let header_wait = parse_retry_after(
        headers.get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok()),
        now,
    );
    let Ok(e) = serde_json::from_str::<MatrixError>(body) else {
        return classify_status(status, header_wait, body);
    };
    let detail = snippet(&e.error);
    match status {
        429 => DeliveryError::Transient {
            reason: format!("HTTP 429 {}: rate limited by the homeserver ({detail})", e.errcode),
            retry_after: e.retry_after_ms.map(Duration::from_millis).or(header_wait),
        },
        401 | 403 => DeliveryError::permanent(format!(
            "HTTP {status} {}: {} ({detail})",
            e.errcode,
            advice(&e.errcode)
        )),
        _ => classify_status(status, header_wait, body),
    }
}

/// What a successful send answers.
#[derive(Debug, Deserialize)]
struct SendAnswer {
    event_id: String,
}

impl Matrix {
    /// The send URL: the room ID and the transaction ID are path segments, percent-encoded (`!` and `:` of a room
    /// ID are kept, as the URL standard allows them in a segment; `/`, `?`, `#` and spaces are encoded).
    fn send_url(&self, txn: &str) -> Result<reqwest::Url, DeliveryError> {
        let mut url = reqwest::Url::parse(&self.homeserver)
            .map_err(|e| DeliveryError::permanent(format!("matrix: invalid homeserver ({e})")))?;
        url.path_segments_mut()
            .map_err(|()| DeliveryError::permanent("matrix: the homeserver URL cannot have a path"))?
            .pop_if_empty()
            .extend(["_matrix", "client", "v3", "rooms", self.room_id.trim()])
            .extend(["send", "m.room.message", txn]);
        Ok(url)
    }

    /// Sends one `m.room.message` with `content` and answers its event ID. `what` names the step in failures.
    pub(super) async fn send(&self, what: &str, txn: &str, content: &Value) -> Result<String, DeliveryError> {
        let prefix = format!("matrix {what}");
        let request = self
            .http
            .client()
            .put(self.send_url(txn)?)
            .bearer_auth(self.access_token.expose_secret())
            .header(CONTENT_TYPE, JSON_UTF8)
            .body(serde_json::to_vec(content).unwrap_or_default());
        let now = self.http.now();
        let classify = |status: u16, headers: &HeaderMap, body: &str| classify(status, headers, body, now);
        let text = self
            .http
            .call(request, &self.redactor, classify)
            .await
            .map_err(|e| self.redactor.apply(DeliveryError::prefixed(&prefix, e.error)))?;
        let answer: SendAnswer =
            parse_json(&text).map_err(|e| self.redactor.apply(DeliveryError::prefixed(&prefix, e)))?;
        Ok(answer.event_id)
    }
}
