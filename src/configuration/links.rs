//! `links`: which Git hosts Herald links commits on. A `repoURL` is Argo CD's copy of what anybody with write access
//! to an Application wrote; a commit link on an unlisted host would put that person's URL in every message.

use serde::Deserialize;

use super::{ConfigError, invalid};

/// How a Git host shows a commit (`/commit/SHA` on GitHub, `/-/commit/SHA` on GitLab…).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GitHostKind {
    Github,
    Gitlab,
    Bitbucket,
    Gitea,
}

impl GitHostKind {
    /// The page of `revision` in the repository whose web address is `web` (no trailing slash, no `.git`).
    pub fn commit_page(self, web: &str, revision: &str) -> String {
        match self {
            GitHostKind::Github | GitHostKind::Gitea => format!("{web}/commit/{revision}"),
            GitHostKind::Gitlab => format!("{web}/-/commit/{revision}"),
            GitHostKind::Bitbucket => format!("{web}/commits/{revision}"),
        }
    }

    /// The page comparing commit `old` with `new` (what `new` adds) in the repository whose web address is `web`.
    /// Bitbucket Cloud names the newer first, the two separated by a carriage return (`%0D`), and shows the diff
    /// under `#diff`.
    pub fn compare_page(self, web: &str, old: &str, new: &str) -> String {
        match self {
            GitHostKind::Github | GitHostKind::Gitea => format!("{web}/compare/{old}...{new}"),
            GitHostKind::Gitlab => format!("{web}/-/compare/{old}...{new}"),
            GitHostKind::Bitbucket => format!("{web}/branches/compare/{new}%0D{old}#diff"),
        }
    }
}

/// One host an operator trusts with commit links (a GitHub Enterprise, a self-hosted GitLab or Gitea).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitHost {
    pub host: String,
    pub kind: GitHostKind,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinksSettings {
    /// Hosts besides github.com, gitlab.com and bitbucket.org whose commits get links; any other host's revision is
    /// shown as text.
    pub git_hosts: Vec<GitHost>,
}

/// The hosts every Herald trusts: the public services themselves.
const BUILT_IN: [(&str, GitHostKind); 3] = [
    ("github.com", GitHostKind::Github),
    ("gitlab.com", GitHostKind::Gitlab),
    ("bitbucket.org", GitHostKind::Bitbucket),
];

impl LinksSettings {
    /// How `host` (exactly, lower case) shows commits, if it is trusted.
    pub fn git_host(&self, host: &str) -> Option<GitHostKind> {
        let host = host.to_ascii_lowercase();
        (BUILT_IN.iter())
            .find(|(h, _)| *h == host)
            .map(|(_, k)| *k)
            .or_else(|| {
                self.git_hosts
                    .iter()
                    .find(|g| g.host.eq_ignore_ascii_case(&host))
                    .map(|g| g.kind)
            })
    }

    pub(super) fn validate(&self, errors: &mut Vec<ConfigError>) {
        for (i, g) in self.git_hosts.iter().enumerate() {
            let plain = !g.host.is_empty()
                && g.host.len() <= 253
                && (g.host.chars()).all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                && url::Url::parse(&format!("https://{}/", g.host))
                    .is_ok_and(|u| u.host_str() == Some(&*g.host.to_ascii_lowercase()));
            if !plain {
                errors.push(invalid(
                    format!("links.git_hosts[{i}].host"),
                    "a host name only (git.example.com): no scheme, port, path or user",
                ));
            }
        }
    }
}
