//! Links in what receivers are sent (issue 24, items 12 and 15), end to end through Mattermost: a body's
//! `context.argocdUrl` or `spec.source.repoURL` with line breaks or markup never becomes a line or a link of its
//! own, and the configured `argocd.url` wins over a body's URL.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{TestApp, envelope, eventually, now_rfc3339, with_operation};

const SHA: &str = "3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5";

async fn mattermost() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/hooks/mm"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}

fn config(server: &MockServer, argocd: &str) -> String {
    format!(
        r#"
receivers: [{{name: mm, mattermost: {{webhook_url: "{}/hooks/mm"}}}}]
teams: {{payments: {{receivers: [mm]}}}}
rules: {{sync_failed: {{for: 0s}}, out_of_sync: {{enabled: false}}}}
grouping: {{group_wait: 0s, group_interval: 1s}}
{argocd}
"#,
        server.uri()
    )
}

/// A failed sync of `pay-api` whose body says `argocd_url` and `repo_url`.
fn failed_sync(argocd_url: &str, repo_url: &str) -> String {
    let body = with_operation(
        &envelope("pay-api", "payments", "OutOfSync", "Healthy", &now_rfc3339()),
        json!({"phase": "Failed", "message": "one or more objects failed to apply", "startedAt": now_rfc3339(),
               "syncResult": {"revision": SHA}}),
    );
    let mut body: Value = serde_json::from_str(&body).expect("json");
    body["context"]["argocdUrl"] = json!(argocd_url);
    body["app"]["spec"]["source"] = json!({"repoURL": repo_url, "path": "apps/pay", "targetRevision": "main"});
    body["app"]["status"]["sync"]["revision"] = json!(SHA);
    body.to_string()
}

/// The text of the first message Mattermost receives.
async fn first_post(server: &MockServer) -> String {
    eventually(Duration::from_secs(10), || async {
        let requests = server.received_requests().await.unwrap_or_default();
        let body: Value = serde_json::from_slice(&requests.first()?.body).ok()?;
        body["text"].as_str().map(str::to_string)
    })
    .await
    .expect("a message is posted")
}

/// Sends `body` to a Herald configured with `argocd` and returns what Mattermost is posted.
async fn posted(argocd: &str, body: String) -> String {
    let server = mattermost().await;
    let app = TestApp::spawn(&config(&server, argocd)).await;
    assert_eq!(app.post(body).await.status(), 202);
    let text = first_post(&server).await;
    app.stop().await;
    text
}

#[tokio::test]
async fn a_hostile_argocd_url_or_repo_url_never_reaches_mattermost_as_a_line_or_a_link() {
    let argocd_url = "https://argocd.example.com\n<!channel>\n[Fix-it-now](https://evil.example)";
    let repo_url = "https://github.com/acme/apps\n@here\n![x](https://evil.example/p.png)";

    let text = posted("", failed_sync(argocd_url, repo_url)).await;

    for line in text.lines() {
        for start in ["<!channel>", "@here", "[Fix-it-now]", "![x]"] {
            assert!(!line.trim_start().starts_with(start), "a line of its own:\n{text}");
        }
    }
    assert!(!text.contains("<!channel>") && !text.contains("@here"), "{text}");
    assert!(
        !text.contains("](https://evil.example"),
        "no link the sender chose:\n{text}"
    );
    assert!(
        !text.contains("](https://argocd.example.com"),
        "the hostile base links nowhere:\n{text}"
    );
    assert!(
        !text.contains(&format!("](https://github.com/acme/apps/commit/{SHA}")),
        "{text}"
    );
    assert!(text.contains("pay-api"), "the message is still sent:\n{text}");
}

#[tokio::test]
async fn the_configured_argocd_url_wins_over_the_one_a_body_carries() {
    let text = posted(
        "argocd: {url: \"https://argocd.internal.example\"}",
        failed_sync("https://phish.example", "https://github.com/acme/apps"),
    )
    .await;

    assert!(
        text.contains("(https://argocd.internal.example/applications/argocd/pay-api)"),
        "{text}"
    );
    assert!(!text.contains("phish.example"), "{text}");
}

#[tokio::test]
async fn without_a_configured_url_a_bodys_safe_url_is_the_link() {
    let text = posted(
        "",
        failed_sync("https://argocd.example.com/", "https://github.com/acme/apps"),
    )
    .await;

    assert!(
        text.contains("(https://argocd.example.com/applications/argocd/pay-api)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("(https://github.com/acme/apps/commit/{SHA})")),
        "{text}"
    );
}

#[tokio::test]
async fn a_repo_url_on_a_host_nobody_listed_gets_no_commit_link_and_a_listed_one_does() {
    let lookalike = posted(
        "",
        failed_sync("https://argocd.example.com", "https://gitlab.evil.example/acme/app"),
    )
    .await;
    assert!(
        !lookalike.contains("gitlab.evil.example/acme/app/-/commit"),
        "a host that only looks like GitLab links nowhere:\n{lookalike}"
    );
    assert!(
        lookalike.contains(&SHA[..7]),
        "the revision is still told, as text:\n{lookalike}"
    );

    let listed = posted(
        "links: {git_hosts: [{host: git.acme.internal, kind: gitea}]}",
        failed_sync("https://argocd.example.com", "https://git.acme.internal/acme/app.git"),
    )
    .await;
    assert!(
        listed.contains(&format!("(https://git.acme.internal/acme/app/commit/{SHA})")),
        "a host the operator listed gets its commit link:\n{listed}"
    );
}
