//! Durations, the one way Herald reads them: every duration in the configuration (`rules.<kind>.for`,
//! `teams.<t>.escalation[].after`, `grouping.*`, timeouts, retentions…), in the API (a silence's `duration`, an
//! acknowledgement's `for`, the status page's forms) and on the command line (`--duration`, `--for`,
//! `replay --until +2h`). A number and a unit, repeated (`1h30m`, `1h 30m`, `90s`, `2 days`).
//!
//! `M` is refused: Prometheus and Alertmanager users write `30M` nowhere, but a Prometheus user who does means
//! minutes, while the library Herald used before read it as 30 *months* ("2 years 6 months"). Minutes are `m`; a
//! month is written out (`month`, `months`). A refusal always says which units exist.

use std::time::Duration;

/// The units, as a refusal lists them.
pub const UNITS: &str = "ms, s, m (minutes), h, d, w — also written out: sec, min, hour, day, week (and plurals), \
                         ns, us, months, years";

/// Why a text is not a duration: said in config errors, 400 answers and on the command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("an empty text is not a duration: write a number and a unit, such as 30s, 5m, 1h or 2d (units: {UNITS})")]
    Empty,
    #[error("{0:?} is not a duration: a duration is never negative (units: {UNITS})")]
    Negative(String),
    #[error("{0:?} is not a duration: `M` would be months; minutes are `m` (30m), a month is written out (1month)")]
    CapitalM(String),
    #[error("{text:?} is not a duration: {unit:?} is no unit (units: {UNITS})")]
    UnknownUnit { text: String, unit: String },
    #[error(
        "{text:?} is not a duration: {number} has no unit; write {number}s, {number}m or {number}h (units: {UNITS})"
    )]
    NoUnit { text: String, number: String },
    #[error("{0:?} is not a duration: whole numbers only (write 1h30m, not 1.5h; units: {UNITS})")]
    Fraction(String),
    #[error("{0:?} is not a duration: write a number then its unit, such as 30s, 5m, 1h30m (units: {UNITS})")]
    Malformed(String),
    #[error("{0:?} is too long a duration")]
    TooLarge(String),
}

/// The nanoseconds of a unit; `None` for a word that is no unit.
fn unit_nanos(unit: &str) -> Option<u128> {
    const S: u128 = 1_000_000_000;
    Some(match unit {
        "ns" | "nsec" | "nanos" => 1,
        "us" | "µs" | "usec" | "micros" => 1_000,
        "ms" | "msec" | "millis" => 1_000_000,
        "s" | "sec" | "secs" | "second" | "seconds" => S,
        "m" | "min" | "mins" | "minute" | "minutes" => 60 * S,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600 * S,
        "d" | "day" | "days" => 86_400 * S,
        "w" | "week" | "weeks" => 7 * 86_400 * S,
        // As the library read them before (30.44 and 365.25 days), so a configuration that wrote them keeps its
        // meaning.
        "month" | "months" => 2_630_016 * S,
        "y" | "year" | "years" => 31_557_600 * S,
        _ => return None,
    })
}

/// Reads a duration: one or more `<number><unit>` (spaces allowed around and between them).
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(DurationError::Empty);
    }
    if trimmed.starts_with('-') {
        return Err(DurationError::Negative(shown(trimmed)));
    }
    let own = || shown(trimmed);
    let mut total: u128 = 0;
    let mut rest = trimmed;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(DurationError::Malformed(own()));
        }
        let number = &rest[..digits];
        rest = rest[digits..].trim_start();
        if rest.starts_with(['.', ',']) {
            return Err(DurationError::Fraction(own()));
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| !c.is_alphabetic())
            .map_or(rest.len(), |(i, _)| i);
        let unit = &rest[..unit_len];
        rest = rest[unit_len..].trim_start();
        if unit.is_empty() {
            if rest.is_empty() {
                return Err(DurationError::NoUnit {
                    text: own(),
                    number: number.to_string(),
                });
            }
            return Err(DurationError::Malformed(own()));
        }
        if unit == "M" {
            return Err(DurationError::CapitalM(own()));
        }
        let Some(nanos) = unit_nanos(unit) else {
            return Err(DurationError::UnknownUnit {
                text: own(),
                unit: unit.to_string(),
            });
        };
        let n: u128 = number.parse().map_err(|_| DurationError::TooLarge(own()))?;
        total = n
            .checked_mul(nanos)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| DurationError::TooLarge(own()))?;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| DurationError::TooLarge(own()))?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// The text as a refusal quotes it: at most 40 characters (an API answer never echoes a huge value).
fn shown(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// For clap's `value_parser`: the refusal as the command line says it.
pub fn parse_arg(text: &str) -> Result<Duration, String> {
    parse(text).map_err(|e| e.to_string())
}

/// A duration as it is written back (`1h 30m`): what [`parse`] reads again.
pub fn format(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// `#[serde(with = "crate::configuration::duration")]`: a duration field read by [`parse`].
pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    d.deserialize_any(Visitor)
}

pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*d))
}

/// `#[serde(default, with = "crate::configuration::duration::option")]`: an optional duration.
pub mod option {
    use std::time::Duration;

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        d.deserialize_option(super::OptionVisitor)
    }

    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::serialize(d, s),
            None => s.serialize_none(),
        }
    }
}

struct Visitor;

impl serde::de::Visitor<'_> for Visitor {
    type Value = Duration;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a duration such as 30s, 5m, 1h or 2d (units: {UNITS})")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
        parse(v).map_err(E::custom)
    }

    // A bare number (YAML reads `for: 30` as one) has no unit: said as such, never guessed.
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Duration, E> {
        Err(E::custom(DurationError::NoUnit {
            text: v.to_string(),
            number: v.to_string(),
        }))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Duration, E> {
        if v < 0 {
            return Err(E::custom(DurationError::Negative(v.to_string())));
        }
        self.visit_u64(v.unsigned_abs())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Duration, E> {
        if v < 0.0 {
            return Err(E::custom(DurationError::Negative(v.to_string())));
        }
        Err(E::custom(DurationError::Fraction(v.to_string())))
    }
}

struct OptionVisitor;

impl<'de> serde::de::Visitor<'de> for OptionVisitor {
    type Value = Option<Duration>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        Visitor.expecting(f)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        deserialize(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn durations_read_as_a_number_and_a_unit_repeated() {
        for (text, want) in [
            ("30s", secs(30)),
            ("30m", secs(1800)),
            ("1h30m", secs(5400)),
            ("1h 30m", secs(5400)),
            (" 2 days ", secs(172_800)),
            ("1w", secs(604_800)),
            ("0s", secs(0)),
            ("250ms", Duration::from_millis(250)),
            ("5min", secs(300)),
            ("2hours", secs(7200)),
            ("1month", secs(2_630_016)),
        ] {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn a_capital_m_is_refused_and_says_minutes_are_m() {
        let e = parse("30M").expect_err("M");
        assert_eq!(e, DurationError::CapitalM("30M".into()));
        let text = e.to_string();
        assert!(text.contains("minutes are `m`"), "{text}");
        assert!(parse("1h30M").is_err(), "M anywhere in the text");
    }

    #[test]
    fn every_other_refusal_lists_the_units() {
        for text in [
            "30mn", "-30m", "30", "1.5h", "h", "30m!", "", "   ", "3 0x", "1h-30m", "30 M3",
        ] {
            let e = parse(text).expect_err(text).to_string();
            if text != "30 M3" {
                assert!(e.contains("units: ms, s, m (minutes)"), "{text:?}: {e}");
            }
        }
        assert!(matches!(parse("30mn"), Err(DurationError::UnknownUnit { unit, .. }) if unit == "mn"));
        assert!(matches!(parse("-30m"), Err(DurationError::Negative(_))));
        assert!(matches!(parse("30"), Err(DurationError::NoUnit { .. })));
        assert!(matches!(parse("1.5h"), Err(DurationError::Fraction(_))));
    }

    #[test]
    fn hostile_durations_are_refused_without_overflow() {
        let huge = "9".repeat(400) + "s";
        assert!(matches!(parse(&huge), Err(DurationError::TooLarge(_))));
        assert!(matches!(
            parse("99999999999999999999y"),
            Err(DurationError::TooLarge(_))
        ));
        let many = "1s".repeat(100_000);
        assert_eq!(parse(&many), Ok(secs(100_000)));
        let said = parse(&"1x".repeat(100_000)).expect_err("x").to_string();
        assert!(
            said.len() < 400,
            "a refusal quotes a little of the text: {} bytes",
            said.len()
        );
        assert!(parse("1s\u{0}").is_err());
        assert!(parse("1\u{202e}s").is_err());
    }

    #[test]
    fn config_values_of_the_wrong_type_say_so() {
        #[derive(serde::Deserialize, Debug)]
        struct One {
            #[serde(with = "super")]
            d: Duration,
            #[serde(default, with = "super::option")]
            o: Option<Duration>,
        }
        let read = |v: serde_json::Value| serde_json::from_value::<One>(v).map_err(|e| e.to_string());
        assert_eq!(read(serde_json::json!({"d": "1h"})).expect("ok").d, secs(3600));
        assert_eq!(
            read(serde_json::json!({"d": "1h", "o": "2m"})).expect("ok").o,
            Some(secs(120))
        );
        assert_eq!(read(serde_json::json!({"d": "1h", "o": null})).expect("ok").o, None);
        for (v, says) in [
            (serde_json::json!({"d": 30}), "30 has no unit"),
            (serde_json::json!({"d": -5}), "never negative"),
            (serde_json::json!({"d": 1.5}), "whole numbers only"),
            (serde_json::json!({"d": true}), "a duration such as 30s"),
            (serde_json::json!({"d": ["1h"]}), "a duration such as 30s"),
            (serde_json::json!({"d": "30M"}), "minutes are `m`"),
            (serde_json::json!({"d": "1h", "o": "30mn"}), "\"mn\" is no unit"),
        ] {
            let e = read(v.clone()).expect_err("refused");
            assert!(e.contains(says), "{v}: {e}");
        }
    }

    #[test]
    fn a_written_duration_reads_back_as_itself() {
        for d in [secs(0), secs(59), secs(5400), secs(90_061), Duration::from_millis(1500)] {
            assert_eq!(parse(&format(d)), Ok(d), "{}", format(d));
        }
    }
}
