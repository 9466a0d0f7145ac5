//! Whom an escalation step with `on_call` reaches when it fires: the person its schedule has on call at that
//! moment (`crate::oncall::who`), directly, through `people_receivers` (a Slack direct message, an e-mail — as the
//! person who started a failed sync is told); nobody on call, or nobody Herald can reach, the team's receivers
//! instead, told so. Pure: settings, the schedule's calendar copy and the incident in, notifications out.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::configuration::Settings;
use crate::domain::{Action, Body, Incident, Notification, Thread};
use crate::oncall::{Calendar, OnCall};

/// One escalation step about to be sent.
pub struct Step<'a> {
    pub number: i64,
    pub after: Duration,
    pub schedule: &'a str,
}

/// The step's messages: to the person on call, else to the team's receivers saying nobody was (or could be
/// reached). `calendar`: the schedule's copy, when it has `ical`.
pub fn reach(
    settings: &Settings,
    calendar: Option<&Calendar>,
    step: &Step,
    view: &Incident,
    now: DateTime<Utc>,
) -> Vec<(Thread, Notification)> {
    let on_call = (settings.schedules.get(step.schedule)).and_then(|s| crate::oncall::who(s, calendar, now));
    let still = format!(
        "escalation step {} — still firing {} after it fired",
        step.number,
        humantime::format_duration(step.after)
    );
    let title = Notification::title_of(Action::Open, std::slice::from_ref(view), now);
    let why_not = match &on_call {
        Some(OnCall { person, .. }) => {
            let direct = to_person(settings, person, step, view, &title, &still, now);
            if !direct.is_empty() {
                return direct;
            }
            format!(
                "{person} is on call for {} but no people receiver can reach them",
                step.schedule
            )
        }
        None => format!("nobody was on call for {}", step.schedule),
    };
    let receivers = settings
        .teams
        .get(&view.team)
        .map(|t| t.receivers.as_slice())
        .unwrap_or_default();
    if receivers.is_empty() {
        tracing::warn!(incident = view.id, team = %view.team, schedule = step.schedule, "{why_not}, and the team has no receivers: the step reaches nobody");
    }
    (receivers.iter())
        .map(|receiver| {
            Notification::escalation(
                receiver,
                view.id,
                view,
                format!("Escalated (step {}, {why_not}): {title}", step.number),
                format!("{still}; {why_not}, so the team is told"),
                now,
            )
        })
        .collect()
}

/// The step's messages to `person`: one per way `people.<person>` gives that a people receiver can use.
fn to_person(
    settings: &Settings,
    person: &str,
    step: &Step,
    view: &Incident,
    title: &str,
    still: &str,
    now: DateTime<Utc>,
) -> Vec<(Thread, Notification)> {
    (settings.ways_to_reach(person).into_iter())
        .map(|(receiver, to)| {
            let thread = Thread::OnCall {
                receiver: receiver.name.clone(),
                incident: view.id,
                step: step.number,
            };
            let mut n = Notification::about(
                &thread,
                Action::Open,
                format!("You are on call ({}): {title}", step.schedule),
                format!("{still}; you are on call for {}", step.schedule),
                Body::Incidents(vec![view.clone()]),
                now,
            );
            n.recipient = Some(to);
            (thread, n)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Recipient;

    const CONFIG: &str = "
receivers:
  - {name: team, console: {}}
  - {name: mail, email: {to: [oncall@example.com]}}
  - {name: bot, slack: {token: xoxb-1, channel: '#ops'}}
smtp: {url: 'smtp://127.0.0.1:2525', from: herald@example.com}
people:
  alice: {email: alice@example.com, slack: U024BE7LH}
  bob: {slack: W012A3CDE}
  carol: {email: carol@example.com}
schedules:
  primary: {timezone: Europe/Berlin, rotation: {people: [alice, bob], every: 1w, start: 2026-03-23}}
teams: {payments: {receivers: [team], escalation: [{after: 30m, on_call: primary}]}}
";

    fn step() -> Step<'static> {
        Step {
            number: 1,
            after: Duration::from_secs(1800),
            schedule: "primary",
        }
    }

    fn incident() -> Incident {
        Incident {
            id: 7,
            team: "payments".into(),
            app_name: "payments-api".into(),
            ..Default::default()
        }
    }

    fn at(t: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(t).expect("time").with_timezone(&Utc)
    }

    fn sent(yaml: &str, now: &str) -> Vec<(String, Option<Recipient>, String)> {
        let s = Settings::from_yaml(yaml).expect("valid");
        (reach(&s, None, &step(), &incident(), at(now)).into_iter())
            .map(|(t, n)| {
                assert_eq!(t.key(), n.thread_key);
                (n.receiver, n.recipient, n.reason)
            })
            .collect()
    }

    #[test]
    fn the_person_on_call_when_the_step_fires_is_reached_by_each_way_they_can_be() {
        let alice = sent(CONFIG, "2026-03-30T06:59:00Z");
        let to: Vec<(&str, Option<&str>, Option<&str>)> = (alice.iter())
            .map(|(r, to, _)| {
                (
                    r.as_str(),
                    to.as_ref().and_then(|t| t.email.as_deref()),
                    to.as_ref().and_then(|t| t.slack.as_deref()),
                )
            })
            .collect();
        assert_eq!(
            to,
            vec![
                ("mail", Some("alice@example.com"), None),
                ("bot", None, Some("U024BE7LH"))
            ]
        );
        assert!(alice[0].2.contains("you are on call for primary"), "{}", alice[0].2);
        let bob = sent(CONFIG, "2026-03-30T07:00:00Z");
        assert_eq!(bob.len(), 1, "bob has Slack only: {bob:?}");
        assert_eq!(bob[0].1.as_ref().and_then(|t| t.slack.as_deref()), Some("W012A3CDE"));
    }

    #[test]
    fn nobody_on_call_or_nobody_reachable_tells_the_team_so() {
        let before = sent(CONFIG, "2026-03-01T12:00:00Z");
        assert_eq!(before.len(), 1);
        assert_eq!((before[0].0.as_str(), before[0].1.as_ref()), ("team", None));
        assert!(
            before[0].2.contains("nobody was on call for primary"),
            "{}",
            before[0].2
        );
        let no_slack = CONFIG.replace("  - {name: bot, slack: {token: xoxb-1, channel: '#ops'}}\n", "");
        let bob = sent(&no_slack, "2026-03-30T07:00:00Z");
        assert_eq!(bob.len(), 1);
        assert!(
            bob[0]
                .2
                .contains("bob is on call for primary but no people receiver can reach them"),
            "{}",
            bob[0].2
        );
    }
}
