//! Shared renderings of a [`Notification`]: plain text (email, console), CommonMark (GitHub, Mattermost) and HTML
//! (email), and the layout every rendering follows (Slack blocks, Adaptive Cards, ADF and wiki markup too): the
//! title, why now, then each Application once — its link and facts — with one line per problem and, below it, the
//! resources (each linked into Argo CD), the messages, what to do. A message about many Applications lists one
//! line per problem without details. Every field from Argo CD goes through the target's escaping (`escape`).
//! A team's digest ([`crate::domain::Digest`]) has its own tables, in every markup (`digest`).

pub mod digest;
pub mod escape;
mod html;
mod markdown;
mod plain;
pub mod template;

pub use html::{html, html_within};
pub use markdown::{markdown, markdown_within};
pub(crate) use plain::summary_hints;
pub use plain::{console_text, text, text_within};
pub use template::{TemplateEscape, custom_text, with_template};

use super::DeliveryError;
use crate::domain::{Action, Incident, IncidentState, Notification, Severity};

/// A message about more Applications than this lists one line per problem, without details: forty Applications
/// out of sync are a list to scan, not forty pages.
pub const DETAILED_APPS: usize = 5;

/// One fact about an Application: `Project: shop`, or a link (`Source: … at 3de5b39dd542`, to the commit).
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    pub label: String,
    pub value: String,
    pub link: Option<String>,
}

/// Something that may link (an Application's name, a fact, a resource) as a markup shows it: `link(text, url)`
/// when there is a URL, else `esc(text)`.
pub fn linked(
    text: &str,
    url: Option<&str>,
    link: impl Fn(&str, &str) -> String,
    esc: impl Fn(&str) -> String,
) -> String {
    match url {
        Some(u) => link(text, u),
        None => esc(text),
    }
}

/// The list of a summary (a message about many Applications): `line(incident, name, status)` for each problem in
/// the notification's order, `name` being its Application's name as the markup shows it (linked, or escaped by
/// `esc`) and `status` its status line escaped.
pub fn summary_list(
    n: &Notification,
    link: impl Fn(&str, &str) -> String,
    esc: impl Fn(&str) -> String,
    line: impl Fn(&Incident, &str, &str) -> String,
) -> String {
    let mut s = String::new();
    for app in apps(n) {
        let name = linked(&app.name, app.url, &link, &esc);
        for i in &app.incidents {
            s.push_str(&line(i, &name, &esc(&i.status_line(n.created_at, n.zone))));
        }
    }
    s
}

/// [`summary_list`] within `budget` (counted by `size`): each problem as `line(incident, name, status)`, or, when
/// they do not all fit, as `line(incident, name, "")` (the Application and its state word), and the rest counted
/// in a last `more(hidden)` line.
pub fn summary_list_within(
    n: &Notification,
    link: impl Fn(&str, &str) -> String,
    esc: impl Fn(&str) -> String,
    line: impl Fn(&Incident, &str, &str) -> String,
    budget: usize,
    size: impl Fn(&str) -> usize,
    more: impl Fn(usize) -> String,
) -> String {
    let mut rows = Vec::new();
    for app in apps(n) {
        let name = linked(&app.name, app.url, &link, &esc);
        for i in &app.incidents {
            rows.push(Row {
                full: line(i, &name, &esc(&i.status_line(n.created_at, n.zone))),
                short: line(i, &name, ""),
            });
        }
    }
    fit_rows(&rows, budget, size, more).concat()
}

fn fact(label: &str, value: String) -> Fact {
    Fact {
        label: label.into(),
        value,
        link: None,
    }
}

/// One Application of a notification and its incidents, in the notification's order.
pub struct AppView<'a> {
    /// `namespace/name`, after its Argo CD instance when that is not the default one (`us/argocd/payments-api`):
    /// two instances' Applications of one name are two Applications.
    pub name: String,
    /// The Application in Argo CD.
    pub url: Option<&'a str>,
    pub incidents: Vec<&'a Incident>,
}

/// The Applications of `n`, each once, in order.
pub fn apps(n: &Notification) -> Vec<AppView<'_>> {
    let mut out: Vec<AppView<'_>> = Vec::new();
    for i in n.incidents() {
        // A storm is about a cluster (or an Argo CD instance), named in full already.
        let name = match i.kind {
            crate::domain::Kind::Storm => i.app_title(),
            _ => i.app_id().to_string(),
        };
        match out.iter_mut().find(|a| a.name == name) {
            Some(a) => {
                a.incidents.push(i);
                if a.url.is_none() {
                    a.url = i.app_url.as_deref();
                }
            }
            None => out.push(AppView {
                name,
                url: i.app_url.as_deref(),
                incidents: vec![i],
            }),
        }
    }
    out
}

/// The message's links that act on all its firing incidents at once ("Acknowledge all 40"), each as `link(label,
/// url)` shows it, joined by " · "; none when it has none.
pub fn group_links(n: &Notification, link: impl Fn(&str, &str) -> String) -> Option<String> {
    let links: Vec<String> = n.group_actions.iter().map(|a| link(&a.label, &a.url)).collect();
    (!links.is_empty()).then(|| links.join(" · "))
}

/// Whether `n` is about few enough Applications to show each one's details.
pub fn detailed(n: &Notification) -> bool {
    apps(n).len() <= DETAILED_APPS
}

impl AppView<'_> {
    /// The Application's name without its namespace, for buttons (with its instance outside the default one).
    pub fn short_name(&self) -> String {
        self.incidents
            .first()
            .map_or_else(|| self.name.clone(), |i| i.app_title())
    }

    /// What people check first about the Application: where it runs, where it comes from (each source with its
    /// revision, linked to the commit), who started the sync. Empty facts are left out.
    pub fn facts(&self) -> Vec<Fact> {
        let Some(first) = self.incidents.first() else {
            return Vec::new();
        };
        let mut out = vec![Fact {
            label: match first.kind {
                crate::domain::Kind::Storm => "Storm".into(),
                _ => "Application".into(),
            },
            value: self.name.clone(),
            link: self.url.map(str::to_string),
        }];
        // Several Argo CDs may each hold an Application of this name: say which one (the default goes unsaid).
        if !crate::domain::is_default_instance(&first.instance) {
            out.push(fact("Argo CD instance", first.instance.clone()));
        }
        for (label, value) in [("Project", &first.project), ("Team", &first.team)] {
            if !value.trim().is_empty() {
                out.push(fact(label, value.clone()));
            }
        }
        let destination: Vec<&str> = [first.destination_cluster.as_str(), first.destination_namespace.as_str()]
            .into_iter()
            .filter(|p| !p.trim().is_empty())
            .collect();
        if !destination.is_empty() {
            out.push(fact("Destination", destination.join(" / ")));
        }
        out.extend(sources(first));
        let previous = self.incidents.iter().find_map(|i| i.previous_revision.as_deref());
        if let Some(r) = previous.filter(|r| !r.trim().is_empty()) {
            out.push(fact("Previous revision", short_rev(r).to_string()));
        }
        if let Some(d) = self.incidents.iter().find_map(|i| i.deployment.as_ref()) {
            out.extend(deployment_facts(d));
        }
        let by = self.incidents.iter().find_map(|i| i.initiated_by.as_deref());
        if let Some(by) = by.filter(|b| !b.trim().is_empty()) {
            out.push(fact("Initiated by", by.to_string()));
        }
        let severity = self.incidents.iter().map(|i| i.severity).max().unwrap_or_default();
        out.push(fact("Severity", severity.to_string()));
        // The signed one-click links of each problem: `Acknowledge: OutOfSync`, linked.
        for i in &self.incidents {
            out.extend(i.actions.iter().map(|a| Fact {
                label: a.label.clone(),
                value: i.problem(),
                link: Some(a.url.clone()),
            }));
        }
        out
    }
}

/// `Source` (or `Source 1`, `Source 2`… for a multi-source Application): what it is, at which revision, linked
/// to the commit when there is one. Without sources (incidents stored before they were kept), the revision alone.
fn sources(i: &Incident) -> Vec<Fact> {
    if i.sources.is_empty() {
        return i
            .revision
            .iter()
            .filter(|r| !r.trim().is_empty())
            .map(|r| fact("Revision", short_rev(r).to_string()))
            .collect();
    }
    let many = i.sources.len() > 1;
    i.sources
        .iter()
        .enumerate()
        .map(|(k, src)| {
            let mut value = src.describe();
            match (&src.revision, &src.target_revision) {
                (Some(rev), Some(target)) if target != rev => {
                    value.push_str(&format!(" at {} ({target})", short_rev(rev)))
                }
                (Some(rev), _) => value.push_str(&format!(" at {}", short_rev(rev))),
                (None, Some(target)) => value.push_str(&format!(" ({target})")),
                (None, None) => {}
            }
            Fact {
                label: if many {
                    format!("Source {}", k + 1)
                } else {
                    "Source".into()
                },
                value,
                link: src.commit_url.clone(),
            }
        })
        .collect()
}

/// Images listed in a message; more are counted (`… and 3 more`).
pub const SHOWN_IMAGES: usize = 3;

/// What the deployment changed, as facts: `Images: ghcr.io/acme/api:1.0 → 1.1, … and 2 more`, `Revisions:
/// 3de5b39dd542 → 9b2f1c0d7e6a` (linked to the comparison on a trusted host), `Chart: podinfo 6.9.0 → 6.9.2`,
/// `Sync: 1 created, 2 changed, 1 pruned`. Only what changed.
pub fn deployment_facts(d: &crate::domain::Deployment) -> Vec<Fact> {
    let mut out = Vec::new();
    if !d.images.is_empty() {
        let mut value: Vec<String> = d.images.iter().take(SHOWN_IMAGES).map(|c| c.describe()).collect();
        let more = d.images.len().saturating_sub(SHOWN_IMAGES) + d.more_images;
        if more > 0 {
            value.push(format!("… and {more} more"));
        }
        out.push(fact("Images", value.join(", ")));
    }
    let git = d.sources.iter().filter(|c| c.chart.is_none()).count();
    for c in &d.sources {
        let (label, value) = match &c.chart {
            Some(_) => ("Chart", c.describe()),
            // Several repositories changed: say which is which.
            None if git > 1 => ("Revisions", format!("{}: {}", short_repo(&c.repo_url), c.describe())),
            None => ("Revisions", c.describe()),
        };
        out.push(Fact {
            label: label.into(),
            value,
            link: c.compare_url.clone(),
        });
    }
    if !d.resources.is_empty() {
        out.push(fact("Sync", d.resources.describe()));
    }
    out
}

/// `github.com/acme/apps` for `https://github.com/acme/apps.git`.
fn short_repo(repo_url: &str) -> &str {
    repo_url
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches(".git")
}

/// The status of one incident in a message: FIRING, RESOLVED, or EVENT for what happened once (a prune, a
/// failed sync is still FIRING until a sync succeeds).
pub fn incident_word(i: &Incident) -> &'static str {
    match (i.kind.is_informational(), i.state) {
        _ if i.kind == crate::domain::Kind::Test => "TEST",
        (true, _) => "EVENT",
        (false, IncidentState::Resolved) => "RESOLVED",
        (false, _) => "FIRING",
    }
}

/// A resource as a line: `Deployment payments/payments-api: Degraded — exceeded its progress deadline`.
pub fn resource_line(r: &crate::domain::ResourceRef) -> (String, String) {
    let place = if r.namespace.is_empty() {
        r.name.clone()
    } else {
        format!("{}/{}", r.namespace, r.name)
    };
    (format!("{} {place}", r.kind), r.status.clone())
}

/// Cuts `s` to at most `max` UTF-16 code units (Slack counts its limits so: an emoji is two), with an ellipsis.
pub fn truncate_utf16(s: &str, max: usize) -> String {
    if s.encode_utf16().count() <= max {
        return s.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        if used + c.len_utf16() > max.saturating_sub(1) {
            break;
        }
        used += c.len_utf16();
        out.push(c);
    }
    while out.ends_with(['<', '\\']) {
        out.pop();
    }
    out.push('…');
    out
}

/// Cuts `s` to at most `max` characters, marking the cut with an ellipsis (receivers' length limits). A cut never
/// leaves a `<` or a `\\` at the end, split from the word joiner or the character that made it text.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    while out.ends_with(['<', '\\']) {
        out.pop();
    }
    out.push('…');
    out
}

/// "for 1h 2m" style age of an incident at `now`.
pub fn age(since: chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> String {
    let secs = (now - since).num_seconds().max(0) as u64;
    let d = std::time::Duration::from_secs(secs - secs % 60);
    if secs < 60 {
        format!("{secs}s")
    } else {
        humantime::format_duration(d).to_string()
    }
}

fn short_rev(r: &str) -> &str {
    crate::domain::revision::short_revision(r, crate::domain::revision::SHOWN)
}

/// Facts about one incident as `(label, value)` lines, in the order people read them.
pub fn facts(i: &Incident, zone: crate::domain::Zone) -> Vec<(&'static str, String)> {
    let mut out = vec![match i.kind {
        crate::domain::Kind::Storm => ("Storm", i.app_title()),
        _ => ("Application", format!("{}/{}", i.app_namespace, i.app_name)),
    }];
    if !crate::domain::is_default_instance(&i.instance) {
        out.push(("Argo CD instance", i.instance.clone()));
    }
    out.extend([
        ("Project", i.project.clone()),
        ("Team", i.team.clone()),
        (
            "Destination",
            format!("{} / {}", i.destination_cluster, i.destination_namespace),
        ),
        ("Since", zone.stamp_seconds(i.since)),
        ("Severity", i.severity.to_string()),
    ]);
    if let Some(r) = &i.revision {
        out.push(("Revision", short_rev(r).to_string()));
    }
    if let Some(r) = &i.previous_revision {
        out.push(("Previous revision", short_rev(r).to_string()));
    }
    if let Some(d) = &i.deployment {
        for f in deployment_facts(d) {
            let label = match f.label.as_str() {
                "Images" => "Images",
                "Chart" => "Chart",
                "Sync" => "Sync",
                _ => "Revisions",
            };
            out.push((label, f.value));
        }
    }
    if let Some(by) = &i.initiated_by {
        out.push(("Initiated by", by.clone()));
    }
    if let Some(u) = &i.app_url {
        out.push(("Argo CD", u.clone()));
    }
    out
}

/// A short status word for titles: FIRING / RESOLVED / EVENT / TEST / DIGEST. A message that only tells events
/// (a prune) says EVENT, as each of its lines does: header and body agree.
pub fn status_word(n: &Notification) -> &'static str {
    let only_events = !n.incidents().is_empty()
        && (n.incidents().iter()).all(|i| i.kind.is_informational() && i.kind != crate::domain::Kind::Test);
    match n.action {
        Action::Open | Action::Update if only_events => "EVENT",
        Action::Update if n.all_resolved() => "RESOLVED",
        Action::Open => "FIRING",
        Action::Update => "FIRING",
        Action::Resolve => "RESOLVED",
        Action::Test => "TEST",
        Action::Digest => "DIGEST",
        Action::Acknowledge => "ACKNOWLEDGED",
    }
}

/// A coloured marker for chat titles, so the state reads at a glance in a channel.
pub fn status_emoji(n: &Notification) -> &'static str {
    match n.action {
        Action::Resolve => "✅",
        Action::Update if n.all_resolved() => "✅",
        Action::Test => "🧪",
        Action::Digest => "📋",
        Action::Acknowledge => "👀",
        Action::Open | Action::Update => match n.highest_severity() {
            Severity::Info if status_word(n) == "EVENT" => "ℹ️",
            Severity::Critical => "🔴",
            Severity::Warning => "🟠",
            _ => "🔵",
        },
    }
}

#[cfg(test)]
mod tests {
    use crate::domain::{Deployment, ImageChange, SourceChange, SyncCounts};

    #[test]
    fn a_deployment_is_told_in_facts_images_capped_with_a_count() {
        let image = |k: usize| ImageChange {
            image: format!("ghcr.io/acme/svc{k}"),
            from: Some("1.0".into()),
            to: Some("1.1".into()),
        };
        let d = Deployment {
            images: (1..=5).map(image).collect(),
            more_images: 2,
            sources: vec![
                SourceChange {
                    repo_url: "https://github.com/acme/apps.git".into(),
                    from: Some("9b2f1c0d7e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c".into()),
                    to: Some("3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5".into()),
                    compare_url: Some("https://github.com/acme/apps/compare/9b2f...3de5".into()),
                    ..Default::default()
                },
                SourceChange {
                    repo_url: "https://charts.acme.example".into(),
                    chart: Some("redis".into()),
                    from: Some("18.1.0".into()),
                    to: Some("18.2.1".into()),
                    ..Default::default()
                },
            ],
            resources: SyncCounts {
                created: 1,
                changed: 2,
                applied: 0,
                pruned: 1,
            },
        };
        let facts: Vec<(String, String, Option<String>)> = (deployment_facts(&d).into_iter())
            .map(|f| (f.label, f.value, f.link))
            .collect();
        let own = |l: &str, v: &str, u: Option<&str>| (l.to_string(), v.to_string(), u.map(str::to_string));
        assert_eq!(
            facts,
            [
                own(
                    "Images",
                    "ghcr.io/acme/svc1:1.0 → 1.1, ghcr.io/acme/svc2:1.0 → 1.1, ghcr.io/acme/svc3:1.0 → 1.1, … and 4 more",
                    None
                ),
                own(
                    "Revisions",
                    "9b2f1c0d7e6a → 3de5b39dd542",
                    Some("https://github.com/acme/apps/compare/9b2f...3de5")
                ),
                own("Chart", "redis 18.1.0 → 18.2.1", None),
                own("Sync", "1 created, 2 changed, 1 pruned", None),
            ]
        );
        assert!(deployment_facts(&Deployment::default()).is_empty());
    }

    use super::*;

    #[test]
    fn the_header_says_what_every_line_says() {
        use crate::domain::{Incident, Kind, Severity};
        let now = chrono::Utc::now();
        let event = |severity| Incident {
            kind: Kind::Pruned,
            severity,
            state: IncidentState::Resolved,
            ..Default::default()
        };
        let firing = Incident {
            kind: Kind::OutOfSync,
            ..Default::default()
        };
        // (incidents, header word, header emoji, each line's word)
        let cases = [
            (vec![event(Severity::Info)], "EVENT", "ℹ️", vec!["EVENT"]),
            (vec![event(Severity::Critical)], "EVENT", "🔴", vec!["EVENT"]),
            (
                vec![firing.clone(), event(Severity::Info)],
                "FIRING",
                "🟠",
                vec!["FIRING", "EVENT"],
            ),
            (vec![firing], "FIRING", "🟠", vec!["FIRING"]),
        ];
        for (incidents, word, emoji, lines) in cases {
            let n = Notification {
                action: Action::Open,
                body: crate::domain::Body::Incidents(incidents),
                ..Notification::test("chat", now)
            };
            assert_eq!(status_word(&n), word);
            assert_eq!(status_emoji(&n), emoji);
            assert_eq!(n.incidents().iter().map(incident_word).collect::<Vec<_>>(), lines);
        }
    }

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate("héllo", 5), "héllo");
        assert_eq!(truncate("héllo wörld", 5), "héll…");
    }

    #[test]
    fn utf16_truncation_counts_an_emoji_as_two() {
        let header = format!("🔴 {}", "x".repeat(148));
        assert_eq!(header.chars().count(), 150);
        let cut = truncate_utf16(&header, 150);
        assert!(cut.encode_utf16().count() <= 150, "{}", cut.encode_utf16().count());
        assert!(cut.ends_with('…'));
    }
}

/// A list a target shows, each row written twice: in full, and as a shorter line (the Application's name and its
/// status) for when the full ones do not fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub full: String,
    pub short: String,
}

/// The rows of a list that fit in `budget` (each line and its line break counted with `size`: characters, bytes
/// or JSON bytes, as the target counts): every row in full when they all fit, else every row's shorter line, else
/// the first shorter lines and a last line, `more(hidden)`, saying how many were left out. A row is never cut
/// inside, and a row is lost only when even the shorter lines do not fit.
pub fn fit_rows(
    rows: &[Row],
    budget: usize,
    size: impl Fn(&str) -> usize,
    more: impl Fn(usize) -> String,
) -> Vec<String> {
    let total = |lines: &mut dyn Iterator<Item = &String>| lines.map(|l| size(l) + 1).sum::<usize>();
    if total(&mut rows.iter().map(|r| &r.full)) <= budget {
        return rows.iter().map(|r| r.full.clone()).collect();
    }
    if total(&mut rows.iter().map(|r| &r.short)) <= budget {
        return rows.iter().map(|r| r.short.clone()).collect();
    }
    let mut out = Vec::new();
    let mut used = 0;
    for (k, r) in rows.iter().enumerate() {
        let after = rows.len() - k - 1;
        let tail = if after == 0 { 0 } else { size(&more(after)) + 1 };
        let need = size(&r.short) + 1;
        if used + need + tail > budget {
            break;
        }
        out.push(r.short.clone());
        used += need;
    }
    let hidden = rows.len() - out.len();
    if hidden > 0 {
        out.push(more(hidden));
    }
    out
}

/// The size of `s` once written as a JSON string (without its quotes): what a card's byte limit counts.
pub fn json_len(s: &str) -> usize {
    serde_json::to_string(s).map_or(s.len(), |j| j.len().saturating_sub(2))
}

/// The length of Telegram HTML as Telegram counts its 4,096-character limit: the text once its tags are read and
/// its entities decoded, in UTF-16 code units (an emoji is two). Herald writes every `<` of text as `&lt;`, so
/// `<` only opens a tag here.
pub fn telegram_len(html: &str) -> usize {
    let mut n = 0;
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        if c == '<'
            && let Some(end) = rest.find('>')
        {
            rest = &rest[end + 1..];
            continue;
        }
        if c == '&'
            && let Some(end) = rest.find(';').filter(|&e| e <= 10)
        {
            n += 1;
            rest = &rest[end + 1..];
            continue;
        }
        n += c.len_utf16();
        rest = &rest[c.len_utf8()..];
    }
    n
}

/// The words of a cut: `… and 254 more`, with where to see them all when Herald knows its status page (`status`,
/// already written as a link in the target's markup).
pub fn more_words(hidden: usize, status: Option<&str>) -> String {
    match status {
        Some(link) => format!("… and {hidden} more on {link}"),
        None => format!("… and {hidden} more"),
    }
}

#[cfg(test)]
mod fit_tests {
    use super::*;

    fn rows(n: usize) -> Vec<Row> {
        (0..n)
            .map(|k| Row {
                full: format!("argocd/app-{k:04} — OutOfSync since a long time — 3de5b39dd542"),
                short: format!("argocd/app-{k:04}"),
            })
            .collect()
    }

    fn chars(s: &str) -> usize {
        s.chars().count()
    }

    #[test]
    fn rows_that_fit_are_kept_in_full() {
        let got = fit_rows(&rows(3), 10_000, chars, |n| more_words(n, None));
        assert_eq!(got.len(), 3);
        assert!(got[0].contains("3de5b39dd542"));
    }

    #[test]
    fn shorter_lines_are_preferred_to_losing_rows() {
        let got = fit_rows(&rows(100), 100 * 17, chars, |n| more_words(n, None));
        assert_eq!(got.len(), 100);
        assert_eq!(got[99], "argocd/app-0099");
    }

    #[test]
    fn a_cut_says_how_many_are_missing_and_stays_within_the_budget() {
        let got = fit_rows(&rows(1000), 3000, chars, |n| {
            more_words(n, Some("https://herald/?team=a"))
        });
        let used: usize = got.iter().map(|l| chars(l) + 1).sum();
        assert!(used <= 3000, "{used}");
        let kept = got.len() - 1;
        assert_eq!(
            got[kept],
            format!("… and {} more on https://herald/?team=a", 1000 - kept)
        );
        assert!(kept > 150, "{kept}");
    }

    #[test]
    fn two_instances_applications_of_one_name_are_two_blocks_each_with_its_own_link() {
        let mut n = crate::receivers::testing::notification(Action::Open);
        let of = |instance: &str, url: &str| {
            let mut i = crate::receivers::testing::incident();
            i.instance = instance.into();
            i.app_url = Some(url.into());
            i.destination_cluster = format!("https://{instance}.k8s.example.com");
            i
        };
        *crate::receivers::testing::incidents_of(&mut n) = vec![
            of("eu", "https://argocd.eu.example.com/applications/argocd/payments"),
            of("us", "https://argocd.us.example.com/applications/argocd/payments"),
            of("eu", "https://argocd.eu.example.com/applications/argocd/payments"),
        ];

        let blocks = apps(&n);
        let seen: Vec<(&str, Option<&str>, usize)> = (blocks.iter())
            .map(|a| (a.name.as_str(), a.url, a.incidents.len()))
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "eu/argocd/payments",
                    Some("https://argocd.eu.example.com/applications/argocd/payments"),
                    2
                ),
                (
                    "us/argocd/payments",
                    Some("https://argocd.us.example.com/applications/argocd/payments"),
                    1
                ),
            ]
        );
        for (block, instance) in blocks.iter().zip(["eu", "us"]) {
            assert_eq!(block.short_name(), format!("{instance}/payments"));
            let facts = block.facts();
            let fact = |label: &str| facts.iter().find(|f| f.label == label).map(|f| f.value.clone());
            assert_eq!(fact("Argo CD instance").as_deref(), Some(instance));
            assert!(fact("Destination").is_some_and(|d| d.contains(&format!("https://{instance}.k8s"))));
        }

        // One Application of the default instance keeps its name as before.
        *crate::receivers::testing::incidents_of(&mut n) = vec![crate::receivers::testing::incident()];
        let blocks = apps(&n);
        assert_eq!(
            (blocks[0].name.as_str(), blocks[0].short_name()),
            ("argocd/payments", "payments".to_string())
        );
    }
}
