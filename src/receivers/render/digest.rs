//! How a [`Digest`] reads, for every receiver that gets one: a table per part (OutOfSync, pending prunes, firing,
//! silences, dead deliveries), written as plain text, CommonMark, HTML (a real table), Slack blocks, a Teams
//! Adaptive Card or Google Chat text. Every cell comes from Argo CD or the API and goes through the target's
//! escaping (`receivers::render::escape`); times are shown in the team's time zone.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::domain::Digest;
use crate::domain::digest::time_zone;
use crate::domain::notification::duration_words;
use crate::receivers::render::{self, escape};

/// One part of a digest: a heading, the column names and the rows (raw text, escaped by the renderer).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub heading: String,
    pub columns: &'static [&'static str],
    pub rows: Vec<Vec<String>>,
    /// The Argo CD link of each row's first cell, when there is one.
    pub links: Vec<Option<String>>,
}

/// The line said when there is nothing to report and the team asked to hear it (`when_empty: all_green`).
pub fn all_green_line(d: &Digest) -> String {
    format!(
        "All green for team {}: nothing OutOfSync, nothing waiting to be pruned, no incident firing, no dead delivery.",
        d.team
    )
}

/// `Fri 2026-10-23 09:00 CEST`, in the digest's time zone (UTC when it does not parse).
fn local(d: &Digest, t: DateTime<Utc>) -> String {
    match time_zone(&d.timezone) {
        Ok(tz) => t.with_timezone(&tz).format("%a %Y-%m-%d %H:%M %Z").to_string(),
        Err(_) => t.format("%a %Y-%m-%d %H:%M UTC").to_string(),
    }
}

/// `since Fri 2026-10-23 09:00 CEST (2 d 3 h)`.
fn since(d: &Digest, t: DateTime<Utc>) -> String {
    format!("since {} ({})", local(d, t), duration_words(d.at - t))
}

fn short_rev(r: &str) -> String {
    crate::domain::revision::short_revision(r, crate::domain::revision::SHOWN).to_string()
}

/// The parts of `d` that have something in them, in reading order.
pub fn tables(d: &Digest) -> Vec<Table> {
    let parts = [
        Table {
            heading: format!("Applications OutOfSync ({})", d.out_of_sync.len()),
            columns: &["Application", "OutOfSync", "Revision", "To prune"],
            rows: (d.out_of_sync.iter())
                .map(|a| {
                    vec![
                        a.app.clone(),
                        since(d, a.since),
                        a.revision.as_deref().map(short_rev).unwrap_or_default(),
                        match a.pruning {
                            0 => String::new(),
                            n => format!("{n} to prune"),
                        },
                    ]
                })
                .collect(),
            links: d.out_of_sync.iter().map(|a| a.url.clone()).collect(),
        },
        Table {
            heading: format!("Resources waiting to be pruned ({})", d.pending_prunes.len()),
            columns: &["Resource", "Application", "Waiting"],
            rows: (d.pending_prunes.iter())
                .map(|p| vec![p.resource.clone(), p.app.clone(), since(d, p.since)])
                .collect(),
            links: Vec::new(),
        },
        Table {
            heading: format!("Incidents firing ({})", d.firing.len()),
            columns: &["Application", "Problem", "Firing"],
            rows: (d.firing.iter())
                .map(|i| vec![i.app.clone(), i.problem.clone(), since(d, i.since)])
                .collect(),
            links: Vec::new(),
        },
        Table {
            heading: format!("Silences ({})", d.silences.len()),
            columns: &["Matchers", "Ends", "Comment", "By"],
            rows: (d.silences.iter())
                .map(|s| {
                    let mut ends = local(d, s.ends_at);
                    if s.ends_before_next {
                        ends.push_str(" (before the next digest)");
                    }
                    vec![s.matchers.clone(), ends, s.comment.clone(), s.created_by.clone()]
                })
                .collect(),
            links: Vec::new(),
        },
        Table {
            heading: format!("Dead deliveries ({})", d.dead.len()),
            columns: &["Receiver", "Message", "Error", "Queued"],
            rows: (d.dead.iter())
                .map(|x| {
                    vec![
                        x.receiver.clone(),
                        x.title.clone(),
                        x.error.clone(),
                        local(d, x.created_at),
                    ]
                })
                .collect(),
            links: Vec::new(),
        },
    ];
    parts.into_iter().filter(|t| !t.rows.is_empty()).collect()
}

/// A part's rows as the target writes them: `cell(text, link)` writes one cell (the Application's name linked
/// when there is a link); the shorter line is the first cell alone.
fn table_rows(t: &Table, cell: &dyn Fn(&str, Option<&str>) -> String, bullet: &str) -> Vec<render::Row> {
    (t.rows.iter().enumerate())
        .map(|(k, row)| {
            let link = t.links.get(k).and_then(Option::as_deref);
            let cells: Vec<String> = (row.iter().enumerate())
                .filter(|(_, c)| !c.is_empty())
                .map(|(j, c)| cell(c, link.filter(|_| j == 0)))
                .collect();
            render::Row {
                full: format!("{bullet}{}", cells.join(" — ")),
                short: format!("{bullet}{}", cells.first().cloned().unwrap_or_default()),
            }
        })
        .collect()
}

/// The budget of each part when `budget` is shared by `d`'s parts (what the title and headings take is set aside).
fn per_table(d: &Digest, budget: usize) -> usize {
    let parts = tables(d).len().max(1);
    // The title, written twice its length at most once escaped, and each heading with its markup.
    let set_aside = 2 * d.title().len() + 100 * parts + 100;
    budget.saturating_sub(set_aside) / parts
}

/// The digest as lines under headings, each cell escaped with `esc`: `heading(h)` for a part's heading and
/// `bullet` before each row; each part within `budget` characters (the cut says how many rows are left out and
/// where to see them). With `link(text, url)`, an Application is linked to its page and the cut to the status
/// page; without, the cut shows the status page's URL. The shared shape of the text-like renderings.
fn lines(
    d: &Digest,
    esc: fn(&str) -> String,
    heading: fn(&str) -> String,
    bullet: &str,
    budget: usize,
    link: Option<fn(&str, &str) -> String>,
) -> String {
    lines_sized(d, esc, heading, bullet, budget, link, |l| l.chars().count())
}

/// [`lines`] with each line's size counted by `size` (what the target's limit counts: Telegram's, the text once
/// its tags are read).
fn lines_sized(
    d: &Digest,
    esc: fn(&str) -> String,
    heading: fn(&str) -> String,
    bullet: &str,
    budget: usize,
    link: Option<fn(&str, &str) -> String>,
    size: fn(&str) -> usize,
) -> String {
    let mut s = String::new();
    if d.is_empty() {
        s.push_str(&esc(&all_green_line(d)));
        s.push('\n');
        return s;
    }
    let room = per_table(d, budget);
    let status = (d.status_url.as_deref()).map(|u| link.map_or_else(|| esc(u), |l| l("the status page", u)));
    for t in tables(d) {
        s.push_str(&heading(&esc(&t.heading)));
        s.push('\n');
        let cell = |c: &str, url: Option<&str>| match (link, url) {
            (Some(l), Some(u)) => l(c, u),
            _ => esc(c),
        };
        let rows = table_rows(&t, &cell, bullet);
        let more = |n| format!("{bullet}{}", render::more_words(n, status.as_deref()));
        for line in render::fit_rows(&rows, room, size, more) {
            s.push_str(&line);
            s.push('\n');
        }
        s.push('\n');
    }
    s
}

/// A link in CommonMark: escaped text, a URL that cannot end the link.
fn markdown_link(text: &str, url: &str) -> String {
    format!(
        "[{}]({})",
        escape::commonmark(text),
        url.replace(' ', "%20").replace(')', "%29")
    )
}

/// A link in Google Chat's markup, `<url|text>`.
fn google_chat_link(text: &str, url: &str) -> String {
    let url = url.replace('|', "%7C").replace('>', "%3E").replace('<', "%3C");
    format!("<{url}|{}>", escape::google_chat(text))
}

/// Plain text (e-mail's text part, the console, webhooks' `text`).
pub fn text(d: &Digest) -> String {
    format!(
        "{}\n\n{}",
        escape::one_line(&d.title()),
        lines(d, escape::one_line, |h| h.to_string(), "- ", usize::MAX, None)
    )
}

/// Plain text for a terminal: control characters shown, not acted on.
pub fn console_text(d: &Digest) -> String {
    format!(
        "{}\n\n{}",
        escape::console(&d.title()),
        lines(d, escape::console, |h| h.to_string(), "- ", usize::MAX, None)
    )
}

/// CommonMark (Mattermost, GitHub-flavoured targets), within `budget` characters.
pub fn markdown(d: &Digest, budget: usize) -> String {
    format!(
        "### {}\n\n{}",
        escape::commonmark(&d.title()),
        lines(
            d,
            escape::commonmark,
            |h| format!("**{h}**\n"),
            "- ",
            budget,
            Some(markdown_link)
        )
    )
}

/// Plain text within `budget` characters (Matrix's `body`), the cut linking to the status page.
pub fn text_within(d: &Digest, budget: usize) -> String {
    format!(
        "{}\n\n{}",
        escape::one_line(&d.title()),
        lines(d, escape::one_line, |h| h.to_string(), "- ", budget, None)
    )
}

/// Google Chat's own markup, within its 4,096-character text limit.
pub fn google_chat(d: &Digest) -> String {
    format!(
        "*{}*\n\n{}",
        escape::google_chat(&d.title()),
        lines(
            d,
            escape::google_chat,
            |h| format!("*{h}*"),
            "• ",
            GOOGLE_CHAT_TEXT,
            Some(google_chat_link)
        )
    )
}

/// A masked link in Discord's Markdown: escaped text, a URL that cannot end the link.
fn discord_link(text: &str, url: &str) -> String {
    format!(
        "[{}]({})",
        escape::discord(text),
        url.replace(' ', "%20").replace(')', "%29")
    )
}

/// Discord's Markdown (an embed's description), within `budget` characters: the title is the embed's own.
pub fn discord(d: &Digest, budget: usize) -> String {
    lines(
        d,
        escape::discord,
        |h| format!("**{h}**"),
        "• ",
        budget,
        Some(discord_link),
    )
}

/// A link in Telegram's HTML.
fn telegram_link(text: &str, url: &str) -> String {
    format!("<a href=\"{}\">{}</a>", escape::html(url), escape::telegram(text))
}

/// Telegram's HTML, within `budget` characters as Telegram counts them (the text once its tags are read).
pub fn telegram(d: &Digest, budget: usize) -> String {
    format!(
        "<b>{}</b>\n\n{}",
        escape::telegram(&d.title()),
        lines_sized(
            d,
            escape::telegram,
            |h| format!("<b>{h}</b>"),
            "• ",
            budget,
            Some(telegram_link),
            render::telegram_len,
        )
    )
}

/// Google Chat's text limit is 4,096 characters; the digest stays under it with room for the title.
const GOOGLE_CHAT_TEXT: usize = 3900;

/// HTML: a table per part, each within its share of `budget` bytes (e-mail's message stays under 100 KB; Matrix has a limit).
pub fn html(d: &Digest, budget: usize) -> String {
    let esc = escape::html;
    let mut s = String::from(
        "<!DOCTYPE html><html><body style=\"font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;font-size:14px;\
         color:#1f2328;max-width:900px\">",
    );
    s.push_str(&format!("<h2 style=\"font-size:18px\">{}</h2>", esc(&d.title())));
    if d.is_empty() {
        s.push_str(&format!("<p>{}</p></body></html>", esc(&all_green_line(d))));
        return s;
    }
    let cell = "style=\"border:1px solid #d1d9e0;padding:4px 8px;text-align:left\"";
    let room = per_table(d, budget);
    let status = (d.status_url.as_deref()).map(|u| format!("<a href=\"{}\">the status page</a>", esc(u)));
    for t in tables(d) {
        s.push_str(&format!("<h3 style=\"font-size:15px\">{}</h3>", esc(&t.heading)));
        s.push_str("<table style=\"border-collapse:collapse\"><tr>");
        for c in t.columns {
            s.push_str(&format!("<th {cell}>{}</th>", esc(c)));
        }
        s.push_str("</tr>");
        let td = |c: &str, link: Option<&str>| match link {
            Some(url) => format!("<td {cell}><a href=\"{}\">{}</a></td>", esc(url), esc(c)),
            None => format!("<td {cell}>{}</td>", esc(c)),
        };
        let rows: Vec<render::Row> = (t.rows.iter().enumerate())
            .map(|(k, row)| {
                let link = t.links.get(k).and_then(Option::as_deref);
                let cells: Vec<String> = (row.iter().enumerate())
                    .map(|(j, c)| td(c, link.filter(|_| j == 0)))
                    .collect();
                render::Row {
                    full: format!("<tr>{}</tr>", cells.concat()),
                    short: format!("<tr>{}</tr>", cells.first().cloned().unwrap_or_default()),
                }
            })
            .collect();
        let more = |n| {
            format!(
                "<tr><td {cell} colspan=\"{}\">{}</td></tr>",
                t.columns.len(),
                render::more_words(n, status.as_deref())
            )
        };
        s.push_str(&render::fit_rows(&rows, room, str::len, more).concat());
        s.push_str("</table>");
    }
    s.push_str("</body></html>");
    s
}

/// Slack's limits: 3,000 characters in a section's text, 50 blocks in a message.
const SLACK_SECTION: usize = 3000;
const SLACK_BLOCKS: usize = 50;

/// A link in Slack's mrkdwn.
fn slack_link(text: &str, url: &str) -> String {
    format!(
        "<{}|{}>",
        url.replace('|', "%7C").replace('>', "%3E"),
        escape::mrkdwn(text)
    )
}

/// Slack blocks: a header, then each part as sections of mrkdwn (escaped), all within Slack's limits: each part
/// gets an equal share of the 50 blocks, and its rows are cut, with a count and the status page, only when even a
/// shorter line per row does not fit.
pub fn slack_blocks(d: &Digest) -> Vec<Value> {
    let mut blocks = vec![json!({
        "type": "header",
        "text": {"type": "plain_text", "text": render::truncate_utf16(&format!("📋 {}", escape::mrkdwn(&d.title())), 150)},
    })];
    if d.is_empty() {
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": escape::mrkdwn(&all_green_line(d))}}));
        return blocks;
    }
    let parts = tables(d);
    let sections = ((SLACK_BLOCKS - 1) / parts.len().max(1)).max(1);
    let status = d.status_url.as_deref().map(|u| slack_link("the status page", u));
    for t in parts {
        let rows = table_rows(
            &t,
            &|c, link| match link {
                Some(u) => slack_link(c, u),
                None => escape::mrkdwn(c),
            },
            "• ",
        );
        let mut rows = rows;
        // A row longer than a section is shortened itself; a section holds whole rows.
        const ROW: usize = 1000;
        for r in &mut rows {
            r.full = render::truncate(&r.full, ROW);
            r.short = render::truncate(&r.short, ROW);
        }
        let heading = format!("*{}*\n", escape::mrkdwn(&t.heading));
        let budget = sections * (SLACK_SECTION - ROW) - heading.chars().count();
        let more = |n| format!("• {}", render::more_words(n, status.as_deref()));
        let lines = render::fit_rows(&rows, budget, |l| l.chars().count(), more);
        let text = format!("{heading}{}", lines.join("\n"));
        for piece in slack_pieces(&text, SLACK_SECTION) {
            blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": piece}}));
        }
    }
    blocks
}

/// `text` in pieces of at most `max` characters, cut at line ends (no line is longer than `max`).
fn slack_pieces(text: &str, max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        if !cur.is_empty() && cur.chars().count() + 1 + line.chars().count() > max {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push('\n');
        }
        cur.push_str(line);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Teams accepts a card of about 28 KB; the digest's parts share this many bytes of it.
const TEAMS_BYTES: usize = 24_000;

/// A link in Teams' TextBlock Markdown.
fn teams_link(text: &str, url: &str) -> String {
    format!(
        "[{}]({})",
        escape::teams(text),
        url.replace(' ', "%20").replace(')', "%29")
    )
}

/// A Microsoft Teams Adaptive Card: the title, then a text block per part, the whole card under Teams' ~28 KB.
pub fn teams_card(d: &Digest) -> Value {
    let mut body = vec![
        json!({"type": "TextBlock", "text": escape::teams(&d.title()), "weight": "Bolder", "size": "Medium", "wrap": true}),
    ];
    if d.is_empty() {
        body.push(json!({"type": "TextBlock", "text": escape::teams(&all_green_line(d)), "wrap": true}));
    }
    let room = per_table(d, TEAMS_BYTES);
    let status = d.status_url.as_deref().map(|u| teams_link("the status page", u));
    for t in tables(d) {
        body.push(json!({"type": "TextBlock", "text": escape::teams(&t.heading), "weight": "Bolder", "wrap": true}));
        let rows = table_rows(
            &t,
            &|c, link| match link {
                Some(u) => teams_link(c, u),
                None => escape::teams(c),
            },
            "- ",
        );
        let more = |n| format!("- {}", render::more_words(n, status.as_deref()));
        let lines = render::fit_rows(&rows, room, render::json_len, more);
        body.push(json!({"type": "TextBlock", "text": lines.join("\n"), "wrap": true}));
    }
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": body,
            },
        }],
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::domain::digest::{FiringIncident, OutOfSyncApp};
    use crate::domain::{Action, Notification};

    /// A digest whose Application and problem need escaping (the receivers' tests use it too).
    pub(crate) fn digest() -> Digest {
        let at: DateTime<Utc> = "2026-10-23T07:00:00Z".parse().expect("time");
        Digest {
            team: "payments".into(),
            at,
            timezone: "Europe/Berlin".into(),
            out_of_sync: vec![OutOfSyncApp {
                app: "argocd/<!channel> *pay*".into(),
                since: at - chrono::Duration::hours(50),
                revision: Some("3de5b39dd5421234".into()),
                pruning: 1,
                url: Some("https://argocd.example.com/applications/argocd/pay".into()),
            }],
            firing: vec![FiringIncident {
                app: "argocd/pay".into(),
                problem: "Degraded <script>".into(),
                summary: String::new(),
                since: at - chrono::Duration::minutes(90),
            }],
            ..Default::default()
        }
    }

    /// `d` as the outbox hands it to a receiver.
    pub(crate) fn notification(d: Digest) -> Notification {
        Notification {
            receiver: "chat".into(),
            action: Action::Digest,
            thread_key: "chat:digest:payments:1".into(),
            title: d.title(),
            reason: "the scheduled digest".into(),
            created_at: d.at,
            body: crate::domain::Body::Digest(Box::new(d)),
            recipient: None,
            status_url: None,
            group_actions: Vec::new(),
            zone: Default::default(),
        }
    }

    #[test]
    fn times_are_shown_in_the_teams_time_zone() {
        let t = text(&digest());
        assert!(t.contains("since Fri 2026-10-23 07:30 CEST (1 h 30 min)"), "{t}");
        assert!(t.contains("since Wed 2026-10-21 07:00 CEST (2 d 2 h)"), "{t}");
    }

    #[test]
    fn text_from_argo_cd_is_escaped_in_every_rendering() {
        let d = digest();
        let h = html(&d, usize::MAX);
        assert!(!h.contains("<script>") && h.contains("&lt;script&gt;"), "{h}");
        assert!(h.contains("<table"), "email is a table");
        let slack = serde_json::to_string(&slack_blocks(&d)).expect("json");
        assert!(!slack.contains("<!channel>"), "{slack}");
        let md = markdown(&d, usize::MAX);
        assert!(md.contains("\\*pay\\*") && !md.contains("<script>"), "{md}");
        let gc = google_chat(&d);
        assert!(!gc.contains("<!channel>"), "{gc}");
        let teams = teams_card(&d).to_string();
        assert!(teams.contains("\\\\*pay\\\\*"), "{teams}");
    }

    #[test]
    fn every_chat_email_webhook_and_console_rendering_shows_the_digest() {
        use crate::receivers::{email, googlechat, matrix, mattermost, msteams, render, slack, webhook};
        let n = notification(digest());
        let wants = |what: &str, got: &str| {
            assert!(got.contains("Applications OutOfSync"), "{what}: {got}");
            assert!(got.contains("Incidents firing"), "{what}: {got}");
        };
        wants("slack", &slack::preview(&n).to_string());
        wants("msteams", &msteams::teams_message(&n).to_string());
        wants("googlechat", &googlechat::google_chat_text(&n));
        wants("mattermost", &mattermost::text(&n));
        wants("matrix", &matrix::message(&n, None).to_string());
        wants("webhook", &webhook::body(&n)["text"].to_string());
        wants("email text", &render::text(&n));
        wants("email html", &render::html(&n));
        wants("console", &render::console_text(&n));
        assert_eq!(webhook::body(&n)["digest"]["team"], "payments");
        assert!(render::html(&n).contains("<table"), "e-mail shows a table");
        assert_eq!(
            email::Email::subject(&n),
            "[DIGEST] Digest for payments: 1 OutOfSync, 1 incident firing"
        );
    }

    #[test]
    fn an_empty_digest_is_one_all_green_line() {
        let d = Digest {
            team: "payments".into(),
            ..Default::default()
        };
        assert!(text(&d).contains("All green for team payments"));
        assert_eq!(slack_blocks(&d).len(), 2);
    }
}
