//! `argocd`: the Argo CD UI link and the optional read-only API access.

use secrecy::SecretString;
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArgoCdSettings {
    /// Base URL of the Argo CD UI, for links when the body carries no `context.argocdUrl`.
    pub url: Option<String>,
    /// Optional API access to confirm a condition in the cluster before a timed rule fires.
    pub api: Option<ArgoCdApiSettings>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgoCdApiSettings {
    pub url: String,
    pub token: SecretString,
    #[serde(default = "default_api_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// How long a rule may wait for a reachable API before it fires unconfirmed.
    #[serde(default = "default_confirm_wait", with = "humantime_serde")]
    pub confirm_wait: Duration,
}

fn default_api_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_confirm_wait() -> Duration {
    Duration::from_secs(120)
}
