//! What each kind of receiver would send for a notification, without sending it: the payload as its target reads
//! it (text, Markdown, Block Kit, Adaptive Card, ADF, e-mail), part by part. `herald replay --render` prints it for
//! an operator; the golden files and the injection property test are made of it.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    ReceiverType, alertmanager, console, discord, github, github_status, googlechat, grafana, jira, matrix, mattermost,
    msteams, pagerduty, redmine, render, servicenow, slack, telegram, webhook,
};
use crate::domain::Notification;

/// The markup a part is written in, which says how its target reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Markup {
    /// Plain text (e-mail, descriptions in JSON).
    Plain,
    /// Plain text for a terminal.
    Console,
    /// CommonMark (GitHub, Mattermost).
    CommonMark,
    /// Slack Block Kit JSON (mrkdwn and plain_text inside).
    SlackBlocks,
    /// Google Chat's own markup.
    GoogleChat,
    /// A Teams Adaptive Card (TextBlock Markdown inside).
    TeamsCard,
    /// HTML (e-mail).
    Html,
    /// Atlassian Document Format JSON (Jira Cloud).
    Adf,
    /// Jira wiki markup (Jira Data Center).
    JiraWiki,
    /// Discord's Execute Webhook JSON (Discord's Markdown inside the embeds).
    DiscordEmbeds,
    /// Telegram's HTML (`parse_mode: HTML`: `b`, `i`, `a`, `code`, `pre`).
    TelegramHtml,
    /// JSON read by programs (webhook, PagerDuty, Alertmanager).
    Json,
}

/// One part of what a receiver sends: `name` is also the golden file's extension (`subject`, `txt`, `md`, `json`…).
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub name: &'static str,
    pub markup: Markup,
    pub text: String,
}

fn part(name: &'static str, markup: Markup, text: String) -> Part {
    Part { name, markup, text }
}

fn json(name: &'static str, markup: Markup, v: &Value) -> Part {
    part(name, markup, serde_json::to_string_pretty(v).unwrap_or_default())
}

/// What a receiver of type `kind` sends for `n` at `now`, without a custom template. Secrets (a PagerDuty routing
/// key) are shown as placeholders. Every [`ReceiverType`] has its arm: a new integration does not compile without.
pub fn preview(kind: ReceiverType, n: &Notification, now: DateTime<Utc>) -> Vec<Part> {
    // As a built receiver sees it: unsafe links removed.
    let n = &*crate::domain::link::checked(n);
    match kind {
        ReceiverType::Console => vec![part(
            "txt",
            Markup::Console,
            console::message(n, &render::console_text(n)),
        )],
        ReceiverType::Email => vec![
            part("subject", Markup::Plain, super::email::Email::subject(n)),
            part("txt", Markup::Plain, render::text(n)),
            part("html", Markup::Html, render::html(n)),
        ],
        ReceiverType::Slack => vec![json("json", Markup::SlackBlocks, &slack::preview(n))],
        ReceiverType::Msteams => vec![json("json", Markup::TeamsCard, &msteams::teams_message(n))],
        ReceiverType::Googlechat => vec![part("txt", Markup::GoogleChat, googlechat::google_chat_text(n))],
        ReceiverType::Mattermost => vec![part("md", Markup::CommonMark, mattermost::text(n))],
        ReceiverType::Matrix => {
            let message = matrix::message(n, None);
            let text = |key: &str| message[key].as_str().unwrap_or_default().to_string();
            vec![
                part("txt", Markup::Plain, text("body")),
                part("html", Markup::Html, text("formatted_body")),
            ]
        }
        ReceiverType::Discord => vec![json("json", Markup::DiscordEmbeds, &discord::message(n, None))],
        ReceiverType::Telegram => vec![part("html", Markup::TelegramHtml, telegram::text(n))],
        ReceiverType::Webhook => vec![json("json", Markup::Json, &webhook::body(n))],
        ReceiverType::Jira => {
            let (summary, adf, wiki) = jira::preview(n);
            vec![
                part("summary", Markup::Plain, summary),
                json("adf.json", Markup::Adf, &adf),
                part("wiki", Markup::JiraWiki, wiki),
            ]
        }
        ReceiverType::Github => {
            let (title, body) = github::preview(n);
            vec![
                part("title", Markup::Plain, title),
                part("md", Markup::CommonMark, body),
            ]
        }
        ReceiverType::Pagerduty => n
            .incidents
            .iter()
            .map(|i| json("json", Markup::Json, &pagerduty::trigger_event(n, i, "ROUTING_KEY")))
            .collect(),
        ReceiverType::Alertmanager => {
            let ttl = std::time::Duration::from_secs(24 * 3600);
            let alerts: Vec<Value> = n
                .incidents
                .iter()
                .map(|i| alertmanager::alert(n, i, now, ttl))
                .collect();
            vec![json("json", Markup::Json, &Value::Array(alerts))]
        }
        ReceiverType::Redmine => {
            let fingerprint = n.primary().map_or(n.thread_key.as_str(), |i| i.fingerprint.as_str());
            let (subject, description) = redmine::preview(n, fingerprint);
            vec![
                part("subject", Markup::Plain, subject),
                part("md", Markup::CommonMark, description),
            ]
        }
        ReceiverType::Servicenow => {
            let (short_description, description) = servicenow::preview(n);
            vec![
                part("short_description", Markup::Plain, short_description),
                part("txt", Markup::Plain, description),
            ]
        }
        // Told of syncs only: an incident notification renders nothing.
        ReceiverType::GithubStatus => (n.commit_status.iter())
            .map(|s| json("json", Markup::Json, &github_status::status_body(s)))
            .collect(),
        ReceiverType::Grafana => {
            let settings = grafana::Config {
                url: "https://grafana.example.com".into(),
                token: "TOKEN".into(),
                dashboard_uid: None,
                tags: Vec::new(),
            };
            (n.change.iter())
                .filter_map(|_| grafana::annotation(&settings, n))
                .map(|a| part("html", Markup::Html, a["text"].as_str().unwrap_or_default().to_string()))
                .collect()
        }
    }
}
