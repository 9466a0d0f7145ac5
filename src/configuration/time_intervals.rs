//! `time_intervals`, in Alertmanager's shape, and the `mute_time_intervals` / `active_time_intervals` that teams
//! and routes name: read as written, checked here (every value that does not parse is an error naming its key
//! path), compiled by [`compile`] into what `domain::time_interval` asks.

use serde::Deserialize;
use std::collections::BTreeMap;

use crate::domain::time_interval::{self as ti, TimeInterval, TimeIntervals};

use super::{ConfigError, RouteSettings, TeamSettings, invalid};

/// `time_intervals[]`: a name and the moments it covers (one of its entries matching is enough).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeIntervalSettings {
    pub name: String,
    #[serde(default)]
    pub time_intervals: Vec<TimeIntervalSpec>,
}

/// One entry: every list given must match; an empty or absent list matches everything.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeIntervalSpec {
    pub times: Vec<TimeRangeSpec>,
    /// `monday`, `monday:friday`.
    pub weekdays: Vec<RangeValue>,
    /// `1`, `1:15`, `-1` (the last day), `-3:-1`.
    pub days_of_month: Vec<RangeValue>,
    /// `march`, `january:march`, `1:3`.
    pub months: Vec<RangeValue>,
    /// `2026`, `2026:2027`.
    pub years: Vec<RangeValue>,
    /// An IANA time zone; UTC when absent.
    pub location: Option<String>,
}

/// `{start_time: "HH:MM", end_time: "HH:MM"}`: the end is exclusive, `24:00` is the day's end.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeRangeSpec {
    pub start_time: String,
    pub end_time: String,
}

/// A range as written: a string (`monday:friday`, `1:5`) or a bare number (`- 15` in YAML).
#[derive(Debug, Clone, PartialEq)]
pub struct RangeValue(pub String);

impl<'de> Deserialize<'de> for RangeValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = RangeValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a value or a range as a string (`monday:friday`, `1:5`, `-3:-1`) or a number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RangeValue, E> {
                Ok(RangeValue(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RangeValue, E> {
                Ok(RangeValue(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RangeValue, E> {
                Ok(RangeValue(v.to_string()))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Each entry parsed, or the errors of every value that does not parse, each with its key path.
fn parse_entry(e: &TimeIntervalSpec, path: &str, errors: &mut Vec<ConfigError>) -> Option<TimeInterval> {
    let before = errors.len();
    let mut out = TimeInterval::default();
    for (j, t) in e.times.iter().enumerate() {
        match ti::parse_times(&t.start_time, &t.end_time) {
            Ok(r) => out.times.push(r),
            Err((key, message)) => errors.push(invalid(format!("{path}.times[{j}].{key}"), message)),
        }
    }
    fn each<T>(
        list: &[RangeValue],
        key: &str,
        path: &str,
        parse: fn(&str) -> Result<T, String>,
        errors: &mut Vec<ConfigError>,
    ) -> Vec<T> {
        (list.iter().enumerate())
            .filter_map(|(j, v)| {
                parse(&v.0)
                    .map_err(|m| errors.push(invalid(format!("{path}.{key}[{j}]"), m)))
                    .ok()
            })
            .collect()
    }
    out.weekdays = each(&e.weekdays, "weekdays", path, ti::parse_weekdays, errors);
    out.days_of_month = each(&e.days_of_month, "days_of_month", path, ti::parse_days_of_month, errors);
    out.months = each(&e.months, "months", path, ti::parse_months, errors);
    out.years = each(&e.years, "years", path, ti::parse_years, errors);
    if let Some(l) = &e.location {
        match ti::parse_location(l) {
            Ok(tz) => out.location = tz,
            Err(m) => errors.push(invalid(format!("{path}.location"), m)),
        }
    }
    (errors.len() == before).then_some(out)
}

/// The named intervals, parsed; the errors (with key paths) of what does not parse, of a missing or repeated name.
pub fn compile(list: &[TimeIntervalSettings], errors: &mut Vec<ConfigError>) -> TimeIntervals {
    let mut by_name = BTreeMap::new();
    for (i, named) in list.iter().enumerate() {
        let path = format!("time_intervals[{i}]");
        let name = named.name.trim();
        if name.is_empty() {
            errors.push(invalid(format!("{path}.name"), "must not be empty"));
        } else if by_name.contains_key(name) {
            errors.push(invalid(format!("{path}.name"), format!("{name:?} is defined twice")));
        }
        let entries: Vec<TimeInterval> = (named.time_intervals.iter().enumerate())
            .filter_map(|(j, e)| parse_entry(e, &format!("{path}.time_intervals[{j}]"), errors))
            .collect();
        by_name.entry(name.to_string()).or_insert(entries);
    }
    TimeIntervals::new(by_name)
}

/// Every `mute_time_intervals` / `active_time_intervals` names a defined interval; a `continue: true` route names
/// none (it only adds receivers to the owner's, whose intervals hold the whole incident).
pub(super) fn validate_names(
    list: &[TimeIntervalSettings],
    teams: &BTreeMap<String, TeamSettings>,
    routes: &[RouteSettings],
    errors: &mut Vec<ConfigError>,
) {
    let known = |n: &str| list.iter().any(|t| t.name.trim() == n);
    let defined = || {
        let names: Vec<&str> = list.iter().map(|t| t.name.as_str()).collect();
        match names.is_empty() {
            true => "none is defined under `time_intervals`".to_string(),
            false => format!("defined: {}", names.join(", ")),
        }
    };
    let mut check = |path: String, mute: &[String], active: &[String]| {
        for (key, names) in [("mute_time_intervals", mute), ("active_time_intervals", active)] {
            for (j, n) in names.iter().enumerate() {
                if !known(n) {
                    errors.push(invalid(
                        format!("{path}.{key}[{j}]"),
                        format!("unknown time interval {n:?} ({})", defined()),
                    ));
                }
            }
        }
    };
    for (team, t) in teams {
        check(
            format!("teams.{team}"),
            &t.mute_time_intervals,
            &t.active_time_intervals,
        );
    }
    for (i, r) in routes.iter().enumerate() {
        check(format!("routes[{i}]"), &r.mute_time_intervals, &r.active_time_intervals);
    }
    for (i, r) in routes.iter().enumerate() {
        if r.r#continue && !(r.mute_time_intervals.is_empty() && r.active_time_intervals.is_empty()) {
            errors.push(invalid(
                format!("routes[{i}]"),
                "a `continue: true` route only adds receivers to the owner's (the team, or the route that takes the \
                 incident), whose time intervals decide for the whole incident: give it `continue: false` or put \
                 the intervals on the team",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::configuration::Settings;

    fn errors_of(yaml: &str) -> String {
        match Settings::from_yaml(yaml) {
            Ok(_) => panic!("accepted:\n{yaml}"),
            Err(e) => e.to_string(),
        }
    }

    const BASE: &str = "
receivers: [{name: chat, console: {}}]
teams: {pay: {receivers: [chat], mute_time_intervals: [nights]}}
";

    #[test]
    fn every_malformed_value_is_refused_with_its_key_path() {
        // (time_intervals entry, the key path and words expected)
        let cases = [
            (
                "{weekdays: [funday]}",
                "time_intervals[0].time_intervals[0].weekdays[0]: \"funday\" is not a day",
            ),
            (
                "{weekdays: [monday, 'saturday:sunday']}",
                "time_intervals[0].time_intervals[0].weekdays[1]: \"saturday:sunday\": saturday comes after sunday",
            ),
            (
                "{days_of_month: ['0']}",
                "time_intervals[0].time_intervals[0].days_of_month[0]: 0 is not a day",
            ),
            (
                "{days_of_month: [40]}",
                "time_intervals[0].time_intervals[0].days_of_month[0]: 40 is not a day",
            ),
            (
                "{days_of_month: ['-1:5']}",
                "days_of_month[0]: \"-1:5\": a range that starts from the month's end",
            ),
            (
                "{months: [smarch]}",
                "time_intervals[0].time_intervals[0].months[0]: \"smarch\" is not a month",
            ),
            (
                "{months: ['march:january']}",
                "months[0]: \"march:january\": the range ends before it starts",
            ),
            (
                "{years: ['2027:2026']}",
                "years[0]: \"2027:2026\": the range ends before it starts",
            ),
            ("{years: [soon]}", "years[0]: \"soon\" is not a year"),
            (
                "{times: [{start_time: '22:00', end_time: '06:00'}]}",
                "time_intervals[0].time_intervals[0].times[0].end_time: \"06:00\" is not after start_time",
            ),
            (
                "{times: [{start_time: '9:00', end_time: '17:00'}]}",
                "times[0].start_time: \"9:00\" is not a time",
            ),
            (
                "{times: [{start_time: '09:00', end_time: '24:30'}]}",
                "times[0].end_time: \"24:30\" is not a time",
            ),
            (
                "{location: Mars/Olympus}",
                "time_intervals[0].time_intervals[0].location: unknown time zone",
            ),
            ("{weekdays: monday}", "time_intervals[0].time_intervals[0].weekdays"),
            (
                "{weekdays: [{day: monday}]}",
                "time_intervals[0].time_intervals[0].weekdays[0]",
            ),
            (
                "{times: [{start_time: '09:00'}]}",
                "time_intervals[0].time_intervals[0].times[0]: missing field `end_time`",
            ),
            ("{hours: ['09:00']}", "unknown field `hours`"),
        ];
        for (entry, want) in cases {
            let yaml = format!("{BASE}time_intervals: [{{name: nights, time_intervals: [{entry}]}}]\n");
            let got = errors_of(&yaml);
            assert!(got.contains(want), "{entry}: {got}");
        }
    }

    #[test]
    fn names_are_checked_where_they_are_defined_and_where_they_are_used() {
        let cases = [
            (
                "time_intervals: [{name: nights}, {name: nights}]",
                "time_intervals[1].name: \"nights\" is defined twice",
            ),
            (
                "time_intervals: [{name: ''}, {name: nights}]",
                "time_intervals[0].name: must not be empty",
            ),
            (
                "time_intervals: [{name: days}]",
                "teams.pay.mute_time_intervals[0]: unknown time interval \"nights\" (defined: days)",
            ),
            (
                "time_intervals: []",
                "unknown time interval \"nights\" (none is defined under `time_intervals`)",
            ),
            (
                "time_intervals: [{name: nights}]\nroutes: [{kind: degraded, receivers: [chat], active_time_intervals: [office]}]",
                "routes[0].active_time_intervals[0]: unknown time interval \"office\"",
            ),
            (
                "time_intervals: [{name: nights}]\nroutes: [{kind: degraded, receivers: [chat], continue: true, mute_time_intervals: [nights]}]",
                "routes[0]: a `continue: true` route only adds receivers",
            ),
            ("time_intervals: {name: nights}", "time_intervals"),
        ];
        for (more, want) in cases {
            let got = errors_of(&format!("{BASE}{more}\n"));
            assert!(got.contains(want), "{more}: {got}");
        }
    }

    #[test]
    fn alertmanagers_examples_are_accepted() {
        let yaml = format!(
            "{BASE}time_intervals:
  - name: nights
    time_intervals:
      - times: [{{start_time: '00:00', end_time: '07:00'}}, {{start_time: '22:00', end_time: '24:00'}}]
        weekdays: ['monday:friday']
        location: Europe/Berlin
      - weekdays: [saturday, sunday]
      - days_of_month: ['1:5', '-3:-1', 15]
        months: ['january:march', 12]
        years: ['2026:2027']
"
        );
        let s = Settings::from_yaml(&yaml).expect("valid");
        assert_eq!(s.time_intervals[0].time_intervals.len(), 3);
    }
}
