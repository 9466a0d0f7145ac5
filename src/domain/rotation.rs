//! A rotation (`schedules.<name>.rotation`): its people take turns, each for `every`, from `start`, handing off at
//! `handoff` in the schedule's time zone. A rotation of whole days hands off at that wall-clock time whatever the
//! daylight saving (a week is 167 or 169 hours across a change); a shorter or uneven one (`12h`, `36h`) counts
//! elapsed time from its first hand-off.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use chrono_tz::Tz;

use super::time::local_instant;

const DAY: u64 = 86_400;

/// A rotation, parsed.
#[derive(Debug, Clone)]
pub struct Rotation<'a> {
    people: &'a [String],
    every: Duration,
    start: NaiveDate,
    handoff: NaiveTime,
    tz: Tz,
}

/// One person's turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shift<'a> {
    pub person: &'a str,
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
}

/// `HH:MM` (or `HH:MM:SS`), the hand-off's wall-clock time.
pub fn parse_handoff(text: &str) -> Result<NaiveTime, String> {
    NaiveTime::parse_from_str(text.trim(), "%H:%M")
        .or_else(|_| NaiveTime::parse_from_str(text.trim(), "%H:%M:%S"))
        .map_err(|_| format!("{text:?} is not a time of day: write HH:MM, such as \"09:00\""))
}

/// `YYYY-MM-DD`, the day of the first hand-off.
pub fn parse_start(text: &str) -> Result<NaiveDate, String> {
    NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
        .map_err(|_| format!("{text:?} is not a day: write YYYY-MM-DD, such as 2026-03-02 (the first hand-off's day)"))
}

impl<'a> Rotation<'a> {
    /// `people` taking turns of `every` from `start`, handing off at `handoff` in `tz`; an error names the key that
    /// is wrong (`people` or `every`: the configuration reports it at load, with the rest of the key path).
    pub fn new(
        people: &'a [String],
        every: Duration,
        start: NaiveDate,
        handoff: NaiveTime,
        tz: Tz,
    ) -> Result<Self, (&'static str, String)> {
        if people.is_empty() {
            return Err(("people", "must name at least one person".into()));
        }
        if every < Duration::from_secs(60) {
            return Err(("every", "must be at least 1m (a turn of 0 never hands off)".into()));
        }
        if every > Duration::from_secs(365 * DAY) {
            return Err(("every", "must be at most a year".into()));
        }
        Ok(Self {
            people,
            every,
            start,
            handoff,
            tz,
        })
    }

    /// The `k`-th hand-off (0: the first).
    fn handoff(&self, k: i64) -> DateTime<Utc> {
        let secs = self.every.as_secs();
        // Past the calendar's end (a start in the year 200000): never.
        if secs.is_multiple_of(DAY) {
            (self
                .start
                .checked_add_signed(chrono::Duration::days(k * (secs / DAY) as i64)))
            .map_or(DateTime::<Utc>::MAX_UTC, |day| {
                local_instant(self.tz, day.and_time(self.handoff))
            })
        } else {
            let first = local_instant(self.tz, self.start.and_time(self.handoff));
            (first.checked_add_signed(chrono::Duration::seconds(k * secs as i64))).unwrap_or(DateTime::<Utc>::MAX_UTC)
        }
    }

    /// Whose turn it is at `at`; none before the first hand-off.
    pub fn at(&self, at: DateTime<Utc>) -> Option<Shift<'a>> {
        let first = self.handoff(0);
        if at < first {
            return None;
        }
        // A first guess from elapsed time, then corrected by at most a step or two either way (daylight saving).
        let mut k = ((at - first).num_seconds() / self.every.as_secs() as i64).max(0);
        while k > 0 && self.handoff(k) > at {
            k -= 1;
        }
        while self.handoff(k + 1) <= at {
            k += 1;
        }
        let person = &self.people[(k as usize) % self.people.len()];
        Some(Shift {
            person,
            since: self.handoff(k),
            until: self.handoff(k + 1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEOPLE: [&str; 3] = ["alice", "bob", "carol"];

    fn people() -> Vec<String> {
        PEOPLE.map(String::from).to_vec()
    }

    fn rotation<'a>(people: &'a [String], every_hours: u64, tz: &str) -> Rotation<'a> {
        let every = Duration::from_secs(every_hours * 3600);
        let start = parse_start("2026-03-23").expect("a day");
        let handoff = parse_handoff("09:00").expect("a time");
        Rotation::new(people, every, start, handoff, tz.parse().expect("zone")).expect("valid")
    }

    fn utc(t: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(t).expect("time").with_timezone(&Utc)
    }

    #[test]
    fn a_weekly_rotation_hands_off_at_nine_in_berlin_on_both_sides_of_the_clocks_going_forward() {
        let people = people();
        let r = rotation(&people, 7 * 24, "Europe/Berlin");
        // 23 March 2026 is CET (+01:00); 29 March the clocks go forward; 30 March is CEST (+02:00).
        let first = r.at(utc("2026-03-23T08:00:00Z")).expect("alice");
        assert_eq!((first.person, first.until), ("alice", utc("2026-03-30T07:00:00Z")));
        assert_eq!(r.at(utc("2026-03-30T06:59:59Z")).expect("still alice").person, "alice");
        let second = r.at(utc("2026-03-30T07:00:00Z")).expect("bob");
        assert_eq!((second.person, second.since), ("bob", utc("2026-03-30T07:00:00Z")));
        assert_eq!(r.at(utc("2026-04-06T07:00:00Z")).expect("carol").person, "carol");
        assert_eq!(r.at(utc("2026-04-13T07:00:00Z")).expect("alice again").person, "alice");
        assert_eq!(r.at(utc("2026-03-23T07:59:59Z")), None, "before the first hand-off");
    }

    #[test]
    fn a_twelve_hour_rotation_counts_elapsed_time() {
        let people = people();
        let r = rotation(&people, 12, "UTC");
        assert_eq!(r.at(utc("2026-03-23T20:59:00Z")).expect("alice").person, "alice");
        assert_eq!(r.at(utc("2026-03-23T21:00:00Z")).expect("bob").person, "bob");
        assert_eq!(r.at(utc("2026-03-24T09:00:00Z")).expect("carol").person, "carol");
        assert_eq!(
            r.at(utc("2027-03-24T09:00:00Z")).expect("someone").until,
            utc("2027-03-24T21:00:00Z")
        );
    }

    #[test]
    fn a_wrong_rotation_says_what_is_wrong() {
        let (start, handoff) = (
            parse_start("2026-03-23").expect("a day"),
            parse_handoff("09:00").expect("a time"),
        );
        let none = Rotation::new(&[], Duration::from_secs(3600), start, handoff, Tz::UTC).expect_err("nobody");
        assert_eq!(none.0, "people");
        let zero = Rotation::new(&people(), Duration::ZERO, start, handoff, Tz::UTC).expect_err("no turn");
        assert_eq!(zero.0, "every");
        assert!(parse_start("23/03/2026").is_err());
        assert!(parse_handoff("9am").is_err());
        assert!(parse_handoff("25:00").is_err());
    }
}
