//! What an operator scrapes and probes: `/metrics` in Prometheus' conventions, `HEAD /healthz`, and filters that
//! refuse a misspelt value instead of answering nothing.

use crate::helpers::*;

#[tokio::test]
async fn every_metric_family_has_help_and_type_and_durations_are_histograms_in_seconds() {
    let app = TestApp::spawn("").await;
    app.post(fixture("captured/021_remove_podinfo_1_1.json")).await;
    let r = app
        .client
        .get(format!("{}/v1/apps", app.address))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200);
    let text = app.metrics().await;
    let families: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap_or(l))
        .map(|name| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|base| text.contains(&format!("# TYPE {base} histogram")))
                })
                .unwrap_or(name)
        })
        .collect();
    assert!(families.len() >= 4, "{text}");
    for f in &families {
        assert!(f.starts_with("herald_"), "{f}");
        assert!(text.contains(&format!("# HELP {f} ")), "no HELP for {f}: {text}");
        assert!(text.contains(&format!("# TYPE {f} ")), "no TYPE for {f}: {text}");
    }
    assert!(
        text.contains("# TYPE herald_ingest_duration_seconds histogram"),
        "{text}"
    );
    assert!(!text.contains("herald_ingest_seconds"), "the old name is gone: {text}");
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        text.contains(&format!("herald_build_info{{version=\"{version}\"}} 1")),
        "{text}"
    );
    app.stop().await;
}

#[tokio::test]
async fn head_healthz_answers_like_get() {
    let app = TestApp::spawn("").await;
    let r = app
        .client
        .head(format!("{}/healthz", app.address))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200);
    assert!(r.text().await.expect("body").is_empty());
    app.stop().await;
}

#[tokio::test]
async fn an_unknown_status_filter_is_a_400_that_lists_the_valid_values() {
    let app = TestApp::spawn("").await;
    app.post(envelope("pay-api", "payments", "OutOfSync", "Healthy", &now_rfc3339()))
        .await;
    for (query, valid) in [
        ("sync=outofsync", "Synced, OutOfSync, Unknown"),
        (
            "health=ok",
            "Healthy, Progressing, Degraded, Suspended, Missing, Unknown",
        ),
    ] {
        let r = app
            .client
            .get(format!("{}/v1/apps?{query}", app.address))
            .send()
            .await
            .expect("req");
        assert_eq!(r.status(), 400, "{query}");
        let e: serde_json::Value = r.json().await.expect("json");
        assert!(e["error"].as_str().is_some_and(|m| m.contains(valid)), "{e}");
    }
    let v = app.get_json("/v1/apps?sync=OutOfSync&health=Healthy").await;
    assert_eq!(v["count"], 1, "{v}");
    app.stop().await;
}

#[tokio::test]
async fn a_label_set_that_is_gone_leaves_the_metrics_and_an_unknown_status_is_other() {
    let app = TestApp::spawn("").await;
    let metrics = || app.metrics();
    let pending = "herald_incidents_open{state=\"pending\",kind=\"out_of_sync\",team=\"payments\"} 1";
    let body = envelope("pay-api", "payments", "OutOfSync", "Healthy", &now_rfc3339());
    assert_eq!(app.post(body).await.status(), 202);
    assert!(metrics().await.contains(pending), "{}", metrics().await);
    let body = envelope("pay-api", "payments", "Synced", "Healthy", &now_rfc3339());
    assert_eq!(app.post(body).await.status(), 202);
    let text = metrics().await;
    assert!(!text.contains("kind=\"out_of_sync\""), "gone, not kept at 0: {text}");
    let odd = envelope("odd", "payments", "Syncing-ish", "Healthy", &now_rfc3339());
    assert_eq!(app.post(odd).await.status(), 202);
    let text = metrics().await;
    assert!(
        text.contains("herald_applications{sync=\"Other\",health=\"Healthy\"} 1"),
        "{text}"
    );
    assert!(!text.contains("Syncing-ish"));
    app.stop().await;
}

const INGEST: &str = "ingest-token-0123456789";
const READER: &str = "reader-token-0123456789";

async fn scrape(app: &TestApp, token: Option<&str>) -> (u16, String) {
    let mut r = app.client.get(format!("{}/metrics", app.address));
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    let r = r.send().await.expect("GET /metrics");
    (r.status().as_u16(), r.text().await.expect("text"))
}

/// `server.metrics.auth: true`: `/metrics` answers a `read` credential only; an `ingest` token (what Argo CD holds)
/// and no credential are refused. Open by default, whatever the credentials.
#[tokio::test]
async fn metrics_need_a_read_credential_when_server_metrics_auth_says_so() {
    let auth = format!("auth: {{ingest_tokens: [{INGEST}], read_tokens: [{READER}]}}");
    let open = TestApp::spawn(&format!("server: {{{auth}}}")).await;
    assert_eq!(scrape(&open, None).await.0, 200, "open by default");
    open.stop().await;
    let guarded = TestApp::spawn(&format!("server: {{{auth}, metrics: {{auth: true}}}}")).await;
    assert_eq!(scrape(&guarded, None).await.0, 401);
    assert_eq!(scrape(&guarded, Some(INGEST)).await.0, 403);
    let (status, text) = scrape(&guarded, Some(READER)).await;
    assert_eq!(status, 200);
    assert!(text.contains("herald_build_info"), "{text}");
    let probe = guarded
        .client
        .get(format!("{}/healthz", guarded.address))
        .send()
        .await
        .expect("probe");
    assert_eq!(probe.status(), 200, "the probes stay open");
    guarded.stop().await;
    let refused = herald::configuration::Settings::from_yaml(&format!(
        "server: {{auth: {{ingest_tokens: [{INGEST}]}}, metrics: {{auth: true}}}}"
    ));
    let e = refused.expect_err("no credential could scrape").to_string();
    assert!(e.contains("server.metrics.auth"), "{e}");
}

/// `server.metrics.team_labels: false`: open incidents are counted by state and kind, no team is named anywhere.
#[tokio::test]
async fn metrics_name_no_team_when_team_labels_are_off() {
    let app = TestApp::spawn("server: {metrics: {team_labels: false}}").await;
    for (name, team) in [("pay-api", "payments"), ("search", "secret-project-x")] {
        let body = envelope(name, team, "OutOfSync", "Healthy", &now_rfc3339());
        assert_eq!(app.post(body).await.status(), 202);
    }
    let text = app.metrics().await;
    assert!(
        text.contains("herald_incidents_open{state=\"pending\",kind=\"out_of_sync\"} 2"),
        "{text}"
    );
    assert!(!text.contains("team="), "{text}");
    assert!(
        !text.contains("secret-project-x") && !text.contains("payments"),
        "{text}"
    );
    app.stop().await;
}
