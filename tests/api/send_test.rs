//! `herald send-test` on a ticket receiver: the test opens a real ticket, and closes it again.

use wiremock::{Mock, MockServer, matchers::any};

use crate::helpers::GithubFake;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_test_on_a_ticket_receiver_closes_the_ticket_it_opened_and_says_so() {
    let fake = GithubFake::default();
    let server = MockServer::start().await;
    Mock::given(any()).respond_with(fake.clone()).mount(&server).await;
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            "receivers: [{{name: tickets, github: {{api_url: \"{}\", repo: acme/pay, token: ghp-test, labels: [argocd]}}}}]",
            server.uri()
        ),
    )
    .expect("write");

    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(["send-test", "--receiver", "tickets", "--config"])
            .arg(&cfg)
            .output()
            .expect("run")
    })
    .await
    .expect("joined");

    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("tickets: delivered"), "{stdout}");
    assert!(stdout.contains("tickets: closed the test again"), "{stdout}");
    let issues = fake.issues.lock().expect("lock").clone();
    assert_eq!(issues.len(), 1, "one test issue: {issues:?}");
    assert_eq!(
        issues[0]["state"], "closed",
        "the test issue is closed again: {issues:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_test_that_cannot_close_its_ticket_fails_and_says_to_close_it_by_hand() {
    // The tracker opens the issue, then refuses to close it (a token without write access to issues, say).
    let fake = GithubFake::default();
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("PATCH"))
        .respond_with(wiremock::ResponseTemplate::new(403).set_body_string("{\"message\":\"Resource not accessible\"}"))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(any()).respond_with(fake.clone()).mount(&server).await;
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            "receivers: [{{name: tickets, github: {{api_url: \"{}\", repo: acme/pay, token: ghp-test, labels: [argocd]}}}}]",
            server.uri()
        ),
    )
    .expect("write");

    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(["send-test", "--receiver", "tickets", "--config"])
            .arg(&cfg)
            .output()
            .expect("run")
    })
    .await
    .expect("joined");

    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("tickets: delivered"), "{stdout}");
    assert!(
        stdout.contains("tickets: FAILED to close the test it opened") && stdout.contains("close it by hand"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("ghp-test"),
        "the token stays out of the answer: {stdout}"
    );
    assert_eq!(
        fake.issues.lock().expect("lock")[0]["state"],
        "open",
        "the issue is left open, and said so"
    );
}

/// `herald send-test` on the receivers told of syncs only: the commit-status receiver checks its token (there is
/// no commit to post on), Grafana adds one `[TEST]` annotation; neither has anything to close again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_test_checks_the_github_status_token_and_adds_one_grafana_test_annotation() {
    use wiremock::ResponseTemplate;
    use wiremock::matchers::{method, path};
    let server = MockServer::start().await;
    let rate = serde_json::json!({"resources": {}, "rate": {"limit": 5000, "used": 1, "remaining": 4999, "reset": 0}});
    Mock::given(method("GET"))
        .and(path("/rate_limit"))
        .respond_with(ResponseTemplate::new(200).set_body_json(rate))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/annotations"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(serde_json::json!({"message": "Annotation added", "id": 9})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            "receivers: [{{name: commits, github_status: {{api_url: \"{0}\", token: ghp-test}}}}, \
             {{name: dashboards, grafana: {{url: \"{0}\", token: glsa-test}}}}]",
            server.uri()
        ),
    )
    .expect("write");

    for (receiver, said) in [
        (
            "commits",
            "commits: delivered (the token works (GET /rate_limit: 4999 requests left",
        ),
        ("dashboards", "dashboards: delivered (added annotation 9)"),
    ] {
        let cfg = cfg.clone();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
                .args(["send-test", "--receiver", receiver, "--config"])
                .arg(&cfg)
                .output()
                .expect("run")
        })
        .await
        .expect("joined");

        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(said), "{stdout}");
        assert!(!stdout.contains("close"), "nothing to close: {stdout}");
    }
    let requests = server.received_requests().await.unwrap_or_default();
    assert_eq!(requests.len(), 2, "{requests:?}");
}
