//! The message text in Telegram's HTML (`parse_mode: HTML`), in the shared layout: only the tags Telegram
//! supports (`b`, `i`, `a href`, `code`, `pre`), every text from Argo CD through `escape::telegram`, and at most
//! 4,096 characters as Telegram counts them (the text once its tags are read): a list of problems is written in
//! shorter lines and then cut with a count, and a longer message loses its last lines, counted.

use crate::domain::{Body, Hint, Notification};
use crate::receivers::render::{self, escape, status_emoji, status_word, telegram_len};

/// `sendMessage` and `editMessageText` take 1–4,096 characters of text after entities parsing.
pub const MAX_TEXT: usize = 4096;
/// What a list of problems or a digest may take, with room for the title and what to do.
const LIST_BUDGET: usize = 3600;

/// A link Herald makes: the URL as an attribute, the text escaped.
fn link(text: &str, url: &str) -> String {
    format!("<a href=\"{}\">{}</a>", escape::html(url), escape::telegram(text))
}

fn code(c: &str) -> String {
    format!("<code>{}</code>", escape::telegram(c))
}

fn hints(hints: &[&Hint]) -> Vec<String> {
    if hints.is_empty() {
        return Vec::new();
    }
    let mut out = vec!["<b>What to do</b>\n".to_string()];
    for h in hints {
        let text = escape::with_code(&h.text, escape::telegram, code);
        out.push(format!("• <b>{}</b>: {text}\n", escape::telegram(&h.title)));
    }
    out
}

/// The blocks (each a whole line or a whole `<pre>`, so a cut never splits a tag) that fit in `budget`, the rest
/// counted in a last line.
pub fn fit_blocks(blocks: &[String], budget: usize) -> String {
    let total: usize = blocks.iter().map(|b| telegram_len(b)).sum();
    if total <= budget {
        return blocks.concat();
    }
    let more = |hidden: usize| format!("… and {hidden} more lines\n");
    let mut out = String::new();
    let mut used = 0;
    for (k, b) in blocks.iter().enumerate() {
        let hidden = blocks.len() - k;
        if used + telegram_len(b) + telegram_len(&more(hidden)) > budget {
            out.push_str(&more(hidden));
            return out;
        }
        used += telegram_len(b);
        out.push_str(b);
    }
    out
}

/// The message for `n`: the status and title, why now, then each Application (its facts, each problem with its
/// resources, messages and what to do), or one line per problem when there are many; a digest as its tables.
pub fn text(n: &Notification) -> String {
    use escape::telegram as t;
    let header = format!("{} <b>{}: {}</b>\n", status_emoji(n), status_word(n), t(&n.title));
    if let Body::Digest(d) = &n.body {
        let body = render::digest::telegram(d, LIST_BUDGET);
        return fit_blocks(&[format!("{} ", status_emoji(n)), body], MAX_TEXT);
    }
    let mut blocks = vec![header];
    if !n.reason.trim().is_empty() {
        blocks.push(format!("<i>{}</i>\n", t(&n.reason)));
    }
    let now = n.created_at;
    if !render::detailed(n) {
        let mut what_to_do = hints(&render::summary_hints(n));
        if let Some(links) = render::group_links(n, link) {
            what_to_do.insert(0, format!("<b>{links}</b>\n"));
        }
        let used: usize = blocks.iter().chain(&what_to_do).map(|b| telegram_len(b)).sum();
        let budget = MAX_TEXT.saturating_sub(used + 20).min(LIST_BUDGET);
        let status = n.status_url.as_deref().map(|u| link("the status page", u));
        let list = render::summary_list_within(
            n,
            link,
            t,
            |i, name, status| match status {
                "" => format!("• <b>{}</b> {name}\n", render::incident_word(i)),
                _ => format!("• <b>{}</b> {name}: {status}\n", render::incident_word(i)),
            },
            budget,
            telegram_len,
            |hidden| format!("• {}\n", render::more_words(hidden, status.as_deref())),
        );
        blocks.push("\n".into());
        blocks.push(list);
        blocks.extend(what_to_do);
        return fit_blocks(&blocks, MAX_TEXT);
    }
    for app in render::apps(n) {
        blocks.push("\n".into());
        for f in app.facts() {
            let value = render::linked(&f.value, f.link.as_deref(), link, t);
            blocks.push(format!("{}: {value}\n", t(&f.label)));
        }
        for i in &app.incidents {
            blocks.push(format!(
                "\n<b>[{}] {}</b>\n",
                render::incident_word(i),
                t(&i.status_line(now, n.zone))
            ));
            for r in &i.resources {
                let (what, status) = render::resource_line(r);
                let what = render::linked(&what, r.url.as_deref(), link, code);
                let mut line = format!("• {what}: {}", t(&status));
                if !r.message.is_empty() {
                    line.push_str(&format!(" — {}", t(&r.message)));
                }
                blocks.push(line + "\n");
            }
            for m in &i.messages {
                let lines: Vec<String> = escape::message_lines(m).iter().map(|l| t(l)).collect();
                if !lines.is_empty() {
                    blocks.push(format!("<pre>{}</pre>\n", lines.join("\n")));
                }
            }
            blocks.extend(hints(&i.hints.iter().collect::<Vec<_>>()));
            for note in &i.notes {
                blocks.push(format!("<i>Note: {}</i>\n", t(note)));
            }
        }
    }
    fit_blocks(&blocks, MAX_TEXT)
}

/// The receiver's template, its values escaped for Telegram's HTML; cut by whole lines to the limit.
pub fn templated(text: &str) -> String {
    let lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    fit_blocks(&lines, MAX_TEXT)
}
