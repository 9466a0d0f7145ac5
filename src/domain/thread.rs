//! The threads a delivery belongs to ([`Thread`]): what a receiver threads, edits or tickets by (its key, the
//! `thread_key` of a notification and of the receiver's memo), and which deliveries wait for each other in the
//! outbox (its order key). Every thread key and order key Herald writes is made here, from typed parts; nothing
//! takes a key apart again.
//!
//! The keys of the default Argo CD instance are the strings Herald always wrote (so the memos of a Slack message
//! or a Jira issue opened before an upgrade are still found); a thread about another instance's Application names
//! that instance.

use chrono::{DateTime, Utc};

use super::AppId;

/// One conversation with one receiver.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Thread {
    /// A group's messages (`routing::grouping`) in one generation: a new generation, and a new thread, starts
    /// once everything in the group resolved.
    Group {
        receiver: String,
        group_key: String,
        generation: i64,
    },
    /// One incident's escalation steps to one receiver, and their resolve and acknowledgement.
    Escalation { receiver: String, incident: i64 },
    /// An escalation step's message to the person a schedule had on call when it fired (`step`: its number).
    OnCall { receiver: String, incident: i64, step: i64 },
    /// The message to the person who started a failed or pruning sync, about one incident (its fingerprint
    /// names the Application and its instance).
    Initiator { receiver: String, fingerprint: String },
    /// One deployment of one Application (of its instance): a revision, by the operation that started at
    /// `started` (none when Argo CD did not say).
    Change {
        receiver: String,
        app: AppId,
        revision: String,
        started: Option<DateTime<Utc>>,
    },
    /// One state (pending, success…) of one sync of one Application (of its instance), told as the status of
    /// the commit `sha`: the sync is the operation that started at `started`.
    CommitStatus {
        receiver: String,
        app: AppId,
        sha: String,
        started: Option<DateTime<Utc>>,
        state: crate::domain::CommitState,
    },
    /// A team's digest of one slot.
    Digest {
        receiver: String,
        team: String,
        slot: DateTime<Utc>,
    },
    /// `herald send-test` at `at`.
    Test { receiver: String, at: DateTime<Utc> },
    /// Herald losing (and regaining) the Argo CD API's permission for one project of one instance, told to the
    /// default team: its start and its end, one thread per receiver.
    Access {
        receiver: String,
        instance: String,
        project: String,
    },
}

/// The fingerprint of Herald's loss of the Argo CD API's permission for `project` of `instance` (the incident its
/// messages carry, never stored), and the key of its threads.
pub fn access_fingerprint(instance: &str, project: &str) -> String {
    format!("argocd-access/{instance}/{project}")
}

impl Thread {
    /// The receiver the thread is with.
    pub fn receiver(&self) -> &str {
        match self {
            Thread::Group { receiver, .. }
            | Thread::Escalation { receiver, .. }
            | Thread::OnCall { receiver, .. }
            | Thread::Initiator { receiver, .. }
            | Thread::Change { receiver, .. }
            | Thread::CommitStatus { receiver, .. }
            | Thread::Digest { receiver, .. }
            | Thread::Test { receiver, .. }
            | Thread::Access { receiver, .. } => receiver,
        }
    }

    /// The key receivers find what they sent before by (with the receiver's name: the memo's key), and the
    /// outbox finds a change already queued by.
    pub fn key(&self) -> String {
        match self {
            Thread::Group { generation, .. } => format!("{}:{generation}", self.order_key()),
            Thread::Escalation { receiver, incident } => format!("{receiver}:escalation:{incident}"),
            Thread::OnCall {
                receiver,
                incident,
                step,
            } => format!("{receiver}:oncall:{incident}:{step}"),
            // One key for every receiver reaching the person: each keeps its own memo of it.
            Thread::Initiator { fingerprint, .. } => format!("{fingerprint}:initiator"),
            Thread::Change { revision, started, .. } => format!(
                "{}:{revision}@{}",
                self.order_key(),
                started.map_or(0, |t| t.timestamp_millis())
            ),
            Thread::CommitStatus {
                sha, started, state, ..
            } => format!(
                "{}:{sha}@{}:{}",
                self.order_key(),
                started.map_or(0, |t| t.timestamp_millis()),
                state.as_str()
            ),
            Thread::Digest { receiver, team, slot } => format!("{receiver}:digest:{team}:{}", slot.timestamp()),
            Thread::Test { at, .. } => format!("herald-test-{}", at.timestamp()),
            // The access incident's fingerprint: each receiver keeps its own memo of it.
            Thread::Access { instance, project, .. } => access_fingerprint(instance, project),
        }
    }

    /// The deliveries of one order key are sent one after the other, each waiting until the one before was
    /// delivered or given up; nothing else waits on them. A group's messages keep their order across its
    /// generations (the resolve of one before the open of the next), one Application's changes to a receiver
    /// theirs; every other thread is its own order.
    pub fn order_key(&self) -> String {
        match self {
            Thread::Group {
                receiver, group_key, ..
            } => format!("{receiver}:{group_key}"),
            // `{receiver}:change:{namespace}/{name}`, the instance before them when it is not the default.
            Thread::Change { receiver, app, .. } => format!("{receiver}:change:{app}"),
            // One Application's statuses to a receiver in order: a sync's `pending` before its `success`.
            Thread::CommitStatus { receiver, app, .. } => format!("{receiver}:status:{app}"),
            Thread::Initiator { receiver, fingerprint } => format!("{receiver}:{fingerprint}:initiator"),
            Thread::Access { receiver, .. } => format!("{receiver}:{}", self.key()),
            Thread::Escalation { .. } | Thread::OnCall { .. } | Thread::Digest { .. } | Thread::Test { .. } => {
                self.key()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(ms).single().expect("a time")
    }

    fn change(instance: &str) -> Thread {
        Thread::Change {
            receiver: "pd".into(),
            app: AppId::of(instance, "argocd", "payments-api"),
            revision: "v3".into(),
            started: Some(at(1_735_754_340_000)),
        }
    }

    #[test]
    fn the_default_instances_keys_are_the_ones_stored_before_threads_were_a_type() {
        let cases = [
            (
                Thread::Group {
                    receiver: "chat".into(),
                    group_key: "team=payments,kind=out_of_sync".into(),
                    generation: 2,
                },
                "chat:team=payments,kind=out_of_sync:2",
                "chat:team=payments,kind=out_of_sync",
            ),
            (
                Thread::Escalation {
                    receiver: "pager".into(),
                    incident: 41,
                },
                "pager:escalation:41",
                "pager:escalation:41",
            ),
            (
                Thread::Initiator {
                    receiver: "mail".into(),
                    fingerprint: "f00d".into(),
                },
                "f00d:initiator",
                "mail:f00d:initiator",
            ),
            (
                change("default"),
                "pd:change:argocd/payments-api:v3@1735754340000",
                "pd:change:argocd/payments-api",
            ),
            (
                Thread::Digest {
                    receiver: "chat".into(),
                    team: "payments".into(),
                    slot: at(1_735_754_400_000),
                },
                "chat:digest:payments:1735754400",
                "chat:digest:payments:1735754400",
            ),
            (
                Thread::Test {
                    receiver: "chat".into(),
                    at: at(1_735_754_400_000),
                },
                "herald-test-1735754400",
                "herald-test-1735754400",
            ),
        ];
        for (thread, key, order) in cases {
            assert_eq!(
                (thread.key().as_str(), thread.order_key().as_str()),
                (key, order),
                "{thread:?}"
            );
        }
    }

    #[test]
    fn another_instances_change_is_its_own_thread_and_order() {
        let (eu, us) = (change("eu"), change("us"));
        assert_eq!(us.key(), "pd:change:us/argocd/payments-api:v3@1735754340000");
        assert_ne!(eu.key(), us.key());
        assert_ne!(eu.order_key(), us.order_key());
        assert_ne!(change("default").key(), us.key());
    }

    #[test]
    fn no_two_receivers_and_no_two_incidents_share_an_order() {
        let escalation = |receiver: &str, incident| Thread::Escalation {
            receiver: receiver.into(),
            incident,
        };
        let initiator = |receiver: &str| Thread::Initiator {
            receiver: receiver.into(),
            fingerprint: "f00d".into(),
        };
        let orders = [
            escalation("pager", 1).order_key(),
            escalation("pager", 2).order_key(),
            escalation("boss", 1).order_key(),
            initiator("mail").order_key(),
            initiator("slack").order_key(),
        ];
        let distinct: std::collections::BTreeSet<_> = orders.iter().collect();
        assert_eq!(distinct.len(), orders.len(), "{orders:?}");
        assert_eq!(
            initiator("mail").key(),
            initiator("slack").key(),
            "one thread, a memo per receiver"
        );
    }

    #[test]
    fn a_syncs_commit_statuses_are_one_thread_each_in_the_applications_order() {
        let status = |instance: &str, state| Thread::CommitStatus {
            receiver: "gh".into(),
            app: AppId::of(instance, "argocd", "payments-api"),
            sha: "4c3d2b1a0f9e8d7c6b5a4c3d2b1a0f9e8d7c6b5a".into(),
            started: Some(at(1_735_754_340_000)),
            state,
        };
        let (pending, success) = (
            status("default", crate::domain::CommitState::Pending),
            status("default", crate::domain::CommitState::Success),
        );
        assert_eq!(
            pending.key(),
            "gh:status:argocd/payments-api:4c3d2b1a0f9e8d7c6b5a4c3d2b1a0f9e8d7c6b5a@1735754340000:pending"
        );
        assert_ne!(pending.key(), success.key());
        assert_eq!(pending.order_key(), success.order_key());
        assert_eq!(pending.order_key(), "gh:status:argocd/payments-api");
        let us = status("us", crate::domain::CommitState::Pending);
        assert_eq!(us.order_key(), "gh:status:us/argocd/payments-api");
    }

    #[test]
    fn a_groups_generations_are_threads_of_one_order() {
        let group = |generation| Thread::Group {
            receiver: "chat".into(),
            group_key: "team=payments".into(),
            generation,
        };
        assert_ne!(group(1).key(), group(2).key());
        assert_eq!(group(1).order_key(), group(2).order_key());
    }
}
