//! What an incident's view is made of besides its condition: resources as people and `argocd` name them, links
//! into the Argo CD UI and to commits, each source with its revision, and the words (plurals, first sentences).

use crate::argocd::{ResourceStatus, Snapshot, SourceRef};
use crate::configuration::LinksSettings;
use crate::domain::ResourceRef;
use crate::domain::incident::SourceRevision;
use crate::domain::link::safe_url;

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

/// Links each source's commit to its page, on the hosts `links` trusts ([`commit_url`]).
pub fn link_commits(view: &mut crate::domain::Incident, links: &LinksSettings) {
    for src in &mut view.sources {
        src.commit_url = (src.revision.as_deref()).and_then(|r| commit_url(&src.repo_url, r, links));
    }
}

/// The commit's page, when `revision` is a commit hash of a repository on a host `links` trusts (github.com,
/// gitlab.com, bitbucket.org and `links.git_hosts`: never a host that only looks like one, `gitlab.evil.example`)
/// and the page's URL is a safe link (a `repoURL` with a line break or markup in it gives none).
fn commit_url(repo_url: &str, revision: &str, links: &LinksSettings) -> Option<String> {
    let is_commit = (7..=40).contains(&revision.len()) && revision.chars().all(|c| c.is_ascii_hexdigit());
    if !is_commit {
        return None;
    }
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
    safe_url(&kind.commit_page(web, revision))
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
