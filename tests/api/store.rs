//! The store contract, run against both engines: embedded SQLite and a real PostgreSQL 15
//! (`HERALD_TEST_POSTGRES_URL`, started by scripts/test). Each test gets a fresh database.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use herald::argocd::{AppId, parse_body};
use herald::configuration::StorageSettings;
use herald::domain::Incident;
use herald::domain::{Action, DeliveryState, IncidentState, Kind, Severity};
use herald::routing::{Matcher, Silence};
use herald::state::{Field, Transition};
use herald::state::{Outcome, apply};
use herald::store::{
    AppFilter, Dictionaries, DictionaryUse, Headline, HeldDropRow, HistoryBound, IncidentFilter, MAX_CHAIN,
    NewDelivery, RawChain, SlotState, Store,
};
use secrecy::SecretString;
use sqlx::Row;

use crate::argocd_bodies::bare_envelope;
use crate::fresh_db::{FreshDb, fresh_db};

async fn fresh(engine: &str) -> (Store, FreshDb) {
    let db = fresh_db(engine, "contract").await;
    let settings = StorageSettings {
        url: SecretString::from(db.url.clone()),
        max_connections: 8,
        ..Default::default()
    };
    (Store::connect(&settings).await.expect("connect and migrate"), db)
}

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("time").with_timezone(&Utc)
}

fn filter(sync: Option<&str>, deleted: bool, limit: i64) -> AppFilter {
    AppFilter {
        sync: sync.map(str::to_string),
        deleted,
        limit,
        ..Default::default()
    }
}

fn app(name: &str) -> AppId {
    AppId::new("argocd", name)
}

fn view(fp: &str) -> Incident {
    Incident {
        fingerprint: fp.into(),
        kind: Kind::OutOfSync,
        severity: Severity::Warning,
        team: "pay".into(),
        summary: "x".into(),
        ..Default::default()
    }
}

fn delivery(order: &str, n: usize) -> NewDelivery {
    NewDelivery {
        receiver: "r".into(),
        order_key: order.into(),
        thread_key: format!("{order}:1"),
        action: Action::Update,
        // The step number travels in the payload, so the tests can see the order rows come back in.
        payload: format!("step-{n}"),
        headline: None,
    }
}

macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod sqlite { $( #[tokio::test] async fn $name() { super::$name("sqlite").await } )* }
        mod postgres { $( #[tokio::test] async fn $name() { super::$name("postgres").await } )* }
    };
}

contract!(
    an_upgrade_moves_everything_to_the_default_instance,
    applications_round_trip_and_upsert,
    incidents_are_claimed_once_when_due,
    deliveries_keep_their_order_and_leases_are_exclusive,
    failures_retry_then_die_and_dead_rows_can_be_retried,
    groups_collect_members_and_schedule_flushes,
    silences_expire,
    migrations_are_idempotent,
    a_run_of_raw_bodies_reads_back_byte_exact_at_every_page_size,
    the_purge_removes_a_run_of_raw_bodies_only_whole,
    raw_bodies_stored_before_runs_stay_readable,
    runs_started_with_a_dictionary_read_back_and_the_purge_keeps_a_dictionary_in_use,
    a_body_its_run_predicts_badly_starts_a_new_run_against_the_dictionary,
    resolved_incidents_and_the_timeline_are_purged_after_the_history_retention,
    deleted_applications_leave_the_lists_and_are_purged_after_retention,
    a_lease_is_held_by_one_replica_until_it_ends,
    pages_follow_their_cursor,
    delivered_rows_are_purged_after_their_retention,
    a_digest_slot_is_claimed_once_with_its_deliveries,
    a_held_listing_drop_is_kept_replaced_and_released,
    an_applications_history_pages_newest_first_and_its_deliveries_go_with_their_purge,
    a_link_is_used_once_and_a_failed_use_gives_it_back,
    payloads_live_out_of_their_rows_and_rows_queued_before_still_send_list_and_purge,
);

async fn a_link_is_used_once_and_a_failed_use_gives_it_back(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let (now, expires) = (t("2026-01-01T10:00:00Z"), t("2026-01-08T10:00:00Z"));
    assert!(store.claim_link("n1", expires, now).await.expect("claim"));
    assert!(!store.claim_link("n1", expires, now).await.expect("claim"), "one use");
    // The action failed: the claim is given back, and the next use acts.
    store.release_link("n1").await.expect("release");
    assert_eq!(store.link_outcome("n1").await.expect("read"), None);
    assert!(store.claim_link("n1", expires, now).await.expect("claim again"));
    store
        .set_link_outcome("n1", "acknowledged by alice")
        .await
        .expect("outcome");
    // A link that acted keeps what it did: releasing it changes nothing.
    store.release_link("n1").await.expect("release");
    assert_eq!(
        store.link_outcome("n1").await.expect("read").as_deref(),
        Some("acknowledged by alice")
    );
    assert!(!store.claim_link("n1", expires, now).await.expect("claim"));
}

async fn an_applications_history_pages_newest_first_and_its_deliveries_go_with_their_purge(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let (a, b) = (app("pay"), app("ledger"));
    let at = |m: i64| t("2026-01-01T00:00:00Z") + chrono::Duration::minutes(m);
    let mut tx = store.begin().await.expect("tx");
    let change = |field: &str, to: &str| Transition {
        field: Field::from_stored(field).expect("a timeline field"),
        from: None,
        to: to.into(),
    };
    // One timeline row a change: pay's first change moved two fields.
    let rows = vec![
        (
            a.clone(),
            at(0),
            vec![change("sync", "OutOfSync"), change("health", "Healthy")],
        ),
        (b.clone(), at(1), vec![change("sync", "Synced")]),
        (a.clone(), at(2), vec![change("sync", "Synced")]),
    ];
    Store::add_transitions_many(&mut tx, &rows).await.expect("transitions");
    // d1 about incident 1 of pay; d2 about its incidents 1 and 2 (one message); d3 about ledger's incident 3.
    let mut ids = Vec::new();
    for (m, about) in [(0, vec![(1, &a)]), (1, vec![(1, &a), (2, &a)]), (2, vec![(3, &b)])] {
        let id = Store::enqueue(&mut tx, &delivery(&format!("t{m}"), m as usize), at(m))
            .await
            .expect("enqueue");
        Store::index_delivery(&mut tx, id, &about, at(m)).await.expect("index");
        ids.push(id);
    }
    Store::add_escalation(&mut tx, 1, 2, 3600, at(90), &["manager".to_string()], None)
        .await
        .expect("step 2");
    Store::add_escalation(
        &mut tx,
        1,
        1,
        1800,
        at(60),
        &["pager".to_string()],
        Some("payments-primary"),
    )
    .await
    .expect("step 1");
    tx.commit().await.expect("commit");

    let timeline = store
        .timeline_before(&a, HistoryBound::NONE, 10)
        .await
        .expect("timeline");
    let fields: Vec<&str> = timeline.iter().map(|(_, t)| t.to.as_str()).collect();
    assert_eq!(fields, ["Synced", "Healthy", "OutOfSync"], "newest first, only pay's");
    let (id, first) = &timeline[1];
    let bound = HistoryBound {
        at: first.at.timestamp_millis(),
        id: *id,
    };
    let older = store.timeline_before(&a, bound, 10).await.expect("older");
    assert_eq!(older.len(), 1, "strictly before the cursor, inside its row: {older:?}");
    assert_eq!(older[0].1.to, "OutOfSync");
    // A page of two ends inside the two-field row, and says there is more (the caller asks one more than it shows).
    let page: Vec<String> = (store
        .timeline_before(&a, HistoryBound::NONE, 2)
        .await
        .expect("page")
        .into_iter())
    .map(|(_, t)| t.to)
    .collect();
    assert_eq!(page, ["Synced", "Healthy"]);
    let newest = store.timeline(&a, 2).await.expect("timeline");
    assert_eq!(
        newest.iter().map(|t| t.to.as_str()).collect::<Vec<_>>(),
        ["Healthy", "Synced"],
        "the newest two, oldest first"
    );

    let of_pay = store
        .app_deliveries(&a, HistoryBound::NONE, 10)
        .await
        .expect("deliveries");
    let told: Vec<i64> = of_pay.iter().map(|d| d.delivery.id).collect();
    assert_eq!(
        told,
        [ids[1], ids[0]],
        "newest first, a message about two incidents once"
    );
    assert_eq!(of_pay[0].queued_at, at(1));
    let bound = HistoryBound {
        at: at(1).timestamp_millis(),
        id: ids[1],
    };
    let before = store.app_deliveries(&a, bound, 10).await.expect("older deliveries");
    assert_eq!(before.iter().map(|d| d.delivery.id).collect::<Vec<_>>(), [ids[0]]);
    let about_one: Vec<i64> = (store.incident_deliveries(&[1], 10).await.expect("of incident 1").iter())
        .map(|d| d.delivery.id)
        .collect();
    assert_eq!(about_one, [ids[1], ids[0]]);
    assert!(store.incident_deliveries(&[], 10).await.expect("none").is_empty());
    // What a Slack click is checked against: a delivery about the incident to that receiver.
    assert!(store.was_told("r", 2).await.expect("told"), "incident 2 was sent to r");
    assert!(
        !store.was_told("r", 4).await.expect("told"),
        "incident 4 was sent nowhere"
    );
    assert!(
        !store.was_told("other", 1).await.expect("told"),
        "nothing was sent to another receiver"
    );

    let (step, due) = store.next_escalation(1).await.expect("read").expect("a step");
    assert_eq!(
        (step.step, step.receivers.as_slice(), due),
        (1, &["pager".to_string()][..], at(60))
    );
    assert_eq!(
        step.on_call.as_deref(),
        Some("payments-primary"),
        "the step's schedule is kept with it"
    );
    assert!(store.next_escalation(2).await.expect("read").is_none());

    // The oldest delivery is done and purged: it leaves the page with its row.
    let claimed = store.claim_deliveries("me", at(3), at(4), 10).await.expect("claim");
    let first = claimed.iter().find(|d| d.id == ids[0]).expect("claimed");
    store.delivered(first, None, at(3)).await.expect("done");
    assert_eq!(store.purge_delivered(at(5)).await.expect("purge"), 1);
    let left: Vec<i64> = (store
        .app_deliveries(&a, HistoryBound::NONE, 10)
        .await
        .expect("deliveries")
        .iter())
    .map(|d| d.delivery.id)
    .collect();
    assert_eq!(left, [ids[1]]);
}

async fn a_held_listing_drop_is_kept_replaced_and_released(engine: &str) {
    let (store, _db) = fresh(engine).await;
    assert_eq!(
        store.held_drop("default").await.expect("read"),
        None,
        "nothing held at first"
    );
    let held = HeldDropRow {
        apps: (0..12).map(|i| app(&format!("pay-{i}"))).collect(),
        at: t("2026-01-01T00:00:00Z"),
        stored: 12,
    };
    store.hold_drop("default", &held).await.expect("hold");
    assert_eq!(store.held_drop("default").await.expect("read"), Some(held.clone()));
    let next = HeldDropRow {
        apps: [app("pay-12")].into_iter().collect(),
        at: t("2026-01-01T00:05:00Z"),
        stored: 13,
    };
    store.hold_drop("default", &next).await.expect("hold again");
    assert_eq!(
        store.held_drop("default").await.expect("read"),
        Some(next),
        "one row: replaced"
    );
    store.release_drop("default").await.expect("release");
    assert_eq!(store.held_drop("default").await.expect("read"), None);
    store.release_drop("default").await.expect("releasing nothing is fine");
}

async fn delivered_rows_are_purged_after_their_retention(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let now = t("2026-01-01T00:00:00Z");
    let mut tx = store.begin().await.expect("tx");
    for n in 0..3 {
        Store::enqueue(&mut tx, &delivery(&format!("t{n}"), n), now)
            .await
            .expect("enqueue");
    }
    tx.commit().await.expect("commit");
    let lease = now + chrono::Duration::seconds(30);
    let claimed = store.claim_deliveries("me", now, lease, 10).await.expect("claim");
    assert_eq!(claimed.len(), 3);
    store.delivered(&claimed[0], None, now).await.expect("done");
    store.failed(claimed[1].id, "down", None).await.expect("dead");
    assert_eq!(
        store.purge_delivered(now).await.expect("purge"),
        0,
        "delivered at `before`: kept"
    );
    assert_eq!(
        store
            .purge_delivered(now + chrono::Duration::seconds(1))
            .await
            .expect("purge"),
        1
    );
    let left: Vec<_> = store
        .outbox(None, 10, None)
        .await
        .expect("rows")
        .iter()
        .map(|r| r.state)
        .collect();
    assert_eq!(left.len(), 2, "the dead and the pending row stay: {left:?}");
}

async fn pages_follow_their_cursor(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let now = t("2026-01-01T00:00:00Z");
    let mut tx = store.begin().await.expect("tx");
    for (i, name) in ["e", "d", "c", "b", "a"].iter().enumerate() {
        let body = format!(
            r#"{{"app":{{"metadata":{{"name":"{name}","namespace":"argocd"}},"status":{{"sync":{{"status":"OutOfSync"}},
                "resources":[{{"kind":"Job","name":"j","requiresPruning":true}}]}}}}}}"#
        );
        // Two share a since-time: the name breaks the tie.
        let at = now + chrono::Duration::minutes((i / 2) as i64);
        let Outcome::Changed { state, .. } = apply(None, parse_body(body.as_bytes(), 64).expect("body"), at) else {
            panic!()
        };
        Store::save_apps(&mut tx, &[("p", &*state)]).await.expect("save");
    }
    tx.commit().await.expect("commit");
    let mut order = Vec::new();
    let mut f = filter(None, false, 2);
    loop {
        let page = store.apps(&f).await.expect("page");
        order.extend(page.iter().map(|a| a.state.snapshot.app.name.clone()));
        match page.last() {
            Some(last) if page.len() == 2 => f.after = Some(herald::store::AppCursor::of(&last.state)),
            _ => break,
        }
    }
    assert_eq!(
        order,
        ["d", "e", "b", "c", "a"],
        "by since-time, then by name, each once"
    );
    assert_eq!(store.count_apps(&filter(None, false, 0)).await.expect("count"), 5);
    let first = store.apps_with_pending_prunes(2, None).await.expect("prunes");
    assert_eq!(first.len(), 2);
    let rest = store
        .apps_with_pending_prunes(10, Some(&first[1].state.snapshot.app))
        .await
        .expect("prunes");
    assert_eq!(rest.len(), 3);
}

async fn deleted_applications_leave_the_lists_and_are_purged_after_retention(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let now = t("2026-01-01T00:00:00Z");
    let mut states = Vec::new();
    for name in ["kept", "gone"] {
        let body = format!(
            r#"{{"app":{{"metadata":{{"name":"{name}","namespace":"argocd"}},"spec":{{"project":"pay"}},
                "status":{{"sync":{{"status":"OutOfSync"}},"resources":[{{"kind":"Job","name":"j","requiresPruning":true}}]}}}}}}"#
        );
        let Outcome::Changed { state, .. } = apply(None, parse_body(body.as_bytes(), 64).expect("body"), now) else {
            panic!()
        };
        states.push(*state);
    }
    let gone = herald::state::delete(&states[1], now + chrono::Duration::minutes(1)).expect("deleted");
    let mut tx = store.begin().await.expect("tx");
    Store::save_apps(&mut tx, &[("p", &states[0]), ("p", &gone)])
        .await
        .expect("save");
    tx.commit().await.expect("commit");
    let names = |v: Vec<herald::store::AppRecord>| -> Vec<String> {
        v.into_iter().map(|a| a.state.snapshot.app.name).collect()
    };
    assert_eq!(
        names(store.apps(&filter(None, false, 10)).await.expect("live")),
        ["kept"]
    );
    assert_eq!(
        names(store.apps(&filter(None, true, 10)).await.expect("deleted")),
        ["gone"]
    );
    assert_eq!(
        names(store.apps_with_pending_prunes(100, None).await.expect("prunes")),
        ["kept"]
    );
    let counted: i64 = store.app_counts().await.expect("counts").iter().map(|c| c.2).sum();
    assert_eq!(counted, 1, "a deleted Application is not counted");
    let live = store.live_apps("default", &[]).await.expect("live ids");
    assert_eq!(live.iter().map(|(a, _)| a.name.as_str()).collect::<Vec<_>>(), ["kept"]);
    assert!(
        store
            .live_apps("default", &["other".into()])
            .await
            .expect("by project")
            .is_empty()
    );
    assert!(store.has_apps().await.expect("has"));
    assert_eq!(
        store.purge_deleted_apps(now).await.expect("purge"),
        0,
        "deleted after `before`: kept"
    );
    assert_eq!(
        store
            .purge_deleted_apps(now + chrono::Duration::hours(1))
            .await
            .expect("purge"),
        1
    );
    assert!(store.app(&app("gone")).await.expect("read").is_none());
    assert!(store.app(&app("kept")).await.expect("read").is_some());
}

async fn a_lease_is_held_by_one_replica_until_it_ends(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let now = t("2026-01-01T00:00:00Z");
    let later = now + chrono::Duration::minutes(5);
    assert!(store.claim_lease("resync", "a", now, later).await.expect("claim"));
    assert!(
        !store.claim_lease("resync", "b", now, later).await.expect("claim"),
        "held by a"
    );
    assert!(
        !store
            .claim_lease("resync", "b", later - chrono::Duration::seconds(1), later)
            .await
            .expect("claim")
    );
    assert!(
        store.claim_lease("other", "b", now, later).await.expect("claim"),
        "leases are by name"
    );
    assert!(
        store
            .claim_lease("resync", "b", later, later + chrono::Duration::minutes(5))
            .await
            .expect("claim")
    );
    store.release_lease("resync").await.expect("release");
    assert!(
        store
            .claim_lease("resync", "a", later, later + chrono::Duration::minutes(5))
            .await
            .expect("claim")
    );
}

async fn applications_round_trip_and_upsert(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let now = t("2026-01-01T00:00:00Z");
    let snap = parse_body(
        br#"{"app":{"metadata":{"name":"pay","namespace":"argocd","labels":{"team":"p"}},"status":{"sync":{"status":"OutOfSync"}}}}"#,
        64,
    )
    .expect("body");
    let Outcome::Changed { state, transitions } = apply(None, snap.clone(), now) else {
        panic!()
    };
    let mut tx = store.begin().await.expect("tx");
    let ids = [app("pay"), app("other")];
    assert!(Store::load_apps(&mut tx, &ids).await.expect("load").is_empty());
    Store::save_apps(&mut tx, &[("p", &*state)]).await.expect("save");
    let timeline = vec![(app("pay"), now, transitions.clone())];
    Store::add_transitions_many(&mut tx, &timeline)
        .await
        .expect("transitions");
    let rows = [(app("pay"), now, "changed", "{}".to_string())];
    Store::add_raws(&mut tx, &rows, &mut HashMap::new(), GAP, &mut DictionaryUse::default())
        .await
        .expect("raw");
    tx.commit().await.expect("commit");
    let mut tx = store.begin().await.expect("tx");
    let loaded = Store::load_apps(&mut tx, &ids).await.expect("load");
    assert_eq!(loaded.len(), 1, "only the stored one");
    assert_eq!(loaded[&app("pay")], ("p".to_string(), (*state).clone()));
    let mut newer = (*state).clone();
    newer.snapshot.sync_status = "Synced".into();
    Store::save_apps(&mut tx, &[("p", &newer)]).await.expect("upsert");
    tx.commit().await.expect("commit");
    let rec = store.app(&app("pay")).await.expect("app").expect("present");
    assert_eq!(rec.state.snapshot.sync_status.as_str(), "Synced");
    assert_eq!(
        store
            .apps(&filter(Some("Synced"), false, 10))
            .await
            .expect("list")
            .len(),
        1
    );
    assert_eq!(
        store
            .apps(&filter(Some("OutOfSync"), false, 10))
            .await
            .expect("list")
            .len(),
        0
    );
    assert_eq!(store.timeline(&app("pay"), 10).await.expect("timeline").len(), 2);
    assert_eq!(store.raw_bodies(&app("pay"), 10).await.expect("raw").len(), 1);
    assert_eq!(
        store
            .purge_raw(now + chrono::Duration::seconds(1), GAP)
            .await
            .expect("purge"),
        1
    );
    // Only Applications with something waiting to be pruned are read for /v1/prune-pending.
    assert!(
        store
            .apps_with_pending_prunes(100, None)
            .await
            .expect("prunes")
            .is_empty()
    );
    let pruning = parse_body(
        br#"{"app":{"metadata":{"name":"cron","namespace":"argocd"},"status":{"sync":{"status":"OutOfSync"},
            "resources":[{"kind":"CronJob","name":"reminders","namespace":"billing","status":"OutOfSync","requiresPruning":true}]}}}"#,
        64,
    )
    .expect("body");
    let Outcome::Changed { state: cron, .. } = apply(None, pruning, now) else {
        panic!()
    };
    let mut tx = store.begin().await.expect("tx");
    Store::save_apps(&mut tx, &[("billing", &*cron)]).await.expect("save");
    tx.commit().await.expect("commit");
    let waiting = store.apps_with_pending_prunes(100, None).await.expect("prunes");
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].state.snapshot.app, app("cron"));
    // A sync that skipped a prune counts too; the word in a label does not.
    let skipped = parse_body(
        br#"{"app":{"metadata":{"name":"jobs","namespace":"argocd"},"status":{"sync":{"status":"OutOfSync"},
            "operationState":{"phase":"Succeeded","startedAt":"2026-01-01T00:00:00Z","syncResult":{"resources":[
              {"kind":"Job","name":"old","namespace":"billing","status":"PruneSkipped","message":"ignored (requires pruning)"}]}}}}}"#,
        64,
    )
    .expect("body");
    let labelled = parse_body(
        br#"{"app":{"metadata":{"name":"notes","namespace":"argocd","labels":{"note":"PruneSkipped"}},
            "status":{"sync":{"status":"Synced"}}}}"#,
        64,
    )
    .expect("body");
    let (Outcome::Changed { state: skipped, .. }, Outcome::Changed { state: labelled, .. }) =
        (apply(None, skipped, now), apply(None, labelled, now))
    else {
        panic!()
    };
    let mut tx = store.begin().await.expect("tx");
    Store::save_apps(&mut tx, &[("billing", &*skipped), ("notes", &*labelled)])
        .await
        .expect("save");
    tx.commit().await.expect("commit");
    let mut waiting: Vec<_> = store
        .apps_with_pending_prunes(100, None)
        .await
        .expect("prunes")
        .into_iter()
        .map(|a| a.state.snapshot.app.name)
        .collect();
    waiting.sort();
    assert_eq!(waiting, ["cron", "jobs"]);
    // An uncommitted transaction leaves nothing behind.
    let mut tx = store.begin().await.expect("tx");
    let ghost = {
        let mut s = newer.clone();
        s.snapshot.app = app("ghost");
        s
    };
    Store::save_apps(&mut tx, &[("p", &ghost)]).await.expect("save");
    drop(tx);
    assert!(store.app(&app("ghost")).await.expect("app").is_none());
}

async fn incidents_are_claimed_once_when_due(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let now = t("2026-01-01T00:00:00Z");
    let mut tx = store.begin().await.expect("tx");
    let id = Store::insert_incident(
        &mut tx,
        &view("fp1"),
        &app("a"),
        IncidentState::Pending,
        now,
        now + chrono::Duration::hours(1),
        None,
    )
    .await
    .expect("insert");
    tx.commit().await.expect("commit");
    let claim = |at: DateTime<Utc>| {
        let store = store.clone();
        async move {
            let mut tx = store.begin().await.expect("tx");
            let got = Store::claim_due_incidents(&mut tx, at, at + chrono::Duration::seconds(30), 10)
                .await
                .expect("claim");
            tx.commit().await.expect("commit");
            got
        }
    };
    assert!(
        claim(now + chrono::Duration::minutes(59)).await.is_empty(),
        "not due yet"
    );
    let due = now + chrono::Duration::minutes(61);
    let (a, b) = tokio::join!(claim(due), claim(due));
    assert_eq!(a.len() + b.len(), 1, "one claimer gets it");
    assert!(claim(due + chrono::Duration::seconds(10)).await.is_empty(), "leased");
    assert_eq!(
        claim(due + chrono::Duration::seconds(31)).await.len(),
        1,
        "an expired lease is taken over"
    );
    let mut tx = store.begin().await.expect("tx");
    Store::set_incident_state(&mut tx, id, IncidentState::Firing, due)
        .await
        .expect("fire");
    tx.commit().await.expect("commit");
    assert!(
        claim(due + chrono::Duration::hours(1)).await.is_empty(),
        "firing is not pending"
    );
    let open = {
        let mut tx = store.begin().await.expect("tx");
        Store::open_incidents(&mut tx, &app("a")).await.expect("open")
    };
    assert_eq!(open.len(), 1);
    assert_eq!(
        store
            .incidents(&IncidentFilter {
                state: Some(IncidentState::Firing),
                team: Some("pay".into()),
                limit: 10,
                ..Default::default()
            })
            .await
            .expect("list")
            .len(),
        1
    );
}

async fn deliveries_keep_their_order_and_leases_are_exclusive(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let now = t("2026-01-01T00:00:00Z");
    let mut tx = store.begin().await.expect("tx");
    for i in 0..3 {
        Store::enqueue(&mut tx, &delivery("thread-a", i), now)
            .await
            .expect("enqueue");
    }
    for i in 0..20 {
        Store::enqueue(&mut tx, &delivery(&format!("thread-{i}"), 0), now)
            .await
            .expect("enqueue");
    }
    tx.commit().await.expect("commit");
    let lease = now + chrono::Duration::seconds(60);
    let (a, b) = tokio::join!(
        store.claim_deliveries("one", now, lease, 15),
        store.claim_deliveries("two", now, lease, 15)
    );
    let (a, b) = (a.expect("claim"), b.expect("claim"));
    let ids: HashSet<i64> = a.iter().chain(b.iter()).map(|r| r.id).collect();
    assert_eq!(ids.len(), a.len() + b.len(), "no row is claimed twice");
    assert_eq!(ids.len(), 21, "the oldest row of each thread (thread-a once)");
    let thread_a: Vec<_> = a.iter().chain(b.iter()).filter(|r| r.order_key == "thread-a").collect();
    assert_eq!(thread_a.len(), 1);
    assert_eq!(thread_a[0].payload, "step-0");
    // Until step-0 is done, step-1 waits, even after the lease ends.
    assert!(
        store
            .claim_deliveries("three", now, lease, 50)
            .await
            .expect("claim")
            .is_empty()
    );
    store
        .delivered(thread_a[0], Some(&serde_json::json!({"ts": "1.2"})), now)
        .await
        .expect("done");
    let next = store.claim_deliveries("three", now, lease, 50).await.expect("claim");
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].payload, "step-1");
    assert_eq!(
        store.memo("r", "thread-a:1").await.expect("memo"),
        Some(serde_json::json!({"ts": "1.2"}))
    );
    // A lease that expired (a replica died) is taken over, with the attempt counted.
    let later = now + chrono::Duration::seconds(61);
    let again = store
        .claim_deliveries("four", later, later + chrono::Duration::seconds(60), 50)
        .await
        .expect("claim");
    assert!(again.iter().any(|r| r.id == next[0].id && r.attempts == 2));
}

async fn failures_retry_then_die_and_dead_rows_can_be_retried(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let now = t("2026-01-01T00:00:00Z");
    let mut tx = store.begin().await.expect("tx");
    let id = Store::enqueue(&mut tx, &delivery("t", 0), now).await.expect("enqueue");
    tx.commit().await.expect("commit");
    let lease = now + chrono::Duration::seconds(60);
    let row = store
        .claim_deliveries("w", now, lease, 1)
        .await
        .expect("claim")
        .remove(0);
    store
        .failed(row.id, "HTTP 503", Some(now + chrono::Duration::seconds(30)))
        .await
        .expect("retry later");
    assert!(
        store
            .claim_deliveries("w", now + chrono::Duration::seconds(29), lease, 1)
            .await
            .expect("c")
            .is_empty()
    );
    let row = store
        .claim_deliveries(
            "w",
            now + chrono::Duration::seconds(31),
            lease + chrono::Duration::seconds(31),
            1,
        )
        .await
        .expect("claim")
        .remove(0);
    assert_eq!(row.attempts, 2);
    assert_eq!(row.payload, "step-0", "a retry sends the same payload");
    store.failed(row.id, "HTTP 400: bad", None).await.expect("dead");
    let dead = store.outbox(Some(DeliveryState::Dead), 10, None).await.expect("dead");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].last_error.as_deref(), Some("HTTP 400: bad"));
    assert!(
        store
            .claim_deliveries("w", now + chrono::Duration::hours(1), lease, 1)
            .await
            .expect("c")
            .is_empty()
    );
    assert!(
        store
            .retry_dead(id, now + chrono::Duration::hours(1))
            .await
            .expect("retry")
    );
    assert!(!store.retry_dead(id, now).await.expect("retry"), "only dead rows");
    let row = store
        .claim_deliveries(
            "w",
            now + chrono::Duration::hours(1),
            now + chrono::Duration::hours(2),
            1,
        )
        .await
        .expect("claim");
    assert_eq!(row.len(), 1);
    assert_eq!(row[0].attempts, 1);
    assert_eq!(row[0].payload, "step-0", "and so does a dead delivery put back");
    store.release(row[0].id).await.expect("release");
    assert_eq!(
        store
            .claim_deliveries(
                "w",
                now + chrono::Duration::hours(1),
                now + chrono::Duration::hours(2),
                1
            )
            .await
            .expect("c")[0]
            .attempts,
        1,
        "a released lease does not count as an attempt"
    );
}

async fn groups_collect_members_and_schedule_flushes(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let now = t("2026-01-01T00:00:00Z");
    let timing = herald::configuration::GroupingSettings {
        group_wait: Duration::from_secs(30),
        group_interval: Duration::from_secs(300),
        ..Default::default()
    };
    let mut tx = store.begin().await.expect("tx");
    let mut ids = Vec::new();
    for i in 0..3 {
        let id = Store::insert_incident(
            &mut tx,
            &view(&format!("fp{i}")),
            &app(&format!("a{i}")),
            IncidentState::Firing,
            now,
            now,
            Some(now),
        )
        .await
        .expect("insert");
        join_group(&mut tx, ("chat", "team=pay"), id, IncidentState::Firing, now, &timing)
            .await
            .expect("group");
        ids.push(id);
    }
    tx.commit().await.expect("commit");
    let mut tx = store.begin().await.expect("tx");
    assert!(Store::claim_due_groups(&mut tx, now, 10).await.expect("c").is_empty());
    let due = Store::claim_due_groups(&mut tx, now + chrono::Duration::seconds(30), 10)
        .await
        .expect("c");
    assert_eq!(due.len(), 1);
    let members = Store::members(&mut tx, due[0].id).await.expect("members");
    assert_eq!(members.len(), 3);
    assert!(members.iter().all(|m| m.dirty && m.status == IncidentState::Firing));
    Store::finish_flush(&mut tx, due[0].id, true, 1, now + chrono::Duration::seconds(30), None)
        .await
        .expect("flush");
    // A resolve in an active group waits for group_interval after the last flush.
    join_group(
        &mut tx,
        ("chat", "team=pay"),
        ids[0],
        IncidentState::Resolved,
        now + chrono::Duration::seconds(40),
        &timing,
    )
    .await
    .expect("group");
    tx.commit().await.expect("commit");
    let mut tx = store.begin().await.expect("tx");
    assert!(
        Store::claim_due_groups(&mut tx, now + chrono::Duration::seconds(300), 10)
            .await
            .expect("c")
            .is_empty()
    );
    let due = Store::claim_due_groups(&mut tx, now + chrono::Duration::seconds(331), 10)
        .await
        .expect("c");
    assert_eq!(due.len(), 1);
    assert!(due[0].active);
    assert_eq!(
        Store::groups_of(&mut tx, ids[0]).await.expect("groups"),
        vec![("chat".to_string(), "team=pay".to_string())]
    );
    Store::finish_flush(&mut tx, due[0].id, true, 1, now + chrono::Duration::seconds(331), None)
        .await
        .expect("flush");
    assert_eq!(
        Store::members(&mut tx, due[0].id).await.expect("members").len(),
        2,
        "resolved members leave"
    );
    tx.commit().await.expect("commit");
}

async fn silences_expire(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let now = t("2026-01-01T00:00:00Z");
    let s = Silence {
        id: "s1".into(),
        matchers: vec![Matcher::new("team", "pay")],
        starts_at: now,
        ends_at: now + chrono::Duration::hours(1),
        created_by: "me".into(),
        comment: "c".into(),
        created_at: now,
    };
    store.add_silence(&s).await.expect("add");
    assert_eq!(store.silences(false, now).await.expect("list"), vec![s.clone()]);
    assert!(
        store
            .expire_silence("s1", now + chrono::Duration::minutes(5))
            .await
            .expect("expire")
    );
    assert!(
        !store
            .expire_silence("s1", now + chrono::Duration::minutes(6))
            .await
            .expect("expire")
    );
    assert!(
        store
            .silences(false, now + chrono::Duration::minutes(6))
            .await
            .expect("list")
            .is_empty()
    );
    assert_eq!(
        store
            .silences(true, now + chrono::Duration::minutes(6))
            .await
            .expect("list")
            .len(),
        1
    );
}

async fn migrations_are_idempotent(engine: &str) {
    let (store, db) = fresh(engine).await;
    store.ping().await.expect("ping");
    let again = Store::connect(&StorageSettings {
        url: SecretString::from(db.url.clone()),
        ..Default::default()
    })
    .await
    .expect("second start on the same database");
    again.ping().await.expect("ping");
}

/// The store as it was before Argo CD instances (migrations 1 to 6), with one Application, its timeline and an open
/// incident written the way that version wrote them (no instance anywhere, in the rows or in the JSON).
async fn store_before_instances(url: &str) {
    use sqlx::SqlSafeStr;
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    sqlx::any::install_default_drivers();
    let sqlite = url.starts_with("sqlite:");
    macro_rules! old {
        ($($v:literal $name:literal $file:literal),*) => {
            vec![$(Migration::new(
                $v,
                std::borrow::Cow::Borrowed($name),
                MigrationType::Simple,
                (if sqlite {
                    include_str!(concat!("../../migrations/sqlite/", $file))
                } else {
                    include_str!(concat!("../../migrations/postgres/", $file))
                })
                .into_sql_str(),
                false,
            )),*]
        };
    }
    let migrations = old!(
        1 "init" "0001_init.sql", 2 "lifecycle" "0002_lifecycle.sql", 3 "compact" "0003_compact.sql",
        4 "digests" "0004_digests.sql", 5 "listing_guard" "0005_listing_guard.sql",
        6 "outbox_thread" "0006_outbox_thread.sql"
    );
    let url = if sqlite {
        format!("{url}?mode=rwc")
    } else {
        url.to_string()
    };
    let pool = sqlx::AnyPool::connect(&url).await.expect("connect");
    let migrator = Migrator {
        migrations: std::borrow::Cow::Owned(migrations),
        ..Migrator::DEFAULT
    };
    migrator.run(&pool).await.expect("the old migrations");
    let now = t("2026-01-01T00:00:00Z");
    let snap = parse_body(
        br#"{"app":{"metadata":{"name":"pay","namespace":"argocd","labels":{"team":"p"}},"status":{"sync":{"status":"OutOfSync"},"health":{"status":"Healthy"}}}}"#,
        64,
    )
    .expect("body");
    let Outcome::Changed { state, .. } = apply(None, snap, now) else {
        panic!()
    };
    let mut old_state = serde_json::to_value(&*state).expect("json");
    old_state["snapshot"]["app"]
        .as_object_mut()
        .expect("app")
        .remove("instance");
    let ms = now.timestamp_millis();
    sqlx::query(sqlx::AssertSqlSafe(
        "INSERT INTO apps (namespace, name, uid, project, team, sync_status, health_status, sync_since, \
         health_since, observed_at, last_seen, content_hash, state_json, version) \
         VALUES ('argocd', 'pay', NULL, 'default', 'p', 'OutOfSync', 'Healthy', $1, $1, $1, $1, $2, $3, 1)",
    ))
    .bind(ms)
    .bind(&state.content_hash)
    .bind(old_state.to_string())
    .execute(&pool)
    .await
    .expect("old app row");
    sqlx::query(sqlx::AssertSqlSafe(
        "INSERT INTO transitions (namespace, name, at, field, from_value, to_value) \
         VALUES ('argocd', 'pay', $1, 'sync', NULL, 'OutOfSync'), ('argocd', 'pay', $1, 'health', NULL, 'Healthy'), \
         ('argocd', 'pay', $2, 'operation', 'Running', 'Succeeded')",
    ))
    .bind(ms)
    .bind(ms + 1)
    .execute(&pool)
    .await
    .expect("old transition");
    let mut old_view = serde_json::to_value(view(OLD_FINGERPRINT)).expect("view");
    old_view.as_object_mut().expect("view").remove("instance");
    sqlx::query(sqlx::AssertSqlSafe(
        "INSERT INTO incidents (fingerprint, kind, namespace, name, team, severity, state, since, fire_at, \
         fired_at, notified, view_json) \
         VALUES ($1, 'out_of_sync', 'argocd', 'pay', 'p', 'warning', 'firing', $2, $2, $2, 1, $3)",
    ))
    .bind(OLD_FINGERPRINT)
    .bind(ms)
    .bind(old_view.to_string())
    .execute(&pool)
    .await
    .expect("old incident");
    pool.close().await;
}

/// What the version before instances computed for `argocd/pay`'s OutOfSync: sha256("argocd/pay|out_of_sync|"),
/// its first 10 bytes in hex.
const OLD_FINGERPRINT: &str = "2d6371b3d376a838e6d5";

async fn an_upgrade_moves_everything_to_the_default_instance(engine: &str) {
    let db = fresh_db(engine, "upgrade").await;
    store_before_instances(&db.url).await;
    let store = Store::connect(&StorageSettings {
        url: SecretString::from(db.url.clone()),
        ..Default::default()
    })
    .await
    .expect("migration 7 on the old store");
    let pay = AppId::new("argocd", "pay");
    assert_eq!(pay.instance, "default");
    let rec = store
        .app(&pay)
        .await
        .expect("read")
        .expect("the old Application is the default instance's");
    assert_eq!(rec.state.snapshot.app, pay);
    assert_eq!(rec.state.snapshot.sync_status.as_str(), "OutOfSync");
    let timeline: Vec<(String, Option<String>, String)> = (store.timeline(&pay, 10).await.expect("timeline"))
        .into_iter()
        .map(|t| (t.field, t.from, t.to))
        .collect();
    let entry =
        |field: &str, from: Option<&str>, to: &str| (field.to_string(), from.map(str::to_string), to.to_string());
    assert_eq!(
        timeline,
        [
            entry("sync", None, "OutOfSync"),
            entry("health", None, "Healthy"),
            entry("operation", Some("Running"), "Succeeded")
        ],
        "its timeline came along, in order (a row per change since migration 17)"
    );
    let rows = store.timeline_before(&pay, HistoryBound::NONE, 10).await.expect("rows");
    assert_eq!(rows.len(), 3);
    assert!(
        rows[1].0 - rows[2].0 == 1 && rows[0].0 - rows[1].0 > 1,
        "the first two share a row: {rows:?}"
    );
    let live = store.live_apps("default", &[]).await.expect("live");
    assert_eq!(live.len(), 1);
    assert!(
        store.live_apps("eu", &[]).await.expect("live").is_empty(),
        "nothing is another instance's"
    );
    // Its incident is still open, and the fingerprint the next body computes is the stored one: no second ticket.
    let mut tx = store.begin().await.expect("tx");
    let open = Store::open_incidents(&mut tx, &pay).await.expect("open");
    tx.commit().await.expect("commit");
    assert_eq!(
        open.len(),
        1,
        "the open incident belongs to the default instance's Application"
    );
    assert_eq!(open[0].app, pay);
    assert_eq!(open[0].view.instance, "default");
    assert_eq!(open[0].fingerprint, OLD_FINGERPRINT);
    assert_eq!(
        herald::incidents::fingerprint(&pay, Kind::OutOfSync, ""),
        OLD_FINGERPRINT,
        "the default instance keeps its fingerprints"
    );
    // The same name in another instance is another Application, with another fingerprint.
    let eu = AppId::of("eu", "argocd", "pay");
    assert!(store.app(&eu).await.expect("read").is_none());
    assert_ne!(
        herald::incidents::fingerprint(&eu, Kind::OutOfSync, ""),
        OLD_FINGERPRINT
    );
}

/// One replica's send of a digest slot: the claim, its delivery and the slot's end in one transaction.
async fn send_digest_slot(store: &Store, slot: DateTime<Utc>, owner: &str) -> bool {
    let now = slot + chrono::Duration::seconds(1);
    let mut tx = store.begin().await.expect("begin");
    let lease = now + chrono::Duration::minutes(5);
    let got = Store::claim_digest_slot(&mut tx, "pay", slot, owner, now, lease)
        .await
        .expect("claim");
    if got {
        Store::enqueue(&mut tx, &delivery(&format!("chat:digest:pay:{owner}"), 0), now)
            .await
            .expect("enqueue");
        Store::finish_digest_slot(&mut tx, "pay", slot, SlotState::Sent, now)
            .await
            .expect("finish");
    }
    tx.commit().await.expect("commit");
    got
}

async fn a_digest_slot_is_claimed_once_with_its_deliveries(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let slot = t("2026-10-23T07:00:00Z");

    // Two replicas at once: one gets the slot, and only its delivery is queued.
    let (a, b) = tokio::join!(
        send_digest_slot(&store, slot, "replica-a"),
        send_digest_slot(&store, slot, "replica-b")
    );
    assert!(a ^ b, "exactly one replica claims the slot (a: {a}, b: {b})");
    assert_eq!(store.outbox(None, 10, None).await.expect("outbox").len(), 1);
    assert!(
        !send_digest_slot(&store, slot, "replica-c").await,
        "a sent slot stays sent"
    );
    let row = store.digest_slot("pay", slot).await.expect("read").expect("a row");
    assert_eq!(row.state, SlotState::Sent);
    assert_eq!(row.sent_at, Some(slot + chrono::Duration::seconds(1)));

    // A claim rolled back (a crash before the commit) leaves nothing behind.
    let next = slot + chrono::Duration::days(1);
    let mut tx = store.begin().await.expect("begin");
    assert!(
        Store::claim_digest_slot(&mut tx, "pay", next, "dying", next, next + chrono::Duration::minutes(5))
            .await
            .expect("claim")
    );
    drop(tx);
    assert!(store.digest_slot("pay", next).await.expect("read").is_none());

    // A claim left behind is held until its lease ends, then taken over.
    let mut tx = store.begin().await.expect("begin");
    let lease = next + chrono::Duration::minutes(5);
    assert!(
        Store::claim_digest_slot(&mut tx, "pay", next, "stuck", next, lease)
            .await
            .expect("claim")
    );
    tx.commit().await.expect("commit");
    let mut tx = store.begin().await.expect("begin");
    let early = next + chrono::Duration::minutes(1);
    assert!(
        !Store::claim_digest_slot(&mut tx, "pay", next, "other", early, early)
            .await
            .expect("claim")
    );
    let late = lease + chrono::Duration::seconds(1);
    assert!(
        Store::claim_digest_slot(&mut tx, "pay", next, "other", late, late)
            .await
            .expect("claim")
    );
    Store::finish_digest_slot(&mut tx, "pay", next, SlotState::Skipped, late)
        .await
        .expect("finish");
    tx.commit().await.expect("commit");
    let slots = store.digest_slots("pay", 10).await.expect("slots");
    let states: Vec<(SlotState, &str)> = slots.iter().map(|s| (s.state, s.claimed_by.as_str())).collect();
    assert_eq!(states[0], (SlotState::Skipped, "other"));
    assert_eq!(slots.len(), 2);
}

/// How long a run of raw bodies waits for its next body, at the default retention (a week): an hour.
const GAP: chrono::Duration = chrono::Duration::hours(1);

/// The `k`-th body Argo CD might send for `name`: the same Application, its status and revision moving along.
fn raw_body(name: &str, k: usize) -> String {
    let resources: Vec<_> = (0..12)
        .map(|r| {
            serde_json::json!({"kind": "Deployment", "name": format!("{name}-{r}"), "namespace": "shop",
                "status": if (k + r).is_multiple_of(3) { "OutOfSync" } else { "Synced" },
                "health": {"status": if k.is_multiple_of(4) { "Progressing" } else { "Healthy" }}})
        })
        .collect();
    let app = serde_json::json!({
        "metadata": {"name": name, "namespace": "argocd", "uid": format!("uid-{name}")},
        "status": {"sync": {"status": if k.is_multiple_of(3) { "OutOfSync" } else { "Synced" }, "revision": format!("rev-{k}")},
                   "resources": resources}
    });
    bare_envelope(app, &format!("2026-01-01T00:{:02}:00Z", k % 60)).to_string()
}

/// Stores the bodies `ks` of `name` (at minute `k` each) in one transaction, continuing the runs in `chains`.
async fn store_raws(store: &Store, chains: &mut HashMap<AppId, RawChain>, name: &str, ks: &[usize]) {
    let at = |k: usize| t("2026-01-01T00:00:00Z") + chrono::Duration::minutes(k as i64);
    let rows: Vec<_> = ks
        .iter()
        .map(|k| (app(name), at(*k), "changed", raw_body(name, *k)))
        .collect();
    let mut tx = store.begin().await.expect("tx");
    Store::add_raws(&mut tx, &rows, chains, GAP, &mut DictionaryUse::default())
        .await
        .expect("raw bodies");
    tx.commit().await.expect("commit");
}

/// The bodies stored for `name`, oldest first.
async fn raws_of(store: &Store, name: &str) -> Vec<String> {
    let mut bodies: Vec<String> = (store
        .raw_bodies(&app(name), 1000)
        .await
        .expect("raw bodies")
        .into_iter())
    .map(|(_, body)| body)
    .collect();
    bodies.reverse();
    bodies
}

async fn a_run_of_raw_bodies_reads_back_byte_exact_at_every_page_size(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let mut chains = HashMap::new();
    let n = 2 * MAX_CHAIN + 5;
    // One at a time, several in one transaction, and another Application's in between.
    for k in 0..n {
        if k.is_multiple_of(5) {
            store_raws(&store, &mut chains, "ledger", &[k]).await;
        }
        if k.is_multiple_of(7) && k + 1 < n {
            store_raws(&store, &mut chains, "pay", &[k, k + 1]).await;
        } else if k % 7 != 1 {
            store_raws(&store, &mut chains, "pay", &[k]).await;
        }
    }
    let expected: Vec<String> = (0..n).map(|k| raw_body("pay", k)).collect();
    assert_eq!(raws_of(&store, "pay").await, expected, "every body, byte for byte");
    for limit in 1..=n {
        let page = store.raw_bodies(&app("pay"), limit as i64).await.expect("page");
        let bodies: Vec<&String> = page.iter().map(|(_, b)| b).collect();
        let newest: Vec<&String> = expected.iter().rev().take(limit).collect();
        assert_eq!(
            bodies, newest,
            "the newest {limit}, whatever run the oldest of them is in"
        );
    }
    let ledger: Vec<String> = (0..n)
        .filter(|k| k.is_multiple_of(5))
        .map(|k| raw_body("ledger", k))
        .collect();
    assert_eq!(raws_of(&store, "ledger").await, ledger);
    // A writer that does not remember the runs (another process) starts new ones; all stay readable.
    store_raws(&store, &mut HashMap::new(), "pay", &[n]).await;
    assert_eq!(raws_of(&store, "pay").await.last(), Some(&raw_body("pay", n)));
}

async fn the_purge_removes_a_run_of_raw_bodies_only_whole(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let minute = |k: i64| t("2026-01-01T00:00:00Z") + chrono::Duration::minutes(k);
    let mut chains = HashMap::new();
    // pay: one run from minute 0 to 5. ledger: a run at minutes 0-1, then, after more than the gap, another at 200.
    // Stored in the order they arrive (the purge finds rows by id, which grows with the time they were received).
    store_raws(&store, &mut chains, "pay", &[0, 1, 2]).await;
    store_raws(&store, &mut chains, "ledger", &[0, 1]).await;
    store_raws(&store, &mut chains, "pay", &[3, 4, 5]).await;
    store_raws(&store, &mut chains, "ledger", &[200]).await;
    // The cut falls inside pay's run: its first bodies are past the retention, but the later ones need them.
    let purged = store.purge_raw(minute(3), GAP).await.expect("purge");
    assert_eq!(
        purged, 2,
        "ledger's bodies of minutes 0 and 1, a run wholly past the retention"
    );
    let pay: Vec<String> = (0..6).map(|k| raw_body("pay", k)).collect();
    assert_eq!(
        raws_of(&store, "pay").await,
        pay,
        "a run in use is kept whole, and reads back"
    );
    assert_eq!(raws_of(&store, "ledger").await, vec![raw_body("ledger", 200)]);
    // Once all of it is past the retention, the run goes.
    assert_eq!(store.purge_raw(minute(6), GAP).await.expect("purge"), 6);
    assert!(raws_of(&store, "pay").await.is_empty());
    assert_eq!(raws_of(&store, "ledger").await, vec![raw_body("ledger", 200)]);
    // Every row past the retention, none to keep: all go.
    assert_eq!(store.purge_raw(minute(300), GAP).await.expect("purge"), 1);
    assert!(raws_of(&store, "ledger").await.is_empty());
}

async fn raw_bodies_stored_before_runs_stay_readable(engine: &str) {
    let (store, db) = fresh(engine).await;
    // Rows as earlier versions wrote them: the body as text, then zstd-compressed; neither in a run.
    let url = if engine == "sqlite" {
        format!("{}?mode=rw", db.url)
    } else {
        db.url.clone()
    };
    let pool = sqlx::AnyPool::connect(&url).await.expect("connect");
    let at = t("2026-01-01T00:00:00Z").timestamp_millis();
    let insert = "INSERT INTO raw_events (received_at, instance, namespace, name, outcome, body, body_z) \
                  VALUES ($1, 'default', 'argocd', 'pay', 'changed', $2, $3)";
    sqlx::query(insert)
        .bind(at)
        .bind(raw_body("pay", 0))
        .bind(None::<Vec<u8>>)
        .execute(&pool)
        .await
        .expect("a text row");
    let compressed = zstd::bulk::compress(raw_body("pay", 1).as_bytes(), 3).expect("zstd");
    sqlx::query(insert)
        .bind(at + 60_000)
        .bind("")
        .bind(compressed)
        .execute(&pool)
        .await
        .expect("a compressed row");
    pool.close().await;
    // Then this version's, after them.
    store_raws(&store, &mut HashMap::new(), "pay", &[2, 3, 4]).await;
    let pay: Vec<String> = (0..5).map(|k| raw_body("pay", k)).collect();
    assert_eq!(raws_of(&store, "pay").await, pay);
    let newest = store.raw_bodies(&app("pay"), 4).await.expect("page");
    assert_eq!(newest.last().map(|(_, b)| b), Some(&raw_body("pay", 1)));
    // The old rows are purged by their time alone.
    assert_eq!(store.purge_raw(t("2026-01-01T00:01:30Z"), GAP).await.expect("purge"), 2);
    assert_eq!(raws_of(&store, "pay").await, pay[2..].to_vec());
}

/// Stores `rows` in one transaction as the writer does: with the dictionary `dictionaries` gives for the batch
/// (retention 7 days), the use given back once committed.
async fn store_with_dictionaries(
    store: &Store,
    dictionaries: &mut Dictionaries,
    chains: &mut HashMap<AppId, RawChain>,
    rows: &[(AppId, DateTime<Utc>, &str, String)],
    now: DateTime<Utc>,
) {
    let mut used = dictionaries.for_batch(now, Duration::from_secs(7 * 24 * 3600));
    let mut tx = store.begin().await.expect("tx");
    Store::add_raws(&mut tx, rows, chains, GAP, &mut used)
        .await
        .expect("raw bodies");
    tx.commit().await.expect("commit");
    dictionaries.committed(used);
}

async fn runs_started_with_a_dictionary_read_back_and_the_purge_keeps_a_dictionary_in_use(engine: &str) {
    let (store, db) = fresh(engine).await;
    let start = t("2026-01-01T00:00:00Z");
    let mut dictionaries = Dictionaries::default();
    let mut chains = HashMap::new();
    let names = |prefix: &str| (0..10).map(|i| format!("{prefix}-{i}")).collect::<Vec<_>>();
    // Each batch: one body each of ten Applications, committed, its use given back. The first has no dictionary
    // yet: every body compressed alone, and kept to learn from. The next: other Applications, starting their runs
    // against a dictionary made of the first; then shop's second bodies, which continue their runs.
    for (prefix, k) in [("shop", 1), ("cart", 2), ("shop", 3)] {
        let rows: Vec<_> = (names(prefix).iter())
            .map(|name| {
                (
                    app(name),
                    start + chrono::Duration::minutes(k),
                    "changed",
                    raw_body(name, k as usize),
                )
            })
            .collect();
        store_with_dictionaries(&store, &mut dictionaries, &mut chains, &rows, start).await;
    }
    for name in names("shop") {
        assert_eq!(
            raws_of(&store, &name).await,
            vec![raw_body(&name, 1), raw_body(&name, 3)]
        );
    }
    for name in names("cart") {
        assert_eq!(raws_of(&store, &name).await, vec![raw_body(&name, 2)], "byte for byte");
    }
    let url = if engine == "sqlite" {
        format!("{}?mode=rw", db.url)
    } else {
        db.url.clone()
    };
    let pool = sqlx::AnyPool::connect(&url).await.expect("connect");
    let sizes = |prefix: &'static str| {
        let pool = pool.clone();
        async move {
            let row = sqlx::query(
                "SELECT COUNT(dict) AS with_dict, SUM(LENGTH(body_z)) AS bytes FROM raw_events \
                 WHERE name LIKE $1 AND chain IS NOT NULL",
            )
            .bind(format!("{prefix}-%"))
            .fetch_one(&pool)
            .await
            .expect("sizes");
            (row.get::<i64, _>("with_dict"), row.get::<i64, _>("bytes"))
        }
    };
    let (cart_with, cart_bytes) = sizes("cart").await;
    let shop_first: i64 = sqlx::query(
        "SELECT SUM(LENGTH(body_z)) AS bytes FROM raw_events WHERE name LIKE 'shop-%' AND dict IS NULL \
         AND received_at = $1",
    )
    .bind((start + chrono::Duration::minutes(1)).timestamp_millis())
    .fetch_one(&pool)
    .await
    .expect("sizes")
    .get("bytes");
    assert_eq!(cart_with, 10, "every run start against the dictionary");
    assert!(
        cart_bytes * 2 < shop_first,
        "bodies like those learnt take a fraction: {cart_bytes} against {shop_first} bytes"
    );
    let dictionary_count = || {
        let pool = pool.clone();
        async move {
            sqlx::query("SELECT COUNT(*) AS n FROM raw_dictionaries")
                .fetch_one(&pool)
                .await
                .expect("count")
                .get::<i64, _>("n")
        }
    };
    assert_eq!(dictionary_count().await, 1, "stored once, with the rows that use it");
    // The purge keeps a dictionary a row uses, however old; once the rows are gone, it goes.
    let far = start + chrono::Duration::days(365);
    assert_eq!(store.purge_raw_dictionaries(far).await.expect("purge"), 0);
    store.purge_raw(far, GAP).await.expect("purge");
    assert_eq!(
        store.purge_raw_dictionaries(start).await.expect("purge"),
        0,
        "not made before"
    );
    assert_eq!(store.purge_raw_dictionaries(far).await.expect("purge"), 1);
    assert_eq!(dictionary_count().await, 0);
    pool.close().await;
}

/// A body of `name` in variant `k`: 40 resources whose image digests share nothing from one variant to the next.
fn variant_body(name: &str, k: u64) -> String {
    let resources: Vec<_> = (0..40u64)
        .map(|r| {
            let digest = format!("{:016x}", (k * 1000 + r + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            serde_json::json!({"kind": "Deployment", "name": format!("svc-{r}"), "namespace": "shop",
                "status": "Synced", "image": format!("registry.example.com/svc@sha256:{digest}")})
        })
        .collect();
    serde_json::json!({"app": {"metadata": {"name": name}, "status": {"resources": resources}}}).to_string()
}

async fn a_body_its_run_predicts_badly_starts_a_new_run_against_the_dictionary(engine: &str) {
    let (store, db) = fresh(engine).await;
    let start = t("2026-01-01T00:00:00Z");
    let mut dictionaries = Dictionaries::default();
    let mut chains = HashMap::new();
    // Variant 7 (sent by "seed") is learnt; "pay" then sends variant 8, then variant 7: its run's last body
    // predicts the second badly, the dictionary well.
    let sent = [("seed", 7), ("pay", 8), ("pay", 7)];
    for (i, (name, k)) in sent.into_iter().enumerate() {
        let rows = [(
            app(name),
            start + chrono::Duration::minutes(i as i64),
            "changed",
            variant_body(name, k),
        )];
        store_with_dictionaries(&store, &mut dictionaries, &mut chains, &rows, start).await;
    }
    assert_eq!(
        raws_of(&store, "pay").await,
        vec![variant_body("pay", 8), variant_body("pay", 7)]
    );
    let url = if engine == "sqlite" {
        format!("{}?mode=rw", db.url)
    } else {
        db.url.clone()
    };
    let pool = sqlx::AnyPool::connect(&url).await.expect("connect");
    let rows =
        sqlx::query("SELECT chain, dict, LENGTH(body_z) AS bytes FROM raw_events WHERE name = 'pay' ORDER BY id")
            .fetch_all(&pool)
            .await
            .expect("rows");
    let chain = |k: usize| rows[k].get::<i64, _>("chain");
    let dict = |k: usize| rows[k].get::<Option<i64>, _>("dict");
    assert!(
        dict(0).is_some() && dict(1).is_some(),
        "both run starts, against the dictionary"
    );
    assert_ne!(chain(0), chain(1), "a new run, not a difference from variant 8");
    let bytes = rows[1].get::<i64, _>("bytes");
    assert!(bytes * 10 < variant_body("pay", 7).len() as i64, "{bytes} bytes");
    // A store whose dictionary row went missing (damaged, or wiped by hand): its bodies read as an error naming
    // the dictionary, not as other bytes.
    sqlx::query("DELETE FROM raw_dictionaries")
        .execute(&pool)
        .await
        .expect("delete");
    let err = store
        .raw_bodies(&app("pay"), 10)
        .await
        .expect_err("no dictionary, no body");
    assert!(err.to_string().contains("dictionary"), "{err}");
    pool.close().await;
}

async fn resolved_incidents_and_the_timeline_are_purged_after_the_history_retention(engine: &str) {
    let (store, _db) = fresh(engine).await;
    let day = |d: i64| t("2026-01-01T00:00:00Z") + chrono::Duration::days(d);
    let mut tx = store.begin().await.expect("tx");
    let mut ids = Vec::new();
    // Resolved on day 1 (purged), resolved on day 10 (kept), still firing since day 0 (kept).
    for (fp, resolved) in [("old", Some(1)), ("recent", Some(10)), ("open", None)] {
        let id = Store::insert_incident(
            &mut tx,
            &view(fp),
            &app("a"),
            IncidentState::Pending,
            day(0),
            day(0),
            None,
        )
        .await
        .expect("insert");
        Store::set_incident_state(&mut tx, id, IncidentState::Firing, day(0))
            .await
            .expect("fire");
        join_group(
            &mut tx,
            ("r", "k"),
            id,
            IncidentState::Firing,
            day(0),
            &Default::default(),
        )
        .await
        .expect("group");
        Store::add_escalation(&mut tx, id, 1, 60, day(0), &["pager".to_string()], None)
            .await
            .expect("escalation");
        if let Some(d) = resolved {
            Store::set_incident_state(&mut tx, id, IncidentState::Resolved, day(d))
                .await
                .expect("resolve");
        }
        ids.push(id);
    }
    let change = |to: &str| Transition {
        field: Field::Sync,
        from: None,
        to: to.into(),
    };
    let timeline: Vec<_> = [(0, "OutOfSync"), (2, "Synced"), (9, "OutOfSync"), (11, "Synced")]
        .into_iter()
        .map(|(d, to)| (app("a"), day(d), vec![change(to)]))
        .collect();
    Store::add_transitions_many(&mut tx, &timeline).await.expect("timeline");
    tx.commit().await.expect("commit");
    // The history before day 5 goes: one incident (with its group place and escalation), two timeline entries.
    assert_eq!(store.purge_history(day(5)).await.expect("purge"), 3);
    let mut tx = store.begin().await.expect("tx");
    assert!(Store::incident(&mut tx, ids[0]).await.expect("read").is_none());
    assert!(Store::incident(&mut tx, ids[1]).await.expect("read").is_some());
    assert!(
        Store::incident(&mut tx, ids[2]).await.expect("read").is_some(),
        "open: kept however old"
    );
    tx.commit().await.expect("commit");
    // Its escalation went too; the kept one's is there.
    assert!(store.next_escalation(ids[0]).await.expect("read").is_none());
    assert!(store.next_escalation(ids[1]).await.expect("read").is_some());
    let groups = |id: i64| {
        let store = store.clone();
        async move {
            let mut tx = store.begin().await.expect("tx");
            let groups = Store::groups_of(&mut tx, id).await.expect("groups");
            tx.commit().await.expect("commit");
            groups
        }
    };
    assert!(groups(ids[0]).await.is_empty(), "its place in the group went with it");
    assert!(!groups(ids[1]).await.is_empty());
    let left: Vec<String> = (store.timeline(&app("a"), 10).await.expect("timeline").into_iter())
        .map(|e| e.to)
        .collect();
    assert_eq!(left, ["OutOfSync", "Synced"], "days 9 and 11");
    // Nothing more to purge: nothing goes.
    assert_eq!(store.purge_history(day(5)).await.expect("purge"), 0);
    // Every entry past the retention: the rest of the timeline goes (and the incident resolved on day 11).
    assert!(store.purge_history(day(30)).await.expect("purge") >= 2);
    assert!(store.timeline(&app("a"), 10).await.expect("timeline").is_empty());
}

/// A delivery as `payload` says: a notification with a title and its incidents' fingerprints.
fn notification(title: &str, fingerprints: &[&str]) -> String {
    let incidents: Vec<serde_json::Value> = fingerprints
        .iter()
        .map(|f| serde_json::json!({"fingerprint": f}))
        .collect();
    serde_json::json!({"title": title, "incidents": incidents, "body": "x".repeat(20_000)}).to_string()
}

async fn payloads_live_out_of_their_rows_and_rows_queued_before_still_send_list_and_purge(engine: &str) {
    let (store, db) = fresh(engine).await;
    let now = t("2026-01-01T00:00:00Z");
    // A row as the version before wrote it: the payload in the row, no headline.
    let url = if engine == "sqlite" {
        format!("{}?mode=rw", db.url)
    } else {
        db.url.clone()
    };
    let pool = sqlx::AnyPool::connect(&url).await.expect("connect");
    let old = notification("payments is OutOfSync", &["aa11"]);
    sqlx::query(
        "INSERT INTO outbox (receiver, order_key, thread_key, action, payload, state, attempts, due_at, created_at) \
         VALUES ('r', 'old', 'old:1', 'open', $1, 'pending', 0, $2, $2)",
    )
    .bind(&old)
    .bind(now.timestamp_millis())
    .execute(&pool)
    .await
    .expect("an old row");
    // Then this version's.
    let new = notification("ledger sync failed", &["bb22", "cc33"]);
    let mut tx = store.begin().await.expect("tx");
    let d = NewDelivery {
        payload: new.clone(),
        headline: Headline::of_payload(&new),
        ..delivery("new", 0)
    };
    Store::enqueue(&mut tx, &d, now).await.expect("enqueue");
    tx.commit().await.expect("commit");
    let (in_row,): (String,) = sqlx::query_as("SELECT payload FROM outbox WHERE order_key = 'new'")
        .fetch_one(&pool)
        .await
        .expect("row");
    assert_eq!(in_row, "", "the new row holds no payload");
    // The list: headlines, from the row's columns or from the old row's payload; no payloads.
    let listed = store.outbox_headlines(None, 10, None).await.expect("list");
    let heads: Vec<_> = listed.iter().map(|l| l.headline.clone().expect("headline")).collect();
    assert_eq!(heads[0].title, "ledger sync failed");
    assert_eq!(heads[0].fingerprints(), vec!["bb22", "cc33"]);
    assert_eq!(heads[1].title, "payments is OutOfSync");
    assert_eq!(heads[1].fingerprints(), vec!["aa11"]);
    assert!(listed.iter().all(|l| l.delivery.payload.is_empty()));
    // Every other read has the whole payload: the worker's claim, the full list.
    let claimed = store
        .claim_deliveries("me", now, now + chrono::Duration::seconds(30), 10)
        .await
        .expect("claim");
    let mut payloads: Vec<&str> = claimed.iter().map(|r| r.payload.as_str()).collect();
    payloads.sort();
    let mut want = vec![new.as_str(), old.as_str()];
    want.sort();
    assert_eq!(payloads, want);
    let full = store.outbox(None, 10, None).await.expect("rows");
    assert_eq!(full[0].payload, new);
    assert_eq!(full[1].payload, old);
    // Delivered and purged: the payload goes with its row.
    for r in &claimed {
        store.delivered(r, None, now).await.expect("done");
    }
    assert_eq!(
        store
            .purge_delivered(now + chrono::Duration::seconds(1))
            .await
            .expect("purge"),
        2
    );
    let (left,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM outbox_payloads")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(left, 0);
    pool.close().await;
}

/// An incident joins the (receiver, key) group as the pipeline joins one: at the flush `next_flush_at` plans from
/// what the group's row says.
async fn join_group(
    tx: &mut herald::store::WriteTx,
    (receiver, key): (&str, &str),
    id: i64,
    status: IncidentState,
    now: DateTime<Utc>,
    timing: &herald::configuration::GroupingSettings,
) -> Result<(), herald::store::StoreError> {
    let existing = Store::group_schedule(tx, receiver, key).await?;
    let next = herald::routing::grouping::next_flush_at(existing, timing, now);
    Store::add_to_group(tx, receiver, key, id, status, next).await
}
