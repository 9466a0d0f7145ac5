//! The links Herald puts in messages (an Application's page in Argo CD or on Herald, a resource in it, a commit): each is an
//! absolute http(s) URL parsed with the `url` crate and written back from the parse, so a link is never text a
//! sender chose. Anything else (another scheme, credentials, a line break, a relative path) is no link at all.

use std::borrow::Cow;

use url::{Position, Url};

use super::{Body, Notification};

/// A longer URL is no link: none Herald makes comes near it, and chat targets cut long ones.
pub const MAX_URL_BYTES: usize = 2048;

/// Characters that are markup somewhere when a link is written into a message (`)` ends a Markdown link, `|` a
/// Slack or Jira one, `]` a Jira one, `!` starts a Jira image, `@` a mention, `*` emphasis…): percent-encoded in
/// the path, query and fragment, where the `url` crate leaves them as they came. Servers read both the same.
const MARKUP: &[char] = &[
    '(', ')', '[', ']', '{', '}', '|', '!', '*', '\\', '`', '^', '\'', '@', '<', '>', '"', ' ',
];

/// `raw` as a link Herald may emit: parsed as an absolute `http`/`https` URL with a host and no credentials, no
/// control character or white space inside, at most [`MAX_URL_BYTES`], and re-serialised from the parse with
/// [`MARKUP`] percent-encoded. `None` for anything else.
pub fn safe_url(raw: &str) -> Option<String> {
    let raw = raw.trim_matches(' ');
    if raw.len() > MAX_URL_BYTES || raw.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return None;
    }
    let url = Url::parse(raw).ok()?;
    let web = matches!(url.scheme(), "http" | "https");
    if !web || url.host_str().is_none_or(str::is_empty) || !url.username().is_empty() || url.password().is_some() {
        return None;
    }
    let mut out = url[..Position::BeforePath].to_string();
    for c in url[Position::BeforePath..].chars() {
        if MARKUP.contains(&c) {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    (out.len() <= MAX_URL_BYTES).then_some(out)
}

/// Whether `url` is a link Herald may emit as it is: [`safe_url`] gives it back unchanged. Renderers check every
/// link with it, so one stored before links were checked is shown as no link.
pub fn is_safe(url: &str) -> bool {
    safe_url(url).as_deref() == Some(url)
}

/// `base` (an Argo CD UI URL, possibly under a path) with `segments` appended, each percent-encoded as one path
/// segment; `None` when `base` is no safe link, or a segment is `.` or `..` (which no URL can hold as a name).
pub fn join(base: &str, segments: &[&str]) -> Option<String> {
    if segments.iter().any(|s| matches!(*s, "." | "..")) {
        return None;
    }
    let mut url = Url::parse(&safe_url(base)?).ok()?;
    url.set_query(None);
    url.set_fragment(None);
    url.path_segments_mut().ok()?.pop_if_empty().extend(segments);
    safe_url(url.as_str())
}

/// The Application's page in the Argo CD UI at `base`: `{base}/applications/{namespace}/{name}`.
pub fn app_page(base: &str, namespace: &str, name: &str) -> Option<String> {
    join(base, &["applications", namespace, name])
}

/// Herald's status page at `public_url` (`server.public_url`), filtered to `team` when there is one:
/// `https://herald.example.com/?team=payments`, where a list cut short in a message is seen whole. `None` when
/// `public_url` is no safe link.
pub fn status_page(public_url: &str, team: Option<&str>) -> Option<String> {
    let mut url = Url::parse(&safe_url(public_url)?).ok()?;
    url.set_fragment(None);
    url.set_query(None);
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    if let Some(team) = team {
        url.query_pairs_mut().append_pair("team", team);
    }
    safe_url(url.as_str())
}

/// An Application's page on Herald at `public_url` (`server.public_url`): `{public_url}/apps/{namespace}/{name}`,
/// or `…/apps/{instance}/{namespace}/{name}` outside the default instance; `None` when `public_url` is no safe link.
pub fn herald_app_page(public_url: &str, instance: &str, namespace: &str, name: &str) -> Option<String> {
    let mut segments = vec!["apps"];
    if !super::is_default_instance(instance) {
        segments.push(instance);
    }
    segments.extend([namespace, name]);
    join(public_url, &segments)
}

/// Every link a notification carries: each Application's page, its resources' nodes, its sources' commits, a
/// change's page, a commit status's target, a digest's Applications, the status page a cut list links to.
fn links(n: &Notification) -> impl Iterator<Item = &String> {
    let incidents = n.incidents().iter().flat_map(|i| {
        let resources = i.resources.iter().filter_map(|r| r.url.as_ref());
        let commits = i.sources.iter().filter_map(|s| s.commit_url.as_ref());
        let actions = i.actions.iter().map(|a| &a.url);
        i.app_url.iter().chain(resources).chain(commits).chain(actions)
    });
    let change = n.change().into_iter().filter_map(|c| c.app_url.as_ref());
    let status = n.commit_status().into_iter().filter_map(|c| c.target_url.as_ref());
    let digest = n.digest().into_iter().flat_map(|d| {
        let apps = d.out_of_sync.iter().filter_map(|a| a.url.as_ref());
        apps.chain(d.status_url.iter())
    });
    (incidents.chain(change).chain(status))
        .chain(digest)
        .chain(n.status_url.iter())
}

/// `n` as receivers may render it: any link that is not [`is_safe`] (one stored before links were checked, or
/// made by code that forgot to) is removed, leaving the text without a link. Borrowed when all are safe.
pub fn checked(n: &Notification) -> Cow<'_, Notification> {
    if links(n).all(|u| is_safe(u)) {
        return Cow::Borrowed(n);
    }
    let mut n = n.clone();
    let keep = |u: &mut Option<String>| {
        if u.as_deref().is_some_and(|v| !is_safe(v)) {
            *u = None;
        }
    };
    match &mut n.body {
        Body::Incidents(incidents) => {
            for i in incidents {
                keep(&mut i.app_url);
                i.resources.iter_mut().for_each(|r| keep(&mut r.url));
                i.sources.iter_mut().for_each(|s| keep(&mut s.commit_url));
                i.actions.retain(|a| is_safe(&a.url));
            }
        }
        Body::Change(c) => keep(&mut c.app_url),
        Body::CommitStatus(c) => keep(&mut c.target_url),
        Body::Digest(d) => {
            d.out_of_sync.iter_mut().for_each(|a| keep(&mut a.url));
            keep(&mut d.status_url);
        }
    }
    keep(&mut n.status_url);
    Cow::Owned(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_or_malformed_urls_are_no_link() {
        for raw in [
            "",
            "argocd.example.com",
            "/applications/argocd/pay",
            "javascript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "file:///etc/passwd",
            "ftp://argocd.example.com/",
            "mailto:ops@example.com",
            "https://",
            "https://argocd.example.com\n<!channel>",
            "https://argocd.example.com\r\n@here",
            "https://argocd.example.com/\n[Fix-it-now](https://evil.example)",
            "https://argocd.example.com/\n!https://evil.example/x.png!",
            "https://argocd.example.com/\nh1. Owned",
            "https://argocd.example.com/\u{2028}@here",
            "https://argocd.example.com/\tx",
            "https://argocd.example.com/ <!channel>",
            "https://argocd.example.com/\u{1b}[31m",
            "https://user:pass@argocd.example.com/",
            "https://argocd.example.com@evil.example/",
            "https://exa mple.com/",
            "https://<!channel>/",
        ] {
            assert_eq!(safe_url(raw), None, "{raw:?}");
        }
        assert_eq!(
            safe_url(&format!("https://a.example/{}", "x".repeat(MAX_URL_BYTES))),
            None
        );
    }

    #[test]
    fn a_web_url_is_written_back_from_its_parse_with_markup_characters_encoded() {
        for (raw, safe) in [
            ("https://argocd.example.com", "https://argocd.example.com/"),
            (
                "http://ArgoCD.Example.com:8080/ui/",
                "http://argocd.example.com:8080/ui/",
            ),
            ("https://argocd.example.com ", "https://argocd.example.com/"),
            (
                "https://argocd.example.com/a)[b](https://evil.example)",
                "https://argocd.example.com/a%29%5Bb%5D%28https://evil.example%29",
            ),
            (
                "https://argocd.example.com/!x.png!|y]",
                "https://argocd.example.com/%21x.png%21%7Cy%5D",
            ),
            (
                "https://argocd.example.com/@here?q=<!channel>",
                "https://argocd.example.com/%40here?q=%3C%21channel%3E",
            ),
            (
                "https://argocd.example.com/a#<b>",
                "https://argocd.example.com/a#%3Cb%3E",
            ),
            ("https://bücher.example/ü", "https://xn--bcher-kva.example/%C3%BC"),
        ] {
            assert_eq!(safe_url(raw).as_deref(), Some(safe), "{raw:?}");
            assert!(is_safe(safe), "{safe:?} is its own serialisation");
        }
        assert!(
            !is_safe("https://argocd.example.com"),
            "not the serialisation: the slash is missing"
        );
    }

    #[test]
    fn an_applications_page_is_its_base_with_escaped_path_segments() {
        assert_eq!(
            app_page("https://argocd.example.com", "argocd", "payments").as_deref(),
            Some("https://argocd.example.com/applications/argocd/payments")
        );
        assert_eq!(
            app_page("https://example.com/argocd/?x=1#top", "argocd", "payments").as_deref(),
            Some("https://example.com/argocd/applications/argocd/payments")
        );
        assert_eq!(
            app_page("https://argocd.example.com/", "argocd", "a/b?c#d").as_deref(),
            Some("https://argocd.example.com/applications/argocd/a%2Fb%3Fc%23d")
        );
        assert_eq!(app_page("https://argocd.example.com/", "..", "x"), None);
        assert_eq!(app_page("javascript:alert(1)", "argocd", "payments"), None);
    }

    #[test]
    fn an_applications_herald_page_names_its_instance_only_outside_the_default() {
        assert_eq!(
            herald_app_page("https://herald.example.com", "default", "argocd", "pay").as_deref(),
            Some("https://herald.example.com/apps/argocd/pay")
        );
        assert_eq!(
            herald_app_page("https://herald.example.com/ops/", "eu", "argocd", "pay").as_deref(),
            Some("https://herald.example.com/ops/apps/eu/argocd/pay")
        );
        assert_eq!(
            herald_app_page("https://herald.example.com", "", "argocd", "<script>").as_deref(),
            Some("https://herald.example.com/apps/argocd/%3Cscript%3E")
        );
        assert_eq!(herald_app_page("https://herald.example.com", "", "..", "x"), None);
    }
}
