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
