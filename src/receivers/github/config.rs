//! `github: {api_url, repo, token, labels}`.

use std::sync::Arc;

use secrecy::SecretString;
use serde::Deserialize;

use super::Github;
use crate::configuration::{ConfigError, ReceiverSettings, check_url, invalid};
use crate::receivers::{Capabilities, Integration, Receiver, Sections, Shared};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "default_api_url")]
    pub api_url: String,
    pub repo: String,
    pub token: SecretString,
    #[serde(default)]
    pub labels: Vec<String>,
}

fn default_api_url() -> String {
    "https://api.github.com".into()
}

impl Integration for Config {
    /// One issue per incident, closed when the incident resolves.
    fn capabilities(&self) -> Capabilities {
        Capabilities::ACKNOWLEDGED_PER_INCIDENT
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        check_url(errors, &format!("{path}.api_url"), &self.api_url);
        if self.repo.split('/').filter(|p| !p.is_empty()).count() != 2 {
            errors.push(invalid(format!("{path}.repo"), "must be `owner/name`"));
        }
    }

    fn build(&self, _r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(Github::new(self.clone(), shared.http.clone())))
    }
}
