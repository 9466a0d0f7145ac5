//! Atlassian Document Format for Jira Cloud descriptions and comments.

use serde_json::{Value, json};

use super::{MAX_MESSAGE_CHARS, MAX_RESOURCES};
use crate::domain::Notification;
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

pub fn document(n: &Notification) -> Value {
    let mut content = vec![heading(3, &n.title)];
    if !n.reason.is_empty() {
        content.push(paragraph(em(&n.reason)));
    }
    for i in &n.incidents {
        content.push(heading(
            4,
            &format!("[{}] {}", i.state.as_str().to_uppercase(), i.summary),
        ));
        let facts: Vec<Vec<Value>> = render::facts(i)
            .into_iter()
            .map(|(k, v)| {
                let mut item = strong(&format!("{k}: "));
                if k == "Argo CD" {
                    item.extend(link(&v, &v));
                } else {
                    item.extend(plain(&v));
                }
                item
            })
            .collect();
        content.push(bullet_list(facts));
        if !i.resources.is_empty() {
            content.push(heading(5, "Resources"));
            let rows = i
                .resources
                .iter()
                .take(MAX_RESOURCES)
                .map(|r| {
                    vec![
                        r.kind.clone(),
                        r.namespace.clone(),
                        r.name.clone(),
                        r.status.clone(),
                        truncate(&r.message, MAX_MESSAGE_CHARS),
                    ]
                })
                .collect();
            content.push(table(&["Kind", "Namespace", "Name", "Status", "Message"], rows));
            if i.resources.len() > MAX_RESOURCES {
                let more = i.resources.len() - MAX_RESOURCES;
                content.push(paragraph(em(&format!("… and {more} more resources"))));
            }
        }
        for m in &i.messages {
            content.push(code_block(&truncate(m, MAX_MESSAGE_CHARS)));
        }
        if !i.hints.is_empty() {
            content.push(heading(5, "What to do"));
            let hints = i
                .hints
                .iter()
                .map(|h| {
                    let mut item = strong(&format!("{}: ", h.title));
                    item.extend(plain(&h.text));
                    item
                })
                .collect();
            content.push(bullet_list(hints));
        }
        for note in &i.notes {
            content.push(paragraph(em(&format!("Note: {note}"))));
        }
        if let Some(url) = &i.app_url {
            let mut p = plain("Open ");
            p.extend(link(&format!("{} in Argo CD", i.app_name), url));
            content.push(paragraph(p));
        }
        let mut p = plain("Herald fingerprint: ");
        p.extend(code(&i.fingerprint));
        content.push(paragraph(p));
    }
    json!({ "version": 1, "type": "doc", "content": content })
}
