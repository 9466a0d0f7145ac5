//! HTML (the e-mail's HTML part), in the shared layout: every field from Argo CD escaped, links only where Herald
//! puts them, messages in a preformatted block.

use super::escape::{message_lines, with_code};
use super::plain::summary_hints;
use super::{apps, detailed, incident_word, linked, resource_line, summary_list_within};
use crate::domain::{Body, Hint, Incident, Notification};

const STYLE: &str = "font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;font-size:14px;color:#1f2328;\
                     max-width:760px";

fn link(text: &str, url: &str) -> String {
    format!("<a href=\"{}\">{}</a>", super::escape::html(url), esc(text))
}

/// Text from Argo CD (or Herald's words around it) as HTML: escaped, and a web address in it made unlinkable (mail
/// clients link bare addresses by themselves), so the only links are the ones Herald puts.
fn esc(s: &str) -> String {
    super::escape::html(&super::escape::defuse_links(s))
}

/// The colour of an incident's status word.
fn colour(i: &Incident) -> &'static str {
    match incident_word(i) {
        "RESOLVED" => "#1a7f37",
        "EVENT" => "#0969da",
        _ if i.severity == crate::domain::Severity::Critical => "#cf222e",
        _ => "#9a6700",
    }
}

fn word(i: &Incident) -> String {
    format!("<b style=\"color:{}\">{}</b>", colour(i), incident_word(i))
}

fn hints(s: &mut String, hints: &[&Hint]) {
    if hints.is_empty() {
        return;
    }
    s.push_str("<p style=\"margin:8px 0 2px\"><b>What to do</b></p><ul style=\"margin-top:2px\">");
    for h in hints {
        let text = with_code(&h.text, esc, |c| format!("<code>{}</code>", esc(c)));
        s.push_str(&format!("<li><b>{}</b>: {text}</li>", esc(&h.title)));
    }
    s.push_str("</ul>");
}

pub fn html(n: &Notification) -> String {
    html_within(n, usize::MAX)
}

/// [`html`] with a digest, or a message about many Applications, within `budget` bytes.
pub fn html_within(n: &Notification, budget: usize) -> String {
    if let Body::Digest(d) = &n.body {
        return crate::receivers::render::digest::html(d, budget);
    }
    let mut s = format!("<!DOCTYPE html><html><body style=\"{STYLE}\">");
    s.push_str(&format!("<h2 style=\"font-size:18px\">{}</h2>", esc(&n.title)));
    if !n.reason.is_empty() {
        s.push_str(&format!("<p style=\"color:#59636e\"><em>{}</em></p>", esc(&n.reason)));
    }
    let now = n.created_at;
    if !detailed(n) {
        let status = n.status_url.as_deref().map(|u| link("the status page", u));
        s.push_str("<ul>");
        s.push_str(&summary_list_within(
            n,
            link,
            esc,
            |i, name, status| match status {
                "" => format!("<li>{} {name}</li>", word(i)),
                _ => format!("<li>{} {name}: {status}</li>", word(i)),
            },
            budget.saturating_sub(4000),
            str::len,
            |hidden| format!("<li>{}</li>", super::more_words(hidden, status.as_deref())),
        ));
        s.push_str("</ul>");
        if let Some(links) = super::group_links(n, link) {
            s.push_str(&format!("<p><strong>{links}</strong></p>"));
        }
        hints(&mut s, &summary_hints(n));
        s.push_str("</body></html>");
        return s;
    }
    for app in apps(n) {
        s.push_str("<table cellpadding=2 style=\"border-collapse:collapse\">");
        for f in app.facts() {
            let value = linked(&f.value, f.link.as_deref(), link, esc);
            s.push_str(&format!(
                "<tr><th align=left style=\"color:#59636e;font-weight:normal;padding-right:12px\">{}</th><td>{value}</td></tr>",
                esc(&f.label)
            ));
        }
        s.push_str("</table>");
        for i in &app.incidents {
            s.push_str(&format!(
                "<h3 style=\"font-size:15px\">{} {}</h3>",
                word(i),
                esc(&i.status_line(now, n.zone))
            ));
            if !i.resources.is_empty() {
                s.push_str("<table border=1 cellpadding=4 style=\"border-collapse:collapse;border-color:#d1d9e0\"><tr><th>Resource</th><th>Status</th><th>Message</th></tr>");
                for r in &i.resources {
                    let (what, status) = resource_line(r);
                    let what = linked(&what, r.url.as_deref(), link, esc);
                    s.push_str(&format!(
                        "<tr><td>{what}</td><td>{}</td><td>{}</td></tr>",
                        esc(&status),
                        esc(&r.message)
                    ));
                }
                s.push_str("</table>");
            }
            for m in &i.messages {
                let lines: Vec<String> = message_lines(m).iter().map(|l| esc(l)).collect();
                s.push_str(&format!(
                    "<pre style=\"white-space:pre-wrap;background:#f6f8fa;padding:8px\">{}</pre>",
                    lines.join("\n")
                ));
            }
            hints(&mut s, &i.hints.iter().collect::<Vec<_>>());
            for note in &i.notes {
                s.push_str(&format!("<p><em>Note: {}</em></p>", esc(note)));
            }
        }
    }
    s.push_str("</body></html>");
    s
}
