//! `server` and `log`: where Herald listens, who may call it, and how it logs.

use secrecy::SecretString;
use serde::Deserialize;

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    pub listen: String,
    pub auth: AuthSettings,
    pub max_body_bytes: usize,
    /// JSON nesting deeper than this is refused before parsing (Application objects nest about 12 deep).
    pub max_json_depth: usize,
    pub workers: Option<usize>,
    /// A body time further ahead of Herald's clock than this is taken as now.
    #[serde(with = "humantime_serde")]
    pub max_clock_skew: std::time::Duration,
    /// The bytes of event bodies read at once, all requests together; beyond it a request waits, then gets 503.
    pub max_inflight_body_bytes: usize,
    /// An event request not received and handled within this is answered 408 (a slow body is not held forever).
    #[serde(with = "humantime_serde")]
    pub body_read_timeout: std::time::Duration,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            auth: AuthSettings::default(),
            max_body_bytes: 4 * 1024 * 1024,
            max_json_depth: 128,
            workers: None,
            max_clock_skew: std::time::Duration::from_secs(300),
            max_inflight_body_bytes: 16 * 1024 * 1024,
            body_read_timeout: std::time::Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthSettings {
    pub bearer_tokens: Vec<SecretString>,
    pub basic: Vec<BasicCredential>,
    pub allow_anonymous: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicCredential {
    pub username: String,
    pub password: SecretString,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    /// `tracing` filter, e.g. `info,herald=debug`. `RUST_LOG` wins when set.
    pub level: String,
    pub format: LogFormat,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

impl ServerSettings {
    pub(super) fn validate(&self, errors: &mut Vec<ConfigError>) {
        if self.max_inflight_body_bytes < 1024 {
            errors.push(invalid("server.max_inflight_body_bytes", "must be at least 1024"));
        }
        if self.body_read_timeout.is_zero() {
            errors.push(invalid("server.body_read_timeout", "must be greater than 0"));
        }
        if self.max_body_bytes < 1024 {
            errors.push(invalid("server.max_body_bytes", "must be at least 1024"));
        }
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            errors.push(invalid(
                "server.listen",
                format!("{:?} is not an address:port such as 127.0.0.1:8080", self.listen),
            ));
        }
    }
}
