//! Which syncs are told as commit statuses: each state of a sync operation (Argo CD's phase `Running` → `pending`,
//! `Succeeded` → `success`, `Failed` → `failure`, `Error` → `error`) of an Application whose source repository is
//! on GitHub goes to the `github_status` receivers that serve that host and hear of the Application (the change
//! events' rule, [`change::receivers_hearing_of`]), once per (Application, commit, operation, state). Pure: the
//! stored state and the new one in, notifications out (the pipeline also skips a status whose thread is already
//! in the outbox: a replayed body, a restart, a second replica).

use chrono::{DateTime, Utc};

use super::change;
use crate::argocd::{OperationPhase, Snapshot};
use crate::configuration::Settings;
use crate::domain::{Action, Body, CommitState, CommitStatus, Notification, Thread};
use crate::routing::owning_team;
use crate::state::AppState;

/// A repository on a GitHub host, as a `repoURL` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubRepo {
    /// Lower case: `github.com`, `ghe.example`.
    pub host: String,
    /// `owner/name`, without `.git`.
    pub repo: String,
}

/// The repository `repo_url` names, in the forms Argo CD takes: `https://github.com/acme/apps(.git)`,
/// `git@github.com:acme/apps.git`, `ssh://git@github.com/acme/apps.git`. `None` for anything else (a Helm
/// repository, a path that is not `owner/name`, a name with characters GitHub does not allow).
pub fn github_repo(repo_url: &str) -> Option<GithubRepo> {
    let url = repo_url.trim();
    let (host, path) = if let Some(rest) = url.strip_prefix("git@") {
        rest.split_once(':')?
    } else {
        let rest = ["https://", "http://", "ssh://"]
            .iter()
            .find_map(|scheme| url.strip_prefix(scheme))?;
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit('@').next()?;
        (host.split(':').next()?, path)
    };
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let (owner, name) = path.split_once('/')?;
    let allowed = |s: &str| {
        !s.is_empty() && s != "." && s != ".." && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if host.is_empty() || !allowed(owner) || !allowed(name) {
        return None;
    }
    Some(GithubRepo {
        host: host.to_ascii_lowercase(),
        repo: format!("{owner}/{name}"),
    })
}

/// A full commit hash (40 hex digits): GitHub takes a status for nothing else, and a branch name would move.
fn is_full_sha(revision: &str) -> bool {
    revision.len() == 40 && revision.chars().all(|c| c.is_ascii_hexdigit())
}

/// The commit status an operation in `phase` is; `None` while it terminates (its end says how it went).
fn state_of(phase: &OperationPhase) -> Option<CommitState> {
    match phase {
        OperationPhase::Running => Some(CommitState::Pending),
        OperationPhase::Succeeded => Some(CommitState::Success),
        OperationPhase::Failed => Some(CommitState::Failure),
        OperationPhase::Error => Some(CommitState::Error),
        _ => None,
    }
}

/// The state `next`'s sync operation is in, if it is news after `prev`: not the state `prev` already had for
/// the same operation, not an operation that started before `prev`'s (a late body), and not `Running` again for
/// an operation `prev` saw finished.
fn new_state(prev: &AppState, next: &AppState) -> Option<CommitState> {
    let op = next.snapshot.operation.as_ref()?;
    let state = state_of(&op.phase)?;
    let Some(before) = prev.snapshot.operation.as_ref() else {
        return Some(state);
    };
    match (before.started_at, op.started_at) {
        (Some(b), Some(n)) if n < b => return None,
        (b, n) if b == n => {
            let was = state_of(&before.phase);
            if was == Some(state) || (state == CommitState::Pending && was.is_some()) {
                return None;
            }
        }
        _ => {}
    }
    Some(state)
}

/// The (repository, commit) pairs the sync is of: each GitHub source with its synced revision (a multi-source
/// Application's `revisions` in the order of its sources). A GitHub source whose revision is not a full commit
/// hash gets no status, said in a debug log.
fn commits(s: &Snapshot) -> Vec<(GithubRepo, String)> {
    let Some(op) = s.operation.as_ref() else {
        return Vec::new();
    };
    let revisions: Vec<&String> = match &op.revision {
        Some(r) if op.revisions.is_empty() => vec![r],
        _ => op.revisions.iter().collect(),
    };
    let mut out: Vec<(GithubRepo, String)> = Vec::new();
    for (source, revision) in s.sources.iter().zip(revisions) {
        let Some(repo) = github_repo(&source.repo_url) else {
            continue;
        };
        if !is_full_sha(revision) {
            tracing::debug!(
                app = %s.app,
                repo = %repo.repo,
                revision = %revision,
                "no commit status: the sync's revision is not a full commit hash (a branch, a tag or a short hash)"
            );
            continue;
        }
        let commit = (repo, revision.to_ascii_lowercase());
        if !out.contains(&commit) {
            out.push(commit);
        }
    }
    out
}

/// The notification that tells `receiver` of `status`, in its thread: the sync of `s` started at `started`.
fn commit_status_notification(
    receiver: &str,
    s: &Snapshot,
    started: Option<DateTime<Utc>>,
    status: CommitStatus,
    now: DateTime<Utc>,
) -> (Thread, Notification) {
    let state = status.state;
    let thread = Thread::CommitStatus {
        receiver: receiver.to_string(),
        app: s.app.clone(),
        sha: status.sha.clone(),
        started,
        state,
    };
    let title = format!("{}: {} on {}", status.context(), state.as_str(), status.repo);
    let n = Notification::about(
        &thread,
        Action::Open,
        title,
        format!("sync {}", state.as_str()),
        Body::CommitStatus(Box::new(status)),
        now,
    );
    (thread, n)
}

/// Where a commit status links to: the Application's page on Herald (with `server.public_url`), else in Argo CD.
fn target_url(settings: &Settings, s: &Snapshot) -> Option<String> {
    let herald_page = (settings.server.public_url.as_deref())
        .and_then(|base| crate::domain::link::herald_app_page(base, &s.app.instance, &s.app.namespace, &s.app.name));
    herald_page.or_else(|| crate::argocd::app_url(settings.argocd.ui_url(&s.app.instance), s))
}

/// One notification per commit-status receiver that hears of the Application and serves its repository's host,
/// per GitHub commit the sync is of, in the thread of (instance, Application, commit, operation, state): the
/// outbox keeps one of each, whatever replays the body.
pub fn notifications(
    settings: &Settings,
    prev: &AppState,
    next: &AppState,
    now: DateTime<Utc>,
) -> Vec<(Thread, Notification)> {
    let team = owning_team(&next.snapshot, &settings.ownership);
    let receivers = change::receivers_hearing_of(settings, &team, |r| r.capabilities().commit_statuses);
    if receivers.is_empty() {
        return Vec::new();
    }
    let Some(state) = new_state(prev, next) else {
        return Vec::new();
    };
    let s = &next.snapshot;
    let Some(op) = s.operation.as_ref() else {
        return Vec::new();
    };
    let initiator = match (&op.initiator.username, op.initiator.automated) {
        (Some(user), _) => user.clone(),
        (None, true) => "automated".into(),
        (None, false) => "unknown".into(),
    };
    let target_url = target_url(settings, s);
    let mut out = Vec::new();
    for (repo, sha) in commits(s) {
        for r in &receivers {
            if r.kind.commit_status_host().as_deref() != Some(repo.host.as_str()) {
                continue;
            }
            let status = CommitStatus {
                instance: s.app.instance.clone(),
                app_namespace: s.app.namespace.clone(),
                app_name: s.app.name.clone(),
                host: repo.host.clone(),
                repo: repo.repo.clone(),
                sha: sha.clone(),
                state,
                message: op.message.clone(),
                initiator: initiator.clone(),
                target_url: target_url.clone(),
            };
            let (thread, n) = commit_status_notification(&r.name, s, op.started_at, status, now);
            out.push((thread, n));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argocd::parse_body;
    use crate::state::{Outcome, apply};

    const SHA: &str = "4c3d2b1a0f9e8d7c6b5a4c3d2b1a0f9e8d7c6b5a";
    const OLD: &str = "1111111111111111111111111111111111111111";

    /// `payments` from `repo` with an operation in `phase` of `revision` that started at `started` (minutes past 10:00).
    fn state(repo: &str, phase: &str, revision: &str, started: u32) -> AppState {
        let body = serde_json::json!({
            "metadata": {"name": "payments", "namespace": "argocd"},
            "spec": {"project": "shop", "source": {"repoURL": repo, "targetRevision": "main"},
                     "destination": {"namespace": "pay"}},
            "status": {"sync": {"status": "Synced"}, "health": {"status": "Healthy"},
                "operationState": {"phase": phase, "message": "successfully synced (all tasks run)",
                    "startedAt": format!("2025-01-01T10:{started:02}:00Z"),
                    "operation": {"initiatedBy": {"username": "alice"}, "sync": {"revision": revision}}}}
        });
        let snap = parse_body(body.to_string().as_bytes(), 64).expect("valid body");
        match apply(None, snap, Utc::now()) {
            Outcome::Changed { state, .. } => *state,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn settings(extra: &str) -> Settings {
        Settings::from_yaml(&format!(
            "argocd: {{url: 'https://cd.example.com'}}\nreceivers: [{{name: gh, github_status: {{token: t}}}}, \
             {{name: ghe, github_status: {{token: t, api_url: 'https://ghe.example/api/v3'}}}}, \
             {{name: pd, pagerduty: {{routing_key: k, change_events: true}}}}]\n{extra}"
        ))
        .expect("valid")
    }

    /// (receiver, state, repo, sha) of each notification, after checking each is in the thread it names.
    fn told(settings: &Settings, prev: &AppState, next: &AppState) -> Vec<(String, CommitState, String, String)> {
        (notifications(settings, prev, next, Utc::now()).into_iter())
            .map(|(thread, n)| {
                assert_eq!(
                    (thread.receiver(), thread.key()),
                    (n.receiver.as_str(), n.thread_key.clone())
                );
                let s = n.commit_status().cloned().expect("a commit status");
                (n.receiver, s.state, s.repo, s.sha)
            })
            .collect()
    }

    const REPO: &str = "https://github.com/acme/apps.git";

    #[test]
    fn a_sync_running_then_succeeded_is_pending_then_success_once_each() {
        let s = settings("");
        let idle = state(REPO, "Succeeded", OLD, 0);
        let running = state(REPO, "Running", SHA, 5);
        let done = state(REPO, "Succeeded", SHA, 5);

        assert_eq!(
            told(&s, &idle, &running),
            [("gh".into(), CommitState::Pending, "acme/apps".into(), SHA.into())]
        );
        assert_eq!(
            told(&s, &running, &done),
            [("gh".into(), CommitState::Success, "acme/apps".into(), SHA.into())]
        );
        assert!(told(&s, &done, &done).is_empty(), "the same state again");
        assert!(
            told(&s, &done, &running).is_empty(),
            "a finished sync does not run again"
        );
        assert!(
            told(&s, &state(REPO, "Running", OLD, 30), &running).is_empty(),
            "an operation older than the stored one is a late body"
        );
    }

    #[test]
    fn failed_and_error_phases_are_failure_and_error_and_terminating_is_nothing() {
        let s = settings("");
        let running = state(REPO, "Running", SHA, 5);
        let states: Vec<Vec<CommitState>> = ["Failed", "Error", "Terminating"]
            .iter()
            .map(|phase| {
                told(&s, &running, &state(REPO, phase, SHA, 5))
                    .into_iter()
                    .map(|t| t.1)
                    .collect()
            })
            .collect();
        assert_eq!(states, [vec![CommitState::Failure], vec![CommitState::Error], vec![]]);
    }

    #[test]
    fn only_full_commit_hashes_of_repositories_on_a_configured_github_host_get_a_status() {
        let s = settings("");
        let idle = state(REPO, "Succeeded", OLD, 0);
        let on = |repo: &str, revision: &str| told(&s, &idle, &state(repo, "Running", revision, 5));
        assert!(on("https://gitlab.com/acme/apps.git", SHA).is_empty(), "not GitHub");
        assert!(on("https://charts.example.com", SHA).is_empty(), "a Helm repository");
        assert!(on(REPO, "main").is_empty(), "a branch");
        assert!(on(REPO, "4c3d2b1").is_empty(), "a short hash");
        assert_eq!(on("git@github.com:acme/apps.git", SHA)[0].0, "gh");
        assert_eq!(
            on("https://ghe.example/platform/deploy", SHA),
            [("ghe".into(), CommitState::Pending, "platform/deploy".into(), SHA.into())],
            "a GitHub Enterprise repository goes to the receiver of that host only"
        );
    }

    #[test]
    fn a_team_s_status_receiver_hears_of_its_own_applications_only_and_a_central_one_of_all() {
        let s = Settings::from_yaml(
            "ownership: {projects: {shop: payments}}\n\
             teams: {payments: {receivers: [gh-pay]}, search: {receivers: [gh-search]}}\n\
             receivers: [{name: gh-pay, github_status: {token: t}}, {name: gh-search, github_status: {token: t}},\
             {name: gh-central, github_status: {token: t}}]",
        )
        .expect("valid");
        let receivers: Vec<String> = told(&s, &state(REPO, "Succeeded", OLD, 0), &state(REPO, "Running", SHA, 5))
            .into_iter()
            .map(|t| t.0)
            .collect();
        assert_eq!(receivers, ["gh-pay", "gh-central"]);
    }

    #[test]
    fn the_target_is_the_applications_page_on_herald_else_in_argo_cd() {
        let idle = state(REPO, "Succeeded", OLD, 0);
        let running = state(REPO, "Running", SHA, 5);
        let target = |s: &Settings| {
            let out = notifications(s, &idle, &running, Utc::now());
            out[0].1.commit_status().and_then(|c| c.target_url.clone())
        };
        assert_eq!(
            target(&settings("")).as_deref(),
            Some("https://cd.example.com/applications/argocd/payments")
        );
        assert_eq!(
            target(&settings("server: {public_url: 'https://herald.example.com'}")).as_deref(),
            Some("https://herald.example.com/apps/argocd/payments")
        );
    }

    #[test]
    fn repository_urls_are_read_in_every_form_argo_cd_takes() {
        let repo = |u: &str| github_repo(u).map(|r| format!("{} {}", r.host, r.repo));
        assert_eq!(
            repo("https://github.com/acme/apps").as_deref(),
            Some("github.com acme/apps")
        );
        assert_eq!(
            repo("https://GitHub.com/acme/apps.git/").as_deref(),
            Some("github.com acme/apps")
        );
        assert_eq!(
            repo("git@github.com:acme/apps.git").as_deref(),
            Some("github.com acme/apps")
        );
        assert_eq!(
            repo("ssh://git@github.com:22/acme/apps.git").as_deref(),
            Some("github.com acme/apps")
        );
        assert_eq!(
            repo("https://ghe.example/platform/deploy").as_deref(),
            Some("ghe.example platform/deploy")
        );
        assert_eq!(repo("https://github.com/acme"), None);
        assert_eq!(repo("https://github.com/acme/apps/tree/main"), None);
        assert_eq!(repo("https://github.com/acme/../x"), None);
        assert_eq!(repo("oci://ghcr.io/acme/charts"), None);
    }
}
