//! Which projects of each Argo CD instance Herald's token may no longer see. Argo CD answers a token without
//! `applications, get` on a project with a listing that simply lacks that project's Applications (200, fewer items
//! or `items: []`) and with 403 to a GET that names the project: an absence is then no proof of anything. Such a
//! project is *denied* (a row in `argocd_access`, [`crate::store::Store::deny_project`]): its Applications are kept
//! as they were, unverifiable — never deleted, their incidents never resolved, their pending incidents neither fired
//! nor reset — until a listing or a GET sees the project again. It is made loud: the status page and
//! `/v1/argocd` name the instance and project and since when (`ApiSource::denials`),
//! `herald_argocd_permission_denied{argocd_instance, project}` is 1, and the default team
//! (`ownership.default_team`) is told once through the outbox when it starts and once when it ends.

use chrono::{DateTime, Utc};

use super::{Core, InstanceApi, Pipeline};
use crate::domain::{Action, Body, Incident, IncidentState, Kind, Notification, Severity, Thread, Zone};
use crate::store::{Store, StoreError, WriteTx};

impl Core {
    /// A GET naming `project` answered 403: the project is denied from now (if it was not already), and the
    /// default team is told in the same transaction.
    pub(super) async fn project_denied(&self, source: &InstanceApi, project: &str) -> Result<(), StoreError> {
        let now = self.clock.now();
        let instance = source.api.instance();
        let mut tx = self.store.begin().await?;
        let started = Store::deny_project(&mut tx, instance, project, now).await?;
        if started {
            tracing::warn!(
                instance,
                project,
                "the Argo CD token may no longer get this project's Applications (403): they are kept as they \
                 were, unverifiable, until it may again (RBAC: `p, <role>, applications, get, <project>/*, allow`)"
            );
            self.tell_access(&mut tx, instance, project, now, None, now).await?;
        }
        tx.commit().await?;
        if started {
            self.wake_outbox.notify_one();
        }
        self.refresh_denials(source).await
    }

    /// A listing or a GET saw `project` (an item of it, a 200 or a 404 naming it): if it was denied, that ends now
    /// and the default team is told.
    pub(super) async fn project_seen(&self, source: &InstanceApi, project: &str) -> Result<(), StoreError> {
        if !source.status.report().denied.contains_key(project) {
            return Ok(());
        }
        let now = self.clock.now();
        let instance = source.api.instance();
        let mut tx = self.store.begin().await?;
        let ended = Store::allow_project(&mut tx, instance, project).await?;
        if let Some(since) = ended {
            tracing::info!(instance, project, denied_since = %since, "the Argo CD token may get this project's Applications again");
            self.tell_access(&mut tx, instance, project, since, Some(now), now)
                .await?;
        }
        tx.commit().await?;
        if ended.is_some() {
            self.wake_outbox.notify_one();
        }
        self.refresh_denials(source).await
    }

    /// Reads the instance's denied projects from the store (any replica may have written them) into its status.
    pub(super) async fn refresh_denials(&self, source: &InstanceApi) -> Result<(), StoreError> {
        let denied = self.store.denied_projects(source.api.instance()).await?;
        source.status.denials(denied.into_iter().collect());
        Ok(())
    }

    /// The messages to the default team's receivers about the denial of `project` since `since`: it starts
    /// (`ended` none: an opening message) or it ended at `ended` (its resolve, in the same thread).
    /// Queues the default team's messages about the denial of `project` (its start, or with `ended` its end) in
    /// `tx`, each on its receiver's [`Thread::Access`], the one way every notification goes (`notify::finish`: the
    /// status page link; no signed link, the denial being no stored incident).
    async fn tell_access(
        &self,
        tx: &mut WriteTx,
        instance: &str,
        project: &str,
        since: DateTime<Utc>,
        ended: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        for (thread, n) in self.access_notices(instance, project, since, ended, now) {
            super::notify::finish(&self.settings, tx, &thread, n, now).await?;
        }
        Ok(())
    }

    fn access_notices(
        &self,
        instance: &str,
        project: &str,
        since: DateTime<Utc>,
        ended: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Vec<(Thread, Notification)> {
        let team = &self.settings.ownership.default_team;
        // Not to a receiver told of syncs only (commit statuses, annotations): it takes no incidents.
        let takes_incidents = |name: &String| (self.settings.receiver(name)).is_none_or(|r| r.capabilities().incidents);
        let receivers: Vec<String> = (self.settings.teams.get(team))
            .map(|t| t.receivers.iter().filter(|r| takes_incidents(r)).cloned().collect())
            .unwrap_or_default();
        let incident = access_incident(instance, project, team, since, ended, self.zone_of(team));
        let (action, title, reason) = match ended {
            None => (
                Action::Open,
                format!(
                    "Herald can no longer see Argo CD {}: permission denied",
                    incident.app_name
                ),
                "the Argo CD API answered 403".to_string(),
            ),
            Some(_) => (
                Action::Resolve,
                format!("Herald sees Argo CD {} again", incident.app_name),
                "resolved: the Argo CD API answers for it again".to_string(),
            ),
        };
        (receivers.into_iter())
            .map(|receiver| {
                let thread = Thread::Access {
                    receiver: receiver.clone(),
                    instance: instance.to_string(),
                    project: project.to_string(),
                };
                let n = Notification {
                    receiver,
                    action,
                    thread_key: thread.key(),
                    title: title.clone(),
                    reason: reason.clone(),
                    body: Body::Incidents(vec![incident.clone()]),
                    created_at: now,
                    recipient: None,
                    status_url: None,
                    group_actions: Vec::new(),
                    zone: Default::default(),
                };
                (thread, n)
            })
            .collect()
    }
}

/// `project beta`, naming the instance outside the default one (`project beta (instance us)`).
fn whose(instance: &str, project: &str) -> String {
    if crate::domain::is_default_instance(instance) {
        format!("project {project}")
    } else {
        format!("project {project} (instance {instance})")
    }
}

/// "permission denied for project beta since 2026-03-02 10:02 UTC": the denial in a line, as its message, the API
/// and the status page's readers see it.
pub fn denied_summary(instance: &str, project: &str, since: DateTime<Utc>, zone: Zone) -> String {
    format!(
        "permission denied for {} since {}",
        whose(instance, project),
        zone.stamp(since)
    )
}

/// The denial of `project` as the one incident its messages carry (never stored as an incident).
fn access_incident(
    instance: &str,
    project: &str,
    team: &str,
    since: DateTime<Utc>,
    ended: Option<DateTime<Utc>>,
    zone: Zone,
) -> Incident {
    let whose = whose(instance, project);
    let mut messages = vec![
        format!(
            "Argo CD answers 403 to Herald's token for the Applications of {whose}: Herald can no longer confirm \
             their state. They are kept as they were, with their incidents; nothing of theirs is deleted or resolved \
             until Argo CD answers again."
        ),
        format!(
            "Herald's Argo CD account needs `p, role:herald, applications, get, {project}/*, allow` (or */*) in \
             argocd-rbac-cm; webhooks from Argo CD Notifications still arrive."
        ),
    ];
    if let Some(at) = ended {
        messages.push(format!("Seen again at {}.", zone.stamp(at)));
    }
    Incident {
        id: 0,
        fingerprint: crate::domain::thread::access_fingerprint(instance, project),
        kind: Kind::ArgoCdAccess,
        severity: Severity::Warning,
        state: if ended.is_some() {
            IncidentState::Resolved
        } else {
            IncidentState::Firing
        },
        summary: denied_summary(instance, project, since, zone),
        instance: instance.to_string(),
        app_namespace: String::new(),
        app_name: whose.clone(),
        project: project.to_string(),
        team: team.to_string(),
        since,
        fired_at: Some(since),
        resolved_at: ended,
        messages,
        condition: format!("permission denied since {}", zone.clock(since)),
        ..Default::default()
    }
}

/// The denials, for the resync and the scheduler.
impl Pipeline {
    /// See [`Core::project_denied`].
    pub async fn project_denied(&self, source: &InstanceApi, project: &str) -> Result<(), super::PipelineError> {
        Ok(self.core().project_denied(source, project).await?)
    }

    /// See [`Core::project_seen`].
    pub async fn project_seen(&self, source: &InstanceApi, project: &str) -> Result<(), super::PipelineError> {
        Ok(self.core().project_seen(source, project).await?)
    }

    /// See [`Core::refresh_denials`].
    pub async fn refresh_denials(&self, source: &InstanceApi) -> Result<(), super::PipelineError> {
        Ok(self.core().refresh_denials(source).await?)
    }
}
