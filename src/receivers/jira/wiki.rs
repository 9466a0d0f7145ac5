//! Jira wiki markup for Data Center descriptions and comments.

use super::{MAX_MESSAGE_CHARS, MAX_RESOURCES};
use crate::domain::Notification;
use crate::receivers::render;
use crate::receivers::render::{escape, truncate};

pub fn wiki(n: &Notification) -> String {
    // Characters that would start markup (links, mentions, tables, macros, bold, italics, images) are escaped.
    let esc = escape::jira_wiki;
    let mut s = format!("h3. {}\n\n", esc(&n.title));
    if !n.reason.is_empty() {
        s.push_str(&format!("_{}_\n\n", esc(&n.reason)));
    }
    for i in &n.incidents {
        s.push_str(&format!(
            "h4. \\[{}\\] {}\n\n",
            esc(&i.state.as_str().to_uppercase()),
            esc(&i.summary)
        ));
        for (k, v) in render::facts(i) {
            if k == "Argo CD" {
                s.push_str(&format!(
                    "* *{k}*: [{}|{}]\n",
                    esc(&i.app_name),
                    v.replace(['|', ']', ' '], "")
                ));
            } else {
                s.push_str(&format!("* *{k}*: {}\n", esc(&v)));
            }
        }
        if !i.resources.is_empty() {
            s.push_str("\nh5. Resources\n||Kind||Namespace||Name||Status||Message||\n");
            let cell = |c: &str| {
                if c.is_empty() { " ".to_string() } else { esc(c) }
            };
            for r in i.resources.iter().take(MAX_RESOURCES) {
                s.push_str(&format!(
                    "|{}|{}|{}|{}|{}|\n",
                    cell(&r.kind),
                    cell(&r.namespace),
                    cell(&r.name),
                    cell(&r.status),
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
            let m =
                truncate(&escape::message_lines(m).join("\n"), MAX_MESSAGE_CHARS).replace("{noformat}", "{ noformat}");
            s.push_str(&format!("\n{{noformat}}\n{m}\n{{noformat}}\n"));
        }
        if !i.hints.is_empty() {
            s.push_str("\nh5. What to do\n");
            for h in &i.hints {
                s.push_str(&format!("* *{}*: {}\n", esc(&h.title), esc(&h.text)));
            }
        }
        for note in &i.notes {
            s.push_str(&format!("\n_Note: {}_\n", esc(note)));
        }
        s.push_str(&format!("\nHerald fingerprint: {{{{{}}}}}\n", esc(&i.fingerprint)));
    }
    s
}
