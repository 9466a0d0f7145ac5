//! How a [`Digest`] reads, for every receiver that gets one: a table per part (OutOfSync, pending prunes, firing,
//! silences, dead deliveries), written as plain text, CommonMark, HTML (a real table), Slack blocks, a Teams
//! Adaptive Card or Google Chat text. Every cell comes from Argo CD or the API and goes through the target's
//! escaping (`receivers::render::escape`); times are shown in the team's time zone.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::Digest;
use crate::domain::notification::duration_words;
use crate::receivers::render::escape;

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
    match super::schedule::time_zone(&d.timezone) {
        Ok(tz) => t.with_timezone(&tz).format("%a %Y-%m-%d %H:%M %Z").to_string(),
        Err(_) => t.format("%a %Y-%m-%d %H:%M UTC").to_string(),
    }
}

/// `since Fri 2026-10-23 09:00 CEST (2 d 3 h)`.
fn since(d: &Digest, t: DateTime<Utc>) -> String {
    format!("since {} ({})", local(d, t), duration_words(d.at - t))
}

fn short_rev(r: &str) -> String {
    r.chars().take(12).collect()
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

/// The digest as lines under headings, each cell escaped with `esc`: `heading(h)` for a part's heading and
/// `bullet` before each row. The shared shape of the text-like renderings.
fn lines(d: &Digest, esc: fn(&str) -> String, heading: fn(&str) -> String, bullet: &str) -> String {
    let mut s = String::new();
    if d.is_empty() {
        s.push_str(&esc(&all_green_line(d)));
        s.push('\n');
        return s;
    }
    for t in tables(d) {
        s.push_str(&heading(&esc(&t.heading)));
        s.push('\n');
        for row in &t.rows {
            let cells: Vec<String> = row.iter().filter(|c| !c.is_empty()).map(|c| esc(c)).collect();
            s.push_str(&format!("{bullet}{}\n", cells.join(" — ")));
        }
        s.push('\n');
    }
    s
}

/// Plain text (e-mail's text part, the console, webhooks' `text`).
pub fn text(d: &Digest) -> String {
    format!(
        "{}\n\n{}",
        escape::one_line(&d.title()),
        lines(d, escape::one_line, |h| h.to_string(), "- ")
    )
}

/// Plain text for a terminal: control characters shown, not acted on.
pub fn console_text(d: &Digest) -> String {
    format!(
        "{}\n\n{}",
        escape::console(&d.title()),
        lines(d, escape::console, |h| h.to_string(), "- ")
    )
}

/// CommonMark (Mattermost, GitHub-flavoured targets).
pub fn markdown(d: &Digest) -> String {
    format!(
        "### {}\n\n{}",
        escape::commonmark(&d.title()),
        lines(d, escape::commonmark, |h| format!("**{h}**\n"), "- ")
    )
}

/// Google Chat's own markup.
pub fn google_chat(d: &Digest) -> String {
    format!(
        "*{}*\n\n{}",
        escape::google_chat(&d.title()),
        lines(d, escape::google_chat, |h| format!("*{h}*"), "• ")
    )
}

/// HTML for e-mail: a table per part.
pub fn html(d: &Digest) -> String {
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
    for t in tables(d) {
        s.push_str(&format!("<h3 style=\"font-size:15px\">{}</h3>", esc(&t.heading)));
        s.push_str("<table style=\"border-collapse:collapse\"><tr>");
        for c in t.columns {
            s.push_str(&format!("<th {cell}>{}</th>", esc(c)));
        }
        s.push_str("</tr>");
        for (k, row) in t.rows.iter().enumerate() {
            s.push_str("<tr>");
            for (j, c) in row.iter().enumerate() {
                match t.links.get(k).and_then(Option::as_deref).filter(|_| j == 0) {
                    Some(url) => s.push_str(&format!("<td {cell}><a href=\"{}\">{}</a></td>", esc(url), esc(c))),
                    None => s.push_str(&format!("<td {cell}>{}</td>", esc(c))),
                }
            }
            s.push_str("</tr>");
        }
        s.push_str("</table>");
    }
    s.push_str("</body></html>");
    s
}

/// Slack's section text limit, in characters.
const SLACK_SECTION: usize = 3000;

/// Slack blocks: a header, then a section per part (mrkdwn, escaped).
pub fn slack_blocks(d: &Digest) -> Vec<Value> {
    let mut blocks = vec![json!({
        "type": "header",
        "text": {"type": "plain_text", "text": crate::receivers::render::truncate_utf16(&format!("📋 {}", escape::mrkdwn(&d.title())), 150)},
    })];
    if d.is_empty() {
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": escape::mrkdwn(&all_green_line(d))}}));
        return blocks;
    }
    for t in tables(d) {
        let mut s = format!("*{}*\n", escape::mrkdwn(&t.heading));
        for row in &t.rows {
            let cells: Vec<String> = row
                .iter()
                .filter(|c| !c.is_empty())
                .map(|c| escape::mrkdwn(c))
                .collect();
            s.push_str(&format!("• {}\n", cells.join(" — ")));
        }
        blocks.push(json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": crate::receivers::render::truncate(&s, SLACK_SECTION)},
        }));
    }
    blocks
}

/// A Microsoft Teams Adaptive Card: the title, then a text block per part.
pub fn teams_card(d: &Digest) -> Value {
    let mut body = vec![
        json!({"type": "TextBlock", "text": escape::teams(&d.title()), "weight": "Bolder", "size": "Medium", "wrap": true}),
    ];
    if d.is_empty() {
        body.push(json!({"type": "TextBlock", "text": escape::teams(&all_green_line(d)), "wrap": true}));
    }
    for t in tables(d) {
        body.push(json!({"type": "TextBlock", "text": escape::teams(&t.heading), "weight": "Bolder", "wrap": true}));
        let lines: Vec<String> = (t.rows.iter())
            .map(|row| {
                let cells: Vec<String> = row.iter().filter(|c| !c.is_empty()).map(|c| escape::teams(c)).collect();
                format!("- {}", cells.join(" — "))
            })
            .collect();
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
    use crate::digest::{FiringIncident, OutOfSyncApp};
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
            incidents: Vec::new(),
            created_at: d.at,
            digest: Some(Box::new(d)),
            recipient: None,
            change: None,
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
        let h = html(&d);
        assert!(!h.contains("<script>") && h.contains("&lt;script&gt;"), "{h}");
        assert!(h.contains("<table"), "email is a table");
        let slack = serde_json::to_string(&slack_blocks(&d)).expect("json");
        assert!(!slack.contains("<!channel>"), "{slack}");
        let md = markdown(&d);
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
