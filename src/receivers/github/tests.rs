//! The GitHub receiver against a wiremock GitHub: the issue lifecycle (find by label, create, comment, close),
//! primary and secondary rate limits, and the token kept out of failures.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use secrecy::SecretString;
use serde_json::{Value, json};
use wiremock::matchers::{body_json, method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use super::client::classify;
use super::*;
use crate::domain::Action;
use crate::receivers::testing::{self, FINGERPRINT, error_text, firing_notification, refuse_anything_else};

const TOKEN: &str = "ghp_s3cr3tT0ken4b2e";
const REPO: &str = "/repos/acme/payments";

fn settings(server: &MockServer) -> Config {
    Config {
        api_url: format!("{}/", server.uri()),
        repo: "acme/payments".into(),
        token: SecretString::from(TOKEN),
        labels: vec!["argocd".into()],
    }
}

fn github(server: &MockServer) -> Github {
    Github::new(settings(server), testing::http())
}

/// Delivers `action` (with `memo`) through GitHub on `server`, after making any request not mounted before fail
/// the test.
async fn deliver(server: &MockServer, action: Action, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
    testing::deliver_strictly(server, &github(server), &firing_notification(action), memo).await
}

fn label() -> String {
    fingerprint_label(FINGERPRINT)
}

async fn open_issues_are(server: &MockServer, items: Value) {
    let finding = Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues")))
        .and(query_param("state", "open"))
        .and(query_param("labels", label()));
    let found = ResponseTemplate::new(200).set_body_json(items);
    testing::expect_matching(server, finding, found, 1, "find open issues by fingerprint label").await;
}

async fn create_expected(server: &MockServer, times: u64) {
    let created = json!({ "id": 1, "number": 42, "html_url": "https://github.com/acme/payments/issues/42" });
    let answer = ResponseTemplate::new(201).set_body_json(created);
    testing::expect_post(server, &format!("{REPO}/issues"), answer, times).await;
}

async fn comment_expected(server: &MockServer, number: u64, times: u64) {
    let answer = ResponseTemplate::new(201).set_body_json(json!({ "id": 7 }));
    testing::expect_post(server, &format!("{REPO}/issues/{number}/comments"), answer, times).await;
}

async fn close_expected(server: &MockServer, number: u64) {
    let closing = Mock::given(method("PATCH"))
        .and(path(format!("{REPO}/issues/{number}")))
        .and(body_json(json!({ "state": "closed", "state_reason": "completed" })));
    let closed = ResponseTemplate::new(200).set_body_json(json!({ "number": number, "state": "closed" }));
    testing::expect_matching(server, closing, closed, 1, "close as completed").await;
}

#[tokio::test]
async fn open_without_a_memo_looks_for_an_open_issue_then_creates_one() {
    let server = MockServer::start().await;
    open_issues_are(&server, json!([])).await;
    create_expected(&server, 1).await;

    let out = deliver(&server, Action::Open, None).await.unwrap();

    testing::assert_delivered(
        &out,
        Some(json!({ "number": 42 })),
        "created #42 https://github.com/acme/payments/issues/42",
    );
    let sent = testing::requests(&server).await;
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
    assert_eq!(body, render::markdown(&firing_notification(Action::Open)));
    assert!(
        body.contains("| Deployment payments/payments-api | Degraded | exceeded its progress deadline |"),
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

    let out = deliver(&server, Action::Open, None).await.unwrap();

    testing::assert_delivered(&out, Some(json!({ "number": 9 })), "commented on #9 (found by label)");
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

    let out = deliver(&server, Action::Update, None).await.unwrap();

    assert_eq!(out.memo, Some(json!({ "number": 9 })));
}

#[tokio::test]
async fn a_pull_request_alone_is_not_the_incidents_issue() {
    let server = MockServer::start().await;
    open_issues_are(&server, json!([{ "number": 5, "pull_request": {} }])).await;
    create_expected(&server, 1).await;

    let out = deliver(&server, Action::Open, None).await.unwrap();

    assert_eq!(out.memo, Some(json!({ "number": 42 })));
}

#[tokio::test]
async fn an_update_comments_on_the_remembered_issue_without_looking() {
    let server = MockServer::start().await;
    comment_expected(&server, 42, 1).await;

    let memo = json!({ "number": 42 });
    let out = deliver(&server, Action::Update, Some(&memo)).await.unwrap();

    testing::assert_delivered(&out, Some(json!({ "number": 42 })), "commented on #42");
    let comment: Value = testing::requests(&server).await[0].body_json().unwrap();
    assert_eq!(
        comment,
        json!({ "body": render::markdown(&firing_notification(Action::Update)) })
    );
}

#[tokio::test]
async fn resolve_comments_then_closes_the_issue_as_completed() {
    let server = MockServer::start().await;
    comment_expected(&server, 42, 1).await;
    close_expected(&server, 42).await;

    let memo = json!({ "number": 42 });
    let out = deliver(&server, Action::Resolve, Some(&memo)).await.unwrap();

    assert_eq!(
        out.memo,
        Some(json!({ "number": 42, "resolved_at": "2025-03-01T12:00:00Z" }))
    );
    assert_eq!(out.detail, "closed #42");
    let order: Vec<String> = testing::requests(&server)
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

    let out = deliver(&server, Action::Resolve, None).await.unwrap();

    assert_eq!(out.detail, "closed #9");
}

#[tokio::test]
async fn resolve_with_nothing_open_changes_nothing() {
    let server = MockServer::start().await;
    open_issues_are(&server, json!([])).await;

    let out = deliver(&server, Action::Resolve, None).await.unwrap();

    assert_eq!(out.memo, None);
    assert!(out.detail.contains("nothing to resolve"));
}

#[tokio::test]
async fn a_new_occurrence_after_a_resolve_looks_again_and_opens_a_new_issue() {
    let server = MockServer::start().await;
    open_issues_are(&server, json!([])).await;
    comment_expected(&server, 42, 0).await;
    create_expected(&server, 1).await;

    let memo = json!({ "number": 41, "resolved_at": "2025-03-01T10:00:00Z" });
    let out = deliver(&server, Action::Open, Some(&memo)).await.unwrap();

    assert_eq!(out.memo, Some(json!({ "number": 42 })));
}

#[tokio::test]
async fn a_remembered_issue_that_was_deleted_is_replaced() {
    let server = MockServer::start().await;
    testing::expect_post(
        &server,
        &format!("{REPO}/issues/41/comments"),
        ResponseTemplate::new(410).set_body_json(json!({ "message": "This issue was deleted" })),
        1,
    )
    .await;
    open_issues_are(&server, json!([])).await;
    create_expected(&server, 1).await;

    let memo = json!({ "number": 41 });
    let out = deliver(&server, Action::Update, Some(&memo)).await.unwrap();

    assert_eq!(out.memo, Some(json!({ "number": 42 })));
}

/// One failing comment on a remembered issue, answered with `template`.
async fn comment_fails_with(template: ResponseTemplate) -> DeliveryError {
    let server = MockServer::start().await;
    testing::expect_post(&server, &format!("{REPO}/issues/42/comments"), template, 1).await;
    let memo = json!({ "number": 42 });
    deliver(&server, Action::Update, Some(&memo)).await.unwrap_err()
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
        testing::expect_post(
            &server,
            &format!("{REPO}/issues"),
            ResponseTemplate::new(status)
                .insert_header("x-ratelimit-remaining", "4999")
                .set_body_json(json!({ "message": "Validation Failed" })),
            1,
        )
        .await;

        let err = deliver(&server, Action::Open, None).await.unwrap_err();

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
        let (auth, _) = testing::credentials(request);
        ResponseTemplate::new(401).set_body_json(json!({ "message": format!("Bad credentials: {auth}") }))
    }
}

#[tokio::test]
async fn the_token_never_appears_in_errors() {
    let server = testing::answering_once(EchoCredentials).await;

    let (err, text) = testing::delivery_failure(&github(&server), &firing_notification(Action::Open)).await;

    assert!(matches!(err, DeliveryError::Permanent { .. }), "{text}");
    assert!(text.contains("Bad credentials"), "{text}");
    assert!(!text.contains(TOKEN), "{text}");

    let mut s = settings(&server);
    s.api_url = testing::UNREACHABLE.into();
    testing::assert_unreachable_is_transient(
        &Github::new(s, testing::http()),
        &firing_notification(Action::Open),
        &[TOKEN],
    )
    .await;
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
    let mut n = firing_notification(Action::Open);
    n.title = format!("line one\nline two {}", "x".repeat(400));

    github(&server).deliver(&n, None).await.unwrap();

    let created: Value = testing::requests(&server).await[1].body_json().unwrap();
    let title = created["title"].as_str().unwrap();
    assert_eq!(title.chars().count(), 256);
    assert!(title.starts_with("line one line two x"));
}

#[tokio::test]
async fn an_acknowledgement_comments_on_the_incidents_issue_and_never_opens_one() {
    let server = MockServer::start().await;
    comment_expected(&server, 42, 1).await;
    let memo = json!({ "number": 42 });
    let out = deliver(&server, Action::Acknowledge, Some(&memo)).await.unwrap();
    testing::assert_delivered(&out, Some(json!({ "number": 42 })), "commented on #42");

    // No issue remembered and none open: nothing is created for an acknowledgement.
    let server = MockServer::start().await;
    open_issues_are(&server, json!([])).await;
    create_expected(&server, 0).await;
    let out = deliver(&server, Action::Acknowledge, None).await.unwrap();
    assert_eq!(out.memo, None);
    assert!(out.detail.contains("nothing to comment on"), "{}", out.detail);
}
