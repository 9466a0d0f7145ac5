//! The text log of the real binary, fed with values from outside: a team label with CR, LF and ESC cannot start a
//! line of its own or drive the terminal; the store's password is never written, at start or when the store cannot
//! be reached.

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

/// PostgreSQL (`HERALD_TEST_POSTGRES_URL`, trust authentication: the password is sent only if asked, and accepted)
/// with a password in the URL and in its query: the start names the store without either, and a store that cannot
/// be reached is reported without them too.
#[tokio::test]
async fn the_postgres_password_never_appears_in_the_log() {
    const PASSWORD: &str = "pg-Secret-Passw0rd-in-the-url";
    let db = crate::fresh_db::fresh_db("postgres", "herald_logs").await;
    let mut url = url::Url::parse(&db.url).expect("a URL");
    url.set_password(Some(PASSWORD)).expect("a password");
    url.set_query(Some(&format!("application_name=herald&password={PASSWORD}")));
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(&cfg, base_yaml(dir.path())).expect("write");

    let mut bin = Binary::start(&cfg, &[("HERALD__STORAGE__URL", url.as_str())]);
    let status = bin.terminate().await;
    let logs = bin.logs();
    assert!(
        status.success(),
        "{status}: {}",
        logs.replace(PASSWORD, "<the password>")
    );
    let start = logs.lines().find(|l| l.contains("starting")).expect(&logs);
    let (host, port) = (url.host_str().expect("host"), url.port().expect("port"));
    assert!(
        start.contains(&format!("store=postgres://{host}:{port}{} ", url.path())),
        "{start}"
    );
    assert!(
        start.contains("environment=HERALD__STORAGE__URL "),
        "the variable named: {start}"
    );
    assert!(!logs.contains(PASSWORD), "{logs}");

    // Nothing listens there: Herald stops, saying why, without the password.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port();
    url.set_port(Some(closed)).expect("a port");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .env("RUST_LOG", "debug")
        .env("NO_COLOR", "1")
        .env("HERALD__STORAGE__URL", url.as_str())
        .output()
        .expect("run herald");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains(&format!("{closed}")) || all.to_lowercase().contains("connect"),
        "says why: {all}"
    );
    assert!(!all.contains(PASSWORD), "{all}");
}
