//! Tests across integrations: the registry (every kind parses, keeps its defaults and builds), and the chat receivers
//! that post to one incoming-webhook URL, which classify failures alike and never leak that URL.

use std::time::Duration;

use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::testing::{self, assert_no_secret, requests};
use super::{
    DeliveryError, Receiver, ReceiverKind, ReceiverType, Shared, build_all, discord, googlechat, mattermost, msteams,
};
use crate::configuration::Settings;
use crate::domain::{Action, Contact};

/// One receiver of every kind, each named by its key.
const EVERY_KIND: &str = r#"
smtp: {url: "smtp://127.0.0.1:25", from: herald@example.com}
receivers:
  - {name: console, console: {file: /dev/null}}
  - {name: email, email: {to: [oncall@example.com]}}
  - {name: slack, slack: {webhook_url: "https://hooks.slack.com/services/T0/B0/x"}}
  - {name: msteams, msteams: {webhook_url: "https://example.com/workflows/x"}}
  - {name: googlechat, googlechat: {webhook_url: "https://chat.googleapis.com/v1/spaces/x/messages"}}
  - {name: mattermost, mattermost: {webhook_url: "https://mattermost.example.com/hooks/x"}}
  - {name: matrix, matrix: {homeserver: "https://matrix.example.org", room_id: "!abc:example.org", access_token: t}}
  - {name: discord, discord: {webhook_url: "https://discord.com/api/webhooks/1/x"}}
  - {name: telegram, telegram: {bot_token: "123:abc", chat_id: -1001}}
  - {name: webhook, webhook: {url: "https://example.com/hook"}}
  - {name: jira, jira: {url: "https://jira.example.com", user: bot@example.com, token: t, project: PAY}}
  - {name: github, github: {repo: acme/payments, token: t}}
  - {name: pagerduty, pagerduty: {routing_key: k}}
  - {name: alertmanager, alertmanager: {url: "http://alertmanager:9093"}}
  - {name: redmine, redmine: {url: "https://redmine.example.com", api_key: k, project_id: payments, closed_status_id: 5}}
  - {name: servicenow, servicenow: {instance_url: "https://acme.service-now.com", token: t}}
  - {name: github_status, github_status: {token: t}}
  - {name: grafana, grafana: {url: "https://grafana.example.com", token: t}}
"#;

#[test]
fn every_kind_keeps_its_defaults_for_resolves_grouping_rate_and_fallback() {
    let settings = Settings::from_yaml(EVERY_KIND).expect("every kind is valid");
    // (key, sends resolves, one notification per incident, messages per second, receives what no team claims)
    let expected = [
        ("console", true, false, None, true),
        ("email", false, false, None, false),
        ("slack", true, false, Some(1.0), false),
        ("msteams", false, false, None, false),
        ("googlechat", false, false, None, false),
        ("mattermost", false, false, None, false),
        ("matrix", true, false, Some(1.0), false),
        ("discord", false, false, None, false),
        ("telegram", true, false, Some(1.0), false),
        ("webhook", false, false, None, false),
        ("jira", true, true, None, false),
        ("github", true, true, None, false),
        ("pagerduty", true, true, None, false),
        ("alertmanager", true, true, None, false),
        ("redmine", true, true, None, false),
        ("servicenow", true, true, None, false),
        ("github_status", false, true, None, false),
        ("grafana", false, true, None, false),
    ];
    assert_eq!(settings.receivers.len(), expected.len());
    let types: Vec<ReceiverType> = settings.receivers.iter().map(|r| r.kind.receiver_type()).collect();
    assert_eq!(
        types,
        ReceiverType::ALL,
        "one receiver of every type, in the order of ReceiverType::ALL"
    );
    for (r, (key, resolves, per_incident, rate, fallback)) in settings.receivers.iter().zip(expected) {
        assert_eq!(
            (r.name.as_str(), r.kind.type_name()),
            (key, key),
            "the key serde reads is the key we name"
        );
        assert_eq!(r.sends_resolved(), resolves, "{key}");
        assert_eq!(r.per_incident(), per_incident, "{key}");
        assert_eq!(r.rate_limit(), rate, "{key}");
        assert_eq!(r.capabilities().fallback, fallback, "{key}");
        assert_eq!(
            r.capabilities().digest,
            !per_incident,
            "{key}: only messages receivers get digests"
        );
        let reaches = (key == "email").then_some(Contact::Email);
        assert_eq!(
            r.capabilities().reaches_person,
            reaches,
            "{key}: only e-mail and a Slack bot"
        );
        assert_eq!(
            r.capabilities().change_events,
            key == "grafana",
            "{key}: change events are asked for (PagerDuty) or all there is (Grafana)"
        );
        let syncs_only = matches!(key, "github_status" | "grafana");
        assert_eq!(r.capabilities().incidents, !syncs_only, "{key}: takes incidents");
        assert_eq!(r.capabilities().commit_statuses, key == "github_status", "{key}");
    }
}

#[test]
fn receiver_type_all_names_every_key_serde_reads_in_order() {
    // serde lists the variants it knows when refused an unknown one: a variant of `ReceiverKind` left out of
    // `ReceiverType::ALL` (and so out of the previews and `--render`) fails here.
    let refused = serde_json::from_str::<ReceiverKind>(r#"{"fax": {}}"#).expect_err("no fax receiver");
    let refused = refused.to_string();
    let (_, known) = refused
        .split_once("expected one of ")
        .expect("serde lists the variants");
    let known: Vec<&str> = known
        .split(',')
        .map(|k| k.trim().trim_matches('`'))
        .map(|k| k.split('`').next().unwrap_or(k))
        .collect();
    let all: Vec<&str> = ReceiverType::ALL.iter().map(|t| t.as_str()).collect();
    assert_eq!(known, all);
    for t in ReceiverType::ALL {
        assert_eq!(ReceiverType::parse(t.as_str()), Some(t));
    }
}

#[test]
fn a_slack_bot_reaches_a_person_and_pagerduty_sends_change_events_when_asked() {
    let settings = Settings::from_yaml(
        "receivers:
  - {name: bot, slack: {token: xoxb-1, channel: '#ops'}}
  - {name: pd, pagerduty: {routing_key: k, change_events: true}}
",
    )
    .expect("valid");
    let caps: Vec<_> = settings.receivers.iter().map(|r| r.capabilities()).collect();
    assert_eq!(caps[0].reaches_person, Some(Contact::Slack));
    assert!(!caps[0].change_events);
    assert_eq!(caps[1].reaches_person, None);
    assert!(caps[1].change_events);
}

/// Receivers told of syncs only (GitHub commit statuses, Grafana annotations) take no incidents: a route, an
/// escalation step or `allowed_receivers` naming one is a configuration error; a team naming one among its
/// receivers scopes it to the team's Applications, and the team's incidents go to its other receivers (or, with
/// none, where no team's go).
#[test]
fn a_receiver_told_of_syncs_only_is_named_by_teams_never_by_routes_or_escalation_steps() {
    let receivers = "receivers: [{name: chat, console: {}}, {name: gh, github_status: {token: t}}, \
                     {name: annotations, grafana: {url: 'https://g', token: t}}]";
    for (config, key) in [
        (
            "routes: [{app: 'pay-*', receivers: [chat, gh]}]",
            "routes[0].receivers[1]",
        ),
        (
            "teams: {pay: {receivers: [chat], escalation: [{after: 1h, receivers: [annotations]}]}}",
            "teams.pay.escalation[0].receivers[0]",
        ),
        (
            "teams: {pay: {receivers: [chat], allowed_receivers: [gh]}}",
            "teams.pay.allowed_receivers[0]",
        ),
    ] {
        let err = Settings::from_yaml(&format!("{receivers}\n{config}"))
            .expect_err(config)
            .to_string();
        assert!(
            err.contains(key) && err.contains("takes no incidents"),
            "{config}: {err}"
        );
    }
    let digest = "teams: {pay: {receivers: [chat], digest: {schedule: daily 09:00, receivers: [annotations]}}}";
    let err = Settings::from_yaml(&format!("{receivers}\n{digest}"))
        .expect_err(digest)
        .to_string();
    assert!(
        err.contains("teams.pay.digest.receivers[0]")
            && err.contains("told of syncs only (commit statuses, annotations): it gets no digest"),
        "{err}"
    );

    let settings = Settings::from_yaml(&format!(
        "{receivers}\nownership: {{default_team: ops}}\nteams: {{pay: {{receivers: [chat, gh, annotations]}}, \
         search: {{receivers: [gh]}}, ops: {{receivers: [chat]}}}}"
    ))
    .expect("a team may name them");
    let router = crate::routing::Router::new(&settings);
    let to = |team: &str| {
        let labels = crate::domain::Labels {
            team: team.into(),
            ..Default::default()
        };
        router.route(&labels).receivers
    };
    assert_eq!(
        to("pay"),
        ["chat"],
        "the team's incidents reach its other receivers only"
    );
    assert_eq!(to("search"), ["chat"], "with none left, the default team's receivers");
}

#[tokio::test]
async fn ticket_and_paging_receivers_refuse_a_digest_for_good() {
    let settings = std::sync::Arc::new(Settings::from_yaml(EVERY_KIND).expect("every kind is valid"));
    let built = build_all(&Shared::new(settings, testing::clock())).expect("builds");
    let mut n = crate::domain::Notification::test("x", testing::now());
    n.action = Action::Digest;
    n.body = crate::domain::Body::Digest(Box::default());
    for key in [
        "jira",
        "github",
        "redmine",
        "servicenow",
        "pagerduty",
        "alertmanager",
        "github_status",
        "grafana",
    ] {
        let got = built[key].deliver(&n, None).await;
        assert!(matches!(got, Err(DeliveryError::Permanent { .. })), "{key}: {got:?}");
    }
}

#[test]
fn send_resolved_and_rate_limit_per_second_override_the_defaults() {
    let settings = Settings::from_yaml(
        r#"
receivers:
  - {name: quiet-slack, send_resolved: false, rate_limit_per_second: 5, slack: {webhook_url: "https://hooks.slack.com/x"}}
  - {name: loud-hook, send_resolved: true, rate_limit_per_second: 0.5, webhook: {url: "https://example.com/hook"}}
"#,
    )
    .expect("valid");
    let slack = &settings.receivers[0];
    assert!(!slack.sends_resolved());
    assert_eq!(slack.rate_limit(), Some(5.0));
    let hook = &settings.receivers[1];
    assert!(hook.sends_resolved());
    assert_eq!(hook.rate_limit(), Some(0.5));
}

#[test]
fn every_kind_builds_into_a_receiver() {
    let settings = Settings::from_yaml(EVERY_KIND).expect("every kind is valid");
    let shared = Shared::new(std::sync::Arc::new(settings), testing::clock());

    let built = build_all(&shared).expect("every kind builds");

    assert_eq!(built.len(), super::ReceiverType::ALL.len(), "one of each");
}

#[test]
fn each_kind_checks_its_own_block_under_its_key_path() {
    let cases = [
        (
            "receivers: [{name: x, email: {to: [nobody]}}]",
            "receivers[\"x\"].email",
        ),
        (
            "receivers: [{name: x, email: {to: [a@example.com]}}]",
            "receivers[\"x\"].email",
        ),
        (
            "receivers: [{name: x, slack: {token: t}}]",
            "receivers[\"x\"].slack.channel",
        ),
        (
            "receivers: [{name: x, slack: {webhook_url: u, api_url: nope}}]",
            "receivers[\"x\"].slack.api_url",
        ),
        (
            "receivers: [{name: x, jira: {url: u, token: t, project: P, api: datacenter}}]",
            "receivers[\"x\"].jira.url",
        ),
        (
            "receivers: [{name: x, jira: {url: 'https://j', token: t, project: P}}]",
            "receivers[\"x\"].jira.user",
        ),
        (
            "receivers: [{name: x, github: {repo: acme, token: t}}]",
            "receivers[\"x\"].github.repo",
        ),
        (
            "receivers: [{name: x, github: {repo: a/b, token: t, api_url: nope}}]",
            "receivers[\"x\"].github.api_url",
        ),
        (
            "receivers: [{name: x, github_status: {token: t, api_url: nope}}]",
            "receivers[\"x\"].github_status.api_url",
        ),
        (
            "receivers: [{name: x, grafana: {url: nope, token: t}}]",
            "receivers[\"x\"].grafana.url",
        ),
        (
            "receivers: [{name: x, pagerduty: {routing_key: k, url: nope}}]",
            "receivers[\"x\"].pagerduty.url",
        ),
        (
            "receivers: [{name: x, alertmanager: {url: nope}}]",
            "receivers[\"x\"].alertmanager.url",
        ),
        (
            "receivers: [{name: x, redmine: {url: nope, api_key: k, project_id: 1, closed_status_id: 5}}]",
            "receivers[\"x\"].redmine.url",
        ),
        (
            "receivers: [{name: x, servicenow: {instance_url: 'https://x.service-now.com'}}]",
            "receivers[\"x\"].servicenow.user",
        ),
        (
            "receivers: [{name: x, discord: {webhook_url: 'discord.com/api/webhooks/1/x'}}]",
            "receivers[\"x\"].discord.webhook_url",
        ),
        (
            "receivers: [{name: x, telegram: {bot_token: 'not a token', chat_id: 1}}]",
            "receivers[\"x\"].telegram.bot_token",
        ),
        (
            "receivers: [{name: x, telegram: {bot_token: '1:a', chat_id: 'ops'}}]",
            "receivers[\"x\"].telegram.chat_id",
        ),
        (
            "receivers: [{name: x, telegram: {bot_token: '1:a', chat_id: 1, api_url: nope}}]",
            "receivers[\"x\"].telegram.api_url",
        ),
        (
            "receivers: [{name: x, telegram: {bot_token: '1:a', chat_id: 1, message_thread_id: 0}}]",
            "receivers[\"x\"].telegram.message_thread_id",
        ),
        (
            "receivers: [{name: x, telegram: {bot_token: '1:a', chat_id: 1, chat: 2}}]",
            "chat",
        ),
        ("receivers: [{name: x, telegram: {chat_id: 1}}]", "bot_token"),
        (
            "receivers: [{name: x, discord: {url: 'https://discord.com/api/webhooks/1/x'}}]",
            "url",
        ),
    ];
    for (yaml, path) in cases {
        testing::assert_settings_refused(yaml, path);
    }
}

const TEAMS_PATH: &str = "/workflows/abc123/triggers/manual/paths/invoke";
const TEAMS_SIG: &str = "teamsSignatureSecretValue0123456789";
const GCHAT_PATH: &str = "/v1/spaces/AAAAspace/messages";
const GCHAT_KEY: &str = "AIzaSyGoogleChatKeySecret0123";
const GCHAT_TOKEN: &str = "googleChatTokenSecret0123456789";
const MM_PATH: &str = "/hooks/mattermosthooksecret0123456";
const DISCORD_PATH: &str = "/api/webhooks/1234567890/discordWebhookTokenSecret0123456789";
const SECRETS: [&str; 7] = [
    TEAMS_PATH,
    TEAMS_SIG,
    GCHAT_PATH,
    GCHAT_KEY,
    GCHAT_TOKEN,
    MM_PATH,
    DISCORD_PATH,
];

#[derive(Clone, Copy, Debug)]
enum ChatReceiver {
    Teams,
    GoogleChat,
    Mattermost,
    Discord,
}

const ALL: [ChatReceiver; 4] = [
    ChatReceiver::Teams,
    ChatReceiver::GoogleChat,
    ChatReceiver::Mattermost,
    ChatReceiver::Discord,
];

impl ChatReceiver {
    /// The receiver's webhook URL on `base`, secrets included.
    fn url(self, base: &str) -> String {
        match self {
            ChatReceiver::Teams => format!("{base}{TEAMS_PATH}?api-version=1&sig={TEAMS_SIG}"),
            ChatReceiver::GoogleChat => format!("{base}{GCHAT_PATH}?key={GCHAT_KEY}&token={GCHAT_TOKEN}"),
            ChatReceiver::Mattermost => format!("{base}{MM_PATH}"),
            ChatReceiver::Discord => format!("{base}{DISCORD_PATH}"),
        }
    }

    fn receiver(self, url: String) -> Box<dyn Receiver> {
        let http = testing::http();
        match self {
            ChatReceiver::Teams => Box::new(msteams::Teams::new(msteams::Config::new(url), http)),
            ChatReceiver::GoogleChat => Box::new(googlechat::GoogleChat::new(googlechat::Config::new(url), http, None)),
            ChatReceiver::Mattermost => Box::new(mattermost::Mattermost::new(mattermost::Config::new(url), http, None)),
            ChatReceiver::Discord => Box::new(discord::Discord::new(discord::Config::new(url), http, None)),
        }
    }
}

/// Mounts one answer on any POST, delivers once and returns the failure (after checking exactly one request).
async fn failure(kind: ChatReceiver, answer: ResponseTemplate) -> DeliveryError {
    failure_with(kind, move |_| answer).await
}

/// Like [`failure`], with an answer made from the receiver's own webhook URL.
async fn failure_with(kind: ChatReceiver, answer: impl FnOnce(&str) -> ResponseTemplate) -> DeliveryError {
    let server = MockServer::start().await;
    let url = kind.url(&server.uri());
    Mock::given(method("POST"))
        .respond_with(answer(&url))
        .expect(1)
        .mount(&server)
        .await;
    let e = kind
        .receiver(url)
        .deliver(&testing::notification(Action::Open), None)
        .await
        .unwrap_err();
    assert_eq!(requests(&server).await.len(), 1, "{kind:?}");
    assert_no_secret(&e, &SECRETS);
    e
}

#[tokio::test]
async fn every_chat_receiver_treats_429_as_transient_with_the_retry_after_delay() {
    for kind in ALL {
        let e = failure(kind, ResponseTemplate::new(429).insert_header("Retry-After", "7")).await;
        let delay = match e {
            DeliveryError::Transient { retry_after, .. } => retry_after,
            other => panic!("{kind:?}: expected a transient failure, got {other:?}"),
        };
        assert_eq!(delay, Some(Duration::from_secs(7)), "{kind:?}");
    }
}

#[tokio::test]
async fn every_chat_receiver_treats_500_as_transient() {
    for kind in ALL {
        let e = failure(kind, ResponseTemplate::new(500).set_body_string("boom")).await;
        assert!(matches!(e, DeliveryError::Transient { .. }), "{kind:?}: {e:?}");
    }
}

#[tokio::test]
async fn every_chat_receiver_treats_400_as_permanent() {
    for kind in ALL {
        let e = failure(kind, ResponseTemplate::new(400).set_body_string("bad payload")).await;
        assert!(matches!(e, DeliveryError::Permanent { .. }), "{kind:?}: {e:?}");
        assert!(e.to_string().contains("bad payload"), "{kind:?}: {e}");
    }
}

#[tokio::test]
async fn an_error_body_echoing_the_webhook_url_does_not_leak_it() {
    for kind in ALL {
        // The whole URL, then its path and query on their own, as a careless server might echo them.
        let e = failure_with(kind, |url| {
            let u = url::Url::parse(url).unwrap();
            let echo = format!("invalid webhook {url} (path {}, query {:?})", u.path(), u.query());
            ResponseTemplate::new(404).set_body_string(echo)
        })
        .await;
        assert!(e.to_string().contains("[redacted]"), "{kind:?}: {e}");
    }
}

#[tokio::test]
async fn an_unreachable_webhook_is_transient_and_keeps_the_url_secret() {
    let n = testing::notification(Action::Open);
    for kind in ALL {
        let e = kind
            .receiver(kind.url(testing::UNREACHABLE))
            .deliver(&n, None)
            .await
            .unwrap_err();
        assert!(matches!(e, DeliveryError::Transient { .. }), "{kind:?}: {e:?}");
        assert_no_secret(&e, &SECRETS);
    }
}

#[tokio::test]
async fn every_built_chat_and_webhook_receiver_sends_only_safe_links() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&server)
        .await;
    let base = server.uri();
    let yaml = format!(
        r#"
receivers:
  - {{name: slack, slack: {{webhook_url: "{base}/slack"}}}}
  - {{name: msteams, msteams: {{webhook_url: "{base}/teams"}}}}
  - {{name: googlechat, googlechat: {{webhook_url: "{base}/gchat"}}}}
  - {{name: mattermost, mattermost: {{webhook_url: "{base}/mm"}}}}
  - {{name: discord, discord: {{webhook_url: "{base}/discord"}}}}
  - {{name: webhook, webhook: {{url: "{base}/hook"}}}}
"#
    );
    let settings = std::sync::Arc::new(Settings::from_yaml(&yaml).expect("valid"));
    let built = build_all(&Shared::new(settings, testing::clock())).expect("builds");
    let hostile = "https://argocd.example.com/\n<!channel> [Fix-it-now](https://evil.example)";
    let mut n = testing::notification(Action::Open);
    n.incidents_mut()[0].app_url = Some(hostile.into());
    n.incidents_mut()[0].resources[0].url = Some(hostile.into());
    let safe = testing::notification(Action::Open);

    for (name, receiver) in &built {
        receiver.deliver(&n, None).await.expect(name);
        receiver.deliver(&safe, None).await.expect(name);
    }

    let sent = requests(&server).await;
    assert_eq!(sent.len(), 2 * built.len());
    for pair in sent.chunks(2) {
        let (hostile_body, safe_body) = (
            String::from_utf8_lossy(&pair[0].body),
            String::from_utf8_lossy(&pair[1].body),
        );
        let path = pair[0].url.path();
        assert!(!hostile_body.contains("<!channel>"), "{path}: {hostile_body}");
        assert!(
            !hostile_body.contains("](https://evil.example"),
            "{path}: {hostile_body}"
        );
        assert!(
            !hostile_body.contains("argocd.example.com/\\n"),
            "{path}: {hostile_body}"
        );
        assert!(
            safe_body.contains(testing::APP_URL),
            "{path}: a safe link is kept: {safe_body}"
        );
    }
}
