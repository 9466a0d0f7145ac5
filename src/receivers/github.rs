//! The GitHub Issues receiver: one issue per incident in one repository, labelled with a label derived from the
//! fingerprint (`herald:<16 hex of sha256>`) so it is found again even when Herald crashed between "created" and
//! "memo stored": without a memo we always look for an open issue before we create one. Updates comment; resolve
//! comments and closes the issue as completed. Primary and secondary rate limits come back as transient failures
//! carrying how long to wait.

use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use reqwest::Method;
use reqwest::header::HeaderMap;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::http::{Http, classify_status, parse_retry_after, transport_error};
use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::configuration::GithubSettings;
use crate::domain::{Action, Notification};
use crate::receivers::render;
use crate::receivers::render::truncate;

/// GitHub's limits on issue titles and bodies.
const TITLE_MAX_CHARS: usize = 256;
const BODY_MAX_CHARS: usize = 65_000;
const USER_AGENT: &str = concat!("herald/", env!("CARGO_PKG_VERSION"));

/// The label that finds an incident's issue again.
pub fn fingerprint_label(fingerprint: &str) -> String {
    let digest = hex::encode(Sha256::digest(fingerprint.as_bytes()));
    format!("herald:{}", &digest[..16])
}

/// What Herald remembers per thread: the issue number, and when Herald closed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct GithubMemo {
    number: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resolved_at: Option<DateTime<Utc>>,
}

/// A failed call. Keeps the status so a remembered issue that is gone (404, 410) can be looked up again.
struct CallError {
    status: Option<u16>,
    error: DeliveryError,
}

impl From<CallError> for DeliveryError {
    fn from(e: CallError) -> Self {
        e.error
    }
}

#[derive(Debug, Deserialize)]
struct IssueRef {
    number: u64,
    #[serde(default)]
    html_url: Option<String>,
    /// Present on pull requests, which the issues endpoint lists too.
    #[serde(default)]
    pull_request: Option<Value>,
}

/// GitHub's rate limits, then the shared table: 429, or 403 with `retry-after` (secondary limit), or 403/429 with
/// `x-ratelimit-remaining: 0` (primary limit, wait until `x-ratelimit-reset`) are transient; other 403s are not.
fn classify(status: u16, headers: &HeaderMap, body: &str, now: SystemTime) -> DeliveryError {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let retry_after = parse_retry_after(header("retry-after"), now);
    let exhausted = header("x-ratelimit-remaining") == Some("0");
    let until_reset = header("x-ratelimit-reset")
        .and_then(|v| v.parse::<u64>().ok())
        .map(|reset| {
            let reset = SystemTime::UNIX_EPOCH + Duration::from_secs(reset);
            // At least a second: the reset time is GitHub's clock, not ours.
            reset
                .duration_since(now)
                .unwrap_or(Duration::ZERO)
                .max(Duration::from_secs(1))
        });
    if matches!(status, 403 | 429) && (retry_after.is_some() || exhausted) {
        let wait = retry_after.or(if exhausted { until_reset } else { None });
        let snippet: String = body.chars().take(300).collect();
        return DeliveryError::Transient {
            reason: format!("HTTP {status} (rate limited): {snippet}"),
            retry_after: wait,
        };
    }
    classify_status(status, retry_after, body)
}

pub struct Github {
    settings: GithubSettings,
    http: Http,
    /// `{api_url}/repos/{owner}/{name}`.
    repo_url: String,
    redactor: Redactor,
}

impl Github {
    pub fn new(settings: GithubSettings, http: Http) -> Self {
        let repo_url = format!(
            "{}/repos/{}",
            settings.api_url.trim_end_matches('/'),
            settings.repo.trim_matches('/')
        );
        let redactor = Redactor::default().secret(settings.token.expose_secret());
        Self {
            settings,
            http,
            repo_url,
            redactor,
        }
    }

    /// Prefixes what failed and blanks out the token, should a server echo it back.
    fn redact(&self, what: &str, e: DeliveryError) -> DeliveryError {
        self.redactor
            .apply(DeliveryError::prefixed(&format!("github {what}"), e))
    }

    /// One request; a 2xx answers its body, anything else the rate-limit-aware classification.
    async fn call(
        &self,
        what: &str,
        method: Method,
        url: reqwest::Url,
        body: Option<&Value>,
    ) -> Result<String, CallError> {
        let mut rb = self
            .http
            .client()
            .request(method, url)
            .bearer_auth(self.settings.token.expose_secret())
            .header(reqwest::header::ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            // GitHub answers 403 to requests without one.
            .header(reqwest::header::USER_AGENT, USER_AGENT);
        if let Some(body) = body {
            rb = rb.json(body);
        }
        let resp = rb.send().await.map_err(|e| CallError {
            status: None,
            error: self.redact(what, transport_error(e)),
        })?;
        let status = resp.status().as_u16();
        if !resp.status().is_success() {
            let headers = resp.headers().clone();
            let text = resp.text().await.unwrap_or_default();
            let error = classify(status, &headers, &text, SystemTime::from(self.http.clock().now()));
            return Err(CallError {
                status: Some(status),
                error: self.redact(what, error),
            });
        }
        resp.text().await.map_err(|e| CallError {
            status: Some(status),
            error: self.redact(what, transport_error(e)),
        })
    }

    fn url(&self, path: &str) -> Result<reqwest::Url, DeliveryError> {
        reqwest::Url::parse(&format!("{}{path}", self.repo_url))
            .map_err(|e| DeliveryError::permanent(format!("github: invalid api_url or repo ({e})")))
    }

    /// Reads a 2xx body. An unreadable one is transient: a retry looks before it creates anything again.
    fn parse<T: serde::de::DeserializeOwned>(&self, what: &str, body: &str) -> Result<T, DeliveryError> {
        serde_json::from_str(body)
            .map_err(|e| self.redact(what, DeliveryError::transient(format!("unexpected response ({e})"))))
    }

    /// The newest open issue (not pull request) carrying the fingerprint label.
    async fn find_open(&self, label: &str) -> Result<Option<IssueRef>, DeliveryError> {
        let mut url = self.url("/issues")?;
        url.query_pairs_mut()
            .append_pair("state", "open")
            .append_pair("labels", label)
            .append_pair("per_page", "100");
        let text = self.call("find issue", Method::GET, url, None).await?;
        let items: Vec<IssueRef> = self.parse("find issue", &text)?;
        Ok(items.into_iter().find(|i| i.pull_request.is_none()))
    }

    async fn create(&self, n: &Notification, label: &str) -> Result<IssueRef, DeliveryError> {
        let mut labels = vec![label.to_string()];
        for l in &self.settings.labels {
            if !l.is_empty() && !labels.contains(l) {
                labels.push(l.clone());
            }
        }
        let title = truncate(&one_line(&n.title), TITLE_MAX_CHARS);
        let body = json!({ "title": title, "body": body(n), "labels": labels });
        let text = self
            .call("create issue", Method::POST, self.url("/issues")?, Some(&body))
            .await?;
        self.parse("create issue", &text)
    }

    async fn comment(&self, number: u64, n: &Notification) -> Result<(), CallError> {
        let what = format!("comment on #{number}");
        let url = self
            .url(&format!("/issues/{number}/comments"))
            .map_err(|error| CallError { status: None, error })?;
        let payload = json!({ "body": body(n) });
        self.call(&what, Method::POST, url, Some(&payload)).await?;
        Ok(())
    }

    async fn close(&self, number: u64) -> Result<(), DeliveryError> {
        let url = self.url(&format!("/issues/{number}"))?;
        let payload = json!({ "state": "closed", "state_reason": "completed" });
        self.call(&format!("close #{number}"), Method::PATCH, url, Some(&payload))
            .await?;
        Ok(())
    }

    /// Comments on the remembered issue; `Ok(false)` when it is gone (deleted: 410, or not found: 404).
    async fn comment_remembered(&self, number: u64, n: &Notification) -> Result<bool, DeliveryError> {
        match self.comment(number, n).await {
            Ok(()) => Ok(true),
            Err(e) if matches!(e.status, Some(404 | 410)) => {
                tracing::warn!(
                    receiver = %n.receiver, issue = number,
                    "The remembered GitHub issue is gone; looking for the incident's issue by label."
                );
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Open, update, test: comment on the issue we know or find, or create one.
    async fn fire(&self, n: &Notification, label: &str, remembered: Option<u64>) -> Result<Delivered, DeliveryError> {
        if let Some(number) = remembered
            && self.comment_remembered(number, n).await?
        {
            return Ok(delivered(number, None, format!("commented on #{number}")));
        }
        if let Some(found) = self.find_open(label).await? {
            let number = found.number;
            self.comment(number, n).await?;
            return Ok(delivered(
                number,
                None,
                format!("commented on #{number} (found by label)"),
            ));
        }
        let created = self.create(n, label).await?;
        let link = created.html_url.as_deref().unwrap_or_default();
        Ok(delivered(
            created.number,
            None,
            format!("created #{} {link}", created.number).trim_end().to_string(),
        ))
    }

    /// Resolve: comment on the issue we know (or the open one we find), then close it as completed.
    async fn resolve(
        &self,
        n: &Notification,
        label: &str,
        remembered: Option<u64>,
    ) -> Result<Delivered, DeliveryError> {
        let mut number = None;
        if let Some(known) = remembered
            && self.comment_remembered(known, n).await?
        {
            number = Some(known);
        }
        let number = match number {
            Some(known) => known,
            None => {
                let Some(found) = self.find_open(label).await? else {
                    return Ok(Delivered {
                        memo: None,
                        detail: "no open GitHub issue for this incident: nothing to resolve".into(),
                    });
                };
                self.comment(found.number, n).await?;
                found.number
            }
        };
        self.close(number).await?;
        Ok(delivered(number, Some(n.created_at), format!("closed #{number}")))
    }
}

fn delivered(number: u64, resolved_at: Option<DateTime<Utc>>, detail: String) -> Delivered {
    let memo = GithubMemo { number, resolved_at };
    Delivered {
        memo: serde_json::to_value(memo).ok(),
        detail,
    }
}

fn body(n: &Notification) -> String {
    truncate(&render::markdown(n), BODY_MAX_CHARS)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[async_trait::async_trait]
impl Receiver for Github {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        let incident = n
            .primary()
            .ok_or_else(|| DeliveryError::permanent("github: the notification carries no incident"))?;
        let label = fingerprint_label(&incident.fingerprint);
        // A memo of an issue Herald closed says nothing about what is open now: look again by label.
        let remembered = memo
            .and_then(|m| serde_json::from_value::<GithubMemo>(m.clone()).ok())
            .filter(|m| m.resolved_at.is_none())
            .map(|m| m.number);
        match n.action {
            Action::Resolve => self.resolve(n, &label, remembered).await,
            Action::Open | Action::Update | Action::Test => self.fire(n, &label, remembered).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use secrecy::SecretString;
    use serde_json::{Value, json};
    use wiremock::matchers::{any, body_json, method, path, query_param};
    use wiremock::{Mock, MockServer, Request, ResponseTemplate};

    use super::*;
    use crate::domain::{Incident, ResourceRef};
    use crate::receivers::testing;

    const TOKEN: &str = "ghp_s3cr3tT0ken4b2e";
    const FINGERPRINT: &str = "argocd/payments:degraded";
    const REPO: &str = "/repos/acme/payments";

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 1, 12, 0, 0).unwrap()
    }

    fn note(action: Action) -> Notification {
        let incident = Incident {
            fingerprint: FINGERPRINT.into(),
            kind: crate::domain::Kind::Degraded,
            severity: crate::domain::Severity::Critical,
            state: if action == Action::Resolve {
                crate::domain::IncidentState::Resolved
            } else {
                crate::domain::IncidentState::Firing
            },
            summary: "payments is Degraded".into(),
            app_namespace: "argocd".into(),
            app_name: "payments".into(),
            app_url: Some("https://argocd.example.com/applications/argocd/payments".into()),
            since: now(),
            resources: vec![ResourceRef {
                kind: "Deployment".into(),
                namespace: "payments".into(),
                name: "payments-api".into(),
                status: "Degraded".into(),
                message: "exceeded its progress deadline".into(),
            }],
            ..Default::default()
        };
        Notification {
            receiver: "team-github".into(),
            action,
            thread_key: FINGERPRINT.into(),
            title: "[FIRING] payments is Degraded".into(),
            reason: if action == Action::Resolve { "resolved" } else { "fired" }.into(),
            incidents: vec![incident],
            created_at: now(),
        }
    }

    fn settings(server: &MockServer) -> GithubSettings {
        GithubSettings {
            api_url: format!("{}/", server.uri()),
            repo: "acme/payments".into(),
            token: SecretString::from(TOKEN),
            labels: vec!["argocd".into()],
        }
    }

    fn github(server: &MockServer) -> Github {
        Github::new(settings(server), testing::http())
    }

    fn label() -> String {
        fingerprint_label(FINGERPRINT)
    }

    /// Any request no other mock expects fails the test (on drop of the server).
    async fn refuse_anything_else(server: &MockServer) {
        Mock::given(any())
            .respond_with(ResponseTemplate::new(599))
            .with_priority(u8::MAX)
            .expect(0)
            .named("an unexpected request")
            .mount(server)
            .await;
    }

    async fn open_issues_are(server: &MockServer, items: Value) {
        Mock::given(method("GET"))
            .and(path(format!("{REPO}/issues")))
            .and(query_param("state", "open"))
            .and(query_param("labels", label()))
            .respond_with(ResponseTemplate::new(200).set_body_json(items))
            .expect(1)
            .named("find open issues by fingerprint label")
            .mount(server)
            .await;
    }

    async fn create_expected(server: &MockServer, times: u64) {
        Mock::given(method("POST"))
            .and(path(format!("{REPO}/issues")))
            .respond_with(ResponseTemplate::new(201).set_body_json(json!({
                "id": 1, "number": 42, "html_url": "https://github.com/acme/payments/issues/42",
            })))
            .expect(times)
            .named("create issue")
            .mount(server)
            .await;
    }

    async fn comment_expected(server: &MockServer, number: u64, times: u64) {
        Mock::given(method("POST"))
            .and(path(format!("{REPO}/issues/{number}/comments")))
            .respond_with(ResponseTemplate::new(201).set_body_json(json!({ "id": 7 })))
            .expect(times)
            .named("comment")
            .mount(server)
            .await;
    }

    async fn close_expected(server: &MockServer, number: u64) {
        Mock::given(method("PATCH"))
            .and(path(format!("{REPO}/issues/{number}")))
            .and(body_json(json!({ "state": "closed", "state_reason": "completed" })))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "number": number, "state": "closed" })))
            .expect(1)
            .named("close as completed")
            .mount(server)
            .await;
    }

    async fn requests(server: &MockServer) -> Vec<Request> {
        server.received_requests().await.unwrap()
    }

    fn error_text(e: &DeliveryError) -> String {
        format!("{e} {e:?}")
    }

    #[tokio::test]
    async fn open_without_a_memo_looks_for_an_open_issue_then_creates_one() {
        let server = MockServer::start().await;
        open_issues_are(&server, json!([])).await;
        create_expected(&server, 1).await;
        refuse_anything_else(&server).await;

        let out = github(&server).deliver(&note(Action::Open), None).await.unwrap();

        assert_eq!(out.memo, Some(json!({ "number": 42 })));
        assert_eq!(out.detail, "created #42 https://github.com/acme/payments/issues/42");
        let sent = requests(&server).await;
        assert_eq!(sent.len(), 2);
        for r in &sent {
            assert_eq!(r.headers["authorization"], format!("Bearer {TOKEN}").as_str());
            assert_eq!(r.headers["accept"], "application/vnd.github+json");
            assert_eq!(r.headers["x-github-api-version"], "2022-11-28");
            assert!(r.headers["user-agent"].to_str().unwrap().starts_with("herald/"));
        }
        let created: Value = sent[1].body_json().unwrap();
        assert_eq!(created["title"], "[FIRING] payments is Degraded");
        assert_eq!(created["labels"], json!([label(), "argocd"]));
        let body = created["body"].as_str().unwrap();
        assert_eq!(body, render::markdown(&note(Action::Open)));
        assert!(
            body.contains("| Deployment | payments | payments-api | Degraded |"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn an_open_issue_found_by_its_label_gets_a_comment_and_no_second_issue() {
        let server = MockServer::start().await;
        open_issues_are(
            &server,
            json!([{ "number": 9, "html_url": "https://github.com/acme/payments/issues/9" }]),
        )
        .await;
        comment_expected(&server, 9, 1).await;
        create_expected(&server, 0).await;
        refuse_anything_else(&server).await;

        let out = github(&server).deliver(&note(Action::Open), None).await.unwrap();

        assert_eq!(out.memo, Some(json!({ "number": 9 })));
        assert_eq!(out.detail, "commented on #9 (found by label)");
    }

    #[tokio::test]
    async fn pull_requests_in_the_results_are_skipped() {
        let server = MockServer::start().await;
        open_issues_are(
            &server,
            json!([
                { "number": 5, "pull_request": { "url": "https://api.github.com/repos/acme/payments/pulls/5" } },
                { "number": 9 },
            ]),
        )
        .await;
        comment_expected(&server, 5, 0).await;
        comment_expected(&server, 9, 1).await;
        refuse_anything_else(&server).await;

        let out = github(&server).deliver(&note(Action::Update), None).await.unwrap();

        assert_eq!(out.memo, Some(json!({ "number": 9 })));
    }

    #[tokio::test]
    async fn a_pull_request_alone_is_not_the_incidents_issue() {
        let server = MockServer::start().await;
        open_issues_are(&server, json!([{ "number": 5, "pull_request": {} }])).await;
        create_expected(&server, 1).await;
        refuse_anything_else(&server).await;

        let out = github(&server).deliver(&note(Action::Open), None).await.unwrap();

        assert_eq!(out.memo, Some(json!({ "number": 42 })));
    }

    #[tokio::test]
    async fn an_update_comments_on_the_remembered_issue_without_looking() {
        let server = MockServer::start().await;
        comment_expected(&server, 42, 1).await;
        refuse_anything_else(&server).await;

        let memo = json!({ "number": 42 });
        let out = github(&server)
            .deliver(&note(Action::Update), Some(&memo))
            .await
            .unwrap();

        assert_eq!(out.memo, Some(json!({ "number": 42 })));
        assert_eq!(out.detail, "commented on #42");
        let comment: Value = requests(&server).await[0].body_json().unwrap();
        assert_eq!(comment, json!({ "body": render::markdown(&note(Action::Update)) }));
    }

    #[tokio::test]
    async fn resolve_comments_then_closes_the_issue_as_completed() {
        let server = MockServer::start().await;
        comment_expected(&server, 42, 1).await;
        close_expected(&server, 42).await;
        refuse_anything_else(&server).await;

        let memo = json!({ "number": 42 });
        let out = github(&server)
            .deliver(&note(Action::Resolve), Some(&memo))
            .await
            .unwrap();

        assert_eq!(
            out.memo,
            Some(json!({ "number": 42, "resolved_at": "2025-03-01T12:00:00Z" }))
        );
        assert_eq!(out.detail, "closed #42");
        let order: Vec<String> = requests(&server)
            .await
            .iter()
            .map(|r| format!("{} {}", r.method, r.url.path()))
            .collect();
        assert_eq!(
            order,
            [
                format!("POST {REPO}/issues/42/comments"),
                format!("PATCH {REPO}/issues/42")
            ]
        );
    }

    #[tokio::test]
    async fn resolve_without_a_memo_closes_the_open_issue_found_by_label() {
        let server = MockServer::start().await;
        open_issues_are(&server, json!([{ "number": 9 }])).await;
        comment_expected(&server, 9, 1).await;
        close_expected(&server, 9).await;
        refuse_anything_else(&server).await;

        let out = github(&server).deliver(&note(Action::Resolve), None).await.unwrap();

        assert_eq!(out.detail, "closed #9");
    }

    #[tokio::test]
    async fn resolve_with_nothing_open_changes_nothing() {
        let server = MockServer::start().await;
        open_issues_are(&server, json!([])).await;
        refuse_anything_else(&server).await;

        let out = github(&server).deliver(&note(Action::Resolve), None).await.unwrap();

        assert_eq!(out.memo, None);
        assert!(out.detail.contains("nothing to resolve"));
    }

    #[tokio::test]
    async fn a_new_occurrence_after_a_resolve_looks_again_and_opens_a_new_issue() {
        let server = MockServer::start().await;
        open_issues_are(&server, json!([])).await;
        comment_expected(&server, 42, 0).await;
        create_expected(&server, 1).await;
        refuse_anything_else(&server).await;

        let memo = json!({ "number": 41, "resolved_at": "2025-03-01T10:00:00Z" });
        let out = github(&server).deliver(&note(Action::Open), Some(&memo)).await.unwrap();

        assert_eq!(out.memo, Some(json!({ "number": 42 })));
    }

    #[tokio::test]
    async fn a_remembered_issue_that_was_deleted_is_replaced() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(format!("{REPO}/issues/41/comments")))
            .respond_with(ResponseTemplate::new(410).set_body_json(json!({ "message": "This issue was deleted" })))
            .expect(1)
            .mount(&server)
            .await;
        open_issues_are(&server, json!([])).await;
        create_expected(&server, 1).await;
        refuse_anything_else(&server).await;

        let memo = json!({ "number": 41 });
        let out = github(&server)
            .deliver(&note(Action::Update), Some(&memo))
            .await
            .unwrap();

        assert_eq!(out.memo, Some(json!({ "number": 42 })));
    }

    /// One failing comment on a remembered issue, answered with `template`.
    async fn comment_fails_with(template: ResponseTemplate) -> DeliveryError {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(format!("{REPO}/issues/42/comments")))
            .respond_with(template)
            .expect(1)
            .mount(&server)
            .await;
        refuse_anything_else(&server).await;
        let memo = json!({ "number": 42 });
        github(&server)
            .deliver(&note(Action::Update), Some(&memo))
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn too_many_requests_is_transient_with_retry_after() {
        let err = comment_fails_with(ResponseTemplate::new(429).insert_header("retry-after", "7")).await;
        assert!(
            matches!(&err, DeliveryError::Transient { retry_after: Some(d), .. } if *d == Duration::from_secs(7)),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn the_secondary_rate_limit_is_a_403_with_retry_after_and_is_transient() {
        let err = comment_fails_with(
            ResponseTemplate::new(403)
                .insert_header("retry-after", "60")
                .set_body_json(json!({ "message": "You have exceeded a secondary rate limit." })),
        )
        .await;
        let DeliveryError::Transient { reason, retry_after } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*retry_after, Some(Duration::from_secs(60)));
        assert!(reason.contains("secondary rate limit"), "{reason}");
    }

    #[tokio::test]
    async fn an_exhausted_primary_rate_limit_waits_until_the_reset() {
        let reset = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 120;
        let err = comment_fails_with(
            ResponseTemplate::new(403)
                .insert_header("x-ratelimit-remaining", "0")
                .insert_header("x-ratelimit-reset", reset.to_string().as_str())
                .set_body_json(json!({ "message": "API rate limit exceeded" })),
        )
        .await;
        let DeliveryError::Transient {
            retry_after: Some(wait),
            ..
        } = err
        else {
            panic!("{err:?}")
        };
        assert!(
            (Duration::from_secs(115)..=Duration::from_secs(120)).contains(&wait),
            "{wait:?}"
        );
    }

    #[tokio::test]
    async fn other_client_errors_are_permanent_and_server_errors_transient() {
        for (status, transient) in [
            (403, false),
            (404, false),
            (401, false),
            (422, false),
            (500, true),
            (502, true),
        ] {
            // 404 on a remembered issue means "look again": use the create path for the statuses themselves.
            let server = MockServer::start().await;
            open_issues_are(&server, json!([])).await;
            Mock::given(method("POST"))
                .and(path(format!("{REPO}/issues")))
                .respond_with(
                    ResponseTemplate::new(status)
                        .insert_header("x-ratelimit-remaining", "4999")
                        .set_body_json(json!({ "message": "Validation Failed" })),
                )
                .expect(1)
                .mount(&server)
                .await;
            refuse_anything_else(&server).await;

            let err = github(&server).deliver(&note(Action::Open), None).await.unwrap_err();

            assert_eq!(
                matches!(err, DeliveryError::Transient { .. }),
                transient,
                "HTTP {status}: {err:?}"
            );
            assert!(
                error_text(&err).contains(&format!("github create issue: HTTP {status}")),
                "{err:?}"
            );
        }
    }

    #[test]
    fn rate_limit_headers_are_read_against_the_given_clock() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            h
        };
        let wait = |e: DeliveryError| match e {
            DeliveryError::Transient { retry_after, .. } => Some(retry_after),
            DeliveryError::Permanent { .. } => None,
        };
        let exhausted = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "1700000090")]);
        assert_eq!(
            wait(classify(403, &exhausted, "", now)),
            Some(Some(Duration::from_secs(90)))
        );
        assert_eq!(
            wait(classify(429, &exhausted, "", now)),
            Some(Some(Duration::from_secs(90)))
        );
        let past_reset = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "1699999000")]);
        assert_eq!(
            wait(classify(403, &past_reset, "", now)),
            Some(Some(Duration::from_secs(1)))
        );
        let secondary = headers(&[("retry-after", "30"), ("x-ratelimit-remaining", "12")]);
        assert_eq!(
            wait(classify(403, &secondary, "", now)),
            Some(Some(Duration::from_secs(30)))
        );
        assert_eq!(wait(classify(429, &HeaderMap::new(), "", now)), Some(None));
        let plenty = headers(&[("x-ratelimit-remaining", "4999"), ("x-ratelimit-reset", "1700000090")]);
        assert_eq!(
            wait(classify(403, &plenty, "Resource not accessible by integration", now)),
            None
        );
        assert_eq!(
            wait(classify(404, &exhausted, "", now)),
            None,
            "only 403 and 429 are rate limits"
        );
    }

    /// A server that answers 401 repeating the credentials it was sent.
    struct EchoCredentials;

    impl wiremock::Respond for EchoCredentials {
        fn respond(&self, request: &Request) -> ResponseTemplate {
            let auth = request
                .headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            ResponseTemplate::new(401).set_body_json(json!({ "message": format!("Bad credentials: {auth}") }))
        }
    }

    #[tokio::test]
    async fn the_token_never_appears_in_errors() {
        let server = MockServer::start().await;
        Mock::given(any())
            .respond_with(EchoCredentials)
            .expect(1)
            .mount(&server)
            .await;

        let err = github(&server).deliver(&note(Action::Open), None).await.unwrap_err();

        let text = error_text(&err);
        assert!(matches!(err, DeliveryError::Permanent { .. }), "{text}");
        assert!(text.contains("Bad credentials"), "{text}");
        assert!(!text.contains(TOKEN), "{text}");

        let mut s = settings(&server);
        s.api_url = "http://127.0.0.1:9".into();
        let err = Github::new(s, testing::http())
            .deliver(&note(Action::Open), None)
            .await
            .unwrap_err();
        assert!(matches!(err, DeliveryError::Transient { .. }), "{err:?}");
        assert!(!error_text(&err).contains(TOKEN));
    }

    #[test]
    fn the_fingerprint_label_is_sixteen_hex_digits() {
        let l = fingerprint_label(FINGERPRINT);
        assert!(l.starts_with("herald:"));
        assert_eq!(l.len(), "herald:".len() + 16);
        assert!(l["herald:".len()..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(l, fingerprint_label("argocd/orders:degraded"));
    }

    #[tokio::test]
    async fn long_titles_are_cut_to_one_line_of_256_characters() {
        let server = MockServer::start().await;
        open_issues_are(&server, json!([])).await;
        create_expected(&server, 1).await;
        refuse_anything_else(&server).await;
        let mut n = note(Action::Open);
        n.title = format!("line one\nline two {}", "x".repeat(400));

        github(&server).deliver(&n, None).await.unwrap();

        let created: Value = requests(&server).await[1].body_json().unwrap();
        let title = created["title"].as_str().unwrap();
        assert_eq!(title.chars().count(), 256);
        assert!(title.starts_with("line one line two x"));
    }
}
