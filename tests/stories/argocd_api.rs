//! Stories with the recommended setup, `argocd.api` with `watch: true`, against a fake Argo CD API that answers as
//! Argo CD's own server does (`tests/common/fake_argocd.rs`): its listing holds only the paths of Argo CD's field
//! table and only what the token may `get`, and a GET answers 403 or 404 as `getAppEnforceRBAC` does. Herald's
//! listings are run where the resync would run them (every 10 minutes here); the stream is not followed (it sends
//! whole Applications, which the listing's partial items must agree with). Teams are owned by project.

use std::time::Duration;

use crate::argocd_bodies::envelope_around;
use crate::fake_argocd::{FakeArgoCd, Rbac, application};
use crate::harness::{CONFIG, Story};

const MIN: Duration = Duration::from_secs(60);
const TOKEN: &str = "story-token";

/// The stories' configuration with the fake's API (and `api` added to its block), teams owned by project.
fn config(argo: &FakeArgoCd, api: &str) -> String {
    let config = CONFIG.replace(
        "ownership: {default_team: platform}",
        "ownership: {default_team: platform, projects: {payments: payments, shop: shop}}",
    );
    format!(
        "argocd: {{api: {{url: \"{}\", token: {TOKEN}, watch: true, resync_interval: 10m, timeout: 2s{api}}}}}\n{config}",
        argo.uri()
    )
}

/// Ten minutes pass `times` times, with a listing after each.
async fn listings(s: &mut Story, times: usize, what: &str) {
    for _ in 0..times {
        s.pass(10 * MIN).await;
        s.list(what).await;
    }
}

/// Story: Argo CD says pay-api is OutOfSync only through its API (no trigger sent a body). Every listing lacks its
/// uid, conditions and history, and agrees: after the hour, payments is told once, and nothing resolves or
/// re-opens it.
async fn out_of_sync_only_in_the_api_fires_after_an_hour(engine: &str) {
    let argo = FakeArgoCd::start(TOKEN).await;
    argo.put(application("pay-api", "payments", "Synced", "Healthy"));
    let mut s = Story::begin("argocd-api-out-of-sync-an-hour", engine, &config(&argo, "")).await;
    s.list("pay-api Synced").await;
    argo.put(application("pay-api", "payments", "OutOfSync", "Healthy"));
    s.list("pay-api OutOfSync").await;
    listings(&mut s, 7, "pay-api still OutOfSync").await;
    s.look().await;
    let t = s.end();
    assert_eq!(
        t.iter().filter(|l| l.contains("-> payments-slack open")).count(),
        1,
        "{t:#?}"
    );
    assert!(!t.iter().any(|l| l.contains("resolve")), "{t:#?}");
}

/// Story: pay-api is Degraded with an open Jira ticket, and is deleted in Argo CD (no deletion body reaches
/// Herald). The next listing lacks it; a GET in its project answers 404: it is deleted, and what was open resolves
/// once, "Application deleted".
async fn an_application_deleted_in_argo_cd(engine: &str) {
    let argo = FakeArgoCd::start(TOKEN).await;
    argo.put(application("pay-api", "payments", "Synced", "Degraded"));
    argo.put(application("cart", "shop", "Synced", "Healthy"));
    let mut s = Story::begin("argocd-api-deleted-application", engine, &config(&argo, "")).await;
    s.list("pay-api Degraded, cart").await;
    listings(&mut s, 1, "no change").await;
    argo.delete("argocd", "pay-api");
    s.say("pay-api is deleted in Argo CD");
    listings(&mut s, 2, "pay-api gone").await;
    let t = s.end();
    assert!(t.iter().any(|l| l.contains("-> payments-jira resolve")), "{t:#?}");
}

/// Story: the token loses all its access (the role is removed: listings answer `items: []`, GETs 403), then gets
/// payments back, then everything. Nothing is deleted or resolved however many listings agree; the platform team
/// (the default team) is told once per project when it starts and when it ends; pay-worker's pending OutOfSync
/// neither fires nor resets while payments is hidden, and fires once Argo CD confirms it; access back restores the
/// same Applications and incidents.
async fn a_token_losing_all_access_then_getting_it_back(engine: &str) {
    let argo = FakeArgoCd::start(TOKEN).await;
    argo.put(application("pay-api", "payments", "Synced", "Degraded"));
    argo.put(application("pay-worker", "payments", "OutOfSync", "Healthy"));
    argo.put(application("cart", "shop", "Synced", "Healthy"));
    argo.put(application("cart-worker", "shop", "Synced", "Healthy"));
    let mut s = Story::begin("argocd-api-token-loses-access", engine, &config(&argo, "")).await;
    s.list("four Applications").await;
    listings(&mut s, 2, "no change").await;
    argo.rbac(TOKEN, Rbac::none());
    s.say("the herald role is removed from argocd-rbac-cm");
    listings(&mut s, 4, "items: []").await;
    s.look().await;
    s.look_at_argocd();
    argo.rbac(TOKEN, Rbac::projects(&["payments"]));
    s.say("the role may get payments/* again");
    listings(&mut s, 2, "payments only").await;
    s.look().await;
    s.look_at_argocd();
    argo.rbac(TOKEN, Rbac::all());
    s.say("the role may get */* again");
    listings(&mut s, 1, "everything").await;
    s.look().await;
    s.look_at_argocd();
    let t = s.end();
    assert!(!t.iter().any(|l| l.contains("Application deleted")), "{t:#?}");
    assert_eq!(
        t.iter()
            .filter(|l| l.contains("-> payments-slack open: pay-api"))
            .count(),
        1,
        "the same incident throughout: {t:#?}"
    );
}

/// Story: cart moves from shop to payments (both listed), then to archive, a project outside
/// `argocd.api.projects`: the listing lacks it, a GET in payments answers 404 and one without 200 — moved, not
/// deleted. Its open incident is not told as "Application deleted".
async fn an_application_moved_between_projects(engine: &str) {
    let argo = FakeArgoCd::start(TOKEN).await;
    argo.put(application("cart", "shop", "Synced", "Degraded"));
    let mut s = Story::begin(
        "argocd-api-application-moved",
        engine,
        &config(&argo, ", projects: [payments, shop]"),
    )
    .await;
    s.list("cart Degraded in shop").await;
    listings(&mut s, 1, "no change").await;
    argo.move_to("argocd", "cart", "payments");
    s.say("cart moves to project payments");
    listings(&mut s, 1, "cart in payments").await;
    argo.move_to("argocd", "cart", "archive");
    s.say("cart moves to project archive, outside argocd.api.projects");
    listings(&mut s, 2, "cart not listed").await;
    s.look().await;
    let t = s.end();
    assert!(!t.iter().any(|l| l.contains("Application deleted")), "{t:#?}");
}

/// Story: payments' AppProject denies syncs of `pay-*` from 09:30 to 12:00 UTC. At 10:00 pay-api and pay-worker
/// go OutOfSync (a commit Argo CD may not sync yet): expected, so they are held ("sync window until 12:00"), and
/// nobody is told at 11:00. Herald restarts at 11:00, before it reads the AppProjects again: the hold is the
/// store's. pay-worker's commit is reverted at 11:10: Synced, resolved without a word. pay-api is still OutOfSync
/// after the window: its hour starts at 12:00, and payments is told at 13:00, once.
async fn out_of_sync_inside_a_deny_window(engine: &str) {
    let argo = FakeArgoCd::start(TOKEN).await;
    let deny = serde_json::json!([{"kind": "deny", "schedule": "30 9 * * *", "duration": "2h30m",
                                   "applications": ["pay-*"], "timeZone": "UTC"}]);
    argo.project_with_windows("payments", serde_json::json!({}), deny);
    argo.put(application("pay-api", "payments", "Synced", "Healthy"));
    argo.put(application("pay-worker", "payments", "Synced", "Healthy"));
    let mut s = Story::begin("out-of-sync-inside-a-deny-window", engine, &config(&argo, "")).await;
    s.list("pay-api and pay-worker Synced").await;
    listings(&mut s, 6, "no change; the deny window opened at 09:30").await;
    argo.put(application("pay-api", "payments", "OutOfSync", "Healthy"));
    argo.put(application("pay-worker", "payments", "OutOfSync", "Healthy"));
    s.list("pay-api and pay-worker OutOfSync").await;
    s.look().await;
    listings(&mut s, 6, "both still OutOfSync").await;
    s.restart().await;
    s.look().await;
    argo.put(application("pay-worker", "payments", "Synced", "Healthy"));
    listings(&mut s, 1, "pay-worker's commit reverted: Synced").await;
    listings(&mut s, 12, "pay-api still OutOfSync").await;
    s.look().await;
    let t = s.end();
    let told: Vec<&String> = t.iter().filter(|l| l.contains("  -> ")).collect();
    assert!(!told.is_empty(), "pay-api is told after the window: {t:#?}");
    assert!(
        told.iter().all(|l| l.starts_with("Mon 13:00")),
        "nothing before 13:00: {told:#?}"
    );
    assert!(
        !told.iter().any(|l| l.contains("pay-worker")),
        "pay-worker resolves quietly: {told:#?}"
    );
    assert_eq!(
        told.iter().filter(|l| l.contains("-> payments-slack open")).count(),
        1,
        "{t:#?}"
    );
    assert!(
        t.iter().any(|l| l.contains("(sync window until 2026-01-05 12:00 UTC)")),
        "{t:#?}"
    );
}

/// The cluster of the storm story, and what Argo CD says of it when it cannot reach it (`ComparisonError`).
const CLUSTER: &str = "https://10.20.30.40:6443";
const REFUSED: &str = "Failed to load live state: failed to get cluster info for \"https://10.20.30.40:6443\": error \
    synchronizing cache state : failed to sync cluster https://10.20.30.40:6443: failed to load initial state of \
    resource Deployment.apps: Get \"https://10.20.30.40:6443/apis/apps/v1/deployments?limit=500\": dial tcp \
    10.20.30.40:6443: connect: connection refused";
const TEAMS: [&str; 8] = [
    "payments", "shop", "search", "identity", "billing", "catalog", "checkout", "media",
];

/// Eight teams of five Applications each (project = team), every one deployed to [`CLUSTER`]; each team has its
/// chat, the platform team (the default team) its own.
fn storm_config(argo: &FakeArgoCd) -> String {
    let projects: Vec<String> = TEAMS.iter().map(|t| format!("{t}: {t}")).collect();
    let teams: Vec<String> = TEAMS
        .iter()
        .map(|t| format!("  {t}: {{receivers: [{t}-slack]}}"))
        .collect();
    let receivers: Vec<String> = (TEAMS.iter().chain(&["platform"]))
        .map(|t| format!("  - {{name: {t}-slack, slack: {{webhook_url: \"http://127.0.0.1:9/{t}\"}}}}"))
        .collect();
    format!(
        "argocd: {{api: {{url: \"{}\", token: {TOKEN}, watch: true, resync_interval: 10m, timeout: 2s}}}}\n\
         ownership: {{default_team: platform, projects: {{{}}}}}\n\
         teams:\n{}\n  platform: {{receivers: [platform-slack]}}\n\
         receivers:\n{}\n\
         grouping: {{group_wait: 30s, group_interval: 5m, repeat_interval: 4h}}\n",
        argo.uri(),
        projects.join(", "),
        teams.join("\n"),
        receivers.join("\n"),
    )
}

/// The storm story's Applications, `<team>-<k>`, in the order they break.
fn storm_apps() -> Vec<(String, &'static str)> {
    (1..=5)
        .flat_map(|k| TEAMS.iter().map(move |t| (format!("{t}-{k}"), *t)))
        .collect()
}

/// Argo CD's Application `name` of `team`, on [`CLUSTER`]: Synced and Healthy, or Unknown with the ComparisonError
/// it has when the cluster refuses its connections.
fn on_cluster(name: &str, team: &str, reachable: bool) -> serde_json::Value {
    let mut app = application(name, team, "Synced", "Healthy");
    app["spec"]["destination"]["server"] = serde_json::json!(CLUSTER);
    if !reachable {
        app["status"]["sync"]["status"] = serde_json::json!("Unknown");
        app["status"]["conditions"] = serde_json::json!([
            {"type": "ComparisonError", "message": REFUSED, "lastTransitionTime": "2026-01-05T09:01:00Z"}
        ]);
    }
    app
}

/// Argo CD changes `name` and its notification (a trigger on the sync status) sends it to Herald.
async fn changes(s: &mut Story, argo: &FakeArgoCd, name: &str, team: &str, reachable: bool) {
    let app = on_cluster(name, team, reachable);
    argo.put(app.clone());
    let body = envelope_around(app, "");
    let what = if reachable {
        "Synced"
    } else {
        "Unknown (connection refused)"
    };
    s.body(&format!("{name} {what}"), body).await;
}

/// Story: the cluster https://10.20.30.40:6443 refuses connections; its 40 Applications (8 teams) go Unknown with a
/// ComparisonError within a minute. The platform team (the default team) is told once, about the cluster; no owning
/// team hears anything while it lasts, and every Application is still listed, held by the storm. The cluster comes
/// back: 35 Applications recover, the storm resolves; the 5 still Unknown after storm.window are told to their teams
/// as usual, and their recovery later too.
async fn forty_applications_of_one_cluster_are_one_storm(engine: &str) {
    let argo = FakeArgoCd::start(TOKEN).await;
    let apps = storm_apps();
    for (name, team) in &apps {
        argo.put(on_cluster(name, team, true));
    }
    let mut s = Story::begin("storm-forty-applications-one-cluster", engine, &storm_config(&argo)).await;
    s.list("40 Applications on https://10.20.30.40:6443, Synced").await;
    s.pass(MIN).await;
    s.say("the cluster refuses connections");
    for (name, team) in &apps {
        changes(&mut s, &argo, name, team, false).await;
        s.pass_by(Duration::from_millis(1500), Duration::from_millis(1500))
            .await;
    }
    listings(&mut s, 1, "40 Unknown").await;
    s.pass(5 * MIN).await;
    s.look().await;
    s.pass(13 * MIN).await;
    s.say("the cluster answers again; Argo CD compares 35 Applications again");
    let (stragglers, recovering) = apps.split_at(5);
    for (name, team) in recovering {
        changes(&mut s, &argo, name, team, true).await;
    }
    s.pass(5 * MIN).await;
    s.look().await;
    listings(&mut s, 2, "35 Synced, 5 Unknown").await;
    s.say("the last 5 recover");
    for (name, team) in stragglers {
        changes(&mut s, &argo, name, team, true).await;
    }
    s.pass(MIN).await;
    let t = s.end();
    let told = |to: &str| t.iter().filter(|l| l.contains(&format!("-> {to}"))).count();
    assert_eq!(told("platform-slack open"), 1, "{t:#?}");
    assert_eq!(told("platform-slack resolve"), 1, "{t:#?}");
    for team in TEAMS.iter().take(5) {
        assert_eq!(told(&format!("{team}-slack open")), 1, "{team}: {t:#?}");
        assert_eq!(told(&format!("{team}-slack resolve")), 1, "{team}: {t:#?}");
    }
    for team in TEAMS.iter().skip(5) {
        assert_eq!(told(&format!("{team}-slack")), 0, "{team}: {t:#?}");
    }
}

on_both_engines!(
    out_of_sync_inside_a_deny_window,
    out_of_sync_only_in_the_api_fires_after_an_hour,
    an_application_deleted_in_argo_cd,
    a_token_losing_all_access_then_getting_it_back,
    an_application_moved_between_projects,
    forty_applications_of_one_cluster_are_one_storm,
);
