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

#[path = "common/wait.rs"]
#[allow(dead_code)] // only `eventually` waits here
mod wait;

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
    serde_json::json!({
        "timestamp": format!("2026-01-01T10:{:02}:{:02}Z", second / 60, second % 60),
        "app": {
            "metadata": {"name": "pay", "namespace": "argocd", "uid": "uid-pay"},
            "status": {"sync": {"status": sync}, "health": {"status": "Healthy"}}
        }
    })
    .to_string()
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
            .find(|t| t.field == "sync")
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
        let sync = if second % 3 == 0 { "Synced" } else { "OutOfSync" };
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
