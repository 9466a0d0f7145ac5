//! Who hears about an incident: the owning team ([`owning_team`]), the ordered routes ([`Router`]), the grouping
//! key ([`group_key`]), silences ([`Silence::matches`]) and inhibition ([`inhibit`]). Pure: compiled once from
//! settings, no I/O. The order these are asked in is `pipeline::delivery`'s.

pub mod change;
pub mod grouping;
pub mod inhibit;
pub mod initiator;
pub mod on_call;
pub mod sync_status;
/// Alertmanager's `time_intervals` are a domain type (the settings hold them compiled): asked here.
pub use crate::domain::time_interval;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::argocd::Snapshot;
use crate::configuration::{OwnershipSettings, RouteSettings, Settings};
use crate::domain::Labels;

/// The owning team: the Application's annotation, else its label, else its AppProject's annotation (through the
/// Argo CD API), else the project map, else the default team.
pub fn owning_team(s: &Snapshot, o: &OwnershipSettings) -> String {
    s.annotations
        .get(&o.annotation)
        .or_else(|| s.labels.get(&o.label))
        .or_else(|| s.project_annotations.get(&o.annotation))
        .or_else(|| o.projects.get(&s.project))
        .filter(|t| !t.trim().is_empty())
        .cloned()
        .unwrap_or_else(|| o.default_team.clone())
}

struct CompiledRoute {
    settings: RouteSettings,
    app: Option<globset::GlobMatcher>,
    namespace: Option<globset::GlobMatcher>,
    cluster: Option<globset::GlobMatcher>,
}

/// Routes compiled once.
pub struct Router {
    routes: Vec<CompiledRoute>,
    /// `time_intervals`, and each team's and route's `mute_time_intervals` / `active_time_intervals`.
    intervals: time_interval::TimeIntervals,
    team_quiet: BTreeMap<String, time_interval::Quiet>,
    default_team: String,
    teams: BTreeMap<String, Vec<String>>,
    /// Per team, the receivers its Applications may ask for by annotation.
    allowed: BTreeMap<String, Vec<String>>,
    fallback: Vec<String>,
}

/// Where an incident goes and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteResult {
    /// Indexes of the routes that matched (empty: the team's receivers).
    pub matched_routes: Vec<usize>,
    pub receivers: Vec<String>,
    /// The owning team's receivers are among them: no route matched, or only `continue: true` routes did
    /// ("also send to"), which add to the owner and never take the incident away from it.
    pub owner_kept: bool,
    /// Receivers the Application's annotation asked for that its team does not allow (not used).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

fn glob(p: &Option<String>) -> Option<globset::GlobMatcher> {
    p.as_ref()
        .and_then(|g| globset::Glob::new(g).ok())
        .map(|g| g.compile_matcher())
}

impl Router {
    pub fn new(settings: &Settings) -> Self {
        let routes = settings
            .routes
            .iter()
            .map(|r| CompiledRoute {
                app: glob(&r.app),
                namespace: glob(&r.namespace),
                cluster: glob(&r.cluster),
                settings: r.clone(),
            })
            .collect();
        // A team's receivers told of syncs only (commit statuses, annotations) take none of its incidents.
        let takes_incidents = |name: &String| settings.receiver(name).is_none_or(|r| r.capabilities().incidents);
        let incident_receivers = |list: &[String]| list.iter().filter(|r| takes_incidents(r)).cloned().collect();
        let teams = settings
            .teams
            .iter()
            .map(|(k, v)| (k.clone(), incident_receivers(&v.receivers)))
            .collect();
        let allowed = (settings.teams.iter())
            .map(|(k, v)| (k.clone(), v.allowed_receivers.clone()))
            .collect();
        // With no team entry, the default team's receivers, else every console receiver: never drop silently.
        let fallback = settings
            .teams
            .get(&settings.ownership.default_team)
            .map(|t| incident_receivers(&t.receivers))
            .filter(|r: &Vec<String>| !r.is_empty())
            .unwrap_or_else(|| {
                settings
                    .receivers
                    .iter()
                    .filter(|r| r.capabilities().fallback)
                    .map(|r| r.name.clone())
                    .collect()
            });
        let quiet = |mute: &[String], active: &[String]| time_interval::Quiet {
            mute: mute.to_vec(),
            active: active.to_vec(),
        };
        let team_quiet = (settings.teams.iter())
            .map(|(k, v)| (k.clone(), quiet(&v.mute_time_intervals, &v.active_time_intervals)))
            .collect();
        Self {
            routes,
            // Validated at load: nothing to report here.
            intervals: settings.intervals(&mut Vec::new()),
            team_quiet,
            default_team: settings.ownership.default_team.clone(),
            teams,
            allowed,
            fallback,
        }
    }

    /// Whether the incident's owner is muted at `now` by its time intervals, and until when: the route that takes
    /// it (`continue: false`), else its team (a team with no entry: the default team, whose receivers it gets).
    /// The whole incident waits, the receivers `continue: true` routes add with it.
    pub fn muted(&self, l: &Labels, now: DateTime<Utc>) -> Option<crate::domain::Hold> {
        let route = self.route(l);
        let (owner, quiet) = match route.matched_routes.last().filter(|_| !route.owner_kept) {
            Some(&i) => {
                let r = &self.routes.get(i)?.settings;
                let quiet = time_interval::Quiet {
                    mute: r.mute_time_intervals.clone(),
                    active: r.active_time_intervals.clone(),
                };
                (format!("routes[{i}]"), quiet)
            }
            None => {
                let team = match self.team_quiet.contains_key(&l.team) {
                    true => &l.team,
                    false => &self.default_team,
                };
                (
                    format!("team {team}"),
                    self.team_quiet.get(team).cloned().unwrap_or_default(),
                )
            }
        };
        let m = quiet.muted(&self.intervals, now)?;
        Some(crate::domain::Hold::Muted {
            owner,
            intervals: m.intervals,
            outside: m.outside,
            until: m.until,
        })
    }

    fn matches(r: &CompiledRoute, l: &Labels) -> bool {
        let s = &r.settings;
        s.instance.as_ref().is_none_or(|i| *i == l.instance)
            && s.team.as_ref().is_none_or(|t| *t == l.team)
            && s.kind.is_none_or(|k| k == l.kind)
            && s.severity.is_none_or(|v| v == l.severity)
            && s.project.as_ref().is_none_or(|p| *p == l.project)
            && r.app.as_ref().is_none_or(|g| g.is_match(&l.app))
            && r.namespace.as_ref().is_none_or(|g| g.is_match(&l.namespace))
            && r.cluster.as_ref().is_none_or(|g| g.is_match(&l.cluster))
            && s.labels.iter().all(|(k, v)| l.labels.get(k) == Some(v))
    }

    /// Ordered routes, first match wins unless `continue: true`. A route without `continue` takes the incident
    /// (its receivers only); when none such matched, the owning team's receivers get it too, after those of the
    /// `continue: true` routes that matched: one "also send to" route serves every team. Then, still only when no
    /// route took it, the receivers the Application asks for by annotation that its team allows
    /// (`teams.<t>.allowed_receivers`); the others are refused, and said in `refused`.
    pub fn route(&self, l: &Labels) -> RouteResult {
        let mut matched = Vec::new();
        let mut receivers: Vec<String> = Vec::new();
        let mut taken = false;
        for (i, r) in self.routes.iter().enumerate() {
            if Self::matches(r, l) {
                matched.push(i);
                for name in &r.settings.receivers {
                    if !receivers.contains(name) {
                        receivers.push(name.clone());
                    }
                }
                if !r.settings.r#continue {
                    taken = true;
                    break;
                }
            }
        }
        if !taken {
            let owner = self
                .teams
                .get(&l.team)
                .filter(|r| !r.is_empty())
                .unwrap_or(&self.fallback);
            for name in owner {
                if !receivers.contains(name) {
                    receivers.push(name.clone());
                }
            }
        }
        let mut refused = Vec::new();
        if !taken {
            let allowed = self.allowed.get(&l.team);
            for name in &l.asked_receivers {
                if allowed.is_some_and(|a| a.contains(name)) {
                    if !receivers.contains(name) {
                        receivers.push(name.clone());
                    }
                } else if !refused.contains(name) {
                    refused.push(name.clone());
                }
            }
        }
        RouteResult {
            matched_routes: matched,
            receivers,
            owner_kept: !taken,
            refused,
        }
    }
}

/// The grouping key of an incident for one receiver: the `group_by` values (or the fingerprint, for receivers that
/// take one incident per message).
pub fn group_key(group_by: &[String], l: &Labels, per_incident: bool) -> String {
    if per_incident {
        return format!("fingerprint={}", l.fingerprint);
    }
    group_by
        .iter()
        .map(|f| format!("{f}={}", l.get(f).unwrap_or("")))
        .collect::<Vec<_>>()
        .join(",")
}

/// One silence matcher: a field (as in `group_by`) and a glob on its value, compiled once when first used.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matcher {
    pub name: String,
    pub value: String,
    #[serde(skip)]
    glob: std::sync::OnceLock<Option<globset::GlobMatcher>>,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.value == other.value
    }
}

impl Matcher {
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
            glob: Default::default(),
        }
    }

    /// Whether `value` matches the glob (an invalid glob matches nothing).
    pub fn is_match(&self, value: &str) -> bool {
        self.glob
            .get_or_init(|| globset::Glob::new(&self.value).ok().map(|g| g.compile_matcher()))
            .as_ref()
            .is_some_and(|g| g.is_match(value))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Silence {
    pub id: String,
    pub matchers: Vec<Matcher>,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub created_by: String,
    pub comment: String,
    pub created_at: DateTime<Utc>,
}

impl Silence {
    pub fn active(&self, now: DateTime<Utc>) -> bool {
        self.starts_at <= now && now < self.ends_at
    }
    /// `active`, `pending` (it starts later) or `expired` (it ended, or was expired by hand).
    pub fn state(&self, now: DateTime<Utc>) -> &'static str {
        if now >= self.ends_at {
            "expired"
        } else if now < self.starts_at {
            "pending"
        } else {
            "active"
        }
    }
    pub fn matches(&self, l: &Labels) -> bool {
        !self.matchers.is_empty() && self.matchers.iter().all(|m| m.is_match(l.get(&m.name).unwrap_or("")))
    }
}

pub fn is_silenced(silences: &[Silence], l: &Labels, now: DateTime<Utc>) -> bool {
    silences.iter().any(|s| s.active(now) && s.matches(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(team: &str, kind: &str, app: &str, ns: &str) -> Labels {
        Labels {
            team: team.into(),
            kind: crate::domain::Kind::parse(kind).expect("a kind"),
            severity: crate::domain::Severity::Warning,
            project: "default".into(),
            app: app.into(),
            namespace: ns.into(),
            cluster: "https://kubernetes.default.svc".into(),
            fingerprint: "fp".into(),
            ..Default::default()
        }
    }

    #[test]
    fn routes_are_ordered_first_match_wins_unless_continue() {
        let s = Settings::from_yaml(
            r#"
receivers: [{name: a, console: {}}, {name: b, console: {}}, {name: c, console: {}}, {name: t, console: {}}]
teams: {pay: {receivers: [t]}}
routes:
  - {kind: pruned, namespace: "prod-*", receivers: [a], continue: true}
  - {app: "pay-*", receivers: [b]}
  - {team: pay, receivers: [c]}
"#,
        )
        .expect("valid");
        let r = Router::new(&s);
        let cases = [
            (
                labels("pay", "pruned", "pay-api", "prod-eu"),
                vec!["a", "b"],
                vec![0, 1],
            ),
            (labels("pay", "out_of_sync", "pay-api", "dev"), vec!["b"], vec![1]),
            (labels("pay", "out_of_sync", "ledger", "dev"), vec!["c"], vec![2]),
            (
                labels("ops", "degraded", "ledger", "dev"),
                vec!["a", "b", "c", "t"][..0].to_vec(),
                vec![],
            ),
        ];
        for (l, receivers, matched) in cases {
            let got = r.route(&l);
            assert_eq!(got.matched_routes, matched, "{l:?}");
            if !receivers.is_empty() {
                assert_eq!(got.receivers, receivers, "{l:?}");
            }
        }
        // Only a `continue: true` route matched: it adds to the owning team, it does not take the incident away.
        let also = r.route(&labels("pay", "pruned", "ledger", "prod-eu"));
        assert_eq!(
            also.matched_routes,
            vec![0, 2],
            "the team route still matches after a continue route"
        );
        let s2 = Settings::from_yaml(
            r#"
receivers: [{name: bot, console: {}}, {name: t, console: {}}]
teams: {pay: {receivers: [t]}}
routes: [{kind: pruned, namespace: "prod-*", receivers: [bot], continue: true}]
"#,
        )
        .expect("valid");
        let got = Router::new(&s2).route(&labels("pay", "pruned", "pay-api", "prod-eu"));
        assert_eq!(
            got.receivers,
            vec!["bot", "t"],
            "the catch-all route and the owning team"
        );
        assert!(got.owner_kept);
        // No route and no team entry: the default team's receivers, else the console receivers.
        assert_eq!(
            r.route(&labels("ops", "degraded", "ledger", "dev")).receivers,
            vec!["a", "b", "c", "t"]
        );
        assert_eq!(
            r.route(&labels("pay", "degraded", "ledger", "dev")).receivers,
            vec!["c"]
        );
    }

    #[test]
    fn an_application_asks_for_the_receivers_its_team_allows_and_nothing_else() {
        let s = Settings::from_yaml(
            r#"
receivers: [{name: chat, console: {}}, {name: jira, console: {}}, {name: pager, console: {}}, {name: other, console: {}}, {name: ops, console: {}}]
teams:
  pay: {receivers: [chat], allowed_receivers: [jira, pager]}
  shop: {receivers: [other]}
routes: [{kind: degraded, app: "legacy-*", receivers: [ops]}]
"#,
        )
        .expect("valid");
        let r = Router::new(&s);
        let asking = |team: &str, app: &str, kind: &str, asked: &[&str]| {
            let mut l = labels(team, kind, app, "pay");
            l.asked_receivers = asked.iter().map(|a| a.to_string()).collect();
            r.route(&l)
        };
        // (team, app, kind, asked, receivers, refused, why)
        let cases = [
            (
                "pay",
                "api",
                "out_of_sync",
                vec!["jira"],
                vec!["chat", "jira"],
                vec![],
                "an allowed receiver is added",
            ),
            (
                "pay",
                "api",
                "out_of_sync",
                vec!["other", "nope"],
                vec!["chat"],
                vec!["other", "nope"],
                "another team's, or none: refused",
            ),
            (
                "shop",
                "cart",
                "out_of_sync",
                vec!["jira"],
                vec!["other"],
                vec!["jira"],
                "a team that allows nothing",
            ),
            (
                "pay",
                "legacy-1",
                "degraded",
                vec!["jira"],
                vec!["ops"],
                vec![],
                "a route that takes the incident wins",
            ),
        ];
        for (team, app, kind, asked, receivers, refused, why) in cases {
            let got = asking(team, app, kind, &asked);
            assert_eq!(got.receivers, receivers, "{why}");
            assert_eq!(got.refused, refused, "{why}");
        }
    }

    #[test]
    fn no_route_goes_to_the_owning_team() {
        let s = Settings::from_yaml(
            "receivers: [{name: x, console: {}}, {name: y, console: {}}]\nteams: {pay: {receivers: [y]}}",
        )
        .expect("valid");
        assert_eq!(
            Router::new(&s).route(&labels("pay", "degraded", "a", "b")).receivers,
            vec!["y"]
        );
    }

    #[test]
    fn group_keys_and_silences() {
        let l = labels("pay", "sync_failed", "a", "b");
        assert_eq!(
            group_key(&["team".into(), "kind".into()], &l, false),
            "team=pay,kind=sync_failed"
        );
        assert_eq!(group_key(&["team".into()], &l, true), "fingerprint=fp");
        let now = Utc::now();
        let s = Silence {
            id: "1".into(),
            matchers: vec![Matcher::new("app", "a*")],
            starts_at: now - chrono::Duration::minutes(1),
            ends_at: now + chrono::Duration::minutes(1),
            created_by: "me".into(),
            comment: "".into(),
            created_at: now,
        };
        assert!(is_silenced(std::slice::from_ref(&s), &l, now));
        assert!(!is_silenced(
            std::slice::from_ref(&s),
            &l,
            now + chrono::Duration::minutes(2)
        ));
        assert!(!is_silenced(&[s], &labels("pay", "degraded", "other", "b"), now));
    }
}
