//! How Herald writes a time for people: in the reader's time zone ([`Zone`]) — a message in its team's (the
//! team's digest zone, else `server.time_zone`), a page in the one its reader chose (`?tz=`, else
//! `server.time_zone`) — with the zone's abbreviation (`09:00 CET`, `2026-03-09 09:00 CEST`, `17:01 UTC`).
//! Machine-readable fields (the webhook's JSON, the API) stay RFC 3339 in UTC and never come through here.
//!
//! And how people write one to Herald: a zone's name ([`time_zone`]), a time with its offset or on a zone's wall
//! clock ([`parse_time`], [`local_instant`]) — for the settings, the API and the CLI alike.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A time zone people read times in: an IANA zone, UTC unless a setting says otherwise. Stored with a
/// notification by its name (`Europe/Berlin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone(pub Tz);

impl Default for Zone {
    fn default() -> Self {
        Zone::UTC
    }
}

impl Zone {
    pub const UTC: Zone = Zone(chrono_tz::UTC);

    pub fn is_utc(&self) -> bool {
        self.0 == chrono_tz::UTC
    }

    /// `2026-03-02 11:00 CET`.
    pub fn stamp(&self, t: DateTime<Utc>) -> String {
        t.with_timezone(&self.0).format("%Y-%m-%d %H:%M %Z").to_string()
    }

    /// `2026-03-02 11:00:05 CET`.
    pub fn stamp_seconds(&self, t: DateTime<Utc>) -> String {
        t.with_timezone(&self.0).format("%Y-%m-%d %H:%M:%S %Z").to_string()
    }

    /// `11:00 CET`: a time of day, without the date.
    pub fn clock(&self, t: DateTime<Utc>) -> String {
        t.with_timezone(&self.0).format("%H:%M %Z").to_string()
    }

    /// `11:00 CET` when `t` is on `now`'s day (in this zone), else with the date: `2026-03-01 11:00 CET`.
    pub fn short(&self, t: DateTime<Utc>, now: DateTime<Utc>) -> String {
        if t.with_timezone(&self.0).date_naive() == now.with_timezone(&self.0).date_naive() {
            self.clock(t)
        } else {
            self.stamp(t)
        }
    }

    /// `Mon 2026-03-09 09:00 CET`.
    pub fn day_stamp(&self, t: DateTime<Utc>) -> String {
        t.with_timezone(&self.0).format("%a %Y-%m-%d %H:%M %Z").to_string()
    }
}

/// A `timezone` value: an IANA name (`Europe/Berlin`, `UTC`).
pub fn time_zone(name: &str) -> Result<Tz, String> {
    name.parse::<Tz>()
        .map_err(|_| format!("unknown time zone {name:?} (use an IANA name such as Europe/Berlin or UTC)"))
}

/// The instant a wall-clock time of `tz` names: the earlier of the two in the hour a clock goes back, and the time
/// an hour later in the hour a clock skips (02:30 on the night clocks go forward is 03:30).
pub fn local_instant(tz: Tz, t: NaiveDateTime) -> DateTime<Utc> {
    match tz.from_local_datetime(&t).earliest() {
        Some(x) => x.with_timezone(&Utc),
        None => (t.checked_add_signed(chrono::Duration::hours(1)))
            .and_then(|later| tz.from_local_datetime(&later).earliest())
            .map(|x| x.with_timezone(&Utc))
            .unwrap_or_else(|| t.and_utc()),
    }
}

/// A time as the configuration, the API and the CLI take it: RFC 3339 with its offset (`2026-03-29T09:00:00Z`,
/// `…+02:00`), or a wall-clock time in `tz` (`2026-03-29 09:00`, `2026-03-29T09:00`, a day alone is its midnight).
pub fn parse_time(text: &str, tz: Tz) -> Result<DateTime<Utc>, String> {
    Ok(WrittenTime::parse(text)?.at(tz))
}

/// A time as people write one ([`parse_time`]'s forms), parsed before its zone is known: an instant when written
/// with its offset, else a wall-clock time read in a zone later ([`WrittenTime::at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrittenTime {
    Instant(DateTime<Utc>),
    WallClock(NaiveDateTime),
}

impl WrittenTime {
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        if let Ok(x) = DateTime::parse_from_rfc3339(t) {
            return Ok(Self::Instant(x.with_timezone(&Utc)));
        }
        for format in [
            "%Y-%m-%d %H:%M",
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%d %H:%M:%S",
            "%Y-%m-%dT%H:%M:%S",
        ] {
            if let Ok(local) = NaiveDateTime::parse_from_str(t, format) {
                return Ok(Self::WallClock(local));
            }
        }
        if let Ok(day) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
            return Ok(Self::WallClock(day.and_time(NaiveTime::MIN)));
        }
        Err(format!(
            "{t:?} is not a time: write 2026-03-29T09:00:00Z (RFC 3339, with its offset) or 2026-03-29 09:00 (in the \
             schedule's time zone)"
        ))
    }

    /// The instant it names, a wall-clock time read in `tz` ([`local_instant`]).
    pub fn at(self, tz: Tz) -> DateTime<Utc> {
        match self {
            Self::Instant(t) => t,
            Self::WallClock(local) => local_instant(tz, local),
        }
    }
}

impl Serialize for Zone {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.name())
    }
}

impl<'de> Deserialize<'de> for Zone {
    /// A name Herald wrote (the settings checked it at load); one no longer known reads as UTC rather than losing
    /// the notification it is part of.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(Zone(name.parse().unwrap_or(chrono_tz::UTC)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("time").with_timezone(&Utc)
    }

    #[test]
    fn times_read_in_the_zone_with_its_abbreviation_and_the_date_only_when_not_today_there() {
        let berlin = Zone("Europe/Berlin".parse().expect("zone"));
        let winter = at("2026-03-02T10:00:00Z");
        assert_eq!(berlin.clock(winter), "11:00 CET");
        assert_eq!(berlin.stamp(winter), "2026-03-02 11:00 CET");
        assert_eq!(berlin.stamp(at("2026-07-02T10:00:00Z")), "2026-07-02 12:00 CEST");
        assert_eq!(Zone::UTC.stamp_seconds(winter), "2026-03-02 10:00:00 UTC");
        // 23:30 UTC on the 1st is already the 2nd in Berlin: "today" there, no date.
        assert_eq!(berlin.short(at("2026-03-01T23:30:00Z"), winter), "00:30 CET");
        assert_eq!(
            Zone::UTC.short(at("2026-03-01T23:30:00Z"), winter),
            "2026-03-01 23:30 UTC"
        );
        assert_eq!(berlin.day_stamp(at("2026-03-09T08:00:00Z")), "Mon 2026-03-09 09:00 CET");
        // Stored by name; a name no longer known reads as UTC.
        assert_eq!(serde_json::to_string(&berlin).expect("json"), "\"Europe/Berlin\"");
        let back: Zone = serde_json::from_str("\"Europe/Berlin\"").expect("zone");
        assert_eq!(back, berlin);
        let gone: Zone = serde_json::from_str("\"Mars/Olympus\"").expect("zone");
        assert!(gone.is_utc());
    }
}
