//! `storm`: when many Applications of one destination cluster (or one Argo CD instance) enter the same problem at
//! once, one `storm` incident about the shared thing instead of one per Application (see `incidents::storm`).

use serde::Deserialize;
use std::time::Duration;

use crate::domain::Severity;

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StormSettings {
    /// How many Applications entering the same problem within `window` make a storm; 0 turns storms off.
    pub min_apps: usize,
    /// How close together their problems must have started.
    #[serde(with = "crate::configuration::duration")]
    pub window: Duration,
    /// The storm incident's severity.
    pub severity: Severity,
}

impl Default for StormSettings {
    fn default() -> Self {
        Self {
            min_apps: 10,
            window: Duration::from_secs(120),
            severity: Severity::Warning,
        }
    }
}

/// A storm of fewer Applications than this is no storm: two Applications failing together are told as two.
const FEWEST: usize = 3;

/// The longest window: a day of problems is no longer "at once".
const LONGEST: Duration = Duration::from_secs(24 * 3600);

impl StormSettings {
    /// Whether storms are looked for at all (`min_apps: 0` turns them off).
    pub fn enabled(&self) -> bool {
        self.min_apps > 0
    }

    pub(super) fn validate(&self, errors: &mut Vec<ConfigError>) {
        if self.min_apps != 0 && self.min_apps < FEWEST {
            errors.push(invalid(
                "storm.min_apps",
                format!("must be 0 (no storms) or at least {FEWEST}, not {}", self.min_apps),
            ));
        }
        if self.window.is_zero() || self.window > LONGEST {
            errors.push(invalid("storm.window", "must be more than 0s and at most 24h"));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::configuration::Settings;

    #[test]
    fn storm_settings_are_read_and_checked() {
        let s = Settings::from_yaml("").expect("defaults");
        assert_eq!((s.storm.min_apps, s.storm.window.as_secs()), (10, 120));
        assert!(s.storm.enabled());
        let off = Settings::from_yaml("storm: {min_apps: 0}").expect("off");
        assert!(!off.storm.enabled());
        for (yaml, path) in [
            ("storm: {min_apps: 2}", "storm.min_apps"),
            ("storm: {window: 0s}", "storm.window"),
            ("storm: {window: 48h}", "storm.window"),
            ("storm: {colour: red}", "storm"),
            ("storm: {severity: loud}", "storm.severity"),
        ] {
            let e = Settings::from_yaml(yaml).expect_err(yaml).to_string();
            assert!(e.contains(path), "{yaml}: {e}");
        }
    }
}
