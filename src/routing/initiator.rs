//! Who else hears about a sync a person started that failed or pruned: that person, directly (a Slack direct
//! message through the people's Slack receiver, an e-mail to their address), besides the team; and what the
//! team's message says about them. Pure: settings and the incident in, words and notifications out.

use chrono::{DateTime, Utc};

use crate::configuration::{ReceiverSettings, Settings};
use crate::domain::{Action, Body, Incident, Notification, Recipient, Thread};

/// The Argo CD username of the person who started the incident's sync; none for an automated sync. The view keeps
/// the initiator in `argocd::Initiator::describe`'s words, `user <name>`.
pub fn started_by(i: &Incident) -> Option<&str> {
    i.initiated_by
        .as_deref()?
        .strip_prefix("user ")
        .filter(|u| !u.trim().is_empty())
}

/// The line every receiver shows about who started the sync (`started by alice`, or `started by alice (no contact
/// configured)` when Herald cannot tell them), for the kinds that tell the initiator.
pub fn note(settings: &Settings, i: &Incident, now: DateTime<Utc>) -> Option<String> {
    if !settings.rules.notify_initiator(i.kind) || i.severity == crate::domain::Severity::Info {
        return None;
    }
    let user = started_by(i)?;
    Some(if direct(settings, i, now).is_empty() {
        format!("started by {user} (no contact configured)")
    } else {
        format!("started by {user}")
    })
}

/// The messages to the person who started the sync: one per way `people.<username>` gives to reach them that a
/// receiver can use. Sent once, when the incident fires: the failure is theirs to know of, its later updates are
/// the team's.
pub fn direct(settings: &Settings, i: &Incident, now: DateTime<Utc>) -> Vec<(Thread, Notification)> {
    // An informational incident (a prune the person asked for) is news to the team, not to them.
    if !settings.rules.notify_initiator(i.kind) || i.severity == crate::domain::Severity::Info {
        return Vec::new();
    }
    let Some(user) = started_by(i) else {
        return Vec::new();
    };
    // One message per way to reach them that a receiver can use.
    (settings.ways_to_reach(user).into_iter())
        .map(|(receiver, to)| to_person(receiver, to, i, now))
        .collect()
}

fn to_person(receiver: &ReceiverSettings, to: Recipient, i: &Incident, now: DateTime<Utc>) -> (Thread, Notification) {
    // Its own thread: the team's thread is the group's.
    let thread = Thread::Initiator {
        receiver: receiver.name.clone(),
        fingerprint: i.fingerprint.clone(),
    };
    let mut n = Notification::about(
        &thread,
        Action::Open,
        format!(
            "Your sync: {}",
            Notification::title_of(Action::Open, std::slice::from_ref(i), now)
        ),
        "you started this sync".into(),
        Body::Incidents(vec![i.clone()]),
        now,
    );
    n.recipient = Some(to);
    (thread, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Kind;

    const CONFIG: &str = "
receivers:
  - {name: team, console: {}}
  - {name: mail, email: {to: [oncall@example.com]}}
  - {name: bot, slack: {token: xoxb-1, channel: '#ops'}}
smtp: {url: 'smtp://127.0.0.1:2525', from: herald@example.com}
people:
  alice@example.com: {email: alice@example.com, slack: U024BE7LH}
  bob: {slack: W012A3CDE}
";

    fn failed_sync(by: &str) -> Incident {
        Incident {
            fingerprint: "f00d".into(),
            kind: Kind::SyncFailed,
            app_name: "payments".into(),
            initiated_by: Some(by.into()),
            ..Default::default()
        }
    }

    fn settings(extra: &str) -> Settings {
        Settings::from_yaml(&format!("{CONFIG}{extra}")).expect("valid")
    }

    #[test]
    fn a_known_person_gets_a_direct_message_and_an_email_in_their_own_thread() {
        let now = chrono::Utc::now();
        let out: Vec<Notification> = (direct(&settings(""), &failed_sync("user alice@example.com"), now).into_iter())
            .map(|(thread, n)| {
                assert_eq!(thread.receiver(), n.receiver);
                n
            })
            .collect();

        let to: Vec<(&str, Option<&Recipient>)> = out
            .iter()
            .map(|n| (n.receiver.as_str(), n.recipient.as_ref()))
            .collect();
        assert_eq!(out.len(), 2, "{to:?}");
        assert_eq!(out[0].receiver, "mail");
        assert_eq!(
            out[0].recipient.as_ref().and_then(|r| r.email.as_deref()),
            Some("alice@example.com")
        );
        assert_eq!(out[1].receiver, "bot");
        assert_eq!(
            out[1].recipient.as_ref().and_then(|r| r.slack.as_deref()),
            Some("U024BE7LH")
        );
        assert!(
            out.iter()
                .all(|n| n.thread_key == "f00d:initiator" && n.action == Action::Open)
        );
        assert_eq!(
            note(&settings(""), &failed_sync("user alice@example.com"), now).as_deref(),
            Some("started by alice@example.com")
        );
    }

    #[test]
    fn an_unknown_person_or_an_automated_sync_is_the_teams_alone() {
        let now = chrono::Utc::now();
        let s = settings("");
        assert!(direct(&s, &failed_sync("user mallory"), now).is_empty());
        assert_eq!(
            note(&s, &failed_sync("user mallory"), now).as_deref(),
            Some("started by mallory (no contact configured)")
        );
        assert!(direct(&s, &failed_sync("automated sync"), now).is_empty());
        assert_eq!(note(&s, &failed_sync("automated sync"), now), None);
    }

    #[test]
    fn a_kind_whose_rule_says_no_tells_nobody_else() {
        let now = chrono::Utc::now();
        let s = settings("rules: {sync_failed: {notify_initiator: false}}");
        assert!(direct(&s, &failed_sync("user bob"), now).is_empty());
        assert_eq!(note(&s, &failed_sync("user bob"), now), None);
        let mut degraded = failed_sync("user bob");
        degraded.kind = Kind::Degraded;
        assert!(direct(&settings(""), &degraded, now).is_empty(), "off by default");
    }

    #[test]
    fn the_username_is_read_back_from_the_initiators_words() {
        let by = |i: crate::argocd::Initiator| failed_sync(&i.describe());
        let alice = crate::argocd::Initiator {
            automated: false,
            username: Some("alice".into()),
        };
        assert_eq!(started_by(&by(alice)), Some("alice"));
        let robot = crate::argocd::Initiator {
            automated: true,
            username: None,
        };
        assert_eq!(started_by(&by(robot)), None);
    }
}
