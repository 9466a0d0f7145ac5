//! The Telegram receiver: a bot posts each thread's first message in a chat (`sendMessage`, Telegram's HTML) and
//! keeps its `{chat_id, message_id}` as the thread's memo, the way the Slack bot keeps its `ts`: updates are sent
//! as replies to it, and an acknowledgement or a resolve edits it in place (`editMessageText`). An edit Telegram
//! finds unchanged ("message is not modified") is done; a message it cannot find (deleted) is posted anew. The
//! rendering is in `text`, the Bot API calls and their errors in `api`.

mod api;
mod config;
#[cfg(test)]
mod tests;
mod text;

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::http::Http;
use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::domain::{Action, Notification};
use crate::receivers::render;
use api::ApiError;
pub use config::{ChatId, Config};
pub use text::{MAX_TEXT, templated, text};

pub struct Telegram {
    bot_token: SecretString,
    chat_id: Value,
    api_url: String,
    message_thread_id: Option<i64>,
    http: Http,
    template: Option<String>,
    redactor: Redactor,
}

impl Telegram {
    pub fn new(settings: Config, http: Http, template: Option<String>) -> Self {
        let token = settings.bot_token.expose_secret().trim().to_string();
        Self {
            redactor: Redactor::default().secret(&token),
            bot_token: SecretString::from(token),
            chat_id: settings.chat_id.to_json(),
            api_url: settings.api_url.trim_end_matches('/').to_string(),
            message_thread_id: settings.message_thread_id,
            http,
            template,
        }
    }
}

/// The first message of a thread, as Telegram named it.
#[derive(Debug, Clone, PartialEq)]
struct Posted {
    chat_id: Value,
    message_id: i64,
}

impl Posted {
    fn from_memo(memo: Option<&Memo>) -> Option<Self> {
        let m = memo?;
        Some(Self {
            chat_id: m.get("chat_id").filter(|c| c.is_i64() || c.is_string())?.clone(),
            message_id: m.get("message_id")?.as_i64()?,
        })
    }

    fn to_memo(&self) -> Memo {
        json!({"chat_id": self.chat_id, "message_id": self.message_id})
    }
}

/// An edit that changes nothing: the message already says it (a retry of an edit that went through).
fn not_modified(description: &str) -> bool {
    description.contains("message is not modified")
}

/// An edit of a message that is gone or can no longer be edited.
fn cannot_edit(description: &str) -> bool {
    description.contains("message to edit not found") || description.contains("message can't be edited")
}

/// The escape the receiver's `template` renders its values with (its delivery and `send-test --render` alike).
pub const TEMPLATE_ESCAPE: render::TemplateEscape = render::escape::telegram_keep_links;

impl Telegram {
    /// What is sent for `n`: the receiver's template (its values escaped), or the rendering.
    fn message(&self, n: &Notification) -> Result<String, DeliveryError> {
        let custom = render::custom_text(self.template.as_deref(), n, TEMPLATE_ESCAPE)
            .map_err(|e| DeliveryError::prefixed("telegram", e))?;
        Ok(match custom {
            Some(t) => text::templated(&t),
            None => text(n),
        })
    }

    /// `sendMessage` into the configured chat (and topic), as a reply to `reply_to` when given (sent even if that
    /// message is gone); answers the new message.
    async fn send(&self, html: &str, reply_to: Option<i64>) -> Result<Posted, DeliveryError> {
        let mut body = json!({
            "chat_id": self.chat_id,
            "text": html,
            "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": true},
        });
        if let Some(topic) = self.message_thread_id {
            body["message_thread_id"] = json!(topic);
        }
        if let Some(id) = reply_to {
            body["reply_parameters"] = json!({"message_id": id, "allow_sending_without_reply": true});
        }
        let sent = self.call("sendMessage", &body).await.map_err(|e| e.error)?;
        let message_id = sent
            .get("message_id")
            .and_then(Value::as_i64)
            .ok_or_else(|| DeliveryError::permanent("telegram sendMessage: ok without a message_id"))?;
        let chat_id = sent
            .pointer("/chat/id")
            .cloned()
            .unwrap_or_else(|| self.chat_id.clone());
        Ok(Posted { chat_id, message_id })
    }

    /// `editMessageText` of `first` with `html`.
    async fn edit(&self, first: &Posted, html: &str) -> Result<(), ApiError> {
        let body = json!({
            "chat_id": first.chat_id,
            "message_id": first.message_id,
            "text": html,
            "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": true},
        });
        self.call("editMessageText", &body).await.map(|_| ())
    }
}

#[async_trait::async_trait]
impl Receiver for Telegram {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let html = self.message(n)?;
        let first = Posted::from_memo(memo);
        let new_thread = |posted: Posted, detail: String| Delivered {
            memo: Some(posted.to_memo()),
            detail,
        };
        match (n.action, first) {
            (Action::Update, Some(first)) => {
                let reply = self.send(&html, Some(first.message_id)).await?;
                Ok(Delivered {
                    memo: Some(first.to_memo()),
                    detail: format!("replied {} to message {}", reply.message_id, first.message_id),
                })
            }
            (Action::Acknowledge | Action::Resolve, Some(first)) => {
                let what = status_of(n);
                match self.edit(&first, &html).await {
                    Ok(()) => Ok(Delivered {
                        memo: Some(first.to_memo()),
                        detail: format!("edited message {} to {what}", first.message_id),
                    }),
                    Err(e) if not_modified(&e.description) => Ok(Delivered {
                        memo: Some(first.to_memo()),
                        detail: format!("message {} already shows {what}", first.message_id),
                    }),
                    Err(e) if cannot_edit(&e.description) && n.action == Action::Resolve => {
                        let posted = self.send(&html, None).await?;
                        let detail = format!(
                            "message {} can no longer be edited: posted {}",
                            first.message_id, posted.message_id
                        );
                        Ok(new_thread(posted, detail))
                    }
                    Err(e) if cannot_edit(&e.description) => Ok(Delivered {
                        memo: Some(first.to_memo()),
                        detail: format!("message {} can no longer be edited: nothing to do", first.message_id),
                    }),
                    Err(e) => Err(e.error),
                }
            }
            (Action::Acknowledge, None) => Ok(Delivered {
                memo: None,
                detail: "no message of this thread to edit: nothing to do".into(),
            }),
            // Open, Test, Digest, or nothing to reply to: a new message that later ones reply to or edit.
            _ => {
                let posted = self.send(&html, None).await?;
                let detail = format!("posted message {}", posted.message_id);
                Ok(new_thread(posted, detail))
            }
        }
    }
}

fn status_of(n: &Notification) -> &'static str {
    match n.action {
        Action::Resolve => "resolved",
        _ => "acknowledged",
    }
}
