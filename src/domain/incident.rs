//! The incident as the whole of Herald sees it: its kind, severity and lifecycle state as enums, the resources it
//! names and the hints that say what to do. Everything downstream of `incidents` (routing, store, receivers)
//! speaks these types; only the store turns them into text.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    #[default]
    OutOfSync,
    PrunePending,
    SyncFailed,
    Degraded,
    SyncUnknown,
    Pruned,
    /// A sync operation still running (or terminating) long after it started: a hook or a resource it waits on.
    SyncRunning,
    /// Health `Progressing` for long: a rollout that does not finish.
    Progressing,
    /// The Application was deleted from Argo CD while it had firing incidents (or in a namespace of
    /// `rules.deleted.namespaces`): told once; its incidents close.
    Deleted,
    /// `herald send-test`: a marked test message; never configured, never stored.
    #[serde(skip_deserializing)]
    Test,
    /// Herald's Argo CD token may no longer `get` the Applications of a project (the API answered 403): told to the
    /// default team when it starts and when it ends (`pipeline::access`). Not a rule, never stored as an incident:
    /// only in the messages about it.
    ArgoCdAccess,
    /// Many Applications of one destination cluster (or one Argo CD instance) entered the same problem at once
    /// (`storm`): one incident about the shared thing, told to the default team, while the Applications' own
    /// incidents are held by it (`pipeline::storms`). Not a rule: found among incidents, not in a state.
    Storm,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::OutOfSync,
        Kind::PrunePending,
        Kind::SyncFailed,
        Kind::Degraded,
        Kind::SyncUnknown,
        Kind::Pruned,
        Kind::SyncRunning,
        Kind::Progressing,
        Kind::Deleted,
        Kind::Storm,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::OutOfSync => "out_of_sync",
            Kind::PrunePending => "prune_pending",
            Kind::SyncFailed => "sync_failed",
            Kind::Degraded => "degraded",
            Kind::SyncUnknown => "sync_unknown",
            Kind::Pruned => "pruned",
            Kind::SyncRunning => "sync_running",
            Kind::Progressing => "progressing",
            Kind::Deleted => "deleted",
            Kind::Test => "test",
            Kind::ArgoCdAccess => "argocd_access",
            Kind::Storm => "storm",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// `out_of_sync, prune_pending, …`: for a message that says what would have been accepted.
    pub fn list() -> String {
        let kinds: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        kinds.join(", ")
    }

    /// Default `for` and severity.
    pub fn defaults(self) -> (Duration, Severity) {
        match self {
            Kind::OutOfSync => (Duration::from_secs(3600), Severity::Warning),
            Kind::PrunePending => (Duration::from_secs(3600), Severity::Warning),
            Kind::SyncFailed => (Duration::ZERO, Severity::Critical),
            Kind::Degraded => (Duration::from_secs(300), Severity::Critical),
            Kind::SyncUnknown => (Duration::from_secs(600), Severity::Warning),
            Kind::SyncRunning | Kind::Progressing => (Duration::from_secs(1800), Severity::Warning),
            // News by default: to chat and e-mail, no ticket, no page (the tickets it had are closed).
            Kind::Deleted => (Duration::ZERO, Severity::Info),
            // A storm's severity is `storm.severity`; it fires when its first member fires.
            Kind::Pruned | Kind::Test | Kind::ArgoCdAccess | Kind::Storm => (Duration::ZERO, Severity::Warning),
        }
    }

    /// Whether the kind is a condition that lasts until it goes away, or an event that happened once. Every kind
    /// must choose (no wildcard arm): the whole delivery lifecycle follows from it (see `pipeline::delivery`).
    pub fn occurrence(self) -> Occurrence {
        match self {
            Kind::OutOfSync | Kind::PrunePending | Kind::Degraded | Kind::SyncUnknown => Occurrence::Condition,
            // Last until the operation ends, or the health changes.
            Kind::SyncRunning | Kind::Progressing => Occurrence::Condition,
            // A failed sync stays a problem until a sync succeeds: it is resolved, so it is a condition.
            Kind::SyncFailed => Occurrence::Condition,
            // Lasts until the token may see the project again, and is then resolved.
            Kind::ArgoCdAccess => Occurrence::Condition,
            // Lasts until most of its Applications recovered.
            Kind::Storm => Occurrence::Condition,
            Kind::Pruned | Kind::Deleted | Kind::Test => Occurrence::Event,
        }
    }

    /// Events are told once per occurrence and closed at once: never repeated, never "still firing", never
    /// escalated, never resolved.
    pub fn is_informational(self) -> bool {
        self.occurrence() == Occurrence::Event
    }
}

/// What a kind of incident is over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Occurrence {
    /// Holds until it goes away: fires after its `for`, repeats every `repeat_interval` while firing, escalates,
    /// resolves.
    Condition,
    /// Happened once: sent once when it happens (one ticket, no repeats), then closed.
    Event,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    #[default]
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [Severity::Info, Severity::Warning, Severity::Critical]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IncidentState {
    Pending,
    #[default]
    Firing,
    Resolved,
}

impl IncidentState {
    pub const ALL: [IncidentState; 3] = [IncidentState::Pending, IncidentState::Firing, IncidentState::Resolved];

    pub fn as_str(self) -> &'static str {
        match self {
            IncidentState::Pending => "pending",
            IncidentState::Firing => "firing",
            IncidentState::Resolved => "resolved",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl std::fmt::Display for IncidentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub status: String,
    pub message: String,
    /// The API group (`apps`, `argoproj.io`; empty for the core group), for `--resource GROUP:KIND:NAME`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The resource in the Argo CD UI, when Argo CD's URL is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl ResourceRef {
    pub fn display(&self) -> String {
        if self.namespace.is_empty() {
            format!("{}/{}", self.kind, self.name)
        } else {
            format!("{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// Where an Application's manifests come from, and what was deployed from there: one per source, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceRevision {
    pub repo_url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<String>,
    /// What the spec asks for (`HEAD`, `main`, `6.9.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_revision: Option<String>,
    /// What Argo CD synced or compares with (a commit, a chart version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The commit on GitHub or GitLab, when the repository is one and the revision a commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_url: Option<String>,
}

impl SourceRevision {
    /// `chart podinfo from ghcr.io/stefanprodan/charts`, `github.com/acme/apps, path payments`: what people
    /// recognise, without the empty parts.
    pub fn describe(&self) -> String {
        let repo = self
            .repo_url
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .trim_end_matches(".git");
        match (&self.chart, &self.path) {
            (Some(chart), _) => format!("chart {chart} from {repo}"),
            (None, Some(path)) => format!("{repo}, path {path}"),
            (None, None) => repo.to_string(),
        }
    }
}

/// What the deployment before a problem changed, from what Herald stores about the Application: the images whose
/// tag or digest changed, each source whose revision changed (a Helm source's revision is its chart version), and
/// what the sync did to the resources. Only what changed is listed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    /// The images that changed, the first [`Deployment::MAX_IMAGES`] in Argo CD's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageChange>,
    /// How many more images changed than `images` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_images: usize,
    /// The sources whose revision changed, in the Application's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceChange>,
    /// What the last sync did to the resources (`syncResult.resources`), hooks left out.
    #[serde(default, skip_serializing_if = "SyncCounts::is_empty")]
    pub resources: SyncCounts,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Deployment {
    /// Image changes kept with an incident; the rest are counted in `more_images`.
    pub const MAX_IMAGES: usize = 20;

    pub fn is_empty(&self) -> bool {
        self.images.is_empty() && self.sources.is_empty() && self.resources.is_empty()
    }
}

/// One image of the Application that a deployment changed: `ghcr.io/acme/api` from `1.0` to `1.1`. A tag, or a
/// digest (`@sha256:…`); `from` absent: the image is new; `to` absent: no resource runs it any more.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageChange {
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

impl ImageChange {
    /// `ghcr.io/acme/api:1.0 → 1.1`, `ghcr.io/acme/api:1.1 (new)`, `ghcr.io/acme/old:2.0 (removed)`.
    pub fn describe(&self) -> String {
        let full = |v: &str| {
            if v.starts_with('@') {
                format!("{}{v}", self.image)
            } else {
                format!("{}:{v}", self.image)
            }
        };
        match (&self.from, &self.to) {
            (Some(from), Some(to)) => format!("{} → {}", full(from), to.trim_start_matches('@')),
            (None, Some(to)) => format!("{} (new)", full(to)),
            (Some(from), None) => format!("{} (removed)", full(from)),
            (None, None) => self.image.clone(),
        }
    }
}

/// A source whose revision a deployment changed: a commit (linked to the comparison on a trusted Git host) or, for
/// a Helm source, the chart's version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceChange {
    pub repo_url: String,
    /// The Helm chart, for a Helm source: `from` and `to` are its versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The comparison of the two commits, on a host `links` trusts (github.com, gitlab.com, bitbucket.org,
    /// `links.git_hosts`); never for another host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare_url: Option<String>,
}

impl SourceChange {
    /// `3de5b39dd542 → 9b2f1c0d7e6a`, `podinfo 6.9.0 → 6.9.2`.
    pub fn describe(&self) -> String {
        let short = |r: &Option<String>| match r.as_deref() {
            Some(r) => super::revision::short_revision(r, super::revision::SHOWN).to_string(),
            None => "none".into(),
        };
        let change = format!("{} → {}", short(&self.from), short(&self.to));
        match &self.chart {
            Some(chart) => format!("{chart} {change}"),
            None => change,
        }
    }
}

/// What a sync did to its resources, from each result's message: `created`, `configured` (changed),
/// `serverside-applied` (applied with server-side apply, which does not say whether anything changed) and the
/// `Pruned` status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncCounts {
    #[serde(default)]
    pub created: usize,
    #[serde(default)]
    pub changed: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub applied: usize,
    #[serde(default)]
    pub pruned: usize,
}

impl SyncCounts {
    pub fn is_empty(&self) -> bool {
        self.created + self.changed + self.applied + self.pruned == 0
    }

    /// `1 created, 2 changed, 1 pruned` (the counts that are not zero; `3 applied` for server-side apply).
    pub fn describe(&self) -> String {
        let parts: Vec<String> = [
            (self.created, "created"),
            (self.changed, "changed"),
            (self.applied, "applied"),
            (self.pruned, "pruned"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, word)| format!("{n} {word}"))
        .collect();
        parts.join(", ")
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hint {
    /// Stable id (`missing_crd`, `prune_disabled`, …).
    pub id: String,
    pub title: String,
    pub text: String,
}

/// One incident as a person needs to see it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Incident {
    pub id: i64,
    /// Stable across occurrences of the same problem: app identity + kind (+ operation where the kind says).
    pub fingerprint: String,
    pub kind: Kind,
    pub severity: Severity,
    /// `firing` or `resolved` (pending incidents are not shown to receivers).
    pub state: IncidentState,
    /// One line: what happened.
    pub summary: String,
    /// The Argo CD instance of the Application; left out when it is the default instance (the only one, for most).
    #[serde(
        default = "crate::domain::default_instance",
        skip_serializing_if = "crate::domain::is_default_instance"
    )]
    pub instance: String,
    pub app_namespace: String,
    pub app_name: String,
    pub project: String,
    pub team: String,
    pub destination_cluster: String,
    pub destination_namespace: String,
    /// Link to the Application in Argo CD, when the URL is known.
    pub app_url: Option<String>,
    /// When the condition started (Herald's own clock).
    pub since: DateTime<Utc>,
    pub fired_at: Option<DateTime<Utc>>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub revision: Option<String>,
    pub previous_revision: Option<String>,
    pub initiated_by: Option<String>,
    pub resources: Vec<ResourceRef>,
    pub messages: Vec<String>,
    pub hints: Vec<Hint>,
    pub labels: std::collections::BTreeMap<String, String>,
    /// e.g. "not confirmed: Argo CD API unreachable".
    pub notes: Vec<String>,
    /// Why it resolved, when it was not its condition going away (e.g. "Application deleted").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// What is wrong, in people's words and without the Application's name: `OutOfSync`, `sync status Unknown`,
    /// `1 resource waiting to be pruned`, `sync failed: one or more objects failed to apply`. Empty in incidents
    /// stored before it existed: [`Incident::problem`] then says it from the kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub condition: String,
    /// The Application's sources and the revision of each (one for most Applications).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceRevision>,
    /// What the deployment before the problem changed (images, revisions, chart versions, resources), for a
    /// problem that can follow one (a failed sync, a prune, Degraded, Progressing, a running sync); absent when it
    /// changed nothing Herald can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<Deployment>,
    /// The receivers the Application's annotation (`ownership.receivers_annotation`) asks for, as written; routing
    /// uses those the owning team allows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asked_receivers: Vec<String>,
    /// Why people are not told about it now (a silence, an inhibiting incident), when they are not: filled in
    /// when incidents are read (`GET /v1/incidents`, `herald incidents`, the status page), never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Hold>,
    /// Argo CD's sync windows keep the Application from being synced (`out_of_sync` only): its OutOfSync is
    /// expected until then. Stored with the incident when its Application is judged, and when the AppProjects are
    /// read (`pipeline::windows`), so a restart keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_window: Option<SyncWindowHold>,
    /// Who took it, when and until when: filled in from the incident's row when it is read or sent (later
    /// messages, the resolve, say it), never stored in the view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<Acknowledgement>,
    /// The signed one-click links a chat or e-mail message carries for it (Acknowledge, Silence 1 h, …): made
    /// when the message is queued, with `server.public_url` and `server.link_signing_key`; never stored in the view.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<super::action_link::MessageLink>,
}

/// Someone took the incident: while it holds, people hear no repeats and no further escalation step; its resolve
/// is still sent. `by` is a person's name (a credential's name, a Slack user, the name given on a signed link),
/// never a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acknowledgement {
    pub by: String,
    pub at: DateTime<Utc>,
    /// When it stops holding; `None`: until the incident resolves.
    #[serde(default)]
    pub until: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comment: String,
}

impl Acknowledgement {
    /// Whether it holds at `now` (an acknowledgement until a time ends then, and repeats resume).
    pub fn active(&self, now: DateTime<Utc>) -> bool {
        self.until.is_none_or(|u| now < u)
    }

    /// In people's words, in `zone`: `acknowledged by alice at 2026-12-02 10:02 UTC, until resolved`.
    pub fn describe(&self, zone: super::Zone) -> String {
        let until = match self.until {
            Some(u) => format!("until {}", zone.stamp(u)),
            None => "until resolved".into(),
        };
        let comment = if self.comment.is_empty() {
            String::new()
        } else {
            format!(": {}", self.comment)
        };
        format!(
            "acknowledged by {} at {}, {until}{comment}",
            self.by,
            zone.stamp(self.at)
        )
    }
}

/// Why a firing incident is held back from people: the delivery pipeline's answer (see `pipeline::delivery`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Hold {
    /// Another open incident of the same Application says the same thing better (one cause, one incident).
    Inhibited {
        /// The incident that inhibits it: its kind and fingerprint.
        source_kind: Kind,
        source_fingerprint: String,
        /// `built-in` or `inhibit_rules[N]`.
        rule: String,
    },
    /// It is one of many Applications of one cluster (or Argo CD instance) with the same problem at once: the
    /// storm incident about the shared thing is told instead (`pipeline::storms`), until the storm is over.
    Storm {
        /// The storm incident's id.
        storm_id: i64,
        /// What the storm is about: `cluster https://10.20.30.40:6443`, `Argo CD instance us`.
        about: String,
        /// When the storm ended, if it did: its members still firing are told `storm.window` after that.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ended_at: Option<DateTime<Utc>>,
    },
    /// A silence matches it.
    Silenced {
        silence: String,
        created_by: String,
        until: DateTime<Utc>,
    },
    /// Argo CD's sync windows keep the Application from being synced: its OutOfSync is expected until `until`.
    SyncWindow {
        until: DateTime<Utc>,
        /// Whether a person may still sync it by hand.
        manual_sync: bool,
    },
    /// Its owner (its team, or the route that takes it) is muted by its time intervals: inside one of its
    /// `mute_time_intervals`, or outside its `active_time_intervals`. Sent when that ends, if it still fires.
    Muted {
        /// `team payments`, `routes[2]`.
        owner: String,
        /// The `mute_time_intervals` it is inside, or (`outside`) the `active_time_intervals` it is outside of.
        intervals: Vec<String>,
        #[serde(default)]
        outside: bool,
        /// When it is next not muted (`None`: not within a year).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<DateTime<Utc>>,
    },
    /// Someone acknowledged it: no repeats, no further escalation step, while it holds.
    Acknowledged {
        acknowledged_by: String,
        at: DateTime<Utc>,
        /// `None`: until it resolves.
        until: Option<DateTime<Utc>>,
    },
}

impl Hold {
    /// In people's words, in `zone`: `silenced by alice until 2026-12-02 18:00 UTC (silence 3f…)`,
    /// `inhibited by prune_pending of the same Application (built-in rule)`.
    pub fn describe(&self, zone: super::Zone) -> String {
        match self {
            Hold::Inhibited { source_kind, rule, .. } => {
                format!("inhibited by {source_kind} of the same Application ({rule} rule)")
            }
            Hold::Storm {
                storm_id,
                about,
                ended_at: None,
            } => format!("held by the storm on {about} (incident {storm_id})"),
            Hold::Storm {
                storm_id,
                about,
                ended_at: Some(at),
            } => format!(
                "held by the storm on {about} (incident {storm_id}), over at {}: told soon if it still fires",
                zone.stamp(*at)
            ),
            Hold::Silenced {
                silence,
                created_by,
                until,
            } => format!(
                "silenced by {created_by} until {} (silence {silence})",
                zone.stamp(*until)
            ),
            Hold::Acknowledged {
                acknowledged_by,
                at,
                until,
            } => Acknowledgement {
                by: acknowledged_by.clone(),
                at: *at,
                until: *until,
                comment: String::new(),
            }
            .describe(zone),
            Hold::SyncWindow { until, manual_sync } => SyncWindowHold {
                until: *until,
                manual_sync: *manual_sync,
            }
            .describe(&zone.stamp(*until)),
            Hold::Muted { until, .. } => self.describe_muted(&until.map(|u| zone.stamp(u)).unwrap_or_default()),
        }
    }

    /// A `Muted` hold in words, `until` written by the caller (UTC, or the reader's zone; empty: no end known):
    /// `muted for team payments (time interval nights) until 07:00 CET`, `muted for routes[0] outside time
    /// interval office-hours until …`.
    pub fn describe_muted(&self, until: &str) -> String {
        let Hold::Muted {
            owner,
            intervals,
            outside,
            ..
        } = self
        else {
            return self.describe(super::Zone::UTC);
        };
        let names = format!(
            "time interval{} {}",
            if intervals.len() > 1 { "s" } else { "" },
            intervals.join(", ")
        );
        let why = match outside {
            true => format!("outside {names}"),
            false => format!("({names})"),
        };
        match until {
            "" => format!("muted for {owner} {why}, with no end within a year"),
            u => format!("muted for {owner} {why} until {u}"),
        }
    }
}

/// Argo CD's sync windows keep an Application from being synced until `until` (by its automated sync, and by a
/// person too unless `manual_sync`): an `out_of_sync` incident is held meanwhile, and its `for` starts then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncWindowHold {
    pub until: DateTime<Utc>,
    #[serde(default)]
    pub manual_sync: bool,
}

impl SyncWindowHold {
    /// Whether it still holds at `now`.
    pub fn active(&self, now: DateTime<Utc>) -> bool {
        now < self.until
    }

    /// As a hold, for the delivery pipeline and the lists.
    pub fn hold(&self) -> Hold {
        Hold::SyncWindow {
            until: self.until,
            manual_sync: self.manual_sync,
        }
    }

    /// `sync window until <when>`, `sync window (manual sync allowed) until <when>`, with `when` written by the
    /// caller (UTC, or the reader's zone).
    pub fn describe(&self, when: &str) -> String {
        match self.manual_sync {
            true => format!("sync window (manual sync allowed) until {when}"),
            false => format!("sync window until {when}"),
        }
    }
}

impl Incident {
    /// The Application it is about, in its Argo CD instance (the default one for a view stored before instances).
    pub fn app_id(&self) -> crate::domain::AppId {
        let instance = match super::is_default_instance(&self.instance) {
            true => crate::domain::DEFAULT_INSTANCE,
            false => self.instance.as_str(),
        };
        crate::domain::AppId::of(instance, &self.app_namespace, &self.app_name)
    }

    /// The Application's name as people read it in a title: `payments-api`, or `us/payments-api` for an
    /// Application of an Argo CD instance other than the default one (two instances may each have one of
    /// that name).
    pub fn app_title(&self) -> String {
        if self.kind == Kind::Storm {
            // What the storm is about, with its instance already in it (`cluster https://…`, `Argo CD instance us`).
            return self.app_name.clone();
        }
        match super::is_default_instance(&self.instance) {
            true => self.app_name.clone(),
            false => format!("{}/{}", self.instance, self.app_name),
        }
    }

    /// What is wrong, in people's words (`OutOfSync`, `Degraded`, `sync status Unknown`…), never an internal name.
    pub fn problem(&self) -> String {
        if !self.condition.is_empty() {
            return self.condition.clone();
        }
        match self.kind {
            Kind::OutOfSync => "OutOfSync".into(),
            Kind::PrunePending => "resources waiting to be pruned".into(),
            Kind::SyncFailed => "sync failed".into(),
            Kind::Degraded => "Degraded".into(),
            Kind::SyncUnknown => "sync status Unknown".into(),
            Kind::Pruned => "resources deleted by the sync".into(),
            Kind::SyncRunning => "sync still running".into(),
            Kind::Progressing => "Progressing".into(),
            Kind::Deleted => "deleted from Argo CD".into(),
            Kind::Test => "test notification".into(),
            Kind::ArgoCdAccess => "permission denied by Argo CD".into(),
            Kind::Storm => "many Applications with one problem".into(),
        }
    }

    /// Whether the problem is a state that lasts (and so is told with how long), not an event (a sync that
    /// failed or pruned).
    pub fn lasts(&self) -> bool {
        // A storm's problem says since when itself ("40 Applications Unknown since 10:02").
        !matches!(
            self.kind,
            Kind::SyncFailed | Kind::Pruned | Kind::Deleted | Kind::Test | Kind::Storm
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Kind;

    #[test]
    fn every_kind_but_the_test_message_is_in_all() {
        // A new variant does not compile here until it says whether it is a kind Herald finds (in `Kind::ALL`,
        // and so in the API's and the CLI's lists, the rules and `FINDERS`) or not.
        let listed = |k: Kind| match k {
            Kind::OutOfSync
            | Kind::PrunePending
            | Kind::SyncFailed
            | Kind::Degraded
            | Kind::SyncUnknown
            | Kind::Pruned
            | Kind::SyncRunning
            | Kind::Progressing
            | Kind::Deleted
            | Kind::Storm => true,
            Kind::Test | Kind::ArgoCdAccess => false,
        };
        for k in Kind::ALL {
            assert!(listed(k), "{k:?} is not one Herald finds");
            assert_eq!(Kind::parse(k.as_str()), Some(k));
        }
    }
}
