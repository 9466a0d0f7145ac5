//! `herald serve` reloads its configuration on SIGHUP, on the real binary: a receiver's new file takes the next
//! notification, new credentials are accepted, a broken file changes nothing and says why, and what needs a
//! restart is logged as ignored.

use std::path::Path;
use std::time::Duration;

use crate::helpers::*;

const ADMIN: &str = "admin-token-0123456789";
const READER: &str = "reader-token-0123456789";

fn config(dir: &Path, sink: &Path, extra: &str) -> String {
    format!(
        r#"{base}
server: {{listen: "127.0.0.1:0", auth: {{bearer_tokens: [{ADMIN}]{extra}}}}}
grouping: {{group_wait: 0s, group_by: [app]}}
rules: {{degraded: {{for: 0s}}}}
receivers: [{{name: console, console: {{file: "{sink}"}}}}]
teams: {{payments: {{receivers: [console]}}}}
"#,
        base = base_yaml(dir).replace("server: {listen: \"127.0.0.1:0\"}\n", ""),
        sink = sink.display()
    )
}

fn hangup(bin: &Binary) {
    let status = std::process::Command::new("kill")
        .arg("-HUP")
        .arg(bin.child.id().to_string())
        .status()
        .expect("kill -HUP");
    assert!(status.success());
}

async fn logged(bin: &Binary, what: &str, times: usize) {
    eventually(Duration::from_secs(10), || async {
        (bin.logs().matches(what).count() >= times).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("{what:?} not logged {times} time(s): {}", bin.logs()));
}

async fn degraded(client: &reqwest::Client, bin: &Binary, app: &str) {
    let r = client
        .post(format!("{}/v1/argocd/events", bin.address))
        .bearer_auth(ADMIN)
        .body(envelope(app, "payments", "Synced", "Degraded", &now_rfc3339()))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 202);
}

#[tokio::test]
async fn sighup_reloads_receivers_and_credentials_and_a_broken_file_keeps_the_running_configuration() {
    let dir = tempfile::tempdir().expect("tmp");
    let (first, second) = (dir.path().join("first.jsonl"), dir.path().join("second.jsonl"));
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(&cfg, config(dir.path(), &first, "")).expect("write");
    let mut bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();

    degraded(&client, &bin, "pay-api").await;
    wait_for(&first, 1).await;
    let r = client
        .get(format!("{}/v1/apps", bin.address))
        .bearer_auth(READER)
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 401, "not yet a credential");

    // The console receiver writes elsewhere, a read token is added, and the tick (restart only) changes.
    let new = config(dir.path(), &second, &format!(", read_tokens: [{READER}]"))
        .replace("scheduler: {tick: 50ms}", "scheduler: {tick: 70ms}");
    std::fs::write(&cfg, new).expect("write");
    hangup(&bin);
    logged(&bin, "configuration reloaded", 1).await;
    assert!(
        bin.logs().contains("scheduler changed, which needs a restart; ignored"),
        "{}",
        bin.logs()
    );
    degraded(&client, &bin, "cart").await;
    let got = wait_for(&second, 1).await;
    assert!(got[0].to_string().contains("cart"), "{got:?}");
    assert_eq!(delivered(&first).len(), 1, "nothing more went to the old file");
    let r = client
        .get(format!("{}/v1/apps", bin.address))
        .bearer_auth(READER)
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200, "the new credential is accepted");

    // A broken file: refused, logged with the key path, and the running configuration stays.
    std::fs::write(
        &cfg,
        config(dir.path(), &first, "").replace("receivers: [console]", "receivers: [ghost]"),
    )
    .expect("write");
    hangup(&bin);
    logged(&bin, "configuration reload refused", 1).await;
    assert!(bin.logs().contains("teams.payments.receivers[0]"), "{}", bin.logs());
    degraded(&client, &bin, "ledger").await;
    let got = wait_for(&second, 2).await;
    assert!(got[1].to_string().contains("ledger"), "{got:?}");
    assert_eq!(delivered(&first).len(), 1);
    let r = client
        .get(format!("{}/v1/apps", bin.address))
        .bearer_auth(READER)
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200, "still the reloaded credentials");
    assert!(bin.terminate().success());
}
