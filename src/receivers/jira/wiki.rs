//! Jira wiki markup for Data Center descriptions and comments.

use super::{MAX_MESSAGE_CHARS, MAX_RESOURCES};
use crate::domain::Notification;
use crate::receivers::render;
use crate::receivers::render::{escape, truncate};

/// A link Herald makes: `[text|url]`, nothing in the URL that would end it.
fn link(text: &str, url: &str) -> String {
    format!("[{}|{}]", escape::jira_wiki(text), url.replace(['|', ']', ' '], ""))
}

fn hints(s: &mut String, hints: &[&crate::domain::Hint]) {
    if hints.is_empty() {
        return;
    }
    s.push_str("\nh5. What to do\n");
    for h in hints {
        let text = escape::with_code(&h.text, escape::jira_wiki, |c| {
            format!("{{{{{}}}}}", escape::jira_wiki(c))
        });
        s.push_str(&format!("* *{}*: {text}\n", escape::jira_wiki(&h.title)));
    }
}

/// The shared layout in Jira wiki markup (Data Center).
pub fn wiki(n: &Notification) -> String {
    // Characters that would start markup (links, mentions, tables, macros, bold, italics, images) are escaped.
    let esc = escape::jira_wiki;
    let now = n.created_at;
    let mut s = format!("h3. {}\n\n", esc(&n.title));
    if !n.reason.is_empty() {
        s.push_str(&format!("_{}_\n\n", esc(&n.reason)));
    }
    if !render::detailed(n) {
        s.push_str(&render::summary_list(n, link, esc, |i, name, status| {
            format!("* *{}* {name}: {status}\n", render::incident_word(i))
        }));
        hints(&mut s, &render::summary_hints(n));
        return s;
    }
    for app in render::apps(n) {
        for f in app.facts() {
            let value = render::linked(&f.value, f.link.as_deref(), link, esc);
            s.push_str(&format!("* *{}*: {value}\n", f.label));
        }
        for i in &app.incidents {
            s.push_str(&format!(
                "\nh4. \\[{}\\] {}\n\n",
                render::incident_word(i),
                esc(&i.status_line(now, n.zone))
            ));
            if !i.resources.is_empty() {
                s.push_str("||Resource||Status||Message||\n");
                let cell = |c: &str| if c.is_empty() { " ".to_string() } else { esc(c) };
                for r in i.resources.iter().take(MAX_RESOURCES) {
                    let (what, status) = render::resource_line(r);
                    let what = render::linked(&what, r.url.as_deref(), link, cell);
                    s.push_str(&format!(
                        "|{what}|{}|{}|\n",
                        cell(&status),
                        cell(&truncate(&r.message, MAX_MESSAGE_CHARS))
                    ));
                }
                if i.resources.len() > MAX_RESOURCES {
                    s.push_str(&format!(
                        "_… and {} more resources_\n",
                        i.resources.len() - MAX_RESOURCES
                    ));
                }
            }
            for m in &i.messages {
                let m = truncate(&escape::message_lines(m).join("\n"), MAX_MESSAGE_CHARS)
                    .replace("{noformat}", "{ noformat}");
                s.push_str(&format!("\n{{noformat}}\n{m}\n{{noformat}}\n"));
            }
            hints(&mut s, &i.hints.iter().collect::<Vec<_>>());
            for note in &i.notes {
                s.push_str(&format!("\n_Note: {}_\n", esc(note)));
            }
            s.push_str(&format!("\nHerald fingerprint: {{{{{}}}}}\n", esc(&i.fingerprint)));
        }
    }
    s
}
