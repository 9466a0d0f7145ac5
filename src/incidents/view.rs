//! What an incident's view is made of besides its condition: resources as people and `argocd` name them, links
//! into the Argo CD UI and to commits, each source with its revision, and the words (plurals, first sentences).

use crate::argocd::{ResourceStatus, ResultCode, Snapshot, SourceRef};
use crate::configuration::LinksSettings;
use crate::domain::incident::SourceRevision;
use crate::domain::link::safe_url;
use crate::domain::{Deployment, ImageChange, ResourceRef, SourceChange, SyncCounts};
use crate::state::{AppState, Release};

/// `1 resource`, `2 resources`.
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The first sentence of a message, at most `max` characters: up to the first `. ` or line end, else cut at a
/// clause (`, ` `: ` `; `) or a word, with an ellipsis. Argo CD's messages often run one clause into the next
/// (`one or more objects failed to apply, reason: …`): the first clause is what a title has room for.
pub fn first_sentence(message: &str, max: usize) -> String {
    let line = message
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim();
    let sentence = match line.find(". ") {
        Some(end) => &line[..end],
        None => line.trim_end_matches('.'),
    };
    if sentence.chars().count() <= max {
        return sentence.to_string();
    }
    let head: String = sentence.chars().take(max).collect();
    let clause = [", ", ": ", "; "]
        .iter()
        .filter_map(|sep| head.find(sep))
        .filter(|&at| at >= max / 4)
        .min();
    if let Some(at) = clause {
        return head[..at].to_string();
    }
    let words: String = sentence.chars().take(max - 1).collect();
    let cut = words.rfind(' ').filter(|&at| at >= max / 2).unwrap_or(words.len());
    format!("{}…", words[..cut].trim_end())
}

/// Messages without repeats: one that another already says whole is left out.
pub(super) fn once(messages: impl Iterator<Item = String>) -> Vec<String> {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let all: Vec<String> = messages.filter(|m| !m.trim().is_empty()).collect();
    let mut out: Vec<String> = Vec::new();
    for (k, m) in all.iter().enumerate() {
        let n = norm(m);
        let said_elsewhere = all
            .iter()
            .enumerate()
            .any(|(j, other)| j != k && norm(other).contains(&n) && (norm(other) != n || j < k));
        if !said_elsewhere {
            out.push(m.clone());
        }
    }
    out
}

/// A resource of `status.resources` as a reference (its sync status; callers set another status when it is
/// health they report).
pub(super) fn resource_ref(r: &ResourceStatus) -> ResourceRef {
    ResourceRef {
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
        status: r.status.to_string(),
        group: r.group.clone(),
        ..Default::default()
    }
}

/// The resource's node in the Argo CD UI: `…/applications/NS/APP?view=tree&resource=&node=GROUP/KIND/NS/NAME/0`,
/// as a safe link.
pub(super) fn resource_url(app_url: &str, r: &ResourceRef) -> Option<String> {
    let node = format!("{}/{}/{}/{}/0", r.group, r.kind, r.namespace, r.name);
    let node: String = url::form_urlencoded::byte_serialize(node.as_bytes()).collect();
    safe_url(&format!("{app_url}?view=tree&resource=&node={node}"))
}

/// Each source with the revision Argo CD synced (`from_operation`: the last operation's, for a failed sync or a
/// prune) or compares with (`status.sync`), in order. A multi-source Application leaves `revision` empty and
/// lists `revisions`, one per source: empty ones are left out.
pub(super) fn sources(s: &Snapshot, from_operation: bool) -> Vec<SourceRevision> {
    let op = s.operation.as_ref().filter(|_| from_operation);
    let revisions: Vec<String> = match op {
        Some(op) if !op.revisions.is_empty() => op.revisions.clone(),
        Some(op) => op.revision.iter().cloned().collect(),
        None => s.revisions.clone(),
    };
    s.sources
        .iter()
        .enumerate()
        .map(|(k, src)| source(src, revisions.get(k).filter(|r| !r.trim().is_empty())))
        .collect()
}

fn source(src: &SourceRef, revision: Option<&String>) -> SourceRevision {
    let non_empty = |o: &Option<String>| o.clone().filter(|v| !v.trim().is_empty());
    SourceRevision {
        repo_url: src.repo_url.clone(),
        path: non_empty(&src.path).filter(|p| p != "."),
        chart: non_empty(&src.chart),
        target_revision: non_empty(&src.target_revision),
        revision: revision.cloned(),
        // Linked by [`link_commits`], which knows the hosts trusted with links.
        commit_url: None,
    }
}

/// What the deployment before `state` changed ([`AppState::before`] against what runs now), with what its sync did
/// to the resources; `None` when Herald saw no deployment change anything.
pub(super) fn deployment(state: &AppState) -> Option<Deployment> {
    let before = &state.before.as_ref()?.release;
    let s = &state.snapshot;
    let now = Release::of(s);
    let (images, changed) = image_changes(&before.images, &now.images);
    let sources = s
        .sources
        .iter()
        .enumerate()
        .filter_map(|(k, src)| {
            let (from, to) = (before.revisions.get(k), now.revisions.get(k));
            // A revision unknown on either side is no change Herald can tell.
            let (from, to) = (
                from.filter(|r| !r.trim().is_empty())?,
                to.filter(|r| !r.trim().is_empty())?,
            );
            (from != to).then(|| SourceChange {
                repo_url: src.repo_url.clone(),
                chart: src.chart.clone().filter(|c| !c.trim().is_empty()),
                from: Some(from.clone()),
                to: Some(to.clone()),
                // Linked by [`link_commits`], which knows the hosts trusted with links.
                compare_url: None,
            })
        })
        .collect();
    let deployment = Deployment {
        more_images: changed.saturating_sub(images.len()),
        images,
        sources,
        resources: sync_counts(s),
    };
    (!deployment.images.is_empty() || !deployment.sources.is_empty()).then_some(deployment)
}

/// `ghcr.io/acme/api:1.1` as (`ghcr.io/acme/api`, `1.1`), `repo@sha256:…` as (`repo`, `@sha256:…`); an image with
/// neither (Kubernetes reads it as `:latest`) as itself and `None`. A registry's port (`host:5000/x`) is no tag.
fn split_image(image: &str) -> (&str, Option<&str>) {
    if let Some(at) = image.find('@') {
        return (&image[..at], Some(&image[at..]));
    }
    match image.rfind(':') {
        Some(colon) if !image[colon..].contains('/') => (&image[..colon], Some(&image[colon + 1..])),
        _ => (image, None),
    }
}

/// The images whose tag or digest changed from `before` to `now` (paired by name; new and removed ones too), the
/// first [`Deployment::MAX_IMAGES`] in `now`'s order then `before`'s, and how many changed in all.
fn image_changes(before: &[String], now: &[String]) -> (Vec<ImageChange>, usize) {
    let versions = |list: &[String]| -> Vec<(String, Option<String>)> {
        (list.iter())
            .map(|i| split_image(i))
            .map(|(n, v)| (n.to_string(), v.map(str::to_string)))
            .collect()
    };
    let (old, new) = (versions(before), versions(now));
    let versions_of = |list: &[(String, Option<String>)], name: &str| -> Vec<Option<String>> {
        (list.iter())
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    };
    let mut names: Vec<&String> = Vec::new();
    for (n, _) in new.iter().chain(old.iter()) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let mut out = Vec::new();
    for name in names {
        let (was, is) = (versions_of(&old, name), versions_of(&new, name));
        if was == is {
            continue;
        }
        // One version each side (the common case) is one change; otherwise each version that came or went.
        match (was.as_slice(), is.as_slice()) {
            ([from], [to]) => out.push(ImageChange {
                image: name.clone(),
                from: from.clone().or_else(|| Some("latest".into())),
                to: to.clone().or_else(|| Some("latest".into())),
            }),
            _ => {
                let tag = |v: &Option<String>| v.clone().or_else(|| Some("latest".into()));
                out.extend(is.iter().filter(|v| !was.contains(v)).map(|v| ImageChange {
                    image: name.clone(),
                    from: None,
                    to: tag(v),
                }));
                out.extend(was.iter().filter(|v| !is.contains(v)).map(|v| ImageChange {
                    image: name.clone(),
                    from: tag(v),
                    to: None,
                }));
            }
        }
    }
    let total = out.len();
    out.truncate(Deployment::MAX_IMAGES);
    (out, total)
}

/// What the last sync did to the resources, from its results: Argo CD's message is `KIND/NAME VERB` (kubectl's
/// words: `created`, `configured`, `unchanged`, `serverside-applied`, then perhaps a warning), a pruned one has the
/// status `Pruned`. A hook counts as what it did (a Job `created`): Argo CD marks every result with a phase, hooks
/// or not.
fn sync_counts(s: &Snapshot) -> SyncCounts {
    let mut counts = SyncCounts::default();
    let Some(op) = &s.operation else { return counts };
    for r in &op.resources {
        let mut words = r.message.split_whitespace();
        let (first, second) = (words.next(), words.next());
        let verb = second.or(first).unwrap_or_default().trim_end_matches(['.', ',', ';']);
        match (&r.status, verb) {
            (ResultCode::Pruned, _) => counts.pruned += 1,
            (ResultCode::Synced, "created") => counts.created += 1,
            (ResultCode::Synced, "configured") => counts.changed += 1,
            (ResultCode::Synced, "serverside-applied") => counts.applied += 1,
            _ => {}
        }
    }
    counts
}

/// Links each source's commit to its page, and each changed source to the comparison of its two commits, on the
/// hosts `links` trusts ([`commit_url`], [`compare_url`]).
pub fn link_commits(view: &mut crate::domain::Incident, links: &LinksSettings) {
    for src in &mut view.sources {
        src.commit_url = (src.revision.as_deref()).and_then(|r| commit_url(&src.repo_url, r, links));
    }
    for change in view.deployment.iter_mut().flat_map(|d| d.sources.iter_mut()) {
        change.compare_url = match (&change.from, &change.to, &change.chart) {
            (Some(from), Some(to), None) => compare_url(&change.repo_url, from, to, links),
            _ => None,
        };
    }
}

/// Whether `revision` is a commit hash (7 to 40 hex digits), not a branch, tag or chart version.
fn is_commit(revision: &str) -> bool {
    (7..=40).contains(&revision.len()) && revision.chars().all(|c| c.is_ascii_hexdigit())
}

/// The commit's page, when `revision` is a commit hash of a repository on a host `links` trusts (github.com,
/// gitlab.com, bitbucket.org and `links.git_hosts`: never a host that only looks like one, `gitlab.evil.example`)
/// and the page's URL is a safe link (a `repoURL` with a line break or markup in it gives none).
fn commit_url(repo_url: &str, revision: &str, links: &LinksSettings) -> Option<String> {
    if !is_commit(revision) {
        return None;
    }
    let (web, kind) = trusted_web(repo_url, links)?;
    safe_url(&kind.commit_page(&web, revision))
}

/// The page comparing commits `old` and `new`, on the same terms as [`commit_url`].
fn compare_url(repo_url: &str, old: &str, new: &str, links: &LinksSettings) -> Option<String> {
    if !is_commit(old) || !is_commit(new) {
        return None;
    }
    let (web, kind) = trusted_web(repo_url, links)?;
    safe_url(&kind.compare_page(&web, old, new))
}

/// The repository's web address and how its host shows commits, when the host is one `links` trusts.
fn trusted_web(repo_url: &str, links: &LinksSettings) -> Option<(String, crate::configuration::GitHostKind)> {
    // `git@github.com:org/repo.git` is `https://github.com/org/repo`.
    let web = match repo_url.strip_prefix("git@") {
        Some(rest) => format!("https://{}", rest.replacen(':', "/", 1)),
        None => repo_url.to_string(),
    };
    let web = web.trim_end_matches('/').trim_end_matches(".git");
    let parsed = url::Url::parse(web).ok()?;
    if !matches!(parsed.scheme(), "https" | "http") || !parsed.username().is_empty() || parsed.password().is_some() {
        return None;
    }
    let kind = links.git_host(parsed.host_str()?)?;
    Some((web.to_string(), kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sentences_fit_a_title() {
        let failed = "one or more objects failed to apply, reason: ServiceAccount \"jen-jenkins_helm_demo\" is \
                      invalid: metadata.name: Invalid value";
        assert_eq!(first_sentence(failed, 80), "one or more objects failed to apply");
        assert_eq!(first_sentence("Deadline exceeded. Retrying.", 80), "Deadline exceeded");
        let long = "word ".repeat(40);
        let cut = first_sentence(&long, 80);
        assert!(cut.chars().count() <= 80 && cut.ends_with('…'), "{cut}");
    }

    /// `commit_url` with the hosts every Herald trusts.
    fn commit_url(repo_url: &str, revision: &str) -> Option<String> {
        super::commit_url(repo_url, revision, &LinksSettings::default())
    }

    #[test]
    fn commits_link_to_github_and_gitlab_only() {
        let sha = "3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5";
        assert_eq!(
            commit_url("https://github.com/cdviz-dev/demo-cluster", sha).as_deref(),
            Some("https://github.com/cdviz-dev/demo-cluster/commit/3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5")
        );
        assert_eq!(
            commit_url("git@gitlab.com:acme/apps.git", sha).as_deref(),
            Some("https://gitlab.com/acme/apps/-/commit/3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5")
        );
        assert_eq!(commit_url("ghcr.io/stefanprodan/charts", "6.9.0"), None);
        assert_eq!(commit_url("https://github.com/acme/apps", "main"), None);
        assert_eq!(
            commit_url("https://bitbucket.org/acme/apps.git", sha).as_deref(),
            Some("https://bitbucket.org/acme/apps/commits/3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5")
        );
    }

    #[test]
    fn only_hosts_someone_trusts_get_commit_links() {
        let sha = "3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5";
        // Names that look like a Git service are anybody's: shown as text.
        for untrusted in [
            "https://gitlab.evil.example/acme/app",
            "https://evil.github.com/acme/app",
            "https://github.com.evil.example/acme/app",
            "https://git.acme.internal/acme/app",
            "https://user:pass@github.com/acme/app",
            "ftp://github.com/acme/app",
        ] {
            assert_eq!(commit_url(untrusted, sha), None, "{untrusted}");
        }
        let links: LinksSettings = serde_json::from_value(serde_json::json!({"git_hosts": [
            {"host": "git.acme.internal", "kind": "gitea"}, {"host": "GitLab.Acme.io", "kind": "gitlab"}
        ]}))
        .expect("links");
        assert_eq!(
            super::commit_url("https://git.acme.internal/acme/app.git", sha, &links).as_deref(),
            Some("https://git.acme.internal/acme/app/commit/3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5")
        );
        assert_eq!(
            super::commit_url("git@gitlab.acme.io:acme/app.git", sha, &links).as_deref(),
            Some("https://gitlab.acme.io/acme/app/-/commit/3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5")
        );
        assert_eq!(
            super::commit_url("https://gitlab.evil.example/acme/app", sha, &links),
            None
        );
    }

    #[test]
    fn a_repo_url_with_a_line_break_or_markup_gives_no_commit_link() {
        let sha = "3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5";
        for hostile in [
            "https://github.com/acme/apps\n<!channel>",
            "https://github.com/acme/apps\r\n[Fix-it-now](https://evil.example)",
            "git@github.com:acme/apps.git\n@here",
            "https://github.com/acme/apps <!channel>",
        ] {
            assert_eq!(commit_url(hostile, sha), None, "{hostile:?}");
        }
        assert_eq!(
            commit_url("https://github.com/acme/a)pps", sha).as_deref(),
            Some("https://github.com/acme/a%29pps/commit/3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5")
        );
    }

    #[test]
    fn a_comparison_links_on_each_kind_of_trusted_host_and_never_elsewhere() {
        let (old, new) = (
            "9b2f1c0d7e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c",
            "3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5",
        );
        let links: LinksSettings = serde_json::from_value(serde_json::json!({"git_hosts": [
            {"host": "git.acme.internal", "kind": "gitea"}, {"host": "gitlab.acme.io", "kind": "gitlab"},
            {"host": "ghe.acme.io", "kind": "github"}, {"host": "bb.acme.io", "kind": "bitbucket"}
        ]}))
        .expect("links");
        let cases = [
            (
                "https://github.com/acme/apps.git",
                format!("https://github.com/acme/apps/compare/{old}...{new}"),
            ),
            (
                "git@gitlab.com:acme/apps.git",
                format!("https://gitlab.com/acme/apps/-/compare/{old}...{new}"),
            ),
            (
                "https://bitbucket.org/acme/apps",
                format!("https://bitbucket.org/acme/apps/branches/compare/{new}%0D{old}#diff"),
            ),
            (
                "https://git.acme.internal/acme/apps",
                format!("https://git.acme.internal/acme/apps/compare/{old}...{new}"),
            ),
            (
                "https://gitlab.acme.io/acme/apps",
                format!("https://gitlab.acme.io/acme/apps/-/compare/{old}...{new}"),
            ),
            (
                "https://ghe.acme.io/acme/apps",
                format!("https://ghe.acme.io/acme/apps/compare/{old}...{new}"),
            ),
            (
                "https://bb.acme.io/acme/apps",
                format!("https://bb.acme.io/acme/apps/branches/compare/{new}%0D{old}#diff"),
            ),
        ];
        for (repo, page) in cases {
            assert_eq!(
                compare_url(repo, old, new, &links).as_deref(),
                Some(page.as_str()),
                "{repo}"
            );
        }
        // Untrusted hosts, hostile URLs and what is no commit: no link.
        for repo in [
            "https://gitlab.evil.example/acme/app",
            "https://github.com.evil.example/acme/app",
            "https://user:pass@github.com/acme/app",
            "https://github.com/acme/apps\n<!channel>",
        ] {
            assert_eq!(compare_url(repo, old, new, &links), None, "{repo:?}");
        }
        assert_eq!(compare_url("https://github.com/acme/apps", "main", new, &links), None);
        assert_eq!(compare_url("https://github.com/acme/apps", old, "6.9.2", &links), None);
    }

    #[test]
    fn link_commits_links_a_changed_git_source_on_a_trusted_host_only() {
        let change = |repo: &str, chart: Option<&str>| SourceChange {
            repo_url: repo.into(),
            chart: chart.map(str::to_string),
            from: Some("9b2f1c0d7e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c".into()),
            to: Some("3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5".into()),
            compare_url: None,
        };
        let mut view = crate::domain::Incident {
            deployment: Some(Deployment {
                sources: vec![
                    change("https://github.com/acme/apps", None),
                    change("https://gitlab.evil.example/acme/app", None),
                    change("https://github.com/acme/charts", Some("api")),
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        link_commits(&mut view, &LinksSettings::default());
        let urls: Vec<Option<&str>> = (view.deployment.as_ref().expect("deployment").sources.iter())
            .map(|c| c.compare_url.as_deref())
            .collect();
        assert_eq!(
            urls,
            [
                Some(
                    "https://github.com/acme/apps/compare/9b2f1c0d7e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c...\
                     3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5"
                ),
                None,
                None
            ]
        );
    }

    #[test]
    fn images_are_paired_by_name_and_only_changed_ones_listed() {
        let list = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (changes, total) = image_changes(
            &list(&[
                "ghcr.io/acme/api:1.0",
                "ghcr.io/acme/worker:2.0",
                "localhost:5000/tools:3",
                "ghcr.io/acme/old:1",
                "redis@sha256:aaa",
            ]),
            &list(&[
                "ghcr.io/acme/api:1.1",
                "ghcr.io/acme/worker:2.0",
                "localhost:5000/tools:4",
                "ghcr.io/acme/new:1",
                "redis@sha256:bbb",
            ]),
        );
        let words: Vec<String> = changes.iter().map(ImageChange::describe).collect();
        assert_eq!(
            words,
            [
                "ghcr.io/acme/api:1.0 → 1.1",
                "localhost:5000/tools:3 → 4",
                "ghcr.io/acme/new:1 (new)",
                "redis@sha256:aaa → sha256:bbb",
                "ghcr.io/acme/old:1 (removed)",
            ]
        );
        assert_eq!(total, 5);
        let many_before: Vec<String> = (0..30).map(|k| format!("r/app{k}:1")).collect();
        let many_after: Vec<String> = (0..30).map(|k| format!("r/app{k}:2")).collect();
        let (kept, total) = image_changes(&many_before, &many_after);
        assert_eq!((kept.len(), total), (Deployment::MAX_IMAGES, 30));
    }

    #[test]
    fn a_sync_is_counted_by_its_results_words() {
        // Fixture 05 (a piece of an Application: given a name here): two resources pruned, three `configured.`
        // followed by kubectl's warning.
        let body = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/argocd/objects/05-api-app-sync-succeeded-with-pruned-resources.json"
        ))
        .expect("fixture 05");
        let mut app: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        app["metadata"] = serde_json::json!({"name": "aladin-prod", "namespace": "argocd"});
        let mut snap = crate::argocd::from_value(&app).expect("a valid Application");
        let counts = sync_counts(&snap);
        assert_eq!(
            (counts.created, counts.changed, counts.applied, counts.pruned),
            (0, 3, 0, 2)
        );
        assert_eq!(counts.describe(), "3 changed, 2 pruned");
        // Derived: kubectl's words for a created, an unchanged and a server-side applied resource, a failed one.
        let result = |message: &str, status: ResultCode| crate::argocd::ResultResource {
            kind: "ConfigMap".into(),
            name: "c".into(),
            status,
            message: message.into(),
            ..Default::default()
        };
        snap.operation.as_mut().expect("an operation").resources = vec![
            result("configmap/c created", ResultCode::Synced),
            result("service/api unchanged", ResultCode::Synced),
            result("deployment.apps/web serverside-applied", ResultCode::Synced),
            result("ServiceAccount \"x_y\" is invalid", ResultCode::SyncFailed),
            result("ignored (requires pruning)", ResultCode::PruneSkipped),
        ];
        let counts = sync_counts(&snap);
        assert_eq!(
            (counts.created, counts.changed, counts.applied, counts.pruned),
            (1, 0, 1, 0)
        );
        assert_eq!(counts.describe(), "1 created, 1 applied");
    }

    #[test]
    fn a_message_repeated_inside_another_is_said_once() {
        let op = "one or more objects failed to apply";
        let condition = format!("SyncError: Failed sync attempt to 0.1.0: {op} (retried 5 times).");
        assert_eq!(once([op.to_string(), condition.clone()].into_iter()), vec![condition]);
        assert_eq!(
            once(["a".to_string(), "a".to_string()].into_iter()),
            vec!["a".to_string()]
        );
    }
}
