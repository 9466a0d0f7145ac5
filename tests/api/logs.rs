//! The text log of the real binary, fed with values from outside: a team label with CR, LF and ESC cannot start a
//! line of its own or drive the terminal.

use std::time::Duration;

use crate::helpers::*;

#[tokio::test]
async fn a_team_with_control_characters_cannot_forge_a_log_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let sink = dir.path().join("sink.jsonl");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            "{}grouping: {{group_wait: 0s}}\nrules: {{degraded: {{for: 0s}}}}\n\
             receivers: [{{name: console, console: {{file: \"{}\"}}}}]\n",
            base_yaml(dir.path()),
            sink.display()
        ),
    )
    .expect("write");
    let mut bin = Binary::start(&cfg, &[]);
    let team = "payments\r\n2026-01-01T00:00:00.000000Z ERROR herald: FORGED all deliveries lost\u{1b}[2J";
    let r = reqwest::Client::new()
        .post(format!("{}/v1/argocd/events", bin.address))
        .body(envelope("pay-api", team, "Synced", "Degraded", &now_rfc3339()))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 202);
    wait_for(&sink, 1).await;
    // The delivery's span carries the thread key, which holds the team (`group_by: [team, kind]`).
    eventually(Duration::from_secs(10), || async {
        bin.logs().contains("notification delivered").then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("no delivery logged: {}", bin.logs()));
    assert!(bin.terminate().await.success());
    let logs = bin.logs();
    let delivered = logs
        .lines()
        .find(|l| l.contains("notification delivered"))
        .expect("the delivery line");
    assert!(
        delivered
            .contains("payments\\r\\n2026-01-01T00:00:00.000000Z ERROR herald: FORGED all deliveries lost\\u{1b}[2J"),
        "the team is on the delivery's line, escaped: {delivered}"
    );
    assert!(
        !logs.lines().any(|l| l.starts_with("2026-01-01T00:00:00.000000Z")),
        "no forged line: {logs}"
    );
    assert!(!logs.contains('\u{1b}') && !logs.contains('\r'), "{logs:?}");
    // An accepted event writes no line of its own beyond Herald's (actix once warned per request about a cloned
    // request in the body budget).
    assert!(!logs.contains("Cloning an `HttpRequest`"), "{logs}");
    // The first line says what it runs with: the file, the store, the receivers.
    let start = logs.lines().find(|l| l.contains("starting")).expect("a starting line");
    assert!(start.contains(&cfg.display().to_string()), "{start}");
    assert!(
        start.contains("store=sqlite://") && start.contains("receivers=console"),
        "{start}"
    );
}
