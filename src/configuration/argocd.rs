//! `argocd`: the Argo CD UI link and the optional read-only API access.

use secrecy::SecretString;
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArgoCdSettings {
    /// Base URL of the Argo CD UI, for links; wins over a body's `context.argocdUrl` (see `argocd::ui_base`).
    pub url: Option<String>,
    /// Optional read-only API access: a second source of state (periodic resync, optional watch) and the check
    /// of a condition in the cluster before a timed rule fires.
    pub api: Option<ArgoCdApiSettings>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgoCdApiSettings {
    pub url: String,
    /// A read-only account's token (or `token_file`: the path of a mounted Secret).
    pub token: SecretString,
    #[serde(default = "default_api_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// How long a rule may wait for a reachable API before it fires unconfirmed.
    #[serde(default = "default_confirm_wait", with = "humantime_serde")]
    pub confirm_wait: Duration,
    /// How often every Application is listed and run through the pipeline as if Argo CD had sent it; an
    /// Application missing from a complete listing is deleted. `0s` turns the resync off.
    #[serde(default = "default_resync_interval", with = "humantime_serde")]
    pub resync_interval: Duration,
    /// Only these Argo CD projects (all when empty): listing, watch and deletion by absence are limited to them.
    #[serde(default)]
    pub projects: Vec<String>,
    /// Follow the event stream too, so every change arrives, not only those that flip a trigger.
    #[serde(default)]
    pub watch: bool,
}

impl ArgoCdApiSettings {
    pub(super) fn validate(&self, errors: &mut Vec<super::ConfigError>) {
        super::check_url(errors, "argocd.api.url", &self.url);
        if !self.resync_interval.is_zero() && self.resync_interval < Duration::from_secs(10) {
            errors.push(super::invalid(
                "argocd.api.resync_interval",
                "must be 0s (off) or at least 10s: a listing of every Application is not cheap for Argo CD",
            ));
        }
    }
}

fn default_api_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_confirm_wait() -> Duration {
    Duration::from_secs(120)
}
fn default_resync_interval() -> Duration {
    Duration::from_secs(300)
}
