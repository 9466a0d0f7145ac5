//! Each `ical` schedule's last good copy of its calendar: a `file` is read at start and on every reload, a `url`
//! fetched at start and every `refresh` after (by the injected clock), bounded in size (`max_bytes`) and time
//! (`timeout`). A read or fetch that fails keeps the copy there was — never blanks the schedule — and says why and
//! since when (`GET /v1/oncall`, the status page). Copies are kept across reloads while a schedule's source stays
//! the same.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};

use super::Calendar;
use crate::configuration::{IcalSettings, Settings};

/// One schedule's calendar as this replica last read it.
#[derive(Debug, Clone)]
pub struct CalendarCopy {
    /// Where it comes from, as it may be shown: the file's path, or the URL's scheme and host only (a calendar's
    /// address often is its secret).
    pub source: String,
    /// The file path or URL itself, to notice a reload that changes it.
    key: String,
    /// The last calendar read whole; none until one is.
    pub calendar: Option<Arc<Calendar>>,
    /// When `calendar` was read.
    pub read_at: Option<DateTime<Utc>>,
    /// When the last read or fetch was tried.
    pub tried_at: Option<DateTime<Utc>>,
    /// Why the last one failed (none: it worked).
    pub error: Option<String>,
    /// Since when reads fail.
    pub failing_since: Option<DateTime<Utc>>,
}

/// Every schedule's copy, by schedule name.
#[derive(Default)]
pub struct Calendars {
    copies: RwLock<HashMap<String, CalendarCopy>>,
}

/// A source as it may be shown.
fn shown(ical: &IcalSettings) -> (String, String) {
    match (&ical.url, &ical.file) {
        (Some(url), _) => {
            let shown = url::Url::parse(url)
                .map(|u| format!("{}://{}/…", u.scheme(), u.host_str().unwrap_or("")))
                .unwrap_or_else(|_| "a URL".into());
            (shown, url.clone())
        }
        (None, Some(file)) => (file.display().to_string(), file.display().to_string()),
        (None, None) => (String::new(), String::new()),
    }
}

impl Calendars {
    /// The copy of `schedule`'s calendar, if it has `ical`.
    pub fn copy(&self, schedule: &str) -> Option<CalendarCopy> {
        self.copies
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(schedule)
            .cloned()
    }

    /// At start and on reload: forgets the copies of schedules gone or whose source changed, and reads every `file`.
    pub fn load(&self, settings: &Settings, now: DateTime<Utc>) {
        let mut copies = self.copies.write().unwrap_or_else(|e| e.into_inner());
        copies.retain(|name, copy| {
            (settings.schedules.get(name))
                .and_then(|s| s.ical.as_ref())
                .is_some_and(|ical| shown(ical).1 == copy.key)
        });
        for (name, schedule) in &settings.schedules {
            let Some(ical) = &schedule.ical else { continue };
            let (source, key) = shown(ical);
            let copy = copies.entry(name.clone()).or_insert_with(|| CalendarCopy {
                source,
                key,
                calendar: None,
                read_at: None,
                tried_at: None,
                error: None,
                failing_since: None,
            });
            if let Some(file) = &ical.file {
                let read = std::fs::read(file)
                    .map_err(|e| format!("cannot read {}: {e}", file.display()))
                    .and_then(|bytes| read_calendar(settings, name, ical, &bytes));
                record(copy, read, now);
            }
        }
    }

    /// Fetches every `url` calendar due (never tried, or tried `refresh` ago); returns how many were fetched.
    pub async fn refresh_due(&self, settings: &Settings, client: &reqwest::Client, now: DateTime<Utc>) -> usize {
        let due: Vec<(String, IcalSettings)> = {
            let copies = self.copies.read().unwrap_or_else(|e| e.into_inner());
            (settings.schedules.iter())
                .filter_map(|(name, s)| Some((name, s.ical.as_ref().filter(|i| i.url.is_some())?)))
                .filter(|(name, ical)| {
                    let refresh = chrono::Duration::from_std(ical.refresh).unwrap_or_default();
                    copies
                        .get(*name)
                        .and_then(|c| c.tried_at)
                        .is_none_or(|t| now >= t + refresh)
                })
                .map(|(name, ical)| (name.clone(), ical.clone()))
                .collect()
        };
        for (name, ical) in &due {
            let read = match fetch(client, ical).await {
                Ok(bytes) => read_calendar(settings, name, ical, &bytes),
                Err(e) => Err(e),
            };
            if let Err(e) = &read {
                tracing::warn!(schedule = %name, error = %e, "the schedule's calendar could not be fetched; the last good copy is kept");
            }
            let mut copies = self.copies.write().unwrap_or_else(|e| e.into_inner());
            // A reload in between may have changed or removed it: then this answer is not its.
            if let Some(copy) = copies.get_mut(name)
                && copy.key == shown(ical).1
            {
                record(copy, read, now);
            }
        }
        due.len()
    }
}

fn record(copy: &mut CalendarCopy, read: Result<Calendar, String>, now: DateTime<Utc>) {
    copy.tried_at = Some(now);
    match read {
        Ok(calendar) => {
            copy.calendar = Some(Arc::new(calendar));
            copy.read_at = Some(now);
            copy.error = None;
            copy.failing_since = None;
        }
        Err(e) => {
            copy.error = Some(e);
            copy.failing_since.get_or_insert(now);
        }
    }
}

/// `bytes` as the calendar of schedule `name`: refused beyond `max_bytes` or when it does not read.
fn read_calendar(settings: &Settings, name: &str, ical: &IcalSettings, bytes: &[u8]) -> Result<Calendar, String> {
    if bytes.len() > ical.max_bytes {
        return Err(format!(
            "the calendar is larger than max_bytes ({} bytes)",
            ical.max_bytes
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "the calendar is not UTF-8 text".to_string())?;
    let tz = settings
        .schedules
        .get(name)
        .map(super::zone)
        .unwrap_or(chrono_tz::Tz::UTC);
    Calendar::parse(text, tz, &|summary| settings.person_named(summary).map(str::to_string))
}

/// The calendar at `ical.url`: a 2xx answer read whole within `timeout` and `max_bytes`. Errors never carry the
/// URL (it may be a secret address).
async fn fetch(client: &reqwest::Client, ical: &IcalSettings) -> Result<Vec<u8>, String> {
    let url = ical.url.as_deref().unwrap_or_default();
    let work = async {
        let mut answer = client
            .get(url)
            .header("accept", "text/calendar")
            .send()
            .await
            .map_err(|e| format!("fetching failed: {}", e.without_url()))?;
        if !answer.status().is_success() {
            return Err(format!("answered {}", answer.status()));
        }
        let too_large = || format!("the calendar is larger than max_bytes ({} bytes)", ical.max_bytes);
        if answer.content_length().is_some_and(|n| n > ical.max_bytes as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = answer
            .chunk()
            .await
            .map_err(|e| format!("reading the answer failed: {}", e.without_url()))?
        {
            if body.len() + chunk.len() > ical.max_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    tokio::time::timeout(ical.timeout, work).await.unwrap_or_else(|_| {
        Err(format!(
            "no whole answer within {}",
            humantime::format_duration(ical.timeout)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_breaks_keeps_the_copy_read_before_and_says_why() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("oncall.ics");
        let good = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20260302T080000Z\nDTEND:20260309T080000Z\nSUMMARY:alice\nEND:VEVENT\nEND:VCALENDAR\n";
        std::fs::write(&file, good).expect("write");
        let settings = Settings::from_yaml(&format!(
            "people: {{alice: {{email: alice@example.com}}}}\nschedules: {{p: {{ical: {{file: '{}'}}}}}}",
            file.display()
        ))
        .expect("valid");
        let (t0, t1) = (Utc::now(), Utc::now() + chrono::Duration::minutes(5));
        let calendars = Calendars::default();
        calendars.load(&settings, t0);
        let copy = calendars.copy("p").expect("a copy");
        assert_eq!((copy.read_at, copy.error.clone()), (Some(t0), None));
        // Cut short between the check of the reload and its reading: refused, the copy kept.
        std::fs::write(&file, &good[..60]).expect("write");
        calendars.load(&settings, t1);
        let copy = calendars.copy("p").expect("a copy");
        assert_eq!((copy.read_at, copy.failing_since), (Some(t0), Some(t1)));
        assert!(
            copy.error.as_deref().is_some_and(|e| e.contains("cut short")),
            "{copy:?}"
        );
        assert_eq!(copy.calendar.map(|c| c.events.len()), Some(1));
        // A schedule gone from the settings forgets its copy.
        calendars.load(&Settings::from_yaml("").expect("valid"), t1);
        assert!(calendars.copy("p").is_none());
    }
}
