//! Herald's picture of Argo CD matches Argo CD: deleted Applications are forgotten (their incidents resolve once),
//! and the Argo CD API is a second source: a wiped store refills, a change that flips no trigger is seen, the API
//! being down harms nothing, and two replicas list once per interval. Where a test models Argo CD itself it runs
//! against `tests/common/fake_argocd.rs` (which answers as Argo CD's server code does); wiremock stands in where a
//! test needs an API that misbehaves (cut, endless, paged, too large, down).

use std::sync::Arc;
use std::time::Duration;

use crate::fake_argocd::FakeArgoCd;
use crate::helpers::*;
use herald::clock::{Clock, ManualClock};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z")
        .expect("t")
        .with_timezone(&chrono::Utc)
}

fn with_prunes(mut app: Value, names: &[&str]) -> Value {
    app["status"]["resources"] = names
        .iter()
        .map(|n| json!({"kind": "ConfigMap", "namespace": "pay", "name": n, "status": "OutOfSync", "requiresPruning": true}))
        .collect();
    app
}

fn listing(apps: &[Value]) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"metadata": {}, "items": apps}))
}

fn config(dir: &std::path::Path, api: Option<&str>, extra: &str) -> String {
    let api = api
        .map(|u| api_settings(u, "token: argocd-read-token, resync_interval: 10s"))
        .unwrap_or_default();
    config_with(dir, &api, extra)
}

fn api_settings(url: &str, more: &str) -> String {
    format!("argocd: {{api: {{url: \"{url}\", timeout: 1s, {more}}}}}")
}

fn config_with(dir: &std::path::Path, api: &str, extra: &str) -> String {
    format!(
        r#"
{api}
receivers: [{{name: sink, console: {{file: "{d}/sink.jsonl"}}}}]
ownership: {{default_team: payments}}
teams: {{payments: {{receivers: [sink]}}}}
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1s, repeat_interval: 1h}}
{extra}
"#,
        d = dir.display()
    )
}

/// Waits until a listing has been refused as larger than `max_listing_bytes` (its counter says so).
async fn refused_as_too_large(app: &TestApp) {
    let refused = eventually(Duration::from_secs(20), || async {
        let m = app.metrics().await;
        (sample(&m, r#"herald_argocd_listings_refused_total{reason="too_large"}"#) >= 1.0).then_some(())
    })
    .await;
    assert!(refused.is_some(), "refused as too large\n{}", app.metrics().await);
}

async fn names(app: &TestApp, query: &str) -> Vec<String> {
    let v = app.get_json(&format!("/v1/apps{query}")).await;
    v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|a| a["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn prune_count(app: &TestApp) -> usize {
    app.get_json("/v1/prune-pending").await["count"].as_u64().unwrap_or(0) as usize
}

#[tokio::test]
async fn a_deleted_application_resolves_its_incidents_once_and_leaves_the_lists() {
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&d, None, ""), Arc::new(clock.clone())).await;
    let body = envelope(
        "pay-api",
        "payments",
        "OutOfSync",
        "Degraded",
        &clock.now().to_rfc3339(),
    );
    assert_eq!(app.post(body.clone()).await.status(), 202);
    let got = wait_for(&d.join("sink.jsonl"), 1).await;
    assert_eq!(got[0]["action"], "open");

    // Argo CD deletes it: the deletion trigger sends the Application with its deletionTimestamp.
    app.advance(&clock, Duration::from_secs(60)).await;
    let mut deleting: Value = serde_json::from_str(&body).expect("json");
    deleting["timestamp"] = json!(clock.now().to_rfc3339());
    deleting["app"]["metadata"]["deletionTimestamp"] = json!(clock.now().to_rfc3339());
    let r = app.post(deleting.to_string()).await;
    assert_eq!(r.status(), 202);
    let summary: Value = r.json().await.expect("json");
    assert!(
        summary["incidents"]
            .as_array()
            .expect("changes")
            .iter()
            .all(|i| i["state"] == "resolved"),
        "{summary}"
    );
    // Its incident resolves ("Application deleted"), and the team hears once that it was deleted while Degraded.
    let got = wait_for(&d.join("sink.jsonl"), 3).await;
    let resolve = got.iter().find(|m| m["action"] == "resolve").expect("a resolve");
    assert!(
        resolve["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("Application deleted"),
        "{resolve}"
    );
    let told = (got.iter()).filter(|m| m["action"] == "open" && m.to_string().contains("deleted from Argo CD"));
    assert_eq!(told.count(), 1, "{got:#?}");
    assert!(
        resolve["title"]
            .as_str()
            .unwrap_or_default()
            .contains("Application deleted"),
        "{resolve}"
    );

    assert!(names(&app, "").await.is_empty(), "gone from /v1/apps");
    assert_eq!(names(&app, "?deleted=true").await, ["pay-api"]);
    let one = app.get_json("/v1/apps/argocd/pay-api").await;
    assert_eq!(one["lifecycle"], "deleted");
    let page = app
        .client
        .get(&app.address)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    assert!(!page.contains("pay-api"), "not on the status page");

    // Hours later (Argo CD's API confirming it gone meanwhile): no "still firing", no second deletion, nothing more.
    app.advance(&clock, Duration::from_secs(3 * 3600)).await;
    assert_eq!(
        delivered(&d.join("sink.jsonl")).len(),
        3,
        "{:?}",
        delivered(&d.join("sink.jsonl"))
    );

    // A new Application under the same name (a new uid) starts afresh.
    let mut again: Value = serde_json::from_str(&body).expect("json");
    again["timestamp"] = json!(clock.now().to_rfc3339());
    again["app"]["metadata"]["uid"] = json!("uid-pay-api-2");
    again["app"]["status"]["health"]["status"] = json!("Healthy");
    assert_eq!(app.post(again.to_string()).await.status(), 202);
    assert_eq!(names(&app, "").await, ["pay-api"]);
    let one = app.get_json("/v1/apps/argocd/pay-api").await;
    assert_eq!(one["lifecycle"], "active");
    assert_eq!(one["uid"], "uid-pay-api-2");
    app.stop().await;
}

#[tokio::test]
async fn with_the_api_down_webhooks_still_work_and_herald_says_the_source_is_failing() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(
        dir.clone(),
        &config(&d, Some(&url), ""),
        Arc::new(ManualClock::new(t0())),
    )
    .await;
    let body = envelope("pay-api", "payments", "Synced", "Healthy", "2026-03-02T09:00:00Z");
    assert_eq!(app.post(body).await.status(), 202);
    let ready = app
        .client
        .get(format!("{}/readyz", app.address))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), 200, "the API is optional");
    let failing = eventually(Duration::from_secs(10), || async {
        let page = app.client.get(&app.address).send().await.ok()?.text().await.ok()?;
        page.contains("The Argo CD API source is failing").then_some(page)
    })
    .await;
    assert!(failing.is_some(), "the status page says the API source is failing");
    let metrics = app.metrics().await;
    assert!(
        metrics.contains(r#"herald_argocd_api_up{argocd_instance="default"} 0"#),
        "{metrics}"
    );
    assert!(!metrics.contains("argocd-read-token"));
    assert_eq!(names(&app, "").await, ["pay-api"]);
    app.stop().await;
}

#[tokio::test]
async fn two_replicas_on_postgresql_list_once_per_interval() {
    let pg = PgServer::start();
    let api = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v1/applications"))
        .respond_with(listing(&[application("shared", "payments", "Synced", "Healthy")]))
        .mount(&api)
        .await;
    let clock = ManualClock::new(t0());
    let dir_a = Arc::new(tempfile::tempdir().expect("tmp"));
    let dir_b = Arc::new(tempfile::tempdir().expect("tmp"));
    let storage = format!("storage: {{url: \"{}\"}}", pg.url);
    let a = TestApp::spawn_in(
        dir_a.clone(),
        &config(dir_a.path(), Some(&api.uri()), &storage),
        Arc::new(clock.clone()),
    )
    .await;
    let b = TestApp::spawn_in(
        dir_b.clone(),
        &config(dir_b.path(), Some(&api.uri()), &storage),
        Arc::new(clock.clone()),
    )
    .await;
    // Both replicas look at the lease several times within one interval (every 2.5 s for a 10 s interval): each
    // look is a pass of both resync loops, over once both sleep on the clock again.
    let both_look_at_the_lease = || async {
        clock.advance(Duration::from_millis(2500));
        until_asleep(&clock, 2).await;
    };
    until_asleep(&clock, 2).await;
    both_look_at_the_lease().await;
    both_look_at_the_lease().await;
    let lists = || async {
        api.received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .filter(|r| r.url.path() == "/api/v1/applications")
            .count()
    };
    assert_eq!(lists().await, 1, "one listing for both replicas in one interval");
    clock.advance(Duration::from_secs(11));
    let second = eventually(Duration::from_secs(10), || async { (lists().await == 2).then_some(()) }).await;
    assert!(second.is_some(), "the next interval lists again");
    // Both replicas look at the lease again (every 2.5 s).
    until_asleep(&clock, 2).await;
    both_look_at_the_lease().await;
    assert_eq!(lists().await, 2, "still once per interval");
    a.stop().await;
    b.stop().await;
}

/// `n` Applications named `{prefix}-{i}`, every third Degraded (so incidents are firing).
fn fleet(prefix: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let health = if i % 3 == 0 { "Degraded" } else { "Healthy" };
            application(&format!("{prefix}-{i}"), "payments", "Synced", health)
        })
        .collect()
}

async fn page(app: &TestApp) -> String {
    app.client
        .get(&app.address)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html")
}

/// The value of the sample `series` (name and labels as printed) in a Prometheus text answer; 0 when absent. Metrics
/// are per process and tests run in parallel: compare with "at least".
/// The value of the first sample of `series` (`name` or `name{label="value",…}`) whose labels include those given,
/// in any order.
fn sample(metrics: &str, series: &str) -> f64 {
    let (name, wanted) = match series.split_once('{') {
        Some((name, labels)) => (name, labels.trim_end_matches('}').split(',').collect::<Vec<_>>()),
        None => (series, Vec::new()),
    };
    (metrics.lines())
        .find_map(|l| {
            let (head, value) = l.rsplit_once(' ')?;
            let (n, labels) = head.split_once('{').unwrap_or((head, ""));
            let labels: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
            (n == name && wanted.iter().all(|w| labels.contains(w))).then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0.0)
}

async fn firing(app: &TestApp) -> u64 {
    app.get_json("/v1/incidents?state=firing").await["count"]
        .as_u64()
        .unwrap_or(0)
}

#[tokio::test]
async fn a_listing_without_items_deletes_nothing_and_a_sudden_large_drop_waits_for_the_next_listing() {
    let api = MockServer::start().await;
    let answers = [
        listing(&fleet("pay", 12)),
        ResponseTemplate::new(200).set_body_json(json!({})),
        ResponseTemplate::new(200).set_body_json(json!({"metadata": {}, "items": null})),
        ResponseTemplate::new(200).set_body_json(json!({"metadata": {"continue": "page-2"}, "items": []})),
    ];
    for answer in answers {
        Mock::given(method("GET"))
            .and(path("/api/v1/applications"))
            .respond_with(answer)
            .up_to_n_times(1)
            .mount(&api)
            .await;
    }
    // Then, every time: a well-formed but empty list (a token that lost access to the project answers this way).
    Mock::given(method("GET"))
        .and(path("/api/v1/applications"))
        .respond_with(listing(&[]))
        .mount(&api)
        .await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&d, Some(&api.uri()), ""), Arc::new(clock.clone())).await;
    let filled = eventually(Duration::from_secs(10), || async {
        (names(&app, "").await.len() == 12 && firing(&app).await == 4).then_some(())
    })
    .await;
    assert!(filled.is_some(), "12 Applications, 4 incidents firing");

    // `{}`, `"items": null`, one page of several: not complete, nothing deleted.
    for (n, what) in [(1, "no items"), (2, "items null"), (3, "a continue token")] {
        app.advance(&clock, Duration::from_secs(11)).await;
        let refused = eventually(Duration::from_secs(10), || async {
            let m = app.metrics().await;
            (sample(&m, r#"herald_argocd_listings_refused_total{reason="incomplete"}"#) >= f64::from(n)).then_some(())
        })
        .await;
        assert!(
            refused.is_some(),
            "{what}: refused as incomplete\n{}",
            app.metrics().await
        );
        assert_eq!(names(&app, "").await.len(), 12, "{what}: nothing deleted");
        assert_eq!(firing(&app).await, 4, "{what}: nothing resolved");
        assert!(
            page(&app).await.contains("the Argo CD listing is incomplete"),
            "{what}: the status page says why"
        );
    }

    // `"items": []`: complete, but it lacks all 12 at once: held back, shown, counted.
    app.advance(&clock, Duration::from_secs(11)).await;
    let held = eventually(Duration::from_secs(10), || async {
        let p = page(&app).await;
        p.contains("lacked 12 of 12 Applications: held back").then_some(p)
    })
    .await;
    assert!(
        held.is_some(),
        "the status page shows the held drop: {}",
        page(&app).await
    );
    let metrics = app.metrics().await;
    assert!(sample(&metrics, "herald_argocd_listing_held_total") >= 1.0, "{metrics}");
    assert!(
        metrics.contains("\nherald_argocd_listing_held_apps{argocd_instance=\"default\"} "),
        "{metrics}"
    );
    assert_eq!(names(&app, "").await.len(), 12, "held: nothing deleted");
    assert_eq!(firing(&app).await, 4);
    assert!(
        delivered(&d.join("sink.jsonl"))
            .iter()
            .all(|m| m["action"] != "resolve"),
        "nothing resolved"
    );

    // The next listing agrees: now they go.
    app.advance(&clock, Duration::from_secs(11)).await;
    let gone = eventually(Duration::from_secs(10), || async {
        names(&app, "").await.is_empty().then_some(())
    })
    .await;
    assert!(gone.is_some(), "the second empty listing deleted them");
    assert_eq!(firing(&app).await, 0);
    assert!(
        !page(&app).await.contains("held back"),
        "the status page no longer shows it"
    );
    app.stop().await;
}

/// A fake Argo CD API on a raw socket: the first listing is `first`; every later one sends `{"items": [` and then
/// Applications without end, chunked (no Content-Length), as a runaway or hostile server would.
async fn endless_listing_server(first: Value) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let count = count.clone();
            let first = first.to_string();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let read = socket.read(&mut buf).await.unwrap_or(0);
                // The AppProjects, read before each listing: none.
                if buf[..read].starts_with(b"GET /api/v1/projects") {
                    let body = r#"{"items": []}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                    return;
                }
                let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = |s: &str| format!("{:x}\r\n{s}\r\n", s.len());
                if n == 0 {
                    let _ = socket.write_all(chunk(&first).as_bytes()).await;
                    let _ = socket.write_all(b"0\r\n\r\n").await;
                    return;
                }
                let _ = socket.write_all(chunk(r#"{"items": ["#).as_bytes()).await;
                let item = application("pay-0", "payments", "Synced", "Healthy").to_string();
                for _ in 0.. {
                    let many = format!("{item},").repeat(64);
                    if socket.write_all(chunk(&many).as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, served)
}

#[tokio::test]
async fn a_listing_larger_than_max_listing_bytes_is_refused_and_deletes_nothing() {
    let (url, _) = endless_listing_server(json!({"items": fleet("pay", 12)})).await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let cfg = config_with(
        &d,
        &api_settings(&url, "token: t, resync_interval: 10s, max_listing_bytes: 1048576"),
        "",
    );
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    let filled = eventually(Duration::from_secs(10), || async {
        (names(&app, "").await.len() == 12).then_some(())
    })
    .await;
    assert!(filled.is_some(), "the first listing");
    app.advance(&clock, Duration::from_secs(11)).await;
    refused_as_too_large(&app).await;
    assert_eq!(names(&app, "").await.len(), 12, "nothing deleted");
    assert!(page(&app).await.contains("larger than argocd.api.max_listing_bytes"));
    app.stop().await;
}

#[tokio::test]
async fn a_stream_that_closes_at_once_is_reopened_with_backoff_and_never_lists_more_than_once_per_interval() {
    let api = MockServer::start().await;
    let one = application("cron", "payments", "Synced", "Healthy");
    // One event, then the server closes the stream: every time.
    Mock::given(method("GET"))
        .and(path("/api/v1/stream/applications"))
        .respond_with(ResponseTemplate::new(200).set_body_string(format!(
            "{}\n",
            json!({"result": {"type": "MODIFIED", "application": one}})
        )))
        .mount(&api)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v1/applications"))
        .respond_with(listing(std::slice::from_ref(&one)))
        .mount(&api)
        .await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let cfg = config_with(
        &d,
        &api_settings(&api.uri(), "token: t, resync_interval: 10s, watch: true"),
        "",
    );
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    // Eight seconds on the clock, a second at a time: after each, the resync loop and the watch (reconnected, or
    // still waiting) sleep on the clock again.
    until_asleep(&clock, 2).await;
    for _ in 0..8 {
        clock.advance(Duration::from_secs(1));
        until_asleep(&clock, 2).await;
    }
    let requests = api.received_requests().await.unwrap_or_default();
    let count = |p: &str| requests.iter().filter(|r| r.url.path() == p).count();
    let streams = count("/api/v1/stream/applications");
    // Reconnects after 1, 2 and 4 s (plus jitter): at most 4 streams in 8 s, not one a second.
    assert!((2..=4).contains(&streams), "{streams} streams opened in 8 s");
    assert_eq!(
        count("/api/v1/applications"),
        1,
        "the breaks asked for listings, but the interval (10 s, 8 s on the clock) allows one"
    );
    // Once the interval has passed, the break's catch-up listing happens.
    clock.advance(Duration::from_secs(11));
    let second = eventually(Duration::from_secs(10), || async {
        let n = (api.received_requests().await.unwrap_or_default().iter())
            .filter(|r| r.url.path() == "/api/v1/applications")
            .count();
        (n == 2).then_some(())
    })
    .await;
    assert!(second.is_some(), "the next listing, one interval later");
    app.stop().await;
}

#[tokio::test]
async fn a_held_drop_is_agreed_by_the_next_listing_on_another_replica() {
    let pg = PgServer::start();
    let api = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v1/applications"))
        .respond_with(listing(&fleet("pay", 12)))
        .up_to_n_times(1)
        .mount(&api)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v1/applications"))
        .respond_with(listing(&[]))
        .mount(&api)
        .await;
    let clock = ManualClock::new(t0());
    let storage = format!("storage: {{url: \"{}\"}}", pg.url);
    let dir_a = Arc::new(tempfile::tempdir().expect("tmp"));
    let a = TestApp::spawn_in(
        dir_a.clone(),
        &config(dir_a.path(), Some(&api.uri()), &storage),
        Arc::new(clock.clone()),
    )
    .await;
    let filled = eventually(Duration::from_secs(10), || async {
        (names(&a, "").await.len() == 12).then_some(())
    })
    .await;
    assert!(filled.is_some(), "replica a listed 12");
    a.advance(&clock, Duration::from_secs(11)).await;
    let held = eventually(Duration::from_secs(10), || async {
        page(&a).await.contains("lacked 12 of 12").then_some(())
    })
    .await;
    assert!(held.is_some(), "replica a held the drop back");
    a.stop().await;

    // The next listing is replica b's: it agrees with what a held back, so they go.
    let dir_b = Arc::new(tempfile::tempdir().expect("tmp"));
    let b = TestApp::spawn_in(
        dir_b.clone(),
        &config(dir_b.path(), Some(&api.uri()), &storage),
        Arc::new(clock.clone()),
    )
    .await;
    assert_eq!(names(&b, "").await.len(), 12, "still there when b starts");
    b.advance(&clock, Duration::from_secs(11)).await;
    let gone = eventually(Duration::from_secs(10), || async {
        names(&b, "").await.is_empty().then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "b's listing agreed: deleted ({})",
        names(&b, "").await.len()
    );
    b.stop().await;
}

/// Self-service from AppProjects: with the API, a project's `herald.io/team` and `herald.io/receivers` own and route
/// its Applications that say nothing themselves; an Application's own label or annotation wins.
#[tokio::test]
async fn an_appprojects_annotations_own_and_route_its_applications() {
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let argocd = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v1/projects"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [
            {"metadata": {"name": "shop", "annotations": {
                "herald.io/team": "checkout", "herald.io/receivers": "checkout-extra, not-allowed",
                "kubectl.kubernetes.io/last-applied-configuration": "{…}"}}},
            {"metadata": {"name": "default"}}
        ]})))
        .mount(&argocd)
        .await;
    let quiet = |name: &str, labelled: bool| {
        let mut a = application(name, "payments", "Synced", "Degraded");
        a["spec"]["project"] = json!("shop");
        if !labelled {
            a["metadata"].as_object_mut().expect("metadata").remove("labels");
        }
        a
    };
    Mock::given(method("GET"))
        .and(path("/api/v1/applications"))
        .respond_with(listing(&[quiet("cart", false), quiet("labelled", true)]))
        .mount(&argocd)
        .await;
    let cfg = format!(
        r#"
{api}
ownership: {{default_team: payments}}
rules: {{degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1s, repeat_interval: 1h}}
receivers:
  - {{name: sink, console: {{file: "{d}/sink.jsonl"}}}}
  - {{name: checkout-sink, console: {{file: "{d}/checkout.jsonl"}}}}
  - {{name: checkout-extra, console: {{file: "{d}/extra.jsonl"}}}}
  - {{name: not-allowed, console: {{file: "{d}/not-allowed.jsonl"}}}}
teams:
  payments: {{receivers: [sink]}}
  checkout: {{receivers: [checkout-sink], allowed_receivers: [checkout-extra]}}
"#,
        api = api_settings(&argocd.uri(), "token: argocd-read-token, resync_interval: 10s"),
        d = d.display()
    );
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    let teams = eventually(Duration::from_secs(15), || async {
        let v = app.get_json("/v1/apps").await;
        let mut teams: Vec<(String, String)> = (v["items"].as_array()?.iter())
            .map(|a| {
                (
                    a["name"].as_str().unwrap_or("").into(),
                    a["team"].as_str().unwrap_or("").into(),
                )
            })
            .collect();
        teams.sort();
        (teams.len() == 2).then_some(teams)
    })
    .await
    .expect("listed");
    assert_eq!(
        teams,
        [
            ("cart".into(), "checkout".into()),
            ("labelled".into(), "payments".into())
        ],
        "the project's team, unless the Application's own label says otherwise"
    );
    let checkout = wait_for(&d.join("checkout.jsonl"), 1).await;
    assert_eq!(checkout[0]["incidents"][0]["app_name"], "cart");
    let extra = wait_for(&d.join("extra.jsonl"), 1).await;
    assert_eq!(
        extra[0]["incidents"][0]["app_name"], "cart",
        "the receiver the project asks for, allowed"
    );
    assert!(
        delivered(&d.join("not-allowed.jsonl")).is_empty(),
        "never a receiver the team does not allow"
    );
    let payments = wait_for(&d.join("sink.jsonl"), 1).await;
    assert_eq!(payments[0]["incidents"][0]["app_name"], "labelled");
    app.stop().await;
}

/// What the store holds for each Application, read from the SQLite file beside Herald: (name, team, sync,
/// last_seen, content hash).
async fn stored_rows(db: &std::path::Path) -> Vec<(String, String, String, i64, String)> {
    use sqlx::{ConnectOptions, Connection};
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .read_only(true)
        .connect()
        .await
        .expect("open the store");
    let rows = sqlx::query_as("SELECT name, team, sync_status, last_seen, content_hash FROM apps ORDER BY name")
        .fetch_all(&mut conn)
        .await
        .expect("read apps");
    conn.close().await.expect("close");
    rows
}

#[tokio::test]
async fn a_resync_of_unchanged_applications_writes_nothing_and_still_sees_a_change_in_them_or_their_project() {
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let argocd = MockServer::start().await;
    let unlabelled = |name: &str, sync: &str| {
        let mut a = application(name, "payments", sync, "Healthy");
        a["metadata"].as_object_mut().expect("metadata").remove("labels");
        a
    };
    // Three listings of the same two Applications, then `a` drifts; the project gains a team on the fourth resync.
    Mock::given(method("GET"))
        .and(path("/api/v1/projects"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [{"metadata": {"name": "default"}}]})))
        .up_to_n_times(4)
        .mount(&argocd)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v1/projects"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"items": [{"metadata": {"name": "default", "annotations": {"herald.io/team": "checkout"}}}]}),
        ))
        .mount(&argocd)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v1/applications"))
        .respond_with(listing(&[unlabelled("a", "Synced"), unlabelled("b", "Synced")]))
        .up_to_n_times(3)
        .mount(&argocd)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v1/applications"))
        .respond_with(listing(&[unlabelled("a", "OutOfSync"), unlabelled("b", "Synced")]))
        .mount(&argocd)
        .await;
    let cfg = format!(
        r#"
{api}
ownership: {{default_team: payments}}
receivers: [{{name: sink, console: {{file: "{d}/sink.jsonl"}}}}]
teams: {{payments: {{receivers: [sink]}}, checkout: {{receivers: [sink]}}}}
"#,
        api = api_settings(&argocd.uri(), "token: argocd-read-token, resync_interval: 10s"),
        d = d.display()
    );
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    let db = d.join("herald.db");
    // A listing is through the pipeline when Herald says it heard of both Applications at the clock's time.
    let resynced = |at: chrono::DateTime<chrono::Utc>| {
        let app = &app;
        async move {
            let heard = eventually(Duration::from_secs(15), || async {
                let v = app.get_json("/v1/apps").await;
                let items = v["items"].as_array()?;
                let heard = (items.iter())
                    .filter_map(|a| a["last_seen"].as_str()?.parse::<chrono::DateTime<chrono::Utc>>().ok())
                    .filter(|seen| *seen >= at)
                    .count();
                (heard == 2).then_some(())
            })
            .await;
            assert!(heard.is_some(), "the listing at {at} was not heard");
            app.settle().await;
        }
    };
    resynced(clock.now()).await;
    let first = stored_rows(&db).await;
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(first.iter().all(|r| r.1 == "payments" && r.2 == "Synced"), "{first:?}");
    let before = app.get_json("/v1/apps/argocd/a").await["last_seen"].clone();

    // Twice the same listing: nothing about the Applications is written, yet Herald says it saw them.
    for n in [2, 3] {
        app.advance(&clock, Duration::from_secs(11)).await;
        resynced(clock.now()).await;
        assert_eq!(stored_rows(&db).await, first, "listing {n} wrote an Application");
    }
    let after = app.get_json("/v1/apps/argocd/a").await["last_seen"].clone();
    assert_ne!(before, after, "the listing counts as hearing of the Application");
    let unchanged = sample(&app.metrics().await, "herald_argocd_unchanged_total");
    assert!(
        unchanged >= 4.0,
        "two unchanged listings of two Applications: {unchanged}"
    );

    // `a` drifts: the fourth listing's bytes for it are new, and the change is seen and stored.
    app.advance(&clock, Duration::from_secs(11)).await;
    resynced(clock.now()).await;
    let drift = eventually(Duration::from_secs(10), || async {
        let rows = stored_rows(&db).await;
        (rows[0].2 == "OutOfSync").then_some(rows)
    })
    .await
    .expect("the drift is stored");
    assert_eq!(drift[1], first[1], "b, unchanged, is not written");

    // The project now names a team: the same bytes for `b` read into another state, which is seen.
    app.advance(&clock, Duration::from_secs(11)).await;
    resynced(clock.now()).await;
    let owned = eventually(Duration::from_secs(10), || async {
        let rows = stored_rows(&db).await;
        rows.iter().all(|r| r.1 == "checkout").then_some(rows)
    })
    .await;
    assert!(
        owned.is_some(),
        "the project's team reaches both Applications: {:?}",
        stored_rows(&db).await
    );
    app.stop().await;
}

/// The fake Argo CD of `tests/common/fake_argocd.rs` holding `apps` (whole Applications, project `payments`).
async fn argo_cd(apps: &[Value]) -> FakeArgoCd {
    let argo = FakeArgoCd::start("argocd-read-token").await;
    for app in apps {
        argo.put(app.clone());
    }
    argo
}

#[tokio::test]
async fn an_application_gone_from_the_api_is_deleted_by_404_and_by_absence_from_a_listing() {
    let argo = argo_cd(&[
        application("stays", "payments", "Synced", "Healthy"),
        application("goes", "payments", "Synced", "Degraded"),
    ])
    .await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&d, Some(&argo.uri()), ""), Arc::new(clock.clone())).await;
    let both = eventually(Duration::from_secs(10), || async {
        let n = names(&app, "").await;
        (n.len() == 2).then_some(n)
    })
    .await;
    assert!(both.is_some(), "the first listing filled the store");
    let got = wait_for(&d.join("sink.jsonl"), 1).await;
    assert_eq!(got[0]["action"], "open", "goes is Degraded");

    argo.delete("argocd", "goes");
    app.advance(&clock, Duration::from_secs(11)).await;
    let left = eventually(Duration::from_secs(10), || async {
        let n = names(&app, "").await;
        (n == ["stays"]).then_some(n)
    })
    .await;
    assert!(
        left.is_some(),
        "absent from a complete listing and 404 in its project: deleted ({:?})",
        names(&app, "").await
    );
    let got = wait_for(&d.join("sink.jsonl"), 3).await;
    let resolve = got.iter().find(|m| m["action"] == "resolve").expect("a resolve");
    assert!(
        resolve["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("Application deleted"),
        "{resolve}"
    );
    let told = (got.iter()).filter(|m| m["action"] == "open" && m.to_string().contains("deleted from Argo CD"));
    assert_eq!(told.count(), 1, "told once that goes was deleted: {got:#?}");
    let list = (argo.requests().into_iter())
        .find(|r| r.starts_with("/api/v1/applications?"))
        .expect("a listing");
    assert!(
        list.contains("items.metadata.name") && list.contains("items.status.resources"),
        "{list}"
    );
    assert!(!list.contains("managedFields"), "only what Herald reads");
    app.stop().await;
}

#[tokio::test]
async fn a_pending_rule_whose_application_the_api_no_longer_has_does_not_fire() {
    let argo = argo_cd(&[]).await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    // No resync here (0s): the confirmation alone.
    let cfg = config_with(
        &d,
        &api_settings(&argo.uri(), "token: argocd-read-token, resync_interval: 0s"),
        "",
    );
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    let body = envelope("ghost", "payments", "OutOfSync", "Healthy", &clock.now().to_rfc3339());
    assert_eq!(app.post(body).await.status(), 202);
    app.advance(&clock, Duration::from_secs(61 * 60)).await;
    let gone = eventually(Duration::from_secs(10), || async {
        let n = names(&app, "?deleted=true").await;
        (n == ["ghost"]).then_some(n)
    })
    .await;
    assert!(
        gone.is_some(),
        "404 in its project, 403 without: the Application is deleted"
    );
    app.settle().await;
    assert!(
        delivered(&d.join("sink.jsonl")).is_empty(),
        "nothing fired for an Application Argo CD no longer has"
    );
    assert_eq!(
        argo.gets(),
        ["ghost?appNamespace=argocd&project=default", "ghost?appNamespace=argocd"]
    );
    app.stop().await;
}

#[tokio::test]
async fn a_wiped_store_refills_from_one_listing_and_fires_nothing_that_was_not_due() {
    let mut degraded = application("recently-degraded", "payments", "Synced", "Degraded");
    degraded["status"]["health"]["lastTransitionTime"] = json!("2026-03-02T08:58:00Z");
    let argo = argo_cd(&[
        application("drifting", "payments", "OutOfSync", "Healthy"),
        application("fine", "payments", "Synced", "Healthy"),
        degraded,
    ])
    .await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let cfg = config(&d, Some(&argo.uri()), "").replace("degraded: {for: 0s}", "degraded: {for: 5m}");
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    let all = eventually(Duration::from_secs(10), || async {
        let n = names(&app, "").await;
        (n.len() == 3).then_some(n)
    })
    .await;
    assert!(all.is_some(), "one listing refilled the store");
    let drifting = app.get_json("/v1/apps/argocd/drifting").await;
    assert_eq!(
        drifting["sync"]["since_at_least"], true,
        "Herald did not see it go OutOfSync"
    );
    let recently = app.get_json("/v1/apps/argocd/recently-degraded").await;
    assert_eq!(
        recently["health"]["since"], "2026-03-02T08:58:00Z",
        "Argo CD's own time, which the listing's `status.health` carries"
    );
    assert_eq!(recently["health"]["since_at_least"], false);
    app.settle().await;
    assert!(delivered(&d.join("sink.jsonl")).is_empty(), "nothing was due yet");
    let asked: Vec<String> = (argo.requests().iter())
        .map(|r| r.split('?').next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        asked,
        ["/api/v1/projects", "/api/v1/applications"],
        "two requests: the AppProjects, then the listing"
    );
    // Degraded since 08:58 by Argo CD's clock: due at 09:03.
    app.advance(&clock, Duration::from_secs(4 * 60)).await;
    let got = wait_for(&d.join("sink.jsonl"), 1).await;
    assert_eq!(got[0]["incidents"][0]["app_name"], "recently-degraded");
    app.stop().await;
}

#[tokio::test]
async fn a_change_that_flips_no_trigger_is_seen_by_the_resync_and_by_the_watch() {
    let one = with_prunes(
        application("cron", "payments", "OutOfSync", "Healthy"),
        &["invoices-v1"],
    );
    let two = with_prunes(
        application("cron", "payments", "OutOfSync", "Healthy"),
        &["invoices-v1", "reminders"],
    );
    let three = with_prunes(
        application("cron", "payments", "OutOfSync", "Healthy"),
        &["invoices-v1", "reminders", "old-cfg"],
    );
    let argo = argo_cd(std::slice::from_ref(&one)).await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&d, Some(&argo.uri()), ""), Arc::new(clock.clone())).await;
    let seen = eventually(Duration::from_secs(10), || async {
        (prune_count(&app).await == 1).then_some(())
    })
    .await;
    assert!(seen.is_some(), "the first listing");
    // A second resource now requires pruning: the app was OutOfSync already, so no trigger flips and Argo CD sends
    // nothing. The next resync sees it.
    argo.put(two);
    app.advance(&clock, Duration::from_secs(11)).await;
    let seen = eventually(Duration::from_secs(10), || async {
        (prune_count(&app).await == 2).then_some(())
    })
    .await;
    assert!(seen.is_some(), "the resync saw the second resource");
    app.stop().await;

    // The same with the event stream, and no resync at all.
    let argo = argo_cd(std::slice::from_ref(&one)).await;
    argo.put(three);
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let cfg = config_with(
        &d,
        &api_settings(
            &argo.uri(),
            "token: argocd-read-token, resync_interval: 0s, watch: true",
        ),
        "",
    );
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(ManualClock::new(t0()))).await;
    let seen = eventually(Duration::from_secs(10), || async {
        (prune_count(&app).await == 3).then_some(())
    })
    .await;
    assert!(seen.is_some(), "the watch saw the third resource");
    assert!(
        argo.requests()
            .iter()
            .any(|r| r.starts_with("/api/v1/stream/applications"))
    );
    app.stop().await;
}

/// A listing refused as larger than `max_listing_bytes` stores nothing, not even the items read before the cap: an
/// Application new in it and one whose sync changed (both before the cap, by name) are not written; the next
/// listing within the cap writes both.
#[tokio::test]
async fn a_listing_refused_as_too_large_stores_none_of_the_items_before_the_cap() {
    let argo = argo_cd(&fleet("pay", 3)).await;
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let api = api_settings(
        &argo.uri(),
        "token: argocd-read-token, resync_interval: 10s, max_listing_bytes: 1048576",
    );
    let app = TestApp::spawn_in(dir.clone(), &config_with(&d, &api, ""), Arc::new(clock.clone())).await;
    let filled = eventually(Duration::from_secs(10), || async {
        (names(&app, "").await.len() == 3).then_some(())
    })
    .await;
    assert!(filled.is_some(), "the first listing");

    // Sorted by name: the new Application and the changed one come first, then 1.2 MB of annotations.
    argo.put(application("aaa-new", "payments", "Synced", "Healthy"));
    argo.put(application("pay-1", "payments", "OutOfSync", "Healthy"));
    let bulk: Vec<Value> = (0..12)
        .map(|i| {
            let mut a = application(&format!("zz-bulk-{i:02}"), "payments", "Synced", "Healthy");
            a["metadata"]["annotations"] = json!({"bulk": "x".repeat(100_000)});
            a
        })
        .collect();
    for a in &bulk {
        argo.put(a.clone());
    }
    app.advance(&clock, Duration::from_secs(11)).await;
    refused_as_too_large(&app).await;
    app.settle().await;
    assert_eq!(names(&app, "").await, ["pay-0", "pay-1", "pay-2"], "nothing new stored");
    assert!(
        names(&app, "?sync=OutOfSync").await.is_empty(),
        "pay-1's change not stored"
    );

    for a in &bulk {
        argo.delete("argocd", a["metadata"]["name"].as_str().expect("name"));
    }
    app.advance(&clock, Duration::from_secs(11)).await;
    let both = eventually(Duration::from_secs(20), || async {
        (names(&app, "?sync=OutOfSync").await == ["pay-1"] && names(&app, "").await.len() == 4).then_some(())
    })
    .await;
    assert!(
        both.is_some(),
        "the listing within the cap: {:?}",
        names(&app, "").await
    );
    app.stop().await;
}
