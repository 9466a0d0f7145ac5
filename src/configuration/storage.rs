//! `storage`: where state lives (SQLite by default, PostgreSQL for several replicas), how long raw bodies stay and
//! how long resolved incidents and the timeline of changes stay.

use secrecy::SecretString;
use serde::Deserialize;
use std::time::Duration;

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageSettings {
    /// `sqlite://data/herald.db` (embedded default) or `postgres://user:pass@host/db`.
    pub url: SecretString,
    #[serde(with = "crate::configuration::duration")]
    pub raw_retention: Duration,
    /// How long a resolved incident and an Application's timeline entries (its status changes) stay: at least
    /// `raw_retention`.
    #[serde(with = "crate::configuration::duration")]
    pub history_retention: Duration,
    /// SQLite `synchronous` pragma: `normal` survives a process crash (kill -9); `full` also a power loss.
    pub sqlite_synchronous: SqliteSynchronous,
    pub max_connections: u32,
}

impl Default for StorageSettings {
    fn default() -> Self {
        Self {
            url: SecretString::from("sqlite://data/herald.db"),
            raw_retention: Duration::from_secs(7 * 24 * 3600),
            history_retention: Duration::from_secs(90 * 24 * 3600),
            sqlite_synchronous: SqliteSynchronous::Normal,
            max_connections: 8,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSynchronous {
    Normal,
    Full,
}

impl StorageSettings {
    /// The store as a log line may name it: the URL without user, password and query (which may carry a
    /// password too): `postgres://db.internal:5432/herald`, `sqlite://data/herald.db`.
    pub fn describe(&self) -> String {
        use secrecy::ExposeSecret;
        let url = self.url.expose_secret();
        if url.starts_with("sqlite:") {
            return url.split('?').next().unwrap_or(url).to_string();
        }
        match url::Url::parse(url) {
            Ok(mut u) => {
                let _ = u.set_username("");
                let _ = u.set_password(None);
                u.set_query(None);
                u.to_string()
            }
            Err(_) => "(an unreadable URL, not shown)".into(),
        }
    }

    pub(super) fn validate(&self, errors: &mut Vec<ConfigError>) {
        if self.history_retention < self.raw_retention {
            errors.push(invalid(
                "storage.history_retention",
                format!(
                    "must be at least storage.raw_retention ({}): an incident and the changes it came from stay \
                     while the bodies they were read from do",
                    humantime::format_duration(self.raw_retention)
                ),
            ));
        }
        {
            use secrecy::ExposeSecret;
            let url = self.url.expose_secret();
            if !(url.starts_with("sqlite:") || url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                errors.push(invalid(
                    "storage.url",
                    "must start with sqlite: or postgres:// (the value is not shown: it may hold a password)",
                ));
            }
        }
    }
}

#[cfg(test)]
mod describe_tests {
    use super::*;

    #[test]
    fn the_store_is_named_without_its_credentials() {
        let cases = [
            (
                "postgres://herald:s3cret@db.internal:5432/herald?password=also",
                "postgres://db.internal:5432/herald",
            ),
            ("sqlite://data/herald.db", "sqlite://data/herald.db"),
            ("sqlite://data/herald.db?mode=rwc", "sqlite://data/herald.db"),
        ];
        for (url, shown) in cases {
            let s = StorageSettings {
                url: SecretString::from(url.to_string()),
                ..Default::default()
            };
            assert_eq!(s.describe(), shown);
            assert!(!s.describe().contains("s3cret") && !s.describe().contains("also"));
        }
    }
}
