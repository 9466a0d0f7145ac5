//! What the real binary leaves on disk: its store holds Helm values, last-applied configurations and delivery
//! payloads, so the directory it creates is Herald's user's only (0700) and so are the SQLite files (0600), whatever
//! the umask.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::helpers::{Binary, envelope, eventually};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[tokio::test]
async fn the_store_herald_creates_is_readable_by_its_user_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data").join("nested");
    let config = dir.path().join("herald.yaml");
    std::fs::write(
        &config,
        format!(
            "server: {{listen: \"127.0.0.1:0\"}}\nstorage: {{url: \"sqlite://{}/herald.db\"}}\nlog: {{level: warn}}\n",
            data.display()
        ),
    )
    .expect("config");
    let mut bin = Binary::start(&config, &[]);
    let answer = reqwest::Client::new()
        .post(format!("{}/v1/argocd/events", bin.address))
        .body(envelope(
            "payments-api",
            "payments",
            "OutOfSync",
            "Healthy",
            "2026-03-02T09:00:00Z",
        ))
        .send()
        .await
        .expect("herald answers");
    assert_eq!(answer.status().as_u16(), 202);
    let wal = data.join("herald.db-wal");
    assert!(
        eventually(Duration::from_secs(10), || std::future::ready(
            wal.exists().then_some(())
        ))
        .await
        .is_some(),
        "a write-ahead log after a change"
    );
    for created in [dir.path().join("data"), data.clone()] {
        assert_eq!(mode(&created), 0o700, "{}", created.display());
    }
    for file in ["herald.db", "herald.db-wal", "herald.db-shm"] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    bin.terminate().await;
    assert_eq!(mode(&data.join("herald.db")), 0o600, "after a clean stop");
}
