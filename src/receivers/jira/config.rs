//! `jira: {url, api, project, issue_type, user, token, labels, resolve_transition, reopen_transition,
//! reopen_window}`.

use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

use super::Jira;
use crate::configuration::{ConfigError, ReceiverSettings, check_url, invalid};
use crate::receivers::{Capabilities, Integration, Receiver, Sections, Shared};

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    Cloud,
    Datacenter,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub url: String,
    #[serde(default = "default_api")]
    pub api: Api,
    pub project: String,
    #[serde(default = "default_issue_type")]
    pub issue_type: String,
    /// Cloud: the account e-mail (Basic auth with `token`). Data Center: leave empty (Bearer PAT).
    #[serde(default)]
    pub user: Option<String>,
    pub token: SecretString,
    #[serde(default)]
    pub labels: Vec<String>,
    pub resolve_transition: Option<String>,
    pub reopen_transition: Option<String>,
    #[serde(default, with = "crate::configuration::duration::option")]
    pub reopen_window: Option<Duration>,
}

fn default_api() -> Api {
    Api::Cloud
}
fn default_issue_type() -> String {
    "Task".into()
}

impl Integration for Config {
    /// One issue per incident, commented on and transitioned when the incident resolves.
    fn capabilities(&self) -> Capabilities {
        Capabilities::ACKNOWLEDGED_PER_INCIDENT
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        check_url(errors, &format!("{path}.url"), &self.url);
        if self.api == Api::Cloud && self.user.is_none() {
            errors.push(invalid(
                format!("{path}.user"),
                "Jira Cloud needs `user` (the account e-mail) with the API `token`",
            ));
        }
    }

    fn build(&self, _r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(Jira::new(self.clone(), shared.http.clone())))
    }
}
