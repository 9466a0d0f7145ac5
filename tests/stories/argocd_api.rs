//! Stories with the recommended setup, `argocd.api` with `watch: true`, against a fake Argo CD API that answers as
//! Argo CD's own server does (`tests/common/fake_argocd.rs`): its listing holds only the paths of Argo CD's field
//! table and only what the token may `get`, and a GET answers 403 or 404 as `getAppEnforceRBAC` does. Herald's
//! listings are run where the resync would run them (every 10 minutes here); the stream is not followed (it sends
//! whole Applications, which the listing's partial items must agree with). Teams are owned by project.

use std::time::Duration;

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

on_both_engines!(
    out_of_sync_inside_a_deny_window,
    out_of_sync_only_in_the_api_fires_after_an_hour,
    an_application_deleted_in_argo_cd,
    a_token_losing_all_access_then_getting_it_back,
    an_application_moved_between_projects,
);
