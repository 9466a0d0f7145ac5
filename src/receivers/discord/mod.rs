//! The Discord receiver: a channel's webhook (Execute Webhook, `POST /api/webhooks/{id}/{token}?wait=true`), one
//! message of embeds per notification (`embeds`: the rendering, coloured by state, within Discord's limits), no
//! mention ever allowed, and Discord's rate limits read from its 429 (`retry_after` in the body, else
//! `X-RateLimit-Reset-After`, else `Retry-After`). A webhook cannot thread, so each action is a new message.

mod embeds;
#[cfg(test)]
mod tests;

use std::time::{Duration, SystemTime};

use reqwest::header::{CONTENT_TYPE, HeaderMap};
use secrecy::ExposeSecret;
use serde_json::Value;

use super::http::{Http, JSON_UTF8, classify_status, parse_retry_after};
use super::{Delivered, DeliveryError, Memo, Receiver, incoming_webhook};
use crate::domain::Notification;
use crate::receivers::render;
pub use embeds::{
    MAX_DESCRIPTION, MAX_EMBEDS, MAX_FIELD_NAME, MAX_FIELD_VALUE, MAX_FIELDS, MAX_TITLE, MAX_TOTAL, colour, len,
    message,
};

/// `discord: {webhook_url}`: a channel's webhook (Server Settings → Integrations → Webhooks → Copy Webhook URL);
/// its token is in the URL, which is the secret.
pub type Config = incoming_webhook::Config<Discord>;

impl incoming_webhook::FromBlock for Discord {
    fn from_block(settings: Config, http: Http, template: Option<String>) -> Self {
        Self::new(settings, http, template)
    }
}

pub struct Discord {
    hook: incoming_webhook::Hook,
    template: Option<String>,
}

impl Discord {
    pub fn new(settings: Config, http: Http, template: Option<String>) -> Self {
        Self {
            hook: settings.hook(http),
            template,
        }
    }

    /// The webhook URL with `wait=true`: Discord then answers only once the message is saved, with the message
    /// (its id is reported), and a message it did not save is an error rather than a silent 204. Other query
    /// parameters (`thread_id`, to post in a thread or a forum post) are kept.
    fn url(&self) -> Result<reqwest::Url, DeliveryError> {
        let mut u = reqwest::Url::parse(self.hook.url.expose_secret())
            .map_err(|_| DeliveryError::permanent("discord: webhook_url is not a valid URL"))?;
        let kept: Vec<(String, String)> = (u.query_pairs())
            .filter(|(k, _)| k != "wait")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        u.query_pairs_mut()
            .clear()
            .extend_pairs(kept)
            .append_pair("wait", "true");
        Ok(u)
    }
}

/// Seconds as Discord writes them (`64.57`); nothing for a value that is not a duration.
fn seconds(v: Option<&str>) -> Option<Duration> {
    Duration::try_from_secs_f64(v?.trim().parse::<f64>().ok()?).ok()
}

/// Discord's failures: a 429 waits what Discord asks (the body's `retry_after`, in seconds with a fraction, else
/// `X-RateLimit-Reset-After`, else `Retry-After`); a 401 or 404 says the webhook URL is no longer good; everything
/// else is the shared table (other 4xx permanent, 5xx transient). `body` is already scrubbed.
pub(crate) fn classify(status: u16, headers: &HeaderMap, body: &str, now: SystemTime) -> DeliveryError {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let retry_after = parse_retry_after(header("retry-after"), now);
    if status == 429 {
        let asked = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| v.get("retry_after").and_then(Value::as_f64))
            .and_then(|s| Duration::try_from_secs_f64(s).ok());
        let wait = asked
            .or_else(|| seconds(header("x-ratelimit-reset-after")))
            .or(retry_after);
        return classify_status(status, wait, body);
    }
    let advice = match status {
        401 => Some("the webhook's token is not valid: copy the webhook URL again"),
        404 => Some("the webhook does not exist (deleted?): create one and set webhook_url"),
        _ => None,
    };
    let e = classify_status(status, retry_after, body);
    match advice {
        Some(a) => e.map_reason(|r| format!("{r} ({a})")),
        None => e,
    }
}

/// The escape the receiver's `template` renders its values with (its delivery and `send-test --render` alike).
pub const TEMPLATE_ESCAPE: render::TemplateEscape = render::escape::discord_keep_links;

#[async_trait::async_trait]
impl Receiver for Discord {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let templated = render::custom_text(self.template.as_deref(), n, TEMPLATE_ESCAPE)
            .map_err(|e| DeliveryError::prefixed("discord", e))?;
        let body = message(n, templated.as_deref());
        let bytes = serde_json::to_vec(&body)
            .map_err(|e| DeliveryError::permanent(format!("discord: cannot encode the body: {e}")))?;
        let hook = &self.hook;
        let request = (hook.http.client().post(self.url()?))
            .header(CONTENT_TYPE, JSON_UTF8)
            .body(bytes);
        let now = hook.http.now();
        let classify = |status: u16, headers: &HeaderMap, body: &str| classify(status, headers, body, now);
        let answer = (hook.http.call(request, &hook.redactor, classify).await)
            .map_err(|e| hook.redactor.apply(DeliveryError::prefixed("discord", e.error)))?;
        // The message object (`wait=true`); its id says which message it was. Anything else after a 2xx still
        // means Discord took the message: retrying would post it twice.
        let id = serde_json::from_str::<Value>(&answer)
            .ok()
            .and_then(|m| m.get("id").and_then(Value::as_str).map(str::to_string));
        Ok(Delivered {
            memo: None,
            detail: match id {
                Some(id) => format!("posted message {id}"),
                None => "posted".into(),
            },
        })
    }
}
