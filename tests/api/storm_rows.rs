//! What storms read of their members, on both engines: the columns written with each view (`cluster`,
//! `message_key`, migration 0022) say what the view says, and a row written before them is read whole to the same.

use herald::argocd::AppId;
use herald::configuration::StorageSettings;
use herald::domain::{Incident, IncidentState, Kind, Severity};
use herald::store::{Store, StormMember};
use secrecy::SecretString;

use crate::fresh_db::fresh_db;

fn member_view(name: &str, cluster: &str, messages: &[&str]) -> Incident {
    Incident {
        fingerprint: format!("fp-{name}"),
        kind: Kind::Degraded,
        severity: Severity::Critical,
        team: "payments".into(),
        summary: format!("{name}: Degraded"),
        destination_cluster: cluster.into(),
        messages: messages.iter().map(|m| m.to_string()).collect(),
        ..Default::default()
    }
}

async fn members_read_from_columns_agree_with_their_views(engine: &str) {
    let db = fresh_db(engine, "stormrows").await;
    let settings = StorageSettings {
        url: SecretString::from(db.url.clone()),
        max_connections: 4,
        ..Default::default()
    };
    let store = Store::connect(&settings).await.expect("connect and migrate");
    let at = chrono::DateTime::parse_from_rfc3339("2026-01-05T09:00:00Z")
        .expect("time")
        .to_utc();
    let c1 = "https://10.20.30.40:6443";
    let long = "x".repeat(10_000);
    let views = [
        member_view("pay-api", c1, &["  dial tcp 10.20.30.40:6443: connection refused "]),
        member_view(
            "pay-worker",
            c1,
            &["dial tcp 10.20.30.40:6443: connection refused", "another"],
        ),
        member_view("cart", c1, &[]),
        member_view("ledger", "https://kubernetes.default.svc", &[&long]),
    ];
    let mut tx = store.begin().await.expect("tx");
    let mut ids = Vec::new();
    for v in &views {
        let app = AppId::new("argocd", v.summary.split(':').next().expect("name"));
        let state = IncidentState::Firing;
        ids.push(
            Store::insert_incident(&mut tx, v, &app, state, at, at, Some(at))
                .await
                .expect("insert"),
        );
    }
    Store::join_storm(&mut tx, 99, &ids).await.expect("join");
    let fresh: Vec<StormMember> = Store::storm_members(&mut tx, 99).await.expect("members");
    tx.commit().await.expect("commit");

    assert_eq!(fresh.len(), 4);
    assert_eq!(
        fresh.iter().map(|m| m.cluster.as_str()).collect::<Vec<_>>(),
        [c1, c1, c1, "https://kubernetes.default.svc"]
    );
    assert_eq!(fresh[0].app, AppId::new("argocd", "pay-api"));
    assert_eq!(
        (fresh[0].state, fresh[0].team.as_str()),
        (IncidentState::Firing, "payments")
    );
    assert!(!fresh[0].message_key.is_empty());
    assert_eq!(
        fresh[0].message_key, fresh[1].message_key,
        "the same first message, trimmed"
    );
    assert_eq!(fresh[2].message_key, "", "no message, no key");
    assert_ne!(fresh[3].message_key, "", "a long message is keyed as stored (cut)");

    // The same rows as an older Herald left them: no storm columns.
    let pool = sqlx::AnyPool::connect(&db.url).await.expect("connect");
    sqlx::query(sqlx::AssertSqlSafe(
        "UPDATE incidents SET cluster = NULL, message_key = NULL",
    ))
    .execute(&pool)
    .await
    .expect("forget the columns");
    let mut tx = store.begin().await.expect("tx");
    let old = Store::storm_members(&mut tx, 99).await.expect("members of old rows");
    assert_eq!(old, fresh, "read whole, an older row says the same");
    // A refreshed view writes its columns again (a member's message changed).
    let mut changed = views[2].clone();
    changed.messages = vec!["dial tcp 10.20.30.40:6443: connection refused".into()];
    Store::refresh_incident(&mut tx, ids[2], &changed)
        .await
        .expect("refresh");
    let after = Store::storm_members(&mut tx, 99).await.expect("members");
    assert_eq!(after[2].message_key, fresh[0].message_key);
    tx.commit().await.expect("commit");
}

mod sqlite {
    #[tokio::test]
    async fn members_read_from_columns_agree_with_their_views() {
        super::members_read_from_columns_agree_with_their_views("sqlite").await
    }
}

mod postgres {
    #[tokio::test]
    async fn members_read_from_columns_agree_with_their_views() {
        super::members_read_from_columns_agree_with_their_views("postgres").await
    }
}
