//! Whole stories, not features: each a timeline of Argo CD bodies and people's commands over hours or days on a
//! manual clock, with a restart in the middle, asserting exactly what every receiver and every person got (a
//! transcript compared with a reviewed golden file in `tests/stories/golden/`; an extra message fails like a
//! missing one). Every story runs on SQLite and on PostgreSQL (`HERALD_TEST_POSTGRES_URL`, started by
//! scripts/test) against the same golden file; `herald replay --until` must queue the same notifications as the
//! running service.

#[path = "../common/argocd_bodies.rs"]
mod argocd_bodies;
#[path = "../common/fake_argocd.rs"]
mod fake_argocd;
#[path = "../common/fixtures.rs"]
mod fixtures;
#[path = "../common/fresh_db.rs"]
mod fresh_db;
mod harness;

use std::time::Duration;

use harness::{CONFIG, Story, app, rolling_out, still_syncing, waiting_to_prune, with_sync};

const MIN: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// Story: pay-api goes OutOfSync; an hour later the team is told (Slack, e-mail, a Jira ticket). Alice silences it
/// for five hours mid-incident: no repeat (due after 4 h), no escalation page while it holds, and the list says
/// who silenced it and until when. Herald restarts while silenced. When the silence expires and it still fires,
/// the team hears again and the escalation step pages; the list says the silence expired; the recovery resolves
/// everything where the firing went.
async fn silence_mid_incident_then_expiry(engine: &str) {
    let mut s = Story::begin("silence-mid-incident-then-expiry", engine, CONFIG).await;
    s.body(
        "pay-api OutOfSync",
        app("pay-api", "payments", "payments", "OutOfSync", "Healthy"),
    )
    .await;
    s.pass(HOUR + MIN).await;
    s.pass(10 * MIN).await;
    s.silence(&[("app", "pay-api")], "alice", 5 * HOUR).await;
    s.look().await;
    s.pass(2 * HOUR).await;
    s.restart().await;
    s.pass(3 * HOUR).await;
    s.say("the silence has expired; pay-api is still OutOfSync");
    s.pass(10 * MIN).await;
    s.look().await;
    s.body(
        "pay-api Synced",
        app("pay-api", "payments", "payments", "Synced", "Healthy"),
    )
    .await;
    s.pass(6 * MIN).await;
    let t = s.end();
    assert!(
        t.iter().any(|l| l.contains("silenced by alice until")),
        "the list says who silenced it and until when"
    );
}

/// Story: pay-api goes OutOfSync and is told (Slack, e-mail, a Jira ticket). Alice silences it for five hours; two
/// hours later it recovers while still silenced. The silence holds back news, not the end of it: the ticket its
/// firing opened is resolved, and every place that heard of it hears it ended (Alertmanager's issue 226).
async fn a_silenced_incident_that_recovers_still_closes_its_ticket(engine: &str) {
    let mut s = Story::begin("silenced-incident-recovers", engine, CONFIG).await;
    s.body(
        "pay-api OutOfSync",
        app("pay-api", "payments", "payments", "OutOfSync", "Healthy"),
    )
    .await;
    s.pass(HOUR + MIN).await;
    s.silence(&[("app", "pay-api")], "alice", 5 * HOUR).await;
    s.pass(2 * HOUR).await;
    s.body(
        "pay-api Synced",
        app("pay-api", "payments", "payments", "Synced", "Healthy"),
    )
    .await;
    s.pass(6 * MIN).await;
    let t = s.end();
    assert!(
        t.iter().any(|l| l.contains("payments-jira resolve")),
        "the ticket is resolved while the silence holds"
    );
}

/// Story: an automated sync in `shop` deletes a Deployment (prune on): the team is told once that it happened.
/// Over three days — with a restart — nothing repeats it, nothing says "still firing".
async fn a_prune_event_over_three_days(engine: &str) {
    let mut s = Story::begin("prune-event-over-three-days", engine, CONFIG).await;
    let body = app("cart", "shop", "shop", "Synced", "Healthy");
    s.body("cart synced", body.clone()).await;
    let started = s.now();
    s.pass(MIN).await;
    s.body(
        "an automated sync of cart pruned Deployment cart-worker",
        with_sync(
            body,
            "Succeeded",
            None,
            started,
            &[("Deployment", "cart-worker")],
            "successfully synced",
        ),
    )
    .await;
    s.pass(HOUR).await;
    s.restart().await;
    s.pass_by(3 * 24 * HOUR, 10 * MIN).await;
    let t = s.end();
    assert!(!t.iter().any(|l| l.contains("still firing")), "an event never nags");
}

/// Story: one "also send to" route for every prune in production (`continue: true`): the platform bot hears of a
/// prune in `prod-payments`, and so does payments, the team that owns the Application.
async fn a_catch_all_route_keeps_the_owning_team(engine: &str) {
    let config = CONFIG.replace(
        "receivers:\n  - {name: payments-slack",
        "receivers:\n  - {name: platform-bot, slack: {webhook_url: \"http://127.0.0.1:9/bot\"}}\n  - {name: payments-slack",
    ) + "routes:\n  - {kind: pruned, namespace: \"prod-*\", receivers: [platform-bot], continue: true}\n";
    let mut s = Story::begin("catch-all-route", engine, &config).await;
    let body = app("pay-api", "payments", "prod-payments", "Synced", "Healthy");
    s.body("pay-api synced", body.clone()).await;
    let started = s.now();
    s.pass(MIN).await;
    s.body(
        "an automated sync of pay-api in prod-payments pruned ConfigMap pay-config",
        with_sync(
            body,
            "Succeeded",
            None,
            started,
            &[("ConfigMap", "pay-config")],
            "successfully synced",
        ),
    )
    .await;
    s.pass(HOUR).await;
    s.replay_agrees("+1h");
    let t = s.end();
    assert!(t.iter().any(|l| l.contains("-> platform-bot open")));
    assert!(t.iter().any(|l| l.contains("-> payments-slack open")));
}

/// Story: pay-api has a Service waiting to be pruned, so it is OutOfSync too. An hour later: ONE Jira ticket, one
/// chat message and one e-mail (the prune; the OutOfSync it causes is inhibited), and 30 minutes later one page.
/// Herald restarts. Bob then does what the hint says (`argocd app sync --prune`): the prune is news to the team's
/// chat and e-mail (no FIRING, no ticket, no page, no message to bob), and everything resolves.
async fn prune_pending_and_out_of_sync_are_one_ticket_then_bob_prunes(engine: &str) {
    let mut s = Story::begin("prune-pending-then-bob-prunes", engine, CONFIG).await;
    let waiting = waiting_to_prune(
        app("pay-api", "payments", "payments", "OutOfSync", "Healthy"),
        &[("Service", "pay-legacy")],
    );
    s.body("pay-api OutOfSync, Service pay-legacy waiting to be pruned", waiting)
        .await;
    s.pass(HOUR + MIN).await;
    s.look().await;
    s.pass(30 * MIN).await;
    s.restart().await;
    s.pass(10 * MIN).await;
    let started = s.now();
    s.body(
        "bob runs argocd app sync pay-api --prune",
        with_sync(
            app("pay-api", "payments", "payments", "Synced", "Healthy"),
            "Succeeded",
            Some("bob"),
            started,
            &[("Service", "pay-legacy")],
            "successfully synced",
        ),
    )
    .await;
    s.pass(HOUR).await;
    s.replay_agrees("+1h");
    let t = s.end();
    let tickets = t.iter().filter(|l| l.contains("-> payments-jira open")).count();
    assert_eq!(
        tickets, 1,
        "one ticket for the prune waiting; the prune done is news, no ticket: {t:#?}"
    );
    let pages = t.iter().filter(|l| l.contains("-> payments-pager open")).count();
    assert_eq!(pages, 1, "one page");
    assert!(
        !t.iter().any(|l| l.contains(" to bob ")),
        "bob did what the hint said: no message to him"
    );
}

/// Story (seed incident 001): at night, an automated sync after a rename in Git deletes the production ConfigMap
/// `payments-config`, which nobody was waiting to prune: critical, told at once, once; no repeats over the night.
async fn a_production_rename_prune_at_night(engine: &str) {
    let mut s = Story::begin("production-rename-prune-at-night", engine, CONFIG).await;
    let body = app("payments", "payments", "prod-payments", "Synced", "Healthy");
    s.pass_by(14 * HOUR, 10 * MIN).await;
    s.body("payments synced (23:00)", body.clone()).await;
    s.pass(4 * HOUR).await;
    let started = s.now();
    s.body(
        "03:00: an automated sync after a rename pruned ConfigMap payments-config",
        with_sync(
            body,
            "Succeeded",
            None,
            started,
            &[("ConfigMap", "payments-config")],
            "successfully synced",
        ),
    )
    .await;
    s.pass(MIN).await;
    s.restart().await;
    s.pass_by(8 * HOUR, 5 * MIN).await;
    let t = s.end();
    assert!(
        t.iter()
            .any(|l| l.contains("pruned open critical") || l.contains("pruned resolved critical"))
    );
}

/// Story: pay-api flaps Synced/OutOfSync every 3 minutes for an hour: never OutOfSync for an hour, so nobody is
/// told anything.
async fn flapping_for_an_hour_tells_nobody(engine: &str) {
    let mut s = Story::begin("flapping-for-an-hour", engine, CONFIG).await;
    for k in 0..20 {
        let sync = if k % 2 == 0 { "OutOfSync" } else { "Synced" };
        s.body(
            &format!("pay-api {sync}"),
            app("pay-api", "payments", "payments", sync, "Healthy"),
        )
        .await;
        if k == 10 {
            s.restart().await;
        }
        s.pass(3 * MIN).await;
    }
    s.body(
        "pay-api Synced",
        app("pay-api", "payments", "payments", "Synced", "Healthy"),
    )
    .await;
    s.pass(2 * HOUR).await;
    s.replay_agrees("+2h");
    let t = s.end();
    assert!(!t.iter().any(|l| l.contains(" -> ")), "nothing was sent: {t:#?}");
}

/// Story: alice's sync of pay-api fails five times in a row (a missing CRD), ten minutes apart, then a fixed sync
/// succeeds. Each failure is its own occurrence; alice hears of each once; the team's thread follows.
async fn a_sync_failing_five_times_in_a_row(engine: &str) {
    let mut s = Story::begin("sync-failing-five-times", engine, CONFIG).await;
    let body = app("pay-api", "payments", "payments", "OutOfSync", "Healthy");
    for k in 1..=5 {
        let started = s.now();
        s.body(
            &format!("alice's sync #{k} fails"),
            with_sync(
                body.clone(),
                "Failed",
                Some("alice"),
                started,
                &[],
                "one or more objects failed to apply",
            ),
        )
        .await;
        if k == 3 {
            s.restart().await;
        }
        s.pass(10 * MIN).await;
    }
    let started = s.now();
    s.body(
        "the CRD is installed; alice's sync succeeds",
        with_sync(
            app("pay-api", "payments", "payments", "Synced", "Healthy"),
            "Succeeded",
            Some("alice"),
            started,
            &[],
            "successfully synced",
        ),
    )
    .await;
    s.pass(HOUR).await;
    s.replay_agrees("+1h");
    s.end();
}

/// Story: pay-api is Degraded with an open Jira ticket, and is deleted: the ticket resolves once ("Application
/// deleted"), the pages stop, and the team's chat and e-mail are told once that it was deleted while Degraded (news:
/// no new ticket, no page).
async fn a_deleted_application_with_an_open_ticket(engine: &str) {
    let mut s = Story::begin("deleted-application-with-open-ticket", engine, CONFIG).await;
    s.body(
        "pay-api Degraded",
        app("pay-api", "payments", "payments", "Synced", "Degraded"),
    )
    .await;
    s.pass(10 * MIN).await;
    s.restart().await;
    s.pass(10 * MIN).await;
    let mut deleting = app("pay-api", "payments", "payments", "Synced", "Degraded");
    deleting["app"]["metadata"]["deletionTimestamp"] = serde_json::json!(s.now().to_rfc3339());
    s.body("pay-api is deleted", deleting).await;
    s.pass(2 * HOUR).await;
    let t = s.end();
    assert!(t.iter().any(|l| l.contains("-> payments-jira resolve")), "{t:#?}");
}

/// Two Argo CD instances, eu and us, each with a `payments-api` (team payments).
const TWO_INSTANCES: &str = r##"
argocd:
  instances:
    - {name: eu, url: "https://argocd.eu.example.com"}
    - {name: us, url: "https://argocd.us.example.com"}
ownership: {default_team: platform}
teams:
  payments:
    receivers: [payments-slack, payments-mail, payments-jira]
    escalation: [{after: 30m, receivers: [payments-pager]}]
  platform: {receivers: [platform-slack]}
people:
  alice: {email: alice@example.com, slack: UALICE}
people_receivers: {email: people-mail, slack: people-slack}
receivers:
  - {name: payments-slack, slack: {token: xoxb-t, channel: "#payments", api_url: "http://127.0.0.1:9/api"}}
  - {name: payments-mail, email: {to: [payments@example.com]}}
  - {name: payments-jira, jira: {url: "http://127.0.0.1:9", api: cloud, project: PAY, user: bot@example.com, token: t}}
  - {name: payments-pager, pagerduty: {url: "http://127.0.0.1:9/v2/enqueue", routing_key: k, change_events: true}}
  - {name: platform-slack, slack: {webhook_url: "http://127.0.0.1:9/platform"}}
  - {name: people-mail, email: {to: [nobody@example.com]}}
  - {name: people-slack, slack: {token: xoxb-t, channel: "#people", api_url: "http://127.0.0.1:9/api"}}
smtp: {url: "smtp://127.0.0.1:9", from: herald@example.com}
grouping: {group_wait: 30s, group_interval: 5m, repeat_interval: 4h}
"##;

/// `app(name, …)` as the Argo CD instance at `url` sends it (its `context.argocdUrl`).
fn from(url: &str, mut body: serde_json::Value) -> serde_json::Value {
    body["context"]["argocdUrl"] = serde_json::json!(url);
    body
}

const EU: &str = "https://argocd.eu.example.com";
const US: &str = "https://argocd.us.example.com";

/// Story: eu and us each have a payments-api. The eu one is OutOfSync; the us one has a Service waiting to be
/// pruned (so it is OutOfSync too, inhibited by the prune). An hour later the team's chat and mail get one message
/// per problem, each naming its instance — never one merged "payments-api" — and Jira gets one ticket per
/// instance; the pager is paged for each 30 minutes later. Bob acknowledges the us prune: the acknowledgement goes
/// to the threads that told of it (the prune's chat message, the us ticket, the us page), never to eu's. Alice
/// syncs eu's payments-api and it fails: she is told about eu's. Then an automated sync deploys the same revision
/// in both: each instance's deployment is its own change event, and everything resolves where it was told.
async fn two_instances_with_the_same_application_names(engine: &str) {
    let mut s = Story::begin("two-instances-same-names", engine, TWO_INSTANCES).await;
    s.show_threads();
    s.body(
        "eu: payments-api OutOfSync",
        from(EU, app("payments-api", "payments", "payments", "OutOfSync", "Healthy")),
    )
    .await;
    s.body(
        "us: payments-api OutOfSync, Service pay-legacy waiting to be pruned",
        from(
            US,
            waiting_to_prune(
                app("payments-api", "payments", "payments", "OutOfSync", "Healthy"),
                &[("Service", "pay-legacy")],
            ),
        ),
    )
    .await;
    s.pass(HOUR + MIN).await;
    s.look().await;
    s.pass(30 * MIN).await;
    s.ack("us/argocd/payments-api", "prune_pending", "bob").await;
    s.pass(MIN).await;
    s.restart().await;
    let started = s.now();
    s.body(
        "eu: alice's sync of payments-api fails",
        from(
            EU,
            with_sync(
                app("payments-api", "payments", "payments", "OutOfSync", "Healthy"),
                "Failed",
                Some("alice"),
                started,
                &[],
                "one or more objects failed to apply",
            ),
        ),
    )
    .await;
    s.pass(10 * MIN).await;
    let started = s.now();
    for (instance, url) in [("eu", EU), ("us", US)] {
        s.body(
            &format!("{instance}: an automated sync deploys payments-api"),
            from(
                url,
                with_sync(
                    app("payments-api", "payments", "payments", "Synced", "Healthy"),
                    "Succeeded",
                    None,
                    started,
                    &[],
                    "successfully synced",
                ),
            ),
        )
        .await;
    }
    s.pass(10 * MIN).await;
    s.look().await;
    let t = s.end();
    let changes: Vec<&String> = t.iter().filter(|l| l.contains("synced to")).collect();
    assert_eq!(changes.len(), 2, "one change event per instance: {changes:#?}");
    assert!(
        !t.iter().any(|l| l.contains("-> ") && l.contains(" payments-api:")),
        "no message names payments-api without its instance"
    );
    // Each acknowledgement is in a thread whose first message told of the us prune.
    let thread = |l: &str| l.rsplit_once(" {").map(|(_, t)| t.to_string());
    let acks: Vec<&String> = t.iter().filter(|l| l.contains(" acknowledge: ")).collect();
    assert_eq!(acks.len(), 3, "{acks:#?}");
    for ack in acks {
        let told = (t.iter()).any(|l| {
            l.contains(" open: ") && l.contains("us/payments-api: 1 resource waiting") && thread(l) == thread(ack)
        });
        assert!(told, "{ack} edits a message that told of the us prune");
    }
}

/// Story: alice syncs pay-api; its PreSync hook Job `pay-migrate` never finishes. Argo CD sends nothing more (the
/// operation is Running). 30 minutes after the sync started the team is told what it waits on and how to stop it
/// (`argocd app terminate-op`); the OutOfSync it causes is inhibited. Herald restarts; 30 minutes later the pager
/// is reached. bob terminates the operation: the stuck sync resolves, and the terminated sync is a failed sync
/// (alice hears of it); a new sync succeeds and everything resolves.
async fn a_presync_hook_that_never_finishes(engine: &str) {
    let mut s = Story::begin("presync-hook-never-finishes", engine, CONFIG).await;
    let synced = app("pay-api", "payments", "payments", "Synced", "Healthy");
    s.body("pay-api synced", synced.clone()).await;
    s.pass(MIN).await;
    let started = s.now();
    s.body(
        "alice syncs pay-api; its PreSync hook Job pay-migrate starts",
        still_syncing(
            app("pay-api", "payments", "payments", "OutOfSync", "Healthy"),
            Some("alice"),
            started,
            Some(("Job", "pay-migrate")),
            "waiting for completion of hook batch/Job/pay-migrate",
        ),
    )
    .await;
    s.pass(31 * MIN).await;
    s.look().await;
    s.restart().await;
    s.pass(30 * MIN).await;
    s.body(
        "bob runs argocd app terminate-op pay-api",
        with_sync(
            app("pay-api", "payments", "payments", "OutOfSync", "Healthy"),
            "Failed",
            Some("alice"),
            started,
            &[],
            "Operation terminated",
        ),
    )
    .await;
    s.pass(10 * MIN).await;
    let again = s.now();
    s.body(
        "alice syncs pay-api again (the migration fixed): it succeeds",
        with_sync(synced, "Succeeded", Some("alice"), again, &[], "successfully synced"),
    )
    .await;
    s.pass(10 * MIN).await;
    s.replay_agrees("+2h");
    let t = s.end();
    assert!(
        t.iter().any(|l| l.contains("waiting for hook Job pay-migrate")),
        "the message says what the sync waits on"
    );
    assert!(
        !t.iter()
            .any(|l| l.contains(" open: ") && l.contains("pay-api is OutOfSync")),
        "the OutOfSync the stuck sync causes is not told apart"
    );
    assert!(t.iter().any(|l| l.contains("payments-pager")), "the escalation pages");
}

/// Story: an automated sync of shop's cart succeeds but its Deployment never becomes ready: Progressing for 40
/// minutes. At 30 minutes shop is told (chat and e-mail) which resource is not ready and what to look at; when the
/// rollout finishes the same receivers hear it resolved. Nothing else is sent.
async fn a_rollout_progressing_for_forty_minutes(engine: &str) {
    let mut s = Story::begin("rollout-progressing-forty-minutes", engine, CONFIG).await;
    let healthy = app("cart", "shop", "shop", "Synced", "Healthy");
    s.body("cart synced and healthy", healthy.clone()).await;
    s.pass(MIN).await;
    let started = s.now();
    s.body(
        "an automated sync deploys cart; Deployment cart rolls out",
        rolling_out(
            with_sync(
                app("cart", "shop", "shop", "Synced", "Progressing"),
                "Succeeded",
                None,
                started,
                &[],
                "successfully synced",
            ),
            &[(
                "Deployment",
                "cart",
                "Waiting for rollout to finish: 1 of 3 updated replicas are available...",
            )],
        ),
    )
    .await;
    s.pass(31 * MIN).await;
    s.look().await;
    s.pass(9 * MIN).await;
    s.body(
        "the rollout finishes: cart Healthy",
        with_sync(healthy, "Succeeded", None, started, &[], "successfully synced"),
    )
    .await;
    s.pass(10 * MIN).await;
    s.replay_agrees("+1h");
    let t = s.end();
    let sent = |what: &str| t.iter().filter(|l| l.contains("  -> ") && l.contains(what)).count();
    assert_eq!(
        sent(" open: cart: Progressing"),
        2,
        "shop's chat and e-mail, once each: {t:#?}"
    );
    assert_eq!(
        sent(" resolve: cart: Progressing"),
        1,
        "chat hears it resolved (e-mail is not told resolves): {t:#?}"
    );
    assert_eq!(sent(""), 3, "nothing else: {t:#?}");
}

/// payments' quiet hours: nothing from 18:00 to 08:00 UTC (`teams.payments.mute_time_intervals: [nights]`).
fn quiet_nights() -> String {
    CONFIG.replace(
        "    escalation: [{after: 30m, receivers: [payments-pager]}]\n",
        "    escalation: [{after: 30m, receivers: [payments-pager]}]\n    mute_time_intervals: [nights]\n",
    ) + "time_intervals:\n  - name: nights\n    time_intervals:\n      - times: [{start_time: '18:00', end_time: '24:00'}, {start_time: '00:00', end_time: '08:00'}]\n"
}

/// Story: payments is muted every night from 18:00 to 08:00. pay-api goes OutOfSync at 18:30 and fires at 19:30,
/// inside the interval: nobody is told, its escalation step waits, and the list says it is muted and until when.
/// Herald restarts in the night. At 08:00, the interval over and pay-api still OutOfSync, the team is told (chat,
/// e-mail, a ticket) and the escalation step pages; nothing before.
async fn a_muted_team_hears_at_its_intervals_end(engine: &str) {
    let mut s = Story::begin("muted-team-across-its-interval-end", engine, &quiet_nights()).await;
    s.pass_by(9 * HOUR + 30 * MIN, 10 * MIN).await;
    s.body(
        "pay-api OutOfSync",
        app("pay-api", "payments", "payments", "OutOfSync", "Healthy"),
    )
    .await;
    s.pass(HOUR + 5 * MIN).await;
    s.look().await;
    s.pass_by(3 * HOUR, 10 * MIN).await;
    s.restart().await;
    s.pass_by(9 * HOUR, 10 * MIN).await;
    s.look().await;
    s.say("at 08:00 payments' quiet hours end; pay-api is still OutOfSync");
    s.pass(30 * MIN).await;
    s.look().await;
    let t = s.end();
    let first = t.iter().position(|l| l.contains("  -> ")).expect("told at last");
    assert!(t[first].starts_with("Tue(+1) 08:0"), "nothing before 08:00: {t:#?}");
    assert!(
        t.iter()
            .any(|l| l.contains("muted for team payments (time interval nights) until 2026-01-06 08:00 UTC")),
        "the list says it is muted and until when: {t:#?}"
    );
    assert!(
        t.iter().any(|l| l.contains("payments-jira open")),
        "the ticket is opened at the end"
    );
    assert!(
        t.iter().any(|l| l.contains("payments-pager")),
        "the escalation step pages at the end"
    );
}

/// Story: pay-api fires at 10:00 and is told (a ticket is opened); pay-worker goes OutOfSync at 17:50 and fires at
/// 18:50, inside payments' quiet hours. pay-api recovers at 20:00, inside them: its resolve still goes where its
/// firing went (the ticket is closed, Alertmanager's issue 226). pay-worker recovers at 21:00, never having been
/// told: nothing is ever sent of it, at the interval's end neither.
async fn what_resolves_inside_a_muted_interval_is_never_sent_but_closes_what_was(engine: &str) {
    let mut s = Story::begin("muted-team-resolved-inside-its-interval", engine, &quiet_nights()).await;
    s.body(
        "pay-api OutOfSync",
        app("pay-api", "payments", "payments", "OutOfSync", "Healthy"),
    )
    .await;
    s.pass(HOUR + MIN).await;
    s.pass_by(7 * HOUR + 49 * MIN, 10 * MIN).await;
    s.body(
        "pay-worker OutOfSync",
        app("pay-worker", "payments", "payments", "OutOfSync", "Healthy"),
    )
    .await;
    s.pass_by(HOUR + 10 * MIN, 10 * MIN).await;
    s.look().await;
    s.pass_by(HOUR, 10 * MIN).await;
    s.body(
        "pay-api Synced",
        app("pay-api", "payments", "payments", "Synced", "Healthy"),
    )
    .await;
    s.pass(6 * MIN).await;
    s.pass_by(HOUR - 6 * MIN, 10 * MIN).await;
    s.body(
        "pay-worker Synced",
        app("pay-worker", "payments", "payments", "Synced", "Healthy"),
    )
    .await;
    s.pass_by(12 * HOUR, 10 * MIN).await;
    let t = s.end();
    assert!(
        t.iter().any(|l| l.contains("payments-jira resolve: pay-api")),
        "pay-api's ticket is closed inside the interval: {t:#?}"
    );
    assert!(
        !t.iter().any(|l| l.contains("  -> ") && l.contains("pay-worker")),
        "pay-worker is never told: {t:#?}"
    );
}

/// Story: payments' escalation reaches whoever is on call when each step fires (issue 45 §2). The rotation hands
/// off from alice to bob at 11:45 in Berlin (10:45 UTC): pay-api's first step (10:30 UTC) reaches alice, its second
/// (11:00, with the pager) bob — each by Slack DM and e-mail through the people receivers. Herald restarts in
/// between. Alice's override from 13:00 to 13:30 Berlin wins over bob: pay-web's first step (12:11 UTC) is hers,
/// its second (12:41, the override over) bob's again.
async fn the_person_on_call_when_each_step_fires(engine: &str) {
    let config = CONFIG.replace(
        "escalation: [{after: 30m, receivers: [payments-pager]}]",
        "escalation: [{after: 30m, on_call: payments-primary}, {after: 1h, on_call: payments-primary, receivers: [payments-pager]}]",
    ) + "schedules:\n  payments-primary:\n    timezone: Europe/Berlin\n    rotation: {people: [alice, bob], every: 1d, start: 2026-01-04, handoff: '11:45'}\n    overrides: [{person: alice, from: '2026-01-05 13:00', until: '2026-01-05 13:30'}]\n";
    let mut s = Story::begin("the-person-on-call-when-each-step-fires", engine, &config).await;
    s.show_threads();
    s.body(
        "pay-api OutOfSync",
        app("pay-api", "payments", "payments", "OutOfSync", "Healthy"),
    )
    .await;
    s.pass(HOUR + MIN).await;
    s.say("pay-api fired at 10:00; its first step is due at 10:30, before the hand-off at 11:45 Berlin");
    s.pass(30 * MIN).await;
    s.restart().await;
    s.say("Herald restarted; the second step is due at 11:00, after the hand-off: bob");
    s.pass(10 * MIN).await;
    s.body(
        "pay-web OutOfSync",
        app("pay-web", "payments", "payments", "OutOfSync", "Healthy"),
    )
    .await;
    s.pass(20 * MIN).await;
    s.body(
        "pay-api Synced",
        app("pay-api", "payments", "payments", "Synced", "Healthy"),
    )
    .await;
    s.pass(HOUR + 11 * MIN).await;
    s.say("pay-web fired at 11:41; alice's override (12:00-12:30 UTC) took its first step at 12:11; at 12:41 it is over: bob");
    s.pass(30 * MIN).await;
    let t = s.end();
    let to = |who: &str| t.iter().filter(|l| l.contains(&format!(" to {who} "))).count();
    assert_eq!(
        (to("alice"), to("bob")),
        (4, 4),
        "each step by Slack and e-mail: {t:#?}"
    );
}

macro_rules! on_both_engines {
    ($($name:ident),* $(,)?) => {
        mod sqlite { $( #[tokio::test] async fn $name() { super::$name("sqlite").await } )* }
        mod postgres { $( #[tokio::test] async fn $name() { super::$name("postgres").await } )* }
    };
}

mod argocd_api;

on_both_engines!(
    silence_mid_incident_then_expiry,
    a_silenced_incident_that_recovers_still_closes_its_ticket,
    a_prune_event_over_three_days,
    a_catch_all_route_keeps_the_owning_team,
    prune_pending_and_out_of_sync_are_one_ticket_then_bob_prunes,
    a_production_rename_prune_at_night,
    flapping_for_an_hour_tells_nobody,
    a_sync_failing_five_times_in_a_row,
    a_deleted_application_with_an_open_ticket,
    two_instances_with_the_same_application_names,
    a_presync_hook_that_never_finishes,
    a_rollout_progressing_for_forty_minutes,
    a_muted_team_hears_at_its_intervals_end,
    what_resolves_inside_a_muted_interval_is_never_sent_but_closes_what_was,
    the_person_on_call_when_each_step_fires,
);
