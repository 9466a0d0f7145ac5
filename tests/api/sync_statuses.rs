//! GitHub commit statuses and Grafana annotations (issue 46), end to end through the webhook endpoint: a sync of
//! an Application whose source is on GitHub posts `pending` while it runs and `success` when it finished, once
//! each however often Argo CD's bodies are replayed; a repository elsewhere gets no status; each deployment is one
//! Grafana annotation.

use serde_json::{Value, json};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::helpers::{TestApp, envelope, now_rfc3339, with_operation};

const OLD: &str = "1111111111111111111111111111111111111111";
const NEW: &str = "2222222222222222222222222222222222222222";
const GITHUB_TOKEN: &str = "ghp_apiT3stT0ken";
const GRAFANA_TOKEN: &str = "glsa_apiT3stT0ken";

fn config(github: &MockServer, grafana: &MockServer) -> String {
    format!(
        r#"
teams: {{payments: {{receivers: [console]}}}}
receivers:
  - {{name: console, console: {{}}}}
  - {{name: commits, github_status: {{api_url: "{github}", token: {GITHUB_TOKEN}}}}}
  - {{name: dashboards, grafana: {{url: "{grafana}", token: {GRAFANA_TOKEN}, dashboard_uid: deploys, tags: [prod]}}}}
"#,
        github = github.uri(),
        grafana = grafana.uri(),
    )
}

/// `payments-api` from `repo` with alice's sync of `revision` in `phase` (started 10:00; finished 10:01 unless
/// running), Argo CD's history of what was deployed being `history`.
fn sync(repo: &str, phase: &str, revision: &str, history: &[&str]) -> String {
    let mut op = json!({"phase": phase, "startedAt": "2026-01-01T10:00:00Z",
                        "operation": {"initiatedBy": {"username": "alice"}, "sync": {"revision": revision}},
                        "syncResult": {"revision": revision}});
    if phase != "Running" {
        op["finishedAt"] = json!("2026-01-01T10:01:00Z");
        op["message"] = json!("successfully synced (all tasks run)");
    }
    let mut body: Value = serde_json::from_str(&with_operation(
        &envelope("payments-api", "payments", "Synced", "Healthy", &now_rfc3339()),
        op,
    ))
    .expect("json");
    body["app"]["spec"]["source"] = json!({"repoURL": repo, "path": "deploy", "targetRevision": "main"});
    let history: Vec<Value> = (history.iter().enumerate())
        .map(|(id, r)| json!({"id": id, "revision": r, "deployedAt": "2026-01-01T09:00:00Z"}))
        .collect();
    body["app"]["status"]["history"] = json!(history);
    body.to_string()
}

/// The application as deployed before the test: `OLD`, synced at 09:00.
fn deployed_before(repo: &str) -> String {
    sync(repo, "Succeeded", OLD, &[OLD]).replace("2026-01-01T10:0", "2026-01-01T09:0")
}

async fn github() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/repos/[^/]+/[^/]+/statuses/[0-9a-f]{40}$"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 1, "state": "pending"})))
        .mount(&server)
        .await;
    server
}

async fn grafana() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/annotations"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"message": "Annotation added", "id": 1})))
        .mount(&server)
        .await;
    server
}

/// Every request the server saw, as (path, JSON body), oldest first.
async fn seen(server: &MockServer) -> Vec<(String, Value)> {
    let requests: Vec<Request> = server.received_requests().await.unwrap_or_default();
    (requests.iter())
        .map(|r| {
            assert_eq!(r.method.as_str(), "POST");
            (r.url.path().to_string(), serde_json::from_slice(&r.body).expect("json"))
        })
        .collect()
}

#[tokio::test]
async fn a_sync_running_then_succeeded_is_pending_then_success_once_each_and_one_annotation() {
    let (gh, graf) = (github().await, grafana().await);
    let app = TestApp::spawn(&config(&gh, &graf)).await;
    let repo = "git@github.com:acme/payments-deploy.git";
    app.post(deployed_before(repo)).await;
    app.settle().await;
    assert!(seen(&gh).await.is_empty(), "the first state Herald hears of is no news");

    let running = sync(repo, "Running", NEW, &[OLD]);
    assert_eq!(app.post(running.clone()).await.status(), 202);
    app.post(running.clone()).await;
    app.settle().await;
    let succeeded = sync(repo, "Succeeded", NEW, &[OLD, NEW]);
    assert_eq!(app.post(succeeded.clone()).await.status(), 202);
    // Argo CD sends several bodies per sync, and retries: the same ones again, and the running one late.
    app.post(succeeded.clone()).await;
    app.post(running).await;
    app.post(succeeded.replace("\"Healthy\"", "\"Progressing\"")).await;
    app.settle().await;

    let statuses = seen(&gh).await;
    let at = format!("/repos/acme/payments-deploy/statuses/{NEW}");
    let target = "https://argocd.example.com/applications/argocd/payments-api";
    assert_eq!(
        statuses,
        vec![
            (
                at.clone(),
                json!({"state": "pending", "description": "Sync running, started by alice",
                       "context": "argocd/payments-api", "target_url": target})
            ),
            (
                at,
                json!({"state": "success", "description": "Synced by alice: successfully synced (all tasks run)",
                       "context": "argocd/payments-api", "target_url": target})
            ),
        ]
    );
    let annotations = seen(&graf).await;
    assert_eq!(annotations.len(), 1, "one annotation per deployment: {annotations:?}");
    let (_, annotation) = &annotations[0];
    assert_eq!(
        annotation["time"],
        json!(1_767_261_660_000_i64),
        "the sync's end, 10:01"
    );
    assert_eq!(annotation["dashboardUID"], "deploys");
    assert_eq!(
        annotation["tags"],
        json!([
            "herald",
            "app:payments-api",
            "instance:default",
            "team:payments",
            "revision:2222222",
            "prod"
        ])
    );
    let text = annotation["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Deployed payments-api: 1111111 → 2222222, started by alice"),
        "{text}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_repository_not_on_github_gets_no_status_but_its_deployment_is_still_annotated() {
    let (gh, graf) = (github().await, grafana().await);
    let app = TestApp::spawn(&config(&gh, &graf)).await;
    let repo = "https://gitlab.com/acme/payments-deploy.git";
    app.post(deployed_before(repo)).await;

    app.post(sync(repo, "Running", NEW, &[OLD])).await;
    app.post(sync(repo, "Succeeded", NEW, &[OLD, NEW])).await;

    app.settle().await;
    assert!(seen(&gh).await.is_empty(), "no commit status for GitLab");
    assert_eq!(seen(&graf).await.len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn a_failed_sync_is_a_failure_status_and_no_annotation() {
    let (gh, graf) = (github().await, grafana().await);
    let app = TestApp::spawn(&config(&gh, &graf)).await;
    let repo = "https://github.com/acme/payments-deploy";
    app.post(deployed_before(repo)).await;

    app.post(sync(repo, "Running", NEW, &[OLD])).await;
    let failed = sync(repo, "Failed", NEW, &[OLD]).replace(
        "successfully synced (all tasks run)",
        "one or more objects failed to apply",
    );
    app.post(failed).await;

    app.settle().await;
    let states: Vec<Value> = seen(&gh).await.into_iter().map(|(_, b)| b["state"].clone()).collect();
    assert_eq!(states, [json!("pending"), json!("failure")]);
    assert!(seen(&graf).await.is_empty(), "nothing was deployed");
    app.stop().await;
}

/// The same sync told again after a restart (Herald remembers through its store, not its memory): no second status.
#[tokio::test]
async fn a_restart_posts_no_status_twice() {
    let (gh, graf) = (github().await, grafana().await);
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("tmp"));
    let clock: herald::clock::SharedClock = std::sync::Arc::new(herald::clock::SystemClock);
    let repo = "https://github.com/acme/payments-deploy.git";
    let first = TestApp::spawn_in(dir.clone(), &config(&gh, &graf), clock.clone()).await;
    first.post(deployed_before(repo)).await;
    let succeeded = sync(repo, "Succeeded", NEW, &[OLD, NEW]);
    first.post(succeeded.clone()).await;
    first.settle().await;
    first.stop().await;

    let restarted = TestApp::spawn_in(dir, &config(&gh, &graf), clock).await;
    restarted
        .post(succeeded.replace("\"Healthy\"", "\"Progressing\""))
        .await;
    restarted.post(succeeded).await;
    restarted.settle().await;

    let states: Vec<Value> = seen(&gh).await.into_iter().map(|(_, b)| b["state"].clone()).collect();
    assert_eq!(states, [json!("success")], "no pending: Herald never saw it run");
    assert_eq!(seen(&graf).await.len(), 1);
    restarted.stop().await;
}
