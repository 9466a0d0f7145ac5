//! The Slack receiver: Block Kit messages through an incoming webhook (one new message per action), or through a
//! bot token and the Web API, where the first message's `{channel, ts}` is the memo: updates reply in its thread,
//! a resolve edits it (`chat.update`) to show RESOLVED and replies in the thread. A notification to one person
//! (`recipient`) is posted to their user id instead of the channel: a direct message from the bot.
//! The Block Kit rendering is in `blocks`, the Web API calls and their `ok:false` error → retry mapping in `api`.
//! With `signing_secret` (interactivity), the bot's messages about firing incidents carry the buttons "Acknowledge"
//! and "Silence 1 h" (`blocks::buttons`); their clicks come back to `POST /v1/slack/interactions` (`api::slack`),
//! and the acknowledgement edits the message in place through the acknowledge path above.

mod api;
mod blocks;
mod config;
#[cfg(test)]
mod tests;

use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use super::http::Http;
use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::domain::{Action, Notification};
use crate::receivers::render;
use crate::receivers::render::truncate;
use api::{ApiError, MESSAGE_GONE, Posted, cannot_edit};
pub use blocks::{ACK_ACTION_ID, SILENCE_ACTION_ID};
use blocks::{MAX_TEMPLATE_TEXT, Message, blocks, fallback_text, resolved_reply};
pub use config::{Config, SlackUsers};

enum Mode {
    Webhook(SecretString),
    Bot {
        token: SecretString,
        channel: Option<String>,
    },
    /// Neither a webhook URL nor a token: configuration validation refuses this, but fail clearly if it gets here.
    Unconfigured,
}

pub struct Slack {
    mode: Mode,
    api_url: String,
    http: Http,
    template: Option<String>,
    redactor: Redactor,
    /// Messages about firing incidents carry buttons (a signing secret and a bot token are configured).
    buttons: bool,
}

impl Slack {
    /// A bot token wins over a webhook URL when both are set: only the Web API can thread and edit.
    pub fn new(settings: Config, http: Http, template: Option<String>) -> Self {
        let mut redactor = Redactor::default();
        if let Some(u) = &settings.webhook_url {
            redactor = redactor.url(u.expose_secret());
        }
        if let Some(t) = &settings.token {
            redactor = redactor.secret(t.expose_secret());
        }
        if let Some(s) = &settings.signing_secret {
            redactor = redactor.secret(s.expose_secret());
        }
        let buttons = settings.interactive();
        let mode = match (settings.token, settings.webhook_url) {
            (Some(token), _) => Mode::Bot {
                token,
                channel: settings.channel,
            },
            (None, Some(url)) => Mode::Webhook(url),
            (None, None) => Mode::Unconfigured,
        };
        Self {
            mode,
            api_url: settings.api_url.trim_end_matches('/').to_string(),
            http,
            template,
            redactor,
            buttons,
        }
    }
}

/// How a template's values are written: Slack's mrkdwn.
pub const TEMPLATE_ESCAPE: render::TemplateEscape = render::escape::mrkdwn_keep_links;

/// What the incoming webhook is sent for `n` (no template): the fallback text and the blocks.
pub(crate) fn preview(n: &Notification) -> serde_json::Value {
    preview_templated(n, None)
}

/// What the incoming webhook is sent for `n`, with the text the receiver's template rendered when it has one.
pub(crate) fn preview_templated(n: &Notification, templated: Option<&str>) -> serde_json::Value {
    let m = message_of(n, templated, false);
    json!({"text": m.text, "blocks": m.blocks})
}

/// The message for `n`: the template's text in the blocks when there is one, else Herald's own.
fn message_of(n: &Notification, templated: Option<&str>, buttons: bool) -> Message {
    match templated {
        Some(text) => Message {
            blocks: blocks(n, Some(text), buttons),
            text: truncate(text, MAX_TEMPLATE_TEXT),
        },
        None => Message {
            text: fallback_text(n),
            blocks: blocks(n, None, buttons),
        },
    }
}

impl Slack {
    fn message(&self, n: &Notification) -> Result<Message, DeliveryError> {
        let custom = render::custom_text(self.template.as_deref(), n, TEMPLATE_ESCAPE)
            .map_err(|e| DeliveryError::prefixed("slack", e))?;
        Ok(message_of(n, custom.as_deref(), self.buttons))
    }

    async fn post_webhook(&self, url: &SecretString, msg: &Message) -> Result<Delivered, DeliveryError> {
        let body = json!({"text": msg.text, "blocks": msg.blocks});
        self.http
            .post_json(url.expose_secret(), &body, &self.redactor, "slack webhook")
            .await?;
        Ok(Delivered {
            memo: None,
            detail: "posted to the incoming webhook".into(),
        })
    }

    async fn deliver_bot(
        &self,
        token: &SecretString,
        channel: &str,
        n: &Notification,
        first: Option<Posted>,
    ) -> Result<Delivered, DeliveryError> {
        let msg = self.message(n)?;
        let new_thread = |posted: Posted| Delivered {
            detail: format!("posted ts {} in {}", posted.ts, posted.channel),
            memo: Some(posted.to_memo()),
        };
        match (n.action, first) {
            (Action::Update, Some(first)) => {
                let reply = self.post_message(token, &first.channel, Some(&first.ts), &msg).await?;
                Ok(Delivered {
                    detail: format!("replied ts {} in thread {}", reply.ts, first.ts),
                    memo: Some(first.to_memo()),
                })
            }
            (Action::Acknowledge, Some(first)) => {
                // Edited in place: the message people saw now says who took it.
                let edit = json!({"channel": first.channel, "ts": first.ts, "text": msg.text, "blocks": msg.blocks});
                match self.call(token, "chat.update", &edit).await {
                    Ok(_) => Ok(Delivered {
                        detail: format!("edited ts {} to acknowledged", first.ts),
                        memo: Some(first.to_memo()),
                    }),
                    Err(ApiError { code: Some(code), .. }) if code == MESSAGE_GONE || cannot_edit(&code) => {
                        Ok(Delivered {
                            detail: format!("the message ts {} can no longer be edited: nothing to do", first.ts),
                            memo: Some(first.to_memo()),
                        })
                    }
                    Err(e) => Err(e.error),
                }
            }
            (Action::Acknowledge, None) => Ok(Delivered {
                memo: None,
                detail: "no message of this thread to edit: nothing to do".into(),
            }),
            (Action::Resolve, Some(first)) => {
                let edit = json!({
                    "channel": first.channel,
                    "ts": first.ts,
                    "text": msg.text,
                    "blocks": msg.blocks,
                });
                let edited = match self.call(token, "chat.update", &edit).await {
                    Ok(_) => true,
                    Err(ApiError { code: Some(code), .. }) if code == MESSAGE_GONE => {
                        let posted = self.post_message(token, channel, None, &msg).await?;
                        return Ok(new_thread(posted));
                    }
                    Err(ApiError { code: Some(code), .. }) if cannot_edit(&code) => false,
                    Err(e) => return Err(e.error),
                };
                self.post_message(token, &first.channel, Some(&first.ts), &resolved_reply(n))
                    .await?;
                Ok(Delivered {
                    detail: if edited {
                        format!("edited ts {} to resolved and replied in its thread", first.ts)
                    } else {
                        format!("replied in thread {} (the message can no longer be edited)", first.ts)
                    },
                    memo: Some(first.to_memo()),
                })
            }
            // Open, Test, or nothing to thread under: a new top-level message that later ones thread under.
            _ => Ok(new_thread(self.post_message(token, channel, None, &msg).await?)),
        }
    }
}

#[async_trait::async_trait]
impl Receiver for Slack {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        match &self.mode {
            Mode::Webhook(_) if n.recipient.is_some() => Err(DeliveryError::permanent(
                "slack: an incoming webhook cannot send a direct message (people_receivers.slack needs a bot token)",
            )),
            Mode::Webhook(url) => self.post_webhook(url, &self.message(n)?).await,
            Mode::Bot { token, channel } => {
                // A message to one person goes to their user id: Slack makes that a direct message from the bot.
                let person = n.recipient.as_ref().and_then(|r| r.slack.as_deref());
                let channel = person
                    .or(channel.as_deref())
                    .ok_or_else(|| DeliveryError::permanent("slack: a bot token needs a `channel`"))?;
                self.deliver_bot(token, channel, n, Posted::from_memo(memo)).await
            }
            Mode::Unconfigured => Err(DeliveryError::permanent(
                "slack: needs `webhook_url`, or `token` and `channel`",
            )),
        }
    }
}
