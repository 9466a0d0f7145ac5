//! `slack: {webhook_url, token, channel, api_url, signing_secret, slack_users}`: an incoming webhook, or a bot token and the
//! channel it posts to; with the Slack app's signing secret, the bot's messages carry buttons (interactivity).

use std::sync::Arc;

use secrecy::SecretString;
use serde::Deserialize;

use super::Slack;
use crate::configuration::{ConfigError, ReceiverSettings, check_url, invalid};
use crate::receivers::{Capabilities, Integration, Receiver, Sections, Shared};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Incoming webhook (contains a secret path).
    pub webhook_url: Option<SecretString>,
    /// Bot token for `chat.postMessage` (threads updates, edits on resolve).
    pub token: Option<SecretString>,
    pub channel: Option<String>,
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// The Slack app's signing secret (or `signing_secret_file`): messages about firing incidents carry the buttons
    /// "Acknowledge" and "Silence 1 h", whose clicks Slack signs with it and posts to `/v1/slack/interactions`.
    /// Needs a bot `token` (only the bot's own message can be edited to show who acknowledged).
    pub signing_secret: Option<SecretString>,
    /// Who may click the buttons: `any` Slack user of the workspace (default), or only those `known` in `people`
    /// (`people.<name>.slack`); anyone else is answered, only to them, why nothing was done.
    #[serde(default)]
    pub slack_users: SlackUsers,
}

/// `slack.slack_users`: whose clicks on the buttons act.
// Read through a string so an error names the key: a receiver's kind is read whole, and serde's path stops there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "serde_json::Value")]
pub enum SlackUsers {
    /// Anyone in the channel (Slack shows the channel only to its members).
    #[default]
    Any,
    /// Only the Slack users `people` maps to a person.
    Known,
}

impl TryFrom<serde_json::Value> for SlackUsers {
    type Error = String;

    fn try_from(v: serde_json::Value) -> Result<Self, String> {
        match v.as_str() {
            Some("any") => Ok(SlackUsers::Any),
            Some("known") => Ok(SlackUsers::Known),
            _ => Err(format!(
                "slack_users is `any` or `known`, not {}",
                v.to_string().chars().take(64).collect::<String>()
            )),
        }
    }
}

impl Config {
    /// Whether the bot's messages carry buttons: a signing secret to check the clicks with, and a bot to post.
    pub fn interactive(&self) -> bool {
        self.signing_secret.is_some() && self.token.is_some()
    }
}

fn default_api_url() -> String {
    "https://slack.com/api".into()
}

impl Integration for Config {
    /// A bot edits the first message to show the resolve; Slack allows about one message per second per channel.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // Only a bot token can post to a user id; an incoming webhook posts to its own channel.
            reaches_person: self.token.as_ref().map(|_| crate::domain::Contact::Slack),
            // The bot keeps its message's ts and edits it in place; an incoming webhook cannot edit anything.
            acknowledgements: self.token.is_some(),
            ..Capabilities::EDITED_MESSAGES
        }
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        if self.webhook_url.is_none() && self.token.is_none() {
            errors.push(invalid(path, "needs `webhook_url` or `token` + `channel`"));
        }
        if self.token.is_some() && self.channel.is_none() {
            errors.push(invalid(format!("{path}.channel"), "a bot `token` needs a `channel`"));
        }
        check_url(errors, &format!("{path}.api_url"), &self.api_url);
        if let Some(secret) = &self.signing_secret {
            use secrecy::ExposeSecret;
            if self.token.is_none() {
                errors.push(invalid(
                    format!("{path}.signing_secret"),
                    "needs a bot `token` (and `channel`): buttons need the bot's own messages, an incoming webhook's \
                     cannot be edited",
                ));
            }
            if secret.expose_secret().trim().is_empty() {
                errors.push(invalid(
                    format!("{path}.signing_secret"),
                    "must not be empty (the Slack app's Basic Information → Signing Secret)",
                ));
            }
        }
        if self.slack_users == SlackUsers::Known && self.signing_secret.is_none() {
            errors.push(invalid(
                format!("{path}.slack_users"),
                "is about who may click the buttons, and without a `signing_secret` there are none",
            ));
        }
        if let Some(u) = &self.webhook_url {
            crate::configuration::check_secret_url(errors, &format!("{path}.webhook_url"), u);
        }
    }

    fn build(&self, r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(Slack::new(
            self.clone(),
            shared.http.clone(),
            r.template.clone(),
        )))
    }
}
