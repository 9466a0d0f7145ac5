//! `ownership`, `teams`, `routes` and `grouping`: who owns an Application, where its incidents go, and how
//! they are bundled into messages.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::domain::{Kind, Severity, labels};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OwnershipSettings {
    pub annotation: String,
    pub label: String,
    pub projects: BTreeMap<String, String>,
    pub default_team: String,
}

impl Default for OwnershipSettings {
    fn default() -> Self {
        Self {
            annotation: "herald.io/team".into(),
            label: "team".into(),
            projects: BTreeMap::new(),
            default_team: "platform".into(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TeamSettings {
    pub receivers: Vec<String>,
    pub escalation: Vec<EscalationStep>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EscalationStep {
    #[serde(with = "humantime_serde")]
    pub after: Duration,
    pub receivers: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSettings {
    #[serde(default)]
    pub team: Option<String>,
    #[serde(default)]
    pub kind: Option<Kind>,
    #[serde(default)]
    pub severity: Option<Severity>,
    #[serde(default)]
    pub project: Option<String>,
    /// Glob on the Application name.
    #[serde(default)]
    pub app: Option<String>,
    /// Glob on the destination namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Glob on the destination cluster (server URL or name).
    #[serde(default)]
    pub cluster: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub receivers: Vec<String>,
    #[serde(default)]
    pub r#continue: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GroupingSettings {
    pub group_by: Vec<String>,
    #[serde(with = "humantime_serde")]
    pub group_wait: Duration,
    #[serde(with = "humantime_serde")]
    pub group_interval: Duration,
    #[serde(with = "humantime_serde")]
    pub repeat_interval: Duration,
}

impl Default for GroupingSettings {
    fn default() -> Self {
        Self {
            group_by: vec!["team".into(), "kind".into()],
            group_wait: Duration::from_secs(30),
            group_interval: Duration::from_secs(5 * 60),
            repeat_interval: Duration::from_secs(4 * 3600),
        }
    }
}

pub(super) fn validate_teams(
    teams: &BTreeMap<String, TeamSettings>,
    known: &dyn Fn(&str) -> bool,
    errors: &mut Vec<ConfigError>,
) {
    for (team, t) in teams {
        for (j, r) in t.receivers.iter().enumerate() {
            if !known(r) {
                errors.push(invalid(
                    format!("teams.{team}.receivers[{j}]"),
                    format!("unknown receiver {r:?} (define it under `receivers`)"),
                ));
            }
        }
        let mut last = Duration::ZERO;
        for (s, step) in t.escalation.iter().enumerate() {
            if step.after < last {
                errors.push(invalid(
                    format!("teams.{team}.escalation[{s}].after"),
                    "steps must be in increasing order of `after`",
                ));
            }
            last = step.after;
            for (j, r) in step.receivers.iter().enumerate() {
                if !known(r) {
                    errors.push(invalid(
                        format!("teams.{team}.escalation[{s}].receivers[{j}]"),
                        format!("unknown receiver {r:?}"),
                    ));
                }
            }
        }
    }
}

pub(super) fn validate_routes(routes: &[RouteSettings], known: &dyn Fn(&str) -> bool, errors: &mut Vec<ConfigError>) {
    for (i, route) in routes.iter().enumerate() {
        if route.receivers.is_empty() {
            errors.push(invalid(
                format!("routes[{i}].receivers"),
                "must name at least one receiver",
            ));
        }
        for (j, r) in route.receivers.iter().enumerate() {
            if !known(r) {
                errors.push(invalid(
                    format!("routes[{i}].receivers[{j}]"),
                    format!("unknown receiver {r:?}"),
                ));
            }
        }
        for (key, glob) in [
            ("app", &route.app),
            ("namespace", &route.namespace),
            ("cluster", &route.cluster),
        ] {
            if let Some(g) = glob
                && let Err(e) = globset::Glob::new(g)
            {
                errors.push(invalid(
                    format!("routes[{i}].{key}"),
                    format!("bad glob {g:?}: {}", e.kind()),
                ));
            }
        }
    }
}

pub(super) fn validate_grouping(g: &GroupingSettings, errors: &mut Vec<ConfigError>) {
    for (j, k) in g.group_by.iter().enumerate() {
        if !labels::is_field(k) {
            errors.push(invalid(
                format!("grouping.group_by[{j}]"),
                format!("unknown field {k:?}: use {}", labels::field_list()),
            ));
        }
    }
    if g.group_interval.is_zero() {
        errors.push(invalid("grouping.group_interval", "must be greater than 0"));
    }
    if g.repeat_interval.is_zero() {
        errors.push(invalid("grouping.repeat_interval", "must be greater than 0"));
    }
}
