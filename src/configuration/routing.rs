//! `ownership`, `teams`, `routes` and `grouping`: who owns an Application, where its incidents go, how they are
//! bundled into messages, and each team's `digest` (when and where its digest is sent).

use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::domain::{Kind, Schedule, Severity, labels};

use super::{ConfigError, Parsed, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OwnershipSettings {
    pub annotation: String,
    /// The Application annotation a team uses to ask for more of its receivers (`payments-jira,payments-pager`):
    /// only names the owning team's `allowed_receivers` lists are used, the rest refused (visibly).
    pub receivers_annotation: String,
    pub label: String,
    pub projects: BTreeMap<String, String>,
    pub default_team: String,
}

impl Default for OwnershipSettings {
    fn default() -> Self {
        Self {
            annotation: "herald.io/team".into(),
            receivers_annotation: "herald.io/receivers".into(),
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
    /// The receivers an Application of this team may ask for itself (`ownership.receivers_annotation`): an
    /// annotation can name only these, never create a destination or reach another team's (none by default).
    pub allowed_receivers: Vec<String>,
    pub escalation: Vec<EscalationStep>,
    /// No digest unless configured.
    pub digest: Option<DigestSettings>,
    /// Names of `time_intervals` inside which the team gets nothing: what fires then is sent when they end, if it
    /// still fires.
    pub mute_time_intervals: Vec<String>,
    /// Names of `time_intervals` outside which the team gets nothing (none: always active).
    pub active_time_intervals: Vec<String>,
}

/// `teams.<t>.digest`: the team's digest of everything still not right (see `crate::digest`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestSettings {
    /// `Mon-Fri 09:00`: days (`daily`, `Mon-Fri`, `Mon,Wed,Fri`, `Sat`) then one or more `HH:MM`.
    pub schedule: Parsed<Schedule>,
    /// An IANA time zone (`Europe/Berlin`); the schedule's times are read in it.
    #[serde(default = "Parsed::utc")]
    pub timezone: Parsed<chrono_tz::Tz>,
    /// Where the digest goes (default: the team's receivers that take digests: chat, e-mail, webhook, console;
    /// its ticket and paging receivers are left out).
    pub receivers: Option<Vec<String>>,
    /// A slot missed while Herald was down is sent at start if it is less late than this, else skipped.
    #[serde(default = "six_hours", with = "crate::configuration::duration")]
    pub catch_up: Duration,
    #[serde(default)]
    pub when_empty: WhenEmpty,
}

fn six_hours() -> Duration {
    Duration::from_secs(6 * 3600)
}

/// What a digest with nothing to report does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenEmpty {
    /// Nothing is sent.
    #[default]
    Skip,
    /// One line saying all is green.
    AllGreen,
}

impl DigestSettings {
    /// The schedule and time zone, both parsed at load (so never an error: the `Result` is the shape callers
    /// were written for when each slot parsed them again).
    pub fn plan(&self) -> Result<(Schedule, chrono_tz::Tz), String> {
        Ok((self.schedule.get().clone(), self.timezone.tz()))
    }

    /// The digest's receivers: its own, else those of the team's that take a digest (`gets_digest`).
    pub fn receivers_of(&self, team: &TeamSettings, gets_digest: &dyn Fn(&str) -> bool) -> Vec<String> {
        match &self.receivers {
            Some(own) => own.clone(),
            None => team.receivers.iter().filter(|r| gets_digest(r)).cloned().collect(),
        }
    }
}

/// `inhibit_rules[]`, in Alertmanager's shape: while an incident matching `source_matchers` is open (firing, or
/// due to fire now) for an Application, that Application's incidents matching `target_matchers` are not sent,
/// when the fields in `equal` have the same value in both. Matchers are `field=glob` or `field!=glob`, fields as
/// in `group_by`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InhibitRuleSettings {
    pub source_matchers: Vec<String>,
    pub target_matchers: Vec<String>,
    #[serde(default)]
    pub equal: Vec<String>,
}

/// `field=glob` / `field!=glob` (quotes around the value allowed, as Alertmanager writes them): the field, whether
/// it must NOT match, the glob. An error says what is wrong.
pub fn parse_label_matcher(m: &str) -> Result<(String, bool, String), String> {
    let (name, negate, value) = if let Some((n, v)) = m.split_once("!=") {
        (n, true, v)
    } else if let Some((n, v)) = m.split_once("=~").or_else(|| m.split_once("!~")) {
        return Err(format!(
            "{m:?}: regular expressions ({n}=~…) are not supported; write a glob: {n}=\"prod-*\" (got {v:?})"
        ));
    } else if let Some((n, v)) = m.split_once('=') {
        (n, false, v)
    } else {
        return Err(format!("{m:?}: write field=value or field!=value"));
    };
    let name = name.trim();
    let value = value.trim();
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    if !labels::is_field(name) {
        return Err(format!("{m:?}: unknown field {name:?}; use {}", labels::field_list()));
    }
    if let Err(e) = globset::Glob::new(value) {
        return Err(format!("{m:?}: bad glob {value:?}: {}", e.kind()));
    }
    Ok((name.to_string(), negate, value.to_string()))
}

pub(super) fn validate_inhibit_rules(rules: &[InhibitRuleSettings], errors: &mut Vec<ConfigError>) {
    for (i, r) in rules.iter().enumerate() {
        for (key, list) in [
            ("source_matchers", &r.source_matchers),
            ("target_matchers", &r.target_matchers),
        ] {
            if list.is_empty() {
                errors.push(invalid(
                    format!("inhibit_rules[{i}].{key}"),
                    "must have at least one matcher (field=value)",
                ));
            }
            for (j, m) in list.iter().enumerate() {
                if let Err(e) = parse_label_matcher(m) {
                    errors.push(invalid(format!("inhibit_rules[{i}].{key}[{j}]"), e));
                }
            }
        }
        for (j, f) in r.equal.iter().enumerate() {
            if !labels::is_field(f) {
                errors.push(invalid(
                    format!("inhibit_rules[{i}].equal[{j}]"),
                    format!("unknown field {f:?}; use {}", labels::field_list()),
                ));
            }
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EscalationStep {
    #[serde(with = "crate::configuration::duration")]
    pub after: Duration,
    #[serde(default)]
    pub receivers: Vec<String>,
    /// A schedule (`schedules.<name>`): whoever it has on call when the step fires hears of it through
    /// `people_receivers`; nobody on call, the team's receivers are told instead.
    #[serde(default)]
    pub on_call: Option<String>,
}

/// Whom a step reaches, in words: `pager, whoever is on call for payments-primary`.
pub fn step_reaches(receivers: &[String], on_call: Option<&str>) -> String {
    let mut who: Vec<String> = receivers.to_vec();
    who.extend(on_call.map(|s| format!("whoever is on call for {s}")));
    who.join(", ")
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSettings {
    /// The Argo CD instance (`default`, or an `argocd.instances[].name`), exactly.
    pub instance: Option<String>,
    pub team: Option<String>,
    pub kind: Option<Kind>,
    pub severity: Option<Severity>,
    pub project: Option<String>,
    /// Glob on the Application name.
    pub app: Option<String>,
    /// Glob on the destination namespace.
    pub namespace: Option<String>,
    /// Glob on the destination cluster (server URL or name).
    pub cluster: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub receivers: Vec<String>,
    #[serde(default)]
    pub r#continue: bool,
    /// As a team's: the incidents this route takes wait while it is muted (not on a `continue: true` route).
    #[serde(default)]
    pub mute_time_intervals: Vec<String>,
    #[serde(default)]
    pub active_time_intervals: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GroupingSettings {
    pub group_by: Vec<String>,
    #[serde(with = "crate::configuration::duration")]
    pub group_wait: Duration,
    #[serde(with = "crate::configuration::duration")]
    pub group_interval: Duration,
    #[serde(with = "crate::configuration::duration")]
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
        for (key, list) in [("receivers", &t.receivers), ("allowed_receivers", &t.allowed_receivers)] {
            for (j, r) in list.iter().enumerate() {
                if !known(r) {
                    errors.push(invalid(
                        format!("teams.{team}.{key}[{j}]"),
                        format!("unknown receiver {r:?} (define it under `receivers`)"),
                    ));
                }
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

/// Each team's `digest` (its schedule and time zone were parsed at load): known receivers that get digests (ticket, paging
/// and sync-only receivers do not: `digestless` says which one a receiver is), a positive `catch_up`.
pub(super) fn validate_digests(
    teams: &BTreeMap<String, TeamSettings>,
    known: &dyn Fn(&str) -> bool,
    gets_digest: &dyn Fn(&str) -> bool,
    digestless: &dyn Fn(&str) -> &'static str,
    errors: &mut Vec<ConfigError>,
) {
    for (team, t) in teams {
        let Some(d) = &t.digest else { continue };
        let path = format!("teams.{team}.digest");
        if d.catch_up.is_zero() {
            errors.push(invalid(format!("{path}.catch_up"), "must be greater than 0"));
        }
        let receivers = d.receivers_of(t, &|r: &str| !known(r) || gets_digest(r));
        if receivers.is_empty() {
            errors.push(invalid(
                format!("{path}.receivers"),
                "no receiver takes a digest: name chat, e-mail, webhook or console receivers here or under the team's `receivers`",
            ));
        }
        let Some(own) = &d.receivers else { continue };
        for (j, r) in own.iter().enumerate() {
            let key = format!("{path}.receivers[{j}]");
            if !known(r) {
                errors.push(invalid(key, format!("unknown receiver {r:?}")));
            } else if !gets_digest(r) {
                errors.push(invalid(
                    key,
                    format!("receiver {r:?} is {}: it gets no digest (name chat, e-mail, webhook or console receivers in `{path}.receivers`)", digestless(r)),
                ));
            }
        }
    }
}

/// A receiver told of syncs only (GitHub commit statuses, Grafana annotations) takes no incidents: a route, an
/// escalation step or `allowed_receivers` (which an Application's annotation asks for incidents) naming one could
/// never do anything. `teams.<t>.receivers` may name one: that scopes it to the team's Applications.
pub(super) fn validate_incident_receivers(
    teams: &BTreeMap<String, TeamSettings>,
    routes: &[RouteSettings],
    takes_no_incidents: &dyn Fn(&str) -> bool,
    errors: &mut Vec<ConfigError>,
) {
    let refuse = |path: String, r: &str, errors: &mut Vec<ConfigError>| {
        errors.push(invalid(
            path,
            format!(
                "receiver {r:?} is told of syncs only (commit statuses, annotations) and takes no incidents: name \
                 it under no team (it then hears of every Application) or in `teams.<team>.receivers` (only that \
                 team's Applications)"
            ),
        ));
    };
    for (i, route) in routes.iter().enumerate() {
        for (j, r) in route.receivers.iter().enumerate() {
            if takes_no_incidents(r) {
                refuse(format!("routes[{i}].receivers[{j}]"), r, errors);
            }
        }
    }
    for (team, t) in teams {
        for (j, r) in t.allowed_receivers.iter().enumerate() {
            if takes_no_incidents(r) {
                refuse(format!("teams.{team}.allowed_receivers[{j}]"), r, errors);
            }
        }
        for (s, step) in t.escalation.iter().enumerate() {
            for (j, r) in step.receivers.iter().enumerate() {
                if takes_no_incidents(r) {
                    refuse(format!("teams.{team}.escalation[{s}].receivers[{j}]"), r, errors);
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
