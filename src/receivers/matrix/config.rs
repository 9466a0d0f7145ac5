//! `matrix: {homeserver, room_id, access_token}`: the homeserver's client-server API, the room Herald posts in, and
//! the access token of the (bot) user that has joined it.

use std::sync::Arc;

use secrecy::SecretString;
use serde::Deserialize;

use super::Matrix;
use crate::configuration::{ConfigError, ReceiverSettings, check_url, invalid};
use crate::receivers::{Capabilities, Integration, Receiver, Sections, Shared};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The homeserver's base URL (`https://matrix.example.org`), where `/_matrix/client/v3/…` is found.
    pub homeserver: String,
    /// The room's ID (`!abc:example.org`, or `!abc` since room version 12), not an alias: sending needs the ID.
    pub room_id: String,
    /// The access token of a user who has joined the room (`access_token_file` reads it from a file).
    pub access_token: SecretString,
}

impl Integration for Config {
    /// The first message is edited to show the resolve; Synapse rate-limits senders (a burst of about ten, then a
    /// few per second).
    fn capabilities(&self) -> Capabilities {
        Capabilities::EDITED_MESSAGES
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        check_url(errors, &format!("{path}.homeserver"), &self.homeserver);
        // Room version 12 dropped the `:server` part of new room IDs: only the sigil is sure.
        let id = self.room_id.trim();
        if !id.starts_with('!') || id.len() < 2 || id.contains(char::is_whitespace) {
            errors.push(invalid(
                format!("{path}.room_id"),
                format!(
                    "{:?} is not a room ID (`!opaque:server` or `!opaque`; an alias `#room:server` must be resolved to its ID)",
                    self.room_id
                ),
            ));
        }
    }

    fn build(&self, r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(Matrix::new(
            self.clone(),
            shared.http.clone(),
            r.template.clone(),
        )))
    }
}
