//! What a deployment changed (issue 44 §1), end to end from two real bodies of one Application
//! (`tests/fixtures/argocd/captured/017` then `022`: chart podinfo 6.9.0 running image 6.9.0, then the sync to 6.9.2
//! that runs image 6.9.2), the second derived Degraded, with Herald restarted in between: the webhook JSON carries
//! the images, the chart version and the sync's counts, the Application's page says them under "Last deployment",
//! and a Git source's comparison is linked only on a trusted host.

use std::sync::Arc;
use std::time::Duration;

use herald::clock::ManualClock;
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::*;

const OLD: &str = "9b2f1c0d7e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c";
const NEW: &str = "3de5b39dd5428af1ba8ec0a0b41fd7a1c528e7e5";

fn config(server: &MockServer) -> String {
    format!(
        r#"
receivers: [{{name: hook, webhook: {{url: "{}/hook"}}}}]
ownership: {{default_team: platform}}
teams: {{platform: {{receivers: [hook]}}}}
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1s}}
"#,
        server.uri()
    )
}

fn time(body: &Value) -> chrono::DateTime<chrono::Utc> {
    let t = body["timestamp"].as_str().expect("a timestamp");
    chrono::DateTime::parse_from_rfc3339(t)
        .expect("RFC 3339")
        .with_timezone(&chrono::Utc)
}

/// `body` with a second source, a Git repository at `repo` synced at `commit` after the chart at `chart`.
fn with_values(mut body: Value, repo: &str, chart: &str, commit: &str) -> Value {
    let app = &mut body["app"];
    (app["spec"]["sources"].as_array_mut().expect("sources"))
        .push(json!({"repoURL": repo, "path": "values/podinfo", "targetRevision": "HEAD", "ref": "values"}));
    app["status"]["sync"]["revisions"] = json!([chart, commit]);
    app["status"]["operationState"]["syncResult"]["revisions"] = json!([chart, commit]);
    body
}

/// 022 derived: not being deleted (it was captured while Argo CD deleted it), Degraded, its sync's results in
/// kubectl's client-side words, one resource pruned.
fn degraded(mut body: Value) -> Value {
    let app = &mut body["app"];
    app["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("deletionTimestamp");
    app["status"]["health"] = json!({"status": "Degraded"});
    let results = &mut app["status"]["operationState"]["syncResult"]["resources"];
    results[0]["message"] = json!("service/aaaaaaa configured");
    results[1]["message"] = json!("deployment.apps/aaaaaaa created");
    (results.as_array_mut().expect("results")).push(json!({"kind": "ConfigMap", "namespace": "aaaaaaa",
        "name": "old", "status": "Pruned", "message": "pruned", "version": "v1"}));
    body
}

/// Posts 017 then (after a restart) 022 derived, both with a values source at `repo`; returns the incident the
/// webhook was sent and the Application's page.
async fn told(repo: &str) -> (Value, String) {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let before = with_values(fixture_json("captured/017_sync_podinfo_3_4.json"), repo, "6.9.0", OLD);
    let after = degraded(with_values(
        fixture_json("captured/022_remove_podinfo_2_1.json"),
        repo,
        "6.9.2",
        NEW,
    ));
    let clock = ManualClock::new(time(&before));
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let app = TestApp::spawn_in(dir.clone(), &config(&server), Arc::new(clock.clone())).await;
    assert_eq!(app.post(before.to_string()).await.status(), 202);
    app.settle().await;
    // What ran before is kept in the store, not in memory.
    let dir = app.stop().await;
    let app = TestApp::spawn_in(dir, &config(&server), Arc::new(clock.clone())).await;
    clock.set(time(&after));
    assert_eq!(app.post(after.to_string()).await.status(), 202);
    app.advance(&clock, Duration::from_secs(2)).await;
    let incident = eventually(Duration::from_secs(10), || async {
        let requests = server.received_requests().await.unwrap_or_default();
        requests.iter().find_map(|r| {
            let body: Value = serde_json::from_slice(&r.body).ok()?;
            (body["incidents"].as_array()?.iter())
                .find(|i| i["kind"] == "degraded")
                .cloned()
        })
    })
    .await
    .expect("the webhook is told of Degraded");
    let page = app
        .client
        .get(format!("{}/apps/argocd/aaaaaaa", app.address))
        .send()
        .await
        .expect("the page");
    assert_eq!(page.status(), 200);
    let page = page.text().await.expect("html");
    app.stop().await;
    (incident, page)
}

#[tokio::test]
async fn a_problem_after_a_deployment_says_what_it_changed_in_the_webhook_json_and_on_the_page() {
    let repo = "https://github.com/cdviz-dev/demo-cluster";
    let (incident, page) = told(repo).await;
    let compare = format!("{repo}/compare/{OLD}...{NEW}");
    assert_eq!(
        incident["deployment"],
        json!({
            "images": [{"image": "ghcr.io/stefanprodan/aaaaaaa", "from": "6.9.0", "to": "6.9.2"}],
            "sources": [
                {"repo_url": "ghcr.io/stefanprodan/charts", "chart": "aaaaaaa", "from": "6.9.0", "to": "6.9.2"},
                {"repo_url": repo, "from": OLD, "to": NEW, "compare_url": compare},
            ],
            "resources": {"created": 1, "changed": 1, "pruned": 1},
        }),
        "{incident:#}"
    );
    // The text every chat and e-mail is made of says it too.
    for line in [
        "ghcr.io/stefanprodan/aaaaaaa:6.9.0 → 6.9.2",
        "aaaaaaa 6.9.0 → 6.9.2",
        "9b2f1c0d7e6a → 3de5b39dd542",
        "1 created, 1 changed, 1 pruned",
    ] {
        assert!(page.contains(line), "the page lacks {line:?}: {page}");
    }
    assert!(page.contains("Last deployment"), "{page}");
    assert!(page.contains(&format!("href=\"{compare}\"")), "{page}");
}

#[tokio::test]
async fn an_untrusted_hosts_revisions_are_told_as_text_without_a_comparison_link() {
    let repo = "https://gitlab.evil.example/acme/app";
    let (incident, page) = told(repo).await;
    let sources = &incident["deployment"]["sources"];
    assert_eq!(sources[1]["from"], OLD, "{incident:#}");
    assert!(sources[1].get("compare_url").is_none(), "{incident:#}");
    assert!(page.contains("9b2f1c0d7e6a → 3de5b39dd542"), "{page}");
    assert!(
        !page.contains("gitlab.evil.example/acme/app/"),
        "no link to the untrusted host: {page}"
    );
}

#[tokio::test]
async fn an_image_that_is_not_a_string_is_refused_naming_where_it_is() {
    let app = TestApp::spawn("").await;
    let mut body = fixture_json("captured/022_remove_podinfo_2_1.json");
    body["app"]["status"]["summary"]["images"] = json!(["ghcr.io/a:1", {"name": "b"}]);
    let r = app.post(body.to_string()).await;
    assert_eq!(r.status(), 422);
    let v: Value = r.json().await.expect("json");
    let error = v["error"].as_str().unwrap_or_default();
    assert!(error.contains("app.status.summary.images[1] must be a string"), "{v}");
    body["app"]["status"]["summary"]["images"] = json!("ghcr.io/a:1");
    let r = app.post(body.to_string()).await;
    assert_eq!(r.status(), 422);
    let v: Value = r.json().await.expect("json");
    assert!(
        v["error"]
            .as_str()
            .unwrap_or_default()
            .contains("app.status.summary.images must be an array"),
        "{v}"
    );
    app.stop().await;
}
