//! What the pages say, in people's words: an incident's kind and state ("OutOfSync for over 1 h", "Degraded for
//! 12 min", "Sync failed", "OutOfSync, resolved after 1 h 12 min"), an Application's status ("OutOfSync for over
//! 1 h"), a transition, a delivery; and every time in the zone the reader chose ([`Zone`]: `?tz=`, else
//! `server.time_zone`). The status page and the Application's page both say things through here, never with an
//! internal name (`out_of_sync`, `sync_failed`).

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::domain::notification::{duration_words, for_how_long};
use crate::domain::{Acknowledgement, Action, DeliveryState, Hold, IncidentState};
use crate::pipeline::{IncidentRecord, TimelineEntry};
use crate::state::Field;

/// The time zone a page shows times in, and whether the reader chose it (so links keep `?tz=`).
#[derive(Debug, Clone, Copy)]
pub struct Zone {
    pub tz: Tz,
    pub chosen: bool,
}

impl Zone {
    /// The zone, as messages and descriptions take it.
    pub fn zone(&self) -> crate::domain::Zone {
        crate::domain::Zone(self.tz)
    }

    /// `2026-03-02 11:00:00 CET`.
    pub fn time(&self, t: DateTime<Utc>) -> String {
        self.zone().stamp_seconds(t)
    }

    /// `11:00 CET` when `t` is on `now`'s day (in this zone), else with the date.
    pub fn short(&self, t: DateTime<Utc>, now: DateTime<Utc>) -> String {
        self.zone().short(t, now)
    }

    /// The query parameter that keeps this zone through a link (`tz=Europe%2FBerlin`), when the reader chose it.
    pub fn param(&self) -> Option<(&'static str, String)> {
        self.chosen.then(|| ("tz", self.tz.name().to_string()))
    }
}

/// A sentence's first letter in upper case.
pub fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// An incident, its kind and state in people's words at `now`: `OutOfSync for over 1 h`, `Degraded for 12 min`,
/// `Sync failed: one or more objects failed to apply`, `OutOfSync, resolved after 1 h 12 min`; a pending one says
/// how long its condition has held (`OutOfSync for 20 min`). The one function both pages use.
pub fn incident(i: &IncidentRecord, now: DateTime<Utc>) -> String {
    let view = i.full_view();
    let problem = capitalised(&view.problem());
    match (i.state, i.resolved_at) {
        (IncidentState::Resolved, Some(at)) if !i.kind.is_informational() => {
            let why = view
                .resolution
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            format!("{problem}, resolved{why} after {}", duration_words(view.lasted(at)))
        }
        (IncidentState::Resolved, _) => problem,
        _ if view.lasts() => format!("{problem} for {}", for_how_long(now - i.since)),
        _ => problem,
    }
}

/// Who acknowledged an incident, in the reader's zone: `acknowledged by alice at 10:02 CET, until resolved`
/// (`until 14:00 CET`, `… (ended)`); once it resolved, only who and when. With its comment, if any.
pub fn acknowledgement(a: &Acknowledgement, state: IncidentState, zone: &Zone, now: DateTime<Utc>) -> String {
    let who = format!("acknowledged by {} at {}", a.by, zone.short(a.at, now));
    let words = match (state, a.until) {
        (IncidentState::Resolved, _) => who,
        (_, None) => format!("{who}, until resolved"),
        (_, Some(u)) if u <= now => format!("{who}, until {} (ended)", zone.short(u, now)),
        (_, Some(u)) => format!("{who}, until {}", zone.short(u, now)),
    };
    if a.comment.is_empty() {
        words
    } else {
        format!("{words}: {}", a.comment)
    }
}

/// Why a firing incident is not told now, in the reader's zone: `silenced by bob until 14:00 CET (silence 3f…)`.
pub fn held(h: &Hold, zone: &Zone, now: DateTime<Utc>) -> String {
    match h {
        Hold::Silenced {
            silence,
            created_by,
            until,
        } => {
            format!(
                "silenced by {created_by} until {} (silence {silence})",
                zone.short(*until, now)
            )
        }
        Hold::SyncWindow { until, manual_sync } => crate::domain::SyncWindowHold {
            until: *until,
            manual_sync: *manual_sync,
        }
        .describe(&zone.short(*until, now)),
        Hold::Muted { until, .. } => h.describe_muted(&until.map(|u| zone.short(u, now)).unwrap_or_default()),
        other => other.describe(zone.zone()),
    }
}

/// An incident's state as a word: `Pending`, `Firing`, `Resolved`.
pub fn state(s: IncidentState) -> &'static str {
    match s {
        IncidentState::Pending => "Pending",
        IncidentState::Firing => "Firing",
        IncidentState::Resolved => "Resolved",
    }
}

/// An Application's status held since `since`: `OutOfSync for over 1 h`.
pub fn status_for(status: &str, since: DateTime<Utc>, now: DateTime<Utc>) -> String {
    format!("{status} for {}", for_how_long(now - since))
}

/// A pending incident's due time: `fires in 35 min`, or `fires now`.
pub fn fires_in(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    if at <= now {
        "fires now".into()
    } else {
        format!("fires in {}", duration_words(at - now))
    }
}

/// One change of an Application: `Sync: Synced → OutOfSync`, `Health: Degraded` (its first state).
pub fn transition(t: &TimelineEntry) -> String {
    let field = match Field::from_stored(&t.field) {
        Some(Field::Sync) => "Sync",
        Some(Field::Health) => "Health",
        Some(Field::Operation) => "Sync operation",
        Some(Field::Revision) => "Revision",
        Some(Field::Conditions) => "Conditions",
        Some(Field::RequiresPruning) => "Resources requiring pruning",
        // Written as stored, as it always was (`lifecycle: active → deleting`).
        Some(Field::Lifecycle) => Field::Lifecycle.as_str(),
        // A name an older or newer Herald stored.
        None => t.field.as_str(),
    };
    let value = |v: &str| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.to_string()
        }
    };
    match &t.from {
        Some(from) => format!("{field}: {} → {}", value(from), value(&t.to)),
        None => format!("{field}: {}", value(&t.to)),
    }
}

/// What a delivery does, as words after its receiver's name: `told`, `reminded`, `told it resolved`, …
pub fn action(a: Action) -> &'static str {
    match a {
        Action::Open => "told",
        Action::Update => "told again",
        Action::Resolve => "told it resolved",
        Action::Acknowledge => "told it was acknowledged",
        Action::Test => "sent a test",
        Action::Digest => "sent a digest",
    }
}

/// Where a delivery is: `delivered at 10:01 CET`, `waiting (2 attempts)`, `failed: 503 …`.
pub fn delivery(d: &crate::pipeline::OutboxRecord, zone: &Zone, now: DateTime<Utc>) -> String {
    let error = d.last_error.as_deref();
    match d.state {
        DeliveryState::Done => match d.delivered_at {
            Some(at) => format!("delivered at {}", zone.short(at, now)),
            None => "delivered".into(),
        },
        DeliveryState::Dead => format!("gave up: {}", error.unwrap_or("no answer")),
        _ if d.attempts > 0 => format!(
            "waiting, {} attempts so far ({})",
            d.attempts,
            error.unwrap_or("no error")
        ),
        _ => "waiting to be sent".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_read_as_changes_not_field_names() {
        let t = |field: &str, from: Option<&str>, to: &str| TimelineEntry {
            at: Utc::now(),
            field: field.into(),
            from: from.map(str::to_string),
            to: to.into(),
        };
        assert_eq!(
            transition(&t("sync", Some("Synced"), "OutOfSync")),
            "Sync: Synced → OutOfSync"
        );
        assert_eq!(transition(&t("health", None, "Healthy")), "Health: Healthy");
        assert_eq!(
            transition(&t("requires_pruning", Some("x"), "")),
            "Resources requiring pruning: x → none"
        );
    }

    #[test]
    fn times_are_shown_in_the_chosen_zone() {
        let at = DateTime::parse_from_rfc3339("2026-03-02T10:00:00Z")
            .expect("t")
            .with_timezone(&Utc);
        let berlin = Zone {
            tz: chrono_tz::Europe::Berlin,
            chosen: true,
        };
        assert_eq!(berlin.time(at), "2026-03-02 11:00:00 CET");
        assert_eq!(berlin.short(at, at), "11:00 CET");
        assert_eq!(
            Zone {
                tz: chrono_tz::UTC,
                chosen: false
            }
            .time(at),
            "2026-03-02 10:00:00 UTC"
        );
        assert_eq!(berlin.param(), Some(("tz", "Europe/Berlin".to_string())));
    }
}
