use chrono::{DateTime, Duration, Utc};

use super::*;
use crate::argocd::parse_body;
use crate::domain::{Action, DeliveryState, Kind};
use crate::routing::Matcher;
use crate::state::{Outcome, apply};

fn t(s: &str) -> DateTime<Utc> {
    s.parse().expect("a UTC time")
}

/// An Application of `team`, `sync` since `since`, with `prunes` resources requiring pruning.
fn app(team: &str, name: &str, sync: &str, since: DateTime<Utc>, prunes: usize) -> AppRecord {
    let resources: Vec<String> = (0..prunes)
        .map(|k| format!(r#"{{"kind":"ConfigMap","namespace":"shop","name":"old-{k}","status":"OutOfSync","requiresPruning":true}}"#))
        .collect();
    let body = format!(
        r#"{{"app":{{"metadata":{{"name":"{name}","namespace":"argocd"}},"status":{{"sync":{{"status":"{sync}","revision":"3de5b39dd5421234"}},"health":{{"status":"Healthy"}},"resources":[{}]}}}}}}"#,
        resources.join(",")
    );
    let snap = parse_body(body.as_bytes(), 64).expect("valid body");
    let Outcome::Changed { state, .. } = apply(None, snap, since) else {
        panic!("a first snapshot is a change")
    };
    AppRecord {
        team: team.into(),
        state: *state,
    }
}

fn incident(team: &str, app: &str, kind: Kind, fired: DateTime<Utc>) -> Incident {
    Incident {
        team: team.into(),
        kind,
        state: IncidentState::Firing,
        app_namespace: "argocd".into(),
        app_name: app.into(),
        summary: format!("{app}: {}", kind.as_str()),
        since: fired - Duration::hours(1),
        fired_at: Some(fired),
        ..Default::default()
    }
}

fn silence(id: &str, team: &str, ends_at: DateTime<Utc>) -> Silence {
    Silence {
        id: id.into(),
        matchers: vec![Matcher::new("team", team)],
        starts_at: t("2026-10-01T00:00:00Z"),
        ends_at,
        created_by: "ops".into(),
        comment: "migration".into(),
        created_at: t("2026-10-01T00:00:00Z"),
    }
}

fn dead(id: i64, receiver: &str) -> OutboxRecord {
    OutboxRecord {
        id,
        receiver: receiver.into(),
        order_key: "k".into(),
        thread_key: "k:1".into(),
        action: Action::Open,
        payload: r#"{"title":"payments is OutOfSync"}"#.into(),
        state: DeliveryState::Dead,
        attempts: 5,
        due_at: t("2026-10-22T10:00:00Z"),
        created_at: t("2026-10-22T10:00:00Z"),
        last_error: Some("permanent failure: 404".into()),
        delivered_at: None,
    }
}

fn frame<'a>(team: &'a str, receivers: &'a [String], now: DateTime<Utc>) -> Frame<'a> {
    Frame {
        team,
        timezone: "Europe/Berlin",
        receivers,
        argocd: Box::leak(Box::new(
            crate::configuration::Settings::from_yaml("argocd: {url: 'https://argocd.example.com'}")
                .expect("valid")
                .argocd,
        )),
        public_url: None,
        now,
        next: Some(now + Duration::days(1)),
        adopts_unknown_teams: None,
    }
}

#[test]
fn the_digest_lists_only_the_teams_own_problems_the_longest_first() {
    let now = t("2026-10-23T07:00:00Z");
    let inputs = Inputs {
        apps: vec![
            app("payments", "recent", "OutOfSync", t("2026-10-22T00:00:00Z"), 0),
            app("payments", "old", "OutOfSync", t("2026-09-01T00:00:00Z"), 2),
            app("payments", "fine", "Synced", t("2026-09-01T00:00:00Z"), 0),
            app("search", "theirs", "OutOfSync", t("2026-08-01T00:00:00Z"), 1),
        ],
        incidents: vec![
            incident("payments", "recent", Kind::Degraded, t("2026-10-23T05:00:00Z")),
            incident("search", "theirs", Kind::Degraded, t("2026-10-20T05:00:00Z")),
        ],
        silences: vec![
            silence("s-ours", "payments", t("2026-10-23T12:00:00Z")),
            silence("s-later", "payments", t("2026-11-30T00:00:00Z")),
            silence("s-theirs", "search", t("2026-10-23T12:00:00Z")),
        ],
        dead: vec![dead(7, "payments-slack"), dead(8, "search-slack")],
    };
    let receivers = vec!["payments-slack".to_string()];

    let d = content(&frame("payments", &receivers, now), &inputs);

    let names: Vec<&str> = d.out_of_sync.iter().map(|a| a.app.as_str()).collect();
    assert_eq!(names, ["argocd/old", "argocd/recent"], "longest OutOfSync first");
    assert_eq!(d.out_of_sync[0].pruning, 2);
    assert_eq!(d.out_of_sync[0].revision.as_deref(), Some("3de5b39dd5421234"));
    assert_eq!(
        d.out_of_sync[0].url.as_deref(),
        Some("https://argocd.example.com/applications/argocd/old")
    );
    assert_eq!(d.pending_prunes.len(), 2);
    assert!(d.pending_prunes.iter().all(|p| p.app == "argocd/old"));
    assert_eq!(d.pending_prunes[0].resource, "ConfigMap shop/old-0");
    assert_eq!(d.firing.len(), 1);
    assert_eq!(d.firing[0].app, "argocd/recent");
    assert_eq!(d.firing[0].since, t("2026-10-23T05:00:00Z"));
    let silences: Vec<(&str, bool)> = d.silences.iter().map(|s| (s.id.as_str(), s.ends_before_next)).collect();
    assert_eq!(silences, [("s-ours", true), ("s-later", false)]);
    assert_eq!(d.dead.len(), 1);
    assert_eq!(d.dead[0].title, "payments is OutOfSync");
    assert!(!d.is_empty());
    assert_eq!(
        d.title(),
        "Digest for payments: 2 OutOfSync, 2 prunes pending, 1 incident firing, 2 silences, 1 dead delivery"
    );
}

#[test]
fn the_default_teams_digest_lists_the_applications_of_teams_herald_has_no_settings_for() {
    // `search` is not under `teams:`: its incidents are routed to the default team, so its digest lists them too
    // (it said "All green" while search-indexer was Degraded); `payments` has its own digest.
    let now = t("2026-10-23T07:00:00Z");
    let inputs = Inputs {
        apps: vec![
            app("search", "search-indexer", "OutOfSync", t("2026-10-22T00:00:00Z"), 0),
            app("payments", "pay-api", "OutOfSync", t("2026-10-22T00:00:00Z"), 0),
        ],
        incidents: vec![
            incident("search", "search-indexer", Kind::Degraded, t("2026-10-23T05:00:00Z")),
            incident("payments", "pay-api", Kind::Degraded, t("2026-10-23T05:00:00Z")),
        ],
        silences: vec![],
        dead: vec![],
    };
    let teams = crate::configuration::Settings::from_yaml("teams: {platform: {}, payments: {}}")
        .expect("valid")
        .teams;
    let receivers = vec!["platform-slack".to_string()];
    let mut platform = frame("platform", &receivers, now);
    platform.adopts_unknown_teams = Some(&teams);
    let d = content(&platform, &inputs);
    let names: Vec<&str> = d.out_of_sync.iter().map(|a| a.app.as_str()).collect();
    assert_eq!(names, ["argocd/search-indexer"]);
    assert_eq!(d.firing.len(), 1);
    assert_eq!(d.firing[0].app, "argocd/search-indexer");
    // Another team's digest does not adopt anything.
    let d = content(&frame("payments", &receivers, now), &inputs);
    let names: Vec<&str> = d.out_of_sync.iter().map(|a| a.app.as_str()).collect();
    assert_eq!(names, ["argocd/pay-api"]);
}

#[test]
fn a_team_with_nothing_wrong_gets_an_empty_digest() {
    let now = t("2026-10-23T07:00:00Z");
    let inputs = Inputs {
        apps: vec![app("payments", "fine", "Synced", t("2026-09-01T00:00:00Z"), 0)],
        silences: vec![silence("expired", "payments", t("2026-10-02T00:00:00Z"))],
        ..Default::default()
    };
    let d = content(&frame("payments", &[], now), &inputs);
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(d.title(), "Digest for payments: all green");
}

#[test]
fn with_a_public_url_the_digest_links_to_the_status_page_of_its_team() {
    let now = t("2026-10-23T07:00:00Z");
    let inputs = Inputs::default();
    assert_eq!(content(&frame("payments", &[], now), &inputs).status_url, None);
    let mut f = frame("pay ments", &[], now);
    f.public_url = Some("https://herald.example.com/");
    assert_eq!(
        content(&f, &inputs).status_url.as_deref(),
        Some("https://herald.example.com/?team=pay+ments")
    );
}

#[test]
fn a_silence_that_mutes_one_of_the_teams_incidents_concerns_the_team() {
    let now = t("2026-10-23T07:00:00Z");
    let mut by_app = silence("by-app", "x", t("2026-10-30T00:00:00Z"));
    by_app.matchers = vec![Matcher::new("app", "recent")];
    let inputs = Inputs {
        incidents: vec![incident("payments", "recent", Kind::Degraded, now)],
        silences: vec![by_app],
        ..Default::default()
    };
    let d = content(&frame("payments", &[], now), &inputs);
    assert_eq!(d.silences.len(), 1);
}
