//! Who each schedule has on call, as `GET /v1/oncall`, `herald oncall` and the status page say it, and the
//! refreshing of the schedules' calendars given by URL (`crate::oncall::calendars`).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Pipeline;
use crate::oncall::{self, OnCall};

/// One schedule at one instant.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleNow {
    pub schedule: String,
    pub timezone: String,
    /// Whoever is on call; none: nobody (an escalation step naming the schedule then tells the team).
    pub on_call: Option<OnCall>,
    /// The teams whose escalation steps name the schedule.
    pub teams: Vec<String>,
    /// For a schedule with `ical`: its copy of the calendar and how reading it goes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calendar: Option<CalendarState>,
}

/// A schedule's calendar as this replica holds it.
#[derive(Debug, Clone, Serialize)]
pub struct CalendarState {
    /// The file, or the URL's scheme and host.
    pub source: String,
    /// When the copy in use was read (none: never; nobody is on call by the calendar).
    pub read_at: Option<DateTime<Utc>>,
    /// Its age in seconds, at the instant asked about.
    pub age_seconds: Option<i64>,
    pub events: usize,
    /// Events skipped: repeating (`RRULE`, not supported), cancelled, and the summaries naming nobody.
    pub repeating: usize,
    pub cancelled: usize,
    pub unknown_summaries: Vec<String>,
    /// Why the last read failed (the copy before is still used), and since when reads fail.
    pub error: Option<String>,
    pub failing_since: Option<DateTime<Utc>>,
}

/// A schedule no configuration names.
#[derive(Debug, thiserror::Error)]
#[error("no schedule is named {0:?} (configured: {1})")]
pub struct UnknownSchedule(pub String, pub String);

impl Pipeline {
    /// Who `schedule` (every schedule, by name, when none) has on call at `at` (now, when none).
    pub fn on_call(
        &self,
        schedule: Option<&str>,
        at: Option<DateTime<Utc>>,
    ) -> Result<Vec<ScheduleNow>, UnknownSchedule> {
        let core = self.core();
        let at = at.unwrap_or_else(|| core.clock.now());
        let settings = &core.settings;
        if let Some(name) = schedule
            && !settings.schedules.contains_key(name)
        {
            let known: Vec<&str> = settings.schedules.keys().map(String::as_str).collect();
            let known = if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            };
            return Err(UnknownSchedule(name.to_string(), known));
        }
        Ok((settings.schedules.iter())
            .filter(|(name, _)| schedule.is_none_or(|s| s == name.as_str()))
            .map(|(name, s)| {
                let copy = core.calendars.copy(name);
                let calendar = copy.as_ref().and_then(|c| c.calendar.as_deref());
                ScheduleNow {
                    schedule: name.clone(),
                    timezone: s.timezone.to_string(),
                    on_call: oncall::who(s, calendar, at),
                    teams: (settings.teams.keys())
                        .filter(|t| settings.schedules_of(t).contains(&name.as_str()))
                        .cloned()
                        .collect(),
                    calendar: copy.map(|c| CalendarState {
                        source: c.source.clone(),
                        read_at: c.read_at,
                        age_seconds: c.read_at.map(|r| (at - r).num_seconds()),
                        events: c.calendar.as_ref().map_or(0, |k| k.events.len()),
                        repeating: c.calendar.as_ref().map_or(0, |k| k.repeating),
                        cancelled: c.calendar.as_ref().map_or(0, |k| k.cancelled),
                        unknown_summaries: c.calendar.as_ref().map(|k| k.unknown.clone()).unwrap_or_default(),
                        error: c.error.clone(),
                        failing_since: c.failing_since,
                    }),
                }
            })
            .collect())
    }

    /// Fetches the calendars given by URL that are due (see `oncall::calendars`); returns how many were.
    pub async fn refresh_calendars(&self, client: &reqwest::Client) -> usize {
        let core = self.core();
        core.calendars
            .refresh_due(&core.settings, client, core.clock.now())
            .await
    }
}

/// The loop that keeps the URL calendars fresh: looks every second (the `refresh` is counted on the pipeline's
/// clock) until `stop`.
pub async fn refresh_loop(pipeline: Pipeline, mut stop: tokio::sync::watch::Receiver<bool>) {
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::limited(3))
        .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "no HTTP client for the schedules' calendars");
            return;
        }
    };
    loop {
        pipeline.refresh_calendars(&client).await;
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
    }
}
