//! `rules.<kind>`: when each incident kind fires (`for`), how bad it is (`severity`), and whether it is on.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::domain::{Kind, Severity};

use super::{ConfigError, invalid};

/// One kind's rule. `production_severity` and `production` are for `rules.pruned` only (checked in `validate`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSettings {
    #[serde(default, with = "crate::configuration::duration::option")]
    pub r#for: Option<Duration>,
    pub severity: Option<Severity>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Severity when the destination is production (default critical).
    pub production_severity: Option<Severity>,
    pub production: Option<ProductionMatchers>,
    /// Also tell the person who started the sync (`people:`); default true for sync_failed and pruned.
    pub notify_initiator: Option<bool>,
    /// `rules.deleted` only: destination namespaces (globs) where every deletion is told, even of a healthy
    /// Application.
    pub namespaces: Option<Vec<String>>,
}

pub(super) fn yes() -> bool {
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
    pub pruned: Option<RuleSettings>,
    pub sync_running: Option<RuleSettings>,
    pub progressing: Option<RuleSettings>,
    pub deleted: Option<RuleSettings>,
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
        let (f, s, e) = match self.settings(kind) {
            Some(r) => (r.r#for, r.severity, r.enabled),
            None => (None, None, true),
        };
        Rule {
            enabled: e,
            r#for: f.unwrap_or(default_for),
            severity: s.unwrap_or(default_sev),
        }
    }

    /// What is written under `rules.<kind>`, if anything.
    fn settings(&self, kind: Kind) -> Option<&RuleSettings> {
        match kind {
            Kind::OutOfSync => self.out_of_sync.as_ref(),
            Kind::PrunePending => self.prune_pending.as_ref(),
            Kind::SyncFailed => self.sync_failed.as_ref(),
            Kind::Degraded => self.degraded.as_ref(),
            Kind::SyncUnknown => self.sync_unknown.as_ref(),
            Kind::Pruned => self.pruned.as_ref(),
            Kind::SyncRunning => self.sync_running.as_ref(),
            Kind::Progressing => self.progressing.as_ref(),
            Kind::Deleted => self.deleted.as_ref(),
            // A storm's settings are `storm`, not a rule.
            Kind::Test | Kind::ArgoCdAccess | Kind::Storm => None,
        }
    }

    /// Whether an incident of `kind` also tells the person who started the sync: `rules.<kind>.notify_initiator`,
    /// by default only for the kinds a person's own sync causes (a failed sync, a prune).
    pub fn notify_initiator(&self, kind: Kind) -> bool {
        self.settings(kind)
            .and_then(|r| r.notify_initiator)
            .unwrap_or(matches!(kind, Kind::SyncFailed | Kind::Pruned))
    }

    /// `rules.deleted.namespaces`: where every deletion is told.
    pub fn deleted_namespaces(&self) -> &[String] {
        (self.deleted.as_ref())
            .and_then(|r| r.namespaces.as_deref())
            .unwrap_or_default()
    }

    pub fn production(&self) -> (ProductionMatchers, Severity) {
        let p = self.pruned.as_ref();
        (
            p.and_then(|p| p.production.clone()).unwrap_or_default(),
            p.and_then(|p| p.production_severity).unwrap_or(Severity::Critical),
        )
    }
}

impl RulesSettings {
    pub(super) fn validate(&self, errors: &mut Vec<ConfigError>) {
        for kind in Kind::ALL.into_iter().filter(|k| *k != Kind::Pruned) {
            if let Some(r) = self.settings(kind)
                && (r.production.is_some() || r.production_severity.is_some())
            {
                errors.push(invalid(
                    format!("rules.{kind}.production"),
                    "only rules.pruned takes production and production_severity",
                ));
            }
        }
        for kind in Kind::ALL.into_iter().filter(|k| *k != Kind::Deleted) {
            if self.settings(kind).is_some_and(|r| r.namespaces.is_some()) {
                errors.push(invalid(
                    format!("rules.{kind}.namespaces"),
                    "only rules.deleted takes namespaces (where every deletion is told)",
                ));
            }
        }
        for (key, globs) in [
            ("pruned.production.namespaces", &self.production().0.namespaces),
            ("pruned.production.clusters", &self.production().0.clusters),
            ("deleted.namespaces", &self.deleted_namespaces().to_vec()),
        ] {
            for (j, g) in globs.iter().enumerate() {
                if let Err(e) = globset::Glob::new(g) {
                    errors.push(invalid(
                        format!("rules.{key}[{j}]"),
                        format!("bad glob {g:?}: {}", e.kind()),
                    ));
                }
            }
        }
    }
}
