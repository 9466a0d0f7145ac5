//! Argo CD's sync windows: an AppProject's `spec.syncWindows`, read with the AppProjects (`api::ArgoCdApi::projects`),
//! and what they say of one Application at one time — which windows are assigned to it, which are active, whether
//! they keep Argo CD from syncing it, until when, and whether a person may still sync it by hand. Modelled on
//! argo-cd's `SyncWindows.Matches`, `Active`, `InactiveAllows` and `CanSync` (`pkg/apis/application/v1alpha1`).
//! Pure: no I/O, "now" comes in as an argument; the pipeline asks it (`pipeline::windows`).
//!
//! Where Herald differs from Argo CD, and why:
//! - a window Herald cannot read (a bad kind, schedule, duration or time zone) is left out with a warning naming its
//!   project; Argo CD refuses to save one, and answers "cannot sync" while one is assigned;
//! - `timeZone` is applied with its rules at each time (daylight saving moves the window with the wall clock); Argo
//!   CD applies the zone's offset of the moment it evaluates;
//! - `syncOverrun` is about a sync already running when a window starts or ends: it does not change whether an
//!   Application that is OutOfSync can be synced, so it is not read.

use std::str::FromStr;

use chrono::{DateTime, Duration, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde_json::Value;

/// How far ahead [`blocked`] looks for the moment an Application can be synced again; a block that lasts longer
/// is told as lasting until then (and asked again then).
pub const LOOK_AHEAD: Duration = Duration::days(7);
/// At most this many window starts and ends are looked at, whatever the schedules (a window every minute).
const MOST_CHANGES: usize = 4096;

/// `allow`: syncs only while one is active; `deny`: no syncs while one is active.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    Allow,
    Deny,
}

/// One window, read.
#[derive(Debug, Clone)]
pub struct SyncWindow {
    pub kind: WindowKind,
    /// The cron pattern as written (5 fields: minute hour day-of-month month day-of-week).
    pub schedule: String,
    cron: Cron,
    duration: Duration,
    zone: chrono_tz::Tz,
    applications: Vec<String>,
    namespaces: Vec<String>,
    clusters: Vec<String>,
    /// A person may still sync by hand while it blocks.
    pub manual_sync: bool,
    /// Every list set must match (applications AND namespaces AND clusters); else any one.
    and_operator: bool,
}

impl PartialEq for SyncWindow {
    fn eq(&self, other: &Self) -> bool {
        (
            self.kind,
            &self.schedule,
            self.duration,
            self.zone,
            self.manual_sync,
            self.and_operator,
        ) == (
            other.kind,
            &other.schedule,
            other.duration,
            other.zone,
            other.manual_sync,
            other.and_operator,
        ) && (&self.applications, &self.namespaces, &self.clusters)
            == (&other.applications, &other.namespaces, &other.clusters)
    }
}

/// The Application a window may be assigned to: its name, and its destination.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// `spec.destination.server` and `spec.destination.name`, where set.
    pub server: Option<&'a str>,
    pub cluster_name: Option<&'a str>,
}

/// The windows keep Argo CD from syncing the Application (automated sync): until when, and whether a person may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocked {
    /// When it can be synced again (at most [`LOOK_AHEAD`] from now).
    pub until: DateTime<Utc>,
    /// Whether a manual sync is allowed now (every window that blocks allows it).
    pub manual_sync: bool,
}

/// The windows of a project's `spec` (`syncWindows`); each one that cannot be read is left out with a warning.
pub fn parse(project: &str, spec: &Value) -> Vec<SyncWindow> {
    let Some(list) = spec.get("syncWindows").and_then(Value::as_array) else {
        return Vec::new();
    };
    (list.iter().enumerate())
        .filter_map(|(i, w)| match parse_one(w) {
            Ok(window) => Some(window),
            Err(why) => {
                tracing::warn!(project, window = i, error = %why, "a sync window of this AppProject cannot be read: Herald leaves it out");
                None
            }
        })
        .collect()
}

/// One window of `spec.syncWindows`, or why it cannot be read.
pub fn parse_one(w: &Value) -> Result<SyncWindow, String> {
    let text = |key: &str| w.get(key).and_then(Value::as_str).unwrap_or_default();
    let list = |key: &str| -> Vec<String> {
        (w.get(key).and_then(Value::as_array).into_iter().flatten())
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let flag = |key: &str| w.get(key).and_then(Value::as_bool).unwrap_or(false);
    let kind = match text("kind") {
        "allow" => WindowKind::Allow,
        "deny" => WindowKind::Deny,
        other => return Err(format!("kind '{other}': can only be allow or deny")),
    };
    let schedule = text("schedule").trim().to_string();
    let cron = parse_schedule(&schedule)?;
    let duration = go_duration(text("duration"))?;
    let zone = match text("timeZone") {
        "" => chrono_tz::UTC,
        z => chrono_tz::Tz::from_str(z).map_err(|_| format!("unknown time zone '{z}'"))?,
    };
    Ok(SyncWindow {
        kind,
        schedule,
        cron,
        duration,
        zone,
        applications: list("applications"),
        namespaces: list("namespaces"),
        clusters: list("clusters"),
        manual_sync: flag("manualSync"),
        and_operator: flag("andOperator"),
    })
}

/// A standard 5-field cron pattern, as Argo CD's parser takes it (no seconds, no year, no `@daily`).
fn parse_schedule(schedule: &str) -> Result<Cron, String> {
    if schedule.starts_with('@') || schedule.split_whitespace().count() != 5 {
        return Err(format!("schedule '{schedule}': a cron pattern of 5 fields is expected"));
    }
    (CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build())
    .parse(schedule)
    .map_err(|e| format!("schedule '{schedule}': {e}"))
}

/// A Go duration (`time.ParseDuration`): `2h`, `1h30m`, `90m`, `1.5h`, `45s`; positive.
pub fn go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("duration '{s}': a Go duration such as 2h, 1h30m or 90m is expected");
    let mut rest = s.trim();
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        let number: f64 = rest[..number_end].parse().map_err(|_| bad())?;
        let unit_end = rest[number_end..]
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .map_or(rest.len(), |i| number_end + i);
        let seconds = match &rest[number_end..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" | "μs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(bad()),
        };
        total += number * seconds;
        rest = &rest[unit_end..];
    }
    match total {
        t if t > 0.0 && t < 1e10 => Ok(Duration::milliseconds((t * 1000.0).round() as i64)),
        _ => Err(bad()),
    }
}

/// A glob as argo-cd's `globMatch` (gobwas/glob without separators: `*` matches `/` too); a bad glob matches
/// nothing.
fn glob(pattern: &str, value: &str) -> bool {
    pattern == "*"
        || globset::GlobBuilder::new(pattern)
            .literal_separator(false)
            .build()
            .is_ok_and(|g| g.compile_matcher().is_match(value))
}

impl SyncWindow {
    /// Whether the window is assigned to `t` (`Matches`): by application name, destination cluster (its name or
    /// server) or destination namespace — any one of the lists that are set, or each of them with `andOperator`.
    pub fn assigned(&self, t: &Target) -> bool {
        let cluster = |c: &String| {
            t.cluster_name.is_some_and(|n| !n.is_empty() && glob(c, n))
                || t.server.is_some_and(|s| !s.is_empty() && glob(c, s))
        };
        let lists = [
            (!self.applications.is_empty()).then(|| self.applications.iter().any(|a| glob(a, t.name))),
            (!self.clusters.is_empty()).then(|| self.clusters.iter().any(cluster)),
            (!self.namespaces.is_empty()).then(|| self.namespaces.iter().any(|n| glob(n, t.namespace))),
        ];
        let mut set = lists.iter().flatten().peekable();
        if set.peek().is_none() {
            return false;
        }
        match self.and_operator {
            true => set.all(|m| *m),
            false => set.any(|m| *m),
        }
    }

    /// Whether the window is open at `at`: an occurrence of its schedule started before `at` and its duration has
    /// not passed (`Active`: both ends excluded).
    pub fn active(&self, at: DateTime<Utc>) -> bool {
        self.last_start(at).is_some_and(|s| s + self.duration > at)
    }

    /// The last start of the window strictly before `at`, in its time zone.
    fn last_start(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        (self
            .cron
            .find_previous_occurrence(&at.with_timezone(&self.zone), false)
            .ok())
        .map(|s| s.with_timezone(&Utc))
    }

    /// When the window opens or closes after `now`, up to `horizon`.
    fn changes(&self, now: DateTime<Utc>, horizon: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let mut out: Vec<DateTime<Utc>> = self.last_start(now).map(|s| s + self.duration).into_iter().collect();
        let starts = self.cron.iter_after(now.with_timezone(&self.zone));
        for start in starts
            .map(|s| s.with_timezone(&Utc))
            .take_while(|s| *s <= horizon)
            .take(MOST_CHANGES)
        {
            out.extend([start, start + self.duration]);
        }
        out.retain(|t| *t > now && *t <= horizon);
        out
    }
}

/// Whether a sync may run at `at` under the `assigned` windows (`CanSync`): an active deny blocks; else an active
/// allow lets it; else allow windows assigned and none active block. A manual sync passes where every window that
/// blocks it has `manualSync`.
fn can_sync(assigned: &[&SyncWindow], at: DateTime<Utc>, manual: bool) -> bool {
    let (active, inactive): (Vec<&SyncWindow>, Vec<&SyncWindow>) = assigned.iter().partition(|w| w.active(at));
    let denies: Vec<&&SyncWindow> = active.iter().filter(|w| w.kind == WindowKind::Deny).collect();
    if !denies.is_empty() {
        return manual && denies.iter().all(|w| w.manual_sync);
    }
    if active.iter().any(|w| w.kind == WindowKind::Allow) {
        return true;
    }
    let closed_allows: Vec<&&SyncWindow> = inactive.iter().filter(|w| w.kind == WindowKind::Allow).collect();
    closed_allows.is_empty() || (manual && closed_allows.iter().all(|w| w.manual_sync))
}

/// Whether `windows` keep Argo CD's automated sync from syncing `t` at `now`, and if so until when (the first
/// window start or end after which it may, within [`LOOK_AHEAD`]) and whether a person may sync it meanwhile.
pub fn blocked(windows: &[SyncWindow], t: &Target, now: DateTime<Utc>) -> Option<Blocked> {
    let assigned: Vec<&SyncWindow> = windows.iter().filter(|w| w.assigned(t)).collect();
    if can_sync(&assigned, now, false) {
        return None;
    }
    let horizon = now + LOOK_AHEAD;
    let mut changes: Vec<DateTime<Utc>> = assigned.iter().flat_map(|w| w.changes(now, horizon)).collect();
    changes.sort();
    changes.dedup();
    // A window is open strictly after its start: what holds from a change on is asked a second after it.
    let until = (changes.into_iter().take(MOST_CHANGES))
        .find(|c| can_sync(&assigned, *c + Duration::seconds(1), false))
        .unwrap_or(horizon);
    Some(Blocked {
        until,
        manual_sync: can_sync(&assigned, now, true),
    })
}

#[cfg(test)]
mod tests;
