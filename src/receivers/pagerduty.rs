//! The PagerDuty receiver: Events API v2. Open, update and test `trigger` an alert, resolve `resolve`s it; the
//! `dedup_key` is the hex SHA-256 of the incident fingerprint, so PagerDuty itself folds repeats into one alert and
//! Herald needs no memo. A 400 is never retried (the event is invalid); 429 and 5xx are. With `change_events: true`
//! a sync that deployed a new revision is also sent, as a change event (`change`).

mod change;

use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::http::Http;
use super::redact::Redactor;
use super::{Capabilities, Delivered, DeliveryError, Integration, Memo, Receiver, Sections, Shared};
use crate::configuration::{ConfigError, ReceiverSettings, check_url};
use crate::domain::{Action, Body, Incident, Notification};
use crate::receivers::render;
use crate::receivers::render::truncate;

/// Events API v2 limit on `payload.summary`.
const SUMMARY_MAX_CHARS: usize = 1024;
/// Keeps the event well under the API's size limit when an application has many unhealthy resources.
const MAX_RESOURCES: usize = 50;

/// The alert's identity at PagerDuty: 64 hex digits, within the 255-character limit.
pub fn dedup_key(fingerprint: &str) -> String {
    hex::encode(Sha256::digest(fingerprint.as_bytes()))
}

/// PagerDuty's severities are critical, error, warning and info; Herald's map onto three of them.
fn severity(s: crate::domain::Severity) -> &'static str {
    s.as_str()
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.trim().is_empty()).then_some(s)
}

/// `pagerduty: {url, routing_key}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "default_url")]
    pub url: String,
    pub routing_key: SecretString,
    /// Also send a change event for each sync that deploys a new revision.
    #[serde(default)]
    pub change_events: bool,
    /// Where change events go (default: `url` with `/v2/enqueue` replaced by `/v2/change/enqueue`).
    #[serde(default)]
    pub change_url: Option<String>,
}

fn default_url() -> String {
    "https://events.pagerduty.com/v2/enqueue".into()
}

impl Integration for Config {
    /// One alert per incident, resolved when the incident resolves.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            change_events: self.change_events,
            ..Capabilities::ACKNOWLEDGED_PER_INCIDENT
        }
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        check_url(errors, &format!("{path}.url"), &self.url);
        if let Some(u) = &self.change_url {
            check_url(errors, &format!("{path}.change_url"), u);
        }
    }

    fn build(&self, _r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(PagerDuty::new(self.clone(), shared.http.clone())))
    }
}

pub struct PagerDuty {
    settings: Config,
    http: Http,
    redactor: Redactor,
}

impl PagerDuty {
    pub fn new(settings: Config, http: Http) -> Self {
        // The routing key travels in the body, which a downstream may echo back whole.
        let redactor = Redactor::default()
            .secret(settings.routing_key.expose_secret())
            .url_credentials(&settings.url)
            .url_credentials(&change::url(&settings));
        Self {
            settings,
            http,
            redactor,
        }
    }

    fn trigger(&self, n: &Notification, i: &Incident) -> Value {
        trigger_event(n, i, self.settings.routing_key.expose_secret())
    }

    /// Blanks out the routing key, should a server echo it back.
    fn redact(&self, e: DeliveryError) -> DeliveryError {
        self.redactor.apply(DeliveryError::prefixed("pagerduty", e))
    }
}

/// The `trigger` event: what happened (the incident's one-line summary), where, how bad, and everything a
/// responder reads first in `custom_details`.
pub fn trigger_event(n: &Notification, i: &Incident, routing_key: &str) -> Value {
    let summary = non_empty(&i.summary).unwrap_or(&n.title);
    let summary = truncate(
        &summary.split_whitespace().collect::<Vec<_>>().join(" "),
        SUMMARY_MAX_CHARS,
    );
    let mut source = match (non_empty(&i.app_namespace), non_empty(&i.app_name)) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (None, Some(name)) => name.to_string(),
        _ => "argocd".to_string(),
    };
    // Two Argo CD instances may each have an Application of this name: say which one (the default goes unsaid).
    if !crate::domain::is_default_instance(&i.instance) {
        source = format!("{}/{source}", i.instance);
    }

    let mut details = Map::new();
    for (k, v) in render::facts(i, n.zone) {
        details.insert(k.to_string(), json!(v));
    }
    details.insert("Reason".into(), json!(n.reason));
    details.insert("Fingerprint".into(), json!(i.fingerprint));
    if !i.resources.is_empty() {
        let resources: Vec<Value> = i
            .resources
            .iter()
            .take(MAX_RESOURCES)
            .map(|r| {
                json!({
                    "kind": r.kind, "namespace": r.namespace, "name": r.name,
                    "status": r.status, "message": r.message,
                })
            })
            .collect();
        details.insert("Resources".into(), json!(resources));
        if i.resources.len() > MAX_RESOURCES {
            details.insert("Resources not shown".into(), json!(i.resources.len() - MAX_RESOURCES));
        }
    }
    if !i.messages.is_empty() {
        details.insert("Messages".into(), json!(i.messages));
    }
    if !i.hints.is_empty() {
        let hints: Vec<String> = i.hints.iter().map(|h| format!("{}: {}", h.title, h.text)).collect();
        details.insert("What to do".into(), json!(hints));
    }
    if !i.notes.is_empty() {
        details.insert("Notes".into(), json!(i.notes));
    }

    let mut payload = json!({
        "summary": summary,
        "source": source,
        "severity": severity(i.severity),
        "timestamp": i.fired_at.unwrap_or(i.since).to_rfc3339(),
        "custom_details": details,
    });
    let component = i.resources.first().map(|r| r.display());
    for (key, value) in [
        ("component", component.as_deref()),
        ("group", non_empty(&i.team)),
        ("class", Some(i.kind.as_str())),
    ] {
        if let Some(v) = value {
            payload[key] = json!(v);
        }
    }

    let mut event = json!({
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": dedup_key(&i.fingerprint),
        "client": "Herald",
        "payload": payload,
    });
    if let Some(url) = &i.app_url {
        event["client_url"] = json!(url);
        event["links"] = json!([{ "href": url, "text": format!("{} in Argo CD", i.app_title()) }]);
    }
    event
}

#[async_trait::async_trait]
impl Receiver for PagerDuty {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        if let Body::Change(c) = &n.body {
            return self.send_change(c).await;
        }
        let i = super::primary_incident(n, "pagerduty")?;
        let key = dedup_key(&i.fingerprint);
        let (event, verb) = match n.action {
            Action::Resolve => (
                json!({
                    "routing_key": self.settings.routing_key.expose_secret(),
                    "event_action": "resolve",
                    "dedup_key": key,
                }),
                "resolved",
            ),
            // Events API v2: the alert of the same dedup_key stops escalating in PagerDuty too.
            Action::Acknowledge => (
                json!({
                    "routing_key": self.settings.routing_key.expose_secret(),
                    "event_action": "acknowledge",
                    "dedup_key": key,
                }),
                "acknowledged",
            ),
            Action::Open | Action::Update | Action::Test => (self.trigger(n, i), "triggered"),
            Action::Digest => return Err(super::digest_refused("pagerduty")),
        };
        let request = self.http.client().post(&self.settings.url).json(&event);
        (self.http.send(request, &self.redactor).await).map_err(|e| self.redact(e))?;
        Ok(Delivered {
            memo: None,
            detail: format!("{verb} alert {}", &key[..12]),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use secrecy::SecretString;
    use serde_json::json;
    use wiremock::matchers::{body_json, method, path};
    use wiremock::{Mock, MockServer, Request, ResponseTemplate};

    use super::*;
    use crate::receivers::testing::{self, APP_URL, FINGERPRINT, firing_notification, refuse_anything_else};

    const ROUTING_KEY: &str = "R0UT1NGKEYs3cr3t0000000000000000";

    /// Settings sending to the events API at `url` with `routing_key` (and change events when `change_events`, to
    /// the URL derived from `url`).
    pub(super) fn config(url: String, routing_key: &str, change_events: bool) -> Config {
        Config {
            url,
            routing_key: SecretString::from(routing_key),
            change_events,
            change_url: None,
        }
    }

    fn pagerduty(server: &MockServer) -> PagerDuty {
        let settings = config(format!("{}/v2/enqueue", server.uri()), ROUTING_KEY, false);
        PagerDuty::new(settings, testing::http())
    }

    /// A PagerDuty answering exactly one event with `template`, and nothing else.
    async fn enqueue_answering(template: ResponseTemplate) -> MockServer {
        testing::expecting_one_post("/v2/enqueue", template).await
    }

    fn accepted() -> ResponseTemplate {
        ResponseTemplate::new(202).set_body_json(json!({
            "status": "success", "message": "Event processed", "dedup_key": dedup_key(FINGERPRINT),
        }))
    }

    #[test]
    fn another_instances_alert_names_its_instance_where_a_responder_reads_the_application() {
        let mut n = firing_notification(Action::Open);
        n.incidents_mut()[0].instance = "us".into();
        n.incidents_mut()[0].summary = "us/argocd/payments is Degraded".into();

        let event = trigger_event(&n, &n.incidents()[0], ROUTING_KEY);

        assert_eq!(event["payload"]["source"], "us/argocd/payments");
        assert_eq!(event["links"][0]["text"], "us/payments in Argo CD");
        assert_eq!(event["payload"]["custom_details"]["Argo CD instance"], "us");
        assert_eq!(event["payload"]["summary"], "us/argocd/payments is Degraded");
        assert_eq!(
            event["dedup_key"],
            dedup_key(FINGERPRINT),
            "the fingerprint tells instances apart"
        );
    }

    #[tokio::test]
    async fn an_open_incident_triggers_an_alert_keyed_by_its_fingerprint() {
        let server = enqueue_answering(accepted()).await;

        let out = pagerduty(&server)
            .deliver(&firing_notification(Action::Open), None)
            .await
            .unwrap();

        testing::assert_delivered(
            &out,
            None,
            &format!("triggered alert {}", &dedup_key(FINGERPRINT)[..12]),
        );
        let event = &testing::json_bodies(&server).await[0];
        assert_eq!(
            *event,
            json!({
                "routing_key": ROUTING_KEY,
                "event_action": "trigger",
                "dedup_key": dedup_key(FINGERPRINT),
                "client": "Herald",
                "client_url": APP_URL,
                "links": [{ "href": APP_URL, "text": "payments in Argo CD" }],
                "payload": {
                    "summary": "payments is Degraded: Deployment/payments-api has 0/3 ready replicas",
                    "source": "argocd/payments",
                    "severity": "critical",
                    "timestamp": "2025-03-01T12:00:00+00:00",
                    "component": "Deployment/payments/payments-api",
                    "group": "payments",
                    "class": "degraded",
                    "custom_details": {
                        "Application": "argocd/payments",
                        "Project": "shop",
                        "Team": "payments",
                        "Destination": "in-cluster / payments",
                        "Since": "2025-03-01 11:55:00 UTC",
                        "Severity": "critical",
                        "Argo CD": APP_URL,
                        "Reason": "fired",
                        "Fingerprint": FINGERPRINT,
                        "Resources": [{
                            "kind": "Deployment", "namespace": "payments", "name": "payments-api",
                            "status": "Degraded", "message": "exceeded its progress deadline",
                        }],
                        "Messages": ["Back-off pulling image"],
                        "What to do": ["Check the image: The tag may not exist."],
                    },
                },
            })
        );
        assert_eq!(dedup_key(FINGERPRINT).len(), 64);
    }

    #[tokio::test]
    async fn update_and_test_trigger_again_with_the_same_dedup_key() {
        for action in [Action::Update, Action::Test] {
            let server = enqueue_answering(accepted()).await;

            pagerduty(&server)
                .deliver(&firing_notification(action), None)
                .await
                .unwrap();

            let event = &testing::json_bodies(&server).await[0];
            assert_eq!(event["event_action"], "trigger", "{action:?}");
            assert_eq!(event["dedup_key"], dedup_key(FINGERPRINT), "{action:?}");
        }
    }

    #[tokio::test]
    async fn an_acknowledgement_acknowledges_the_alert_with_the_same_dedup_key() {
        let server = MockServer::start().await;
        let acknowledging = Mock::given(method("POST"))
            .and(path("/v2/enqueue"))
            .and(body_json(json!({
                "routing_key": ROUTING_KEY,
                "event_action": "acknowledge",
                "dedup_key": dedup_key(FINGERPRINT),
            })));
        testing::expect_matching(&server, acknowledging, accepted(), 1, "acknowledge").await;
        refuse_anything_else(&server).await;

        let out = pagerduty(&server)
            .deliver(&firing_notification(Action::Acknowledge), None)
            .await
            .unwrap();

        assert!(out.detail.starts_with("acknowledged alert"), "{}", out.detail);
    }

    #[tokio::test]
    async fn resolve_resolves_the_alert_with_the_same_dedup_key() {
        let server = MockServer::start().await;
        let resolving = Mock::given(method("POST"))
            .and(path("/v2/enqueue"))
            .and(body_json(json!({
                "routing_key": ROUTING_KEY,
                "event_action": "resolve",
                "dedup_key": dedup_key(FINGERPRINT),
            })));
        testing::expect_matching(&server, resolving, accepted(), 1, "resolve").await;
        refuse_anything_else(&server).await;

        let out = pagerduty(&server)
            .deliver(&firing_notification(Action::Resolve), None)
            .await
            .unwrap();

        assert!(out.detail.starts_with("resolved alert "), "{}", out.detail);
    }

    #[tokio::test]
    async fn a_bad_request_is_permanent() {
        let invalid = ResponseTemplate::new(400).set_body_json(json!({
            "status": "invalid event", "message": "Event object is invalid", "errors": ["'payload.summary' is missing"],
        }));
        let server = enqueue_answering(invalid).await;

        let (err, _) = testing::delivery_failure(&pagerduty(&server), &firing_notification(Action::Open)).await;

        let reason = testing::permanent_reason(&err);
        assert!(reason.starts_with("pagerduty: HTTP 400"), "{reason}");
        assert!(reason.contains("Event object is invalid"), "{reason}");
    }

    #[tokio::test]
    async fn throttled_is_transient_with_retry_after_when_given() {
        let server = enqueue_answering(ResponseTemplate::new(429).insert_header("Retry-After", "12")).await;
        let err = pagerduty(&server)
            .deliver(&firing_notification(Action::Open), None)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            DeliveryError::Transient {
                reason: "pagerduty: HTTP 429".into(),
                retry_after: Some(Duration::from_secs(12)),
            }
        );

        let server = enqueue_answering(ResponseTemplate::new(429)).await;
        let err = pagerduty(&server)
            .deliver(&firing_notification(Action::Open), None)
            .await
            .unwrap_err();
        assert!(
            matches!(err, DeliveryError::Transient { retry_after: None, .. }),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn server_errors_are_transient() {
        for status in [500, 502, 503] {
            let server = enqueue_answering(ResponseTemplate::new(status)).await;

            let err = pagerduty(&server)
                .deliver(&firing_notification(Action::Resolve), None)
                .await
                .unwrap_err();

            assert!(matches!(err, DeliveryError::Transient { .. }), "HTTP {status}: {err:?}");
        }
    }

    /// A server that answers 400 repeating the event it was sent, routing key included.
    struct EchoEvent;

    impl wiremock::Respond for EchoEvent {
        fn respond(&self, request: &Request) -> ResponseTemplate {
            let body = String::from_utf8_lossy(&request.body).into_owned();
            ResponseTemplate::new(400).set_body_string(format!("invalid event: {body}"))
        }
    }

    #[tokio::test]
    async fn the_routing_key_never_appears_in_errors() {
        let server = testing::answering_once(EchoEvent).await;

        let (_, text) = testing::delivery_failure(&pagerduty(&server), &firing_notification(Action::Resolve)).await;

        assert!(text.contains("invalid event"), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
        assert!(!text.contains(ROUTING_KEY), "{text}");

        let settings = config(format!("{}/v2/enqueue", testing::UNREACHABLE), ROUTING_KEY, false);
        let pagerduty = PagerDuty::new(settings, testing::http());
        testing::assert_unreachable_is_transient(&pagerduty, &firing_notification(Action::Open), &[ROUTING_KEY]).await;
    }

    #[test]
    fn summaries_are_one_line_of_at_most_1024_characters() {
        let server_less = PagerDuty::new(config(testing::UNREACHABLE.into(), ROUTING_KEY, false), testing::http());
        let mut n = firing_notification(Action::Open);
        n.incidents_mut()[0].summary = format!("first\nsecond {}", "ü".repeat(2000));
        let event = server_less.trigger(&n, &n.incidents()[0]);
        let summary = event["payload"]["summary"].as_str().unwrap();
        assert_eq!(summary.chars().count(), 1024);
        assert!(summary.starts_with("first second ü"));

        n.incidents_mut()[0].summary.clear();
        let event = server_less.trigger(&n, &n.incidents()[0]);
        assert_eq!(event["payload"]["summary"], "[FIRING] payments is Degraded");
    }

    #[test]
    fn severities_map_onto_the_four_pagerduty_knows() {
        use crate::domain::Severity;
        assert_eq!(severity(Severity::Critical), "critical");
        assert_eq!(severity(Severity::Warning), "warning");
        assert_eq!(severity(Severity::Info), "info");
        for s in [Severity::Critical, Severity::Warning, Severity::Info] {
            assert!(["critical", "error", "warning", "info"].contains(&severity(s)));
        }
    }

    #[test]
    fn the_events_url_defaults_to_pagerduty() {
        let s: Config = serde_norway::from_str("routing_key: abc").unwrap();
        assert_eq!(s.url, "https://events.pagerduty.com/v2/enqueue");
    }
}
