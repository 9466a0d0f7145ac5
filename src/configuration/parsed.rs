//! A setting kept both as written and as parsed ([`Parsed`]): time zones, digest schedules and `server.public_url`
//! are parsed once, when the configuration is loaded — a value that does not parse is a configuration error naming
//! its key — so nothing reading the settings parses them again, nor quietly falls back when one would not parse.

use chrono_tz::Tz;
use serde::{Deserialize, Deserializer};

/// What a setting's text parses into; the error says what is wrong with it (the key is added by the loader).
pub trait FromSetting: Sized {
    fn from_setting(text: &str) -> Result<Self, String>;
}

/// A setting's text as written (shown back in messages and pages) and the value it parsed into at load.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<T> {
    text: String,
    value: T,
}

impl<T: FromSetting> Parsed<T> {
    pub fn parse(text: &str) -> Result<Self, String> {
        let value = T::from_setting(text)?;
        Ok(Self {
            text: text.to_string(),
            value,
        })
    }
}

impl<T> Parsed<T> {
    /// A default: `value` is what `text` parses into.
    pub(crate) fn known(text: &str, value: T) -> Self {
        Self {
            text: text.to_string(),
            value,
        }
    }

    /// The value, parsed at load.
    pub fn get(&self) -> &T {
        &self.value
    }

    /// The text as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl Parsed<Tz> {
    /// `UTC`, every time zone setting's default.
    pub fn utc() -> Self {
        Self::known("UTC", chrono_tz::UTC)
    }

    /// The zone (a copy: `Tz` is small).
    pub fn tz(&self) -> Tz {
        self.value
    }
}

/// The text as written, so `Option<Parsed<_>>::as_deref()` reads as the `Option<&str>` it replaced.
impl<T> std::ops::Deref for Parsed<T> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl<T> std::fmt::Display for Parsed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl<'de, T: FromSetting> Deserialize<'de> for Parsed<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// An IANA time zone name (`Europe/Berlin`, `UTC`).
impl FromSetting for Tz {
    fn from_setting(text: &str) -> Result<Self, String> {
        crate::domain::time::time_zone(text)
    }
}

/// A digest schedule (`Mon-Fri 09:00`, see [`crate::domain::schedule`]).
impl FromSetting for crate::domain::Schedule {
    fn from_setting(text: &str) -> Result<Self, String> {
        text.parse().map_err(|e| format!("bad schedule: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parsed_setting_reads_as_its_text_and_holds_its_value() {
        let berlin: Parsed<Tz> = serde_json::from_str("\"Europe/Berlin\"").expect("a zone");
        assert_eq!(
            (berlin.as_str(), berlin.tz()),
            ("Europe/Berlin", chrono_tz::Europe::Berlin)
        );
        assert_eq!(berlin.to_string(), "Europe/Berlin");
        let e = serde_json::from_str::<Parsed<Tz>>("\"Mars/Olympus\"").expect_err("no such zone");
        assert!(e.to_string().contains("unknown time zone \"Mars/Olympus\""), "{e}");
        let e = serde_json::from_str::<Parsed<crate::domain::Schedule>>("\"Mon-Fry 09:00\"").expect_err("no day");
        assert!(e.to_string().contains("bad schedule: unknown day \"Fry\""), "{e}");
    }
}
