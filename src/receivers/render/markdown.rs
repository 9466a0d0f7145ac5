//! CommonMark (GitHub issues, Mattermost posts), in the shared layout: every field from Argo CD escaped, links only
//! where Herald puts them, messages quoted line by line.

use super::escape::{commonmark as md, commonmark_code, message_lines, with_code};
use super::plain::summary_hints;
use super::{apps, detailed, incident_word, resource_line, summary_list_within};
use crate::domain::{Body, Hint, Notification};

/// A link Herald makes: escaped text, and a URL from Herald's settings or Argo CD's own names.
fn link(text: &str, url: &str) -> String {
    format!("[{}]({})", md(text), url.replace(' ', "%20").replace(')', "%29"))
}

fn hints(s: &mut String, hints: &[&Hint]) {
    if hints.is_empty() {
        return;
    }
    s.push_str("\n**What to do**\n\n");
    for h in hints {
        let text = with_code(&h.text, md, commonmark_code);
        s.push_str(&format!("- **{}**: {text}\n", md(&h.title)));
    }
}

pub fn markdown(n: &Notification) -> String {
    markdown_within(n, usize::MAX)
}

/// [`markdown`] with a message about many Applications listing its problems within `budget` characters.
pub fn markdown_within(n: &Notification, budget: usize) -> String {
    if let Body::Digest(d) = &n.body {
        return crate::receivers::render::digest::markdown(d, budget);
    }
    let mut s = format!("### {}\n\n", md(&n.title));
    if !n.reason.is_empty() {
        s.push_str(&format!("_{}_\n\n", md(&n.reason)));
    }
    let now = n.created_at;
    if !detailed(n) {
        let status = n.status_url.as_deref().map(|u| link("the status page", u));
        s.push_str(&summary_list_within(
            n,
            link,
            md,
            |i, name, status| match status {
                "" => format!("- **{}** {name}\n", incident_word(i)),
                _ => format!("- **{}** {name}: {status}\n", incident_word(i)),
            },
            budget.saturating_sub(2000),
            |l| l.chars().count(),
            |hidden| format!("- {}\n", super::more_words(hidden, status.as_deref())),
        ));
        if let Some(links) = super::group_links(n, link) {
            s.push_str(&format!("\n**{links}**\n"));
        }
        hints(&mut s, &summary_hints(n));
        return s;
    }
    for app in apps(n) {
        let facts = app.facts();
        for f in &facts {
            let value = match &f.link {
                Some(u) => link(&f.value, u),
                None => md(&f.value),
            };
            s.push_str(&format!("- {}: {value}\n", f.label));
        }
        for i in &app.incidents {
            s.push_str(&format!(
                "\n**[{}] {}**\n",
                incident_word(i),
                md(&i.status_line(now, n.zone))
            ));
            if !i.resources.is_empty() {
                s.push_str("\n| Resource | Status | Message |\n|---|---|---|\n");
                for r in &i.resources {
                    let (what, status) = resource_line(r);
                    let what = match &r.url {
                        Some(u) => link(&what, u),
                        None => md(&what),
                    };
                    s.push_str(&format!("| {what} | {} | {} |\n", md(&status), md(&r.message)));
                }
            }
            for m in &i.messages {
                s.push('\n');
                for line in message_lines(m) {
                    s.push_str(&format!("> {}\n", md(&line)));
                }
            }
            hints(&mut s, &i.hints.iter().collect::<Vec<_>>());
            for note in &i.notes {
                s.push_str(&format!("\n_Note: {}_\n", md(note)));
            }
        }
        s.push('\n');
    }
    s
}
