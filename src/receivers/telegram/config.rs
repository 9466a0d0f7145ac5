//! `telegram: {bot_token, chat_id, api_url, message_thread_id}`: a bot (its token from @BotFather), the chat it
//! posts in, the Bot API's base URL, and optionally the topic of a forum supergroup.

use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Telegram;
use crate::configuration::{ConfigError, ReceiverSettings, check_url, invalid};
use crate::receivers::{Capabilities, Integration, Receiver, Sections, Shared};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The bot's token (`123456789:AA…`; or `bot_token_file`). It travels in the URL's path, so it is kept out of
    /// every log line and failure.
    pub bot_token: SecretString,
    /// The chat: its numeric id (`-1001234567890` for a supergroup or channel) or `@channelusername`.
    pub chat_id: ChatId,
    /// The Bot API's base URL (a local Bot API server, or a test's).
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// The topic of a forum supergroup to post in.
    pub message_thread_id: Option<i64>,
}

fn default_api_url() -> String {
    "https://api.telegram.org".into()
}

/// A chat as the Bot API takes it: a number, or the `@username` of a public channel or supergroup.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ChatId {
    Id(i64),
    Name(String),
}

impl ChatId {
    /// The value of `chat_id` in a request: a number written as text (from the environment) is sent as the number.
    pub fn to_json(&self) -> Value {
        match self {
            ChatId::Id(id) => json!(id),
            ChatId::Name(s) => match s.trim().parse::<i64>() {
                Ok(id) => json!(id),
                Err(_) => json!(s.trim()),
            },
        }
    }

    fn is_valid(&self) -> bool {
        match self {
            ChatId::Id(_) => true,
            ChatId::Name(s) => {
                let s = s.trim();
                s.parse::<i64>().is_ok()
                    || (s.len() > 1
                        && s.starts_with('@')
                        && s[1..].chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            }
        }
    }
}

/// A token as @BotFather gives it: the bot's numeric id, a colon, then the secret part.
fn looks_like_a_token(token: &str) -> bool {
    match token.split_once(':') {
        Some((id, secret)) => {
            !id.is_empty()
                && id.chars().all(|c| c.is_ascii_digit())
                && !secret.is_empty()
                && secret
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }
        None => false,
    }
}

impl Integration for Config {
    /// The first message of a thread is edited to show the acknowledgement and the resolve; Telegram asks bots to
    /// stay near one message per second in a chat.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            acknowledgements: true,
            ..Capabilities::EDITED_MESSAGES
        }
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        if !looks_like_a_token(self.bot_token.expose_secret().trim()) {
            errors.push(invalid(
                format!("{path}.bot_token"),
                "is not a bot token (`<bot id>:<secret>`, as @BotFather gives it; value not shown, it is a secret)",
            ));
        }
        if !self.chat_id.is_valid() {
            errors.push(invalid(
                format!("{path}.chat_id"),
                "must be the chat's numeric id (`-1001234567890`) or a channel's `@username`",
            ));
        }
        check_url(errors, &format!("{path}.api_url"), &self.api_url);
        if self.message_thread_id.is_some_and(|t| t <= 0) {
            errors.push(invalid(
                format!("{path}.message_thread_id"),
                "must be a topic's id (a positive number)",
            ));
        }
    }

    fn build(&self, r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(Telegram::new(
            self.clone(),
            shared.http.clone(),
            r.template.clone(),
        )))
    }
}
