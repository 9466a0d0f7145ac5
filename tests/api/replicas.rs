//! Two replicas on one PostgreSQL (`HERALD_TEST_POSTGRES_URL`, started by scripts/test), each with its own batch
//! writer and its own memory of the Applications: neither answers from, nor writes over, a state the other changed.
//! And what the writer keeps only in memory for a while — when duplicates were last seen — reaches the store.

use std::sync::Arc;

use herald::argocd::{AppId, parse_body};
use herald::clock::{ManualClock, SystemClock};
use herald::configuration::{Settings, StorageSettings};
use herald::pipeline::{IngestOutcome, Pipeline};
use herald::store::Store;
use secrecy::SecretString;
use sqlx::{Connection, Executor};

use crate::argocd_bodies::bare_envelope;
use crate::wait;

/// A fresh database on the test PostgreSQL, and its URL.
async fn fresh_database() -> String {
    let base = std::env::var("HERALD_TEST_POSTGRES_URL")
        .expect("HERALD_TEST_POSTGRES_URL is not set: run the suite with scripts/test, which starts PostgreSQL");
    let name = format!("herald_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&base).await.expect("connect to PostgreSQL");
    conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .expect("create database");
    match base.rsplit_once('/') {
        Some((prefix, _)) => format!("{prefix}/{name}"),
        None => panic!("bad URL {base}"),
    }
}

async fn store(url: &str) -> Store {
    let storage = StorageSettings {
        url: SecretString::from(url.to_string()),
        max_connections: 4,
        ..Default::default()
    };
    Store::connect(&storage).await.expect("connect and migrate")
}

/// One replica: its own connections, its own pipeline (writer and cache).
async fn replica(url: &str) -> Pipeline {
    let settings = Arc::new(Settings::from_yaml("").expect("defaults"));
    Pipeline::new(settings, store(url).await, Arc::new(SystemClock))
}

fn body(sync: &str, second: u32) -> herald::argocd::Snapshot {
    parse_body(body_text(sync, second).as_bytes(), 64).expect("valid body")
}

fn body_text(sync: &str, second: u32) -> String {
    let app = serde_json::json!({
        "metadata": {"name": "pay", "namespace": "argocd", "uid": "uid-pay"},
        "status": {"sync": {"status": sync}, "health": {"status": "Healthy"}}
    });
    bare_envelope(app, &format!("2026-01-01T10:{:02}:{:02}Z", second / 60, second % 60)).to_string()
}

fn pay() -> AppId {
    AppId::new("argocd", "pay")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alternating_bodies_on_two_replicas_each_see_what_the_other_wrote() {
    let url = fresh_database().await;
    let (a, b) = (replica(&url).await, replica(&url).await);
    let mut expected_from = None;
    for i in 0..12u32 {
        // Each replica sees every other body: its own memory is one step behind each time.
        let (replica, sync) = if i % 2 == 0 { (&a, "Synced") } else { (&b, "OutOfSync") };
        let summary = replica.ingest(body(sync, i), None).await.expect("ingest");
        assert_eq!(
            summary.outcome,
            IngestOutcome::Changed,
            "body {i}: the other replica's write is the state compared with"
        );
        let sync_change = summary
            .transitions
            .iter()
            .find(|t| t.field.as_str() == "sync")
            .expect("a sync transition");
        assert_eq!(sync_change.from.as_deref(), expected_from, "body {i}");
        assert_eq!(sync_change.to, sync);
        expected_from = Some(sync);
    }
    // The last body (OutOfSync, from b) again on a: a duplicate; an older one: stale — on both replicas.
    assert_eq!(
        a.ingest(body("OutOfSync", 11), None).await.expect("ingest").outcome,
        IngestOutcome::Duplicate
    );
    assert_eq!(
        b.ingest(body("OutOfSync", 11), None).await.expect("ingest").outcome,
        IngestOutcome::Duplicate
    );
    assert_eq!(
        a.ingest(body("Synced", 10), None).await.expect("ingest").outcome,
        IngestOutcome::Stale
    );
    let stored = a.app(&pay()).await.expect("read").expect("stored");
    assert_eq!(stored.state.snapshot.sync_status.as_str(), "OutOfSync");
    let syncs = a
        .timeline(&pay(), 100)
        .await
        .expect("timeline")
        .into_iter()
        .filter(|t| t.field == "sync")
        .count();
    assert_eq!(syncs, 12, "one sync transition per change, none twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_bodies_written_by_two_replicas_in_turn_all_read_back() {
    let url = fresh_database().await;
    let (a, b) = (replica(&url).await, replica(&url).await);
    let mut sent = Vec::new();
    // Two bodies on one replica, two on the other: each stores its second as a difference from its first, and
    // never one from a body the other replica wrote after it.
    for i in 0..12u32 {
        let replica = if (i / 2) % 2 == 0 { &a } else { &b };
        let sync = if i % 2 == 0 { "Synced" } else { "OutOfSync" };
        let text = body_text(sync, i);
        let summary = (replica.ingest(body(sync, i), Some(text.clone().into())).await).expect("ingest");
        assert_eq!(summary.outcome, IngestOutcome::Changed, "body {i}");
        sent.push(text);
    }
    sent.reverse();
    for replica in [&a, &b] {
        let stored: Vec<String> = (replica.raw_bodies(&pay(), 100).await.expect("raw bodies").into_iter())
            .map(|(_, body)| body)
            .collect();
        assert_eq!(stored, sent, "every body, newest first, byte for byte");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_bodies_on_two_replicas_lose_no_update() {
    let url = fresh_database().await;
    let (a, b) = (replica(&url).await, replica(&url).await);
    // 40 bodies, sent at the same time half to each replica, out of order: the newest must win, and the timeline
    // must be one unbroken chain (no change judged against a state already replaced).
    let sends = (0..40u32).map(|i| {
        let replica = if i % 2 == 0 { a.clone() } else { b.clone() };
        let second = (i * 7) % 40;
        let sync = if second.is_multiple_of(3) {
            "Synced"
        } else {
            "OutOfSync"
        };
        tokio::spawn(async move { replica.ingest(body(sync, second), None).await.expect("ingest").outcome })
    });
    for handle in sends.collect::<Vec<_>>() {
        handle.await.expect("task");
    }
    let newest = if 39 % 3 == 0 { "Synced" } else { "OutOfSync" };
    for replica in [&a, &b] {
        let stored = replica.app(&pay()).await.expect("read").expect("stored");
        assert_eq!(
            stored.state.snapshot.sync_status.as_str(),
            newest,
            "the newest body's state is stored"
        );
    }
    let timeline = a.timeline(&pay(), 1000).await.expect("timeline"); // oldest first
    let syncs: Vec<_> = timeline.iter().filter(|t| t.field == "sync").collect();
    for pair in syncs.windows(2) {
        assert_eq!(pair[1].from.as_deref(), Some(pair[0].to.as_str()), "{syncs:?}");
    }
    assert_eq!(syncs.last().map(|t| t.to.as_str()), Some(newest));
}

/// A duplicate moves `last_seen` in memory at once (what the API shows) and in the store within a few seconds.
async fn a_duplicates_last_seen_reaches_the_store(url: &str) {
    let clock = ManualClock::new(chrono::Utc::now());
    let settings = Arc::new(Settings::from_yaml("").expect("defaults"));
    let pipeline = Pipeline::new(settings, store(url).await, Arc::new(clock.clone()));
    let first = pipeline.ingest(body("Synced", 1), None).await.expect("ingest");
    assert_eq!(first.outcome, IngestOutcome::Changed);
    let stored_at = store(url)
        .await
        .app(&pay())
        .await
        .expect("read")
        .expect("stored")
        .state
        .last_seen;
    clock.advance(std::time::Duration::from_secs(1));
    assert_eq!(
        pipeline.ingest(body("Synced", 1), None).await.expect("ingest").outcome,
        IngestOutcome::Duplicate
    );
    let shown = pipeline
        .app(&pay())
        .await
        .expect("read")
        .expect("stored")
        .state
        .last_seen;
    assert!(shown > stored_at, "the API shows the duplicate at once");
    let store = store(url).await;
    let written = wait::eventually(std::time::Duration::from_millis(2500), || async {
        let stored = store.app(&pay()).await.expect("read").expect("stored");
        let at = stored.state.last_seen;
        (at.timestamp_millis() == shown.timestamp_millis()).then_some(at)
    })
    .await;
    assert!(
        written.is_some(),
        "written (to the millisecond, as the store keeps times) within the writer's flush interval"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicates_last_seen_reaches_postgresql() {
    a_duplicates_last_seen_reaches_the_store(&fresh_database().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicates_last_seen_reaches_sqlite() {
    let dir = tempfile::tempdir().expect("tmp");
    a_duplicates_last_seen_reaches_the_store(&format!("sqlite://{}/herald.db", dir.path().display())).await;
}

/// A body of Application `name` at `second`, its sync and health given.
fn app_body(name: &str, sync: &str, health: &str, second: u32) -> herald::argocd::Snapshot {
    let app = serde_json::json!({
        "metadata": {"name": name, "namespace": "argocd", "uid": format!("uid-{name}")},
        "spec": {"project": "default"},
        "status": {"sync": {"status": sync}, "health": {"status": health}}
    });
    let text = bare_envelope(app, &format!("2026-01-01T10:{:02}:{:02}Z", second / 60, second % 60)).to_string();
    parse_body(text.as_bytes(), 64).expect("valid body")
}

/// What body `second` of every Application says: sync and health each change every few bodies, so incidents open,
/// are refreshed and resolve throughout.
fn statuses(second: u32) -> (&'static str, &'static str) {
    let sync = if second.is_multiple_of(3) {
        "Synced"
    } else {
        "OutOfSync"
    };
    let health = if (second / 2).is_multiple_of(2) {
        "Healthy"
    } else {
        "Degraded"
    };
    (sync, health)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_applications_written_by_two_replicas_at_once_never_fail_a_body() {
    let url = fresh_database().await;
    let (a, b) = (replica(&url).await, replica(&url).await);
    // Twelve Applications, 60 bodies each, all sent at once, each Application's bodies alternating between the
    // replicas: their batches hold the same Applications in different orders, and both open, refresh and resolve
    // the same Applications' incidents. Every body must be answered (no deadlock, no conflict left over), and each
    // Application end in its newest body's state.
    let names: Vec<String> = (0..12).map(|i| format!("app-{i:02}")).collect();
    let mut sends = Vec::new();
    for second in 0..300u32 {
        // Every other second in the opposite order, so batches meet the same Applications in both orders.
        let order: Vec<usize> = match second % 2 {
            0 => (0..names.len()).collect(),
            _ => (0..names.len()).rev().collect(),
        };
        for i in order {
            let name = &names[i];
            let replica = if (i as u32 + second).is_multiple_of(2) {
                a.clone()
            } else {
                b.clone()
            };
            let (sync, health) = statuses(second);
            let snap = app_body(name, sync, health, second);
            sends.push(tokio::spawn(async move { replica.ingest(snap, None).await }));
        }
    }
    let mut failed = Vec::new();
    for handle in sends {
        if let Err(e) = handle.await.expect("task") {
            failed.push(e.to_string());
        }
    }
    assert!(failed.is_empty(), "{} bodies failed: {failed:?}", failed.len());
    let (sync, health) = statuses(299);
    for name in &names {
        let id = AppId::new("argocd", name);
        for replica in [&a, &b] {
            let stored = replica.app(&id).await.expect("read").expect("stored");
            assert_eq!(stored.state.snapshot.sync_status.as_str(), sync, "{name}");
            assert_eq!(stored.state.snapshot.health_status.as_str(), health, "{name}");
        }
        let timeline = a.timeline(&id, 1000).await.expect("timeline");
        let syncs: Vec<_> = timeline.iter().filter(|t| t.field == "sync").collect();
        for pair in syncs.windows(2) {
            assert_eq!(pair[1].from.as_deref(), Some(pair[0].to.as_str()), "{name}: {syncs:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_victim_is_a_conflict_to_do_again() {
    // Two transactions that lock two rows in opposite orders: PostgreSQL ends one of them, and the batch writer
    // must take that error as a conflict (done again on what is stored), not as the store being unavailable.
    let url = fresh_database().await;
    let mut setup = sqlx::PgConnection::connect(&url).await.expect("connect");
    setup
        .execute("CREATE TABLE pair (id int PRIMARY KEY, v int); INSERT INTO pair VALUES (1, 0), (2, 0)")
        .await
        .expect("table");
    let (mut first, mut second) = (
        sqlx::PgConnection::connect(&url).await.expect("connect"),
        sqlx::PgConnection::connect(&url).await.expect("connect"),
    );
    first
        .execute("BEGIN; UPDATE pair SET v = 1 WHERE id = 1")
        .await
        .expect("lock 1");
    second
        .execute("BEGIN; UPDATE pair SET v = 2 WHERE id = 2")
        .await
        .expect("lock 2");
    let crossing = tokio::spawn(async move {
        let r = first.execute("UPDATE pair SET v = 1 WHERE id = 2").await.map(|_| ());
        (first, r)
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let other = second.execute("UPDATE pair SET v = 2 WHERE id = 1").await.map(|_| ());
    let (_first, crossed) = crossing.await.expect("task");
    let victim = match (crossed, other) {
        (Err(e), Ok(())) | (Ok(()), Err(e)) => e,
        (a, b) => panic!("exactly one of the two is ended: {a:?} {b:?}"),
    };
    let error = herald::store::StoreError::from(victim);
    assert!(error.is_conflict(), "{error}");
    assert!(!herald::store::StoreError::Decode("x".into()).is_conflict());
}

/// `name` Degraded (or Healthy) on the one cluster every body of this file names (none: the default destination).
fn health_of(name: &str, health: &str) -> herald::argocd::Snapshot {
    let app = serde_json::json!({
        "metadata": {"name": name, "namespace": "argocd", "uid": format!("uid-{name}")},
        "spec": {"destination": {"server": "https://10.20.30.40:6443", "namespace": name}},
        "status": {"sync": {"status": "Synced"}, "health": {"status": health}}
    });
    let text = bare_envelope(app, "2026-01-01T10:00:00Z").to_string();
    parse_body(text.as_bytes(), 64).expect("valid body")
}

#[tokio::test]
async fn twenty_applications_of_one_cluster_breaking_on_two_replicas_at_once_are_one_storm() {
    let url = fresh_database().await;
    let (a, b) = (replica(&url).await, replica(&url).await);
    let names: Vec<String> = (0..20).map(|i| format!("app-{i:02}")).collect();
    let sends = names.iter().enumerate().map(|(i, name)| {
        let p = if i % 2 == 0 { a.clone() } else { b.clone() };
        let snap = health_of(name, "Degraded");
        async move { p.ingest(snap, None).await.expect("ingested") }
    });
    futures_util::future::join_all(sends).await;
    let filter = |kind| herald::store::IncidentFilter {
        kind: Some(kind),
        limit: 100,
        ..Default::default()
    };
    let storms = a.incidents(&filter(herald::domain::Kind::Storm)).await.expect("storms");
    assert_eq!(storms.len(), 1, "one storm, whichever replica opened it: {storms:#?}");
    let members = b
        .incidents(&filter(herald::domain::Kind::Degraded))
        .await
        .expect("members");
    assert_eq!(members.len(), 20);
    assert!(
        members.iter().all(|m| m.storm_id == Some(storms[0].id)),
        "every one of them is its member"
    );
    assert!(
        storms[0].view.summary.contains("20 Applications Degraded"),
        "{}",
        storms[0].view.summary
    );
}
