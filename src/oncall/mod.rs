//! Who is on call: each `schedules.<name>` answered at an instant — its overrides first, else its rotation
//! (`rotation`, hand-offs at a local time of its time zone) or its iCalendar (`calendar` parses one, `calendars`
//! keeps each schedule's last good copy and fetches those given by URL). Pure but for `calendars`' fetching: the
//! escalation step `on_call`, `GET /v1/oncall`, `herald oncall` and the status page all ask [`who`]. A rotation,
//! a calendar and a wall-clock time are domain types ([`crate::domain::rotation`], [`crate::domain::calendar`],
//! [`crate::domain::time`], re-exported here), so the configuration checks them at load without importing this.

pub mod calendars;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use crate::configuration::ScheduleSettings;
pub use crate::domain::calendar::{self, Calendar, Event};
pub use crate::domain::rotation::{self, Rotation};
pub use crate::domain::time::{local_instant, parse_time};
pub use calendars::{CalendarCopy, Calendars};

/// Whoever a schedule has on call at an instant, and for how long.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OnCall {
    /// The `people` name.
    pub person: String,
    /// Since when they are on call (their override, hand-off or event began), if known.
    pub since: Option<DateTime<Utc>>,
    /// Until when: their override, shift or event ends, or an override takes over (none: open-ended).
    pub until: Option<DateTime<Utc>>,
    /// What says so.
    pub by: Source,
}

/// What put a person on call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Override,
    Rotation,
    Calendar,
}

/// The schedule's time zone (parsed at load).
pub fn zone(schedule: &ScheduleSettings) -> Tz {
    schedule.timezone.tz()
}

/// Who `schedule` has on call at `at`: the last override listed that covers `at`, else the rotation's person, else
/// the person of the calendar event covering `at` (`calendar`: the schedule's copy, when it has `ical`). `None`:
/// nobody (before the rotation starts, between events, no copy of the calendar yet).
pub fn who(schedule: &ScheduleSettings, calendar: Option<&Calendar>, at: DateTime<Utc>) -> Option<OnCall> {
    let tz = zone(schedule);
    let overrides: Vec<(String, DateTime<Utc>, DateTime<Utc>)> = (schedule.overrides.iter())
        .map(|o| {
            let (from, until) = o.span(tz);
            (o.person.clone(), from, until)
        })
        .collect();
    // An override beginning later cuts whoever is on call now short.
    let next_override = |after: DateTime<Utc>| overrides.iter().map(|(_, from, _)| *from).filter(|f| *f > after).min();
    let cut = |until: Option<DateTime<Utc>>| match (until, next_override(at)) {
        (Some(u), Some(o)) => Some(u.min(o)),
        (u, o) => u.or(o),
    };
    if let Some((person, from, until)) = overrides
        .iter()
        .rev()
        .find(|(_, from, until)| *from <= at && at < *until)
    {
        return Some(OnCall {
            person: person.clone(),
            since: Some(*from),
            until: cut(Some(*until)),
            by: Source::Override,
        });
    }
    if let Some(r) = &schedule.rotation {
        let rotation = r.rotation(tz).ok()?;
        let shift = rotation.at(at)?;
        return Some(OnCall {
            person: shift.person.to_string(),
            since: Some(shift.since),
            until: cut(Some(shift.until)),
            by: Source::Rotation,
        });
    }
    let event = calendar?.covering(at)?;
    Some(OnCall {
        person: event.person.clone(),
        since: Some(event.start),
        until: cut(Some(event.end)),
        by: Source::Calendar,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configuration::Settings;

    fn settings(schedules: &str) -> Settings {
        Settings::from_yaml(&format!(
            "people: {{alice: {{email: alice@example.com}}, bob: {{email: bob@example.com}}, carol: {{slack: U0CAROL1}}}}\n\
             schedules: {schedules}"
        ))
        .expect("valid")
    }

    fn utc(text: &str) -> DateTime<Utc> {
        parse_time(text, Tz::UTC).expect("a time")
    }

    #[test]
    fn an_override_wins_over_the_rotation_and_cuts_the_shift_before_it_short() {
        let s = settings(
            "{primary: {timezone: Europe/Berlin, rotation: {people: [alice, bob], every: 1w, start: 2026-03-02, \
             handoff: '09:00'}, overrides: [{person: carol, from: '2026-03-04 12:00', until: '2026-03-05 12:00'}]}}",
        );
        let p = &s.schedules["primary"];
        let before = who(p, None, utc("2026-03-04T08:00:00Z")).expect("alice");
        assert_eq!((before.person.as_str(), before.by), ("alice", Source::Rotation));
        assert_eq!(
            before.until,
            Some(utc("2026-03-04T11:00:00Z")),
            "carol's override begins at 12:00 Berlin"
        );
        let during = who(p, None, utc("2026-03-04T12:00:00Z")).expect("carol");
        assert_eq!((during.person.as_str(), during.by), ("carol", Source::Override));
        assert_eq!(during.until, Some(utc("2026-03-05T11:00:00Z")));
        assert_eq!(
            who(p, None, utc("2026-03-05T11:00:00Z")).expect("alice").person,
            "alice"
        );
        assert_eq!(
            who(p, None, utc("2026-03-02T07:59:59Z")),
            None,
            "before the rotation starts"
        );
    }

    #[test]
    fn a_local_time_in_the_hour_a_clock_skips_is_the_hour_after() {
        let berlin: Tz = "Europe/Berlin".parse().expect("zone");
        assert_eq!(parse_time("2026-03-29 02:30", berlin), Ok(utc("2026-03-29T01:30:00Z")));
        assert_eq!(
            parse_time("2026-10-25 02:30", berlin),
            Ok(utc("2026-10-25T00:30:00Z")),
            "the earlier"
        );
        assert_eq!(
            parse_time("2026-03-29T09:00:00+02:00", Tz::UTC),
            Ok(utc("2026-03-29T07:00:00Z"))
        );
        assert!(parse_time("next tuesday", berlin).is_err());
    }
}
