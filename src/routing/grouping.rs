//! Grouping, as Alertmanager does it: which message (if any) a group's flush sends, why, and when the group is due
//! again. Pure: the pipeline reads the group's members, asks [`plan_flush`], and writes what it says.

use chrono::{DateTime, Utc};

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
}

impl FlushReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FlushReason::Fired => "fired",
            FlushReason::Changed => "changed",
            FlushReason::StillFiring => "still firing",
            FlushReason::Resolved => "resolved",
        }
    }
}

/// What a flush sees of its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupView {
    /// A message for the current generation was sent already.
    pub active: bool,
    pub generation: i64,
    /// Members firing now, and whether any of them is new since the last message.
    pub firing: usize,
    pub new_firing: bool,
    /// Members resolved since the last message.
    pub newly_resolved: usize,
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

pub fn plan_flush(g: GroupView, repeat_interval: std::time::Duration, now: DateTime<Utc>) -> FlushPlan {
    let send = if !g.active {
        // Not sent yet: open it, or say nothing if everything resolved before it was ever sent.
        (g.firing > 0).then_some((Action::Open, FlushReason::Fired))
    } else if g.firing == 0 {
        (g.newly_resolved > 0).then_some((Action::Resolve, FlushReason::Resolved))
    } else if g.new_firing || g.newly_resolved > 0 {
        Some((Action::Update, FlushReason::Changed))
    } else {
        Some((Action::Update, FlushReason::StillFiring))
    };
    let opens = matches!(send, Some((Action::Open, _)));
    let generation = if opens { g.generation + 1 } else { g.generation };
    let active = g.firing > 0 && (g.active || opens);
    let repeat = chrono::Duration::from_std(repeat_interval).unwrap_or(chrono::Duration::MAX);
    FlushPlan {
        send,
        generation,
        active,
        next_at: active.then(|| now.checked_add_signed(repeat).unwrap_or(DateTime::<Utc>::MAX_UTC)),
    }
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
            let plan = plan_flush(g, HOUR, now);
            assert_eq!(plan.send, send, "{g:?}");
            assert_eq!(plan.generation, generation, "{g:?}");
            assert_eq!(plan.active, active, "{g:?}");
            assert_eq!(plan.next_at, active.then(|| now + chrono::Duration::hours(1)), "{g:?}");
        }
    }
}
