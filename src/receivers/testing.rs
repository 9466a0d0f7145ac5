//! Shared fixtures for the receivers' tests: the one incident and notification they deliver (each test changes
//! only what it is about), the clock and HTTP client receivers are built with, and the wiremock helpers that make
//! a test fail on extra requests and on leaked secrets.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use wiremock::matchers::{self, any, method};
use wiremock::{Mock, MockBuilder, MockServer, Request, Respond, ResponseTemplate};

use super::http::Http;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::clock::{SharedClock, SystemClock};
use crate::domain::{
    Action, Body, Change, CommitState, CommitStatus, Hint, Incident, IncidentState, Kind, Notification, ResourceRef,
    Severity,
};

pub const FINGERPRINT: &str = "argocd/payments:degraded";
pub const APP_URL: &str = "https://argocd.example.com/applications/argocd/payments";
/// The title the ticket and alert receivers' tests give [`notification`]: the status prefix, then the problem.
pub const FIRING_TITLE: &str = "[FIRING] payments is Degraded";
/// A local address nothing listens on (the discard port): connecting fails at once.
pub const UNREACHABLE: &str = "http://127.0.0.1:9";

/// "Now" in the receivers' tests: 2025-03-01 12:00 UTC.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 1, 12, 0, 0)
        .single()
        .expect("a valid date")
}

/// The wall clock: most receiver tests talk to servers (Alertmanager, an SMTP relay) that read it too.
pub fn clock() -> SharedClock {
    Arc::new(SystemClock)
}

/// The receivers' reqwest client (same-origin redirects only) with the wall clock.
pub fn http() -> Http {
    Http::new(super::http::client_builder().build().expect("a client"), clock())
}

/// A firing, critical Degraded incident of `argocd/payments` (project shop, team payments), with one unhealthy
/// Deployment, one message and one hint: every section a rendering has.
pub fn incident() -> Incident {
    Incident {
        id: 7,
        fingerprint: FINGERPRINT.into(),
        kind: Kind::Degraded,
        severity: Severity::Critical,
        state: IncidentState::Firing,
        summary: "payments is Degraded: Deployment/payments-api has 0/3 ready replicas".into(),
        app_namespace: "argocd".into(),
        app_name: "payments".into(),
        project: "shop".into(),
        team: "payments".into(),
        destination_cluster: "in-cluster".into(),
        destination_namespace: "payments".into(),
        app_url: Some(APP_URL.into()),
        since: now() - chrono::Duration::minutes(5),
        fired_at: Some(now()),
        resources: vec![ResourceRef {
            kind: "Deployment".into(),
            namespace: "payments".into(),
            name: "payments-api".into(),
            status: "Degraded".into(),
            message: "exceeded its progress deadline".into(),
            ..Default::default()
        }],
        messages: vec!["Back-off pulling image".into()],
        hints: vec![Hint {
            id: "image_pull".into(),
            title: "Check the image".into(),
            text: "The tag may not exist.".into(),
        }],
        ..Default::default()
    }
}

/// The notification of [`incident`] for `action`, threaded by its fingerprint; a resolve carries the incident
/// resolved.
pub fn notification(action: Action) -> Notification {
    let mut i = incident();
    if action == Action::Resolve {
        i.state = IncidentState::Resolved;
        i.resolved_at = Some(now());
    }
    Notification {
        receiver: "team-payments".into(),
        action,
        thread_key: FINGERPRINT.into(),
        title: "payments is Degraded".into(),
        reason: if action == Action::Resolve { "resolved" } else { "fired" }.into(),
        body: Body::Incidents(vec![i]),
        created_at: now(),
        recipient: None,
        status_url: None,
        group_actions: Vec::new(),
        zone: Default::default(),
    }
}

/// The commit a sync of `payments` deployed ([`change`], [`commit_status`]).
pub const SHA: &str = "4c3d2b1a0f9e8d7c6b5a4c3d2b1a0f9e8d7c6b5a";
/// The commit deployed before it.
pub const PREVIOUS_SHA: &str = "0123456789abcdef0123456789abcdef01234567";

/// alice's sync of `payments` (team payments) from [`PREVIOUS_SHA`] to [`SHA`], finished [`now`].
pub fn change() -> Change {
    Change {
        instance: "default".into(),
        app_namespace: "argocd".into(),
        app_name: "payments".into(),
        project: "shop".into(),
        destination_namespace: "payments".into(),
        revision: SHA.into(),
        previous_revision: Some(PREVIOUS_SHA.into()),
        initiator: "alice".into(),
        finished_at: now(),
        app_url: Some(APP_URL.into()),
        team: "payments".into(),
    }
}

/// alice's sync of `payments` to [`SHA`] of `acme/payments` on github.com, in `state`.
pub fn commit_status(state: CommitState) -> CommitStatus {
    CommitStatus {
        instance: "default".into(),
        app_namespace: "argocd".into(),
        app_name: "payments".into(),
        host: "github.com".into(),
        repo: "acme/payments".into(),
        sha: SHA.into(),
        state,
        message: match state {
            CommitState::Pending => String::new(),
            CommitState::Success => "successfully synced (all tasks run)".into(),
            _ => "one or more objects failed to apply".into(),
        },
        initiator: "alice".into(),
        target_url: Some("https://herald.example.com/apps/argocd/payments".into()),
    }
}

/// A notification about a sync, not an incident: its `body` a change or a commit status.
pub fn sync_notification(body: Body) -> Notification {
    Notification {
        body,
        title: "payments synced".into(),
        reason: "synced".into(),
        ..notification(Action::Open)
    }
}

/// The incidents `n` tells of, to add to or replace: an empty list first when it told of something else.
pub fn incidents_of(n: &mut Notification) -> &mut Vec<Incident> {
    if !matches!(n.body, Body::Incidents(_)) {
        n.body = Body::Incidents(Vec::new());
    }
    match &mut n.body {
        Body::Incidents(list) => list,
        _ => unreachable!("the body was just made a list of incidents"),
    }
}

/// [`notification`] for `action`, titled [`FIRING_TITLE`] (what the ticket and alert receivers' tests deliver).
pub fn firing_notification(action: Action) -> Notification {
    Notification {
        title: FIRING_TITLE.into(),
        ..notification(action)
    }
}

/// Any request no other mock expects fails the test (when the server drops).
pub async fn refuse_anything_else(server: &MockServer) {
    Mock::given(any())
        .respond_with(ResponseTemplate::new(599))
        .with_priority(u8::MAX)
        .expect(0)
        .named("an unexpected request")
        .mount(server)
        .await;
}

/// A message template of the chat receivers' tests: the notification's reason, then its title.
pub const REASON_AND_TITLE: &str = "{{ notification.reason }}: {{ notification.title }}";
/// What [`REASON_AND_TITLE`] renders for the open of [`notification`].
pub const REASON_AND_TITLE_OF_AN_OPEN: &str = "fired: payments is Degraded";

/// Delivers the open of [`notification`] through `receiver`; fails the test when the delivery fails.
pub async fn deliver_open(receiver: &dyn Receiver) -> Delivered {
    receiver
        .deliver(&notification(Action::Open), None)
        .await
        .expect("the open is delivered")
}

/// Delivers `n` (with `memo`) through `receiver`, after making any request not mounted on `server` before fail
/// the test.
pub async fn deliver_strictly(
    server: &MockServer,
    receiver: &dyn Receiver,
    n: &Notification,
    memo: Option<&Memo>,
) -> Result<Delivered, DeliveryError> {
    refuse_anything_else(server).await;
    receiver.deliver(n, memo).await
}

/// A server that expects exactly one request, whatever it is, and answers it with `answer` (a failure test's
/// downstream).
pub async fn answering_once(answer: impl wiremock::Respond + 'static) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(any()).respond_with(answer).expect(1).mount(&server).await;
    server
}

/// Expects exactly `times` of the requests `matching` selects (a [`Mock::given`] and its matchers) on `server`,
/// answers each with `answer`, and names them `name` when they do not come as expected.
pub async fn expect_matching(
    server: &MockServer,
    matching: MockBuilder,
    answer: impl Respond + 'static,
    times: u64,
    name: &str,
) {
    matching
        .respond_with(answer)
        .expect(times)
        .named(name)
        .mount(server)
        .await;
}

/// Expects exactly `times` requests with the method `verb` to `path` on `server`, and answers each with `answer`.
pub async fn expect_request(server: &MockServer, verb: &str, path: &str, answer: impl Respond + 'static, times: u64) {
    let matching = Mock::given(method(verb)).and(matchers::path(path));
    expect_matching(server, matching, answer, times, &format!("{verb} {path}")).await;
}

/// Expects exactly `times` POSTs to `path` on `server`, and answers each with `answer`.
pub async fn expect_post(server: &MockServer, path: &str, answer: ResponseTemplate, times: u64) {
    expect_request(server, "POST", path, answer, times).await;
}

/// A server that expects exactly one POST to `path`, answers it with `answer`, and fails the test on any other
/// request.
pub async fn expecting_one_post(path: &str, answer: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    expect_post(&server, path, answer, 1).await;
    refuse_anything_else(&server).await;
    server
}

/// Every request the server saw, oldest first (so a test fails on extra requests, not only on missing ones).
pub async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap_or_default()
}

/// The JSON body of `r`; fails the test when it has none.
pub fn json(r: &Request) -> Value {
    serde_json::from_slice(&r.body).expect("a JSON body")
}

/// The JSON body of the one request the server saw; fails the test when it saw none or several.
pub async fn only_body(server: &MockServer) -> Value {
    let reqs = requests(server).await;
    assert_eq!(reqs.len(), 1, "one request: {reqs:?}");
    json(&reqs[0])
}

/// `text` contains each of `expected`.
#[track_caller]
pub fn assert_contains_all(text: &str, expected: &[&str]) {
    for e in expected {
        assert!(text.contains(e), "{e:?} not in {text}");
    }
}

/// The values of the query parameter `name` in the URL of `r`, in order.
pub fn query(r: &Request, name: &str) -> Vec<String> {
    r.url
        .query_pairs()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .collect()
}

/// The JSON body of every request the server saw, oldest first.
pub async fn json_bodies(server: &MockServer) -> Vec<Value> {
    requests(server).await.iter().map(json).collect()
}

/// The JSON bodies of the requests with the method `verb` to `path` the server saw, oldest first.
pub async fn bodies(server: &MockServer, verb: &str, path: &str) -> Vec<Value> {
    requests(server)
        .await
        .iter()
        .filter(|r| r.method.as_str() == verb && r.url.path() == path)
        .map(json)
        .collect()
}

/// The delivery `out` remembers `memo` and reports `detail`.
#[track_caller]
pub fn assert_delivered(out: &Delivered, memo: Option<Value>, detail: &str) {
    assert_eq!(out.memo, memo, "the memo of {detail:?}");
    assert_eq!(out.detail, detail);
}

/// Delivers `n` through `receiver`, which must fail; the failure and its text as logged and stored.
pub async fn delivery_failure(receiver: &dyn Receiver, n: &Notification) -> (DeliveryError, String) {
    let e = receiver.deliver(n, None).await.expect_err("the delivery fails");
    let text = error_text(&e);
    (e, text)
}

/// A failure as it is logged and stored: its message and its debug form.
pub fn error_text(e: &DeliveryError) -> String {
    format!("{e} {e:?}")
}

/// A downstream that answers `status` with everything it was sent: the method and URL, every header, then the
/// body. Whatever secret a receiver sends comes back in the failure it reads.
pub struct EchoEverything(pub u16);

impl wiremock::Respond for EchoEverything {
    fn respond(&self, r: &Request) -> ResponseTemplate {
        let mut text = format!("{} {} refused.\n", r.method, r.url);
        for (name, value) in r.headers.iter() {
            text.push_str(&format!("{name}: {}\n", String::from_utf8_lossy(value.as_bytes())));
        }
        text.push_str(&String::from_utf8_lossy(&r.body));
        ResponseTemplate::new(self.0).set_body_string(text)
    }
}

/// Delivers `n` through `receiver`, which points at [`UNREACHABLE`]: the failure must be transient (retrying can
/// help) and carry none of `secrets`.
pub async fn assert_unreachable_is_transient(receiver: &dyn Receiver, n: &Notification, secrets: &[&str]) {
    let e = receiver.deliver(n, None).await.expect_err("nothing listens there");
    assert!(matches!(e, DeliveryError::Transient { .. }), "{e:?}");
    assert_no_secret(&e, secrets);
}

/// The credentials a request carried: its `Authorization` header, and what a `Basic` one decodes to (else "").
pub fn credentials(r: &Request) -> (String, String) {
    use base64::Engine as _;
    let auth = r
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let decoded = auth
        .strip_prefix("Basic ")
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    (auth.to_string(), decoded)
}

/// Fails the test when the failure `e`, as logged and stored, contains any of `secrets`.
pub fn assert_no_secret(e: &DeliveryError, secrets: &[&str]) {
    let text = error_text(e);
    for secret in secrets {
        assert!(!text.contains(secret), "{secret:?} leaked into {text:?}");
    }
}

/// The failure's `retry_after`; panics when the failure is permanent.
pub fn transient_after(e: &DeliveryError) -> Option<std::time::Duration> {
    match e {
        DeliveryError::Transient { retry_after, .. } => *retry_after,
        other => panic!("expected a transient failure, got {other:?}"),
    }
}

/// The failure's reason; panics when the failure is transient.
pub fn permanent_reason(e: &DeliveryError) -> &str {
    match e {
        DeliveryError::Permanent { reason } => reason,
        other => panic!("expected a permanent failure, got {other:?}"),
    }
}

/// Loading the settings `yaml` fails, and the error names the setting `key` (so a user knows what to fix).
pub fn assert_settings_refused(yaml: &str, key: &str) {
    let err = crate::configuration::Settings::from_yaml(yaml)
        .expect_err(yaml)
        .to_string();
    assert!(err.contains(key), "{yaml}: expected {key} in {err}");
}

/// A secret in a temporary file, with the trailing newline editors leave, as a `…_file` setting reads it; the
/// file goes when this drops.
pub struct SecretFile {
    pub path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// Writes `secret` to a new [`SecretFile`] named `name`.
pub fn secret_file(name: &str, secret: &str) -> SecretFile {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(name);
    std::fs::write(&path, format!("{secret}\n")).expect("the secret written");
    SecretFile { path, _dir: dir }
}
