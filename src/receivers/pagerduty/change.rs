//! PagerDuty change events (Events API v2, `POST /v2/change/enqueue`): a sync that deployed a new revision, shown
//! beside the service's incidents as what changed. A change is not an alert: no dedup key, no severity, nothing to
//! resolve; PagerDuty answers 202 `{"status":"success","message":"Change event processed"}`. Failures go through
//! the shared status table (400 permanent, 429 and 5xx transient) with the routing key redacted.

use secrecy::ExposeSecret;
use serde_json::{Value, json};

use super::{Config, PagerDuty, SUMMARY_MAX_CHARS};
use crate::domain::Change;
use crate::domain::notification::short_revision as short;
use crate::receivers::render::truncate;
use crate::receivers::{Delivered, DeliveryError};

/// `change_url`, else `url` with its `/v2/enqueue` made `/v2/change/enqueue` (the same host serves both).
pub(super) fn url(settings: &Config) -> String {
    if let Some(u) = &settings.change_url {
        return u.clone();
    }
    let base = settings.url.trim_end_matches('/');
    let base = base.strip_suffix("/v2/enqueue").unwrap_or(base);
    format!("{base}/v2/change/enqueue")
}

/// The change event: `<app> synced to <short revision> by <initiator>`, from Argo CD, at the sync's end.
pub fn change_event(c: &Change, routing_key: &str) -> Value {
    let summary = format!("{} synced to {} by {}", c.app_title(), short(&c.revision), c.initiator);
    let source = match &c.app_url {
        Some(u) => u.clone(),
        None if !crate::domain::is_default_instance(&c.instance) => {
            format!("{}/{}/{}", c.instance, c.app_namespace, c.app_name)
        }
        None => format!("{}/{}", c.app_namespace, c.app_name),
    };
    let mut event = json!({
        "routing_key": routing_key,
        "payload": {
            "summary": truncate(&summary, SUMMARY_MAX_CHARS),
            "source": source,
            "timestamp": c.finished_at.to_rfc3339(),
            "custom_details": {
                "revision": c.revision,
                "previous_revision": c.previous_revision,
                "initiator": c.initiator,
                "application": format!("{}/{}", c.app_namespace, c.app_name),
                "project": c.project,
                "namespace": c.destination_namespace,
            },
        },
    });
    if !crate::domain::is_default_instance(&c.instance) {
        event["payload"]["custom_details"]["argocd_instance"] = json!(c.instance);
    }
    if let Some(u) = &c.app_url {
        event["links"] = json!([{ "href": u, "text": "Application in Argo CD" }]);
    }
    event
}

impl PagerDuty {
    pub(super) async fn send_change(&self, c: &Change) -> Result<Delivered, DeliveryError> {
        let event = change_event(c, self.settings.routing_key.expose_secret());
        (self.http)
            .post_json(&url(&self.settings), &event, &self.redactor, "pagerduty change event")
            .await?;
        Ok(Delivered {
            memo: None,
            detail: format!("sent change event for {} at {}", c.app_title(), short(&c.revision)),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wiremock::{MockServer, ResponseTemplate};

    use super::*;
    use crate::domain::{Action, Notification};
    use crate::receivers::Receiver;
    use crate::receivers::pagerduty::tests::config;
    use crate::receivers::testing::{self, APP_URL, EchoEverything, assert_no_secret};

    const KEY: &str = "CH4NGEr0ut1ngKEY000000000000000";
    const REV: &str = "4c3d2b1a0f9e8d7c6b5a4c3d2b1a0f9e8d7c6b5a";

    fn synced() -> Notification {
        let change = Change {
            instance: "default".into(),
            app_namespace: "argocd".into(),
            app_name: "payments".into(),
            project: "shop".into(),
            destination_namespace: "payments".into(),
            revision: REV.into(),
            previous_revision: Some("0123456789abcdef0123456789abcdef01234567".into()),
            initiator: "alice".into(),
            finished_at: testing::now(),
            app_url: Some(APP_URL.into()),
            team: "payments".into(),
        };
        Notification {
            body: crate::domain::Body::Change(Box::new(change)),
            ..testing::notification(Action::Open)
        }
    }

    fn pagerduty(server: &MockServer) -> PagerDuty {
        let settings = config(format!("{}/v2/enqueue", server.uri()), KEY, true);
        PagerDuty::new(settings, testing::http())
    }

    async fn answering(status: u16) -> MockServer {
        let answer = match status {
            202 => ResponseTemplate::new(202)
                .set_body_json(json!({"status": "success", "message": "Change event processed"})),
            400 => ResponseTemplate::new(400)
                .set_body_json(json!({"status": "invalid event", "message": "Event object is invalid"})),
            429 => ResponseTemplate::new(429).insert_header("Retry-After", "7"),
            other => ResponseTemplate::new(other),
        };
        testing::expecting_one_post("/v2/change/enqueue", answer).await
    }

    #[test]
    fn another_instances_change_names_its_instance() {
        let mut n = synced();
        let crate::domain::Body::Change(c) = &mut n.body else {
            panic!("a change")
        };
        c.instance = "us".into();
        c.app_url = None;

        let event = change_event(c, KEY);

        assert_eq!(event["payload"]["summary"], "us/payments synced to 4c3d2b1 by alice");
        assert_eq!(event["payload"]["source"], "us/argocd/payments");
        assert_eq!(event["payload"]["custom_details"]["argocd_instance"], "us");
    }

    #[tokio::test]
    async fn a_new_revision_is_one_change_event_with_what_and_who() {
        let server = answering(202).await;

        let out = pagerduty(&server).deliver(&synced(), None).await.unwrap();

        assert_eq!(out.detail, "sent change event for payments at 4c3d2b1");
        let sent = testing::json_bodies(&server).await;
        assert_eq!(
            sent,
            vec![json!({
                "routing_key": KEY,
                "payload": {
                    "summary": "payments synced to 4c3d2b1 by alice",
                    "source": APP_URL,
                    "timestamp": "2025-03-01T12:00:00+00:00",
                    "custom_details": {
                        "revision": REV,
                        "previous_revision": "0123456789abcdef0123456789abcdef01234567",
                        "initiator": "alice",
                        "application": "argocd/payments",
                        "project": "shop",
                        "namespace": "payments",
                    },
                },
                "links": [{"href": APP_URL, "text": "Application in Argo CD"}],
            })]
        );
    }

    #[tokio::test]
    async fn an_invalid_event_is_permanent_and_throttling_is_retried_later() {
        let err = pagerduty(&answering(400).await)
            .deliver(&synced(), None)
            .await
            .unwrap_err();
        let reason = testing::permanent_reason(&err);
        assert!(reason.starts_with("pagerduty change event: HTTP 400"), "{reason}");

        let err = pagerduty(&answering(429).await)
            .deliver(&synced(), None)
            .await
            .unwrap_err();
        assert_eq!(testing::transient_after(&err), Some(std::time::Duration::from_secs(7)));

        let err = pagerduty(&answering(503).await)
            .deliver(&synced(), None)
            .await
            .unwrap_err();
        assert_eq!(testing::transient_after(&err), None);
    }

    #[tokio::test]
    async fn the_routing_key_never_appears_in_a_change_events_errors() {
        let server = testing::answering_once(EchoEverything(400)).await;

        let err = pagerduty(&server).deliver(&synced(), None).await.unwrap_err();

        assert_no_secret(&err, &[KEY]);
    }

    #[test]
    fn the_change_url_is_the_events_url_with_change_in_it_unless_set() {
        let mut c = config("https://events.pagerduty.com/v2/enqueue".into(), KEY, true);
        assert_eq!(url(&c), "https://events.pagerduty.com/v2/change/enqueue");
        c.url = "https://events.eu.pagerduty.com".into();
        assert_eq!(url(&c), "https://events.eu.pagerduty.com/v2/change/enqueue");
        c.change_url = Some("http://proxy.internal/pd/change".into());
        assert_eq!(url(&c), "http://proxy.internal/pd/change");
    }
}
