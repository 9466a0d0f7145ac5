//! Typed settings: the YAML file (`config/herald.yaml`), then `HERALD__SECTION__KEY` environment overrides, parsed
//! once into types that cannot hold an invalid state, then validated across sections (routes naming unknown
//! receivers, bad globs…). Every error names the key path that is wrong.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

mod argocd;
mod delivery;
pub mod duration;
mod links;
mod parsed;
mod people;
mod proxy;
mod receivers;
mod routing;
mod rules;
mod schedules;
mod server;
mod sources;
mod storage;
mod storm;
mod time_intervals;

pub use argocd::*;
pub use delivery::*;
pub use links::*;
pub use parsed::{FromSetting, Parsed};
pub use people::*;
pub use proxy::*;
pub use receivers::*;
pub use routing::*;
pub use rules::*;
pub use schedules::*;
pub use server::*;
pub use storage::*;
pub use storm::*;
pub use time_intervals::{RangeValue, TimeIntervalSettings, TimeIntervalSpec, TimeRangeSpec};

pub use crate::config_error::ConfigError;
pub(crate) use crate::config_error::{check_secret_url, check_url, invalid, shown_url};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    pub server: ServerSettings,
    #[serde(default)]
    pub storage: StorageSettings,
    #[serde(default)]
    pub argocd: ArgoCdSettings,
    #[serde(default)]
    pub ownership: OwnershipSettings,
    #[serde(default)]
    pub rules: RulesSettings,
    #[serde(default)]
    pub teams: BTreeMap<String, TeamSettings>,
    /// People Herald may tell directly, keyed by their Argo CD username (see `people`).
    #[serde(default)]
    pub people: BTreeMap<String, PersonSettings>,
    #[serde(default)]
    pub people_receivers: PeopleReceivers,
    /// Who is on call, by schedule name (see `schedules`, `crate::oncall`), for escalation steps' `on_call`.
    #[serde(default)]
    pub schedules: BTreeMap<String, ScheduleSettings>,
    #[serde(default)]
    pub routes: Vec<RouteSettings>,
    /// Named moments in Alertmanager's shape, which teams and routes name in `mute_time_intervals` and
    /// `active_time_intervals` (see `domain::time_interval`).
    #[serde(default)]
    pub time_intervals: Vec<TimeIntervalSettings>,
    /// Alertmanager-shaped inhibition rules, added to the built-in ones (see `pipeline::delivery`).
    #[serde(default)]
    pub inhibit_rules: Vec<InhibitRuleSettings>,
    /// The built-in inhibition (`prune_pending` and `sync_failed` inhibit `out_of_sync` of the same Application);
    /// `false` turns it off.
    #[serde(default = "rules::yes")]
    pub inhibit_builtin: bool,
    #[serde(default)]
    pub grouping: GroupingSettings,
    #[serde(default = "default_receivers")]
    pub receivers: Vec<ReceiverSettings>,
    pub smtp: Option<SmtpSettings>,
    #[serde(default)]
    pub outbox: OutboxSettings,
    #[serde(default)]
    pub scheduler: SchedulerSettings,
    #[serde(default)]
    pub log: LogSettings,
    /// Which Git hosts' commits get links (`links.git_hosts`).
    #[serde(default)]
    pub links: LinksSettings,
    /// When many Applications of one cluster enter the same problem at once: one `storm` incident (`storm`).
    #[serde(default)]
    pub storm: StormSettings,
}

/// The names of the `HERALD__…` variables that override the file, sorted (never their values: some are credentials).
pub fn environment_overrides() -> Vec<String> {
    let mut names: Vec<String> = sources::environment_keys().into_iter().map(|v| v.name).collect();
    names.sort();
    names
}

impl Settings {
    /// Loads `file` (if given and present; a given file that is missing is an error unless `optional`), then the
    /// `HERALD__SECTION__KEY` environment overrides, then validates.
    pub fn load(file: Option<&Path>, optional: bool) -> Result<Self, ConfigError> {
        Self::load_as(file, optional, sources::Reading::Start)
    }

    /// [`Settings::load`] on SIGHUP: a file whose last line has no line break is refused as possibly cut.
    pub fn load_for_reload(file: Option<&Path>, optional: bool) -> Result<Self, ConfigError> {
        Self::load_as(file, optional, sources::Reading::Reload)
    }

    fn load_as(file: Option<&Path>, optional: bool, reading: sources::Reading) -> Result<Self, ConfigError> {
        let value = sources::read(file, optional, reading)?;
        let variables = sources::environment_keys();
        Self::from_value(value.clone(), reading).map_err(|e| sources::blame_environment(e, &variables, &value))
    }

    /// Parses an already-read YAML string (tests, `check-config`).
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let raw = config::Config::builder()
            .add_source(config::File::from_str(text, config::FileFormat::Yaml))
            .build()
            .map_err(|e| ConfigError::Load(e.to_string()))?;
        let value: serde_json::Value = raw.try_deserialize().map_err(|e| ConfigError::Load(e.to_string()))?;
        Self::from_value(value, sources::Reading::Start)
    }

    fn from_value(mut value: serde_json::Value, reading: sources::Reading) -> Result<Self, ConfigError> {
        // The `config` crate gives an empty file as null; treat it as "all defaults".
        if value.is_null() {
            value = serde_json::json!({});
        }
        // A section whose keys are all commented out reads as null: it means "the defaults".
        if let Some(map) = value.as_object_mut() {
            map.retain(|_, v| !v.is_null());
        }
        let mut errors = Vec::new();
        sources::resolve_files(&mut value, "", reading, &mut errors);
        let settings = match serde_path_to_error::deserialize::<_, Settings>(value.clone()) {
            Ok(s) => s,
            Err(e) => {
                // serde stops at the first error; each section alone shows the others' too, so a fix is one round.
                // A section whose secret file could not be read misses that key: its error says so already.
                let unread: Vec<String> = errors.iter().filter_map(section_of).collect();
                let sections: Vec<ConfigError> = section_errors(&value)
                    .into_iter()
                    .filter(|e| section_of(e).is_none_or(|s| !unread.contains(&s)))
                    .collect();
                if sections.is_empty() && errors.is_empty() {
                    errors.push(typed_error(e));
                }
                // The checks across sections too, with the sections that did not read at their defaults — unless
                // the receivers did not read: every name would then look unknown.
                let failed: Vec<String> = sections.iter().filter_map(section_of).collect();
                errors.extend(sections);
                if !failed.iter().any(|s| s == "receivers")
                    && let Some(mut rest) = value.as_object().cloned()
                {
                    rest.retain(|k, _| !failed.contains(k));
                    if let Ok(partial) = serde_json::from_value::<Settings>(serde_json::Value::Object(rest))
                        && let Err(more) = partial.validate()
                    {
                        errors.extend(flatten(more));
                    }
                }
                return Err(named(many(errors), &value));
            }
        };
        if !errors.is_empty() {
            return Err(named(many(errors), &value));
        }
        settings.validate().map_err(|e| named(e, &value))?;
        Ok(settings)
    }

    /// Cross-section checks that serde cannot express; every error is reported, each with its key path.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut errors = Vec::new();
        let names = receivers::validate(&self.receivers, self.smtp.as_ref(), &mut errors);
        let known = |n: &str| names.contains(n);
        routing::validate_teams(&self.teams, &known, &mut errors);
        let gets_digest = |n: &str| self.receiver(n).is_some_and(|r| r.capabilities().digest);
        let digestless = |n: &str| match self.receiver(n).is_some_and(|r| r.capabilities().incidents) {
            true => "a ticket or paging receiver",
            false => "told of syncs only (commit statuses, annotations)",
        };
        routing::validate_digests(&self.teams, &known, &gets_digest, &digestless, &mut errors);
        routing::validate_routes(&self.routes, &known, &mut errors);
        let takes_no_incidents = |n: &str| self.receiver(n).is_some_and(|r| !r.capabilities().incidents);
        routing::validate_incident_receivers(&self.teams, &self.routes, &takes_no_incidents, &mut errors);
        routing::validate_inhibit_rules(&self.inhibit_rules, &mut errors);
        self.intervals(&mut errors);
        time_intervals::validate_names(&self.time_intervals, &self.teams, &self.routes, &mut errors);
        routing::validate_grouping(&self.grouping, &mut errors);
        self.rules.validate(&mut errors);
        self.links.validate(&mut errors);
        people::validate(self, &mut errors);
        schedules::validate(self, &mut errors);
        self.argocd.validate(&mut errors);
        self.validate_instance_names(&mut errors);
        self.server.validate(&mut errors);
        self.validate_auth_teams(&mut errors);
        self.storage.validate(&mut errors);
        self.outbox.validate(&mut errors);
        self.scheduler.validate(&mut errors);
        self.storm.validate(&mut errors);
        match errors.len() {
            0 => Ok(()),
            _ => Err(many(errors)),
        }
    }

    /// Each route's and each ingest token's `instance` names a configured Argo CD instance.
    fn validate_instance_names(&self, errors: &mut Vec<ConfigError>) {
        for (i, route) in self.routes.iter().enumerate() {
            if let Some(name) = &route.instance
                && self.argocd.instance(name).is_none()
            {
                let known = self.argocd.names();
                errors.push(invalid(
                    format!("routes[{i}].instance"),
                    format!("{name:?} is not a configured Argo CD instance ({})", known),
                ));
            }
        }
        for (i, entry) in self.server.auth.ingest_tokens.iter().enumerate() {
            if let TokenEntry::Named(NamedToken {
                instance: Some(name), ..
            }) = entry
                && self.argocd.instance(name).is_none()
            {
                let known = self.argocd.names();
                errors.push(invalid(
                    format!("server.auth.ingest_tokens[{i}].instance"),
                    format!("{name:?} is not a configured Argo CD instance ({})", known),
                ));
            }
        }
    }

    /// The teams `server.auth` gives credentials to are known (`teams`, or `ownership.default_team`).
    fn validate_auth_teams(&self, errors: &mut Vec<ConfigError>) {
        let mut team_names: Vec<&str> = self.teams.keys().map(String::as_str).collect();
        if !self.teams.contains_key(&self.ownership.default_team) {
            team_names.push(&self.ownership.default_team);
        }
        let known_team = |t: &str| team_names.contains(&t);
        let team_list = format!("teams: {}", team_names.join(", "));
        self.server.auth.validate_teams(&known_team, &team_list, errors);
    }

    /// Listening beyond loopback with no usable credentials is refused unless explicitly allowed.
    pub fn check_exposure(&self) -> Result<(), ConfigError> {
        let addr: std::net::SocketAddr = self
            .server
            .listen
            .parse()
            .map_err(|_| invalid("server.listen", "not an address:port"))?;
        let auth = &self.server.auth;
        if !addr.ip().is_loopback() && !auth.has_authentication() && !auth.allow_anonymous {
            return Err(invalid(
                "server.auth",
                format!(
                    "listening on {addr} (not loopback) with no credentials: set server.auth.ingest_tokens, \
                     read_tokens, bearer_tokens or basic, or server.auth.allow_anonymous: true if a proxy in front \
                     authenticates"
                ),
            ));
        }
        Ok(())
    }

    /// `time_intervals` parsed (what does not parse is left out, its error added to `errors`).
    pub fn intervals(&self, errors: &mut Vec<ConfigError>) -> crate::domain::time_interval::TimeIntervals {
        time_intervals::compile(&self.time_intervals, errors)
    }

    pub fn receiver(&self, name: &str) -> Option<&ReceiverSettings> {
        self.receivers.iter().find(|r| r.name == name)
    }
}

/// One error as it is, several as [`ConfigError::Many`].
fn many(mut errors: Vec<ConfigError>) -> ConfigError {
    if errors.len() == 1 {
        errors.remove(0)
    } else {
        ConfigError::Many(errors)
    }
}

fn typed_error(e: serde_path_to_error::Error<serde_json::Error>) -> ConfigError {
    let path = e.path().to_string();
    // A duration's refusal says what to write itself (`configuration::duration`).
    let message = e.into_inner().to_string();
    invalid(if path == "." { "(top level)".into() } else { path }, message)
}

/// The errors inside `e`, one list.
fn flatten(e: ConfigError) -> Vec<ConfigError> {
    match e {
        ConfigError::Many(list) => list.into_iter().flat_map(flatten).collect(),
        other => vec![other],
    }
}

/// `e` with each `receivers[N]` in its paths written as the receiver's name, `receivers["team-jira"]`, so a
/// message points at the entry a person knows (the index is kept when the entry has no name).
fn named(e: ConfigError, value: &serde_json::Value) -> ConfigError {
    match e {
        ConfigError::Many(list) => ConfigError::Many(list.into_iter().map(|e| named(e, value)).collect()),
        ConfigError::Invalid { path, message } => {
            let path = match path.strip_prefix("receivers[").and_then(|rest| rest.split_once(']')) {
                Some((index, rest)) => match index
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| value["receivers"][i]["name"].as_str())
                {
                    Some(name) => format!("receivers[{name:?}]{rest}"),
                    None => path,
                },
                None => path,
            };
            ConfigError::Invalid { path, message }
        }
        other => other,
    }
}

/// The top-level section an error is in (`receivers` for `receivers[1].slack.token_file`).
fn section_of(e: &ConfigError) -> Option<String> {
    match e {
        ConfigError::Invalid { path, .. } => path.split(['.', '[']).next().map(str::to_string),
        _ => None,
    }
}

/// The typing error of each top-level section, each read alone (the others at their defaults).
fn section_errors(value: &serde_json::Value) -> Vec<ConfigError> {
    let Some(map) = value.as_object() else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(k, v)| {
            let alone = serde_json::json!({ k: v });
            serde_path_to_error::deserialize::<_, Settings>(alone)
                .err()
                .map(typed_error)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Kind;
    use std::time::Duration;

    #[test]
    fn an_empty_file_means_every_default() {
        let s = Settings::from_yaml("").expect("defaults are valid");
        assert_eq!(s.server.listen, "127.0.0.1:8080");
        assert_eq!(s.receivers[0].name, "console");
        assert_eq!(s.rules.rule(Kind::OutOfSync).r#for, Duration::from_secs(3600));
        assert_eq!(s.storage.history_retention, Duration::from_secs(90 * 24 * 3600));
    }

    #[test]
    fn errors_name_the_key_path() {
        let cases = [
            ("server: {listen: 5}", "server.listen"),
            ("rules: {out_of_sync: {for: -1h}}", "rules.out_of_sync.for"),
            ("routes: [{receivers: [nobody]}]", "routes[0].receivers[0]"),
            ("routes: [{app: 'a[', receivers: [console]}]", "routes[0].app"),
            ("teams: {pay: {receivers: [ghost]}}", "teams.pay.receivers[0]"),
            ("receivers: [{name: x, slack: {}}]", "receivers[\"x\"].slack"),
            ("receivers: [{name: x, carrier_pigeon: {}}]", "receivers[\"x\"]"),
            ("grouping: {group_by: [colour]}", "grouping.group_by[0]"),
            ("surprise: 1", "surprise"),
            ("storage: {url: 'mysql://x'}", "storage.url"),
            (
                "storage: {raw_retention: 30d, history_retention: 7d}",
                "storage.history_retention",
            ),
            ("storage: {history_retention: soon}", "storage.history_retention"),
            (
                "rules: {degraded: {production: {namespaces: [prod]}}}",
                "rules.degraded.production",
            ),
            (
                "links: {git_hosts: [{host: 'https://git.acme.io', kind: gitea}]}",
                "links.git_hosts[0].host",
            ),
            ("links: {git_hosts: [{host: 'git.acme.io', kind: fossil}]}", "links"),
            (
                "rules: {out_of_sync: {namespaces: [prod]}}",
                "rules.out_of_sync.namespaces",
            ),
            (
                "rules: {deleted: {namespaces: ['prod-[']}}",
                "rules.deleted.namespaces[0]",
            ),
            ("rules: {sync_running: {for: soon}}", "rules.sync_running.for"),
            (
                "teams: {pay: {escalation: [{after: 4h, receivers: [console]}, {after: 1h, receivers: [console]}]}}",
                "teams.pay.escalation[1].after",
            ),
            // Parsed at load: a zone, a schedule or a URL that does not parse is refused, never read as a default.
            (
                "server: {time_zone: Europe/Atlantis}",
                "server.time_zone: unknown time zone",
            ),
            (
                "server: {public_url: 'herald.example.com'}",
                "server.public_url: \"herald.example.com\" is not",
            ),
            (
                "teams: {pay: {receivers: [console], digest: {schedule: 'Mon-Fri 09:00', timezone: Mars/Olympus}}}",
                "teams.pay.digest.timezone: unknown time zone \"Mars/Olympus\"",
            ),
            (
                "teams: {pay: {receivers: [console], digest: {schedule: 'Mon-Fry 09:00'}}}",
                "teams.pay.digest.schedule: bad schedule: unknown day \"Fry\"",
            ),
        ];
        for (yaml, path) in cases {
            let err = Settings::from_yaml(yaml).expect_err(yaml).to_string();
            assert!(err.contains(path), "{yaml}: expected {path} in {err}");
        }
    }

    #[test]
    fn zones_schedules_and_the_public_url_are_carried_parsed() {
        let s = Settings::from_yaml(
            "server: {time_zone: Europe/Berlin, public_url: 'https://herald.example.com/'}\n\
             teams: {pay: {receivers: [console], digest: {schedule: 'Mon-Fri 09:00', timezone: Europe/Paris}}}",
        )
        .expect("valid");
        assert_eq!(s.server.zone(), chrono_tz::Europe::Berlin);
        let url = s.server.public_url.as_ref().expect("set");
        assert_eq!(
            (url.as_str(), url.get().host_str()),
            ("https://herald.example.com/", Some("herald.example.com"))
        );
        let digest = s.teams["pay"].digest.as_ref().expect("a digest");
        assert_eq!(digest.timezone.tz(), chrono_tz::Europe::Paris);
        assert_eq!(
            digest.schedule.get(),
            &"Mon-Fri 09:00".parse::<crate::domain::Schedule>().expect("parses")
        );
        assert_eq!(Settings::from_yaml("").expect("defaults").server.zone(), chrono_tz::UTC);
    }

    #[test]
    fn an_argocd_url_that_is_no_plain_web_url_is_refused() {
        for url in [
            "ftp://argocd.example.com",
            "https://user:pw@argocd.example.com",
            "argocd.example.com",
        ] {
            let err = Settings::from_yaml(&format!("argocd: {{url: '{url}'}}"))
                .expect_err(url)
                .to_string();
            assert!(err.contains("argocd.url"), "{url}: {err}");
        }
        Settings::from_yaml("argocd: {url: 'https://argocd.example.com/ui/'}").expect("a plain URL is valid");
    }

    #[test]
    fn exposure_without_credentials_is_refused() {
        let s = Settings::from_yaml("server: {listen: '0.0.0.0:8080'}").expect("valid");
        assert!(s.check_exposure().is_err());
        let s = Settings::from_yaml("server: {listen: '0.0.0.0:8080', auth: {allow_anonymous: true}}").expect("valid");
        assert!(s.check_exposure().is_ok());
        let s = Settings::from_yaml("server: {listen: '0.0.0.0:8080', auth: {bearer_tokens: [abcdefghijklmnop]}}")
            .expect("valid");
        assert!(s.check_exposure().is_ok());
        let s = Settings::from_yaml("server: {listen: '0.0.0.0:8080', auth: {read_tokens: [abcdefghijklmnop]}}")
            .expect("valid");
        assert!(s.check_exposure().is_ok());
    }

    #[test]
    fn every_section_that_cannot_be_read_is_reported_at_once() {
        let err = Settings::from_yaml("server: {listen: 5, colour: red}\nrules: {degraded: {for: soon}}\nsurprise: 1")
            .expect_err("three errors")
            .to_string();
        for path in ["server", "rules.degraded.for", "surprise"] {
            assert!(err.contains(path), "{path} in {err}");
        }
        assert_eq!(err.lines().count(), 3, "{err}");
    }
}
