//! When a team's digest is due (`teams.<t>.digest.schedule`, parsed once at load): the schedule grammar (`Mon-Fri 09:00`, `daily 08:30 17:00`) and its slots, the
//! instants in UTC at which a digest is sent, read in the team's time zone with daylight-saving changes handled.
//!
//! A slot in a skipped hour (02:30 on the spring-forward day) is sent at the first valid instant after it (03:00
//! local); a slot in a repeated hour (fall back) is sent once, at the earlier of the two instants.

use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveTime, TimeZone, Utc, Weekday};
use chrono_tz::Tz;

/// A parsed `schedule`: on which days, at which local times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Indexed by `Weekday::num_days_from_monday`.
    days: [bool; 7],
    /// Sorted, without duplicates.
    times: Vec<NaiveTime>,
}

const DAY_NAMES: [(&str, Weekday); 7] = [
    ("mon", Weekday::Mon),
    ("tue", Weekday::Tue),
    ("wed", Weekday::Wed),
    ("thu", Weekday::Thu),
    ("fri", Weekday::Fri),
    ("sat", Weekday::Sat),
    ("sun", Weekday::Sun),
];

fn day(name: &str) -> Result<Weekday, String> {
    DAY_NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name.trim()))
        .map(|(_, d)| *d)
        .ok_or_else(|| format!("unknown day {name:?} (use Mon, Tue, Wed, Thu, Fri, Sat, Sun or daily)"))
}

fn time(text: &str) -> Result<NaiveTime, String> {
    let (h, m) = text
        .split_once(':')
        .ok_or_else(|| format!("time {text:?} is not HH:MM"))?;
    let number = |s: &str, max: u32| {
        s.parse::<u32>()
            .ok()
            .filter(|v| *v <= max && s.len() == 2)
            .ok_or_else(|| format!("time {text:?} is not HH:MM (00:00 to 23:59)"))
    };
    let (h, m) = (number(h, 23)?, number(m, 59)?);
    NaiveTime::from_hms_opt(h, m, 0).ok_or_else(|| format!("time {text:?} is not a time of day"))
}

impl std::str::FromStr for Schedule {
    type Err = String;

    /// `DAYS TIME [TIME…]`: DAYS is `daily` or a comma-separated list of days and ranges (`Mon-Fri`, `Mon,Wed,Fri`,
    /// `Sat`); each TIME is `HH:MM`, 24-hour, separated by spaces or commas.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut words = s.split_whitespace();
        let days_word = words
            .next()
            .ok_or("is empty: write days and one or more times, e.g. \"Mon-Fri 09:00\"")?;
        let mut days = [false; 7];
        if days_word.eq_ignore_ascii_case("daily") {
            days = [true; 7];
        } else {
            for part in days_word.split(',').filter(|p| !p.is_empty()) {
                match part.split_once('-') {
                    Some((a, b)) => {
                        let (mut d, last) = (day(a)?, day(b)?);
                        // A range may wrap around the week (`Sat-Mon`).
                        loop {
                            days[d.num_days_from_monday() as usize] = true;
                            if d == last {
                                break;
                            }
                            d = d.succ();
                        }
                    }
                    None => days[day(part)?.num_days_from_monday() as usize] = true,
                }
            }
        }
        let mut times = Vec::new();
        for t in words.flat_map(|w| w.split(',')).filter(|t| !t.is_empty()) {
            times.push(time(t)?);
        }
        if times.is_empty() {
            return Err(format!(
                "{s:?} has no time: write days then one or more HH:MM, e.g. \"Mon-Fri 09:00\""
            ));
        }
        times.sort();
        times.dedup();
        Ok(Self { days, times })
    }
}

/// The instant a local date and time is in `tz`: the earlier one when the hour repeats (fall back), the first
/// valid instant after it when the hour is skipped (spring forward).
pub fn instant(tz: Tz, date: NaiveDate, at: NaiveTime) -> Option<DateTime<Utc>> {
    let local = date.and_time(at);
    // Gaps are whole minutes long and at most a few hours: the first minute after the gap is its end.
    for minutes in 0..=24 * 60 {
        match tz.from_local_datetime(&(local + Duration::minutes(minutes))) {
            LocalResult::Single(t) => return Some(t.with_timezone(&Utc)),
            LocalResult::Ambiguous(earlier, _) => return Some(earlier.with_timezone(&Utc)),
            LocalResult::None => continue,
        }
    }
    None
}

impl Schedule {
    /// The slots of the local dates `from..=to`, in order.
    fn slots(&self, tz: Tz, from: NaiveDate, to: NaiveDate) -> Vec<DateTime<Utc>> {
        let mut out: Vec<DateTime<Utc>> = from
            .iter_days()
            .take_while(|d| *d <= to)
            .filter(|d| self.days[d.weekday().num_days_from_monday() as usize])
            .flat_map(|d| self.times.iter().filter_map(move |t| instant(tz, d, *t)))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The latest slot at or before `now` (within the last eight days: every schedule has one a week).
    pub fn last_at_or_before(&self, tz: Tz, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let today = now.with_timezone(&tz).date_naive();
        let slots = self.slots(tz, today - Duration::days(8), today + Duration::days(1));
        slots.into_iter().rev().find(|s| *s <= now)
    }

    /// The first slot after `now`.
    pub fn next_after(&self, tz: Tz, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let today = now.with_timezone(&tz).date_naive();
        let slots = self.slots(tz, today - Duration::days(1), today + Duration::days(8));
        slots.into_iter().find(|s| *s > now)
    }
}

pub use super::time::time_zone;

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().expect("a UTC time")
    }

    fn berlin() -> Tz {
        time_zone("Europe/Berlin").expect("known")
    }

    #[test]
    fn nine_in_berlin_is_seven_utc_in_summer_and_eight_in_winter() {
        let s: Schedule = "Mon-Fri 09:00".parse().expect("parses");
        // Fri 2026-10-23 is CEST; the clocks go back on Sun 2026-10-25; Mon 2026-10-26 is CET.
        assert_eq!(
            s.last_at_or_before(berlin(), utc("2026-10-23T12:00:00Z")),
            Some(utc("2026-10-23T07:00:00Z"))
        );
        assert_eq!(
            s.next_after(berlin(), utc("2026-10-23T07:00:00Z")),
            Some(utc("2026-10-26T08:00:00Z")),
            "the weekend has no slot"
        );
    }

    #[test]
    fn a_slot_in_the_skipped_hour_is_sent_when_the_hour_ends() {
        // 2026-03-29: Berlin goes from 02:00 CET to 03:00 CEST (01:00 UTC).
        let s: Schedule = "daily 02:30".parse().expect("parses");
        assert_eq!(
            s.next_after(berlin(), utc("2026-03-28T23:00:00Z")),
            Some(utc("2026-03-29T01:00:00Z"))
        );
    }

    #[test]
    fn a_slot_in_the_repeated_hour_is_sent_once_at_the_earlier_instant() {
        // 2026-10-25: Berlin's 02:00–03:00 happens twice, first at +02:00 then at +01:00.
        let s: Schedule = "daily 02:30".parse().expect("parses");
        let first = s.next_after(berlin(), utc("2026-10-24T22:00:00Z"));
        assert_eq!(first, Some(utc("2026-10-25T00:30:00Z")));
        assert_eq!(
            s.next_after(berlin(), utc("2026-10-25T00:30:00Z")),
            Some(utc("2026-10-26T01:30:00Z")),
            "no second slot in the repeated hour"
        );
    }

    #[test]
    fn days_can_be_listed_ranged_wrapped_or_daily_and_times_several() {
        let s: Schedule = "Mon,Wed,Fri 09:00,17:30".parse().expect("parses");
        assert_eq!(s.times.len(), 2);
        assert_eq!(s.days, [true, false, true, false, true, false, false]);
        let s: Schedule = "Sat-Mon 08:00 12:00".parse().expect("parses");
        assert_eq!(s.days, [true, false, false, false, false, true, true]);
        assert_eq!(s.times.len(), 2);
        let s: Schedule = "DAILY 07:05".parse().expect("parses");
        assert_eq!(s.days, [true; 7]);
    }

    #[test]
    fn a_bad_schedule_says_what_is_wrong() {
        for (text, says) in [
            ("", "is empty"),
            ("Mon-Fri", "has no time"),
            ("Mon-Fry 09:00", "unknown day \"Fry\""),
            ("Mon-Fri 9am", "is not HH:MM"),
            ("Mon-Fri 24:00", "00:00 to 23:59"),
            ("Mon-Fri 9:00", "is not HH:MM"),
        ] {
            let e = text.parse::<Schedule>().expect_err(text);
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn an_unknown_time_zone_is_refused() {
        assert!(time_zone("Europe/Atlantis").is_err());
        assert!(time_zone("UTC").is_ok());
    }
}
