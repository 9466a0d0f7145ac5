//! Alertmanager's `time_intervals`, read and asked: each value parsed once (`monday:friday`, `-3:-1`,
//! `january:march`, `2026:2027`, `17:00`–`24:00`, an IANA `location`), then whether a moment is inside
//! ([`TimeInterval::contains`]) and when that may next change ([`TimeInterval::next_change`]). [`Quiet`] is what a
//! team or a route asks of them: muted inside its `mute_time_intervals`, and outside its `active_time_intervals`,
//! and until when. Pure: no clock, no I/O; the configuration reports a value that does not parse with its key path.
//!
//! The semantics are Alertmanager's: every list given must match (an empty one matches everything), each list
//! matches when one of its ranges does; ranges are inclusive except times, whose end is exclusive (`24:00` is the
//! end of the day); weeks start on Sunday (`saturday:sunday` is refused, as Alertmanager does: write both days);
//! a negative day of the month counts from its end (`-1` is the last day), a range past a short month's end is cut
//! at it. Times are wall-clock times in `location` (UTC when not given): across a change to or from summer time an
//! hour of the day may not happen, or happen twice.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use std::collections::BTreeMap;

/// Minutes in a day: `24:00`.
const DAY: u32 = 24 * 60;

/// One entry of a named interval's `time_intervals` list, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeInterval {
    /// `[start, end)` in minutes of the day.
    pub times: Vec<(u32, u32)>,
    /// Inclusive, 0 = Sunday.
    pub weekdays: Vec<(u32, u32)>,
    /// Inclusive; negative counts from the month's end (-1 = its last day).
    pub days_of_month: Vec<(i32, i32)>,
    /// Inclusive, 1 = January.
    pub months: Vec<(u32, u32)>,
    pub years: Vec<(i32, i32)>,
    pub location: Tz,
}

impl Default for TimeInterval {
    fn default() -> Self {
        Self {
            times: Vec::new(),
            weekdays: Vec::new(),
            days_of_month: Vec::new(),
            months: Vec::new(),
            years: Vec::new(),
            location: Tz::UTC,
        }
    }
}

/// `value` as one item or an inclusive `begin:end` range of items, each read by `item`; lower case is not required.
fn range<T: Copy>(value: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<(T, T), String> {
    let v = value.trim().to_lowercase();
    let parts: Vec<&str> = v.split(':').collect();
    match parts.as_slice() {
        [one] => {
            let x = item(one.trim())?;
            Ok((x, x))
        }
        [a, b] => Ok((item(a.trim())?, item(b.trim())?)),
        _ => Err(format!("{value:?}: write one value or a range `begin:end`")),
    }
}

fn number(s: &str, what: &str) -> Result<i32, String> {
    s.parse::<i32>().map_err(|_| format!("{s:?} is not a {what}"))
}

const WEEKDAYS: [&str; 7] = [
    "sunday",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
];
const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// `HH:MM` (two digits each) as minutes of the day; `24:00` is the day's end.
pub fn parse_time(value: &str) -> Result<u32, String> {
    let bad = || format!("{value:?} is not a time: write HH:MM, 00:00 to 24:00 (for example 09:00 or 17:30)");
    let (h, m) = value.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let (h, m): (u32, u32) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if m > 59 || h > 24 || (h == 24 && m != 0) {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

/// A `times` entry: `start_time` before `end_time` (which is exclusive).
pub fn parse_times(start: &str, end: &str) -> Result<(u32, u32), (&'static str, String)> {
    let s = parse_time(start).map_err(|e| ("start_time", e))?;
    let e = parse_time(end).map_err(|e| ("end_time", e))?;
    if s >= e {
        return Err((
            "end_time",
            format!(
                "{end:?} is not after start_time {start:?} (a range ends the same day: 22:00 to 24:00, then 00:00 to 06:00)"
            ),
        ));
    }
    Ok((s, e))
}

/// `monday`, `monday:friday` (Sunday is the first day of the week).
pub fn parse_weekdays(value: &str) -> Result<(u32, u32), String> {
    let (a, b) = range(value, |s| {
        (WEEKDAYS.iter().position(|d| *d == s).map(|i| i as u32))
            .ok_or_else(|| format!("{s:?} is not a day of the week (sunday … saturday)"))
    })?;
    if a > b {
        return Err(format!(
            "{value:?}: {} comes after {} (a week starts on Sunday: write the days apart, e.g. [saturday, sunday])",
            WEEKDAYS[a as usize], WEEKDAYS[b as usize]
        ));
    }
    Ok((a, b))
}

/// `1`, `1:15`, `-1` (the last day), `-7:-1`, `15:-1`.
pub fn parse_days_of_month(value: &str) -> Result<(i32, i32), String> {
    let (a, b) = range(value, |s| {
        let d = number(s, "day of the month")?;
        if d == 0 || !(-31..=31).contains(&d) {
            return Err(format!(
                "{d} is not a day of the month (1 to 31, or -31 to -1 from the month's end)"
            ));
        }
        Ok(d)
    })?;
    if a < 0 && b > 0 {
        return Err(format!(
            "{value:?}: a range that starts from the month's end must end there too (-3:-1)"
        ));
    }
    // Checked on a 28-day month: a range that is empty in every month is a mistake.
    let on28 = |d: i32| if d < 0 { 28 + d + 1 } else { d };
    if on28(a) > on28(b) {
        return Err(format!("{value:?}: the range ends before it starts"));
    }
    Ok((a, b))
}

/// `march`, `january:march`, `1:3`.
pub fn parse_months(value: &str) -> Result<(u32, u32), String> {
    let (a, b) = range(value, |s| {
        if let Some(i) = MONTHS.iter().position(|m| *m == s) {
            return Ok(i as u32 + 1);
        }
        match s.parse::<u32>() {
            Ok(m) if (1..=12).contains(&m) => Ok(m),
            _ => Err(format!("{s:?} is not a month (january … december, or 1 to 12)")),
        }
    })?;
    if a > b {
        return Err(format!(
            "{value:?}: the range ends before it starts (write it as two ranges)"
        ));
    }
    Ok((a, b))
}

/// `2026`, `2026:2027`.
pub fn parse_years(value: &str) -> Result<(i32, i32), String> {
    let (a, b) = range(value, |s| match number(s, "year")? {
        y if (1..=9999).contains(&y) => Ok(y),
        y => Err(format!("{y} is not a year (1 to 9999)")),
    })?;
    if a > b {
        return Err(format!("{value:?}: the range ends before it starts"));
    }
    Ok((a, b))
}

/// An IANA time zone (`Europe/Berlin`, `UTC`).
pub fn parse_location(value: &str) -> Result<Tz, String> {
    value
        .parse::<Tz>()
        .map_err(|_| format!("unknown time zone {value:?} (use an IANA name such as Europe/Berlin or UTC)"))
}

fn days_in_month(d: NaiveDate) -> i32 {
    let first = d.with_day(1).unwrap_or(d);
    let next = first.checked_add_months(chrono::Months::new(1)).unwrap_or(first);
    (next - first).num_days() as i32
}

fn any<T: Copy + PartialOrd>(ranges: &[(T, T)], x: T) -> bool {
    ranges.is_empty() || ranges.iter().any(|&(a, b)| a <= x && x <= b)
}

impl TimeInterval {
    /// Whether the wall-clock day of `local` matches every date list given (the times aside).
    fn day_matches(&self, local: NaiveDate) -> bool {
        let dim = days_in_month(local);
        let day = local.day() as i32;
        let days = self.days_of_month.is_empty()
            || self.days_of_month.iter().any(|&(a, b)| {
                let from_end = |d: i32| if d < 0 { dim + d + 1 } else { d };
                let (a, b) = (from_end(a), from_end(b).min(dim));
                a <= dim && a.max(1) <= day && day <= b
            });
        days && any(&self.weekdays, local.weekday().num_days_from_sunday())
            && any(&self.months, local.month())
            && any(&self.years, local.year())
    }

    /// Whether `t` is inside the interval.
    pub fn contains(&self, t: DateTime<Utc>) -> bool {
        let local = t.with_timezone(&self.location).naive_local();
        let minute = local.hour() * 60 + local.minute();
        self.day_matches(local.date())
            && (self.times.is_empty() || self.times.iter().any(|&(s, e)| s <= minute && minute < e))
    }

    /// The first moment after `t` at which [`TimeInterval::contains`] may answer otherwise: the next start or end
    /// of one of its times that day, else the next local midnight. Never later than a change.
    pub fn next_change(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        let local = t.with_timezone(&self.location).naive_local();
        let minute = local.hour() * 60 + local.minute();
        let boundary = (self.times.iter())
            .flat_map(|&(s, e)| [s, e])
            .chain([DAY])
            .filter(|&b| b > minute)
            .min()
            .unwrap_or(DAY);
        let midnight = local.date().and_hms_opt(0, 0, 0).unwrap_or(local);
        let at = midnight + chrono::Duration::minutes(i64::from(boundary));
        self.first_after(at, t)
    }

    /// The first instant after `t` whose wall-clock time is `local` or, when the clocks skip it (the change to
    /// summer time), the first that comes after it.
    fn first_after(&self, local: NaiveDateTime, t: DateTime<Utc>) -> DateTime<Utc> {
        for skipped in 0..=4 {
            let wall = local + chrono::Duration::minutes(15 * skipped);
            let mapped = self.location.from_local_datetime(&wall);
            let later = [mapped.earliest(), mapped.latest()]
                .into_iter()
                .flatten()
                .map(|d| d.with_timezone(&Utc))
                .find(|d| *d > t);
            if let Some(d) = later {
                return d;
            }
        }
        // Not reached with real zones (no gap is longer than an hour); a minute on is never past a change.
        t + chrono::Duration::minutes(1)
    }
}

/// The named intervals of `time_intervals`: a name is inside when one of its entries is.
#[derive(Debug, Clone, Default)]
pub struct TimeIntervals {
    by_name: BTreeMap<String, Vec<TimeInterval>>,
}

impl TimeIntervals {
    pub fn new(by_name: BTreeMap<String, Vec<TimeInterval>>) -> Self {
        Self { by_name }
    }

    /// Whether `t` is inside the interval `name` (an unknown name: never; the configuration refuses one).
    pub fn contains(&self, name: &str, t: DateTime<Utc>) -> bool {
        self.by_name
            .get(name)
            .is_some_and(|list| list.iter().any(|i| i.contains(t)))
    }

    fn next_change(&self, names: &[String], t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        (names.iter())
            .filter_map(|n| self.by_name.get(n))
            .flatten()
            .map(|i| i.next_change(t))
            .min()
    }
}

/// A team's or a route's `mute_time_intervals` and `active_time_intervals`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quiet {
    pub mute: Vec<String>,
    pub active: Vec<String>,
}

/// Why and until when a team or a route is muted now.
#[derive(Debug, Clone, PartialEq)]
pub struct Muted {
    /// The intervals that mute it: the `mute_time_intervals` it is inside, else (`outside`) its
    /// `active_time_intervals`.
    pub intervals: Vec<String>,
    pub outside: bool,
    /// When it is next not muted; `None` when not within a year and a day.
    pub until: Option<DateTime<Utc>>,
}

impl Quiet {
    pub fn is_empty(&self) -> bool {
        self.mute.is_empty() && self.active.is_empty()
    }

    fn muted_at(&self, intervals: &TimeIntervals, t: DateTime<Utc>) -> bool {
        self.mute.iter().any(|n| intervals.contains(n, t))
            || (!self.active.is_empty() && !self.active.iter().any(|n| intervals.contains(n, t)))
    }

    /// Whether it is muted at `now`, why, and until when.
    pub fn muted(&self, intervals: &TimeIntervals, now: DateTime<Utc>) -> Option<Muted> {
        if self.is_empty() || !self.muted_at(intervals, now) {
            return None;
        }
        let inside: Vec<String> = (self.mute.iter())
            .filter(|n| intervals.contains(n, now))
            .cloned()
            .collect();
        let outside = inside.is_empty();
        Some(Muted {
            intervals: if outside { self.active.clone() } else { inside },
            outside,
            until: self.until(intervals, now),
        })
    }

    /// The first moment after `now` when it is not muted, stepping from one change of its intervals to the next.
    fn until(&self, intervals: &TimeIntervals, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let horizon = now + chrono::Duration::days(367);
        let names: Vec<String> = self.mute.iter().chain(&self.active).cloned().collect();
        let mut t = now;
        while t < horizon {
            t = intervals.next_change(&names, t)?;
            if !self.muted_at(intervals, t) {
                return Some(t);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("a time").with_timezone(&Utc)
    }

    #[test]
    fn values_parse_as_alertmanager_reads_them_or_say_what_is_wrong() {
        assert_eq!(parse_weekdays("monday:friday"), Ok((1, 5)));
        assert_eq!(parse_weekdays("Saturday"), Ok((6, 6)));
        assert!(
            parse_weekdays("saturday:sunday")
                .unwrap_err()
                .contains("week starts on Sunday")
        );
        assert!(parse_weekdays("funday").unwrap_err().contains("not a day of the week"));
        assert!(parse_weekdays("monday:tuesday:friday").is_err());
        assert_eq!(parse_days_of_month("1:5"), Ok((1, 5)));
        assert_eq!(parse_days_of_month("-3:-1"), Ok((-3, -1)));
        assert_eq!(parse_days_of_month("15:-1"), Ok((15, -1)));
        assert!(parse_days_of_month("0").is_err());
        assert!(parse_days_of_month("32").is_err());
        assert!(parse_days_of_month("-1:5").is_err());
        assert!(parse_days_of_month("10:2").is_err());
        assert!(parse_days_of_month("-1:-3").is_err());
        assert!(parse_days_of_month("first").is_err());
        assert_eq!(parse_months("january:march"), Ok((1, 3)));
        assert_eq!(parse_months("4:6"), Ok((4, 6)));
        assert!(parse_months("13").is_err());
        assert!(parse_months("december:january").is_err());
        assert_eq!(parse_years("2026:2027"), Ok((2026, 2027)));
        assert!(parse_years("2027:2026").is_err());
        assert!(parse_years("-5").is_err());
        assert_eq!(parse_time("24:00"), Ok(DAY));
        assert_eq!(parse_time("09:30"), Ok(570));
        for bad in ["24:01", "9:00", "09:60", "25:00", "0900", "ab:cd", ""] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_times("22:00", "24:00"), Ok((1320, DAY)));
        assert_eq!(parse_times("22:00", "06:00").unwrap_err().0, "end_time");
        assert_eq!(parse_times("10:00", "10:00").unwrap_err().0, "end_time");
        assert!(parse_location("Europe/Berlin").is_ok());
        assert!(parse_location("Mars/Olympus").is_err());
    }

    #[test]
    fn an_interval_contains_what_every_list_given_matches() {
        let berlin = parse_location("Europe/Berlin").expect("zone");
        let nights = TimeInterval {
            times: vec![(0, 7 * 60), (22 * 60, DAY)],
            ..Default::default()
        };
        let weekend = TimeInterval {
            weekdays: vec![(0, 0), (6, 6)],
            ..Default::default()
        };
        let office = TimeInterval {
            times: vec![(9 * 60, 17 * 60)],
            weekdays: vec![(1, 5)],
            location: berlin,
            ..Default::default()
        };
        let month_end = TimeInterval {
            days_of_month: vec![(-3, -1)],
            ..Default::default()
        };
        let from_the_29th = TimeInterval {
            days_of_month: vec![(29, 31)],
            ..Default::default()
        };
        let first_quarter_2027 = TimeInterval {
            months: vec![(1, 3)],
            years: vec![(2027, 2027)],
            ..Default::default()
        };
        // (interval, moment, inside?, why)
        let cases = [
            (&nights, "2026-12-07T06:59:00Z", true, "a minute before the end"),
            (&nights, "2026-12-07T07:00:00Z", false, "the end time is not inside"),
            (&nights, "2026-12-07T22:00:00Z", true, "the start time is inside"),
            (&nights, "2026-12-07T23:59:59Z", true, "24:00 is the end of the day"),
            (&weekend, "2026-12-05T12:00:00Z", true, "a Saturday"),
            (&weekend, "2026-12-06T12:00:00Z", true, "a Sunday"),
            (&weekend, "2026-12-07T00:00:00Z", false, "a Monday"),
            (
                &office,
                "2026-12-07T08:00:00Z",
                true,
                "09:00 in Berlin (UTC+1 in winter)",
            ),
            (&office, "2026-12-07T16:00:00Z", false, "17:00 in Berlin"),
            (
                &office,
                "2026-07-06T07:00:00Z",
                true,
                "09:00 in Berlin in summer (UTC+2)",
            ),
            (&office, "2026-07-06T15:00:00Z", false, "17:00 in Berlin in summer"),
            (&office, "2026-12-05T10:00:00Z", false, "a Saturday"),
            (
                &office,
                "2026-12-06T23:30:00Z",
                false,
                "Sunday in UTC, Monday 00:30 in Berlin: before 09:00",
            ),
            (
                &month_end,
                "2026-02-26T12:00:00Z",
                true,
                "three days before February's end",
            ),
            (&month_end, "2026-02-25T12:00:00Z", false, "four days before"),
            (&month_end, "2026-12-29T00:00:00Z", true, "the 29th of a 31-day month"),
            (&month_end, "2026-12-28T23:59:00Z", false, "the 28th of a 31-day month"),
            (
                &from_the_29th,
                "2026-02-28T12:00:00Z",
                false,
                "February 2026 has no 29th",
            ),
            (&from_the_29th, "2028-02-29T12:00:00Z", true, "a leap year's has"),
            (
                &from_the_29th,
                "2026-04-30T12:00:00Z",
                true,
                "cut at a 30-day month's end",
            ),
            (&first_quarter_2027, "2027-03-31T23:59:00Z", true, "March 2027"),
            (&first_quarter_2027, "2027-04-01T00:00:00Z", false, "April"),
            (&first_quarter_2027, "2026-02-01T00:00:00Z", false, "another year"),
        ];
        for (interval, t, want, why) in cases {
            assert_eq!(interval.contains(at(t)), want, "{why} ({t})");
        }
    }

    fn intervals(list: &[(&str, TimeInterval)]) -> TimeIntervals {
        TimeIntervals::new(list.iter().map(|(n, i)| (n.to_string(), vec![i.clone()])).collect())
    }

    fn quiet(mute: &[&str], active: &[&str]) -> Quiet {
        Quiet {
            mute: mute.iter().map(|s| s.to_string()).collect(),
            active: active.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_team_is_muted_inside_its_mute_intervals_and_outside_its_active_ones_until_that_changes() {
        let berlin = parse_location("Europe/Berlin").expect("zone");
        let all = intervals(&[
            (
                "nights",
                TimeInterval {
                    times: vec![(0, 7 * 60), (22 * 60, DAY)],
                    location: berlin,
                    ..Default::default()
                },
            ),
            (
                "weekend",
                TimeInterval {
                    weekdays: vec![(0, 0), (6, 6)],
                    location: berlin,
                    ..Default::default()
                },
            ),
            (
                "office",
                TimeInterval {
                    times: vec![(9 * 60, 17 * 60)],
                    weekdays: vec![(1, 5)],
                    location: berlin,
                    ..Default::default()
                },
            ),
        ]);
        let both = quiet(&["nights", "weekend"], &[]);
        let office = quiet(&[], &["office"]);
        // (who, now, muted by, outside, until, why)
        type Case<'a> = (&'a Quiet, &'a str, Option<(&'a [&'a str], bool, &'a str)>, &'a str);
        let cases: [Case; 7] = [
            (&both, "2026-12-07T12:00:00Z", None, "Monday noon: not muted"),
            (
                &both,
                "2026-12-07T22:30:00Z",
                Some((&["nights"][..], false, "2026-12-08T06:00:00Z")),
                "Monday 23:30 in Berlin: until 07:00 Berlin",
            ),
            (
                &both,
                "2026-12-05T10:00:00Z",
                Some((&["weekend"][..], false, "2026-12-07T06:00:00Z")),
                "Saturday: the weekend, then Sunday night and Monday's early hours",
            ),
            (
                &office,
                "2026-12-07T10:00:00Z",
                None,
                "Monday 11:00 in Berlin: in office hours",
            ),
            (
                &office,
                "2026-12-04T17:00:00Z",
                Some((&["office"][..], true, "2026-12-07T08:00:00Z")),
                "Friday 18:00: muted outside office hours until Monday 09:00 Berlin",
            ),
            (
                &both,
                "2026-03-28T23:30:00Z",
                Some((&["nights", "weekend"][..], false, "2026-03-30T05:00:00Z")),
                "the weekend summer time starts: Monday 07:00 is 05:00 UTC",
            ),
            (
                &both,
                "2026-10-25T00:30:00Z",
                Some((&["nights", "weekend"][..], false, "2026-10-26T06:00:00Z")),
                "the night summer time ends (02:00 happens twice): Monday 07:00 is 06:00 UTC",
            ),
        ];
        for (who, now, want, why) in cases {
            let got = who.muted(&all, at(now));
            match want {
                None => assert_eq!(got, None, "{why}"),
                Some((names, outside, until)) => {
                    let got = got.unwrap_or_else(|| panic!("{why}: not muted"));
                    assert_eq!(got.intervals, names, "{why}");
                    assert_eq!(got.outside, outside, "{why}");
                    assert_eq!(got.until, Some(at(until)), "{why}");
                }
            }
        }
    }

    #[test]
    fn the_next_change_is_never_past_one_even_across_summer_time() {
        let berlin = parse_location("Europe/Berlin").expect("zone");
        let early = TimeInterval {
            times: vec![(2 * 60 + 30, 3 * 60)],
            location: berlin,
            ..Default::default()
        };
        // 2026-03-29 02:30 does not happen in Berlin (02:00 → 03:00): the next change is the first moment after.
        let t = at("2026-03-29T00:30:00Z");
        assert_eq!(early.next_change(t), at("2026-03-29T01:00:00Z"));
        // Each minute of the 24 hours around the change: a minute-by-minute walk agrees with `next_change`.
        let mut t = at("2026-03-28T12:00:00Z");
        while t < at("2026-03-29T12:00:00Z") {
            let next = early.next_change(t);
            assert!(next > t);
            let mut m = t + chrono::Duration::minutes(1);
            while m < next {
                assert_eq!(
                    early.contains(m),
                    early.contains(t),
                    "no change between {t} and {next} ({m})"
                );
                m += chrono::Duration::minutes(1);
            }
            t = next;
        }
    }

    #[test]
    fn always_muted_has_no_end() {
        let all = intervals(&[("always", TimeInterval::default())]);
        let got = quiet(&["always"], &[])
            .muted(&all, at("2026-12-07T12:00:00Z"))
            .expect("muted");
        assert_eq!(got.until, None);
    }
}
