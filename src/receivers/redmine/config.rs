//! `redmine: {url, api_key, project_id, tracker_id, closed_status_id, priority_id, custom_field_id}`.

use std::sync::Arc;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::Redmine;
use crate::configuration::{ConfigError, ReceiverSettings, check_url, invalid};
use crate::receivers::{Capabilities, Integration, Receiver, Sections, Shared};

/// A project as Redmine accepts it: its numeric id or its identifier (`payments`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProjectId {
    Id(u64),
    Identifier(String),
}

impl std::fmt::Display for ProjectId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProjectId::Id(id) => write!(f, "{id}"),
            ProjectId::Identifier(s) => f.write_str(s),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The Redmine base URL (`https://redmine.example.com`, or with a sub-path).
    pub url: String,
    /// A user's API key (My account → API access key), sent as `X-Redmine-API-Key`.
    pub api_key: SecretString,
    pub project_id: ProjectId,
    /// The tracker of new issues; the project's default when not set.
    pub tracker_id: Option<u64>,
    /// The status a resolve sets (a closed one, such as Resolved or Closed).
    pub closed_status_id: u64,
    pub priority_id: Option<u64>,
    /// A custom field (a string, "used as a filter") that holds the fingerprint: finds issues by exact value
    /// rather than by the subject tag.
    pub custom_field_id: Option<u64>,
}

impl Integration for Config {
    /// One issue per incident, given notes on updates and closed when the incident resolves.
    fn capabilities(&self) -> Capabilities {
        Capabilities::ACKNOWLEDGED_PER_INCIDENT
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        check_url(errors, &format!("{path}.url"), &self.url);
        if self.project_id == ProjectId::Identifier(String::new()) {
            errors.push(invalid(
                format!("{path}.project_id"),
                "the project's id or identifier, not empty",
            ));
        }
    }

    fn build(&self, _r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(Redmine::new(self.clone(), shared.http.clone())))
    }
}
