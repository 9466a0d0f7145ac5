//! The content model of a notification: what every receiver renders, whatever its format. Receivers know this
//! model only, never Argo CD payloads. The renderings live with the receivers (`receivers::render`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::incident::{Incident, IncidentState, Kind, Severity};
use super::time::Zone;

// Titles and status lines are worded here, once, for the pipeline (which titles notifications) and every receiver
// (which shows each incident's line).

/// Where a notification stands in its thread's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Something started firing: open a ticket / post a message.
    Open,
    /// Still firing (repeat, escalation step, details changed): comment / reply in thread.
    Update,
    /// Everything in it recovered: close / resolve / edit.
    Resolve,
    /// `herald send-test`: a clearly marked test message.
    Test,
    /// A team's scheduled digest (`Notification::digest` holds it): a message of its own, in no thread.
    Digest,
    /// Someone acknowledged an incident the thread told of: PagerDuty acknowledges, a ticket gets a comment, the
    /// Slack bot's message is edited in place. Sent only to receivers that take it (`Capabilities`).
    Acknowledge,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Open => "open",
            Action::Update => "update",
            Action::Resolve => "resolve",
            Action::Test => "test",
            Action::Digest => "digest",
            Action::Acknowledge => "acknowledge",
        }
    }
}

/// What a receiver is asked to deliver: one message about one group of incidents (or one incident, for ticket
/// and paging receivers), a team's digest, a change or a commit status — its [`Body`].
///
/// Stored in the outbox as JSON of the shape older Herald wrote (`incidents` always, `digest`, `change` and
/// `commit_status` beside it when set): see [`Stored`].
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub receiver: String,
    pub action: Action,
    /// Stable key of the conversation this message belongs to (a group, or an incident's fingerprint). Receivers
    /// that thread or ticket use it to find what they created before.
    pub thread_key: String,
    /// One line for subjects and titles.
    pub title: String,
    /// Why this message now ("fired", "escalation step 1 (after 1h)", "still firing", "resolved").
    pub reason: String,
    /// What the message is about.
    pub body: Body,
    pub created_at: DateTime<Utc>,
    /// A message to one person instead of the receiver's own destination (a Slack DM, an e-mail to them): the
    /// person who started a failed or pruning sync.
    pub recipient: Option<Recipient>,
    /// Herald's status page showing the notification's team (`server.public_url`), where a list the message cuts
    /// short is seen whole.
    pub status_url: Option<String>,
    /// The signed links that act on all of the message's firing incidents at once ("Acknowledge all 40"): made for
    /// a chat or e-mail message about a group too large to show each incident's own links.
    pub group_actions: Vec<super::action_link::MessageLink>,
    /// The time zone its readers read times in: the team's (its digest's, else `server.time_zone`).
    pub zone: Zone,
}

/// What a notification is about: the one thing a receiver renders.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Incidents (a group's, or one for ticket and paging receivers); a test notification's made-up one.
    Incidents(Vec<Incident>),
    /// A team's digest (with [`Action::Digest`]).
    Digest(Box<super::Digest>),
    /// A change (a sync that deployed a new revision), not a problem: paging receivers send it as a change event,
    /// Grafana as an annotation.
    Change(Box<Change>),
    /// A sync's state told as a commit status (`github_status` receivers), not a problem.
    CommitStatus(Box<CommitStatus>),
}

impl Default for Body {
    fn default() -> Self {
        Body::Incidents(Vec::new())
    }
}

/// A [`Notification`] as the outbox stores it, and as a receiver's template reads it: the shape older Herald wrote,
/// with `incidents` always and each other body beside it when set. Rows written by an older Herald read back as
/// the same notification and write out the same JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    pub receiver: String,
    pub action: Action,
    pub thread_key: String,
    pub title: String,
    pub reason: String,
    pub incidents: Vec<Incident>,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Box<super::Digest>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient: Option<Recipient>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<Box<Change>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_status: Option<Box<CommitStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group_actions: Vec<super::action_link::MessageLink>,
    #[serde(default, skip_serializing_if = "Zone::is_utc")]
    pub zone: Zone,
}

/// [`Stored`] borrowed from a notification, to write it without copying it.
#[derive(Serialize)]
struct StoredRef<'a> {
    receiver: &'a str,
    action: Action,
    thread_key: &'a str,
    title: &'a str,
    reason: &'a str,
    incidents: &'a [Incident],
    created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    digest: Option<&'a super::Digest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recipient: Option<&'a Recipient>,
    #[serde(skip_serializing_if = "Option::is_none")]
    change: Option<&'a Change>,
    #[serde(skip_serializing_if = "Option::is_none")]
    commit_status: Option<&'a CommitStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_url: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    group_actions: &'a [super::action_link::MessageLink],
    #[serde(skip_serializing_if = "Zone::is_utc")]
    zone: Zone,
}

impl From<Stored> for Notification {
    /// The body is the digest when there is one, else the change, else the commit status, else the incidents: the
    /// order receivers read them in before the body was one value (a stored row only ever held one of them).
    fn from(s: Stored) -> Self {
        let body = match (s.digest, s.change, s.commit_status) {
            (Some(d), _, _) => Body::Digest(d),
            (None, Some(c), _) => Body::Change(c),
            (None, None, Some(c)) => Body::CommitStatus(c),
            (None, None, None) => Body::Incidents(s.incidents),
        };
        Notification {
            receiver: s.receiver,
            action: s.action,
            thread_key: s.thread_key,
            title: s.title,
            reason: s.reason,
            body,
            created_at: s.created_at,
            recipient: s.recipient,
            status_url: s.status_url,
            group_actions: s.group_actions,
            zone: s.zone,
        }
    }
}

impl From<Notification> for Stored {
    fn from(n: Notification) -> Self {
        let (mut incidents, mut digest, mut change, mut commit_status) = (Vec::new(), None, None, None);
        match n.body {
            Body::Incidents(list) => incidents = list,
            Body::Digest(d) => digest = Some(d),
            Body::Change(c) => change = Some(c),
            Body::CommitStatus(c) => commit_status = Some(c),
        }
        Stored {
            receiver: n.receiver,
            action: n.action,
            thread_key: n.thread_key,
            title: n.title,
            reason: n.reason,
            incidents,
            created_at: n.created_at,
            digest,
            recipient: n.recipient,
            change,
            commit_status,
            status_url: n.status_url,
            group_actions: n.group_actions,
            zone: n.zone,
        }
    }
}

impl Serialize for Notification {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        StoredRef {
            receiver: &self.receiver,
            action: self.action,
            thread_key: &self.thread_key,
            title: &self.title,
            reason: &self.reason,
            incidents: self.incidents(),
            created_at: self.created_at,
            digest: self.digest(),
            recipient: self.recipient.as_ref(),
            change: self.change(),
            commit_status: self.commit_status(),
            status_url: self.status_url.as_deref(),
            group_actions: &self.group_actions,
            zone: self.zone,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Notification {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Stored::deserialize(deserializer).map(Notification::from)
    }
}

/// One person a notification goes to, as `people.<username>` describes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recipient {
    /// The Argo CD username (an SSO login, often an e-mail address).
    pub username: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// A Slack user id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<String>,
}

impl Recipient {
    /// `username`, reached at `address` by way of `contact`.
    pub fn by(username: &str, contact: Contact, address: &str) -> Recipient {
        let mut to = Recipient {
            username: username.to_string(),
            email: None,
            slack: None,
        };
        match contact {
            Contact::Email => to.email = Some(address.to_string()),
            Contact::Slack => to.slack = Some(address.to_string()),
        }
        to
    }
}

/// A way to reach one person: a key of `people.<username>` and of `people_receivers`, and what a receiver that
/// can message a person reaches them by (`receivers::Capabilities::reaches_person`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Contact {
    Email,
    Slack,
}

impl Contact {
    pub const ALL: [Contact; 2] = [Contact::Email, Contact::Slack];

    /// The key in `people.<username>` and `people_receivers`.
    pub fn as_str(self) -> &'static str {
        match self {
            Contact::Email => "email",
            Contact::Slack => "slack",
        }
    }
}

/// A successful sync that deployed a new revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// The Argo CD instance of the Application; left out when it is the default instance.
    #[serde(
        default = "crate::domain::default_instance",
        skip_serializing_if = "crate::domain::is_default_instance"
    )]
    pub instance: String,
    pub app_namespace: String,
    pub app_name: String,
    pub project: String,
    /// Where it deployed.
    pub destination_namespace: String,
    pub revision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_revision: Option<String>,
    /// `alice`, or `automated`.
    pub initiator: String,
    /// When the sync finished (when Herald heard of it, if Argo CD did not say).
    pub finished_at: DateTime<Utc>,
    /// The Application in Argo CD, when the URL is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_url: Option<String>,
    /// The team that owns the Application (`routing::owning_team`); empty in changes queued before it was kept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub team: String,
}

impl Change {
    /// The Application's name as people read it in a title: `payments-api`, or `us/payments-api` outside the
    /// default Argo CD instance.
    pub fn app_title(&self) -> String {
        match super::is_default_instance(&self.instance) {
            true => self.app_name.clone(),
            false => format!("{}/{}", self.instance, self.app_name),
        }
    }
}

/// What a commit status says of a sync, in GitHub's words (`state` of "Create a commit status").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommitState {
    /// The sync operation runs (Argo CD's phase `Running`).
    Pending,
    /// It succeeded (`Succeeded`).
    Success,
    /// It failed (`Failed`: a resource did not apply, a hook failed).
    Failure,
    /// It could not run (`Error`).
    Error,
}

impl CommitState {
    pub fn as_str(self) -> &'static str {
        match self {
            CommitState::Pending => "pending",
            CommitState::Success => "success",
            CommitState::Failure => "failure",
            CommitState::Error => "error",
        }
    }
}

/// One sync of one Application, told as the status of the commit it syncs: which repository and commit, how the
/// sync stands, and where to read more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitStatus {
    /// The Argo CD instance of the Application; left out when it is the default instance.
    #[serde(
        default = "crate::domain::default_instance",
        skip_serializing_if = "crate::domain::is_default_instance"
    )]
    pub instance: String,
    pub app_namespace: String,
    pub app_name: String,
    /// The repository's host as its `repoURL` names it (`github.com`, a GitHub Enterprise host).
    pub host: String,
    /// `owner/name`, without `.git`.
    pub repo: String,
    /// The full commit hash the sync is of.
    pub sha: String,
    pub state: CommitState,
    /// Argo CD's operation message (`successfully synced`, why it failed), possibly empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// `alice`, or `automated`.
    pub initiator: String,
    /// The Application's page: on Herald (`server.public_url`), else in Argo CD; none when neither is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_url: Option<String>,
}

impl CommitStatus {
    /// The status's `context`: `argocd/<app>`, or `argocd/<instance>/<app>` outside the default instance, so two
    /// Argo CDs with an Application of the same name do not overwrite each other's status.
    pub fn context(&self) -> String {
        match super::is_default_instance(&self.instance) {
            true => format!("argocd/{}", self.app_name),
            false => format!("argocd/{}/{}", self.instance, self.app_name),
        }
    }
}

impl Notification {
    /// A message about `body` in `thread` (to its receiver): no person, no status-page link (see
    /// [`Notification::with_status_page`]).
    pub fn about(
        thread: &super::Thread,
        action: Action,
        title: String,
        reason: String,
        body: Body,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            receiver: thread.receiver().to_string(),
            action,
            thread_key: thread.key(),
            title,
            reason,
            body,
            created_at: now,
            recipient: None,
            status_url: None,
            group_actions: Vec::new(),
            zone: Default::default(),
        }
    }

    /// An escalation step's message about `view` (the incident `incident`) to `receiver`, in that incident's
    /// escalation thread for the receiver: what every step sends, whoever it reaches.
    pub fn escalation(
        receiver: &str,
        incident: i64,
        view: &super::Incident,
        title: String,
        reason: String,
        now: DateTime<Utc>,
    ) -> (super::Thread, Self) {
        let thread = super::Thread::Escalation {
            receiver: receiver.to_string(),
            incident,
        };
        let n = Self::about(
            &thread,
            Action::Open,
            title,
            reason,
            Body::Incidents(vec![view.clone()]),
            now,
        );
        (thread, n)
    }

    pub fn is_resolve(&self) -> bool {
        self.action == Action::Resolve
    }

    /// The incidents it tells of: none for a digest, a change or a commit status.
    pub fn incidents(&self) -> &[Incident] {
        match &self.body {
            Body::Incidents(list) => list,
            _ => &[],
        }
    }
    /// The incidents it tells of, to change them in place (none for another body).
    pub fn incidents_mut(&mut self) -> &mut [Incident] {
        match &mut self.body {
            Body::Incidents(list) => list,
            _ => &mut [],
        }
    }
    /// The team's digest, when that is what it tells.
    pub fn digest(&self) -> Option<&super::Digest> {
        match &self.body {
            Body::Digest(d) => Some(d),
            _ => None,
        }
    }
    /// The change, when that is what it tells.
    pub fn change(&self) -> Option<&Change> {
        match &self.body {
            Body::Change(c) => Some(c),
            _ => None,
        }
    }
    /// The commit status, when that is what it tells.
    pub fn commit_status(&self) -> Option<&CommitStatus> {
        match &self.body {
            Body::CommitStatus(c) => Some(c),
            _ => None,
        }
    }
    /// `self` with the link to Herald's status page (`server.public_url`) showing the team its incidents share (the
    /// whole page when they belong to several), where a list a receiver cuts short is seen whole.
    pub fn with_status_page(mut self, public_url: Option<&str>) -> Self {
        let mut teams = self.incidents().iter().map(|i| i.team.as_str());
        let first = teams.next();
        let team = first.filter(|t| !t.is_empty() && teams.all(|other| other == *t));
        self.status_url = public_url.and_then(|u| super::link::status_page(u, team));
        self
    }

    /// The incident for per-incident receivers (the first one).
    pub fn primary(&self) -> Option<&Incident> {
        self.incidents().first()
    }
    pub fn highest_severity(&self) -> Severity {
        self.incidents()
            .iter()
            .map(|i| i.severity)
            .max()
            .unwrap_or(Severity::Warning)
    }

    /// What closes the ticket or alert the test notification `self` opened (`herald send-test` on a ticket or
    /// paging receiver): its resolve, in the same thread.
    pub fn test_closed(&self, now: DateTime<Utc>) -> Self {
        let mut n = self.clone();
        n.action = Action::Resolve;
        n.title = "[TEST] Herald test notification: closed again".into();
        n.reason = "closed by `herald send-test`: it only checked this receiver".into();
        n.created_at = now;
        for i in n.incidents_mut() {
            i.state = IncidentState::Resolved;
            i.resolved_at = Some(now);
        }
        n
    }

    /// A notification used by `herald send-test` and receiver tests.
    pub fn test(receiver: &str, now: DateTime<Utc>) -> Self {
        let incident = Incident {
            id: 0,
            fingerprint: "herald-test".into(),
            kind: Kind::Test,
            severity: Severity::Info,
            state: IncidentState::Firing,
            summary: "[TEST] Herald test notification: nothing is wrong".into(),
            app_namespace: "argocd".into(),
            app_name: "herald-test".into(),
            project: "default".into(),
            team: "test".into(),
            since: now,
            fired_at: Some(now),
            ..Default::default()
        };
        Self {
            receiver: receiver.into(),
            action: Action::Test,
            thread_key: super::Thread::Test {
                receiver: receiver.into(),
                at: now,
            }
            .key(),
            title: "[TEST] Herald test notification".into(),
            reason: "sent by `herald send-test` to check this receiver".into(),
            body: Body::Incidents(vec![incident]),
            created_at: now,
            recipient: None,
            status_url: None,
            group_actions: Vec::new(),
            zone: Default::default(),
        }
    }
}

/// Where an outbox row stands: waiting (or being retried), delivered, or given up on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    Pending,
    Done,
    Dead,
}

impl DeliveryState {
    pub const ALL: [DeliveryState; 3] = [DeliveryState::Pending, DeliveryState::Done, DeliveryState::Dead];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Done => "done",
            DeliveryState::Dead => "dead",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Action {
    pub fn parse(s: &str) -> Option<Self> {
        [
            Action::Open,
            Action::Update,
            Action::Resolve,
            Action::Test,
            Action::Digest,
            Action::Acknowledge,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

/// A commit as Git hosts quote it (7 characters); a chart version or a tag as it is (the one rule:
/// [`super::revision::short_revision`]).
pub fn short_revision(revision: &str) -> &str {
    super::revision::short_revision(revision, super::revision::QUOTED)
}

/// How long, in people's words: `45 s`, `10 min`, `1 h`, `1 h 5 min`, `3 d 2 h`.
pub fn duration_words(d: chrono::Duration) -> String {
    let secs = d.num_seconds().max(0);
    let mins = secs / 60;
    let (hours, days) = (mins / 60, mins / 60 / 24);
    match () {
        _ if secs < 60 => format!("{secs} s"),
        _ if mins < 60 => format!("{mins} min"),
        _ if hours < 48 => match mins % 60 {
            0 => format!("{hours} h"),
            m => format!("{hours} h {m} min"),
        },
        _ => match hours % 24 {
            0 => format!("{days} d"),
            h => format!("{days} d {h} h"),
        },
    }
}

/// [`duration_words`], saying `over` when the words are shorter than the time (`for over 1 h` at 1 h 0 min 30 s).
pub fn for_how_long(d: chrono::Duration) -> String {
    let secs = d.num_seconds().max(0);
    let unit = match secs {
        0..60 => 1,
        60..172_800 => 60,
        _ => 3600,
    };
    let words = duration_words(d);
    if secs % unit == 0 {
        words
    } else {
        format!("over {words}")
    }
}

/// A time of day (`16:01 UTC`), with the date when it is not `now`'s.
impl super::Acknowledgement {
    /// In a message at `now`: `acknowledged by alice at 10:02 UTC, until resolved` (`until 12:00 UTC`); once the
    /// incident resolved, only who and when.
    pub fn words(&self, state: IncidentState, now: DateTime<Utc>, zone: Zone) -> String {
        let who = format!("acknowledged by {} at {}", self.by, zone.short(self.at, now));
        match (state, self.until) {
            (IncidentState::Resolved, _) => who,
            (_, None) => format!("{who}, until resolved"),
            (_, Some(u)) if u <= now => format!("{who}, until {} (ended)", zone.short(u, now)),
            (_, Some(u)) => format!("{who}, until {}", zone.short(u, now)),
        }
    }
}

impl Incident {
    /// One line about this incident at `now`, without the Application's name: `OutOfSync for over 1 h, since
    /// 16:01 UTC`; `sync failed: …, at 09:49 UTC`; `Degraded, resolved at 17:13 UTC after 1 h 12 min`.
    pub fn status_line(&self, now: DateTime<Utc>, zone: Zone) -> String {
        match &self.acknowledged {
            Some(a) => format!("{}; {}", self.problem_line(now, zone), a.words(self.state, now, zone)),
            None => self.problem_line(now, zone),
        }
    }

    /// [`Incident::status_line`] without who acknowledged it.
    fn problem_line(&self, now: DateTime<Utc>, zone: Zone) -> String {
        let problem = self.problem();
        let started = self.since;
        match (self.state, self.resolved_at) {
            (IncidentState::Resolved, Some(at)) if !self.kind.is_informational() => {
                let why = self
                    .resolution
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default();
                format!(
                    "{problem}, resolved at {}{why} after {}",
                    zone.short(at, now),
                    duration_words(self.lasted(at))
                )
            }
            _ if self.lasts() => format!(
                "{problem} for {}, since {}",
                for_how_long(now - started),
                zone.short(started, now)
            ),
            _ => format!("{problem}, at {}", zone.short(started, now)),
        }
    }

    /// The words about this incident in a title: `OutOfSync for over 1 h`, `sync failed: …`, or, resolving,
    /// `OutOfSync ended after 1 h 12 min`. Without `now` (a ticket's title, which stays for the incident's whole
    /// life), no duration: `OutOfSync`, `OutOfSync ended`.
    fn title_words(&self, action: Action, now: Option<DateTime<Utc>>) -> String {
        let problem = self.problem();
        if action == Action::Resolve {
            let Some(now) = now else {
                return match &self.resolution {
                    Some(why) => format!("{problem} ended: {why}"),
                    None => format!("{problem} ended"),
                };
            };
            let lasted = duration_words(self.lasted(self.resolved_at.unwrap_or(now)));
            return match &self.resolution {
                Some(why) => format!("{problem} ended: {why} (after {lasted})"),
                None => format!("{problem} ended after {lasted}"),
            };
        }
        match now {
            Some(now) if self.lasts() => format!("{problem} for {}", for_how_long(now - self.since)),
            _ => problem,
        }
    }

    /// How long it lasted until `end` (Herald's clock), with both ends from one clock: `since` is Herald's for a
    /// condition it watched, but Argo CD's for a failed sync (when the sync ended), so a failed sync is measured
    /// from when Herald fired it.
    pub fn lasted(&self, end: DateTime<Utc>) -> chrono::Duration {
        let start = match self.kind {
            Kind::SyncFailed | Kind::Pruned => self.fired_at.unwrap_or(self.since),
            _ => self.since,
        };
        end - start
    }

    /// Whether this incident ended before the message about it (an event closed as soon as it is told is not).
    fn ended(&self) -> bool {
        self.state == IncidentState::Resolved && !self.kind.is_informational()
    }
}

impl Kind {
    /// What an Application with this kind of incident has, in people's words (`sync failed`, `OutOfSync`): never the
    /// internal name (a title about many Applications, a link's page).
    pub fn words(self) -> &'static str {
        match self {
            Kind::OutOfSync => "OutOfSync",
            Kind::PrunePending => "resources waiting to be pruned",
            Kind::SyncFailed => "sync failed",
            Kind::Degraded => "Degraded",
            Kind::SyncUnknown => "sync status Unknown",
            Kind::Pruned => "resources deleted by a sync",
            Kind::SyncRunning => "a sync still running",
            Kind::Progressing => "Progressing",
            Kind::Deleted => "deleted from Argo CD",
            Kind::Test => "test notification",
            Kind::ArgoCdAccess => "permission denied by Argo CD",
            Kind::Storm => "a storm",
        }
    }
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

impl Notification {
    /// The one line of a notification about `incidents` for `action` at `now`, in people's words, without a
    /// status word (receivers add theirs: FIRING, RESOLVED): `aaaaaaaaa: OutOfSync for over 1 h; 1 resource
    /// waiting to be pruned for over 1 h`, `payments: Degraded ended after 1 h 12 min`, `OutOfSync on 40
    /// Applications of team platform`. An event (a prune, closed as soon as it is told) never reads as resolved.
    pub fn title_of(action: Action, incidents: &[Incident], now: DateTime<Utc>) -> String {
        Self::titled(action, incidents, Some(now))
    }

    /// The title of a ticket (Jira summary, GitHub title, Redmine subject, ServiceNow short description): the
    /// message's title without durations, which would be frozen at the ticket's creation for its whole life.
    pub fn ticket_title(&self) -> String {
        let incidents = self.incidents();
        if self.action == Action::Test || incidents.is_empty() {
            return self.title.clone();
        }
        // Only Herald's own wording is re-worded (an escalation keeps its "Escalated (step N): " in front).
        let own = Self::title_of(self.action, incidents, self.created_at);
        match self.title.strip_suffix(&own) {
            Some(head) => format!("{head}{}", Self::titled(self.action, incidents, None)),
            None => self.title.clone(),
        }
    }

    /// Whether every incident of an update has resolved: it is then a resolve in its words ("RESOLVED", "… ended"),
    /// never "FIRING: 0 problems".
    pub fn all_resolved(&self) -> bool {
        let incidents = self.incidents();
        self.action == Action::Update && !incidents.is_empty() && incidents.iter().all(|i| i.ended())
    }

    fn titled(action: Action, incidents: &[Incident], now: Option<DateTime<Utc>>) -> String {
        if action == Action::Update && !incidents.is_empty() && incidents.iter().all(|i| i.ended()) {
            return Self::titled(Action::Resolve, incidents, now);
        }
        // Two instances' Applications of one name are two Applications.
        let mut apps: Vec<(&str, &str, &str)> = Vec::new();
        for i in incidents {
            let app = (instance_of(i), i.app_namespace.as_str(), i.app_name.as_str());
            if !apps.contains(&app) {
                apps.push(app);
            }
        }
        let ended = incidents.iter().filter(|i| i.ended()).count();
        let shown: Vec<&Incident> = if action == Action::Resolve {
            incidents.iter().collect()
        } else {
            incidents.iter().filter(|i| !i.ended()).collect()
        };
        let also_ended = if action != Action::Resolve && ended > 0 {
            format!(" ({ended} resolved)")
        } else {
            String::new()
        };
        if let ([_], Some(first)) = (apps.as_slice(), incidents.first()) {
            let words: Vec<String> = shown.iter().map(|i| i.title_words(action, now)).collect();
            return format!("{}: {}{also_ended}", first.app_title(), words.join("; "));
        }
        let mut kinds: Vec<Kind> = shown.iter().map(|i| i.kind).collect();
        kinds.dedup();
        let what = match kinds.as_slice() {
            [one] => one.words().to_string(),
            _ => plural(shown.len(), "problem"),
        };
        let ended_word = if action == Action::Resolve { " ended" } else { "" };
        let team = incidents.first().map(|i| i.team.as_str()).unwrap_or_default();
        let of_team = if team.is_empty() {
            String::new()
        } else {
            format!(" of team {team}")
        };
        format!(
            "{what}{ended_word} on {}{of_team}{also_ended}",
            plural(apps.len(), "Application")
        )
    }
}

/// The Argo CD instance of `i`'s Application, the default one for an empty name.
fn instance_of(i: &Incident) -> &str {
    match super::is_default_instance(&i.instance) {
        true => crate::domain::DEFAULT_INSTANCE,
        false => &i.instance,
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 10, 2, h, m, s).single().expect("a time")
    }

    /// Which body `n` has, in words.
    fn body_of(n: &Notification) -> &'static str {
        match n.body {
            Body::Incidents(_) => "incidents",
            Body::Digest(_) => "digest",
            Body::Change(_) => "change",
            Body::CommitStatus(_) => "commit status",
        }
    }

    #[test]
    fn an_outbox_row_an_older_herald_stored_reads_back_and_writes_out_the_same() {
        let now = at(10, 0, 0);
        let old = |s: Stored| serde_json::to_string(&s).expect("a row");
        let base = Stored {
            status_url: Some("https://herald.example.com/?team=test".into()),
            created_at: now,
            ..Stored::from(crate::receivers::testing::notification(Action::Open))
        };
        let none = || Stored {
            incidents: Vec::new(),
            ..base.clone()
        };
        let status = CommitStatus {
            instance: "default".into(),
            app_namespace: "argocd".into(),
            app_name: "payments".into(),
            host: "github.com".into(),
            repo: "acme/payments".into(),
            sha: "2222222222222222222222222222222222222222".into(),
            state: CommitState::Success,
            message: String::new(),
            initiator: "alice".into(),
            target_url: None,
        };
        let rows = [
            (old(base.clone()), "incidents"),
            (old(none()), "incidents"),
            (
                old(Stored {
                    action: Action::Digest,
                    digest: Some(Box::default()),
                    ..none()
                }),
                "digest",
            ),
            (
                old(Stored {
                    commit_status: Some(Box::new(status)),
                    ..none()
                }),
                "commit status",
            ),
            // A change as an older Herald wrote it, word for word.
            (
                concat!(
                    r#"{"receiver":"pd","action":"open","thread_key":"pd:change:argocd/payments","#,
                    r#""title":"payments synced to 2222222 by alice","reason":"synced to a new revision","#,
                    r#""incidents":[],"created_at":"2025-10-02T10:00:00Z","change":{"app_namespace":"argocd","#,
                    r#""app_name":"payments","project":"shop","destination_namespace":"pay","#,
                    r#""revision":"2222222222222222222222222222222222222222","initiator":"alice","#,
                    r#""finished_at":"2025-10-02T10:00:00Z"}}"#
                )
                .to_string(),
                "change",
            ),
        ];
        for (row, what) in rows {
            let n: Notification = serde_json::from_str(&row).expect(what);
            assert_eq!(body_of(&n), what, "{row}");
            assert_eq!(
                serde_json::to_string(&n).expect("a row"),
                row,
                "{what}: written out as it was"
            );
            assert_eq!(
                Stored::from(n.clone()),
                serde_json::from_str::<Stored>(&row).expect(what)
            );
        }
    }

    #[test]
    fn a_group_links_to_the_status_page_of_the_team_its_incidents_share() {
        let mut n = crate::receivers::testing::notification(Action::Open);
        let one = |team: &str| {
            let mut i = crate::receivers::testing::incident();
            i.team = team.into();
            i
        };
        n.body = Body::Incidents(vec![one("pay ments"), one("pay ments")]);
        let shared = n.clone().with_status_page(Some("https://herald.example.com/ops"));
        assert_eq!(
            shared.status_url.as_deref(),
            Some("https://herald.example.com/ops/?team=pay+ments")
        );
        n.body = Body::Incidents(vec![one("pay ments"), one("pay ments"), one("platform")]);
        let mixed = n.clone().with_status_page(Some("https://herald.example.com/"));
        assert_eq!(mixed.status_url.as_deref(), Some("https://herald.example.com/"));
        assert_eq!(n.clone().with_status_page(None).status_url, None);
        assert_eq!(n.with_status_page(Some("javascript:alert(1)")).status_url, None);
    }

    fn incident(app: &str, kind: Kind, condition: &str, since: DateTime<Utc>) -> Incident {
        Incident {
            kind,
            app_namespace: "argocd".into(),
            app_name: app.into(),
            team: "platform".into(),
            condition: condition.into(),
            since,
            ..Default::default()
        }
    }

    #[test]
    fn a_ticket_title_carries_no_duration_and_a_failed_sync_is_measured_on_one_clock() {
        let mut oos = incident("payments", Kind::OutOfSync, "OutOfSync", at(9, 0, 0));
        let now = at(10, 30, 0);
        let title = Notification::title_of(Action::Open, std::slice::from_ref(&oos), now);
        assert_eq!(title, "payments: OutOfSync for 1 h 30 min");
        let n = Notification {
            title: title.clone(),
            ..Notification::test("jira", now)
        };
        let n = Notification {
            action: Action::Open,
            body: Body::Incidents(vec![oos.clone()]),
            created_at: now,
            ..n
        };
        assert_eq!(n.ticket_title(), "payments: OutOfSync");
        let escalated = Notification {
            title: format!("Escalated (step 1): {title}"),
            ..n.clone()
        };
        assert_eq!(escalated.ticket_title(), "Escalated (step 1): payments: OutOfSync");
        let own = Notification {
            title: "[FIRING] written by hand".into(),
            ..n
        };
        assert_eq!(
            own.ticket_title(),
            "[FIRING] written by hand",
            "a title Herald did not word is kept"
        );

        // Argo CD says the sync failed in 2025; Herald heard (and fired) a year later, resolved 5 min after.
        let mut failed = incident(
            "payments",
            Kind::SyncFailed,
            "sync failed",
            at(9, 0, 0) - chrono::Duration::days(425),
        );
        failed.fired_at = Some(at(9, 0, 0));
        failed.state = IncidentState::Resolved;
        failed.resolved_at = Some(at(9, 5, 0));
        let t = Notification::title_of(Action::Resolve, std::slice::from_ref(&failed), at(9, 5, 0));
        assert_eq!(t, "payments: sync failed ended after 5 min");
        oos.state = IncidentState::Resolved;
        oos.resolved_at = Some(at(10, 12, 0));
        let t = Notification::title_of(Action::Resolve, std::slice::from_ref(&oos), at(10, 12, 0));
        assert_eq!(t, "payments: OutOfSync ended after 1 h 12 min");
    }

    #[test]
    fn commits_are_shortened_and_other_revisions_kept() {
        assert_eq!(short_revision("2222222222222222222222222222222222222222"), "2222222");
        assert_eq!(short_revision("6.9.0"), "6.9.0");
    }

    #[test]
    fn durations_read_as_people_say_them() {
        let cases = [
            (45, "45 s"),
            (600, "10 min"),
            (3600, "1 h"),
            (3900, "1 h 5 min"),
            (266_400, "3 d 2 h"),
        ];
        for (secs, words) in cases {
            assert_eq!(duration_words(chrono::Duration::seconds(secs)), words);
        }
        assert_eq!(for_how_long(chrono::Duration::seconds(3630)), "over 1 h");
        assert_eq!(for_how_long(chrono::Duration::seconds(3900)), "1 h 5 min");
    }

    #[test]
    fn one_application_with_two_problems_is_one_title_in_peoples_words() {
        let since = at(17, 1, 47);
        let both = [
            incident("aaaaaaaaa", Kind::OutOfSync, "OutOfSync", since),
            incident(
                "aaaaaaaaa",
                Kind::PrunePending,
                "1 resource waiting to be pruned",
                since,
            ),
        ];

        let title = Notification::title_of(Action::Open, &both, at(18, 2, 17));

        assert_eq!(
            title,
            "aaaaaaaaa: OutOfSync for over 1 h; 1 resource waiting to be pruned for over 1 h"
        );
    }

    #[test]
    fn a_resolve_says_after_how_long_with_one_status_word() {
        let mut i = incident("payments", Kind::Degraded, "Degraded", at(16, 1, 0));
        i.state = IncidentState::Resolved;
        i.resolved_at = Some(at(17, 13, 0));

        let title = Notification::title_of(Action::Resolve, &[i.clone()], at(17, 13, 30));
        assert_eq!(title, "payments: Degraded ended after 1 h 12 min");
        assert!(!title.to_lowercase().contains("resolved"), "{title}");

        i.resolution = Some("Application deleted".into());
        let title = Notification::title_of(Action::Resolve, &[i], at(17, 13, 30));
        assert_eq!(
            title,
            "payments: Degraded ended: Application deleted (after 1 h 12 min)"
        );
    }

    #[test]
    fn many_applications_are_counted_with_the_right_plural_and_no_internal_names() {
        let many: Vec<Incident> = (0..40)
            .map(|k| {
                incident(
                    &format!("app-{k}"),
                    Kind::SyncUnknown,
                    "sync status Unknown",
                    at(16, 0, 0),
                )
            })
            .collect();
        assert_eq!(
            Notification::title_of(Action::Open, &many, at(16, 10, 0)),
            "sync status Unknown on 40 Applications of team platform"
        );
        let mut two = many[..2].to_vec();
        two[1].kind = Kind::OutOfSync;
        assert_eq!(
            Notification::title_of(Action::Open, &two, at(16, 10, 0)),
            "2 problems on 2 Applications of team platform"
        );
    }

    #[test]
    fn an_update_whose_incidents_have_all_resolved_reads_as_a_resolve() {
        let ended = |app: &str| {
            let mut i = incident(app, Kind::OutOfSync, "OutOfSync", at(16, 0, 0));
            i.state = IncidentState::Resolved;
            i.resolved_at = Some(at(17, 0, 0));
            i
        };
        let two = [ended("a"), ended("b")];
        assert_eq!(
            Notification::title_of(Action::Update, &two, at(17, 0, 30)),
            "OutOfSync ended on 2 Applications of team platform",
            "never 'FIRING: 0 problems … (2 resolved)'"
        );
        assert_eq!(
            Notification::title_of(Action::Update, &two[..1], at(17, 0, 30)),
            "a: OutOfSync ended after 1 h",
            "never an empty summary"
        );
        let mut n = crate::receivers::testing::notification(Action::Update);
        n.body = Body::Incidents(two.to_vec());
        assert!(n.all_resolved());
        assert_eq!(crate::receivers::render::status_word(&n), "RESOLVED");
        let c = incident("c", Kind::OutOfSync, "OutOfSync", at(16, 0, 0));
        n.body = Body::Incidents([two.to_vec(), vec![c]].concat());
        assert!(!n.all_resolved());
        assert_eq!(crate::receivers::render::status_word(&n), "FIRING");
    }

    #[test]
    fn an_event_on_an_open_never_reads_as_resolved() {
        let mut pruned = incident(
            "payments",
            Kind::Pruned,
            "the sync deleted ConfigMap payments-config",
            at(9, 0, 0),
        );
        // Closed the moment it fired, before its group flushed.
        pruned.state = IncidentState::Resolved;
        pruned.resolved_at = Some(at(9, 0, 0));

        let title = Notification::title_of(Action::Open, &[pruned.clone()], at(9, 0, 30));
        assert_eq!(title, "payments: the sync deleted ConfigMap payments-config");
        assert_eq!(
            pruned.status_line(at(9, 0, 30), Zone::UTC),
            "the sync deleted ConfigMap payments-config, at 09:00 UTC"
        );
    }

    #[test]
    fn an_application_of_another_instance_is_named_with_it_and_two_instances_are_two_applications() {
        let now = at(10, 30, 0);
        let of = |instance: &str| Incident {
            instance: instance.into(),
            ..incident("payments-api", Kind::OutOfSync, "OutOfSync", at(9, 0, 0))
        };
        let title = |incidents: &[Incident]| Notification::title_of(Action::Open, incidents, now);

        assert_eq!(title(&[of("default")]), "payments-api: OutOfSync for 1 h 30 min");
        assert_eq!(
            title(&[of("")]),
            "payments-api: OutOfSync for 1 h 30 min",
            "an empty name is the default"
        );
        assert_eq!(title(&[of("us")]), "us/payments-api: OutOfSync for 1 h 30 min");
        assert_eq!(
            title(&[of("eu"), of("us")]),
            "OutOfSync on 2 Applications of team platform",
            "the same name in two instances is two Applications"
        );
        assert_eq!(
            title(&[of("default"), of("")]),
            "payments-api: OutOfSync for 1 h 30 min; OutOfSync for 1 h 30 min"
        );

        let n = Notification {
            action: Action::Open,
            title: title(&[of("us")]),
            body: Body::Incidents(vec![of("us")]),
            created_at: now,
            ..Notification::test("jira", now)
        };
        assert_eq!(n.ticket_title(), "us/payments-api: OutOfSync");

        let change = |instance: &str| Change {
            instance: instance.into(),
            app_namespace: "argocd".into(),
            app_name: "payments-api".into(),
            project: "shop".into(),
            destination_namespace: "pay".into(),
            revision: "v3".into(),
            previous_revision: None,
            initiator: "automated".into(),
            finished_at: now,
            app_url: None,
            team: String::new(),
        };
        assert_eq!(change("default").app_title(), "payments-api");
        assert_eq!(change("us").app_title(), "us/payments-api");
    }
}
