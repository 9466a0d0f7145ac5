//! `rules.<kind>`: when each incident kind fires (`for`), how bad it is (`severity`), and whether it is on.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::domain::{Kind, Severity};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSettings {
    #[serde(default, with = "humantime_serde::option")]
    pub r#for: Option<Duration>,
    #[serde(default)]
    pub severity: Option<Severity>,
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// `rules.<kind>`; `rules.pruned.production` holds the matchers that mark a destination as production.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RulesSettings {
    pub out_of_sync: Option<RuleSettings>,
    pub prune_pending: Option<RuleSettings>,
    pub sync_failed: Option<RuleSettings>,
    pub degraded: Option<RuleSettings>,
    pub sync_unknown: Option<RuleSettings>,
    pub pruned: Option<PrunedRuleSettings>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrunedRuleSettings {
    #[serde(default, with = "humantime_serde::option")]
    pub r#for: Option<Duration>,
    #[serde(default)]
    pub severity: Option<Severity>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Severity when the destination is production (default critical).
    #[serde(default)]
    pub production_severity: Option<Severity>,
    #[serde(default)]
    pub production: ProductionMatchers,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProductionMatchers {
    pub namespaces: Vec<String>,
    pub clusters: Vec<String>,
    pub labels: BTreeMap<String, String>,
}

/// The effective rule for one kind, defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub enabled: bool,
    pub r#for: Duration,
    pub severity: Severity,
}

impl RulesSettings {
    pub fn rule(&self, kind: Kind) -> Rule {
        let (default_for, default_sev) = kind.defaults();
        let (f, s, e) = match kind {
            Kind::OutOfSync => opt(&self.out_of_sync),
            Kind::PrunePending => opt(&self.prune_pending),
            Kind::SyncFailed => opt(&self.sync_failed),
            Kind::Degraded => opt(&self.degraded),
            Kind::SyncUnknown => opt(&self.sync_unknown),
            Kind::Test => (None, None, true),
            Kind::Pruned => match &self.pruned {
                Some(p) => (p.r#for, p.severity, p.enabled),
                None => (None, None, true),
            },
        };
        Rule {
            enabled: e,
            r#for: f.unwrap_or(default_for),
            severity: s.unwrap_or(default_sev),
        }
    }

    pub fn production(&self) -> (ProductionMatchers, Severity) {
        match &self.pruned {
            Some(p) => (
                p.production.clone(),
                p.production_severity.unwrap_or(Severity::Critical),
            ),
            None => (ProductionMatchers::default(), Severity::Critical),
        }
    }
}

fn opt(r: &Option<RuleSettings>) -> (Option<Duration>, Option<Severity>, bool) {
    match r {
        Some(r) => (r.r#for, r.severity, r.enabled),
        None => (None, None, true),
    }
}

impl RulesSettings {
    pub(super) fn validate(&self, errors: &mut Vec<ConfigError>) {
        for (key, globs) in [
            ("namespaces", &self.production().0.namespaces),
            ("clusters", &self.production().0.clusters),
        ] {
            for (j, g) in globs.iter().enumerate() {
                if let Err(e) = globset::Glob::new(g) {
                    errors.push(invalid(
                        format!("rules.pruned.production.{key}[{j}]"),
                        format!("bad glob {g:?}: {}", e.kind()),
                    ));
                }
            }
        }
    }
}
