//! The Web API side of a bot token: `chat.postMessage` and `chat.update` calls, where HTTP 200 with `ok:false` is a
//! failure too, classified by its `error` code; and the first message of a thread (`{channel, ts}`), kept as memo.

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::Slack;
use super::blocks::Message;
use crate::receivers::http::{JSON_UTF8, transport_error};
use crate::receivers::render::truncate;
use crate::receivers::{DeliveryError, Memo};

/// The first message of a thread, as the Web API named it (`channel` is the channel ID `chat.update` needs).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Posted {
    pub(super) channel: String,
    pub(super) ts: String,
}

impl Posted {
    pub(super) fn from_memo(memo: Option<&Memo>) -> Option<Self> {
        let m = memo?;
        Some(Self {
            channel: m.get("channel")?.as_str()?.to_string(),
            ts: m.get("ts")?.as_str()?.to_string(),
        })
    }
    pub(super) fn to_memo(&self) -> Memo {
        json!({"channel": self.channel, "ts": self.ts})
    }
}

/// Web API `error` codes worth retrying; every other code (bad auth, unknown channel, invalid blocks, and codes
/// this table does not know) is permanent.
pub(super) fn api_error_is_transient(code: &str) -> bool {
    matches!(
        code,
        "ratelimited" | "rate_limited" | "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout"
    )
}

/// What `chat.update` answers when the first message cannot be edited any more: reply in the thread anyway.
pub(super) fn cannot_edit(code: &str) -> bool {
    matches!(code, "cant_update_message" | "edit_window_closed")
}

/// Answered by `chat.update` when the first message is gone: start a new thread instead.
pub(super) const MESSAGE_GONE: &str = "message_not_found";

/// A Web API failure with its `error` code kept, so callers can react to particular codes.
pub(super) struct ApiError {
    pub(super) code: Option<String>,
    pub(super) error: DeliveryError,
}

impl From<DeliveryError> for ApiError {
    fn from(error: DeliveryError) -> Self {
        Self { code: None, error }
    }
}

impl Slack {
    /// Calls a Web API method. HTTP errors go through the shared status table; HTTP 200 with `ok:false` is a
    /// failure classified by its `error` code.
    pub(super) async fn call(&self, token: &SecretString, method: &str, body: &Value) -> Result<Value, ApiError> {
        let resp = self
            .http
            .client()
            .post(format!("{}/{method}", self.api_url))
            .bearer_auth(token.expose_secret())
            .header(reqwest::header::CONTENT_TYPE, JSON_UTF8)
            .body(serde_json::to_vec(body).unwrap_or_default())
            .send()
            .await
            .map_err(|e| self.redactor.apply(transport_error(e)))?;
        if !resp.status().is_success() {
            let e = self.http.error_from_response(resp, &self.redactor).await;
            return Err(self
                .redactor
                .apply(DeliveryError::prefixed(&format!("slack {method}"), e))
                .into());
        }
        let retry_after = self.http.retry_after(resp.headers());
        let text = resp.text().await.unwrap_or_default();
        let value: Value = serde_json::from_str(&text).map_err(|_| {
            // Something between us and Slack answered; the message may not have been posted.
            DeliveryError::transient(format!(
                "slack {method}: the answer is not JSON: {}",
                truncate(&self.redactor.scrub(&text), 200)
            ))
        })?;
        if value.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(value);
        }
        let code = value
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown_error")
            .to_string();
        let mut reason = format!("slack {method}: {code}");
        // invalid_blocks and friends explain themselves in response_metadata.messages.
        if let Some(details) = value.pointer("/response_metadata/messages").and_then(Value::as_array) {
            let details: Vec<&str> = details.iter().filter_map(Value::as_str).collect();
            if !details.is_empty() {
                reason.push_str(&format!(
                    " ({})",
                    truncate(&self.redactor.scrub(&details.join("; ")), 300)
                ));
            }
        }
        let error = if api_error_is_transient(&code) {
            DeliveryError::Transient { reason, retry_after }
        } else {
            DeliveryError::permanent(reason)
        };
        Err(ApiError {
            code: Some(code),
            error: self.redactor.apply(error),
        })
    }

    pub(super) async fn post_message(
        &self,
        token: &SecretString,
        channel: &str,
        thread_ts: Option<&str>,
        msg: &Message,
    ) -> Result<Posted, DeliveryError> {
        let mut body = json!({
            "channel": channel,
            "text": msg.text,
            "blocks": msg.blocks,
            "unfurl_links": false,
            "unfurl_media": false,
        });
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        let answer = self.call(token, "chat.postMessage", &body).await.map_err(|e| e.error)?;
        let channel = answer.get("channel").and_then(Value::as_str).unwrap_or(channel);
        let ts = answer
            .get("ts")
            .and_then(Value::as_str)
            .ok_or_else(|| DeliveryError::permanent("slack chat.postMessage: ok without a message ts"))?;
        Ok(Posted {
            channel: channel.to_string(),
            ts: ts.to_string(),
        })
    }
}
