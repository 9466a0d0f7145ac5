//! What each kind of receiver would send for a notification, without sending it: the payload as its target reads
//! it (text, Markdown, Block Kit, Adaptive Card, ADF, e-mail), part by part, and with a configured receiver's own
//! `template` ([`preview_configured`]). `herald replay --render` and `herald send-test --render` print it for an
//! operator; the golden files and the injection property test are made of it.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    ReceiverType, alertmanager, console, discord, github, github_status, googlechat, grafana, jira, matrix, mattermost,
    msteams, pagerduty, redmine, render, servicenow, slack, telegram, webhook,
};
use crate::configuration::ReceiverSettings;
use crate::domain::Notification;
use render::{TemplateEscape, template::TemplateError};

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
            .incidents()
            .iter()
            .map(|i| json("json", Markup::Json, &pagerduty::trigger_event(n, i, "ROUTING_KEY")))
            .collect(),
        ReceiverType::Alertmanager => {
            let ttl = std::time::Duration::from_secs(24 * 3600);
            let alerts: Vec<Value> = n
                .incidents()
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
        ReceiverType::GithubStatus => (n.commit_status().into_iter())
            .map(|s| json("json", Markup::Json, &github_status::status_body(s)))
            .collect(),
        ReceiverType::Grafana => {
            let settings = grafana::Config {
                url: "https://grafana.example.com".into(),
                token: "TOKEN".into(),
                dashboard_uid: None,
                tags: Vec::new(),
            };
            (n.change().into_iter())
                .filter_map(|_| grafana::annotation(&settings, n))
                .map(|a| part("html", Markup::Html, a["text"].as_str().unwrap_or_default().to_string()))
                .collect()
        }
    }
}

/// The escape a receiver type renders its `template` with (its own constant, the one its delivery uses), or
/// `None` for a type whose messages are structured (a card, a ticket, an alert, a JSON body) and use no template.
/// Every [`ReceiverType`] has its arm: a new integration says whether it takes a template.
pub fn template_escape(kind: ReceiverType) -> Option<TemplateEscape> {
    match kind {
        ReceiverType::Console => Some(console::TEMPLATE_ESCAPE),
        ReceiverType::Email => Some(super::email::TEMPLATE_ESCAPE),
        ReceiverType::Slack => Some(slack::TEMPLATE_ESCAPE),
        ReceiverType::Googlechat => Some(googlechat::TEMPLATE_ESCAPE),
        ReceiverType::Mattermost => Some(mattermost::TEMPLATE_ESCAPE),
        ReceiverType::Matrix => Some(matrix::TEMPLATE_ESCAPE),
        ReceiverType::Discord => Some(discord::TEMPLATE_ESCAPE),
        ReceiverType::Telegram => Some(telegram::TEMPLATE_ESCAPE),
        ReceiverType::Msteams
        | ReceiverType::Webhook
        | ReceiverType::Jira
        | ReceiverType::Github
        | ReceiverType::Pagerduty
        | ReceiverType::Alertmanager
        | ReceiverType::Redmine
        | ReceiverType::Servicenow
        | ReceiverType::GithubStatus
        | ReceiverType::Grafana => None,
    }
}

/// What the configured receiver `r` would send for `n` at `now`: [`preview`] of its type, with the text its own
/// `template` renders in place of Herald's where its type takes one. Nothing in it is a secret: a webhook URL, a
/// token or a routing key is not part of what is shown (PagerDuty's routing key is a placeholder).
pub fn preview_configured(
    r: &ReceiverSettings,
    n: &Notification,
    now: DateTime<Utc>,
) -> Result<Vec<Part>, TemplateError> {
    let kind = r.kind.receiver_type();
    let (Some(template), Some(escape)) = (r.template.as_deref(), template_escape(kind)) else {
        return Ok(preview(kind, n, now));
    };
    let n = &*crate::domain::link::checked(n);
    let text = render::with_template(template, n, escape)?;
    Ok(match kind {
        ReceiverType::Console => vec![part("txt", Markup::Console, console::message(n, &text))],
        ReceiverType::Email => vec![
            part("subject", Markup::Plain, super::email::Email::subject(n)),
            part("txt", Markup::Plain, text),
            part("html", Markup::Html, render::html(n)),
        ],
        ReceiverType::Slack => vec![json(
            "json",
            Markup::SlackBlocks,
            &slack::preview_templated(n, Some(&text)),
        )],
        ReceiverType::Googlechat => vec![part("txt", Markup::GoogleChat, text)],
        ReceiverType::Mattermost => vec![part("md", Markup::CommonMark, text)],
        ReceiverType::Matrix => {
            let message = matrix::message(n, Some(&text));
            vec![part(
                "txt",
                Markup::Plain,
                message["body"].as_str().unwrap_or_default().to_string(),
            )]
        }
        ReceiverType::Discord => vec![json("json", Markup::DiscordEmbeds, &discord::message(n, Some(&text)))],
        ReceiverType::Telegram => vec![part("html", Markup::TelegramHtml, telegram::templated(&text))],
        // A type that takes no template: what it sends anyway.
        _ => preview(kind, n, now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Action;
    use crate::receivers::testing;

    fn configured(yaml: &str) -> ReceiverSettings {
        crate::configuration::Settings::from_yaml(yaml)
            .expect("settings")
            .receivers
            .remove(0)
    }

    #[test]
    fn a_configured_template_replaces_herald_s_text_escaped_for_the_target() {
        let mut n = testing::notification(Action::Open);
        n.incidents_mut()[0].app_name = "pay[ments]".into();
        let r = configured(
            "receivers: [{name: chat, mattermost: {webhook_url: 'https://chat.example.com/hooks/abcdefghijklmnop'}, \
             template: '{{ notification.reason }}:{% for i in incidents %} {{ i.app_name }}{% endfor %} [x]'}]",
        );
        let parts = preview_configured(&r, &n, testing::now()).expect("renders");
        assert_eq!(parts.len(), 1);
        assert_eq!(
            parts[0].text, "fired: pay\\[ments\\] [x]",
            "values escaped, the template's own text as it is"
        );
        assert!(!parts[0].text.contains("abcdefghijklmnop"));

        let slack = configured(
            "receivers: [{name: s, slack: {webhook_url: 'https://hooks.slack.com/services/T0/B0/secretsecretsecret'}, \
             template: 'Hi {{ notification.title }}'}]",
        );
        let parts = preview_configured(&slack, &n, testing::now()).expect("renders");
        assert!(parts[0].text.contains("Hi payments is Degraded"), "{}", parts[0].text);
        assert!(!parts[0].text.contains("secretsecretsecret"));
    }

    #[test]
    fn without_a_template_or_on_a_type_that_takes_none_the_preview_is_herald_s_own() {
        let n = testing::notification(Action::Open);
        let plain = configured("receivers: [{name: c, console: {}}]");
        assert_eq!(
            preview_configured(&plain, &n, testing::now()).expect("renders"),
            preview(ReceiverType::Console, &n, testing::now())
        );
        let teams = configured(
            "receivers: [{name: t, msteams: {webhook_url: 'https://example.webhook.office.com/x'}, template: 'ignored'}]",
        );
        assert!(template_escape(ReceiverType::Msteams).is_none());
        assert_eq!(
            preview_configured(&teams, &n, testing::now()).expect("renders"),
            preview(ReceiverType::Msteams, &n, testing::now())
        );
    }
}
