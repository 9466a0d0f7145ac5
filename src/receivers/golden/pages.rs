//! The Slack and e-mail goldens as a reader sees them: HTML pages (Block Kit drawn roughly as Slack draws it, the
//! e-mail as a mail client shows its HTML part under its subject) and their screenshots by headless chromium, in
//! `docs/messages/`. Written only when blessing.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::domain::Notification;
use crate::receivers::email::Email;
use crate::receivers::render;

const SLACK_STYLE: &str = "body{font-family:Lato,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;font-size:15px;\
    color:#1d1c1d;margin:24px;max-width:760px}.msg{border-left:4px solid #e01e5a;padding:4px 16px}\
    .header{font-size:18px;font-weight:900;margin:6px 0 10px}.section{margin:8px 0;line-height:1.45}\
    .button{float:right;border:1px solid #bbb;border-radius:4px;padding:3px 10px;color:#1d1c1d;\
    text-decoration:none;font-weight:700;font-size:13px}.context{color:#616061;font-size:12px;margin-top:10px}\
    code{color:#e01e5a;background:#f6f6f6;border:1px solid #ddd;border-radius:3px;padding:0 3px;font-size:12px}\
    blockquote{border-left:4px solid #ddd;margin:4px 0;padding-left:10px;color:#444}a{color:#1264a3}";

/// Slack mrkdwn as HTML: `<url|text>` links, `*bold*`, `_italic_`, `` `code` ``, `> ` quotes. The text is already
/// entity-escaped (mrkdwn asks for the same entities as HTML), so only Herald's own `<…>` links are markup.
fn mrkdwn(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let (quote, line) = match line.strip_prefix("> ") {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        let mut html = String::new();
        let mut rest = line;
        while let Some(start) = rest.find('<') {
            html.push_str(&inline(&rest[..start]));
            let Some(end) = rest[start..].find('>') else {
                break;
            };
            let link = &rest[start + 1..start + end];
            let (url, label) = link.split_once('|').unwrap_or((link, link));
            html.push_str(&format!("<a href=\"{url}\">{}</a>", inline(label)));
            rest = &rest[start + end + 1..];
        }
        html.push_str(&inline(rest));
        if quote {
            out.push_str(&format!("<blockquote>{html}</blockquote>"));
        } else {
            out.push_str(&format!("{html}<br>"));
        }
    }
    out
}

/// `*bold*`, `_italic_` and `` `code` `` within one line.
fn inline(s: &str) -> String {
    let mut out = String::new();
    let mut open = [false; 3];
    let marks = [('*', "b"), ('_', "i"), ('`', "code")];
    for c in s.chars() {
        match marks.iter().position(|(m, _)| *m == c) {
            Some(k) if k == 2 || !open[2] => {
                out.push_str(&format!("<{}{}>", if open[k] { "/" } else { "" }, marks[k].1));
                open[k] = !open[k];
            }
            _ => out.push(c),
        }
    }
    for (k, is_open) in open.iter().enumerate() {
        if *is_open {
            out.push_str(&format!("</{}>", marks[k].1));
        }
    }
    out
}

fn slack_page(message: &Value) -> String {
    let mut body = String::new();
    for block in message["blocks"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("header") => body.push_str(&format!(
                "<div class=header>{}</div>",
                block["text"]["text"].as_str().unwrap_or_default()
            )),
            Some("section") => {
                let button = block["accessory"]["url"]
                    .as_str()
                    .map(|u| format!("<a class=button href=\"{u}\">Open in Argo CD</a>"))
                    .unwrap_or_default();
                body.push_str(&format!(
                    "<div class=section>{button}{}</div>",
                    mrkdwn(block["text"]["text"].as_str().unwrap_or_default())
                ));
            }
            Some("context") => body.push_str(&format!(
                "<div class=context>{}</div>",
                mrkdwn(block["elements"][0]["text"].as_str().unwrap_or_default())
            )),
            _ => {}
        }
    }
    format!(
        "<!doctype html><html><head><meta charset=utf-8><title>Slack</title><style>{SLACK_STYLE}</style></head>\
         <body><div class=msg>{body}</div></body></html>"
    )
}

fn email_page(n: &Notification) -> String {
    let subject = render::escape::html(&Email::subject(n));
    let html = render::html(n);
    let inner = html
        .trim_start_matches("<html>")
        .trim_end_matches("</html>")
        .replacen("<body", "<div", 1)
        .replace("</body>", "</div>");
    format!(
        "<!doctype html><html><head><meta charset=utf-8><title>{subject}</title></head><body style=\"margin:24px\">\
         <div style=\"font-family:sans-serif;border-bottom:1px solid #ddd;padding-bottom:8px;margin-bottom:12px\">\
         <b>Subject:</b> {subject}<br><b>From:</b> Herald &lt;herald@example.com&gt;</div>{inner}</body></html>"
    )
}

/// Headless chromium's screenshot of `html` (see the field notes for the flags that keep it off the network).
fn screenshot(html: &Path, png: &Path) {
    let profile = tempfile::tempdir().expect("a profile folder");
    let status = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=900,1400")
        .arg(format!("file://{}", html.display()))
        .output();
    match status {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("chromium failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => panic!("blessing draws the pages with chromium (`apt-get install -y chromium`): {e}"),
    }
}

/// Writes `docs/messages/<situation>.slack.html`, `.email.html` and their `.png` screenshots.
pub(super) fn write(situation: &str, n: &Notification) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/messages");
    std::fs::create_dir_all(&dir).expect("docs/messages");
    let pages = [
        ("slack", slack_page(&crate::receivers::slack::preview(n))),
        ("email", email_page(n)),
    ];
    for (target, page) in pages {
        let html = dir.join(format!("{situation}.{target}.html"));
        std::fs::write(&html, page).expect("a page");
        screenshot(&html, &dir.join(format!("{situation}.{target}.png")));
    }
}
