//! Block Kit: a notification as a header, one section per incident (or the template's text) and a context line,
//! within Slack's limits, with text from Argo CD escaped so it cannot inject mrkdwn (`<!channel>`, links).

use serde_json::{Value, json};

use crate::domain::{Incident, Notification};
use crate::receivers::render;
use crate::receivers::render::{escape, status_emoji, truncate};

/// Block Kit limits: 50 blocks per message, 3000 characters per section text, 150 per header.
pub(super) const MAX_BLOCKS: usize = 50;
pub(super) const MAX_SECTION_TEXT: usize = 3000;
pub(super) const MAX_HEADER_TEXT: usize = 150;
const MAX_CONTEXT_TEXT: usize = 2000;
/// Slack truncates `text` beyond 40,000 characters; the fallback stays far below.
pub(super) const MAX_FALLBACK_TEXT: usize = 3000;
pub(super) const MAX_TEMPLATE_TEXT: usize = 39000;

/// A message ready to send: `text` is the notification fallback, `blocks` what people see.
pub(super) struct Message {
    pub(super) text: String,
    pub(super) blocks: Vec<Value>,
}

/// One field of text from Argo CD in mrkdwn: one line, `&`, `<` and `>` as entities, mentions broken.
pub(super) fn esc(s: &str) -> String {
    escape::mrkdwn(s)
}

/// A field as inline code: mrkdwn still needs the entities there, and a backtick would end the span.
fn code(s: &str) -> String {
    format!("`{}`", esc(s).replace('`', "'"))
}

fn header(n: &Notification) -> Value {
    json!({
        "type": "header",
        "text": {
            "type": "plain_text",
            "text": truncate(&format!("{} {}: {}", status_emoji(n), render::status_word(n), esc(&n.title)), MAX_HEADER_TEXT),
            "emoji": true,
        },
    })
}

pub(super) fn section(text: &str) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate(text, MAX_SECTION_TEXT)}})
}

fn context(n: &Notification) -> Value {
    let mut parts = Vec::new();
    if !n.reason.is_empty() {
        parts.push(esc(&n.reason));
    }
    parts.push(format!("Herald · {}", n.created_at.format("%Y-%m-%d %H:%M:%S UTC")));
    json!({
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": truncate(&parts.join(" · "), MAX_CONTEXT_TEXT)}],
    })
}

fn incident_text(i: &Incident) -> String {
    let mut s = format!("*[{}] {}*\n", esc(&i.state.as_str().to_uppercase()), esc(&i.summary));
    for (k, v) in render::facts(i) {
        if k != "Argo CD" {
            s.push_str(&format!("*{k}:* {}\n", code(&v)));
        }
    }
    if !i.resources.is_empty() {
        s.push_str("*Resources:*\n");
        for r in &i.resources {
            s.push_str(&format!("• {} ({})", code(&r.display()), esc(&r.status)));
            if !r.message.is_empty() {
                s.push_str(&format!(": {}", esc(&r.message)));
            }
            s.push('\n');
        }
    }
    for m in &i.messages {
        for line in escape::message_lines(m) {
            s.push_str(&format!("> {}\n", esc(&line)));
        }
    }
    if !i.hints.is_empty() {
        s.push_str("*What to do*\n");
        for h in &i.hints {
            s.push_str(&format!(
                "• *{}*: {}\n",
                esc(&h.title),
                escape::with_code(&h.text, esc, code)
            ));
        }
    }
    for note in &i.notes {
        s.push_str(&format!("_Note: {}_\n", esc(note)));
    }
    s
}

fn incident_section(i: &Incident) -> Value {
    let mut block = section(&incident_text(i));
    // A button needs an http(s) URL of at most 3000 characters; otherwise the section goes without one.
    if let Some(u) = &i.app_url
        && (u.starts_with("https://") || u.starts_with("http://"))
        && u.len() <= 3000
    {
        block["accessory"] = json!({
            "type": "button",
            "text": {"type": "plain_text", "text": "Open in Argo CD"},
            "url": u,
        });
    }
    block
}

/// Splits text into pieces of at most `max` characters, at line ends when possible.
pub(super) fn chunks(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.split_inclusive('\n') {
        if cur.chars().count() + line.chars().count() > max && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        if line.chars().count() > max {
            let chars: Vec<char> = line.chars().collect();
            for piece in chars.chunks(max) {
                out.push(piece.iter().collect());
            }
        } else {
            cur.push_str(line);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

/// Header, one section per incident (or the template's text), a context line; never more than 50 blocks.
pub(super) fn blocks(n: &Notification, templated: Option<&str>) -> Vec<Value> {
    let room = MAX_BLOCKS - 2; // header + context
    let mut body: Vec<Value> = match templated {
        Some(t) => {
            let mut pieces = chunks(t, MAX_SECTION_TEXT);
            pieces.truncate(room);
            pieces.iter().map(|p| section(p)).collect()
        }
        None if n.incidents.len() <= room => n.incidents.iter().map(incident_section).collect(),
        None => {
            let shown = room - 1;
            let mut v: Vec<Value> = n.incidents[..shown].iter().map(incident_section).collect();
            v.push(section(&format!("…and {} more", n.incidents.len() - shown)));
            v
        }
    };
    let mut out = Vec::with_capacity(body.len() + 2);
    out.push(header(n));
    out.append(&mut body);
    out.push(context(n));
    out
}

/// The fallback `text` shown in notifications and to screen readers: title, reason and one line per incident.
pub(super) fn fallback_text(n: &Notification) -> String {
    let mut s = format!("{}: {}", render::status_word(n), esc(&n.title));
    if !n.reason.is_empty() {
        s.push_str(&format!(" ({})", esc(&n.reason)));
    }
    for i in &n.incidents {
        s.push_str(&format!(
            "\n• [{}] {}",
            i.state.as_str().to_uppercase(),
            esc(&i.summary)
        ));
    }
    truncate(&s, MAX_FALLBACK_TEXT)
}

/// The short reply posted in the thread when the first message has been edited to show the resolution.
pub(super) fn resolved_reply(n: &Notification) -> Message {
    let mut s = format!("{} *{}*: {}", status_emoji(n), render::status_word(n), esc(&n.title));
    if !n.reason.is_empty() {
        s.push_str(&format!("\n_{}_", esc(&n.reason)));
    }
    Message {
        text: truncate(
            &format!("{}: {}", render::status_word(n), esc(&n.title)),
            MAX_FALLBACK_TEXT,
        ),
        blocks: vec![section(&s)],
    }
}
