//! The commit-status receiver against a wiremock GitHub, modelled on GitHub's REST documentation ("Create a commit
//! status", https://docs.github.com/rest/commits/statuses#create-a-commit-status: 201 with the status; and "Rate
//! limits for the REST API", https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api: 403 or
//! 429 with `x-ratelimit-remaining: 0` until `x-ratelimit-reset`, a secondary limit's 403 or 429 with
//! `retry-after`).

use std::time::{Duration, SystemTime};

use secrecy::SecretString;
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::receivers::testing::{
    self, EchoEverything, SHA, assert_no_secret, commit_status, error_text, sync_notification,
};

const TOKEN: &str = "ghp_st4tusT0ken9f3a";
const STATUSES: &str = "/repos/acme/payments/statuses/4c3d2b1a0f9e8d7c6b5a4c3d2b1a0f9e8d7c6b5a";

fn config(api_url: &str) -> Config {
    Config {
        api_url: api_url.into(),
        token: SecretString::from(TOKEN),
    }
}

fn receiver(server: &MockServer) -> GithubStatus {
    GithubStatus::new(config(&server.uri()), testing::http())
}

fn status_of(state: CommitState) -> Notification {
    sync_notification(Body::CommitStatus(Box::new(commit_status(state))))
}

/// GitHub's documented answer to a created status (trimmed of the creator).
fn created(state: &str) -> ResponseTemplate {
    ResponseTemplate::new(201).set_body_json(json!({
        "url": format!("https://api.github.com{STATUSES}"),
        "id": 1, "node_id": "MDY6U3RhdHVzMQ==", "state": state,
        "description": "Synced by alice", "target_url": "https://herald.example.com/apps/argocd/payments",
        "context": "argocd/payments", "created_at": "2025-03-01T12:00:00Z", "updated_at": "2025-03-01T12:00:00Z",
    }))
}

#[tokio::test]
async fn a_running_sync_is_a_pending_status_of_its_commit_with_the_headers_github_asks_for() {
    let server = MockServer::start().await;
    let posting = Mock::given(method("POST"))
        .and(path(STATUSES))
        .and(header("accept", "application/vnd.github+json"))
        .and(header("x-github-api-version", "2022-11-28"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()));
    testing::expect_matching(&server, posting, created("pending"), 1, "create a commit status").await;

    let out = testing::deliver_strictly(&server, &receiver(&server), &status_of(CommitState::Pending), None)
        .await
        .expect("posted");

    assert_eq!(out.detail, "posted pending on acme/payments@4c3d2b1 (argocd/payments)");
    let requests = testing::requests(&server).await;
    let agent = requests[0]
        .headers
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    assert!(agent.starts_with("herald/"), "{agent:?}");
    assert_eq!(
        testing::json(&requests[0]),
        json!({
            "state": "pending",
            "description": "Sync running, started by alice",
            "context": "argocd/payments",
            "target_url": "https://herald.example.com/apps/argocd/payments",
        })
    );
}

#[tokio::test]
async fn each_outcome_is_its_state_with_argo_cds_message() {
    for (state, description) in [
        (
            CommitState::Success,
            "Synced by alice: successfully synced (all tasks run)",
        ),
        (
            CommitState::Failure,
            "Sync failed, started by alice: one or more objects failed to apply",
        ),
        (
            CommitState::Error,
            "Sync error, started by alice: one or more objects failed to apply",
        ),
    ] {
        let server = testing::expecting_one_post(STATUSES, created(state.as_str())).await;

        receiver(&server)
            .deliver(&status_of(state), None)
            .await
            .expect("posted");

        let body = testing::only_body(&server).await;
        assert_eq!(
            (body["state"].as_str(), body["description"].as_str()),
            (Some(state.as_str()), Some(description))
        );
    }
}

#[test]
fn another_instances_application_has_its_own_context_and_no_target_is_left_out() {
    let mut s = commit_status(CommitState::Success);
    s.instance = "us".into();
    s.target_url = None;

    let body = status_body(&s);

    assert_eq!(body["context"], "argocd/us/payments");
    assert_eq!(body.get("target_url"), None);
}

#[test]
fn the_description_is_cut_to_githubs_140_characters_on_one_line() {
    let mut s = commit_status(CommitState::Failure);
    s.message = format!("ComparisonError:\nrpc error: {}", "é".repeat(300));

    let d = description(&s);

    assert_eq!(d.chars().count(), DESCRIPTION_MAX_CHARS);
    assert!(d.ends_with('…') && !d.contains('\n'), "{d}");
}

/// One status posted to a GitHub answering `answer`; the failure.
async fn refused_with(answer: ResponseTemplate) -> DeliveryError {
    let server = testing::expecting_one_post(STATUSES, answer).await;
    receiver(&server)
        .deliver(&status_of(CommitState::Success), None)
        .await
        .expect_err("refused")
}

fn github_error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .insert_header("x-ratelimit-remaining", "4999")
        .set_body_json(json!({
            "message": message,
            "documentation_url": "https://docs.github.com/rest/commits/statuses#create-a-commit-status",
        }))
}

#[tokio::test]
async fn a_commit_github_does_not_know_is_a_permanent_validation_failure_that_says_so() {
    let e = refused_with(github_error(422, &format!("No commit found for SHA: {SHA}"))).await;

    let reason = testing::permanent_reason(&e);
    assert!(
        reason.starts_with("github status: success on acme/payments@4c3d2b1: GitHub refused the status"),
        "{reason}"
    );
    assert!(
        reason.contains("the commit is not in that repository") && reason.contains("HTTP 422"),
        "{reason}"
    );
    assert!(reason.contains("No commit found for SHA"), "{reason}");
}

#[tokio::test]
async fn bad_credentials_an_unknown_repository_and_a_missing_permission_are_permanent_and_say_what_to_fix() {
    for (status, message, hint) in [
        (401, "Bad credentials", "the token is not valid"),
        (404, "Not Found", "no such repository, or the token cannot see it"),
        (
            403,
            "Resource not accessible by personal access token",
            "Commit statuses: write",
        ),
    ] {
        let e = refused_with(github_error(status, message)).await;

        let reason = testing::permanent_reason(&e);
        assert!(
            reason.contains(hint) && reason.contains(&format!("HTTP {status}")),
            "{reason}"
        );
    }
}

#[tokio::test]
async fn an_exhausted_primary_rate_limit_waits_until_its_reset() {
    let reset = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
        + 300;
    for status in [403, 429] {
        let e = refused_with(
            ResponseTemplate::new(status)
                .insert_header("x-ratelimit-limit", "5000")
                .insert_header("x-ratelimit-remaining", "0")
                .insert_header("x-ratelimit-used", "5000")
                .insert_header("x-ratelimit-reset", reset.to_string().as_str())
                .set_body_json(json!({
                    "message": "API rate limit exceeded for user ID 1.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
                })),
        )
        .await;

        let wait = testing::transient_after(&e).expect("a wait");
        assert!(
            (Duration::from_secs(295)..=Duration::from_secs(300)).contains(&wait),
            "HTTP {status}: {wait:?}"
        );
        assert!(error_text(&e).contains("rate limited"), "{e}");
    }
}

#[tokio::test]
async fn a_secondary_rate_limit_waits_as_long_as_retry_after_says() {
    for status in [403, 429] {
        let e = refused_with(
            ResponseTemplate::new(status)
                .insert_header("retry-after", "60")
                .insert_header("x-ratelimit-remaining", "4950")
                .set_body_json(json!({
                    "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                })),
        )
        .await;

        assert_eq!(
            testing::transient_after(&e),
            Some(Duration::from_secs(60)),
            "HTTP {status}"
        );
    }
}

#[tokio::test]
async fn server_errors_are_retried() {
    for status in [500, 502, 503] {
        let e = refused_with(ResponseTemplate::new(status)).await;
        assert_eq!(testing::transient_after(&e), None, "HTTP {status}");
    }
}

#[tokio::test]
async fn the_token_never_appears_in_a_failure() {
    let server = testing::answering_once(EchoEverything(401)).await;

    let e = receiver(&server)
        .deliver(&status_of(CommitState::Success), None)
        .await
        .unwrap_err();

    assert!(error_text(&e).contains("HTTP 401"), "{e}");
    assert_no_secret(&e, &[TOKEN]);
}

#[tokio::test]
async fn send_test_checks_the_token_with_the_rate_limit_endpoint() {
    let server = MockServer::start().await;
    let rate = json!({"resources": {"core": {"limit": 5000, "used": 1, "remaining": 4999, "reset": 1_740_830_400}},
                      "rate": {"limit": 5000, "used": 1, "remaining": 4999, "reset": 1_740_830_400}});
    testing::expect_request(
        &server,
        "GET",
        "/rate_limit",
        ResponseTemplate::new(200).set_body_json(rate),
        1,
    )
    .await;

    let n = Notification::test("gh", testing::now());
    let out = testing::deliver_strictly(&server, &receiver(&server), &n, None)
        .await
        .expect("checked");

    assert!(
        out.detail
            .starts_with("the token works (GET /rate_limit: 4999 requests left"),
        "{}",
        out.detail
    );
}

#[tokio::test]
async fn an_incident_is_refused_for_good_without_a_request() {
    let server = MockServer::start().await;

    let e = testing::deliver_strictly(&server, &receiver(&server), &testing::notification(Action::Open), None)
        .await
        .unwrap_err();

    assert!(testing::permanent_reason(&e).contains("takes no incidents"), "{e}");
    assert!(testing::requests(&server).await.is_empty());
}

#[test]
fn the_repositories_served_are_those_of_the_api_urls_host() {
    let host = |u: &str| config(u).repo_host();
    assert_eq!(host("https://api.github.com"), "github.com");
    assert_eq!(host("https://ghe.example/api/v3"), "ghe.example");
    assert_eq!(host("https://ghe.example/api/v3/"), "ghe.example");
    assert_eq!(host("https://api.acme.ghe.com"), "acme.ghe.com");
    assert_eq!(
        host("http://127.0.0.1:8181"),
        "github.com",
        "a proxy in front of api.github.com"
    );
}

#[test]
fn the_block_is_checked_under_its_key() {
    testing::assert_settings_refused(
        "receivers: [{name: gh, github_status: {token: t, api_url: nope}}]",
        "receivers[\"gh\"].github_status.api_url",
    );
    testing::assert_settings_refused("receivers: [{name: gh, github_status: {token: t, repo: a/b}}]", "repo");
}
