//! A schedule kept elsewhere, as iCalendar (RFC 5545) text: a small strict reader of what an on-call calendar
//! needs — each `VEVENT`'s `DTSTART`, `DTEND` (or `DURATION` of days, hours, minutes), `SUMMARY`, in UTC (`…Z`),
//! with a `TZID` (an IANA zone), floating (the schedule's time zone) or as a day (`VALUE=DATE`: midnight in the
//! schedule's time zone; a day without an end is that one day). An event's person is the `people` name or e-mail
//! address its summary is (letter case aside). Not supported, and said so: repeating events (`RRULE`, `RDATE`)
//! are skipped and counted, as are cancelled events and events whose summary names nobody; anything else that does
//! not read (no `BEGIN:VCALENDAR`, an event without a start, a time that does not parse) refuses the whole
//! calendar, so a half-read one never replaces a good copy.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use super::time::local_instant;

/// An event naming a person on call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub person: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// The events of one calendar, and what was skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Calendar {
    #[serde(skip)]
    pub events: Vec<Event>,
    /// Events that repeat (`RRULE`/`RDATE`): not supported, skipped.
    pub repeating: usize,
    /// Events whose summary names no person of `people`, by their summary (the first few).
    pub unknown: Vec<String>,
    /// Cancelled events (`STATUS:CANCELLED`), skipped.
    pub cancelled: usize,
}

/// At most this many summaries naming nobody are kept to be shown.
const UNKNOWN_SHOWN: usize = 5;
/// At most this many events are read: an on-call calendar has a few hundred.
pub const MAX_EVENTS: usize = 50_000;

impl Calendar {
    /// The event covering `at` (the one begun last, should several overlap).
    pub fn covering(&self, at: DateTime<Utc>) -> Option<&Event> {
        (self.events.iter())
            .filter(|e| e.start <= at && at < e.end)
            .max_by_key(|e| e.start)
    }

    /// Reads `text`; `person` says whom a summary names (a `people` name), `tz` is the schedule's time zone.
    pub fn parse(text: &str, tz: Tz, person: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let lines = unfold(text);
        let mut lines = lines.iter().map(String::as_str).filter(|l| !l.trim().is_empty());
        match lines.next() {
            Some(l) if l.trim().eq_ignore_ascii_case("BEGIN:VCALENDAR") => {}
            _ => return Err("not an iCalendar: it does not begin with BEGIN:VCALENDAR".into()),
        }
        let mut calendar = Calendar::default();
        let mut event: Option<Vec<(String, String, String)>> = None;
        let mut ended = false;
        let mut seen = 0usize;
        for line in lines {
            let (name, params, value) = property(line)?;
            match (name.as_str(), value.trim()) {
                ("BEGIN", v) if v.eq_ignore_ascii_case("VEVENT") => {
                    if event.is_some() {
                        return Err("an event begins inside another (BEGIN:VEVENT twice)".into());
                    }
                    seen += 1;
                    if seen > MAX_EVENTS {
                        return Err(format!("more than {MAX_EVENTS} events"));
                    }
                    event = Some(Vec::new());
                }
                ("END", v) if v.eq_ignore_ascii_case("VEVENT") => {
                    let props = event.take().ok_or("END:VEVENT without BEGIN:VEVENT")?;
                    calendar
                        .add(&props, tz, person)
                        .map_err(|e| format!("event {seen}: {e}"))?;
                }
                ("END", v) if v.eq_ignore_ascii_case("VCALENDAR") => {
                    ended = true;
                    break;
                }
                _ => {
                    if let Some(props) = &mut event {
                        props.push((name, params, value));
                    }
                }
            }
        }
        if event.is_some() || !ended {
            return Err("the calendar is cut short (no END:VEVENT or END:VCALENDAR)".into());
        }
        Ok(calendar)
    }

    fn add(
        &mut self,
        props: &[(String, String, String)],
        tz: Tz,
        person: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), String> {
        let get = |n: &str| props.iter().find(|(name, _, _)| name == n);
        if get("RRULE").is_some() || get("RDATE").is_some() {
            self.repeating += 1;
            return Ok(());
        }
        if get("STATUS").is_some_and(|(_, _, v)| v.trim().eq_ignore_ascii_case("CANCELLED")) {
            self.cancelled += 1;
            return Ok(());
        }
        let (_, params, value) = get("DTSTART").ok_or("no DTSTART")?;
        let (start, whole_day) = time(params, value, tz).map_err(|e| format!("DTSTART: {e}"))?;
        let past_the_end = || "the event ends past the end of time".to_string();
        let end = match (get("DTEND"), get("DURATION")) {
            (Some((_, params, value)), _) => time(params, value, tz).map_err(|e| format!("DTEND: {e}"))?.0,
            (None, Some((_, _, d))) => start
                .checked_add_signed(duration(d).map_err(|e| format!("DURATION: {e}"))?)
                .ok_or_else(past_the_end)?,
            (None, None) if whole_day => start
                .checked_add_signed(chrono::Duration::days(1))
                .ok_or_else(past_the_end)?,
            (None, None) => start,
        };
        if end < start {
            return Err("DTEND is before DTSTART".into());
        }
        let summary = get("SUMMARY").map(|(_, _, v)| unescape(v)).unwrap_or_default();
        match person(summary.trim()) {
            Some(person) => self.events.push(Event { person, start, end }),
            None if self.unknown.len() < UNKNOWN_SHOWN => self.unknown.push(summary.chars().take(80).collect()),
            None => {}
        }
        Ok(())
    }
}

/// Lines with their continuations (a line beginning with a space or a tab) joined back.
fn unfold(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        match (line.strip_prefix([' ', '\t']), out.last_mut()) {
            (Some(rest), Some(last)) => last.push_str(rest),
            _ => out.push(line.to_string()),
        }
    }
    out
}

/// `NAME;PARAM=x:VALUE` → (upper-case name, params, value).
fn property(line: &str) -> Result<(String, String, String), String> {
    let colon = line
        .find(':')
        .ok_or_else(|| format!("a line without ':' ({:?})", line.chars().take(40).collect::<String>()))?;
    let (head, value) = (&line[..colon], &line[colon + 1..]);
    let (name, params) = head.split_once(';').unwrap_or((head, ""));
    Ok((name.trim().to_ascii_uppercase(), params.to_string(), value.to_string()))
}

/// A DTSTART/DTEND value: UTC (`20260330T070000Z`), with `TZID=Europe/Berlin`, floating, or a day
/// (`VALUE=DATE:20260330`); whether it was a day.
fn time(params: &str, value: &str, tz: Tz) -> Result<(DateTime<Utc>, bool), String> {
    let value = value.trim();
    let param = |key: &str| {
        (params.split(';'))
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(key))
            .map(|(_, v)| v.trim().trim_matches('"').to_string())
    };
    if param("VALUE").is_some_and(|v| v.eq_ignore_ascii_case("DATE")) || value.len() == 8 {
        let day =
            NaiveDate::parse_from_str(value, "%Y%m%d").map_err(|_| format!("{value:?} is not a day (YYYYMMDD)"))?;
        return Ok((local_instant(tz, day.and_time(NaiveTime::MIN)), true));
    }
    if let Some(utc) = value.strip_suffix('Z') {
        let t = NaiveDateTime::parse_from_str(utc, "%Y%m%dT%H%M%S")
            .map_err(|_| format!("{value:?} is not a time (YYYYMMDDTHHMMSSZ)"))?;
        return Ok((t.and_utc(), false));
    }
    let local = NaiveDateTime::parse_from_str(value, "%Y%m%dT%H%M%S")
        .map_err(|_| format!("{value:?} is not a time (YYYYMMDDTHHMMSS)"))?;
    let zone = match param("TZID") {
        Some(id) => id
            .parse::<Tz>()
            .map_err(|_| format!("TZID {id:?} is no IANA time zone (such as Europe/Berlin)"))?,
        None => tz,
    };
    Ok((local_instant(zone, local), false))
}

/// `P1D`, `PT8H`, `P1DT12H30M`, `P1W`.
fn duration(text: &str) -> Result<chrono::Duration, String> {
    let bad = || format!("{:?} is not a duration (P1D, PT8H, P1W)", text.trim());
    let rest = text.trim().strip_prefix('P').ok_or_else(bad)?;
    let (mut total, mut number, mut in_time) = (0i64, String::new(), false);
    for c in rest.chars() {
        match c {
            'T' => in_time = true,
            '0'..='9' => number.push(c),
            _ => {
                let n: i64 = number.parse().map_err(|_| bad())?;
                number.clear();
                total += n * match (c, in_time) {
                    ('W', false) => 7 * 86_400,
                    ('D', false) => 86_400,
                    ('H', true) => 3600,
                    ('M', true) => 60,
                    ('S', true) => 1,
                    _ => return Err(bad()),
                };
            }
        }
    }
    if !number.is_empty() || total > 366 * 86_400 {
        return Err(bad());
    }
    Ok(chrono::Duration::seconds(total))
}

/// A TEXT value's escapes (`\,` `\;` `\n` `\\`).
fn unescape(v: &str) -> String {
    v.replace("\\,", ",")
        .replace("\\;", ";")
        .replace("\\n", " ")
        .replace("\\N", " ")
        .replace("\\\\", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(summary: &str) -> Option<String> {
        match summary.to_ascii_lowercase().as_str() {
            "alice" | "alice@example.com" => Some("alice".into()),
            "bob" => Some("bob".into()),
            _ => None,
        }
    }

    fn utc(t: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(t).expect("time").with_timezone(&Utc)
    }

    const CALENDAR: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n\
BEGIN:VEVENT\r\nUID:1\r\nDTSTART:20260330T070000Z\r\nDTEND:20260406T070000Z\r\nSUMMARY:Alice@Example.com\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:2\r\nDTSTART;TZID=Europe/Berlin:20260406T090000\r\nDTEND;TZID=Europe/Berlin:20260413T09\r\n 0000\r\nSUMMARY:bob\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:3\r\nDTSTART;VALUE=DATE:20260420\r\nSUMMARY:alice\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:4\r\nDTSTART:20260501T000000Z\r\nDURATION:P1W\r\nRRULE:FREQ=WEEKLY\r\nSUMMARY:bob\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:5\r\nDTSTART:20260501T000000Z\r\nDURATION:PT12H\r\nSUMMARY:Team offsite\r\nEND:VEVENT\r\n\
END:VCALENDAR\r\n";

    #[test]
    fn events_in_utc_with_a_tzid_and_as_a_day_name_their_person() {
        let berlin: Tz = "Europe/Berlin".parse().expect("zone");
        let c = Calendar::parse(CALENDAR, berlin, &person).expect("reads");
        assert_eq!(c.events.len(), 3, "{c:?}");
        assert_eq!(
            c.covering(utc("2026-04-06T06:59:59Z")).map(|e| e.person.as_str()),
            Some("alice")
        );
        let bob = c.covering(utc("2026-04-06T07:00:00Z")).expect("bob");
        assert_eq!((bob.person.as_str(), bob.end), ("bob", utc("2026-04-13T07:00:00Z")));
        assert_eq!(c.covering(utc("2026-04-14T12:00:00Z")), None, "nobody between events");
        let day = c.covering(utc("2026-04-20T12:00:00Z")).expect("a whole day");
        assert_eq!(
            (day.start, day.end),
            (utc("2026-04-19T22:00:00Z"), utc("2026-04-20T22:00:00Z"))
        );
        assert_eq!((c.repeating, c.unknown.clone()), (1, vec!["Team offsite".to_string()]));
    }

    #[test]
    fn a_broken_calendar_is_refused_whole() {
        for (text, says) in [
            ("<html>Sign in</html>", "BEGIN:VCALENDAR"),
            (
                "BEGIN:VCALENDAR\nBEGIN:VEVENT\nSUMMARY:alice\nEND:VEVENT\nEND:VCALENDAR\n",
                "no DTSTART",
            ),
            (
                "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:2026-03-30\nEND:VEVENT\nEND:VCALENDAR\n",
                "DTSTART",
            ),
            (
                "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20260330T070000Z\nSUMMARY:alice\n",
                "cut short",
            ),
            (
                "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;TZID=Mars/Olympus:20260330T070000\nEND:VEVENT\nEND:VCALENDAR\n",
                "TZID",
            ),
            (
                "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20260330T070000Z\nDTEND:20260329T070000Z\nEND:VEVENT\nEND:VCALENDAR\n",
                "before",
            ),
            (
                "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:+2621431231T000000Z\nDURATION:P366D\nEND:VEVENT\nEND:VCALENDAR\n",
                "event 1: ",
            ),
            (
                "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20260330T070000Z\nDURATION:P99999999999999999999D\nEND:VEVENT\nEND:VCALENDAR\n",
                "DURATION",
            ),
        ] {
            let err = Calendar::parse(text, Tz::UTC, &person).expect_err(text);
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
