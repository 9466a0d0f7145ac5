//! The Matrix receiver: one `m.room.message` per group in one room, through the client-server API with a user's
//! access token. The first message of a thread and the latest one are remembered (their event IDs are the memo);
//! updates are posted in its Matrix thread (`m.thread`, with the reply fallback for clients without threads,
//! replying to the thread's latest message as the specification asks), and a resolve edits the first message
//! (`m.replace`) to show the resolution. Without a memo (the first message was never stored) a new message is
//! posted instead. Text is plain `body` plus HTML `formatted_body`, both from the shared renderings, where every
//! field from Argo CD is escaped.
//!
//! The API call, the transaction IDs that make retries idempotent, and the error classification are in `client`.

mod client;
mod config;
mod html;
#[cfg(test)]
mod tests;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::http::Http;
use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::domain::{Action, Body, Notification};
use crate::receivers::render;
use crate::receivers::render::escape::break_mentions;
use crate::receivers::render::{status_emoji, status_word, truncate};
pub use config::Config;

/// A whole event is limited to 65,536 bytes: the plain text stays well below, and an HTML rendering that would
/// not fit beside it is left out (clients show the plain text).
const MAX_BODY_CHARS: usize = 16_000;
const MAX_FORMATTED_BYTES: usize = 40_000;

/// What Herald remembers per thread: the first message's event ID, and the latest message's in the thread (absent
/// until the first reply, and in memos stored before it was kept: the first message is then the latest known).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct MatrixMemo {
    event_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    latest: Option<String>,
}

pub struct Matrix {
    homeserver: String,
    room_id: String,
    access_token: SecretString,
    http: Http,
    template: Option<String>,
    redactor: Redactor,
}

impl Matrix {
    pub fn new(settings: Config, http: Http, template: Option<String>) -> Self {
        let redactor = Redactor::default()
            .secret(settings.access_token.expose_secret())
            .url_credentials(&settings.homeserver);
        Self {
            homeserver: settings.homeserver,
            room_id: settings.room_id,
            access_token: settings.access_token,
            http,
            template,
            redactor,
        }
    }
}

/// How a template's values are written: one line each (the template's text is sent as plain `body`).
pub const TEMPLATE_ESCAPE: render::TemplateEscape = render::escape::one_line;

/// The message for `n`: the status and the shared plain text as `body`, the same as HTML in `formatted_body`;
/// or, with the receiver's template, its text alone. It mentions no one: `m.mentions` is empty, and every `@`
/// before a word (`@room` from a project, an operation message, an initiator) is broken by a word joiner for
/// clients that still read mentions from the text.
pub fn message(n: &Notification, templated: Option<&str>) -> Value {
    if let Some(text) = templated {
        let body = break_mentions(&truncate(text, MAX_BODY_CHARS));
        return json!({"msgtype": "m.text", "body": body, "m.mentions": {}});
    }
    let (emoji, word) = (status_emoji(n), status_word(n));
    let (text, html) = match &n.body {
        Body::Digest(d) => (
            crate::receivers::render::digest::text_within(d, MAX_BODY_CHARS - 200),
            crate::receivers::render::digest::html(d, MAX_FORMATTED_BYTES - 2000),
        ),
        _ => (
            render::text_within(n, MAX_BODY_CHARS - 200),
            render::html_within(n, MAX_FORMATTED_BYTES - 2000),
        ),
    };
    let body = format!("{emoji} {word}\n{text}");
    let body = break_mentions(&truncate(&body, MAX_BODY_CHARS));
    let mut m = json!({"msgtype": "m.text", "body": body, "m.mentions": {}});
    let html = format!("<p>{emoji} <b>{word}</b></p>{html}");
    let html = html::matrix_html(&html);
    if html.len() <= MAX_FORMATTED_BYTES {
        m["format"] = json!("org.matrix.custom.html");
        m["formatted_body"] = json!(html);
    }
    m
}

/// `message` as a reply in the thread of `first`, with the reply fallback clients without threads show: a reply to
/// `latest`, the thread's latest message.
fn thread_reply(first: &str, latest: &str, mut message: Value) -> Value {
    message["m.relates_to"] = json!({
        "rel_type": "m.thread",
        "event_id": first,
        "is_falling_back": true,
        "m.in_reply_to": {"event_id": latest},
    });
    message
}

/// An edit of `first` whose new content is `message`. The edit's own text, shown by clients that do not apply
/// edits, is the new text marked with `* `, as the specification suggests.
fn edit(first: &str, message: Value) -> Value {
    let mut fallback = message.clone();
    for key in ["body", "formatted_body"] {
        if let Some(text) = message.get(key).and_then(Value::as_str) {
            fallback[key] = json!(format!("* {text}"));
        }
    }
    fallback["m.new_content"] = message;
    fallback["m.relates_to"] = json!({"rel_type": "m.replace", "event_id": first});
    fallback
}

#[async_trait::async_trait]
impl Receiver for Matrix {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let templated = render::custom_text(self.template.as_deref(), n, TEMPLATE_ESCAPE)?;
        let message = message(n, templated.as_deref());
        let thread = memo.and_then(|m| serde_json::from_value::<MatrixMemo>(m.clone()).ok());
        match (n.action, thread) {
            (Action::Update, Some(thread)) => {
                let first = thread.event_id;
                let latest = thread.latest.as_deref().unwrap_or(&first);
                let reply = thread_reply(&first, latest, message);
                let id = self.send("thread reply", &client::txn_id(n, "reply"), &reply).await?;
                Ok(Delivered {
                    memo: serde_json::to_value(MatrixMemo {
                        event_id: first.clone(),
                        latest: Some(id.clone()),
                    })
                    .ok(),
                    detail: format!("replied {id} in the thread of {first}"),
                })
            }
            (Action::Resolve, Some(MatrixMemo { event_id: first, .. })) => {
                let id = self
                    .send("edit", &client::txn_id(n, "edit"), &edit(&first, message))
                    .await?;
                Ok(Delivered {
                    memo: None,
                    detail: format!("edited {first} ({id}) to show the resolve"),
                })
            }
            // An open starts a new thread; an update or resolve whose first message is unknown posts anew.
            _ => {
                let id = self.send("post", &client::txn_id(n, "post"), &message).await?;
                Ok(Delivered {
                    memo: serde_json::to_value(MatrixMemo {
                        event_id: id.clone(),
                        latest: None,
                    })
                    .ok(),
                    detail: format!("posted {id}"),
                })
            }
        }
    }
}
