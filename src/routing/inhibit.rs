//! Inhibition, as Alertmanager does it: while a *source* incident is open, the *target* incidents it explains are
//! not sent — one cause, one incident people see. The built-in rules and `inhibit_rules` compiled once
//! ([`Inhibitor::new`]); [`Inhibitor::inhibited_by`] answers for one incident. Pure, no I/O.
//!
//! Inhibition is judged among the open incidents of one Application (the only ones the pipeline hands it): a rule's
//! `equal` narrows that further, it never widens it.

use chrono::{DateTime, Utc};

use super::Matcher;
use crate::configuration::{Settings, parse_label_matcher};
use crate::domain::{Hold, IncidentState, Kind, Labels};

/// One matcher of a rule: a field, a glob, and whether the value must NOT match.
#[derive(Debug)]
struct FieldMatcher {
    matcher: Matcher,
    negate: bool,
}

impl FieldMatcher {
    fn matches(&self, l: &Labels) -> bool {
        self.matcher.is_match(l.get(&self.matcher.name).unwrap_or("")) != self.negate
    }
}

#[derive(Debug)]
struct Rule {
    /// `built-in` or `inhibit_rules[N]`: what the API and `herald route` say inhibited an incident.
    name: String,
    source: Vec<FieldMatcher>,
    target: Vec<FieldMatcher>,
    equal: Vec<String>,
}

impl Rule {
    /// Whether `target` is one this rule holds back while a source is open.
    fn targets(&self, target: &Labels) -> bool {
        !self.target.is_empty() && self.target.iter().all(|m| m.matches(target))
    }
}

/// An open incident that may inhibit others: its labels, whether it fires (or is due to fire at `now`).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub labels: Labels,
    pub state: IncidentState,
    pub fire_at: DateTime<Utc>,
}

impl Candidate {
    /// A source inhibits while it fires, or once it is due to fire (it fires in the same tick): a pending source
    /// whose `for` has not passed never holds back a target that is due, so a longer `for` cannot delay an alert.
    fn in_force(&self, now: DateTime<Utc>) -> bool {
        match self.state {
            IncidentState::Firing => true,
            IncidentState::Pending => self.fire_at <= now,
            IncidentState::Resolved => false,
        }
    }
}

/// The compiled rules: built-in first, then `inhibit_rules` in order.
#[derive(Debug, Default)]
pub struct Inhibitor {
    rules: Vec<Rule>,
}

fn compile(list: &[String]) -> Vec<FieldMatcher> {
    list.iter()
        .filter_map(|m| parse_label_matcher(m).ok())
        .map(|(name, negate, value)| FieldMatcher {
            matcher: Matcher::new(name, value),
            negate,
        })
        .collect()
}

/// What one Application's incidents say about each other by default: a resource waiting to be pruned, or a sync
/// that failed, is why the Application is OutOfSync; the OutOfSync incident adds nothing people can act on. A sync
/// still running is why the Application is OutOfSync, and (when it waits for resources to be healthy) Progressing.
/// (An Application being deleted, or deleted, resolves all of its incidents: there is nothing left to inhibit.)
pub const BUILT_IN: [(Kind, Kind); 4] = [
    (Kind::PrunePending, Kind::OutOfSync),
    (Kind::SyncFailed, Kind::OutOfSync),
    (Kind::SyncRunning, Kind::OutOfSync),
    (Kind::SyncRunning, Kind::Progressing),
];

impl Inhibitor {
    pub fn new(settings: &Settings) -> Self {
        let mut rules = Vec::new();
        if settings.inhibit_builtin {
            for (source, target) in BUILT_IN {
                rules.push(Rule {
                    name: "built-in".into(),
                    source: compile(&[format!("kind={source}")]),
                    target: compile(&[format!("kind={target}")]),
                    equal: vec!["instance".into(), "app_namespace".into(), "app".into()],
                });
            }
        }
        for (i, r) in settings.inhibit_rules.iter().enumerate() {
            rules.push(Rule {
                name: format!("inhibit_rules[{i}]"),
                source: compile(&r.source_matchers),
                target: compile(&r.target_matchers),
                equal: r.equal.clone(),
            });
        }
        Self { rules }
    }

    /// Whether some rule may hold `target` back (its target matchers match it): only then does inhibition need the
    /// open incidents of its Application.
    pub fn may_inhibit(&self, target: &Labels) -> bool {
        self.rules.iter().any(|rule| rule.targets(target))
    }

    /// The first open incident among `candidates` that inhibits `target` at `now`, and by which rule. An incident
    /// never inhibits itself.
    pub fn inhibited_by(&self, target: &Labels, candidates: &[Candidate], now: DateTime<Utc>) -> Option<Hold> {
        for rule in &self.rules {
            if !rule.targets(target) {
                continue;
            }
            let source = candidates.iter().find(|c| {
                c.labels.fingerprint != target.fingerprint
                    && c.in_force(now)
                    && !rule.source.is_empty()
                    && rule.source.iter().all(|m| m.matches(&c.labels))
                    && rule.equal.iter().all(|f| c.labels.get(f) == target.get(f))
            });
            if let Some(s) = source {
                return Some(Hold::Inhibited {
                    source_kind: s.labels.kind,
                    source_fingerprint: s.labels.fingerprint.clone(),
                    rule: rule.name.clone(),
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(app: &str, kind: Kind, team: &str) -> Labels {
        Labels {
            team: team.into(),
            kind,
            app: app.into(),
            app_namespace: "argocd".into(),
            fingerprint: format!("{app}/{kind}"),
            ..Default::default()
        }
    }

    fn open(l: Labels, state: IncidentState, fire_in_secs: i64, now: DateTime<Utc>) -> Candidate {
        Candidate {
            labels: l,
            state,
            fire_at: now + chrono::Duration::seconds(fire_in_secs),
        }
    }

    #[test]
    fn the_inhibition_table() {
        let now = DateTime::<Utc>::UNIX_EPOCH;
        let s = Settings::from_yaml(
            r#"
inhibit_rules:
  - {source_matchers: ['kind="degraded"'], target_matchers: ["kind!=degraded", "severity=warning"], equal: [app]}
"#,
        )
        .expect("valid");
        let inhibitor = Inhibitor::new(&s);
        let oos = labels("pay", Kind::OutOfSync, "pay");
        let by = |k: Kind| Some((k, "built-in".to_string()));
        // (target, open incidents, inhibited by (kind, rule), why)
        let cases = [
            (
                oos.clone(),
                vec![open(
                    labels("pay", Kind::PrunePending, "pay"),
                    IncidentState::Firing,
                    -1,
                    now,
                )],
                by(Kind::PrunePending),
                "a firing prune_pending inhibits out_of_sync of the same Application",
            ),
            (
                oos.clone(),
                vec![open(
                    labels("pay", Kind::SyncFailed, "pay"),
                    IncidentState::Firing,
                    0,
                    now,
                )],
                by(Kind::SyncFailed),
                "a failed sync inhibits out_of_sync",
            ),
            (
                oos.clone(),
                vec![open(
                    labels("pay", Kind::PrunePending, "pay"),
                    IncidentState::Pending,
                    0,
                    now,
                )],
                by(Kind::PrunePending),
                "a source due to fire now (the same tick) inhibits",
            ),
            (
                oos.clone(),
                vec![open(
                    labels("pay", Kind::PrunePending, "pay"),
                    IncidentState::Pending,
                    60,
                    now,
                )],
                None,
                "a pending source whose `for` has not passed does not delay the target",
            ),
            (
                oos.clone(),
                vec![open(
                    labels("ledger", Kind::PrunePending, "pay"),
                    IncidentState::Firing,
                    -1,
                    now,
                )],
                None,
                "another Application's prune does not inhibit",
            ),
            (
                oos.clone(),
                vec![open(
                    labels("pay", Kind::PrunePending, "pay"),
                    IncidentState::Resolved,
                    -1,
                    now,
                )],
                None,
                "a resolved source does not inhibit",
            ),
            (
                labels("pay", Kind::PrunePending, "pay"),
                vec![open(oos.clone(), IncidentState::Firing, -1, now)],
                None,
                "out_of_sync never inhibits prune_pending",
            ),
            (
                labels("pay", Kind::SyncUnknown, "pay"),
                vec![open(
                    labels("pay", Kind::Degraded, "pay"),
                    IncidentState::Firing,
                    -1,
                    now,
                )],
                Some((Kind::Degraded, "inhibit_rules[0]".to_string())),
                "a configured rule: degraded inhibits the Application's warnings",
            ),
            (
                labels("pay", Kind::Degraded, "pay"),
                vec![open(
                    labels("pay", Kind::Degraded, "pay"),
                    IncidentState::Firing,
                    -1,
                    now,
                )],
                None,
                "an incident never inhibits itself (and != excludes the kind)",
            ),
        ];
        for (target, candidates, want, why) in cases {
            let got = inhibitor.inhibited_by(&target, &candidates, now).map(|h| match h {
                Hold::Inhibited { source_kind, rule, .. } => (source_kind, rule),
                other => panic!("{other:?}"),
            });
            assert_eq!(got, want, "{why}");
        }
    }

    #[test]
    fn only_an_incident_some_rule_targets_may_be_inhibited() {
        let built_in = Inhibitor::new(&Settings::from_yaml("{}").expect("valid"));
        assert!(built_in.may_inhibit(&labels("pay", Kind::OutOfSync, "pay")));
        assert!(!built_in.may_inhibit(&labels("pay", Kind::SyncFailed, "pay")));
        assert!(!built_in.may_inhibit(&labels("pay", Kind::PrunePending, "pay")));
        let custom = Settings::from_yaml(
            "inhibit_builtin: false\ninhibit_rules:\n  - {source_matchers: ['kind=\"degraded\"'], target_matchers: [\"kind=sync_failed\"], equal: [app]}",
        )
        .expect("valid");
        let custom = Inhibitor::new(&custom);
        assert!(custom.may_inhibit(&labels("pay", Kind::SyncFailed, "pay")));
        assert!(!custom.may_inhibit(&labels("pay", Kind::OutOfSync, "pay")));
    }

    #[test]
    fn the_built_in_rules_can_be_turned_off() {
        let now = DateTime::<Utc>::UNIX_EPOCH;
        let s = Settings::from_yaml("inhibit_builtin: false").expect("valid");
        let source = open(labels("pay", Kind::PrunePending, "pay"), IncidentState::Firing, -1, now);
        let target = labels("pay", Kind::OutOfSync, "pay");
        assert_eq!(Inhibitor::new(&s).inhibited_by(&target, &[source], now), None);
    }
}
