//! The e-mail receiver: one multipart (plain text + HTML) message per notification, sent over SMTP through one
//! pooled lettre transport per receiver (plain, STARTTLS or implicit TLS; optional AUTH and an extra trusted CA).
//! Messages of one thread are chained with `In-Reply-To`/`References` so mail clients show them as a conversation.
//! A notification to one person (`recipient`) goes to their address alone instead of `to` and `cc`.
//!
//! The connection (scheme, TLS, AUTH, CA) is set up in `transport`.

mod config;
#[cfg(test)]
mod test_server;
#[cfg(test)]
mod tests;
mod transport;

use std::sync::Mutex;
use std::time::Duration;

use lettre::message::{Mailbox, MultiPart, header};
use lettre::transport::smtp::AsyncSmtpTransportBuilder;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use secrecy::ExposeSecret;

use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::clock::SharedClock;
use crate::domain::{Action, Notification};
use crate::receivers::render;
pub use config::{Config, SmtpSettings};
use transport::transport_builder;

/// How a template's values are written in the plain-text part: one line each.
pub const TEMPLATE_ESCAPE: render::TemplateEscape = render::escape::one_line;

/// The most a whole message may weigh once encoded: Gmail clips a message beyond about 102 KB ("[Message clipped]"),
/// hiding its end, where the cut's count and link are.
pub const MAX_MESSAGE_BYTES: usize = 100_000;

/// The first budgets of the two parts (HTML bytes, text characters) for a long message: a digest, or a group of many
/// Applications. Halved until the encoded message fits in [`MAX_MESSAGE_BYTES`].
const FIRST_BUDGETS: (usize, usize) = (60_000, 24_000);

type Transport = AsyncSmtpTransport<Tokio1Executor>;

pub struct Email {
    from: Mailbox,
    to: Vec<Mailbox>,
    cc: Vec<Mailbox>,
    template: Option<String>,
    /// Everything needed to connect, checked when the receiver is built.
    builder: AsyncSmtpTransportBuilder,
    /// The pooled transport, built on first use: lettre's pool spawns its cleanup task on the Tokio runtime,
    /// which may not be running yet when receivers are built from settings. Dropped after a timeout, so a
    /// connection abandoned mid-transaction is never reused.
    transport: Mutex<Option<Transport>>,
    /// Bound on one whole send: lettre only bounds the TCP connect, not a server that stops answering.
    timeout: Duration,
    /// Removes the password from every error text, in case a server echoes it back.
    redactor: Redactor,
    /// Dates the messages (lettre would read the machine's clock).
    clock: SharedClock,
}

impl Email {
    pub fn new(
        settings: Config,
        smtp: Option<SmtpSettings>,
        template: Option<String>,
        clock: SharedClock,
    ) -> Result<Self, String> {
        let smtp = smtp.ok_or("an email receiver needs the `smtp` section (url, from)")?;
        let from: Mailbox = smtp
            .from
            .parse()
            .map_err(|e| format!("smtp.from {:?} is not an e-mail address: {e}", smtp.from))?;
        let parse_all = |field: &str, list: &[String]| -> Result<Vec<Mailbox>, String> {
            list.iter()
                .map(|a| {
                    a.parse::<Mailbox>()
                        .map_err(|e| format!("email.{field}: {a:?} is not an e-mail address: {e}"))
                })
                .collect()
        };
        let to = parse_all("to", &settings.to)?;
        let cc = parse_all("cc", &settings.cc)?;
        if to.is_empty() {
            return Err("email.to needs at least one address".into());
        }
        let builder = transport_builder(&smtp)?;
        Ok(Self {
            from,
            to,
            cc,
            template,
            builder,
            transport: Mutex::new(None),
            timeout: smtp.timeout,
            // The password, and the base64 forms AUTH PLAIN and AUTH LOGIN send it in, should a server echo them.
            redactor: match (&smtp.username, &smtp.password) {
                (Some(user), Some(p)) => Redactor::default().smtp_auth(user, p.expose_secret()),
                (None, Some(p)) => Redactor::default().secret(p.expose_secret()),
                _ => Redactor::default(),
            },
            clock,
        })
    }

    fn transport(&self) -> Transport {
        let mut slot = self.transport.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert_with(|| self.builder.clone().build()).clone()
    }

    fn forget_transport(&self) {
        *self.transport.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub(crate) fn subject(n: &Notification) -> String {
        let word = render::status_word(n);
        let tag = format!("[{word}]");
        let title = render::escape::one_line(&n.title);
        // The test notification's title already says "[TEST]"; don't say it twice.
        if title.starts_with(&tag) {
            title
        } else {
            format!("{tag} {title}")
        }
    }

    /// A fresh Message-ID in the sender's domain, so replies thread under it.
    fn new_message_id(&self) -> String {
        let domain = self.from.email.domain();
        format!("<herald.{}@{domain}>", uuid::Uuid::new_v4().simple())
    }

    /// The message, within [`MAX_MESSAGE_BYTES`] once encoded: a long list is cut, with a count and the status page,
    /// at budgets halved until it fits (a short message is never cut: its first budgets are far above it).
    fn message(&self, n: &Notification, message_id: &str, parent: Option<&str>) -> Result<Message, DeliveryError> {
        let custom = render::custom_text(self.template.as_deref(), n, TEMPLATE_ESCAPE)?;
        let (mut html_budget, mut text_budget) = FIRST_BUDGETS;
        loop {
            let text = custom.clone().unwrap_or_else(|| render::text_within(n, text_budget));
            let message = self.build(n, message_id, parent, text, render::html_within(n, html_budget))?;
            if message.formatted().len() <= MAX_MESSAGE_BYTES || html_budget < 2_000 {
                return Ok(message);
            }
            (html_budget, text_budget) = (html_budget / 2, text_budget / 2);
        }
    }

    fn build(
        &self,
        n: &Notification,
        message_id: &str,
        parent: Option<&str>,
        text: String,
        html: String,
    ) -> Result<Message, DeliveryError> {
        let mut b = Message::builder()
            .from(self.from.clone())
            .subject(Self::subject(n))
            .message_id(Some(message_id.to_string()))
            .date(std::time::SystemTime::from(self.clock.now()))
            // Tells vacation responders and ticket systems not to answer an automated message.
            .raw_header(header::HeaderValue::new(
                header::HeaderName::new_from_ascii_str("Auto-Submitted"),
                "auto-generated".into(),
            ));
        match self.person(n)? {
            // A message to one person goes to them alone, not to the receiver's list.
            Some(person) => b = b.to(person),
            None => {
                for m in &self.to {
                    b = b.to(m.clone());
                }
                for m in &self.cc {
                    b = b.cc(m.clone());
                }
            }
        }
        if let Some(parent) = parent {
            b = b.in_reply_to(parent.to_string()).references(parent.to_string());
        }
        b.multipart(MultiPart::alternative_plain_html(text, html))
            .map_err(|e| DeliveryError::permanent(format!("cannot build the message: {e}")))
    }

    /// The address of the person a notification is for (`recipient`), if it is for one.
    fn person(&self, n: &Notification) -> Result<Option<Mailbox>, DeliveryError> {
        let Some(address) = n.recipient.as_ref().and_then(|r| r.email.as_deref()) else {
            return Ok(None);
        };
        (address.parse::<Mailbox>().map(Some))
            .map_err(|e| DeliveryError::permanent(format!("{address:?} is not an e-mail address: {e}")))
    }

    /// SMTP reply codes decide: 4xx may pass later, 5xx (bad recipient, failed AUTH) will not. Without a reply,
    /// connection trouble and timeouts are worth retrying; a client-side refusal (no common AUTH mechanism,
    /// no STARTTLS offered) needs a configuration change.
    fn classify(&self, e: lettre::transport::smtp::Error) -> DeliveryError {
        let reason = self.redactor.scrub(&e.to_string());
        if e.is_permanent() {
            DeliveryError::permanent(format!("SMTP server refused the message: {reason}"))
        } else if e.is_transient() {
            DeliveryError::transient(format!("SMTP server deferred the message: {reason}"))
        } else if e.is_timeout() {
            DeliveryError::transient(format!("SMTP timed out: {reason}"))
        } else if e.is_client() {
            DeliveryError::permanent(format!("SMTP client: {reason}"))
        } else {
            DeliveryError::transient(format!("SMTP: {reason}"))
        }
    }
}

#[async_trait::async_trait]
impl Receiver for Email {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        // A new firing starts a new conversation; updates and the resolve reply to the first message.
        let parent = match n.action {
            Action::Update | Action::Resolve | Action::Acknowledge => memo
                .and_then(|m| m.get("message_id"))
                .and_then(|v| v.as_str())
                .map(str::to_string),
            Action::Open | Action::Test | Action::Digest => None,
        };
        let message_id = self.new_message_id();
        let message = self.message(n, &message_id, parent.as_deref())?;
        let recipients = message.envelope().to().len();
        match tokio::time::timeout(self.timeout, self.transport().send(message)).await {
            Ok(sent) => sent.map_err(|e| self.classify(e))?,
            Err(_) => {
                self.forget_transport();
                return Err(DeliveryError::transient(format!(
                    "SMTP server did not answer within {}",
                    humantime::format_duration(self.timeout)
                )));
            }
        };
        let memo = match (n.action, &parent) {
            (Action::Test | Action::Digest, _) | (_, Some(_)) => None,
            (_, None) => Some(serde_json::json!({ "message_id": message_id })),
        };
        Ok(Delivered {
            memo,
            detail: format!("sent {message_id} to {recipients} recipient(s)"),
        })
    }
}
