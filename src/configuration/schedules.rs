//! `schedules`: who is on call, by name — a rotation of `people` or an iCalendar kept elsewhere (`ical`), with
//! overrides — for the escalation steps that say `on_call` (see `crate::oncall`, which answers who at an instant).
//! Time zones, a rotation's start and hand-off, the overrides' times are parsed at load; a calendar file is read once to refuse a broken
//! one.

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};

use super::{ConfigError, FromSetting, Parsed, Settings, invalid};
use crate::domain::calendar::Calendar;
use crate::domain::rotation::Rotation;
use crate::domain::time::WrittenTime;

/// `schedules.<name>`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSettings {
    /// An IANA time zone: hand-offs, overrides and calendar times without their own zone are read in it.
    #[serde(default = "Parsed::utc")]
    pub timezone: Parsed<chrono_tz::Tz>,
    pub rotation: Option<RotationSettings>,
    /// Instead of `rotation`: a calendar whose events' summaries name the person on call.
    pub ical: Option<IcalSettings>,
    /// Whoever they name is on call from `from` until `until`, whatever the rotation or calendar says.
    #[serde(default)]
    pub overrides: Vec<OverrideSettings>,
}

/// `schedules.<name>.rotation`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotationSettings {
    /// `people` names, in turn.
    pub people: Vec<String>,
    /// Each one's turn (`1w`, `1d`, `12h`).
    #[serde(with = "crate::configuration::duration")]
    pub every: Duration,
    /// The first hand-off's day, `YYYY-MM-DD` (the first person's turn begins then).
    pub start: Parsed<NaiveDate>,
    /// The hand-off's wall-clock time, `HH:MM` in the schedule's time zone.
    #[serde(default = "nine")]
    pub handoff: Parsed<NaiveTime>,
}

impl RotationSettings {
    /// The rotation in the schedule's time zone `tz`; an error names the key that is wrong (`validate` reports it
    /// at load).
    pub fn rotation(&self, tz: chrono_tz::Tz) -> Result<Rotation<'_>, (&'static str, String)> {
        Rotation::new(&self.people, self.every, *self.start.get(), *self.handoff.get(), tz)
    }
}

/// A rotation's `start`: `YYYY-MM-DD`.
impl FromSetting for NaiveDate {
    fn from_setting(text: &str) -> Result<Self, String> {
        crate::domain::rotation::parse_start(text)
    }
}

/// A rotation's `handoff`: `HH:MM`.
impl FromSetting for NaiveTime {
    fn from_setting(text: &str) -> Result<Self, String> {
        crate::domain::rotation::parse_handoff(text)
    }
}

/// `schedules.<name>.ical`: exactly one of `url` and `file`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IcalSettings {
    /// An http(s) address, fetched at start and every `refresh` (shown only as its scheme and host).
    pub url: Option<String>,
    /// A file, read at start and on every reload.
    pub file: Option<PathBuf>,
    #[serde(default = "fifteen_minutes", with = "crate::configuration::duration")]
    pub refresh: Duration,
    /// A fetch not answered whole within this fails (the copy there was is kept).
    #[serde(default = "ten_seconds", with = "crate::configuration::duration")]
    pub timeout: Duration,
    /// A calendar larger than this is refused (the copy there was is kept).
    #[serde(default = "one_mebibyte")]
    pub max_bytes: usize,
}

/// `schedules.<name>.overrides[]`: `from` and `until` are RFC 3339 times or wall-clock times of the schedule's
/// zone (`2026-03-30 09:00`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideSettings {
    pub person: String,
    pub from: Parsed<WrittenTime>,
    pub until: Parsed<WrittenTime>,
}

impl OverrideSettings {
    /// When it begins and ends, its wall-clock times read in the schedule's zone `tz`.
    pub fn span(&self, tz: chrono_tz::Tz) -> (DateTime<Utc>, DateTime<Utc>) {
        (self.from.get().at(tz), self.until.get().at(tz))
    }
}

/// An override's `from` or `until`: RFC 3339, or a wall-clock time of the schedule's zone.
impl FromSetting for WrittenTime {
    fn from_setting(text: &str) -> Result<Self, String> {
        WrittenTime::parse(text)
    }
}

fn nine() -> Parsed<NaiveTime> {
    Parsed::known("09:00", NaiveTime::from_hms_opt(9, 0, 0).unwrap_or(NaiveTime::MIN))
}
fn fifteen_minutes() -> Duration {
    Duration::from_secs(15 * 60)
}
fn ten_seconds() -> Duration {
    Duration::from_secs(10)
}
fn one_mebibyte() -> usize {
    1 << 20
}

impl Settings {
    /// The `people` name a calendar event's summary names: a name or an e-mail address, letter case aside.
    pub fn person_named(&self, summary: &str) -> Option<&str> {
        let s = summary.trim();
        (self.people.iter())
            .find(|(name, p)| {
                name.eq_ignore_ascii_case(s) || p.email.as_deref().is_some_and(|e| e.eq_ignore_ascii_case(s))
            })
            .map(|(name, _)| name.as_str())
    }

    /// The schedules `team`'s escalation steps name, each once, in order.
    pub fn schedules_of(&self, team: &str) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for step in self
            .teams
            .get(team)
            .map(|t| t.escalation.as_slice())
            .unwrap_or_default()
        {
            if let Some(s) = step.on_call.as_deref()
                && !out.contains(&s)
            {
                out.push(s);
            }
        }
        out
    }
}

/// Every schedule (a rotation or a calendar of known people, overrides that end after they begin) and every
/// escalation step's `on_call` naming one.
pub(super) fn validate(s: &Settings, errors: &mut Vec<ConfigError>) {
    for (name, schedule) in &s.schedules {
        validate_schedule(s, &format!("schedules.{name}"), schedule, errors);
    }
    validate_steps(s, errors);
}

/// `key` names `who`, who must be a person of `people`.
fn check_person(s: &Settings, key: String, who: &str, errors: &mut Vec<ConfigError>) {
    if !s.people.contains_key(who) {
        errors.push(invalid(
            key,
            format!("{who:?} is no person of `people` (define them there, with an email or slack)"),
        ));
    }
}

fn validate_schedule(s: &Settings, path: &str, schedule: &ScheduleSettings, errors: &mut Vec<ConfigError>) {
    let tz = schedule.timezone.tz();
    match (&schedule.rotation, &schedule.ical) {
        (Some(_), Some(_)) => errors.push(invalid(path, "has both `rotation` and `ical`: give one")),
        (None, None) => errors.push(invalid(path, "needs a `rotation` or an `ical` calendar")),
        _ => {}
    }
    if let Some(r) = &schedule.rotation {
        if let Err((key, e)) = r.rotation(tz) {
            errors.push(invalid(format!("{path}.rotation.{key}"), e));
        }
        for (i, who) in r.people.iter().enumerate() {
            check_person(s, format!("{path}.rotation.people[{i}]"), who, errors);
        }
    }
    if let Some(ical) = &schedule.ical {
        validate_ical(s, &format!("{path}.ical"), ical, tz, errors);
    }
    for (i, o) in schedule.overrides.iter().enumerate() {
        let at = format!("{path}.overrides[{i}]");
        check_person(s, format!("{at}.person"), &o.person, errors);
        let (from, until) = o.span(tz);
        if until <= from {
            errors.push(invalid(
                format!("{at}.until"),
                format!("is not after `from` ({})", o.from),
            ));
        }
    }
}

/// `schedules.<name>.ical` (at `at`): one source, a `file` that reads as a calendar now, sane bounds.
fn validate_ical(s: &Settings, at: &str, ical: &IcalSettings, tz: chrono_tz::Tz, errors: &mut Vec<ConfigError>) {
    match (&ical.url, &ical.file) {
        (Some(_), Some(_)) => errors.push(invalid(at, "has both `url` and `file`: give one")),
        (None, None) => errors.push(invalid(at, "needs a `url` or a `file`")),
        (Some(url), None) => super::check_url(errors, &format!("{at}.url"), url),
        (None, Some(file)) => {
            if let Err(e) = read_calendar_file(s, file, ical.max_bytes, tz) {
                errors.push(invalid(format!("{at}.file"), e));
            }
        }
    }
    if ical.refresh < Duration::from_secs(10) {
        errors.push(invalid(format!("{at}.refresh"), "must be at least 10s"));
    }
    if ical.timeout.is_zero() {
        errors.push(invalid(format!("{at}.timeout"), "must be greater than 0"));
    }
    if ical.max_bytes == 0 {
        errors.push(invalid(format!("{at}.max_bytes"), "must be greater than 0"));
    }
}

/// A calendar `file` read and parsed as it will be at start, so a broken one refuses the configuration.
fn read_calendar_file(s: &Settings, file: &Path, max_bytes: usize, tz: chrono_tz::Tz) -> Result<Calendar, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    if bytes.len() > max_bytes {
        return Err(format!("{} is larger than max_bytes ({max_bytes})", file.display()));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", file.display()))?;
    Calendar::parse(&text, tz, &|summary| s.person_named(summary).map(str::to_string))
}

/// Each escalation step reaches someone: `receivers`, or `on_call` naming a schedule.
fn validate_steps(s: &Settings, errors: &mut Vec<ConfigError>) {
    for (team, t) in &s.teams {
        for (j, step) in t.escalation.iter().enumerate() {
            let at = format!("teams.{team}.escalation[{j}]");
            if let Some(name) = &step.on_call
                && !s.schedules.contains_key(name)
            {
                errors.push(invalid(
                    format!("{at}.on_call"),
                    format!("no schedule is named {name:?} (define it under `schedules`)"),
                ));
            }
            if step.on_call.is_none() && step.receivers.is_empty() {
                errors.push(invalid(&at, "needs `receivers` or `on_call` (or both)"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::configuration::Settings;

    const PEOPLE: &str = "people: {alice: {email: alice@example.com}, bob: {slack: U0BOB0001}}\n";

    #[test]
    fn every_wrong_schedule_key_is_named() {
        let rotation = "rotation: {people: [alice, bob], every: 1w, start: 2026-03-02}";
        let cases = [
            ("schedules: {p: {timezone: Mars/Olympus, ROT}}", "schedules.p.timezone"),
            (
                "schedules: {p: {rotation: {people: [alice, mallory], every: 1w, start: 2026-03-02}}}",
                "schedules.p.rotation.people[1]",
            ),
            (
                "schedules: {p: {rotation: {people: [], every: 1w, start: 2026-03-02}}}",
                "schedules.p.rotation.people",
            ),
            (
                "schedules: {p: {rotation: {people: [alice], every: 0s, start: 2026-03-02}}}",
                "schedules.p.rotation.every",
            ),
            (
                "schedules: {p: {rotation: {people: [alice], every: often, start: 2026-03-02}}}",
                "schedules.p.rotation.every",
            ),
            (
                "schedules: {p: {rotation: {people: [alice], every: 1w, start: 'March 2'}}}",
                "schedules.p.rotation.start",
            ),
            (
                "schedules: {p: {rotation: {people: [alice], every: 1w, start: 2026-03-02, handoff: '9am'}}}",
                "schedules.p.rotation.handoff",
            ),
            (
                "schedules: {p: {rotation: {people: alice, every: 1w, start: 2026-03-02}}}",
                "schedules.p.rotation.people",
            ),
            (
                "schedules: {p: {rotation: {people: [alice], every: 1w, start: 2026-03-02, colour: red}}}",
                "schedules.p.rotation",
            ),
            ("schedules: {p: {}}", "schedules.p"),
            ("schedules: {p: {ROT, ical: {file: /nonexistent.ics}}}", "schedules.p"),
            ("schedules: {p: {ical: {}}}", "schedules.p.ical"),
            (
                "schedules: {p: {ical: {url: 'ftp://cal.example/x.ics'}}}",
                "schedules.p.ical.url",
            ),
            (
                "schedules: {p: {ical: {file: /nonexistent/oncall.ics}}}",
                "schedules.p.ical.file",
            ),
            (
                "schedules: {p: {ical: {url: 'https://cal.example/x.ics', refresh: 1s}}}",
                "schedules.p.ical.refresh",
            ),
            (
                "schedules: {p: {ical: {url: 'https://cal.example/x.ics', max_bytes: 0}}}",
                "schedules.p.ical.max_bytes",
            ),
            (
                "schedules: {p: {ical: {url: 'https://cal.example/x.ics', max_bytes: lots}}}",
                "schedules.p.ical.max_bytes",
            ),
            (
                "schedules: {p: {ROT, overrides: [{person: mallory, from: 2026-03-03, until: 2026-03-04}]}}",
                "schedules.p.overrides[0].person",
            ),
            (
                "schedules: {p: {ROT, overrides: [{person: bob, from: 2026-03-04, until: 2026-03-03}]}}",
                "schedules.p.overrides[0].until",
            ),
            (
                "schedules: {p: {ROT, overrides: [{person: bob, from: tomorrow, until: 2026-03-03}]}}",
                "schedules.p.overrides[0].from",
            ),
            (
                "schedules: {p: {ROT, overrides: [{person: bob, from: 2026-03-03}]}}",
                "schedules.p.overrides[0]",
            ),
            ("schedules: [p]", "schedules"),
            (
                "schedules: {p: {ROT}}\nteams: {pay: {escalation: [{after: 30m, on_call: q}]}}",
                "teams.pay.escalation[0].on_call",
            ),
            (
                "schedules: {p: {ROT}}\nteams: {pay: {escalation: [{after: 30m}]}}",
                "teams.pay.escalation[0]",
            ),
        ];
        for (yaml, path) in cases {
            let yaml = yaml.replace("ROT", rotation);
            let err = Settings::from_yaml(&format!("{PEOPLE}{yaml}"))
                .expect_err(&yaml)
                .to_string();
            assert!(err.contains(path), "{yaml}: expected {path} in {err}");
        }
    }

    #[test]
    fn a_broken_calendar_file_is_a_configuration_error_naming_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("oncall.ics");
        std::fs::write(
            &file,
            "BEGIN:VCALENDAR\nBEGIN:VEVENT\nSUMMARY:alice\nEND:VEVENT\nEND:VCALENDAR\n",
        )
        .expect("write");
        let yaml = format!("{PEOPLE}schedules: {{p: {{ical: {{file: '{}'}}}}}}", file.display());
        let err = Settings::from_yaml(&yaml).expect_err("broken").to_string();
        assert!(
            err.contains("schedules.p.ical.file") && err.contains("no DTSTART"),
            "{err}"
        );
        std::fs::write(&file, "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20260302T080000Z\nDTEND:20260309T080000Z\nSUMMARY:Alice@example.com\nEND:VEVENT\nEND:VCALENDAR\n").expect("write");
        let s = Settings::from_yaml(&yaml).expect("reads");
        assert_eq!(s.person_named("ALICE@example.com"), Some("alice"));
    }

    #[test]
    fn a_step_may_name_a_schedule_without_receivers() {
        let s = Settings::from_yaml(&format!(
            "{PEOPLE}schedules: {{p: {{rotation: {{people: [alice], every: 1d, start: 2026-03-02}}}}}}\n\
             teams: {{pay: {{escalation: [{{after: 30m, on_call: p}}, {{after: 1h, on_call: p, receivers: [console]}}]}}}}"
        ))
        .expect("valid");
        assert_eq!(s.schedules_of("pay"), vec!["p"]);
        assert!(s.teams["pay"].escalation[0].receivers.is_empty());
        let said: Vec<String> = (s.teams["pay"].escalation.iter())
            .map(|step| crate::configuration::step_reaches(&step.receivers, step.on_call.as_deref()))
            .collect();
        assert_eq!(
            said,
            ["whoever is on call for p", "console, whoever is on call for p"],
            "herald route and the app page say so"
        );
    }
}
