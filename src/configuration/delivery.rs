//! `outbox` and `scheduler`: how deliveries are retried and how often timers are looked for.

use serde::Deserialize;
use std::time::Duration;

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutboxSettings {
    /// A delivery still failing after this long is dead (visible at `/v1/outbox?state=dead`, retryable).
    #[serde(with = "crate::configuration::duration")]
    pub max_age: Duration,
    #[serde(with = "crate::configuration::duration")]
    pub lease: Duration,
    #[serde(with = "crate::configuration::duration")]
    pub initial_backoff: Duration,
    #[serde(with = "crate::configuration::duration")]
    pub max_backoff: Duration,
    #[serde(with = "crate::configuration::duration")]
    pub poll_interval: Duration,
    /// How many deliveries run at once.
    pub concurrency: usize,
    #[serde(with = "crate::configuration::duration")]
    pub http_timeout: Duration,
    /// Delivered rows are kept this long (for `/v1/outbox` and the tickets' history), then removed.
    #[serde(with = "crate::configuration::duration")]
    pub retention: Duration,
}

impl Default for OutboxSettings {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(24 * 3600),
            lease: Duration::from_secs(60),
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            poll_interval: Duration::from_millis(200),
            concurrency: 8,
            http_timeout: Duration::from_secs(15),
            retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSettings {
    /// How often due timers (rule deadlines, group flushes, escalations) are looked for.
    #[serde(with = "crate::configuration::duration")]
    pub tick: Duration,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self {
            tick: Duration::from_millis(250),
        }
    }
}

impl OutboxSettings {
    pub(super) fn validate(&self, errors: &mut Vec<ConfigError>) {
        if self.concurrency == 0 {
            errors.push(invalid("outbox.concurrency", "must be at least 1"));
        }
    }
}

impl SchedulerSettings {
    pub(super) fn validate(&self, errors: &mut Vec<ConfigError>) {
        if self.tick.is_zero() {
            errors.push(invalid("scheduler.tick", "must be greater than 0"));
        }
    }
}
