//! The Alertmanager receiver: turns each incident into a Prometheus-style alert and POSTs it to
//! `{url}/api/v2/alerts`, for teams that page through Alertmanager. The label set is the alert's identity there,
//! so it holds only stable incident facts; a resolve re-posts the same labels with `endsAt` now, which ends it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;

use super::http::Http;
use super::redact::Redactor;
use super::{Capabilities, Delivered, DeliveryError, Integration, Memo, Receiver, Sections, Shared};
use crate::configuration::{ConfigError, ReceiverSettings, check_url};
use crate::domain::{Action, Body, Incident, Notification};
use crate::receivers::render;

/// How long a `herald send-test` alert stays active: long enough to see it, short enough not to linger.
const TEST_ALERT_TTL: Duration = Duration::from_secs(5 * 60);

/// `alertmanager: {url, alert_ttl}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub url: String,
    /// How long Alertmanager keeps a firing alert active without hearing from Herald again (`endsAt` = send
    /// time + this); a resolve ends it at once. Keep it above the repeat interval.
    #[serde(default = "default_alert_ttl", with = "crate::configuration::duration")]
    pub alert_ttl: Duration,
}

fn default_alert_ttl() -> Duration {
    Duration::from_secs(24 * 3600)
}

impl Integration for Config {
    /// One alert per incident (its labels are the incident's identity), ended when the incident resolves.
    fn capabilities(&self) -> Capabilities {
        Capabilities::PER_INCIDENT
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        check_url(errors, &format!("{path}.url"), &self.url);
    }

    fn build(&self, _r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(Alertmanager::new(self.clone(), shared.http.clone())))
    }
}

pub struct Alertmanager {
    endpoint: String,
    alert_ttl: Duration,
    http: Http,
    /// The URL may carry credentials (`https://user:password@alertmanager`).
    redactor: Redactor,
}

impl Alertmanager {
    pub fn new(settings: Config, http: Http) -> Self {
        let endpoint = format!("{}/api/v2/alerts", settings.url.trim_end_matches('/'));
        Self {
            redactor: Redactor::default().url_credentials(&settings.url),
            endpoint,
            alert_ttl: settings.alert_ttl,
            http,
        }
    }
}

fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The identity of the incident's alert. Alertmanager treats an empty value as an absent label, so empty
/// facts are left out rather than sent empty.
pub fn labels(i: &Incident) -> BTreeMap<&'static str, String> {
    let kind = i.kind.as_str();
    let mut labels = BTreeMap::from([("alertname", format!("herald_{kind}"))]);
    for (name, value) in [
        ("app", i.app_name.as_str()),
        ("app_namespace", i.app_namespace.as_str()),
        ("team", i.team.as_str()),
        ("severity", i.severity.as_str()),
        ("kind", kind),
        ("project", i.project.as_str()),
        ("fingerprint", i.fingerprint.as_str()),
    ] {
        if !value.trim().is_empty() {
            labels.insert(name, value.to_string());
        }
    }
    // Two instances' Applications of the same name are two alerts (the fingerprint differs too; this says why).
    if !crate::domain::is_default_instance(&i.instance) {
        labels.insert("argocd_instance", i.instance.clone());
    }
    labels
}

/// One alert in the `POST /api/v2/alerts` body. `now` is the send time (for `endsAt`).
pub fn alert(n: &Notification, i: &Incident, now: DateTime<Utc>, ttl: Duration) -> serde_json::Value {
    // The description covers this incident only, even when the notification lists several.
    let single = Notification {
        body: Body::Incidents(vec![i.clone()]),
        ..n.clone()
    };
    let mut annotations = BTreeMap::from([
        (
            "summary",
            if i.summary.is_empty() {
                n.title.clone()
            } else {
                i.summary.clone()
            },
        ),
        ("description", render::text(&single)),
    ]);
    // generatorURL and the link must be URLs, or Alertmanager refuses the whole batch.
    let link = i.app_url.as_deref().filter(|u| url::Url::parse(u).is_ok());
    if let Some(u) = link {
        annotations.insert("argocd_url", u.to_string());
    }

    let starts = i.fired_at.unwrap_or(i.since);
    let resolved = n.action == Action::Resolve || i.state == crate::domain::IncidentState::Resolved;
    let ends = if resolved {
        // In the past (or now) so Alertmanager ends it at once, never before it started (it would refuse that).
        i.resolved_at.unwrap_or(n.created_at).min(now).max(starts)
    } else {
        let ttl = if n.action == Action::Test { TEST_ALERT_TTL } else { ttl };
        now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::days(1))
    };

    let mut alert = serde_json::json!({
        "labels": labels(i),
        "annotations": annotations,
        "startsAt": timestamp(starts),
        "endsAt": timestamp(ends),
    });
    if let Some(u) = link {
        alert["generatorURL"] = serde_json::Value::String(u.to_string());
    }
    alert
}

#[async_trait::async_trait]
impl Receiver for Alertmanager {
    async fn deliver(&self, n: &Notification, _memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let incidents = match &n.body {
            Body::Digest(_) => return Err(super::digest_refused("alertmanager")),
            Body::Incidents(list) if !list.is_empty() => list,
            _ => return Err(DeliveryError::permanent("no incident to send as an alert")),
        };
        let now = self.http.clock().now();
        let alerts: Vec<serde_json::Value> = incidents.iter().map(|i| alert(n, i, now, self.alert_ttl)).collect();
        let request = self.http.client().post(&self.endpoint).json(&alerts);
        self.http.send(request, &self.redactor).await?;
        let verb = if n.is_resolve() { "resolved" } else { "posted" };
        Ok(Delivered {
            memo: None,
            detail: format!("{verb} {} alert(s)", alerts.len()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Kind, Severity};
    use crate::receivers::testing;
    use std::path::Path;
    use std::process::{Child, Command, Stdio};
    use std::time::Instant;
    use wiremock::{MockServer, ResponseTemplate};

    const INSTALL: &str = "this test needs Alertmanager 0.25: `apt-get install -y prometheus-alertmanager`";

    fn settings(url: String) -> Config {
        Config {
            url,
            alert_ttl: Duration::from_secs(24 * 3600),
        }
    }

    /// `app` out of sync for an hour, dated by the wall clock: a real Alertmanager reads it too.
    fn incident(app: &str, now: DateTime<Utc>) -> Incident {
        let mut i = Incident {
            fingerprint: format!("argocd/{app}/out_of_sync"),
            kind: Kind::OutOfSync,
            severity: Severity::Warning,
            summary: format!("{app} has been OutOfSync for 1h"),
            app_name: app.into(),
            project: "payments".into(),
            app_url: Some(format!("https://argocd.example.com/applications/argocd/{app}")),
            since: now - chrono::Duration::minutes(61),
            fired_at: Some(now - chrono::Duration::minutes(1)),
            ..testing::incident()
        };
        i.resources[0].name = "api".into();
        i.resources[0].status = "OutOfSync".into();
        i
    }

    fn notification(action: Action, app: &str) -> Notification {
        let now = Utc::now();
        let mut n = testing::notification(action);
        *crate::receivers::testing::incidents_of(&mut n) = vec![Incident {
            state: n.incidents()[0].state,
            resolved_at: (action == Action::Resolve).then_some(now),
            ..incident(app, now)
        }];
        n.thread_key = n.incidents()[0].fingerprint.clone();
        n.title = format!("{app}: out of sync");
        n.created_at = now;
        n
    }

    fn expected_labels(app: &str) -> serde_json::Value {
        serde_json::json!({
            "alertname": "herald_out_of_sync",
            "app": app,
            "app_namespace": "argocd",
            "team": "payments",
            "severity": "warning",
            "kind": "out_of_sync",
            "project": "payments",
            "fingerprint": format!("argocd/{app}/out_of_sync"),
        })
    }

    /// A real Alertmanager on 127.0.0.1 with one null receiver, killed on drop.
    struct AlertmanagerServer {
        child: Child,
        url: String,
    }

    impl AlertmanagerServer {
        fn binary() -> &'static str {
            ["prometheus-alertmanager", "alertmanager"]
                .into_iter()
                .find(|b| {
                    Command::new(b)
                        .arg("--version")
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                })
                .unwrap_or_else(|| panic!("{INSTALL}"))
        }

        async fn start(dir: &Path) -> Self {
            let binary = Self::binary();
            let config = dir.join("am.yml");
            std::fs::write(
                &config,
                "route:\n  receiver: \"null\"\nreceivers:\n  - name: \"null\"\n",
            )
            .unwrap();
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let child = Command::new(binary)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.path={}", dir.join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--cluster.listen-address=")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {binary}: {e}; {INSTALL}"));
            let mut server = Self {
                child,
                url: format!("http://127.0.0.1:{port}"),
            };
            let ready = format!("{}/-/ready", server.url);
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Ok(r) = reqwest::get(&ready).await
                    && r.status().is_success()
                {
                    return server;
                }
                if let Ok(Some(status)) = server.child.try_wait() {
                    panic!("Alertmanager exited with {status}");
                }
                assert!(Instant::now() < deadline, "Alertmanager did not become ready");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }

        async fn active_alerts(&self) -> Vec<serde_json::Value> {
            reqwest::get(format!("{}/api/v2/alerts?active=true", self.url))
                .await
                .unwrap()
                .json()
                .await
                .unwrap()
        }

        async fn active_alert_of(&self, app: &str) -> Option<serde_json::Value> {
            self.active_alerts()
                .await
                .into_iter()
                .find(|a| a["labels"]["app"] == app)
        }
    }

    impl Drop for AlertmanagerServer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    #[tokio::test]
    async fn a_real_alertmanager_lists_the_opened_alert_and_ends_it_on_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let am = AlertmanagerServer::start(dir.path()).await;
        let receiver = Alertmanager::new(settings(format!("{}/", am.url)), testing::http());

        let open = notification(Action::Open, "payments-api");
        receiver.deliver(&open, None).await.unwrap();
        receiver
            .deliver(&notification(Action::Open, "payments-worker"), None)
            .await
            .unwrap();

        let alert = am.active_alert_of("payments-api").await.expect("the alert is active");
        assert_eq!(alert["labels"], expected_labels("payments-api"));
        assert_eq!(
            alert["annotations"]["summary"],
            "payments-api has been OutOfSync for 1h"
        );
        assert_eq!(
            alert["annotations"]["argocd_url"],
            "https://argocd.example.com/applications/argocd/payments-api"
        );
        assert!(
            alert["annotations"]["description"]
                .as_str()
                .unwrap()
                .contains("Deployment payments/api: OutOfSync")
        );
        assert_eq!(
            alert["generatorURL"],
            "https://argocd.example.com/applications/argocd/payments-api"
        );
        let starts: DateTime<Utc> = alert["startsAt"].as_str().unwrap().parse().unwrap();
        let fired = open.incidents()[0].fired_at.unwrap();
        assert!((starts - fired).num_milliseconds().abs() <= 1, "{starts} vs {fired}");
        let ends: DateTime<Utc> = alert["endsAt"].as_str().unwrap().parse().unwrap();
        assert!(ends > Utc::now() + chrono::Duration::hours(23), "kept firing: {ends}");
        assert_eq!(am.active_alerts().await.len(), 2);

        receiver
            .deliver(&notification(Action::Resolve, "payments-api"), None)
            .await
            .unwrap();

        assert_eq!(am.active_alert_of("payments-api").await, None, "resolved");
        assert!(
            am.active_alert_of("payments-worker").await.is_some(),
            "the other one still fires"
        );
        assert_eq!(am.active_alerts().await.len(), 1);
    }

    #[tokio::test]
    async fn posts_one_alert_per_incident_with_non_empty_labels() {
        let server = MockServer::start().await;
        testing::expect_post(&server, "/am/api/v2/alerts", ResponseTemplate::new(200), 1).await;
        let receiver = Alertmanager::new(settings(format!("{}/am", server.uri())), testing::http());
        let mut n = notification(Action::Resolve, "payments-api");
        let mut bare = incident("orphan", n.created_at);
        bare.project = String::new();
        bare.team = "  ".into();
        bare.app_url = Some("not a url".into());
        crate::receivers::testing::incidents_of(&mut n).push(bare);

        let delivered = receiver.deliver(&n, None).await.unwrap();
        assert_eq!(delivered.detail, "resolved 2 alert(s)");

        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests.len(), 1);
        let body: Vec<serde_json::Value> = serde_json::from_slice(&requests[0].body).unwrap();
        assert_eq!(body.len(), 2);
        assert_eq!(body[0]["labels"], expected_labels("payments-api"));
        for alert in &body {
            for (k, v) in alert["labels"].as_object().unwrap() {
                assert!(!v.as_str().unwrap().trim().is_empty(), "label {k} is empty");
            }
            let ends: DateTime<Utc> = alert["endsAt"].as_str().unwrap().parse().unwrap();
            let starts: DateTime<Utc> = alert["startsAt"].as_str().unwrap().parse().unwrap();
            assert!(ends <= Utc::now() && ends >= starts, "{starts} .. {ends}");
        }
        assert_eq!(
            body[1]["labels"],
            // Project and team are empty, so they are left out (the kind is typed: it is never empty).
            serde_json::json!({
                "alertname": "herald_out_of_sync",
                "app": "orphan",
                "app_namespace": "argocd",
                "kind": "out_of_sync",
                "severity": "warning",
                "fingerprint": "argocd/orphan/out_of_sync",
            })
        );
        assert_eq!(body[1].get("generatorURL"), None, "an invalid link is left out");
        assert_eq!(body[1]["annotations"].get("argocd_url"), None);
    }

    async fn failing_with(status: u16, body: &str) -> DeliveryError {
        let server = MockServer::start().await;
        testing::expect_post(
            &server,
            "/api/v2/alerts",
            ResponseTemplate::new(status).set_body_string(body),
            1,
        )
        .await;
        let receiver = Alertmanager::new(settings(server.uri()), testing::http());
        receiver
            .deliver(&notification(Action::Open, "payments-api"), None)
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn a_refused_batch_is_permanent() {
        let err = failing_with(400, "{\"code\":400,\"message\":\"start time must be before end time\"}").await;
        assert!(matches!(err, DeliveryError::Permanent { .. }), "{err:?}");
        assert!(err.to_string().contains("start time must be before end time"), "{err}");
    }

    #[tokio::test]
    async fn an_unavailable_alertmanager_is_transient() {
        let err = failing_with(503, "").await;
        assert_eq!(err, DeliveryError::transient("HTTP 503"));
    }

    #[tokio::test]
    async fn an_unreachable_alertmanager_is_transient() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let receiver = Alertmanager::new(settings(format!("http://127.0.0.1:{port}")), testing::http());
        let err = receiver
            .deliver(&notification(Action::Open, "payments-api"), None)
            .await
            .unwrap_err();
        assert!(matches!(err, DeliveryError::Transient { .. }), "{err:?}");
    }

    #[test]
    fn a_test_alert_ends_within_minutes() {
        let now = Utc::now();
        let n = Notification::test("team-am", now);
        let a = alert(&n, &n.incidents()[0], now, Duration::from_secs(24 * 3600));
        let ends: DateTime<Utc> = a["endsAt"].as_str().unwrap().parse().unwrap();
        let expected = now + chrono::Duration::minutes(5);
        assert!((ends - expected).num_milliseconds().abs() <= 1, "{ends} vs {expected}");
        assert_eq!(a["labels"]["alertname"], "herald_test");
    }
}
