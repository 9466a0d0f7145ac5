//! Faults proven with the real binary: kill -9 in the middle of a burst (SQLite, and two replicas on PostgreSQL),
//! graceful shutdown on SIGTERM, and PostgreSQL restarted under load.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::helpers::*;
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn write_config(dir: &Path, storage: &str, github: &str, chat: &str) -> std::path::PathBuf {
    let cfg = dir.join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            r#"
server: {{listen: "127.0.0.1:0"}}
storage: {{url: "{storage}"}}
receivers:
  - {{name: tickets, github: {{api_url: "{github}", repo: acme/pay, token: ghp-x, labels: [argocd]}}}}
  - {{name: chat, send_resolved: true, mattermost: {{webhook_url: "{chat}/hooks/chat"}}}}
teams: {{payments: {{receivers: [tickets, chat]}}}}
rules: {{sync_failed: {{for: 0s}}, out_of_sync: {{enabled: false}}}}
# One ticket per failed sync is what is counted: a burst of them on one cluster is not to be one storm here.
storm: {{min_apps: 0}}
grouping: {{group_wait: 1s, group_interval: 1s}}
outbox: {{lease: 3s, poll_interval: 50ms, initial_backoff: 100ms, max_backoff: 1s, concurrency: 16}}
scheduler: {{tick: 100ms}}
log: {{level: info}}
"#
        ),
    )
    .expect("config");
    cfg
}

fn failed_sync(i: usize) -> String {
    with_operation(
        &envelope(
            &format!("app-{i:04}"),
            "payments",
            "OutOfSync",
            "Healthy",
            &now_rfc3339(),
        ),
        serde_json::json!({"phase": "Failed", "message": "one or more objects failed to apply",
                           "startedAt": "2026-01-01T00:00:00Z"}),
    )
}

/// Posts `n` events spread over `targets` from 16 tasks; calls `midway` once after `kill_after` acknowledgements.
/// Returns the names of the acknowledged Applications.
async fn burst(
    targets: Vec<String>,
    n: usize,
    kill_after: usize,
    midway: impl FnOnce() + Send + 'static,
) -> HashSet<String> {
    let acked = Arc::new(Mutex::new(HashSet::new()));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let midway = Arc::new(Mutex::new(Some(midway)));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client");
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (acked, next, midway, client, targets) = (
            acked.clone(),
            next.clone(),
            midway.clone(),
            client.clone(),
            targets.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= n {
                    return;
                }
                let url = format!("{}/v1/argocd/events", targets[i % targets.len()]);
                if let Ok(r) = client.post(url).body(failed_sync(i)).send().await
                    && r.status() == 202
                {
                    let count = {
                        let mut a = acked.lock().expect("lock");
                        a.insert(format!("app-{i:04}"));
                        a.len()
                    };
                    if count == kill_after
                        && let Some(f) = midway.lock().expect("lock").take()
                    {
                        f();
                    }
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    Arc::try_unwrap(acked)
        .map(|m| m.into_inner().expect("lock"))
        .unwrap_or_default()
}

async fn json(url: String) -> Option<Value> {
    reqwest::get(url).await.ok()?.json().await.ok()
}

/// Every page of a list (pages of at most 1,000, following `next`), as one `{count, items}`.
async fn all(base: &str, path: &str) -> Option<Value> {
    let mut items = Vec::new();
    let mut next = Some(path.to_string());
    while let Some(path) = next {
        let page = json(format!("{base}{path}")).await?;
        items.extend(page["items"].as_array()?.iter().cloned());
        next = page["next"].as_str().map(str::to_string);
    }
    Some(serde_json::json!({"count": items.len(), "items": items}))
}

/// Waits until every outbox row is done, then checks one ticket per incident and the chat deliveries.
async fn assert_all_delivered_once(base: &str, gh: &GithubFake, chat: &MockServer, acked: &HashSet<String>) {
    for name in acked {
        let v = json(format!("{base}/v1/apps/argocd/{name}")).await.expect("app");
        assert_eq!(
            v["operation"]["phase"], "Failed",
            "{name} was acknowledged, so it is stored"
        );
    }
    let firing = eventually(Duration::from_secs(60), || async {
        let pending = all(base, "/v1/outbox?state=pending&limit=1000").await?;
        let dead = all(base, "/v1/outbox?state=dead&limit=1000").await?;
        assert_eq!(dead["count"], 0, "nothing dead: {dead}");
        let firing = all(base, "/v1/incidents?state=firing&kind=sync_failed&limit=1000").await?;
        let done = all(base, "/v1/outbox?state=done&limit=1000").await?;
        let tickets_done = done["items"]
            .as_array()?
            .iter()
            .filter(|r| r["receiver"] == "tickets")
            .count();
        let n = firing["count"].as_u64()? as usize;
        (pending["count"] == 0 && n >= acked.len() && tickets_done >= n).then_some(firing)
    })
    .await
    .expect("every delivery done");
    let incidents = firing["count"].as_u64().expect("count") as usize;
    let per_fp = gh.creations_per_fingerprint();
    assert_eq!(per_fp.len(), incidents, "one ticket for each incident");
    assert!(per_fp.values().all(|&n| n == 1), "no ticket opened twice: {per_fp:?}");
    let done = all(base, "/v1/outbox?state=done&limit=1000").await.expect("outbox");
    let chat_rows = done["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|r| r["receiver"] == "chat")
        .count();
    let chat_got = chat.received_requests().await.unwrap_or_default().len();
    assert!(
        chat_got >= chat_rows && chat_rows >= 1,
        "every chat notification delivered ({chat_got} for {chat_rows})"
    );
    // Every incident is in some chat notification that was delivered.
    let delivered_fps: HashSet<String> = done["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|r| r["receiver"] == "chat")
        .flat_map(|r| r["incidents"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect();
    let firing_fps: HashSet<String> = firing["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["fingerprint"].as_str().map(str::to_string))
        .collect();
    assert_eq!(delivered_fps, firing_fps, "every incident reached the chat");
}

async fn fakes() -> (MockServer, GithubFake, MockServer) {
    let gh_server = MockServer::start().await;
    let gh = GithubFake::default();
    Mock::given(wiremock::matchers::any())
        .respond_with(gh.clone())
        .mount(&gh_server)
        .await;
    let chat = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hooks/chat"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&chat)
        .await;
    (gh_server, gh, chat)
}

#[tokio::test]
async fn kill_9_in_a_burst_loses_no_acknowledged_event_and_opens_no_ticket_twice_sqlite() {
    let dir = tempfile::tempdir().expect("tmp");
    let (gh_server, gh, chat) = fakes().await;
    let cfg = write_config(
        dir.path(),
        &format!("sqlite://{}/h.db", dir.path().display()),
        &gh_server.uri(),
        &chat.uri(),
    );
    let bin = Arc::new(Mutex::new(Binary::start(&cfg, &[])));
    let target = bin.lock().expect("lock").address.clone();
    let killer = bin.clone();
    let acked = burst(vec![target], 400, 150, move || killer.lock().expect("lock").kill9()).await;
    assert!(
        acked.len() >= 150 && acked.len() < 400,
        "killed mid-burst: {} acknowledged",
        acked.len()
    );
    let bin = Binary::start(&cfg, &[]);
    assert_all_delivered_once(&bin.address, &gh, &chat, &acked).await;
}

#[tokio::test]
async fn two_replicas_on_postgresql_survive_kill_9_of_one() {
    let pg = PgServer::start();
    let dir = tempfile::tempdir().expect("tmp");
    let (gh_server, gh, chat) = fakes().await;
    let cfg = write_config(dir.path(), &pg.url, &gh_server.uri(), &chat.uri());
    let a = Arc::new(Mutex::new(Binary::start(&cfg, &[])));
    let b = Binary::start(&cfg, &[]);
    let targets = vec![a.lock().expect("lock").address.clone(), b.address.clone()];
    let killer = a.clone();
    let acked = burst(targets, 400, 200, move || killer.lock().expect("lock").kill9()).await;
    assert!(acked.len() >= 200, "{} acknowledged", acked.len());
    // The survivor alone finishes everything, including what the dead replica had claimed.
    assert_all_delivered_once(&b.address, &gh, &chat, &acked).await;
    drop(b);
}

#[tokio::test]
async fn sigterm_stops_gracefully_and_exits_0() {
    let dir = tempfile::tempdir().expect("tmp");
    let (gh_server, _gh, chat) = fakes().await;
    let cfg = write_config(
        dir.path(),
        &format!("sqlite://{}/h.db", dir.path().display()),
        &gh_server.uri(),
        &chat.uri(),
    );
    let mut bin = Binary::start(&cfg, &[]);
    let acked = burst(vec![bin.address.clone()], 50, usize::MAX, || {}).await;
    assert_eq!(acked.len(), 50);
    let status = bin.terminate().await;
    assert!(status.success(), "exit status {status:?}: {}", bin.logs());
    assert!(
        bin.logs().contains("shutting down") && bin.logs().contains("stopped"),
        "{}",
        bin.logs()
    );
    // Nothing acknowledged was lost, and the next start finishes what was left.
    let bin = Binary::start(&cfg, &[]);
    for name in &acked {
        assert!(
            json(format!("{}/v1/apps/argocd/{name}", bin.address))
                .await
                .is_some_and(|v| v["name"] == name.as_str())
        );
    }
}

#[tokio::test]
async fn postgresql_restarted_under_load_gives_503_then_recovers_losing_nothing() {
    let pg = PgServer::start();
    let dir = tempfile::tempdir().expect("tmp");
    let (gh_server, _gh, chat) = fakes().await;
    let cfg = write_config(dir.path(), &pg.url, &gh_server.uri(), &chat.uri());
    let bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .expect("client");
    let mut acked = HashSet::new();
    let mut unavailable = 0;
    let mut other = Vec::new();
    for i in 0..45 {
        if i == 20 {
            pg.pg_stop();
        }
        if i == 28 {
            pg.pg_start();
        }
        let r = client
            .post(format!("{}/v1/argocd/events", bin.address))
            .body(failed_sync(i))
            .send()
            .await
            .expect("answer");
        match r.status().as_u16() {
            202 => {
                acked.insert(format!("app-{i:04}"));
            }
            503 => {
                assert!(r.headers().get("retry-after").is_some(), "503 says when to retry");
                unavailable += 1;
            }
            s => other.push(s),
        }
        if (20..28).contains(&i) {
            let_time_pass(Duration::from_millis(50)).await;
        }
    }
    assert!(other.is_empty(), "only 202 or 503: {other:?}");
    assert!(unavailable >= 5, "503 while PostgreSQL was down ({unavailable})");
    // Recovered by itself: the last events after the restart were accepted.
    for i in 33..45 {
        assert!(acked.contains(&format!("app-{i:04}")), "app-{i:04} after recovery");
    }
    let ready = client
        .get(format!("{}/readyz", bin.address))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), 200);
    for name in &acked {
        let v = json(format!("{}/v1/apps/argocd/{name}", bin.address))
            .await
            .expect("app");
        assert_eq!(v["name"], name.as_str());
    }
    drop(bin);
}
