//! The settings block of the chat receivers that need nothing but an incoming webhook (Microsoft Teams, Google
//! Chat, Mattermost): `{webhook_url}`, a secret (the URL carries the token), checked as a URL when the
//! configuration loads. One block type for all three, told apart by the receiver it builds: each integration's
//! `Config` is `Config<ItsReceiver>`, so the registry still has one variant, and one key, per integration.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::Value;

use super::http::Http;
use super::redact::Redactor;
use super::{Capabilities, DeliveryError, Integration, Receiver, Sections, Shared};
use crate::configuration::{ConfigError, ReceiverSettings};

/// `{webhook_url}` for the receiver `R`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, bound = "")]
pub struct Config<R> {
    pub webhook_url: SecretString,
    #[serde(skip)]
    receiver: PhantomData<fn() -> R>,
}

impl<R> Config<R> {
    pub fn new(webhook_url: impl Into<SecretString>) -> Self {
        Self {
            webhook_url: webhook_url.into(),
            receiver: PhantomData,
        }
    }

    /// What the receiver keeps of the block, with the client it sends through.
    pub fn hook(self, http: Http) -> Hook {
        let redactor = Redactor::default().url(self.webhook_url.expose_secret());
        Hook {
            url: self.webhook_url,
            http,
            redactor,
        }
    }
}

/// An incoming webhook as a receiver holds it: its URL, the client, and a redactor that keeps the URL (it is the
/// credential) out of every error.
pub struct Hook {
    pub url: SecretString,
    pub http: Http,
    pub redactor: Redactor,
}

impl Hook {
    /// POSTs `body` as JSON to the webhook; `who` names the receiver in errors. Answers the response body.
    pub async fn post(&self, body: &Value, who: &str) -> Result<String, DeliveryError> {
        self.http
            .post_json(self.url.expose_secret(), body, &self.redactor, who)
            .await
    }
}

/// A receiver made from its incoming webhook's block (and the receiver's `template`, where it takes one).
pub trait FromBlock: Receiver + Sized + 'static {
    fn from_block(settings: Config<Self>, http: Http, template: Option<String>) -> Self;
}

impl<R: FromBlock> Integration for Config<R> {
    /// One message per group, into a channel.
    fn capabilities(&self) -> Capabilities {
        Capabilities::MESSAGES
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        crate::configuration::check_secret_url(errors, &format!("{path}.webhook_url"), &self.webhook_url);
    }

    fn build(&self, r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(R::from_block(
            self.clone(),
            shared.http.clone(),
            r.template.clone(),
        )))
    }
}

// By hand: derived, they would ask the receiver type to be `Clone` and `Debug` too.
impl<R> Clone for Config<R> {
    fn clone(&self) -> Self {
        Self::new(self.webhook_url.clone())
    }
}

impl<R> fmt::Debug for Config<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("webhook_url", &self.webhook_url)
            .finish()
    }
}
