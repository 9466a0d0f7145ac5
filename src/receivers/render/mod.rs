//! Shared renderings of a [`Notification`]: plain text (email, console, Jira DC), Markdown (GitHub, Mattermost, chat)
//! and HTML (email). Receiver-specific formats (Slack blocks, Adaptive Cards, ADF) build on the same pieces, and
//! every field from Argo CD goes through the target's escaping (`escape`).

pub mod escape;

use super::DeliveryError;
use crate::domain::{Action, Incident, Notification, Severity};

/// Cuts `s` to at most `max` characters, marking the cut with an ellipsis (receivers' length limits).
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn when(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
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
    if r.len() > 12 && r.chars().all(|c| c.is_ascii_hexdigit()) {
        &r[..12]
    } else {
        r
    }
}

/// Facts about one incident as `(label, value)` lines, in the order people read them.
pub fn facts(i: &Incident) -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("Application", format!("{}/{}", i.app_namespace, i.app_name)),
        ("Project", i.project.clone()),
        ("Team", i.team.clone()),
        (
            "Destination",
            format!("{} / {}", i.destination_cluster, i.destination_namespace),
        ),
        ("Since", when(i.since)),
        ("Severity", i.severity.to_string()),
    ];
    if let Some(r) = &i.revision {
        out.push(("Revision", short_rev(r).to_string()));
    }
    if let Some(r) = &i.previous_revision {
        out.push(("Previous revision", short_rev(r).to_string()));
    }
    if let Some(by) = &i.initiated_by {
        out.push(("Initiated by", by.clone()));
    }
    if let Some(u) = &i.app_url {
        out.push(("Argo CD", u.clone()));
    }
    out
}

pub fn text(n: &Notification) -> String {
    plain(n, escape::one_line)
}

/// [`text`] for a terminal: control characters in what Argo CD sent are shown as escapes, not acted on.
pub fn console_text(n: &Notification) -> String {
    plain(n, escape::console)
}

/// Plain text, each field written through `field` (one line, or escaped for a terminal).
fn plain(n: &Notification, field: fn(&str) -> String) -> String {
    let mut s = String::new();
    s.push_str(&field(&n.title));
    s.push_str("\n\n");
    if !n.reason.is_empty() {
        s.push_str(&format!("({})\n\n", field(&n.reason)));
    }
    for i in &n.incidents {
        s.push_str(&format!(
            "* [{}] {}\n",
            i.state.as_str().to_uppercase(),
            field(&i.summary)
        ));
        for (k, v) in facts(i) {
            s.push_str(&format!("    {k}: {}\n", field(&v)));
        }
        if !i.resources.is_empty() {
            s.push_str("    Resources:\n");
            for r in &i.resources {
                s.push_str(&format!("      - {} ({})", field(&r.display()), field(&r.status)));
                if !r.message.is_empty() {
                    s.push_str(&format!(": {}", field(&r.message)));
                }
                s.push('\n');
            }
        }
        for m in &i.messages {
            for (k, line) in escape::message_lines(m).iter().enumerate() {
                let label = if k == 0 { "Message:" } else { "        " };
                s.push_str(&format!("    {label} {}\n", field(line)));
            }
        }
        for h in &i.hints {
            s.push_str(&format!("    What to do — {}: {}\n", field(&h.title), field(&h.text)));
        }
        for note in &i.notes {
            s.push_str(&format!("    Note: {}\n", field(note)));
        }
        s.push('\n');
    }
    s
}

/// CommonMark (GitHub, Mattermost): every field from Argo CD escaped, messages quoted line by line.
pub fn markdown(n: &Notification) -> String {
    use escape::commonmark as md;
    let mut s = String::new();
    s.push_str(&format!("### {}\n\n", md(&n.title)));
    if !n.reason.is_empty() {
        s.push_str(&format!("_{}_\n\n", md(&n.reason)));
    }
    for i in &n.incidents {
        s.push_str(&format!(
            "**[{}] {}**\n\n",
            i.state.as_str().to_uppercase(),
            md(&i.summary)
        ));
        for (k, v) in facts(i) {
            if k == "Argo CD" {
                s.push_str(&format!("- {k}: [{}]({v})\n", md(&i.app_name)));
            } else {
                s.push_str(&format!("- {k}: {}\n", md(&v)));
            }
        }
        if !i.resources.is_empty() {
            s.push_str("\n| Kind | Namespace | Name | Status | Message |\n|---|---|---|---|---|\n");
            for r in &i.resources {
                s.push_str(&format!(
                    "| {} | {} | {} | {} | {} |\n",
                    md(&r.kind),
                    md(&r.namespace),
                    md(&r.name),
                    md(&r.status),
                    md(&r.message)
                ));
            }
        }
        for m in &i.messages {
            s.push('\n');
            for line in escape::message_lines(m) {
                s.push_str(&format!("> {}\n", md(&line)));
            }
        }
        if !i.hints.is_empty() {
            s.push_str("\n**What to do**\n\n");
            for h in &i.hints {
                let text = escape::with_code(&h.text, md, escape::commonmark_code);
                s.push_str(&format!("- **{}**: {text}\n", md(&h.title)));
            }
        }
        for note in &i.notes {
            s.push_str(&format!("\n_Note: {}_\n", md(note)));
        }
        s.push('\n');
    }
    s
}

pub fn html(n: &Notification) -> String {
    use escape::html as esc;
    let mut s = String::from("<html><body style=\"font-family:sans-serif\">");
    s.push_str(&format!("<h2>{}</h2>", esc(&n.title)));
    if !n.reason.is_empty() {
        s.push_str(&format!("<p><em>{}</em></p>", esc(&n.reason)));
    }
    for i in &n.incidents {
        s.push_str(&format!(
            "<h3>[{}] {}</h3><table>",
            esc(&i.state.as_str().to_uppercase()),
            esc(&i.summary)
        ));
        for (k, v) in facts(i) {
            if k == "Argo CD" {
                s.push_str(&format!(
                    "<tr><th align=left>{k}</th><td><a href=\"{}\">{}</a></td></tr>",
                    esc(&v),
                    esc(&v)
                ));
            } else {
                s.push_str(&format!("<tr><th align=left>{k}</th><td>{}</td></tr>", esc(&v)));
            }
        }
        s.push_str("</table>");
        if !i.resources.is_empty() {
            s.push_str("<table border=1 cellpadding=4><tr><th>Kind</th><th>Namespace</th><th>Name</th><th>Status</th><th>Message</th></tr>");
            for r in &i.resources {
                s.push_str(&format!(
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&r.kind),
                    esc(&r.namespace),
                    esc(&r.name),
                    esc(&r.status),
                    esc(&r.message)
                ));
            }
            s.push_str("</table>");
        }
        for m in &i.messages {
            s.push_str(&format!(
                "<blockquote>{}</blockquote>",
                escape::message_lines(m)
                    .iter()
                    .map(|l| esc(l))
                    .collect::<Vec<_>>()
                    .join("<br>")
            ));
        }
        if !i.hints.is_empty() {
            s.push_str("<h4>What to do</h4><ul>");
            for h in &i.hints {
                let text = escape::with_code(&h.text, esc, |c| format!("<code>{}</code>", esc(c)));
                s.push_str(&format!("<li><b>{}</b>: {text}</li>", esc(&h.title)));
            }
            s.push_str("</ul>");
        }
        for note in &i.notes {
            s.push_str(&format!("<p><em>Note: {}</em></p>", esc(note)));
        }
    }
    s.push_str("</body></html>");
    s
}

/// A short status word for titles: FIRING / RESOLVED / UPDATE / TEST.
pub fn status_word(n: &Notification) -> &'static str {
    match n.action {
        Action::Open => "FIRING",
        Action::Update => "FIRING",
        Action::Resolve => "RESOLVED",
        Action::Test => "TEST",
    }
}

/// A coloured marker for chat titles, so the state reads at a glance in a channel.
pub fn status_emoji(n: &Notification) -> &'static str {
    match n.action {
        Action::Resolve => "✅",
        Action::Test => "🧪",
        Action::Open | Action::Update => match n.highest_severity() {
            Severity::Critical => "🔴",
            Severity::Warning => "🟠",
            _ => "🔵",
        },
    }
}

/// The receiver's own `template` rendered, when it has one. A template that does not render fails the delivery
/// for good: retrying renders it the same way.
pub fn custom_text(template: Option<&str>, n: &Notification) -> Result<Option<String>, DeliveryError> {
    template
        .map(|t| with_template(t, n).map_err(|e| DeliveryError::permanent(format!("template: {e}"))))
        .transpose()
}

/// Renders a receiver's own minijinja template with the notification as context (`notification`, `incidents`,
/// `text`). Errors say what is wrong with the template.
pub fn with_template(template: &str, n: &Notification) -> Result<String, String> {
    let mut env = minijinja::Environment::new();
    env.add_template("t", template).map_err(|e| e.to_string())?;
    let tmpl = env.get_template("t").map_err(|e| e.to_string())?;
    tmpl.render(minijinja::context! {
        notification => minijinja::value::Serde(n),
        incidents => minijinja::value::Serde(&n.incidents),
        text => text(n),
    })
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate("héllo", 5), "héllo");
        assert_eq!(truncate("héllo wörld", 5), "héll…");
    }
}
