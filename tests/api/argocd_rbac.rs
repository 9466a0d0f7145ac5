//! Herald against an Argo CD API that answers as Argo CD's own server does (`tests/common/fake_argocd.rs`): the
//! listing holds only the paths of Argo CD's field table and only what the token may `get`; a GET answers 403 or
//! 404 as `getAppEnforceRBAC` does, with and without `project`. With the recommended setup (`argocd.api`,
//! `watch: true`) the one-hour rule fires; an absence deletes only what Argo CD confirms gone; a token that loses
//! its RBAC deletes and resolves nothing, and says loudly which project it can no longer see.

use std::sync::Arc;
use std::time::Duration;

use crate::fake_argocd::{FakeArgoCd, Rbac, application};
use crate::helpers::*;
use herald::clock::{Clock, ManualClock};
use serde_json::Value;

const TOKEN: &str = "argocd-read-token";

fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z")
        .expect("t")
        .with_timezone(&chrono::Utc)
}

/// Herald with the API of `argo` (resync every 10 s, and `more` in `argocd.api`), one console sink for the default
/// team `platform`, and `rules` as given.
fn config(dir: &std::path::Path, argo: &FakeArgoCd, more: &str, rules: &str) -> String {
    format!(
        r#"
argocd: {{api: {{url: "{url}", token: {TOKEN}, timeout: 2s{more}}}}}
receivers: [{{name: sink, console: {{file: "{d}/sink.jsonl"}}}}]
ownership: {{default_team: platform}}
teams: {{platform: {{receivers: [sink]}}}}
rules: {rules}
grouping: {{group_wait: 0s, group_interval: 1s, repeat_interval: 24h}}
"#,
        url = argo.uri(),
        d = dir.display(),
        more = if more.contains("resync_interval") {
            more.to_string()
        } else {
            format!(", resync_interval: 10s{more}")
        },
    )
}

struct Setup {
    app: TestApp,
    clock: ManualClock,
    sink: std::path::PathBuf,
}

async fn spawn(argo: &FakeArgoCd, more: &str, rules: &str) -> Setup {
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let app = TestApp::spawn_in(dir.clone(), &config(&d, argo, more, rules), Arc::new(clock.clone())).await;
    Setup {
        app,
        clock,
        sink: d.join("sink.jsonl"),
    }
}

impl Setup {
    /// The clock moves past the resync interval and the next listing is done and stored.
    async fn next_listing(&self, argo: &FakeArgoCd) {
        let before = argo.listings();
        self.app.advance(&self.clock, Duration::from_secs(11)).await;
        let listed = eventually(Duration::from_secs(20), || async {
            (argo.listings() > before).then_some(())
        })
        .await;
        assert!(listed.is_some(), "a listing after the interval");
        // Its items, its GETs and what they changed are through once the API source says it listed again.
        let at = self.clock.now();
        let done = eventually(Duration::from_secs(20), || async {
            let v = self.app.get_json("/v1/argocd").await;
            let last = v["instances"][0]["last_listing"].as_str().map(str::to_string)?;
            let last = chrono::DateTime::parse_from_rfc3339(&last).ok()?;
            (last >= at).then_some(())
        })
        .await;
        assert!(done.is_some(), "the listing finished");
        self.app.settle().await;
    }

    async fn names(&self, query: &str) -> Vec<String> {
        let v = self.app.get_json(&format!("/v1/apps{query}")).await;
        (v["items"].as_array().expect("items").iter())
            .map(|a| a["name"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    async fn incidents(&self, state: &str) -> Vec<(i64, String, String)> {
        let v = self.app.get_json(&format!("/v1/incidents?state={state}")).await;
        (v["items"].as_array().expect("items").iter())
            .map(|i| {
                (
                    i["id"].as_i64().unwrap_or_default(),
                    i["app_name"].as_str().unwrap_or_default().to_string(),
                    i["kind"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// What the sink got: action and title of each message.
    fn told(&self) -> Vec<(String, String)> {
        (delivered(&self.sink).iter())
            .map(|n| {
                (
                    n["action"].as_str().unwrap_or_default().to_string(),
                    n["title"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }
}

async fn wait_until_listed(setup: &Setup, n: usize) {
    let all = eventually(Duration::from_secs(20), || async {
        (setup.names("").await.len() == n).then_some(())
    })
    .await;
    assert!(
        all.is_some(),
        "the first listing stored {n} Applications: {:?}",
        setup.names("").await
    );
}

#[tokio::test]
async fn with_the_recommended_setup_an_application_out_of_sync_only_in_the_api_fires_after_an_hour() {
    let argo = FakeArgoCd::start(TOKEN).await;
    argo.put(application("drift", "payments", "OutOfSync", "Healthy"));
    argo.put(application("fine", "payments", "Synced", "Healthy"));
    let s = spawn(&argo, ", watch: true", "{out_of_sync: {for: 1h}}").await;
    wait_until_listed(&s, 2).await;
    let drift = s.app.get_json("/v1/apps/argocd/drift").await;
    assert_eq!(drift["sync"]["status"], "OutOfSync", "read from the listing: {drift}");
    // Listings every ten minutes of the hour: each agrees, none resets the pending incident or replaces the
    // Application (the listing carries no uid).
    for _ in 0..5 {
        s.app.advance(&s.clock, Duration::from_secs(10 * 60 - 11)).await;
        s.next_listing(&argo).await;
    }
    assert!(s.told().is_empty(), "nothing before the hour: {:?}", s.told());
    s.app.advance(&s.clock, Duration::from_secs(11 * 60)).await;
    let got = wait_for(&s.sink, 1).await;
    assert_eq!(got[0]["action"], "open");
    assert_eq!(got[0]["incidents"][0]["app_name"], "drift");
    assert_eq!(got[0]["incidents"][0]["kind"], "out_of_sync");
    s.next_listing(&argo).await;
    assert_eq!(
        s.told().len(),
        1,
        "still one message: no resolve, no re-open: {:?}",
        s.told()
    );
    assert_eq!(s.incidents("firing").await.len(), 1);

    // Every listing asked only for paths of Argo CD's field table.
    for r in argo
        .requests()
        .iter()
        .filter(|r| r.starts_with("/api/v1/applications?"))
    {
        for never in [
            "uid",
            "conditions",
            "history",
            "reconciledAt",
            "items.status.sync%2C",
            "operationState%2C",
        ] {
            assert!(!r.contains(never), "{never} is not selectable: {r}");
        }
    }
    // The confirming GET named the project.
    assert!(
        argo.gets()
            .iter()
            .any(|g| g == "drift?appNamespace=argocd&project=payments"),
        "{:?}",
        argo.gets()
    );
    s.app.stop().await;
}

#[tokio::test]
async fn an_application_deleted_in_argo_cd_is_deleted_when_argo_cd_confirms_it_gone() {
    let argo = FakeArgoCd::start(TOKEN).await;
    argo.put(application("stays", "payments", "Synced", "Healthy"));
    argo.put(application("goes", "payments", "Synced", "Degraded"));
    let s = spawn(&argo, "", "{degraded: {for: 0s}}").await;
    wait_until_listed(&s, 2).await;
    let got = wait_for(&s.sink, 1).await;
    assert_eq!(got[0]["action"], "open", "goes is Degraded");

    argo.delete("argocd", "goes");
    let before = argo.gets().len();
    s.next_listing(&argo).await;
    assert_eq!(s.names("").await, ["stays"]);
    // Its incident resolves, saying why; the deletion itself may be told as news beside it, in either order.
    let resolve = eventually(Duration::from_secs(10), || async {
        delivered(&s.sink).into_iter().find(|m| m["action"] == "resolve")
    })
    .await
    .unwrap_or_else(|| panic!("a resolve: {:#?}", delivered(&s.sink)));
    assert!(
        resolve["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("Application deleted"),
        "{resolve}"
    );
    assert_eq!(
        argo.gets()[before..],
        ["goes?appNamespace=argocd&project=payments", "goes?appNamespace=argocd"],
        "asked in its project (404), then without (403: Argo CD says the same for missing and hidden)"
    );
    s.app.stop().await;
}

#[tokio::test]
async fn a_token_that_loses_all_access_deletes_and_resolves_nothing_and_says_which_projects_it_cannot_see() {
    let argo = FakeArgoCd::start(TOKEN).await;
    for (name, project, health) in [
        ("a1", "rbac-alpha", "Healthy"),
        ("a2", "rbac-alpha", "Healthy"),
        ("b1", "rbac-beta", "Degraded"),
        ("b2", "rbac-beta", "Healthy"),
    ] {
        argo.put(application(name, project, "Synced", health));
    }
    let s = spawn(&argo, "", "{degraded: {for: 0s}}").await;
    wait_until_listed(&s, 4).await;
    wait_for(&s.sink, 1).await;
    let firing = s.incidents("firing").await;
    assert_eq!(firing.len(), 1, "b1 is Degraded");

    // The role is removed: the listing is 200 with `items: []`, every GET 403.
    argo.rbac(TOKEN, Rbac::none());
    let gets_before = argo.gets().len();
    for _ in 0..3 {
        s.next_listing(&argo).await;
    }
    assert_eq!(
        s.names("").await,
        ["a1", "a2", "b1", "b2"],
        "however many listings agree"
    );
    assert_eq!(s.incidents("firing").await, firing, "its incidents are kept");
    assert_eq!(
        argo.gets().len() - gets_before,
        3 * 2,
        "one GET per denied project per listing: {:?}",
        argo.gets()
    );
    let told = s.told();
    assert_eq!(
        told.len(),
        3,
        "b1's open, then the default team told once per project: {told:?}"
    );
    assert!(told[1..].iter().all(|(a, _)| a == "open"));
    assert!(
        told.iter()
            .any(|(_, t)| t == "Herald can no longer see Argo CD project rbac-alpha: permission denied")
    );
    assert!(
        told.iter()
            .any(|(_, t)| t == "Herald can no longer see Argo CD project rbac-beta: permission denied")
    );
    let sources = s.app.get_json("/v1/argocd").await;
    let denied: Vec<&str> = (sources["instances"][0]["permission_denied"]
        .as_array()
        .expect("denied")
        .iter())
    .filter_map(|d| d["summary"].as_str())
    .collect();
    assert_eq!(
        denied,
        [
            "permission denied for project rbac-alpha since 2026-03-02 09:00 UTC",
            "permission denied for project rbac-beta since 2026-03-02 09:00 UTC"
        ]
    );
    let metrics = s.app.metrics().await;
    assert!(
        metrics.contains("herald_argocd_permission_denied{argocd_instance=\"default\",project=\"rbac-beta\"} 1"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("permission_denied"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let page = reqwest::get(&s.app.address)
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    assert!(
        page.contains("permission denied for project rbac-beta since"),
        "the status page says it"
    );

    // Access comes back: the same Applications and incidents, and the team is told once per project.
    argo.rbac(TOKEN, Rbac::all());
    s.next_listing(&argo).await;
    s.next_listing(&argo).await;
    assert_eq!(s.names("").await, ["a1", "a2", "b1", "b2"]);
    assert_eq!(s.incidents("firing").await, firing, "the same incident, not a new one");
    let told = s.told();
    assert_eq!(told.len(), 5, "{told:?}");
    assert!(
        told[3..].iter().all(|(a, t)| a == "resolve" && t.ends_with("again")),
        "{told:?}"
    );
    let sources = s.app.get_json("/v1/argocd").await;
    assert_eq!(sources["instances"][0]["permission_denied"], serde_json::json!([]));
    assert!(
        s.app
            .metrics()
            .await
            .contains("herald_argocd_permission_denied{argocd_instance=\"default\",project=\"rbac-beta\"} 0")
    );
    s.app.stop().await;
}

#[tokio::test]
async fn losing_one_projects_access_keeps_its_applications_and_asks_once_per_listing() {
    let argo = FakeArgoCd::start(TOKEN).await;
    for i in 0..14 {
        argo.put(application(&format!("keep-{i:02}"), "one-alpha", "Synced", "Healthy"));
    }
    for i in 0..6 {
        argo.put(application(&format!("hidden-{i}"), "one-beta", "Synced", "Healthy"));
    }
    let s = spawn(&argo, "", "{}").await;
    wait_until_listed(&s, 20).await;
    argo.rbac(TOKEN, Rbac::projects(&["one-alpha"]));
    let before = argo.gets().len();
    s.next_listing(&argo).await;
    assert_eq!(
        s.names("").await.len(),
        20,
        "6 of 20 is under the drop guard: still nothing deleted"
    );
    assert_eq!(
        argo.gets().len() - before,
        1,
        "a project that answers 403 is asked once: {:?}",
        argo.gets()
    );
    let told = s.told();
    assert_eq!(
        told,
        [(
            "open".to_string(),
            "Herald can no longer see Argo CD project one-beta: permission denied".to_string()
        )]
    );
    s.app.stop().await;
}

#[tokio::test]
async fn an_application_moved_to_a_project_outside_argocd_api_projects_is_not_told_as_deleted() {
    let argo = FakeArgoCd::start(TOKEN).await;
    argo.put(application("mover", "payments", "Synced", "Degraded"));
    let s = spawn(&argo, ", projects: [payments]", "{degraded: {for: 0s}}").await;
    wait_until_listed(&s, 1).await;
    wait_for(&s.sink, 1).await;
    argo.move_to("argocd", "mover", "archive");
    let before = argo.gets().len();
    s.next_listing(&argo).await;
    let mover = s.app.get_json("/v1/apps/argocd/mover").await;
    assert_eq!(mover["project"], "archive", "read where it is now: {mover}");
    assert_eq!(s.names("").await, ["mover"], "not deleted");
    assert!(
        !s.told().iter().any(|(a, _)| a == "resolve"),
        "nothing resolved as deleted: {:?}",
        s.told()
    );
    assert_eq!(
        argo.gets()[before..],
        [
            "mover?appNamespace=argocd&project=payments",
            "mover?appNamespace=argocd"
        ],
        "404 in its project, 200 without: moved"
    );
    s.app.stop().await;
}

#[tokio::test]
async fn a_pending_incident_of_a_project_herald_may_not_see_neither_fires_nor_resets_until_access_returns() {
    let argo = FakeArgoCd::start(TOKEN).await;
    let mut drift = application("pend", "pend-beta", "OutOfSync", "Healthy");
    argo.put(drift.clone());
    // No resync: the scheduler's confirming GET alone.
    let s = spawn(&argo, ", resync_interval: 0s", "{out_of_sync: {for: 1h}}").await;
    let body = bare_envelope(drift.take(), &s.clock.now().to_rfc3339());
    assert_eq!(s.app.post(body.to_string()).await.status(), 202);
    argo.rbac(TOKEN, Rbac::projects(&["other"]));
    s.app.advance(&s.clock, Duration::from_secs(61 * 60)).await;
    let told = wait_for(&s.sink, 1).await;
    assert_eq!(told.len(), 1);
    assert_eq!(
        told[0]["title"],
        "Herald can no longer see Argo CD project pend-beta: permission denied"
    );
    assert_eq!(s.incidents("pending").await.len(), 1, "neither fired nor reset");
    assert!(s.incidents("firing").await.is_empty());

    argo.rbac(TOKEN, Rbac::all());
    // Asked again once its claim ends: confirmed OutOfSync, it fires; the denial ends.
    s.app.advance(&s.clock, Duration::from_secs(31)).await;
    let told = wait_for(&s.sink, 3).await;
    let actions: Vec<(&str, &str)> = (told.iter())
        .map(|n| {
            (
                n["action"].as_str().unwrap_or_default(),
                n["title"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        actions.contains(&("resolve", "Herald sees Argo CD project pend-beta again")),
        "{actions:?}"
    );
    assert!(
        told.iter()
            .any(|n| n["action"] == "open" && n["incidents"][0]["app_name"] == "pend"),
        "{actions:?}"
    );
    s.app.stop().await;
}

#[tokio::test]
async fn the_streams_error_chunk_without_a_newline_is_reported_and_the_listing_still_works() {
    let argo = FakeArgoCd::start(TOKEN).await;
    argo.put(application("streamed", "payments", "Synced", "Healthy"));
    argo.stream_error(Some((7, 403, "permission denied")));
    let s = spawn(&argo, ", watch: true", "{}").await;
    wait_until_listed(&s, 1).await;
    // Once the listing is done (the resync loop and the watch both wait on the clock), the watch's backoff ends and
    // it reconnects, and its stream fails again after the listing's success.
    until_asleep(&s.clock, 2).await;
    s.clock.advance(Duration::from_secs(2));
    let reported = eventually(Duration::from_secs(20), || async {
        let v: Value = s.app.get_json("/v1/argocd").await;
        let e = v["instances"][0]["last_error"].as_str()?.to_string();
        e.contains("permission denied").then_some(e)
    })
    .await;
    assert!(reported.is_some(), "{}", s.app.get_json("/v1/argocd").await);
    assert!(
        argo.requests()
            .iter()
            .any(|r| r.starts_with("/api/v1/stream/applications"))
    );
    s.app.stop().await;
}

#[tokio::test]
async fn hostile_or_broken_answers_to_a_confirming_get_delete_nothing() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let api = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v1/applications"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("{\"metadata\":{}\n,\"items\":[]}", "application/json"))
        .mount(&api)
        .await;
    let answers = [
        (
            "not-json",
            ResponseTemplate::new(200).set_body_raw("<html>login</html>", "text/html"),
        ),
        (
            "wrong-type",
            ResponseTemplate::new(200).set_body_raw(r#"{"metadata": 5, "spec": []}"#, "application/json"),
        ),
        (
            "huge-403",
            ResponseTemplate::new(403).set_body_raw(vec![b'x'; 4 << 20], "text/plain"),
        ),
        (
            "server-error",
            ResponseTemplate::new(502).set_body_raw("bad gateway", "text/plain"),
        ),
        ("teapot", ResponseTemplate::new(418)),
    ];
    for (name, answer) in answers {
        Mock::given(method("GET"))
            .and(path(format!("/api/v1/applications/{name}")))
            .respond_with(answer)
            .mount(&api)
            .await;
    }
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let cfg = format!(
        r#"
argocd: {{api: {{url: "{}", token: t, timeout: 2s, resync_interval: 10s}}}}
receivers: [{{name: sink, console: {{file: "{}/sink.jsonl"}}}}]
ownership: {{default_team: platform}}
teams: {{platform: {{receivers: [sink]}}}}
"#,
        api.uri(),
        d.display()
    );
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    for (name, _) in [
        ("not-json", ()),
        ("wrong-type", ()),
        ("huge-403", ()),
        ("server-error", ()),
        ("teapot", ()),
    ] {
        let body = envelope(name, "payments", "Synced", "Healthy", &clock.now().to_rfc3339());
        assert_eq!(app.post(body).await.status(), 202);
    }
    for _ in 0..2 {
        let before = api.received_requests().await.unwrap_or_default().len();
        app.advance(&clock, Duration::from_secs(11)).await;
        let asked = eventually(Duration::from_secs(20), || async {
            let n = api.received_requests().await.unwrap_or_default().len();
            (n >= before + 7).then_some(())
        })
        .await;
        assert!(asked.is_some(), "a listing and its GETs");
        app.settle().await;
    }
    let v = app.get_json("/v1/apps").await;
    assert_eq!(v["items"].as_array().map(Vec::len), Some(5), "nothing deleted: {v}");
    let sources = app.get_json("/v1/argocd").await;
    let denied = &sources["instances"][0]["permission_denied"];
    assert_eq!(
        denied.as_array().map(Vec::len),
        Some(1),
        "the 403 denies its project: {sources}"
    );
    assert!(
        !sources.to_string().contains("login"),
        "no answer body is echoed: {sources}"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_default_teams_access_notice_links_to_the_status_page_and_offers_no_action_on_an_incident_that_is_none() {
    let argo = FakeArgoCd::start(TOKEN).await;
    argo.put(application("a1", "rbac-alpha", "Synced", "Healthy"));
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let d = dir.path().to_path_buf();
    let links = "server: {listen: \"127.0.0.1:0\", public_url: \"https://herald.example.com\", \
                 link_signing_key: \"0123456789abcdef0123456789abcdef\"}\n";
    let cfg = config(&d, &argo, "", "{}") + links;
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    let s = Setup {
        app,
        clock,
        sink: d.join("sink.jsonl"),
    };
    wait_until_listed(&s, 1).await;
    argo.rbac(TOKEN, Rbac::none());
    s.next_listing(&argo).await;
    wait_for(&s.sink, 1).await;
    let notices = delivered(&s.sink);
    assert_eq!(notices.len(), 1, "{notices:?}");
    let notice = &notices[0];
    assert_eq!(
        notice["title"], "Herald can no longer see Argo CD project rbac-alpha: permission denied",
        "{notice}"
    );
    assert!(
        notice["status_url"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://herald.example.com/")),
        "the status page link: {notice}"
    );
    assert!(
        !notice.to_string().contains("/act/"),
        "no signed link to act on incident 0: {notice}"
    );
    s.app.stop().await;
}
