//! Several Argo CD instances, one Herald: two fake Argo CD APIs hold Applications of the same names. Each instance's
//! listing, 404 and deletion touch only its own; a body is told to be an instance's by its ingest token or its
//! `context.argocdUrl`, and refused (422, saying how to configure it) when it names none; a route and a silence can
//! target one instance. Each story runs on SQLite and on PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use crate::fresh_db::fresh_db;
use crate::helpers::*;
use herald::clock::{Clock, ManualClock};
use serde_json::{Value, json};
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const ENGINES: [&str; 2] = ["sqlite", "postgres"];

fn t0() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z")
        .expect("t")
        .with_timezone(&chrono::Utc)
}

/// A webhook body of `pay-api` (namespace `argocd`) as the Argo CD at `argocd_url` sends it.
/// (No URL: an empty `context`.)
fn body_from(argocd_url: Option<&str>, sync: &str, health: &str, at: &str) -> String {
    let from = argocd_url.map_or_else(|| json!({}), context);
    envelope_from(Some(from), pay_api(sync, health), at).to_string()
}

/// `pay-api` of `payments`, as the API lists it.
fn pay_api(sync: &str, health: &str) -> Value {
    application("pay-api", "payments", sync, health)
}

fn listing(apps: &[Value]) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"metadata": {}, "items": apps}))
}

/// Two instances: `default` (argocd-a) and `eu` (argocd-eu), each with its API when given; `sink` gets everything,
/// `eu-sink` what the route for `instance: eu` sends.
fn config(dir: &std::path::Path, db: &str, a_api: Option<&str>, eu_api: Option<&str>, extra: &str) -> String {
    let api = |u: Option<&str>| {
        u.map(|u| format!("{{url: \"{u}\", token: argocd-read-token, timeout: 1s, resync_interval: 10s}}"))
    };
    let top = api(a_api).map(|a| format!("  api: {a}\n")).unwrap_or_default();
    let eu = api(eu_api).map(|a| format!(", api: {a}")).unwrap_or_default();
    format!(
        r#"
storage: {{url: "{db}"}}
argocd:
  url: https://argocd-a.example.com
{top}  instances: [{{name: eu, url: "https://argocd-eu.example.com"{eu}}}]
receivers:
  - {{name: sink, console: {{file: "{d}/sink.jsonl"}}}}
  - {{name: eu-sink, console: {{file: "{d}/eu-sink.jsonl"}}}}
ownership: {{default_team: payments}}
teams: {{payments: {{receivers: [sink]}}}}
routes: [{{instance: eu, receivers: [eu-sink], continue: true}}]
rules: {{out_of_sync: {{for: 1m}}, degraded: {{for: 0s}}}}
grouping: {{group_wait: 0s, group_interval: 1s, repeat_interval: 1h}}
{extra}
"#,
        d = dir.display(),
    )
}

async fn apps(app: &TestApp, query: &str) -> Vec<(String, String, String)> {
    let v = app.get_json(&format!("/v1/apps{query}")).await;
    let mut out: Vec<(String, String, String)> = (v["items"].as_array().expect("items").iter())
        .map(|a| {
            let s = |k: &str| a[k].as_str().unwrap_or_default().to_string();
            (
                s("instance"),
                s("name"),
                a["sync"]["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

async fn spawn(engine: &str, a_api: Option<&str>, eu_api: Option<&str>, extra: &str) -> (TestApp, ManualClock) {
    let clock = ManualClock::new(t0());
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let db = fresh_db(engine, "instances").await;
    let cfg = config(dir.path(), &db.url, a_api, eu_api, extra);
    let app = TestApp::spawn_in(dir.clone(), &cfg, Arc::new(clock.clone())).await;
    // The database lives as long as the test's directory.
    std::mem::forget(db);
    (app, clock)
}

#[tokio::test]
async fn each_instances_listing_and_404_touch_only_its_own_applications() {
    for engine in ENGINES {
        let a = MockServer::start().await;
        let eu = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/api/v1/applications"))
            .respond_with(listing(&[pay_api("OutOfSync", "Healthy")]))
            .mount(&a)
            .await;
        Mock::given(method("GET"))
            .and(path("/api/v1/applications"))
            .respond_with(listing(&[pay_api("Synced", "Healthy")]))
            .up_to_n_times(1)
            .mount(&eu)
            .await;
        let (app, clock) = spawn(engine, Some(&a.uri()), Some(&eu.uri()), "").await;

        // Both listings arrive: two Applications named argocd/pay-api, one per instance, each with its own state.
        let both = eventually(Duration::from_secs(15), || async {
            let got = apps(&app, "").await;
            (got.len() == 2).then_some(got)
        })
        .await;
        assert_eq!(
            both.expect("both instances listed"),
            [
                ("default".to_string(), "pay-api".to_string(), "OutOfSync".to_string()),
                ("eu".to_string(), "pay-api".to_string(), "Synced".to_string()),
            ],
            "{engine}"
        );
        assert_eq!(
            apps(&app, "?instance=eu").await.len(),
            1,
            "{engine}: filtered by instance"
        );
        let one = app.get_json("/v1/apps/eu/argocd/pay-api").await;
        assert_eq!(one["instance"], "eu", "{engine}: {one}");
        assert_eq!(one["sync"]["status"], "Synced");
        let default = app.get_json("/v1/apps/argocd/pay-api").await;
        assert_eq!(
            default["instance"], "default",
            "{engine}: the two-segment path is the default instance's"
        );
        assert_eq!(default["sync"]["status"], "OutOfSync");
        let r = app
            .client
            .get(format!("{}/v1/apps?instance=us", app.address))
            .send()
            .await
            .expect("req");
        assert_eq!(
            r.status(),
            400,
            "{engine}: an unknown instance is an error, not an empty list"
        );
        assert!(r.text().await.expect("text").contains("default, eu"));

        // eu's next listing lacks it, and eu's API confirms it is gone (404 in its project): eu's pay-api is
        // deleted; the default instance's stays.
        Mock::given(method("GET"))
            .and(path("/api/v1/applications"))
            .respond_with(listing(&[]))
            .mount(&eu)
            .await;
        app.advance(&clock, Duration::from_secs(11)).await;
        let gone = eventually(Duration::from_secs(15), || async {
            let got = apps(&app, "").await;
            (got.len() == 1).then_some(got)
        })
        .await;
        assert_eq!(
            gone.expect("eu's deleted"),
            [("default".to_string(), "pay-api".to_string(), "OutOfSync".to_string())],
            "{engine}: eu's absence deletes only eu's"
        );

        // The default instance's OutOfSync rule fires after its hour-long `for` (1m here): confirmed by its own
        // API, which has it; eu's API answers 404 for everything and is never asked about it.
        Mock::given(method("GET"))
            .and(path("/api/v1/applications/pay-api"))
            .and(query_param("appNamespace", "argocd"))
            .respond_with(ResponseTemplate::new(200).set_body_json(pay_api("OutOfSync", "Healthy")))
            .mount(&a)
            .await;
        Mock::given(method("GET"))
            .and(path("/api/v1/applications/pay-api"))
            .respond_with(ResponseTemplate::new(404))
            .mount(&eu)
            .await;
        let gets = |requests: Vec<wiremock::Request>| {
            (requests.iter())
                .filter(|r| r.url.path() == "/api/v1/applications/pay-api")
                .count()
        };
        let eu_gets = gets(eu.received_requests().await.unwrap_or_default());
        app.advance(&clock, Duration::from_secs(61)).await;
        let got = wait_for(&app.dir.path().join("sink.jsonl"), 1).await;
        assert_eq!(got[0]["action"], "open", "{engine}: {got:?}");
        assert_eq!(got[0]["incidents"][0]["kind"], "out_of_sync");
        assert!(
            got[0]["incidents"][0].get("instance").is_none(),
            "{engine}: the default instance goes unsaid"
        );
        assert_eq!(
            gets(eu.received_requests().await.unwrap_or_default()),
            eu_gets,
            "{engine}: eu's API was never asked about the default instance's pay-api"
        );
        app.stop().await;
    }
}

/// The measured bug: with `argocd.api` for instance A, an OutOfSync body from instance B was accepted, A's API
/// answered 404 for it, and Herald deleted it and resolved its incident silently. Now B's Application is B's: A's
/// 404 means nothing about it, and its OutOfSync alerts after the `for`.
#[tokio::test]
async fn another_instances_body_is_never_deleted_by_the_first_ones_404() {
    for engine in ENGINES {
        let a = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/api/v1/applications"))
            .respond_with(listing(&[]))
            .mount(&a)
            .await;
        Mock::given(method("GET"))
            .and(path("/api/v1/applications/pay-api"))
            .respond_with(ResponseTemplate::new(404))
            .mount(&a)
            .await;
        let (app, clock) = spawn(engine, Some(&a.uri()), None, "").await;
        let at = clock.now().to_rfc3339();
        let r = app
            .post(body_from(
                Some("https://argocd-eu.example.com/"),
                "OutOfSync",
                "Healthy",
                &at,
            ))
            .await;
        assert_eq!(r.status(), 202, "{engine}");
        let summary: Value = r.json().await.expect("json");
        assert_eq!(summary["application"], "eu/argocd/pay-api", "{engine}: {summary}");

        app.advance(&clock, Duration::from_secs(61)).await;
        let team = wait_for(&app.dir.path().join("sink.jsonl"), 1).await;
        assert_eq!(team.len(), 1, "{engine}: {team:?}");
        assert_eq!(team[0]["action"], "open");
        let incident = &team[0]["incidents"][0];
        assert_eq!(incident["kind"], "out_of_sync");
        assert_eq!(incident["instance"], "eu", "{engine}: the message names the instance");
        assert_eq!(
            incident["app_url"], "https://argocd-eu.example.com/applications/argocd/pay-api",
            "{engine}: the link is eu's own Argo CD"
        );
        // The route for `instance: eu` (continue: true) sent it to eu's channel too.
        let eu_sink = wait_for(&app.dir.path().join("eu-sink.jsonl"), 1).await;
        assert_eq!(eu_sink[0]["action"], "open", "{engine}");
        let still = app.get_json("/v1/apps/eu/argocd/pay-api").await;
        assert_eq!(
            still["lifecycle"], "active",
            "{engine}: not deleted by another instance's 404: {still}"
        );
        assert!(still["deleted_at"].is_null());
        app.stop().await;
    }
}

#[tokio::test]
async fn a_body_is_an_instances_by_its_token_else_its_url_and_one_that_names_none_is_refused() {
    let tokens = r#"
server:
  auth:
    ingest_tokens:
      - {name: argocd-a, token: argocd-a-token-0123456789, instance: default}
      - {name: argocd-eu, token: argocd-eu-token-0123456789}
    read_tokens: [reader-token-0123456789]
"#;
    let (app, clock) = spawn("sqlite", None, None, tokens).await;
    let at = clock.now().to_rfc3339();
    let post = |body: String, token: &'static str| {
        app.client
            .post(format!("{}/v1/argocd/events", app.address))
            .bearer_auth(token)
            .body(body)
            .send()
    };
    // The token names the instance: a URL that is no configured instance's changes nothing (another
    // instance's URL is refused: `a_token_bound_to_one_instance_refuses_a_body_naming_another`).
    let r = post(
        body_from(Some("https://argocd.internal.example.com"), "Synced", "Healthy", &at),
        "argocd-a-token-0123456789",
    )
    .await
    .expect("req");
    assert_eq!(r.status(), 202);
    assert_eq!(r.json::<Value>().await.expect("json")["application"], "argocd/pay-api");
    // A token that names none: the URL decides, trailing slash and case aside.
    let r = post(
        body_from(Some("HTTPS://Argocd-EU.example.com/"), "Synced", "Degraded", &at),
        "argocd-eu-token-0123456789",
    )
    .await
    .expect("req");
    assert_eq!(r.status(), 202);
    assert_eq!(
        r.json::<Value>().await.expect("json")["application"],
        "eu/argocd/pay-api"
    );
    // An unknown URL, or none, with two instances: refused, and the answer says how to configure it.
    for (url, says) in [
        (Some("https://argocd-us.example.com"), "argocd-us.example.com"),
        (None, "does not say which it comes from"),
    ] {
        let r = post(body_from(url, "Synced", "Healthy", &at), "argocd-eu-token-0123456789")
            .await
            .expect("req");
        assert_eq!(r.status(), 422, "{url:?}");
        let text = r.text().await.expect("text");
        assert!(text.contains(says), "{text}");
        assert!(
            text.contains("instance: <name>") && text.contains("argocd.instances"),
            "{text}"
        );
        assert!(!text.contains("argocd-eu-token"), "no secret in the answer: {text}");
    }
    let reader = |p: &'static str| {
        app.client
            .get(format!("{}{p}", app.address))
            .bearer_auth("reader-token-0123456789")
            .send()
    };
    let list: Value = reader("/v1/apps").await.expect("req").json().await.expect("json");
    assert_eq!(list["count"], 2, "{list}");
    let r = reader("/v1/apps/us/argocd/pay-api").await.expect("req");
    assert_eq!(r.status(), 404);
    let text = r.text().await.expect("text");
    assert!(
        text.contains("no Argo CD instance named") && text.contains("default, eu"),
        "{text}"
    );
    // The default instance's raw bodies keep their path, and need admin.
    let r = reader("/v1/apps/argocd/pay-api/raw").await.expect("req");
    assert_eq!(r.status(), 403);
    let r = reader("/v1/apps/eu/argocd/pay-api/raw").await.expect("req");
    assert_eq!(r.status(), 403);
    app.stop().await;
}

/// The value of one series of `/metrics` (0 when absent).
fn sample(metrics: &str, name: &str, label: &str) -> f64 {
    (metrics.lines())
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit_once(' ')?.1.trim().parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn a_token_bound_to_one_instance_refuses_a_body_naming_another() {
    let tokens = r#"
server:
  auth:
    ingest_tokens:
      - {name: argocd-a, token: argocd-a-token-0123456789, instance: default}
      - {name: argocd-eu, token: argocd-eu-token-0123456789, instance: eu}
      - {name: argocd-any, token: argocd-any-token-0123456789}
    read_tokens: [reader-token-0123456789]
"#;
    for engine in ENGINES {
        let (app, clock) = spawn(engine, None, None, tokens).await;
        let at = clock.now().to_rfc3339();
        let refused = "herald_requests_refused_total";
        let before = sample(&app.metrics().await, refused, "reason=\"instance_mismatch\"");
        // EU's token with the default instance's URL (case and trailing slash aside): neither is guessed right.
        let r = app
            .post_as(
                "argocd-eu-token-0123456789",
                body_from(Some("HTTPS://argocd-A.example.com/"), "OutOfSync", "Healthy", &at),
            )
            .await;
        assert_eq!(r.status(), 422, "{engine}");
        let answer: Value = r.json().await.expect("json");
        let text = answer["error"].as_str().unwrap_or_default();
        for says in [
            "instance \"eu\"",
            "instance \"default\"'s",
            "argocd-a.example.com",
            "its own token",
            "context sends",
        ] {
            assert!(text.contains(says), "{engine}: {says:?} in {text}");
        }
        assert!(!text.contains("argocd-eu-token"), "no secret in the answer: {text}");
        // And the other way round: the default instance's token with EU's URL.
        let r = app
            .post_as(
                "argocd-a-token-0123456789",
                body_from(Some("https://argocd-eu.example.com"), "OutOfSync", "Healthy", &at),
            )
            .await;
        assert_eq!(r.status(), 422, "{engine}");
        // Counted, apart from the other refusals.
        let after = sample(&app.metrics().await, refused, "reason=\"instance_mismatch\"");
        assert_eq!(after - before, 2.0, "{engine}: {}", app.metrics().await);
        // Nothing was stored for either: no phantom Application in either instance.
        let reader = app
            .client
            .get(format!("{}/v1/apps", app.address))
            .bearer_auth("reader-token-0123456789");
        let list: Value = reader.send().await.expect("req").json().await.expect("json");
        assert_eq!(list["count"], 0, "{engine}: {list}");

        // Its own URL, a URL no instance has, none, a hostile or a huge one, or one of the wrong type (not a
        // link: dropped when read): the token's instance, as before.
        let huge = "https://argocd-eu.example.com/".to_string() + &"a".repeat(100_000);
        for url in [
            json!("https://argocd-eu.example.com/"),
            json!("https://argocd-elsewhere.example.com"),
            json!("https://argocd-a.example.com\n/x"),
            json!("javascript:alert(1)"),
            json!(huge),
            json!(null),
            json!(42),
            json!({"url": "https://argocd-a.example.com"}),
        ] {
            let mut body: Value = serde_json::from_str(&body_from(None, "Synced", "Healthy", &at)).expect("json");
            body["context"]["argocdUrl"] = url.clone();
            let r = app.post_as("argocd-eu-token-0123456789", body.to_string()).await;
            let status = r.status();
            let answer = r.text().await.expect("text");
            assert_eq!(status, 202, "{engine}: {url}: {answer}");
            assert!(answer.contains("\"eu/argocd/pay-api\""), "{engine}: {url}: {answer}");
        }
        // A token bound to no instance: the URL decides, as it did.
        let r = app
            .post_as(
                "argocd-any-token-0123456789",
                body_from(Some("https://argocd-a.example.com"), "Synced", "Healthy", &at),
            )
            .await;
        assert_eq!(r.status(), 202, "{engine}");
        let after_all = sample(&app.metrics().await, refused, "reason=\"instance_mismatch\"");
        assert_eq!(after_all - before, 2.0, "{engine}: only the two mismatches are counted");
        app.stop().await;
    }
}

#[tokio::test]
async fn the_raw_answer_names_its_instance_and_herald_replay_gives_its_bodies_to_it() {
    let tokens = r#"
server:
  auth:
    ingest_tokens:
      - {name: argocd-eu, token: argocd-eu-token-0123456789, instance: eu}
    bearer_tokens: [admin-token-0123456789]
"#;
    for engine in ENGINES {
        let (app, clock) = spawn(engine, None, None, tokens).await;
        // EU's bodies say nothing of their instance: only the token does.
        let first = body_from(None, "OutOfSync", "Healthy", &clock.now().to_rfc3339());
        assert_eq!(app.post_as("argocd-eu-token-0123456789", first).await.status(), 202);
        app.advance(&clock, Duration::from_secs(5)).await;
        let second = body_from(None, "Synced", "Healthy", &clock.now().to_rfc3339());
        assert_eq!(app.post_as("argocd-eu-token-0123456789", second).await.status(), 202);
        let r = app
            .client
            .get(format!("{}/v1/apps/eu/argocd/pay-api/raw", app.address))
            .bearer_auth("admin-token-0123456789")
            .send()
            .await
            .expect("req");
        assert_eq!(r.status(), 200, "{engine}");
        let raw: Value = r.json().await.expect("json");
        assert_eq!(
            (&raw["instance"], &raw["namespace"], &raw["name"], &raw["count"]),
            (&json!("eu"), &json!("argocd"), &json!("pay-api"), &json!(2)),
            "{engine}: {raw}"
        );
        // As the README says: the answer, saved, is what `herald replay` reads.
        let dir = tempfile::tempdir().expect("tmp");
        let answer = dir.path().join("raw.json");
        std::fs::write(&answer, raw.to_string()).expect("write");
        let cfg = dir.path().join("herald.yaml");
        std::fs::write(&cfg, config(dir.path(), "sqlite://unused.db", None, None, "")).expect("write");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(["replay", "--config"])
            .arg(&cfg)
            .args(["--clock", "recorded"])
            .arg(&answer)
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .output()
            .expect("herald replay");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{engine}: {text}");
        let oos = text.find("[items.1]  eu/argocd/pay-api: changed (sync OutOfSync");
        let synced = text.find("[items.0]  eu/argocd/pay-api: changed (sync Synced");
        assert!(
            oos.zip(synced).is_some_and(|(a, b)| a < b),
            "{engine}: both bodies, oldest first, EU's: {text}"
        );
        app.stop().await;
    }
}

#[tokio::test]
async fn a_silence_on_one_instance_holds_only_its_incidents() {
    for engine in ENGINES {
        let (app, clock) = spawn(engine, None, None, "").await;
        let r = app
            .client
            .post(format!("{}/v1/silences", app.address))
            .json(
                &json!({"matchers": [{"name": "instance", "value": "eu"}], "duration": "2h",
                          "comment": "eu maintenance", "created_by": "alice"}),
            )
            .send()
            .await
            .expect("req");
        assert_eq!(r.status(), 201, "{engine}: {}", r.text().await.unwrap_or_default());
        let at = clock.now().to_rfc3339();
        for url in ["https://argocd-a.example.com", "https://argocd-eu.example.com"] {
            let r = app.post(body_from(Some(url), "Synced", "Degraded", &at)).await;
            assert_eq!(r.status(), 202, "{engine}");
        }
        app.advance(&clock, Duration::from_secs(2)).await;
        wait_for(&app.dir.path().join("sink.jsonl"), 1).await;
        app.settle().await;
        let got = delivered(&app.dir.path().join("sink.jsonl"));
        let told: Vec<String> = (got.iter())
            .map(|l| l["incidents"][0]["instance"].as_str().unwrap_or("default").to_string())
            .collect();
        assert_eq!(
            told,
            ["default"],
            "{engine}: only the default instance's Degraded is told"
        );
        let incidents = app.get_json("/v1/incidents?state=firing&instance=eu").await;
        assert_eq!(incidents["count"], 1, "{engine}: {incidents}");
        assert_eq!(incidents["items"][0]["held"]["by"], "silenced", "{engine}: {incidents}");

        // The status page names each instance's Application apart, and shows one instance on request.
        let page = |q: &'static str| {
            let client = app.client.clone();
            let url = format!("{}/{q}", app.address);
            async move { client.get(url).send().await.expect("page").text().await.expect("text") }
        };
        let all = page("").await;
        assert!(
            all.contains("id=\"instances\""),
            "{engine}: an instance filter with two instances"
        );
        assert!(
            all.contains(">eu/argocd/pay-api<") && all.contains(">argocd/pay-api<"),
            "{engine}: {all}"
        );
        let eu = page("?instance=eu").await;
        assert!(
            eu.contains(">eu/argocd/pay-api<") && !eu.contains(">argocd/pay-api<"),
            "{engine}: {eu}"
        );
        let r = app
            .client
            .get(format!("{}/?instance=us", app.address))
            .send()
            .await
            .expect("page");
        assert_eq!(r.status(), 400);
        app.stop().await;
    }
}
