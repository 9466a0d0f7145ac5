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
    /// A listing larger than this (bytes, as received) is refused and deletes nothing: it is read item by item, so
    /// memory does not grow with it, but one that never ends must not run forever.
    #[serde(default = "default_max_listing_bytes")]
    pub max_listing_bytes: u64,
    /// A listing that lacks more than this share of the stored Applications (and at least `min_drop_count` of them)
    /// deletes nothing at once: the drop is held back, shown and counted, and applies when the next listing agrees.
    #[serde(default = "default_max_drop_share")]
    pub max_drop_share: f64,
    #[serde(default = "default_min_drop_count")]
    pub min_drop_count: usize,
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
        if !(self.max_drop_share > 0.0 && self.max_drop_share <= 1.0) {
            errors.push(super::invalid(
                "argocd.api.max_drop_share",
                "must be more than 0 and at most 1 (the share of the stored Applications one listing may delete)",
            ));
        }
        if self.max_listing_bytes < 1024 * 1024 {
            errors.push(super::invalid(
                "argocd.api.max_listing_bytes",
                "must be at least 1 MiB (a listing of 10,000 Applications is about 100 MB)",
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
fn default_max_listing_bytes() -> u64 {
    512 * 1024 * 1024
}
fn default_max_drop_share() -> f64 {
    0.5
}
fn default_min_drop_count() -> usize {
    10
}
fn default_resync_interval() -> Duration {
    Duration::from_secs(300)
}
