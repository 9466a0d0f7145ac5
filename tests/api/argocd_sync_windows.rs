//! Argo CD's sync windows through the fake Argo CD API (its AppProjects carry `spec.syncWindows` as Argo CD serves
//! them): an OutOfSync Application inside a deny window of its project is held — the API and the status page say
//! until when — and fires its hour after the window ends; one in a project without windows fires as usual.

use std::sync::Arc;
use std::time::Duration;

use crate::fake_argocd::{FakeArgoCd, application};
use crate::helpers::*;
use herald::clock::ManualClock;
use serde_json::json;

const TOKEN: &str = "argocd-read-token";

#[tokio::test]
async fn an_out_of_sync_application_inside_a_deny_window_is_held_until_an_hour_after_it_ends() {
    let argo = FakeArgoCd::start(TOKEN).await;
    let deny = json!([{"kind": "deny", "schedule": "30 8 * * *", "duration": "3h30m", "namespaces": ["drift*"]}]);
    argo.project_with_windows("payments", json!({}), deny);
    argo.put(application("drift", "payments", "OutOfSync", "Healthy"));
    argo.put(application("other", "shop", "OutOfSync", "Healthy"));
    let start = chrono::DateTime::parse_from_rfc3339("2026-03-02T09:00:00Z")
        .expect("t")
        .with_timezone(&chrono::Utc);
    let clock = ManualClock::new(start);
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let sink = dir.path().join("sink.jsonl");
    let config = format!(
        r#"
argocd: {{api: {{url: "{url}", token: {TOKEN}, timeout: 2s, resync_interval: 10m}}}}
receivers: [{{name: sink, console: {{file: "{sink}"}}}}]
ownership: {{default_team: platform}}
teams: {{platform: {{receivers: [sink]}}}}
grouping: {{group_wait: 0s, group_interval: 1s, repeat_interval: 24h}}
"#,
        url = argo.uri(),
        sink = sink.display(),
    );
    let app = TestApp::spawn_in(dir.clone(), &config, Arc::new(clock.clone())).await;
    let pending = || async { app.get_json("/v1/incidents?state=pending").await["items"].clone() };
    let listed = eventually(Duration::from_secs(20), || async {
        (pending().await.as_array().map_or(0, Vec::len) == 2).then_some(())
    })
    .await;
    assert!(
        listed.is_some(),
        "both pending after the first listing: {}",
        pending().await
    );
    let items = pending().await;
    let drift = (items.as_array().expect("items").iter())
        .find(|i| i["app_name"] == "drift")
        .expect("drift");
    assert_eq!(
        drift["held"],
        json!({"by": "sync_window", "until": "2026-03-02T12:00:00Z", "manual_sync": false})
    );
    assert_eq!(drift["sync_window"]["until"], "2026-03-02T12:00:00Z");
    let other = (items.as_array().expect("items").iter())
        .find(|i| i["app_name"] == "other")
        .expect("other");
    assert!(
        other.get("held").is_none() && other.get("sync_window").is_none(),
        "{other}"
    );

    let page = app
        .client
        .get(format!("{}/?tz=UTC", app.address))
        .send()
        .await
        .expect("get");
    let html = page.text().await.expect("html");
    assert!(html.contains("In a sync window (1)"), "{html}");
    assert!(html.contains("OutOfSync expected, sync window until 12:00"), "{html}");

    // 10:01: the Application without a window is told; drift is not.
    app.advance(&clock, Duration::from_secs(61 * 60)).await;
    let got = wait_for(&sink, 1).await;
    assert_eq!(got[0]["incidents"][0]["app_name"], "other");
    // 12:59: still nothing about drift; 13:01: its hour after the window has passed.
    app.advance(&clock, Duration::from_secs(178 * 60)).await;
    assert_eq!(delivered(&sink).len(), 1, "{:?}", delivered(&sink));
    app.advance(&clock, Duration::from_secs(2 * 60)).await;
    let got = wait_for(&sink, 2).await;
    // The team's group, told again: drift now fires in it.
    let firing = (got[1]["incidents"].as_array().expect("incidents").iter())
        .any(|i| i["app_name"] == "drift" && i["state"] == "firing");
    assert!(firing, "{}", got[1]);
}
