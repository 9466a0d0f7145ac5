//! Grouping, as Alertmanager does it: when a group flushes after an incident joins it ([`next_flush_at`]), which
//! message (if any) a group's flush sends, why, and when the group is due again ([`plan_flush`]). Pure: the pipeline
//! and the store read the group, ask, and write what they are told.

use chrono::{DateTime, Utc};

use crate::configuration::GroupingSettings;
use crate::domain::Action;

/// Why a group's message is sent now; its text is the notification's `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushReason {
    /// The group's first message (or the first since everything in it resolved).
    Fired,
    /// New incidents fired or some resolved since the last message.
    Changed,
    /// Nothing changed; `repeat_interval` passed.
    StillFiring,
    /// Everything in the group resolved.
    Resolved,
    /// Something happened once (a prune): told once, never repeated.
    Event,
}

impl FlushReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FlushReason::Fired => "fired",
            FlushReason::Changed => "changed",
            FlushReason::StillFiring => "still firing",
            FlushReason::Resolved => "resolved",
            FlushReason::Event => "event",
        }
    }
}

/// What a flush sees of its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupView {
    /// A message for the current generation was sent already.
    pub active: bool,
    pub generation: i64,
    /// Members firing now that people may be told about, and whether any of them is new since the last message.
    pub firing: usize,
    pub new_firing: bool,
    /// Members firing now but held back (silenced, inhibited): not in the message, and no reason to send one;
    /// they keep the thread open.
    pub held: usize,
    /// Members resolved since the last message.
    pub newly_resolved: usize,
    /// Events (a prune) not told yet: told in this flush, then they leave the group.
    pub new_events: usize,
}

/// What the flush does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushPlan {
    /// The message to send, if any.
    pub send: Option<(Action, FlushReason)>,
    /// The thread generation the message belongs to (a new one after everything resolved).
    pub generation: i64,
    /// Whether the group still has a live thread after this flush.
    pub active: bool,
    /// When the group is due again (`repeat_interval`), if it stays active.
    pub next_at: Option<DateTime<Utc>>,
}

pub fn plan_flush(g: GroupView, timing: &GroupingSettings, now: DateTime<Utc>) -> FlushPlan {
    let live = g.firing + g.held;
    let news = g.newly_resolved > 0 || g.new_events > 0;
    let send = if !g.active {
        // Not sent yet: open it, tell the events, or say nothing (everything resolved, or is held, before it was
        // ever sent: its resolve goes only where its firing went).
        if g.firing > 0 {
            Some((Action::Open, FlushReason::Fired))
        } else {
            (g.new_events > 0).then_some((Action::Open, FlushReason::Event))
        }
    } else if live == 0 {
        if g.newly_resolved > 0 {
            Some((Action::Resolve, FlushReason::Resolved))
        } else {
            (g.new_events > 0).then_some((Action::Update, FlushReason::Event))
        }
    } else if g.firing == 0 {
        // Everything still firing is held back: only news is sent, never a repeat.
        news.then_some((Action::Update, FlushReason::Changed))
    } else if g.new_firing || news {
        Some((Action::Update, FlushReason::Changed))
    } else {
        Some((Action::Update, FlushReason::StillFiring))
    };
    let opens = matches!(send, Some((Action::Open, _)));
    let generation = if opens { g.generation + 1 } else { g.generation };
    // An events-only message opens no thread: there is nothing to repeat or resolve.
    let active = if opens { g.firing > 0 } else { g.active && live > 0 };
    let after = |d: std::time::Duration| {
        chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    };
    // Held members are looked at again every group_interval, so people hear soon after a silence ends.
    let next_at = if g.held > 0 && g.firing == 0 {
        Some(after(timing.group_interval))
    } else {
        active.then(|| after(timing.repeat_interval))
    };
    FlushPlan {
        send,
        generation,
        active,
        next_at,
    }
}

/// What scheduling a flush needs to know of a group that exists already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSchedule {
    /// A message for the current generation was sent already.
    pub active: bool,
    pub last_flush_at: Option<DateTime<Utc>>,
    /// The flush already planned, if any.
    pub next_flush_at: Option<DateTime<Utc>>,
}

/// When a group flushes after an incident joined it or changed in it (`existing` is `None` for a new group).
///
/// A new group, or one that never notified, waits `group_wait` so that what fires together is sent together; a group
/// that already notified waits `group_interval` since its last flush (or flushes now, if that has passed). A flush
/// already planned earlier than that is kept: joining never delays a group.
pub fn next_flush_at(existing: Option<GroupSchedule>, timing: &GroupingSettings, now: DateTime<Utc>) -> DateTime<Utc> {
    let after = |t: DateTime<Utc>, d: std::time::Duration| {
        chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| t.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    };
    let Some(g) = existing else {
        return after(now, timing.group_wait);
    };
    let earliest = match (g.active, g.last_flush_at) {
        (true, Some(last)) => after(last, timing.group_interval).max(now),
        _ => after(now, timing.group_wait),
    };
    g.next_flush_at.map_or(earliest, |planned| planned.min(earliest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: std::time::Duration = std::time::Duration::from_secs(3600);

    fn group(active: bool, firing: usize, new_firing: bool, newly_resolved: usize) -> GroupView {
        GroupView {
            active,
            generation: 3,
            firing,
            new_firing,
            newly_resolved,
            ..Default::default()
        }
    }

    fn timing() -> GroupingSettings {
        GroupingSettings {
            group_interval: std::time::Duration::from_secs(300),
            repeat_interval: HOUR,
            ..Default::default()
        }
    }

    #[test]
    fn held_members_and_events() {
        let now = DateTime::<Utc>::UNIX_EPOCH;
        let five_min = Some(now + chrono::Duration::minutes(5));
        let hour = Some(now + chrono::Duration::hours(1));
        let held = |active: bool, held: usize, newly_resolved: usize| GroupView {
            active,
            generation: 3,
            held,
            newly_resolved,
            ..Default::default()
        };
        let events = |active: bool, firing: usize, new_events: usize| GroupView {
            active,
            generation: 3,
            firing,
            new_events,
            ..Default::default()
        };
        // (group, send, generation, active, next flush, why)
        let cases = [
            (
                held(true, 1, 0),
                None,
                3,
                true,
                five_min,
                "a silenced incident is not repeated; looked at again soon",
            ),
            (
                held(false, 1, 0),
                None,
                3,
                false,
                five_min,
                "a thread never opened for a held incident",
            ),
            (
                held(true, 1, 1),
                Some((Action::Update, FlushReason::Changed)),
                3,
                true,
                five_min,
                "a resolve next to a held incident is still told",
            ),
            (
                events(false, 0, 1),
                Some((Action::Open, FlushReason::Event)),
                4,
                false,
                None,
                "an event is told once and opens no thread",
            ),
            (
                events(false, 0, 0),
                None,
                3,
                false,
                None,
                "a told event is never repeated",
            ),
            (
                events(true, 1, 1),
                Some((Action::Update, FlushReason::Changed)),
                3,
                true,
                hour,
                "an event in a firing group is news",
            ),
            (
                events(true, 0, 1),
                Some((Action::Update, FlushReason::Event)),
                3,
                false,
                None,
                "an event in a thread with nothing firing",
            ),
        ];
        for (g, send, generation, active, next_at, why) in cases {
            let plan = plan_flush(g, &timing(), now);
            assert_eq!(plan.send, send, "{why}");
            assert_eq!(plan.generation, generation, "{why}");
            assert_eq!(plan.active, active, "{why}");
            assert_eq!(plan.next_at, next_at, "{why}");
        }
    }

    #[test]
    fn the_flush_table() {
        let now = DateTime::<Utc>::UNIX_EPOCH;
        let cases = [
            (
                group(false, 2, true, 0),
                Some((Action::Open, FlushReason::Fired)),
                4,
                true,
            ),
            (group(false, 0, false, 1), None, 3, false),
            (
                group(true, 0, false, 2),
                Some((Action::Resolve, FlushReason::Resolved)),
                3,
                false,
            ),
            (group(true, 0, false, 0), None, 3, false),
            (
                group(true, 1, true, 0),
                Some((Action::Update, FlushReason::Changed)),
                3,
                true,
            ),
            (
                group(true, 1, false, 1),
                Some((Action::Update, FlushReason::Changed)),
                3,
                true,
            ),
            (
                group(true, 1, false, 0),
                Some((Action::Update, FlushReason::StillFiring)),
                3,
                true,
            ),
        ];
        for (g, send, generation, active) in cases {
            let plan = plan_flush(g, &timing(), now);
            assert_eq!(plan.send, send, "{g:?}");
            assert_eq!(plan.generation, generation, "{g:?}");
            assert_eq!(plan.active, active, "{g:?}");
            assert_eq!(plan.next_at, active.then(|| now + chrono::Duration::hours(1)), "{g:?}");
        }
    }

    #[test]
    fn a_group_flushes_after_group_wait_then_group_interval_and_never_later_than_planned() {
        let now = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::hours(1);
        let timing = GroupingSettings {
            group_wait: std::time::Duration::from_secs(30),
            group_interval: std::time::Duration::from_secs(300),
            ..Default::default()
        };
        let secs = chrono::Duration::seconds;
        let group = |active: bool, last: Option<i64>, next: Option<i64>| {
            Some(GroupSchedule {
                active,
                last_flush_at: last.map(|s| now + secs(s)),
                next_flush_at: next.map(|s| now + secs(s)),
            })
        };
        // (what the store holds, flush in seconds from now, why)
        let cases = [
            (None, 30, "a new group waits group_wait"),
            (
                group(false, None, None),
                30,
                "a group that never notified waits group_wait",
            ),
            (group(false, None, Some(10)), 10, "an earlier planned flush is kept"),
            (
                group(false, None, Some(60)),
                30,
                "a later planned flush is brought forward",
            ),
            (
                group(false, Some(-100), None),
                30,
                "a group whose thread ended waits group_wait again",
            ),
            (
                group(true, Some(-100), None),
                200,
                "an active group waits group_interval since its last flush",
            ),
            (
                group(true, Some(-400), None),
                0,
                "an interval that has passed flushes now",
            ),
            (
                group(true, Some(-100), Some(50)),
                50,
                "an earlier planned flush is kept in an active group",
            ),
            (group(true, Some(-100), Some(-5)), -5, "an overdue flush stays due"),
            (
                group(true, None, None),
                30,
                "an active group without a flush on record waits group_wait",
            ),
        ];
        for (existing, want, why) in cases {
            assert_eq!(next_flush_at(existing, &timing, now), now + secs(want), "{why}");
        }
    }
}
