//! `receivers[]` and `smtp`: the receiver blocks as written in the configuration.

use secrecy::SecretString;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

use super::{ConfigError, check_secret_url, check_url, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiverSettings {
    pub name: String,
    /// Send a message when the incident resolves (default: true for tickets and paging, false for the rest).
    #[serde(default)]
    pub send_resolved: Option<bool>,
    /// Optional minijinja template for the message text, for teams that want their own wording.
    #[serde(default)]
    pub template: Option<String>,
    /// Messages per second at most (Slack's default is 1 per channel).
    #[serde(default)]
    pub rate_limit_per_second: Option<f64>,
    #[serde(flatten)]
    pub kind: ReceiverKind,
}

impl ReceiverSettings {
    pub fn sends_resolved(&self) -> bool {
        self.send_resolved.unwrap_or(matches!(
            self.kind,
            ReceiverKind::Jira(_)
                | ReceiverKind::Github(_)
                | ReceiverKind::Pagerduty(_)
                | ReceiverKind::Alertmanager(_)
                | ReceiverKind::Console(_)
                | ReceiverKind::Slack(_)
        ))
    }
    /// Ticket and paging receivers get one notification per incident (one ticket per incident); the others get
    /// one per group.
    pub fn per_incident(&self) -> bool {
        matches!(
            self.kind,
            ReceiverKind::Jira(_)
                | ReceiverKind::Github(_)
                | ReceiverKind::Pagerduty(_)
                | ReceiverKind::Alertmanager(_)
        )
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReceiverKind {
    Console(ConsoleSettings),
    Email(EmailSettings),
    Slack(SlackSettings),
    Msteams(WebhookUrlSettings),
    Googlechat(WebhookUrlSettings),
    Mattermost(WebhookUrlSettings),
    Webhook(WebhookSettings),
    Jira(JiraSettings),
    Github(GithubSettings),
    Pagerduty(PagerdutySettings),
    Alertmanager(AlertmanagerSettings),
}

impl ReceiverKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            ReceiverKind::Console(_) => "console",
            ReceiverKind::Email(_) => "email",
            ReceiverKind::Slack(_) => "slack",
            ReceiverKind::Msteams(_) => "msteams",
            ReceiverKind::Googlechat(_) => "googlechat",
            ReceiverKind::Mattermost(_) => "mattermost",
            ReceiverKind::Webhook(_) => "webhook",
            ReceiverKind::Jira(_) => "jira",
            ReceiverKind::Github(_) => "github",
            ReceiverKind::Pagerduty(_) => "pagerduty",
            ReceiverKind::Alertmanager(_) => "alertmanager",
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleSettings {
    /// Also append each rendered message to this file (handy for tests and demos).
    pub file: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmailSettings {
    pub to: Vec<String>,
    #[serde(default)]
    pub cc: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackSettings {
    /// Incoming webhook (contains a secret path).
    #[serde(default)]
    pub webhook_url: Option<SecretString>,
    /// Bot token for `chat.postMessage` (threads updates, edits on resolve).
    #[serde(default)]
    pub token: Option<SecretString>,
    #[serde(default)]
    pub channel: Option<String>,
    #[serde(default = "default_slack_api")]
    pub api_url: String,
}

fn default_slack_api() -> String {
    "https://slack.com/api".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookUrlSettings {
    pub webhook_url: SecretString,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    pub url: SecretString,
    #[serde(default)]
    pub hmac_secret: Option<SecretString>,
    #[serde(default)]
    pub headers: BTreeMap<String, SecretString>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum JiraApi {
    Cloud,
    Datacenter,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JiraSettings {
    pub url: String,
    #[serde(default = "default_jira_api")]
    pub api: JiraApi,
    pub project: String,
    #[serde(default = "default_issue_type")]
    pub issue_type: String,
    /// Cloud: the account e-mail (Basic auth with `token`). Data Center: leave empty (Bearer PAT).
    #[serde(default)]
    pub user: Option<String>,
    pub token: SecretString,
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    pub resolve_transition: Option<String>,
    #[serde(default)]
    pub reopen_transition: Option<String>,
    #[serde(default, with = "humantime_serde::option")]
    pub reopen_window: Option<Duration>,
}

fn default_jira_api() -> JiraApi {
    JiraApi::Cloud
}
fn default_issue_type() -> String {
    "Task".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GithubSettings {
    #[serde(default = "default_github_api")]
    pub api_url: String,
    pub repo: String,
    pub token: SecretString,
    #[serde(default)]
    pub labels: Vec<String>,
}

fn default_github_api() -> String {
    "https://api.github.com".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagerdutySettings {
    #[serde(default = "default_pd_url")]
    pub url: String,
    pub routing_key: SecretString,
}

fn default_pd_url() -> String {
    "https://events.pagerduty.com/v2/enqueue".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertmanagerSettings {
    pub url: String,
    /// How long Alertmanager keeps a firing alert active without hearing from Herald again (`endsAt` = send
    /// time + this); a resolve ends it at once. Keep it above the repeat interval.
    #[serde(default = "default_alert_ttl", with = "humantime_serde")]
    pub alert_ttl: Duration,
}

fn default_alert_ttl() -> Duration {
    Duration::from_secs(24 * 3600)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpSettings {
    /// `smtp://host:25`, `smtp://host:587?tls=required`, `smtps://host:465`.
    pub url: String,
    pub from: String,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<SecretString>,
    /// Extra CA certificate (PEM file) to trust, for self-signed relays.
    #[serde(default)]
    pub ca_file: Option<String>,
    #[serde(default = "default_smtp_timeout", with = "humantime_serde")]
    pub timeout: Duration,
}

fn default_smtp_timeout() -> Duration {
    Duration::from_secs(10)
}

pub(super) fn default_receivers() -> Vec<ReceiverSettings> {
    vec![ReceiverSettings {
        name: "console".into(),
        send_resolved: Some(true),
        template: None,
        rate_limit_per_second: None,
        kind: ReceiverKind::Console(ConsoleSettings::default()),
    }]
}

/// Checks every receiver block; returns the receiver names, for the sections that refer to them.
pub(super) fn validate<'a>(
    receivers: &'a [ReceiverSettings],
    smtp: Option<&SmtpSettings>,
    errors: &mut Vec<ConfigError>,
) -> std::collections::HashSet<&'a str> {
    let mut names = std::collections::HashSet::new();
    for (i, r) in receivers.iter().enumerate() {
        if r.name.trim().is_empty() {
            errors.push(invalid(format!("receivers[{i}].name"), "must not be empty"));
        }
        if !names.insert(r.name.as_str()) {
            errors.push(invalid(
                format!("receivers[{i}].name"),
                format!("duplicate receiver name {:?}", r.name),
            ));
        }
        match &r.kind {
            ReceiverKind::Email(e) => {
                if smtp.is_none() {
                    errors.push(invalid(
                        format!("receivers[{i}].email"),
                        "an email receiver needs the `smtp` section (url, from)",
                    ));
                }
                if e.to.is_empty() {
                    errors.push(invalid(
                        format!("receivers[{i}].email.to"),
                        "needs at least one address",
                    ));
                }
                for (j, a) in e.to.iter().chain(e.cc.iter()).enumerate() {
                    if a.parse::<lettre::Address>().is_err() {
                        errors.push(invalid(
                            format!("receivers[{i}].email.to[{j}]"),
                            format!("{a:?} is not an e-mail address"),
                        ));
                    }
                }
            }
            ReceiverKind::Slack(s) => {
                if s.webhook_url.is_none() && s.token.is_none() {
                    errors.push(invalid(
                        format!("receivers[{i}].slack"),
                        "needs `webhook_url` or `token` + `channel`",
                    ));
                }
                if s.token.is_some() && s.channel.is_none() {
                    errors.push(invalid(
                        format!("receivers[{i}].slack.channel"),
                        "a bot `token` needs a `channel`",
                    ));
                }
                check_url(errors, &format!("receivers[{i}].slack.api_url"), &s.api_url);
                if let Some(u) = &s.webhook_url {
                    check_secret_url(errors, &format!("receivers[{i}].slack.webhook_url"), u);
                }
            }
            ReceiverKind::Msteams(w) | ReceiverKind::Googlechat(w) | ReceiverKind::Mattermost(w) => {
                let at = format!("receivers[{i}].{}.webhook_url", r.kind.type_name());
                check_secret_url(errors, &at, &w.webhook_url);
            }
            ReceiverKind::Webhook(w) => check_secret_url(errors, &format!("receivers[{i}].webhook.url"), &w.url),
            ReceiverKind::Jira(j) => {
                check_url(errors, &format!("receivers[{i}].jira.url"), &j.url);
                if j.api == JiraApi::Cloud && j.user.is_none() {
                    errors.push(invalid(
                        format!("receivers[{i}].jira.user"),
                        "Jira Cloud needs `user` (the account e-mail) with the API `token`",
                    ));
                }
            }
            ReceiverKind::Github(g) => {
                check_url(errors, &format!("receivers[{i}].github.api_url"), &g.api_url);
                if g.repo.split('/').filter(|p| !p.is_empty()).count() != 2 {
                    errors.push(invalid(format!("receivers[{i}].github.repo"), "must be `owner/name`"));
                }
            }
            ReceiverKind::Pagerduty(p) => check_url(errors, &format!("receivers[{i}].pagerduty.url"), &p.url),
            ReceiverKind::Alertmanager(a) => check_url(errors, &format!("receivers[{i}].alertmanager.url"), &a.url),
            _ => {}
        }
        if let Some(rate) = r.rate_limit_per_second
            && (rate.is_nan() || rate <= 0.0)
        {
            errors.push(invalid(
                format!("receivers[{i}].rate_limit_per_second"),
                "must be a positive number",
            ));
        }
        if let Some(t) = &r.template
            && let Err(e) = minijinja::Environment::new().template_from_str(t)
        {
            errors.push(invalid(
                format!("receivers[{i}].template"),
                format!("not a valid template: {e}"),
            ));
        }
    }
    names
}
