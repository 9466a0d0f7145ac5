//! The delivery decision, in one place, read top to bottom — as Alertmanager's `notify/notify.go` builds its
//! pipeline. For every send about an incident (its first message, each repeat of its group, each escalation step,
//! its resolve) the scheduler asks these stages and writes what they answer; nothing else decides who is told.
//!
//! ```text
//!   inhibit → storm → silence → muted → sync window → acknowledge → route → group → escalate → dedup
//!   \__________________ hold it back? __________________/   \__ where does it go? __/   \_ what does a flush send? _/
//! ```
//!
//! - **inhibit**: another open incident of the same Application explains it (`prune_pending` explains
//!   `out_of_sync`): one cause, one incident people see ([`crate::routing::inhibit`]).
//! - **storm**: it is a member of a storm (many Applications of its cluster with the same problem at once,
//!   [`crate::incidents::storm`]) that is open, or ended less than `storm.window` ago: the storm is told instead.
//! - **silence**: a silence matches it, now; checked at every send, firing incidents too.
//! - **muted**: the incident's owner (the route that takes it, else its team) is inside one of its
//!   `mute_time_intervals`, or outside its `active_time_intervals` ([`crate::routing::time_interval`]): planned
//!   quiet hours. Asked of the configuration at every send, so what fired inside is sent when the interval ends,
//!   if it still fires; its resolve is sent only where its firing was.
//! - **sync window**: Argo CD's sync windows keep the Application from being synced (`out_of_sync` only, stored
//!   with the incident: `pipeline::windows`): its OutOfSync is expected until the window ends; its resolve is
//!   still sent.
//! - **acknowledge**: someone took it, and the acknowledgement still holds (until a time, or until it resolves):
//!   no repeats, no further escalation step; its resolve is still sent.
//! - **route**: the routes and the owning team ([`crate::routing::Router`]): `continue: true` routes add.
//! - **group**: each receiver's group key.
//! - **escalate**: the owning team's ladder; events are never escalated.
//! - **dedup**: what a group's flush sends now ([`crate::routing::grouping::plan_flush`]): held incidents are
//!   left out, events are told once and never repeated.
//!
//! A held incident keeps firing and stays visible, marked with why ([`Hold`]); its resolve is still recorded, and
//! sent only where its firing was sent. Every stage is a pure function with its own table test.

use chrono::{DateTime, Utc};

use crate::configuration::{EscalationStep, Settings};
use crate::domain::{Acknowledgement, Hold, Labels, SyncWindowHold};
use crate::incidents::storm::OpenStorm;
use crate::routing::grouping::{FlushPlan, GroupView};
use crate::routing::inhibit::{Candidate, Inhibitor};
use crate::routing::{self, RouteResult, Router, Silence};

/// What the stages know at one moment: the compiled configuration, the silences, and the other open incidents of
/// the incident's Application.
pub struct Facts<'a> {
    pub settings: &'a Settings,
    pub router: &'a Router,
    pub inhibitor: &'a Inhibitor,
    pub silences: &'a [Silence],
    /// The open incidents of the same Application (inhibition's sources; the incident itself may be among them).
    pub open: &'a [Candidate],
    /// The storm the incident is a member of, if any (held or not: the storm stage says).
    pub storm: Option<&'a OpenStorm>,
    pub now: DateTime<Utc>,
}

/// What the pipeline decides for one incident now.
#[derive(Debug, Clone)]
pub enum Decision {
    /// Not sent now, and why; asked again at the next send.
    Hold(Hold),
    Deliver(DeliveryPlan),
}

/// One receiver's share of a firing incident: the group it joins.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupTarget {
    pub receiver: String,
    pub key: String,
}

/// Where a firing incident goes.
#[derive(Debug, Clone)]
pub struct DeliveryPlan {
    pub route: RouteResult,
    /// One per routed receiver that is configured.
    pub groups: Vec<GroupTarget>,
    /// The owning team's escalation ladder, step 1 first; empty for events.
    pub escalation: Vec<EscalationStep>,
}

/// What an incident carries itself that may hold it back: its acknowledgement, the sync window its Application is
/// in.
#[derive(Debug, Clone, Copy, Default)]
pub struct Own<'a> {
    pub ack: Option<&'a Acknowledgement>,
    pub window: Option<&'a SyncWindowHold>,
}

impl<'a> Own<'a> {
    pub fn of(rec: &'a crate::store::IncidentRecord) -> Self {
        Own {
            ack: rec.ack.as_ref(),
            window: rec.view.sync_window.as_ref(),
        }
    }
}

/// The whole pipeline for one incident: held back by the first stage that holds it, else where it goes.
pub fn decide(f: &Facts, l: &Labels, own: Own) -> Decision {
    match hold(f, l, own) {
        Some(h) => Decision::Hold(h),
        None => Decision::Deliver(plan(f.settings, f.router, l)),
    }
}

/// The holding stages, in order: inhibit → storm → silence → muted → sync window → acknowledge.
pub fn hold(f: &Facts, l: &Labels, own: Own) -> Option<Hold> {
    inhibit(f.inhibitor, l, f.open, f.now)
        .or_else(|| storm(f.storm, f.settings, f.now))
        .or_else(|| silence(f.silences, l, f.now))
        .or_else(|| muted(f.router, l, f.now))
        .or_else(|| sync_window(own.window, l, f.now))
        .or_else(|| acknowledge(own.ack, f.now))
}

/// The delivering stages, in order: route → group → escalate (what `herald route` shows whether or not the
/// incident is held now).
pub fn plan(settings: &Settings, router: &Router, l: &Labels) -> DeliveryPlan {
    let route = route(router, l);
    let groups = group(settings, &route, l);
    let escalation = escalate(settings, l);
    DeliveryPlan {
        route,
        groups,
        escalation,
    }
}

pub fn inhibit(inhibitor: &Inhibitor, l: &Labels, open: &[Candidate], now: DateTime<Utc>) -> Option<Hold> {
    inhibitor.inhibited_by(l, open, now)
}

/// The storm the incident is a member of holds it while it is open, and for `storm.window` after it ended (what
/// recovers with the others then is never told one by one; what still fires is told as usual).
pub fn storm(storm: Option<&OpenStorm>, settings: &Settings, now: DateTime<Utc>) -> Option<Hold> {
    storm
        .filter(|s| s.holds(settings.storm.window, now))
        .map(|s| Hold::Storm {
            storm_id: s.id,
            about: s.scope.about(),
            ended_at: s.ended_at,
        })
}

/// The first active silence that matches (the one that ends last, so "until" is when people hear again).
pub fn silence(silences: &[Silence], l: &Labels, now: DateTime<Utc>) -> Option<Hold> {
    silences
        .iter()
        .filter(|s| s.active(now) && s.matches(l))
        .max_by_key(|s| s.ends_at)
        .map(|s| Hold::Silenced {
            silence: s.id.clone(),
            created_by: s.created_by.clone(),
            until: s.ends_at,
        })
}

/// The incident's owner is muted by its time intervals now (see [`Router::muted`]).
pub fn muted(router: &Router, l: &Labels, now: DateTime<Utc>) -> Option<Hold> {
    router.muted(l, now)
}

/// An `out_of_sync` whose Application Argo CD may not sync now (a sync window): held until the window ends. Only
/// OutOfSync is expected there: a failed sync or a degraded Application is still news.
pub fn sync_window(window: Option<&SyncWindowHold>, l: &Labels, now: DateTime<Utc>) -> Option<Hold> {
    window
        .filter(|w| l.kind == crate::domain::Kind::OutOfSync && w.active(now))
        .map(SyncWindowHold::hold)
}

/// An acknowledgement that still holds at `now` holds the incident back; one that ended does not (repeats resume).
pub fn acknowledge(ack: Option<&Acknowledgement>, now: DateTime<Utc>) -> Option<Hold> {
    ack.filter(|a| a.active(now)).map(|a| Hold::Acknowledged {
        acknowledged_by: a.by.clone(),
        at: a.at,
        until: a.until,
    })
}

pub fn route(router: &Router, l: &Labels) -> RouteResult {
    router.route(l)
}

/// Each routed receiver's group. News (an informational event: a prune someone asked for) goes to chat and
/// e-mail only: it opens no ticket and pages nobody.
pub fn group(settings: &Settings, route: &RouteResult, l: &Labels) -> Vec<GroupTarget> {
    let news = l.kind.is_informational() && l.severity == crate::domain::Severity::Info;
    route
        .receivers
        .iter()
        .filter_map(|receiver| {
            let rs = settings.receiver(receiver)?;
            if news && rs.per_incident() {
                return None;
            }
            Some(GroupTarget {
                receiver: receiver.clone(),
                key: routing::group_key(&settings.grouping.group_by, l, rs.per_incident()),
            })
        })
        .collect()
}

/// The owning team's ladder; an event (told once) and an informational incident are never escalated.
pub fn escalate(settings: &Settings, l: &Labels) -> Vec<EscalationStep> {
    match settings.teams.get(&l.team) {
        Some(team) if !l.kind.is_informational() && l.severity != crate::domain::Severity::Info => {
            team.escalation.clone()
        }
        _ => Vec::new(),
    }
}

/// What a group's flush sends now: the last stage.
pub fn dedup(g: GroupView, settings: &Settings, now: DateTime<Utc>) -> FlushPlan {
    routing::grouping::plan_flush(g, &settings.grouping, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{IncidentState, Kind, Severity};

    const CONFIG: &str = "
receivers: [{name: chat, console: {}}, {name: pager, console: {}}, {name: tickets, github: {repo: acme/pay, token: t}}, {name: bot, console: {}}]
teams:
  pay:
    receivers: [chat, tickets]
    escalation: [{after: 1h, receivers: [pager]}]
routes: [{kind: pruned, namespace: 'prod-*', receivers: [bot], continue: true}]
";

    fn labels(kind: Kind) -> Labels {
        Labels {
            team: "pay".into(),
            kind,
            severity: Severity::Warning,
            app: "pay-api".into(),
            app_namespace: "argocd".into(),
            namespace: "prod-eu".into(),
            fingerprint: format!("pay-api/{kind}"),
            ..Default::default()
        }
    }

    fn silence(app: &str, by: &str, from: i64, to: i64, now: DateTime<Utc>) -> Silence {
        Silence {
            id: format!("s-{by}"),
            matchers: vec![routing::Matcher::new("app", app)],
            starts_at: now + chrono::Duration::minutes(from),
            ends_at: now + chrono::Duration::minutes(to),
            created_by: by.into(),
            comment: String::new(),
            created_at: now,
        }
    }

    /// `got` (what holds an incident, in words) is `want`'s beginning, or nothing when `want` is.
    fn assert_holds(got: Option<String>, want: Option<&str>, why: &str) {
        match want {
            None => assert_eq!(got, None, "{why}"),
            Some(w) => assert!(got.as_deref().is_some_and(|g| g.starts_with(w)), "{why}: {got:?}"),
        }
    }

    #[test]
    fn the_holding_stages_in_order() {
        let now = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::days(400);
        let settings = Settings::from_yaml(CONFIG).expect("valid");
        let (router, inhibitor) = (Router::new(&settings), Inhibitor::new(&settings));
        let prune = Candidate {
            labels: labels(Kind::PrunePending),
            state: IncidentState::Firing,
            fire_at: now,
        };
        let alice = silence("pay-*", "alice", -5, 60, now);
        let old = silence("pay-*", "bob", -120, -60, now);
        let later = silence("pay-*", "carol", 10, 60, now);
        // (incident, silences, open incidents, what holds it, why)
        type Case<'a> = (Kind, Vec<Silence>, Vec<Candidate>, Option<&'a str>, &'a str);
        let cases: Vec<Case> = vec![
            (Kind::OutOfSync, vec![], vec![], None, "nothing holds it: delivered"),
            (
                Kind::OutOfSync,
                vec![alice.clone()],
                vec![],
                Some("silenced by alice"),
                "an active silence holds it",
            ),
            (Kind::OutOfSync, vec![old], vec![], None, "an expired silence does not"),
            (
                Kind::OutOfSync,
                vec![later],
                vec![],
                None,
                "a silence not started yet does not",
            ),
            (
                Kind::OutOfSync,
                vec![alice.clone()],
                vec![prune.clone()],
                Some("inhibited by prune_pending"),
                "inhibition comes first",
            ),
            (
                Kind::PrunePending,
                vec![],
                vec![prune],
                None,
                "the source itself is delivered",
            ),
        ];
        for (kind, silences, open, want, why) in cases {
            let facts = Facts {
                settings: &settings,
                router: &router,
                inhibitor: &inhibitor,
                silences: &silences,
                open: &open,
                storm: None,
                now,
            };
            let got = hold(&facts, &labels(kind), Own::default()).map(|h| h.describe(crate::domain::Zone::UTC));
            assert_holds(got, want, why);
            let delivered = matches!(decide(&facts, &labels(kind), Own::default()), Decision::Deliver(_));
            assert_eq!(delivered, want.is_none(), "{why}");
        }
    }

    #[test]
    fn a_sync_window_holds_a_firing_out_of_sync_only_while_it_lasts() {
        let now = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::days(400);
        let until = now + chrono::Duration::hours(2);
        let w = SyncWindowHold {
            until,
            manual_sync: false,
        };
        let held = Some(Hold::SyncWindow {
            until,
            manual_sync: false,
        });
        // (kind, window, now, held?)
        let cases = [
            (Kind::OutOfSync, Some(&w), now, held.clone(), "inside the window"),
            (
                Kind::OutOfSync,
                Some(&w),
                until,
                None,
                "the window has ended: repeats resume",
            ),
            (Kind::OutOfSync, None, now, None, "no window"),
            (
                Kind::SyncFailed,
                Some(&w),
                now,
                None,
                "a failed sync is news in a window too",
            ),
            (Kind::Degraded, Some(&w), now, None, "so is a degraded Application"),
        ];
        for (kind, window, at, want, why) in cases {
            assert_eq!(sync_window(window, &labels(kind), at), want, "{why}");
        }
    }

    #[test]
    fn an_acknowledgement_holds_until_it_ends_and_after_a_silence() {
        let now = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::days(400);
        let settings = Settings::from_yaml(CONFIG).expect("valid");
        let (router, inhibitor) = (Router::new(&settings), Inhibitor::new(&settings));
        let ack = |until: Option<i64>| Acknowledgement {
            by: "alice".into(),
            at: now - chrono::Duration::minutes(5),
            until: until.map(|m| now + chrono::Duration::minutes(m)),
            comment: "on it".into(),
        };
        // (acknowledgement, silences, what holds it, why)
        let cases = [
            (None, vec![], None, "not acknowledged: delivered"),
            (
                Some(ack(None)),
                vec![],
                Some("acknowledged by alice"),
                "until resolved: held",
            ),
            (
                Some(ack(Some(30))),
                vec![],
                Some("acknowledged by alice"),
                "until a later time: held",
            ),
            (Some(ack(Some(-1))), vec![], None, "ended: repeats resume"),
            (
                Some(ack(None)),
                vec![silence("pay-*", "bob", -5, 60, now)],
                Some("silenced by bob"),
                "a silence is asked first",
            ),
        ];
        for (a, silences, want, why) in cases {
            let facts = Facts {
                settings: &settings,
                router: &router,
                inhibitor: &inhibitor,
                silences: &silences,
                open: &[],
                storm: None,
                now,
            };
            let got = hold(
                &facts,
                &labels(Kind::OutOfSync),
                Own {
                    ack: a.as_ref(),
                    window: None,
                },
            )
            .map(|h| h.describe(crate::domain::Zone::UTC));
            assert_holds(got, want, why);
        }
    }

    #[test]
    fn a_storm_holds_its_members_while_open_and_for_its_window_after() {
        use crate::incidents::storm::{OpenStorm, Scope};
        let now = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::days(400);
        let settings = Settings::from_yaml(CONFIG).expect("valid");
        let (router, inhibitor) = (Router::new(&settings), Inhibitor::new(&settings));
        let storm = |ended: Option<i64>| OpenStorm {
            id: 9,
            scope: Scope {
                instance: "default".into(),
                cluster: "https://10.20.30.40:6443".into(),
                kind: Kind::SyncUnknown,
            },
            since: now - chrono::Duration::minutes(30),
            ended_at: ended.map(|m| now - chrono::Duration::minutes(m)),
        };
        let alice = silence("pay-*", "alice", -5, 60, now);
        // (its storm, silences, what holds it, why)
        let cases = [
            (None, vec![], None, "in no storm: delivered"),
            (
                Some(storm(None)),
                vec![],
                Some("held by the storm on cluster https://10.20.30.40:6443 (incident 9)"),
                "an open storm holds it",
            ),
            (
                Some(storm(Some(1))),
                vec![],
                Some("held by the storm on cluster https://10.20.30.40:6443 (incident 9), over at"),
                "a storm over for less than storm.window still holds it",
            ),
            (Some(storm(Some(3))), vec![], None, "after storm.window: told as usual"),
            (
                Some(storm(None)),
                vec![alice],
                Some("held by the storm"),
                "the storm is asked before a silence",
            ),
        ];
        for (storm, silences, want, why) in cases {
            let facts = Facts {
                settings: &settings,
                router: &router,
                inhibitor: &inhibitor,
                silences: &silences,
                open: &[],
                storm: storm.as_ref(),
                now,
            };
            let got =
                hold(&facts, &labels(Kind::SyncUnknown), Own::default()).map(|h| h.describe(crate::domain::Zone::UTC));
            assert_holds(got, want, why);
        }
    }

    #[test]
    fn the_owner_of_an_incident_decides_whether_it_is_muted_after_a_silence_and_before_an_acknowledgement() {
        // 2026-01-05 is a Monday; `nights` is 18:00 to 08:00 UTC, `office` Monday to Friday 09:00 to 17:00 UTC.
        let yaml = "
receivers: [{name: chat, console: {}}, {name: oncall, console: {}}, {name: bot, console: {}}]
ownership: {default_team: platform}
teams:
  pay: {receivers: [chat], mute_time_intervals: [nights]}
  platform: {receivers: [chat], mute_time_intervals: [nights]}
time_intervals:
  - {name: nights, time_intervals: [{times: [{start_time: '18:00', end_time: '24:00'}, {start_time: '00:00', end_time: '08:00'}]}]}
  - {name: office, time_intervals: [{weekdays: ['monday:friday'], times: [{start_time: '09:00', end_time: '17:00'}]}]}
routes:
  - {kind: pruned, receivers: [bot], continue: true}
  - {kind: sync_failed, receivers: [oncall], active_time_intervals: [office]}
";
        let settings = Settings::from_yaml(yaml).expect("valid");
        let (router, inhibitor) = (Router::new(&settings), Inhibitor::new(&settings));
        let at = |s: &str| DateTime::parse_from_rfc3339(s).expect("t").with_timezone(&Utc);
        let (night, noon, saturday) = (
            at("2026-01-05T19:00:00Z"),
            at("2026-01-05T12:00:00Z"),
            at("2026-01-10T12:00:00Z"),
        );
        let ack = Acknowledgement {
            by: "alice".into(),
            at: night,
            until: None,
            comment: String::new(),
        };
        // (kind, team, now, silenced?, acknowledged?, what holds it, why)
        type Case<'a> = (Kind, &'a str, DateTime<Utc>, bool, bool, Option<&'a str>, &'a str);
        let cases: Vec<Case> = vec![
            (
                Kind::Degraded,
                "pay",
                noon,
                false,
                false,
                None,
                "the team is not muted at noon",
            ),
            (
                Kind::Degraded,
                "pay",
                night,
                false,
                false,
                Some("muted for team pay (time interval nights) until 2026-01-06 08:00 UTC"),
                "the team is muted at night",
            ),
            (
                Kind::Pruned,
                "pay",
                night,
                false,
                false,
                Some("muted for team pay"),
                "a continue: true route does not take it from the muted team",
            ),
            (
                Kind::Degraded,
                "search",
                night,
                false,
                false,
                Some("muted for team platform"),
                "a team with no entry has the default team's quiet hours",
            ),
            (
                Kind::SyncFailed,
                "pay",
                night,
                false,
                false,
                Some("muted for routes[1] outside time interval office until 2026-01-06 09:00 UTC"),
                "the route that takes it decides, not the team",
            ),
            (
                Kind::SyncFailed,
                "pay",
                saturday,
                false,
                false,
                Some("muted for routes[1] outside time interval office until 2026-01-12 09:00 UTC"),
                "outside office hours until Monday",
            ),
            (Kind::SyncFailed, "pay", noon, false, false, None, "in office hours"),
            (
                Kind::Degraded,
                "pay",
                night,
                true,
                true,
                Some("silenced by bob"),
                "a silence is asked first",
            ),
            (
                Kind::Degraded,
                "pay",
                night,
                false,
                true,
                Some("muted for team pay"),
                "muted before acknowledged",
            ),
            (
                Kind::Degraded,
                "pay",
                noon,
                false,
                true,
                Some("acknowledged by alice"),
                "not muted: the acknowledgement holds",
            ),
        ];
        for (kind, team, now, silenced, acked, want, why) in cases {
            let silences = match silenced {
                true => vec![silence("*", "bob", -5, 60, now)],
                false => vec![],
            };
            let facts = Facts {
                settings: &settings,
                router: &router,
                inhibitor: &inhibitor,
                silences: &silences,
                open: &[],
                storm: None,
                now,
            };
            let mut l = labels(kind);
            l.team = team.into();
            let own = Own {
                ack: acked.then_some(&ack),
                window: None,
            };
            assert_holds(
                hold(&facts, &l, own).map(|h| h.describe(crate::domain::Zone::UTC)),
                want,
                why,
            );
        }
    }

    #[test]
    fn the_delivering_stages() {
        let settings = Settings::from_yaml(CONFIG).expect("valid");
        let router = Router::new(&settings);
        // (kind, severity, receivers, escalation steps, why)
        let cases = [
            (
                Kind::OutOfSync,
                Severity::Warning,
                vec!["chat", "tickets"],
                1,
                "the owning team, its ladder",
            ),
            (
                Kind::Pruned,
                Severity::Critical,
                vec!["bot", "chat", "tickets"],
                0,
                "an also-send-to route adds; an event never escalates",
            ),
            (
                Kind::Degraded,
                Severity::Info,
                vec!["chat", "tickets"],
                0,
                "an informational incident never escalates",
            ),
        ];
        for (kind, severity, receivers, steps, why) in cases {
            let mut l = labels(kind);
            l.severity = severity;
            let p = plan(&settings, &router, &l);
            assert_eq!(p.route.receivers, receivers, "{why}");
            assert_eq!(p.escalation.len(), steps, "{why}");
            let tickets = p.groups.iter().find(|g| g.receiver == "tickets").expect("tickets");
            assert_eq!(
                tickets.key,
                format!("fingerprint=pay-api/{kind}"),
                "a ticket per incident"
            );
        }
    }
}
