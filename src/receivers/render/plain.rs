//! Plain text (the e-mail's text part, the console, descriptions sent as JSON), in the shared layout.

use super::{apps, detailed, escape, incident_word, resource_line};
use crate::domain::{Body, Hint, Notification};

pub fn text(n: &Notification) -> String {
    match &n.body {
        Body::Digest(d) => crate::receivers::render::digest::text(d),
        _ => plain(n, text_field, usize::MAX),
    }
}

/// A field of the text part: one line, a web address from Argo CD made unlinkable (mail clients and chats link bare
/// addresses by themselves), so the only addresses that link are Herald's own.
fn text_field(s: &str) -> String {
    escape::one_line(&escape::defuse_links(s))
}

/// [`text`] with a digest, or a message about many Applications, within `budget` characters.
pub fn text_within(n: &Notification, budget: usize) -> String {
    match &n.body {
        Body::Digest(d) => crate::receivers::render::digest::text_within(d, budget),
        _ => plain(n, text_field, budget),
    }
}

/// [`text`] for a terminal: control characters in what Argo CD sent are shown as escapes, not acted on.
pub fn console_text(n: &Notification) -> String {
    match &n.body {
        Body::Digest(d) => crate::receivers::render::digest::console_text(d),
        _ => plain(n, escape::console, usize::MAX),
    }
}

/// Plain text, each field written through `field` (one line, or escaped for a terminal).
fn plain(n: &Notification, field: fn(&str) -> String, budget: usize) -> String {
    // Herald's own links (Argo CD's pages, commits, the status page, one-click links) stay addresses.
    let url = |u: &str| escape::console(u);
    let mut s = format!("{}\n", field(&n.title));
    if !n.reason.is_empty() {
        s.push_str(&format!("({})\n", field(&n.reason)));
    }
    let now = n.created_at;
    if !detailed(n) {
        s.push('\n');
        let mut rows = Vec::new();
        for app in apps(n) {
            for i in &app.incidents {
                let link = app.url.map(|u| format!("  {}", url(u))).unwrap_or_default();
                let (word, name) = (incident_word(i), field(&app.name));
                rows.push(super::Row {
                    full: format!("* [{word}] {name}: {}{link}\n", field(&i.status_line(now, n.zone))),
                    short: format!("* [{word}] {name}\n"),
                });
            }
        }
        let status = n.status_url.as_deref().map(url);
        let more = |hidden| format!("* {}\n", super::more_words(hidden, status.as_deref()));
        let budget = budget.saturating_sub(2000);
        s.push_str(&super::fit_rows(&rows, budget, |l| l.chars().count(), more).concat());
        if let Some(links) = super::group_links(n, |label, u| format!("{label}: {}", url(u))) {
            s.push_str(&format!("\n{links}\n"));
        }
        let hints = summary_hints(n);
        hints_text(&mut s, &hints, "", field);
        return s;
    }
    for app in apps(n) {
        s.push('\n');
        let link = app.url.map(|u| format!("  {}", url(u))).unwrap_or_default();
        s.push_str(&format!("{}{link}\n", field(&app.name)));
        for f in app.facts().iter().skip(1) {
            let link = f.link.as_deref().map(|u| format!("  {}", url(u))).unwrap_or_default();
            s.push_str(&format!("    {}: {}{link}\n", f.label, field(&f.value)));
        }
        for i in &app.incidents {
            s.push_str(&format!(
                "  * [{}] {}\n",
                incident_word(i),
                field(&i.status_line(now, n.zone))
            ));
            for r in &i.resources {
                let (what, status) = resource_line(r);
                s.push_str(&format!("      - {}: {}", field(&what), field(&status)));
                if !r.message.is_empty() {
                    s.push_str(&format!(" — {}", field(&r.message)));
                }
                if let Some(u) = &r.url {
                    s.push_str(&format!("  {}", url(u)));
                }
                s.push('\n');
            }
            for m in &i.messages {
                for (k, line) in escape::message_lines(m).iter().enumerate() {
                    let label = if k == 0 { "Message:" } else { "        " };
                    s.push_str(&format!("      {label} {}\n", field(line)));
                }
            }
            let hints: Vec<&Hint> = i.hints.iter().collect();
            hints_text(&mut s, &hints, "      ", field);
            for note in &i.notes {
                s.push_str(&format!("      Note: {}\n", field(note)));
            }
        }
    }
    s
}

fn hints_text(s: &mut String, hints: &[&Hint], indent: &str, field: fn(&str) -> String) {
    for h in hints {
        s.push_str(&format!(
            "{indent}What to do — {}: {}\n",
            field(&h.title),
            field(&h.text)
        ));
    }
}

/// The hints of a summary: the first of each kind over all the notification's incidents, so a list of forty
/// Applications says what to do once, not forty times.
pub(crate) fn summary_hints(n: &Notification) -> Vec<&Hint> {
    let mut out: Vec<&Hint> = Vec::new();
    for h in n.incidents().iter().flat_map(|i| &i.hints) {
        if !out.iter().any(|o| o.id == h.id) {
            out.push(h);
        }
    }
    out
}
