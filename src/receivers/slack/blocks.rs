//! Block Kit: a notification as a header, the shared layout's sections (each Application's facts, then one section
//! per problem; or one line per problem for many Applications; or the template's text) and a context line, within
//! Slack's limits, with text from Argo CD escaped so it cannot inject mrkdwn (`<!channel>`, links). With
//! interactivity, each firing incident of a first message or an update gets its buttons (an `actions` block).

use serde_json::{Value, json};

use crate::domain::{Action, Body, Incident, IncidentState, Notification};
use crate::receivers::render;
use crate::receivers::render::AppView;
use crate::receivers::render::{escape, status_emoji, truncate};

/// The `action_id` of the "Acknowledge" button (a click on it is read by `pipeline::slack`).
pub const ACK_ACTION_ID: &str = "herald_ack";
/// The `action_id` of the "Silence 1 h" button.
pub const SILENCE_ACTION_ID: &str = "herald_silence_1h";

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

/// Slack counts the header's 150 characters in UTF-16 units (an emoji is two): a margin for what else it counts.
const HEADER_UTF16_UNITS: usize = MAX_HEADER_TEXT - 4;

fn header(n: &Notification) -> Value {
    let text = format!("{} {}: {}", status_emoji(n), render::status_word(n), esc(&n.title));
    json!({
        "type": "header",
        "text": {
            "type": "plain_text",
            "text": render::truncate_utf16(&text, HEADER_UTF16_UNITS),
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
    parts.push(format!("Herald · {}", n.zone.stamp_seconds(n.created_at)));
    json!({
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": truncate(&parts.join(" · "), MAX_CONTEXT_TEXT)}],
    })
}

/// A link Herald makes, `<url|text>`: the text escaped, and nothing in the URL that would end the link.
fn link(text: &str, url: &str) -> String {
    let url = url.replace('|', "%7C").replace('>', "%3E").replace('<', "%3C");
    format!("<{url}|{}>", esc(text))
}

fn hints_text(s: &mut String, hints: &[&crate::domain::Hint]) {
    if hints.is_empty() {
        return;
    }
    s.push_str("*What to do*\n");
    for h in hints {
        s.push_str(&format!(
            "• *{}*: {}\n",
            esc(&h.title),
            escape::with_code(&h.text, esc, code)
        ));
    }
}

/// One Application: its link and facts, with the button to open it.
fn app_section(app: &AppView<'_>) -> Value {
    let facts = app.facts();
    let mut s = String::new();
    for (k, f) in facts.iter().enumerate() {
        let value = match &f.link {
            Some(u) => link(&f.value, u),
            None => esc(&f.value),
        };
        if k == 0 {
            s.push_str(&format!("*{value}*\n"));
        } else {
            s.push_str(&format!("*{}:* {value}\n", f.label));
        }
    }
    let mut block = section(&s);
    // A button needs an http(s) URL of at most 3000 characters; otherwise the section goes without one.
    if let Some(u) = app.url
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

/// Buttons are shown for at most this many incidents of a list (the rest are acted on in Herald).
const MAX_BUTTON_INCIDENTS: usize = 5;
/// Slack cuts a button's text at 75 characters.
const MAX_BUTTON_TEXT: usize = 75;

/// The incidents of `n` that get buttons: firing problems (not informational ones) of a first message or an
/// update. Never on a resolve, an acknowledgement's edit, a test or a digest.
fn with_buttons(n: &Notification) -> impl Iterator<Item = &Incident> {
    let shown = matches!(n.action, Action::Open | Action::Update) && n.digest().is_none();
    (n.incidents().iter())
        .filter(move |_| shown)
        .filter(|i| i.state == IncidentState::Firing && !i.kind.is_informational())
}

/// The `actions` block of one incident: "Acknowledge" and "Silence 1 h", each with the incident's id as its value
/// (what `POST /v1/slack/interactions` acts on). `about` names the incident on the buttons, for a list.
pub(super) fn buttons(i: &Incident, about: Option<&str>) -> Value {
    let text = |label: &str| match about {
        Some(a) => truncate(&format!("{label}: {a}"), MAX_BUTTON_TEXT),
        None => label.to_string(),
    };
    json!({
        "type": "actions",
        "block_id": format!("herald_incident_{}", i.id),
        "elements": [
            {
                "type": "button",
                "action_id": ACK_ACTION_ID,
                "text": {"type": "plain_text", "text": text("Acknowledge"), "emoji": false},
                "value": i.id.to_string(),
                "style": "primary",
            },
            {
                "type": "button",
                "action_id": SILENCE_ACTION_ID,
                "text": {"type": "plain_text", "text": text("Silence 1 h"), "emoji": false},
                "value": i.id.to_string(),
            },
        ],
    })
}

/// Buttons for the first [`MAX_BUTTON_INCIDENTS`] incidents with buttons, each naming its Application and problem.
fn listed_buttons(n: &Notification) -> Vec<Value> {
    with_buttons(n)
        .take(MAX_BUTTON_INCIDENTS)
        .map(|i| buttons(i, Some(&format!("{} {}", i.app_title(), i.problem()))))
        .collect()
}

/// One problem: its line, then why (resources, messages) and what to do.
fn incident_text(i: &Incident, now: chrono::DateTime<chrono::Utc>, zone: crate::domain::Zone) -> String {
    let mut s = format!("*[{}]* {}\n", render::incident_word(i), esc(&i.status_line(now, zone)));
    for r in &i.resources {
        let (what, status) = render::resource_line(r);
        let what = match &r.url {
            Some(u) => link(&what, u),
            None => code(&what),
        };
        s.push_str(&format!("• {what}: {}", esc(&status)));
        if !r.message.is_empty() {
            s.push_str(&format!(" — {}", esc(&r.message)));
        }
        s.push('\n');
    }
    for m in &i.messages {
        for line in escape::message_lines(m) {
            s.push_str(&format!("> {}\n", esc(&line)));
        }
    }
    hints_text(&mut s, &i.hints.iter().collect::<Vec<_>>());
    for note in &i.notes {
        s.push_str(&format!("_Note: {}_\n", esc(note)));
    }
    s
}

/// The longest line of a list: a section holds whole lines, so each section is at least this much under its limit.
const MAX_LIST_LINE: usize = 1000;

/// Many Applications: one line per problem (shorter lines when they do not all fit, then a count of the rest), in
/// sections of at most 3000 characters that leave room for the header, what to do and the context line.
fn list_sections(n: &Notification) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut text = String::new();
    for app in render::apps(n) {
        let name = match app.url {
            Some(u) => link(&app.name, u),
            None => esc(&app.name),
        };
        for i in &app.incidents {
            let word = render::incident_word(i);
            let full = format!("• *{word}* {name}: {}", esc(&i.status_line(n.created_at, n.zone)));
            let short = format!("• *{word}* {name}");
            rows.push(render::Row {
                full: truncate(&full, MAX_LIST_LINE),
                short: truncate(&short, MAX_LIST_LINE),
            });
        }
    }
    let budget = (MAX_BLOCKS - 4) * (MAX_SECTION_TEXT - MAX_LIST_LINE);
    let status = n.status_url.as_deref().map(|u| link("the status page", u));
    let more = |hidden| format!("• {}", render::more_words(hidden, status.as_deref()));
    for line in render::fit_rows(&rows, budget, |l| l.chars().count(), more) {
        text.push_str(&line);
        text.push('\n');
    }
    let mut out: Vec<Value> = chunks(&text, MAX_SECTION_TEXT).iter().map(|c| section(c)).collect();
    if let Some(links) = render::group_links(n, link) {
        out.push(section(&format!("*{links}*")));
    }
    let mut hints = String::new();
    hints_text(&mut hints, &render::summary_hints(n));
    if !hints.is_empty() {
        out.push(section(&hints));
    }
    out
}

/// The layout's sections: per Application its facts, then one section per problem (with its buttons under it).
fn detailed_sections(n: &Notification, with: bool) -> Vec<Value> {
    let buttoned: Vec<i64> = if with {
        with_buttons(n).map(|i| i.id).collect()
    } else {
        Vec::new()
    };
    let mut out = Vec::new();
    for app in render::apps(n) {
        out.push(app_section(&app));
        for i in &app.incidents {
            out.push(section(&incident_text(i, n.created_at, n.zone)));
            if buttoned.contains(&i.id) {
                out.push(buttons(i, None));
            }
        }
    }
    out
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

/// Header, the layout's sections (or the template's text), a context line; never more than 50 blocks. With
/// `with_buttons` (interactivity), each firing incident's buttons.
pub(super) fn blocks(n: &Notification, templated: Option<&str>, with_buttons: bool) -> Vec<Value> {
    if let (Body::Digest(d), None) = (&n.body, templated) {
        return crate::receivers::render::digest::slack_blocks(d);
    }
    let room = MAX_BLOCKS - 2; // header + context
    let listed = |mut body: Vec<Value>| {
        if with_buttons {
            body.extend(listed_buttons(n));
        }
        body
    };
    let mut body: Vec<Value> = match templated {
        Some(t) => listed(chunks(t, MAX_SECTION_TEXT).iter().map(|p| section(p)).collect()),
        None if render::detailed(n) => detailed_sections(n, with_buttons),
        None => listed(list_sections(n)),
    };
    if body.len() > room {
        let hidden = body.len() - (room - 1);
        body.truncate(room - 1);
        body.push(section(&format!(
            "…and {hidden} more sections: open Argo CD for the rest"
        )));
    }
    let mut out = Vec::with_capacity(body.len() + 2);
    out.push(header(n));
    out.append(&mut body);
    out.push(context(n));
    out
}

/// The fallback `text` shown in notifications and to screen readers: title, reason and one line per incident.
pub(super) fn fallback_text(n: &Notification) -> String {
    if let Body::Digest(d) = &n.body {
        return truncate(&esc(&d.title()), MAX_FALLBACK_TEXT);
    }
    let mut s = format!("{}: {}", render::status_word(n), esc(&n.title));
    if !n.reason.is_empty() {
        s.push_str(&format!(" ({})", esc(&n.reason)));
    }
    for app in render::apps(n) {
        for i in &app.incidents {
            s.push_str(&format!(
                "\n• [{}] {}: {}",
                render::incident_word(i),
                esc(&app.name),
                esc(&i.status_line(n.created_at, n.zone))
            ));
        }
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
