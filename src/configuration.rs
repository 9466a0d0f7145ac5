//! Typed settings: the YAML file (`config/herald.yaml`), then `HERALD__SECTION__KEY` environment overrides, parsed
//! once into types that cannot hold an invalid state, then validated across sections (routes naming unknown
//! receivers, bad globs…). Every error names the key path that is wrong.

use secrecy::SecretString;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::incidents::Kind;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    pub server: ServerSettings,
    #[serde(default)]
    pub storage: StorageSettings,
    #[serde(default)]
    pub argocd: ArgoCdSettings,
    #[serde(default)]
    pub ownership: OwnershipSettings,
    #[serde(default)]
    pub rules: RulesSettings,
    #[serde(default)]
    pub teams: BTreeMap<String, TeamSettings>,
    #[serde(default)]
    pub routes: Vec<RouteSettings>,
    #[serde(default)]
    pub grouping: GroupingSettings,
    #[serde(default = "default_receivers")]
    pub receivers: Vec<ReceiverSettings>,
    #[serde(default)]
    pub smtp: Option<SmtpSettings>,
    #[serde(default)]
    pub outbox: OutboxSettings,
    #[serde(default)]
    pub scheduler: SchedulerSettings,
    #[serde(default)]
    pub log: LogSettings,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    pub listen: String,
    pub auth: AuthSettings,
    pub max_body_bytes: usize,
    /// JSON nesting deeper than this is refused before parsing (Application objects nest about 12 deep).
    pub max_json_depth: usize,
    pub workers: Option<usize>,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            auth: AuthSettings::default(),
            max_body_bytes: 4 * 1024 * 1024,
            max_json_depth: 128,
            workers: None,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthSettings {
    pub bearer_tokens: Vec<SecretString>,
    pub basic: Vec<BasicCredential>,
    pub allow_anonymous: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicCredential {
    pub username: String,
    pub password: SecretString,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageSettings {
    /// `sqlite://data/herald.db` (embedded default) or `postgres://user:pass@host/db`.
    pub url: SecretString,
    #[serde(with = "humantime_serde")]
    pub raw_retention: Duration,
    /// SQLite `synchronous` pragma: `normal` survives a process crash (kill -9); `full` also a power loss.
    pub sqlite_synchronous: SqliteSynchronous,
    pub max_connections: u32,
}

impl Default for StorageSettings {
    fn default() -> Self {
        Self {
            url: SecretString::from("sqlite://data/herald.db"),
            raw_retention: Duration::from_secs(7 * 24 * 3600),
            sqlite_synchronous: SqliteSynchronous::Normal,
            max_connections: 8,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSynchronous {
    Normal,
    Full,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArgoCdSettings {
    /// Base URL of the Argo CD UI, for links when the body carries no `context.argocdUrl`.
    pub url: Option<String>,
    /// Optional API access to confirm a condition in the cluster before a timed rule fires.
    pub api: Option<ArgoCdApiSettings>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgoCdApiSettings {
    pub url: String,
    pub token: SecretString,
    #[serde(default = "default_api_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// How long a rule may wait for a reachable API before it fires unconfirmed.
    #[serde(default = "default_confirm_wait", with = "humantime_serde")]
    pub confirm_wait: Duration,
}

fn default_api_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_confirm_wait() -> Duration {
    Duration::from_secs(120)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OwnershipSettings {
    pub annotation: String,
    pub label: String,
    pub projects: BTreeMap<String, String>,
    pub default_team: String,
}

impl Default for OwnershipSettings {
    fn default() -> Self {
        Self {
            annotation: "herald.io/team".into(),
            label: "team".into(),
            projects: BTreeMap::new(),
            default_team: "platform".into(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSettings {
    #[serde(default, with = "humantime_serde::option")]
    pub r#for: Option<Duration>,
    #[serde(default)]
    pub severity: Option<Severity>,
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// `rules.<kind>`; `rules.pruned.production` holds the matchers that mark a destination as production.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RulesSettings {
    pub out_of_sync: Option<RuleSettings>,
    pub prune_pending: Option<RuleSettings>,
    pub sync_failed: Option<RuleSettings>,
    pub degraded: Option<RuleSettings>,
    pub sync_unknown: Option<RuleSettings>,
    pub pruned: Option<PrunedRuleSettings>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrunedRuleSettings {
    #[serde(default, with = "humantime_serde::option")]
    pub r#for: Option<Duration>,
    #[serde(default)]
    pub severity: Option<Severity>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Severity when the destination is production (default critical).
    #[serde(default)]
    pub production_severity: Option<Severity>,
    #[serde(default)]
    pub production: ProductionMatchers,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProductionMatchers {
    pub namespaces: Vec<String>,
    pub clusters: Vec<String>,
    pub labels: BTreeMap<String, String>,
}

/// The effective rule for one kind, defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub enabled: bool,
    pub r#for: Duration,
    pub severity: Severity,
}

impl RulesSettings {
    pub fn rule(&self, kind: Kind) -> Rule {
        let (default_for, default_sev) = kind.defaults();
        let (f, s, e) = match kind {
            Kind::OutOfSync => opt(&self.out_of_sync),
            Kind::PrunePending => opt(&self.prune_pending),
            Kind::SyncFailed => opt(&self.sync_failed),
            Kind::Degraded => opt(&self.degraded),
            Kind::SyncUnknown => opt(&self.sync_unknown),
            Kind::Pruned => match &self.pruned {
                Some(p) => (p.r#for, p.severity, p.enabled),
                None => (None, None, true),
            },
        };
        Rule {
            enabled: e,
            r#for: f.unwrap_or(default_for),
            severity: s.unwrap_or(default_sev),
        }
    }

    pub fn production(&self) -> (ProductionMatchers, Severity) {
        match &self.pruned {
            Some(p) => (
                p.production.clone(),
                p.production_severity.unwrap_or(Severity::Critical),
            ),
            None => (ProductionMatchers::default(), Severity::Critical),
        }
    }
}

fn opt(r: &Option<RuleSettings>) -> (Option<Duration>, Option<Severity>, bool) {
    match r {
        Some(r) => (r.r#for, r.severity, r.enabled),
        None => (None, None, true),
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TeamSettings {
    pub receivers: Vec<String>,
    pub escalation: Vec<EscalationStep>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EscalationStep {
    #[serde(with = "humantime_serde")]
    pub after: Duration,
    pub receivers: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSettings {
    #[serde(default)]
    pub team: Option<String>,
    #[serde(default)]
    pub kind: Option<Kind>,
    #[serde(default)]
    pub severity: Option<Severity>,
    #[serde(default)]
    pub project: Option<String>,
    /// Glob on the Application name.
    #[serde(default)]
    pub app: Option<String>,
    /// Glob on the destination namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Glob on the destination cluster (server URL or name).
    #[serde(default)]
    pub cluster: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub receivers: Vec<String>,
    #[serde(default)]
    pub r#continue: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GroupingSettings {
    pub group_by: Vec<String>,
    #[serde(with = "humantime_serde")]
    pub group_wait: Duration,
    #[serde(with = "humantime_serde")]
    pub group_interval: Duration,
    #[serde(with = "humantime_serde")]
    pub repeat_interval: Duration,
}

impl Default for GroupingSettings {
    fn default() -> Self {
        Self {
            group_by: vec!["team".into(), "kind".into()],
            group_wait: Duration::from_secs(30),
            group_interval: Duration::from_secs(5 * 60),
            repeat_interval: Duration::from_secs(4 * 3600),
        }
    }
}

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

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutboxSettings {
    /// A delivery still failing after this long is dead (visible at `/v1/outbox?state=dead`, retryable).
    #[serde(with = "humantime_serde")]
    pub max_age: Duration,
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
    #[serde(with = "humantime_serde")]
    pub initial_backoff: Duration,
    #[serde(with = "humantime_serde")]
    pub max_backoff: Duration,
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// How many deliveries run at once.
    pub concurrency: usize,
    #[serde(with = "humantime_serde")]
    pub http_timeout: Duration,
}

impl Default for OutboxSettings {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(24 * 3600),
            lease: Duration::from_secs(60),
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            poll_interval: Duration::from_millis(200),
            concurrency: 8,
            http_timeout: Duration::from_secs(15),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerSettings {
    /// How often due timers (rule deadlines, group flushes, escalations) are looked for.
    #[serde(with = "humantime_serde")]
    pub tick: Duration,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self {
            tick: Duration::from_millis(250),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    /// `tracing` filter, e.g. `info,herald=debug`. `RUST_LOG` wins when set.
    pub level: String,
    pub format: LogFormat,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

fn default_receivers() -> Vec<ReceiverSettings> {
    vec![ReceiverSettings {
        name: "console".into(),
        send_resolved: Some(true),
        template: None,
        rate_limit_per_second: None,
        kind: ReceiverKind::Console(ConsoleSettings::default()),
    }]
}

/// A configuration error; the message names the key path.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read configuration: {0}")]
    Load(String),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
    Many(Vec<ConfigError>),
}

fn invalid(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        path: path.into(),
        message: message.into(),
    }
}

impl Settings {
    /// Loads `file` (if given and present; a given file that is missing is an error unless `optional`), then the
    /// `HERALD__SECTION__KEY` environment overrides, then validates.
    pub fn load(file: Option<&Path>, optional: bool) -> Result<Self, ConfigError> {
        let mut builder = config::Config::builder();
        if let Some(f) = file {
            if f.exists() {
                builder = builder.add_source(config::File::from(f).format(config::FileFormat::Yaml));
            } else if !optional {
                return Err(ConfigError::Load(format!("{}: no such file", f.display())));
            }
        }
        builder = builder.add_source(
            config::Environment::with_prefix("HERALD")
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true)
                .list_separator(",")
                .with_list_parse_key("server.auth.bearer_tokens")
                .with_list_parse_key("grouping.group_by"),
        );
        let raw = builder.build().map_err(|e| ConfigError::Load(e.to_string()))?;
        let value: serde_json::Value = raw.try_deserialize().map_err(|e| ConfigError::Load(e.to_string()))?;
        Self::from_value(value)
    }

    /// Parses an already-read YAML string (tests, `check-config`).
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let raw = config::Config::builder()
            .add_source(config::File::from_str(text, config::FileFormat::Yaml))
            .build()
            .map_err(|e| ConfigError::Load(e.to_string()))?;
        let value: serde_json::Value = raw.try_deserialize().map_err(|e| ConfigError::Load(e.to_string()))?;
        Self::from_value(value)
    }

    fn from_value(mut value: serde_json::Value) -> Result<Self, ConfigError> {
        // The `config` crate gives an empty file as null; treat it as "all defaults".
        if value.is_null() {
            value = serde_json::json!({});
        }
        // A section whose keys are all commented out reads as null: it means "the defaults".
        if let Some(map) = value.as_object_mut() {
            map.retain(|_, v| !v.is_null());
        }
        let settings: Settings = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            invalid(
                if path == "." { "(top level)".into() } else { path },
                e.into_inner().to_string(),
            )
        })?;
        settings.validate()?;
        Ok(settings)
    }

    /// Cross-section checks that serde cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut errors = Vec::new();
        let mut names = std::collections::HashSet::new();
        for (i, r) in self.receivers.iter().enumerate() {
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
                    if self.smtp.is_none() {
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
                    check_url(&mut errors, &format!("receivers[{i}].slack.api_url"), &s.api_url);
                }
                ReceiverKind::Jira(j) => {
                    check_url(&mut errors, &format!("receivers[{i}].jira.url"), &j.url);
                    if j.api == JiraApi::Cloud && j.user.is_none() {
                        errors.push(invalid(
                            format!("receivers[{i}].jira.user"),
                            "Jira Cloud needs `user` (the account e-mail) with the API `token`",
                        ));
                    }
                }
                ReceiverKind::Github(g) => {
                    check_url(&mut errors, &format!("receivers[{i}].github.api_url"), &g.api_url);
                    if g.repo.split('/').filter(|p| !p.is_empty()).count() != 2 {
                        errors.push(invalid(format!("receivers[{i}].github.repo"), "must be `owner/name`"));
                    }
                }
                ReceiverKind::Pagerduty(p) => check_url(&mut errors, &format!("receivers[{i}].pagerduty.url"), &p.url),
                ReceiverKind::Alertmanager(a) => {
                    check_url(&mut errors, &format!("receivers[{i}].alertmanager.url"), &a.url)
                }
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
        let known = |n: &str| names.contains(n);
        for (team, t) in &self.teams {
            for (j, r) in t.receivers.iter().enumerate() {
                if !known(r) {
                    errors.push(invalid(
                        format!("teams.{team}.receivers[{j}]"),
                        format!("unknown receiver {r:?} (define it under `receivers`)"),
                    ));
                }
            }
            let mut last = Duration::ZERO;
            for (s, step) in t.escalation.iter().enumerate() {
                if step.after < last {
                    errors.push(invalid(
                        format!("teams.{team}.escalation[{s}].after"),
                        "steps must be in increasing order of `after`",
                    ));
                }
                last = step.after;
                for (j, r) in step.receivers.iter().enumerate() {
                    if !known(r) {
                        errors.push(invalid(
                            format!("teams.{team}.escalation[{s}].receivers[{j}]"),
                            format!("unknown receiver {r:?}"),
                        ));
                    }
                }
            }
        }
        for (i, route) in self.routes.iter().enumerate() {
            if route.receivers.is_empty() {
                errors.push(invalid(
                    format!("routes[{i}].receivers"),
                    "must name at least one receiver",
                ));
            }
            for (j, r) in route.receivers.iter().enumerate() {
                if !known(r) {
                    errors.push(invalid(
                        format!("routes[{i}].receivers[{j}]"),
                        format!("unknown receiver {r:?}"),
                    ));
                }
            }
            for (key, glob) in [
                ("app", &route.app),
                ("namespace", &route.namespace),
                ("cluster", &route.cluster),
            ] {
                if let Some(g) = glob
                    && let Err(e) = globset::Glob::new(g)
                {
                    errors.push(invalid(
                        format!("routes[{i}].{key}"),
                        format!("bad glob {g:?}: {}", e.kind()),
                    ));
                }
            }
        }
        for (key, globs) in [
            ("namespaces", &self.rules.production().0.namespaces),
            ("clusters", &self.rules.production().0.clusters),
        ] {
            for (j, g) in globs.iter().enumerate() {
                if let Err(e) = globset::Glob::new(g) {
                    errors.push(invalid(
                        format!("rules.pruned.production.{key}[{j}]"),
                        format!("bad glob {g:?}: {}", e.kind()),
                    ));
                }
            }
        }
        for (j, k) in self.grouping.group_by.iter().enumerate() {
            let ok = matches!(
                k.as_str(),
                "team" | "kind" | "severity" | "project" | "app" | "namespace" | "cluster" | "fingerprint"
            ) || k.starts_with("labels.");
            if !ok {
                errors.push(invalid(
                    format!("grouping.group_by[{j}]"),
                    format!(
                        "unknown field {k:?}: use team, kind, severity, project, app, namespace, cluster, fingerprint or labels.<key>"
                    ),
                ));
            }
        }
        if self.grouping.group_interval.is_zero() {
            errors.push(invalid("grouping.group_interval", "must be greater than 0"));
        }
        if self.grouping.repeat_interval.is_zero() {
            errors.push(invalid("grouping.repeat_interval", "must be greater than 0"));
        }
        if self.server.max_body_bytes < 1024 {
            errors.push(invalid("server.max_body_bytes", "must be at least 1024"));
        }
        if self.server.listen.parse::<std::net::SocketAddr>().is_err() {
            errors.push(invalid(
                "server.listen",
                format!("{:?} is not an address:port such as 127.0.0.1:8080", self.server.listen),
            ));
        }
        {
            use secrecy::ExposeSecret;
            let url = self.storage.url.expose_secret();
            if !(url.starts_with("sqlite:") || url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                errors.push(invalid(
                    "storage.url",
                    "must start with sqlite: or postgres:// (the value is not shown: it may hold a password)",
                ));
            }
        }
        if self.outbox.concurrency == 0 {
            errors.push(invalid("outbox.concurrency", "must be at least 1"));
        }
        if self.scheduler.tick.is_zero() {
            errors.push(invalid("scheduler.tick", "must be greater than 0"));
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(ConfigError::Many(errors)),
        }
    }

    /// Listening beyond loopback with no credentials is refused unless explicitly allowed.
    pub fn check_exposure(&self) -> Result<(), ConfigError> {
        let addr: std::net::SocketAddr = self
            .server
            .listen
            .parse()
            .map_err(|_| invalid("server.listen", "not an address:port"))?;
        let auth = &self.server.auth;
        if !addr.ip().is_loopback() && auth.bearer_tokens.is_empty() && auth.basic.is_empty() && !auth.allow_anonymous {
            return Err(invalid(
                "server.auth",
                format!(
                    "listening on {addr} (not loopback) with no credentials: set server.auth.bearer_tokens or \
                     server.auth.basic, or server.auth.allow_anonymous: true if a proxy in front authenticates"
                ),
            ));
        }
        Ok(())
    }

    pub fn receiver(&self, name: &str) -> Option<&ReceiverSettings> {
        self.receivers.iter().find(|r| r.name == name)
    }
}

fn check_url(errors: &mut Vec<ConfigError>, path: &str, u: &str) {
    match url::Url::parse(u) {
        Ok(p) if p.scheme() == "http" || p.scheme() == "https" => {}
        _ => errors.push(invalid(path, format!("{u:?} is not an http(s) URL"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_means_every_default() {
        let s = Settings::from_yaml("").expect("defaults are valid");
        assert_eq!(s.server.listen, "127.0.0.1:8080");
        assert_eq!(s.receivers[0].name, "console");
        assert_eq!(s.rules.rule(Kind::OutOfSync).r#for, Duration::from_secs(3600));
    }

    #[test]
    fn errors_name_the_key_path() {
        let cases = [
            ("server: {listen: 5}", "server.listen"),
            ("rules: {out_of_sync: {for: -1h}}", "rules.out_of_sync.for"),
            ("routes: [{receivers: [nobody]}]", "routes[0].receivers[0]"),
            ("routes: [{app: 'a[', receivers: [console]}]", "routes[0].app"),
            ("teams: {pay: {receivers: [ghost]}}", "teams.pay.receivers[0]"),
            ("receivers: [{name: x, slack: {}}]", "receivers[0].slack"),
            ("receivers: [{name: x, carrier_pigeon: {}}]", "receivers[0]"),
            ("grouping: {group_by: [colour]}", "grouping.group_by[0]"),
            ("surprise: 1", "surprise"),
            ("storage: {url: 'mysql://x'}", "storage.url"),
            (
                "teams: {pay: {escalation: [{after: 4h, receivers: [console]}, {after: 1h, receivers: [console]}]}}",
                "teams.pay.escalation[1].after",
            ),
        ];
        for (yaml, path) in cases {
            let err = Settings::from_yaml(yaml).expect_err(yaml).to_string();
            assert!(err.contains(path), "{yaml}: expected {path} in {err}");
        }
    }

    #[test]
    fn exposure_without_credentials_is_refused() {
        let s = Settings::from_yaml("server: {listen: '0.0.0.0:8080'}").expect("valid");
        assert!(s.check_exposure().is_err());
        let s = Settings::from_yaml("server: {listen: '0.0.0.0:8080', auth: {allow_anonymous: true}}").expect("valid");
        assert!(s.check_exposure().is_ok());
        let s = Settings::from_yaml("server: {listen: '0.0.0.0:8080', auth: {bearer_tokens: [abc]}}").expect("valid");
        assert!(s.check_exposure().is_ok());
    }
}
