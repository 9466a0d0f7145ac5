//! Atlassian Document Format for Jira Cloud descriptions and comments.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{MAX_MESSAGE_CHARS, MAX_RESOURCES};
use crate::domain::{Incident, Notification};
use crate::receivers::render;
use crate::receivers::render::{escape, truncate};

/// ADF refuses empty text nodes: an empty string gives no node at all.
fn text(s: &str, marks: Value) -> Vec<Value> {
    // ADF has no markup to inject, but a line break inside a field would still start a new line.
    let s = &escape::one_line(s);
    if s.is_empty() {
        return vec![];
    }
    if marks.as_array().is_some_and(|m| m.is_empty()) {
        vec![json!({ "type": "text", "text": s })]
    } else {
        vec![json!({ "type": "text", "text": s, "marks": marks })]
    }
}

fn plain(s: &str) -> Vec<Value> {
    text(s, json!([]))
}

fn strong(s: &str) -> Vec<Value> {
    text(s, json!([{ "type": "strong" }]))
}

fn em(s: &str) -> Vec<Value> {
    text(s, json!([{ "type": "em" }]))
}

fn code(s: &str) -> Vec<Value> {
    text(s, json!([{ "type": "code" }]))
}

fn link(s: &str, href: &str) -> Vec<Value> {
    text(s, json!([{ "type": "link", "attrs": { "href": href } }]))
}

/// `s` linked to `href` when there is one, else plain.
fn linked(s: &str, href: Option<&str>) -> Vec<Value> {
    match href {
        Some(u) => link(s, u),
        None => plain(s),
    }
}

fn paragraph(content: Vec<Value>) -> Value {
    json!({ "type": "paragraph", "content": content })
}

fn heading(level: u8, s: &str) -> Value {
    json!({ "type": "heading", "attrs": { "level": level }, "content": plain(s) })
}

fn bullet_list(items: Vec<Vec<Value>>) -> Value {
    let items: Vec<Value> = items
        .into_iter()
        .map(|content| json!({ "type": "listItem", "content": [paragraph(content)] }))
        .collect();
    json!({ "type": "bulletList", "content": items })
}

fn table(header: &[&str], rows: Vec<Vec<String>>) -> Value {
    let cell = |kind: &str, s: &str| json!({ "type": kind, "attrs": {}, "content": [paragraph(plain(s))] });
    let mut out = vec![json!({
        "type": "tableRow",
        "content": header.iter().map(|h| cell("tableHeader", h)).collect::<Vec<_>>(),
    })];
    for row in rows {
        out.push(json!({
            "type": "tableRow",
            "content": row.iter().map(|c| cell("tableCell", c)).collect::<Vec<_>>(),
        }));
    }
    json!({
        "type": "table",
        "attrs": { "isNumberColumnEnabled": false, "layout": "default" },
        "content": out,
    })
}

/// A message, line by line: the one place where text from Argo CD keeps its line breaks.
fn code_block(s: &str) -> Value {
    let lines = escape::message_lines(s).join("\n");
    let content = if lines.is_empty() {
        vec![]
    } else {
        vec![json!({ "type": "text", "text": lines })]
    };
    json!({ "type": "codeBlock", "attrs": {}, "content": content })
}

fn hints(content: &mut Vec<Value>, hints: &[&crate::domain::Hint]) {
    if hints.is_empty() {
        return;
    }
    content.push(heading(5, "What to do"));
    let items = hints
        .iter()
        .map(|h| {
            let mut item = strong(&format!("{}: ", h.title));
            for (k, part) in h.text.split('`').enumerate() {
                item.extend(if k % 2 == 0 { plain(part) } else { code(part) });
            }
            item
        })
        .collect();
    content.push(bullet_list(items));
}

/// The shared layout in ADF: per Application its facts (links as link marks), then per problem a heading, the
/// resources' table, the messages as code blocks, what to do; many Applications as one list.
pub fn document(n: &Notification) -> Value {
    let mut content = vec![heading(3, &n.title)];
    if !n.reason.is_empty() {
        content.push(paragraph(em(&n.reason)));
    }
    if render::detailed(n) {
        for app in render::apps(n) {
            content.push(facts(&app));
            for i in &app.incidents {
                incident(&mut content, i, n.created_at, n.zone);
            }
        }
    } else {
        content.push(summary_list(n));
        hints(&mut content, &render::summary_hints(n));
    }
    json!({ "version": 1, "type": "doc", "content": content })
}

/// Too many Applications to detail: one line per incident, the Application linked.
fn summary_list(n: &Notification) -> Value {
    let mut items = Vec::new();
    for app in render::apps(n) {
        for i in &app.incidents {
            let mut item = strong(&format!("{} ", render::incident_word(i)));
            item.extend(linked(&app.name, app.url));
            item.extend(plain(&format!(": {}", i.status_line(n.created_at, n.zone))));
            items.push(item);
        }
    }
    bullet_list(items)
}

/// An Application's facts, one per line, a link where the fact has one.
fn facts(app: &render::AppView<'_>) -> Value {
    let facts = app
        .facts()
        .into_iter()
        .map(|f| {
            let mut item = strong(&format!("{}: ", f.label));
            item.extend(linked(&f.value, f.link.as_deref()));
            item
        })
        .collect();
    bullet_list(facts)
}

/// One problem in detail, as of `now`: its heading, resources, messages, what to do, notes and fingerprint.
fn incident(content: &mut Vec<Value>, i: &Incident, now: DateTime<Utc>, zone: crate::domain::Zone) {
    content.push(heading(
        4,
        &format!("[{}] {}", render::incident_word(i), i.status_line(now, zone)),
    ));
    resources(content, i);
    for m in &i.messages {
        content.push(code_block(&truncate(m, MAX_MESSAGE_CHARS)));
    }
    hints(content, &i.hints.iter().collect::<Vec<_>>());
    for note in &i.notes {
        content.push(paragraph(em(&format!("Note: {note}"))));
    }
    let mut p = plain("Herald fingerprint: ");
    p.extend(code(&i.fingerprint));
    content.push(paragraph(p));
}

/// The incident's resources as a table (the first [`MAX_RESOURCES`], and how many more), then their links.
fn resources(content: &mut Vec<Value>, i: &Incident) {
    if i.resources.is_empty() {
        return;
    }
    let shown = || i.resources.iter().take(MAX_RESOURCES);
    let rows = shown()
        .map(|r| {
            let (what, status) = render::resource_line(r);
            vec![what, status, truncate(&r.message, MAX_MESSAGE_CHARS)]
        })
        .collect();
    content.push(table(&["Resource", "Status", "Message"], rows));
    if i.resources.len() > MAX_RESOURCES {
        let more = i.resources.len() - MAX_RESOURCES;
        content.push(paragraph(em(&format!("… and {more} more resources"))));
    }
    let links: Vec<Vec<Value>> = shown()
        .filter_map(|r| r.url.as_deref().map(|u| link(&render::resource_line(r).0, u)))
        .collect();
    if !links.is_empty() {
        content.push(paragraph(plain("In Argo CD:")));
        content.push(bullet_list(links));
    }
}
