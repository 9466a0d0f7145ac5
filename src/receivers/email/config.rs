//! `email: {to, cc}` and the `smtp` section every e-mail receiver sends through.

use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

use super::Email;
use crate::configuration::{ConfigError, ReceiverSettings, invalid};
use crate::receivers::{Capabilities, Integration, Receiver, Sections, Shared};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub to: Vec<String>,
    #[serde(default)]
    pub cc: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpSettings {
    /// `smtp://host:25`, `smtp://host:587?tls=required`, `smtps://host:465`.
    pub url: String,
    pub from: String,
    pub username: Option<String>,
    pub password: Option<SecretString>,
    /// Extra CA certificate (PEM file) to trust, for self-signed relays.
    pub ca_file: Option<String>,
    #[serde(default = "default_smtp_timeout", with = "crate::configuration::duration")]
    pub timeout: Duration,
}

fn default_smtp_timeout() -> Duration {
    Duration::from_secs(10)
}

impl Integration for Config {
    /// A mailbox is no place for "it recovered" unless asked for (`send_resolved: true`).
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reaches_person: Some(crate::domain::Contact::Email),
            ..Capabilities::MESSAGES
        }
    }

    fn validate(&self, path: &str, sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        if sections.smtp.is_none() {
            errors.push(invalid(path, "an email receiver needs the `smtp` section (url, from)"));
        }
        if self.to.is_empty() {
            errors.push(invalid(format!("{path}.to"), "needs at least one address"));
        }
        for (j, a) in self.to.iter().chain(self.cc.iter()).enumerate() {
            if a.parse::<lettre::Address>().is_err() {
                errors.push(invalid(
                    format!("{path}.to[{j}]"),
                    format!("{a:?} is not an e-mail address"),
                ));
            }
        }
    }

    fn build(&self, r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        let email = Email::new(
            self.clone(),
            shared.settings.smtp.clone(),
            r.template.clone(),
            shared.clock().clone(),
        )?;
        Ok(Arc::new(email))
    }
}
