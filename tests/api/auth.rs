//! Authentication, scopes, refusing unusable credentials, exposure, and secrets kept out of logs.

use crate::helpers::*;
use base64::Engine;
use std::time::Duration;

#[tokio::test]
async fn bearer_tokens_and_basic_credentials_are_checked() {
    let app = TestApp::spawn(
        "server: {auth: {bearer_tokens: [old-token-123-abcdef, new-token-456-abcdef], basic: [{username: argocd, password: s3cret-password-01, scope: ingest}]}}",
    )
    .await;
    let body = || envelope("pay-api", "payments", "Synced", "Healthy", &now_rfc3339());
    let url = format!("{}/v1/argocd/events", app.address);
    let basic = |u: &str, p: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
        )
    };
    for (auth, status) in [
        (None, 401),
        (Some("Bearer wrong".to_string()), 401),
        (Some("Bearer old-token-123-abcde".to_string()), 401),
        (Some("Bearer".to_string()), 401),
        (Some("Token old-token-123-abcdef".to_string()), 401),
        (Some(basic("argocd", "wrong")), 401),
        (Some("Basic !!!notbase64".to_string()), 401),
        (Some("Bearer old-token-123-abcdef".to_string()), 202),
        (Some("Bearer new-token-456-abcdef".to_string()), 202),
        (Some(basic("argocd", "s3cret-password-01")), 202),
    ] {
        let mut req = app.client.post(&url).body(body());
        if let Some(a) = &auth {
            req = req.header("Authorization", a);
        }
        let r = req.send().await.expect("req");
        assert_eq!(r.status().as_u16(), status, "{auth:?}");
        if status == 401 {
            let challenge = r
                .headers()
                .get("www-authenticate")
                .expect("WWW-Authenticate")
                .to_str()
                .expect("ascii");
            assert!(
                challenge.contains("Bearer") && challenge.contains("Basic"),
                "{challenge}"
            );
        }
    }
    // Read endpoints are protected too; probes are not.
    let r = app
        .client
        .get(format!("{}/v1/apps", app.address))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 401);
    let r = app
        .client
        .get(format!("{}/healthz", app.address))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200);
    app.stop().await;
}

#[test]
fn listening_beyond_loopback_without_credentials_refuses_to_start() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            "server: {{listen: '0.0.0.0:0'}}\nstorage: {{url: 'sqlite://{}/h.db'}}\n",
            dir.path().display()
        ),
    )
    .expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server.auth") && err.contains("allow_anonymous"), "{err}");
}

#[tokio::test]
async fn configured_secrets_never_appear_in_logs_or_answers() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    let token = "tok-SECRET-a1b2c3d4e5";
    let slack = "xoxb-SECRET-slack-999";
    let hook = "https://hooks.slack.com/services/T000/B000/SECRETPATH123";
    std::fs::write(
        &cfg,
        format!(
            r##"
server: {{listen: "127.0.0.1:0", auth: {{bearer_tokens: ["{token}"]}}}}
storage: {{url: "sqlite://{db}"}}
grouping: {{group_wait: 0s}}
log: {{level: debug}}
receivers:
  - {{name: bot, slack: {{token: "{slack}", channel: "#x", api_url: "http://127.0.0.1:9/api"}}}}
  - {{name: hook, slack: {{webhook_url: "{hook}"}}}}
teams: {{payments: {{receivers: [bot, hook]}}}}
rules: {{sync_failed: {{for: 0s}}}}
"##,
            db = dir.path().join("h.db").display()
        ),
    )
    .expect("write");
    let mut bin = Binary::start(&cfg, &[("RUST_LOG", "debug")]);
    let client = reqwest::Client::new();
    let url = format!("{}/v1/argocd/events", bin.address);
    // Wrong token, then a right one with an event that makes both receivers fail (unreachable).
    let r = client
        .post(&url)
        .bearer_auth("guess")
        .body("{}")
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 401);
    let body = with_operation(
        &envelope("pay-api", "payments", "OutOfSync", "Healthy", &now_rfc3339()),
        serde_json::json!({"phase": "Failed", "message": "boom", "startedAt": now_rfc3339()}),
    );
    let r = client
        .post(&url)
        .bearer_auth(token)
        .body(body)
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 202);
    // Let the deliveries fail a few times.
    let outbox = eventually(std::time::Duration::from_secs(10), || {
        let client = client.clone();
        let u = format!("{}/v1/outbox", bin.address);
        async move {
            let v: serde_json::Value = client.get(&u).bearer_auth(token).send().await.ok()?.json().await.ok()?;
            let errs = v["items"]
                .as_array()?
                .iter()
                .filter(|i| i["last_error"].is_string())
                .count();
            (errs >= 2).then_some(v)
        }
    })
    .await
    .expect("both deliveries failed at least once");
    let answers = outbox.to_string();
    bin.terminate().await;
    let logs = bin.logs();
    assert!(logs.contains("delivery failed"), "the failures were logged: {logs}");
    for secret in [token, slack, hook, "SECRETPATH123", "B000/SECRET"] {
        assert!(!logs.contains(secret), "{secret} leaked into the logs");
        assert!(!answers.contains(secret), "{secret} leaked into an API answer");
    }
}

/// Runs `herald serve` on `yaml` (plus a private store) with `env`, expecting it to refuse to start; returns stderr.
fn refused_to_start(yaml: &str, env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(
        &cfg,
        format!("{yaml}\nstorage: {{url: 'sqlite://{}/h.db'}}\n", dir.path().display()),
    )
    .expect("write");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_herald"));
    cmd.args(["serve", "--config"]).arg(&cfg).env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run");
    assert!(!out.status.success(), "{yaml} {env:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn empty_short_or_blank_credentials_refuse_to_start_and_name_the_key() {
    let err = refused_to_start("server: {listen: '127.0.0.1:0', auth: {bearer_tokens: ['']}}", &[]);
    assert!(err.contains("server.auth.bearer_tokens[0]: empty token"), "{err}");
    let err = refused_to_start("server: {listen: '127.0.0.1:0', auth: {bearer_tokens: [ab]}}", &[]);
    assert!(
        err.contains("server.auth.bearer_tokens[0]: a token of 2 characters"),
        "{err}"
    );
    let err = refused_to_start(
        "server: {listen: '127.0.0.1:0', auth: {basic: [{username: '', password: ''}]}}",
        &[],
    );
    assert!(err.contains("server.auth.basic[0].username"), "{err}");
    let err = refused_to_start(
        "server: {listen: '127.0.0.1:0'}",
        &[("HERALD__SERVER__AUTH__INGEST_TOKENS", "tok-real-123456789,short")],
    );
    assert!(
        err.contains("server.auth.ingest_tokens[1]: a token of 5 characters"),
        "{err}"
    );
    assert!(!err.contains("tok-real"), "the tokens are not shown: {err}");
    // An empty variable is no token: beyond loopback that is no credential at all.
    let err = refused_to_start(
        "server: {listen: '0.0.0.0:0'}",
        &[("HERALD__SERVER__AUTH__BEARER_TOKENS", "")],
    );
    assert!(err.contains("server.auth") && err.contains("no credentials"), "{err}");
}

#[tokio::test]
async fn a_trailing_comma_in_the_environment_adds_no_empty_token() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(&cfg, base_yaml(dir.path())).expect("write");
    let token = "tok-real-1234567890";
    let bin = Binary::start(&cfg, &[("HERALD__SERVER__AUTH__BEARER_TOKENS", &format!("{token},"))]);
    let client = reqwest::Client::new();
    let url = format!("{}/v1/argocd/events", bin.address);
    let body = envelope("pay-api", "payments", "Synced", "Healthy", &now_rfc3339());
    for header in ["Bearer", "Bearer ", "Basic Og=="] {
        let r = client
            .post(&url)
            .header("Authorization", header)
            .body(body.clone())
            .send()
            .await
            .expect("req");
        assert_eq!(r.status(), 401, "{header:?}");
        let r = client
            .post(format!("{}/v1/silences", bin.address))
            .header("Authorization", header)
            .body("{}")
            .send()
            .await
            .expect("req");
        assert_eq!(r.status(), 401, "silences with {header:?}");
    }
    let r = client
        .post(&url)
        .bearer_auth(token)
        .body(body)
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 202);
}

const SCOPED: &str = r#"
server:
  auth:
    bearer_tokens: [admin-token-0123456789]
    ingest_tokens: [argocd-token-0123456789]
    read_tokens: [{name: grafana, token: grafana-token-0123456789}]
    basic: [{username: viewer, password: look-only-password}, {username: alice, password: in-charge-password, scope: admin}]
"#;

fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

#[tokio::test]
async fn each_credential_may_do_what_its_scope_allows_and_no_more() {
    let app = TestApp::spawn(SCOPED).await;
    let admin = "Bearer admin-token-0123456789";
    let ingest = "Bearer argocd-token-0123456789";
    let read = "Bearer grafana-token-0123456789";
    let viewer = basic("viewer", "look-only-password");
    let body = envelope("pay-api", "payments", "Synced", "Healthy", &now_rfc3339());
    let future = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let silence = format!(r#"{{"matchers":[{{"name":"app","value":"x"}}],"ends_at":"{future}","created_by":"me"}}"#);
    // (method, path, body, credential, status)
    let cases: Vec<(&str, &str, String, &str, u16)> = vec![
        ("POST", "/v1/argocd/events", body.clone(), ingest, 202),
        ("PUT", "/v1/argocd/events", body.clone(), ingest, 202),
        ("POST", "/v1/argocd/events", body.clone(), admin, 202),
        ("POST", "/v1/argocd/events", body.clone(), read, 403),
        ("POST", "/v1/argocd/events", body.clone(), &viewer, 403),
        ("GET", "/v1/apps", String::new(), ingest, 403),
        ("GET", "/v1/apps", String::new(), read, 200),
        ("GET", "/v1/apps", String::new(), &viewer, 200),
        ("GET", "/v1/apps", String::new(), admin, 200),
        ("GET", "/v1/incidents", String::new(), read, 200),
        ("GET", "/v1/prune-pending", String::new(), read, 200),
        ("GET", "/v1/outbox", String::new(), read, 200),
        ("GET", "/v1/silences", String::new(), read, 200),
        ("GET", "/v1/apps/argocd/pay-api", String::new(), read, 200),
        ("GET", "/v1/apps/argocd/pay-api/raw", String::new(), ingest, 403),
        // The bodies as received carry Helm values and last-applied-configuration: admin only.
        ("GET", "/v1/apps/argocd/pay-api/raw", String::new(), read, 403),
        ("GET", "/v1/apps/argocd/pay-api/raw", String::new(), &viewer, 403),
        ("GET", "/v1/apps/argocd/pay-api/raw", String::new(), admin, 200),
        ("GET", "/", String::new(), ingest, 403),
        ("GET", "/", String::new(), &viewer, 200),
        ("POST", "/v1/silences", silence.clone(), read, 403),
        ("POST", "/v1/silences", silence.clone(), ingest, 403),
        ("POST", "/v1/silences", silence.clone(), &viewer, 403),
        ("POST", "/v1/silences", silence.clone(), admin, 201),
        ("DELETE", "/v1/silences/nope", String::new(), read, 403),
        ("DELETE", "/v1/silences/nope", String::new(), admin, 404),
        ("POST", "/v1/outbox/1/retry", String::new(), read, 403),
        ("POST", "/v1/outbox/1/retry", String::new(), admin, 404),
    ];
    for (method, path, body, credential, status) in cases {
        let r = app
            .client
            .request(method.parse().expect("method"), format!("{}{path}", app.address))
            .header("Authorization", credential)
            .body(body)
            .send()
            .await
            .expect("req");
        assert_eq!(r.status().as_u16(), status, "{method} {path} with {credential}");
        if status == 403 {
            let e: serde_json::Value = r.json().await.expect("json");
            assert!(e["error"].as_str().is_some_and(|m| m.contains("scope")), "{e}");
        }
    }
    // Probes stay open.
    for path in ["/healthz", "/readyz", "/metrics"] {
        let r = app
            .client
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .expect("req");
        assert_eq!(r.status(), 200, "{path}");
    }
    app.stop().await;
}

#[tokio::test]
async fn the_status_page_asks_a_browser_for_a_basic_credential() {
    let app = TestApp::spawn(SCOPED).await;
    let r = app.client.get(format!("{}/", app.address)).send().await.expect("req");
    assert_eq!(r.status(), 401);
    let challenge = r
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(challenge.starts_with("Basic realm="), "{challenge}");
    let r = app
        .client
        .get(format!("{}/", app.address))
        .basic_auth("viewer", Some("look-only-password"))
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 200);
    assert!(r.text().await.expect("html").contains("<h1>Herald</h1>"));
    app.stop().await;
}

#[tokio::test]
async fn a_silence_without_created_by_is_created_by_the_credential() {
    let app = TestApp::spawn(SCOPED).await;
    let url = format!("{}/v1/silences", app.address);
    let cases = [
        (basic("alice", "in-charge-password"), r#""created_by":"","#, "alice"),
        ("Bearer admin-token-0123456789".to_string(), "", "bearer_tokens[0]"),
        (basic("alice", "in-charge-password"), r#""created_by":"bob","#, "bob"),
    ];
    for (credential, created_by, expected) in cases {
        let r = app
            .client
            .post(&url)
            .header("Authorization", &credential)
            .body(format!(
                r#"{{"matchers":[{{"name":"app","value":"pay-*"}}],{created_by}"duration":"2h","comment":"c"}}"#
            ))
            .send()
            .await
            .expect("req");
        assert_eq!(r.status(), 201, "{created_by}");
        let s: serde_json::Value = r.json().await.expect("json");
        assert_eq!(s["created_by"], expected, "{s}");
        let starts = chrono::DateTime::parse_from_rfc3339(s["starts_at"].as_str().expect("starts_at")).expect("time");
        let ends = chrono::DateTime::parse_from_rfc3339(s["ends_at"].as_str().expect("ends_at")).expect("time");
        assert_eq!(ends - starts, chrono::Duration::hours(2), "duration 2h: {s}");
    }
    app.stop().await;
}

#[tokio::test]
async fn refused_credentials_are_counted_and_logged_once_a_minute_without_the_token() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("herald.yaml");
    std::fs::write(
        &cfg,
        format!(
            "{}server: {{listen: '127.0.0.1:0', auth: {{ingest_tokens: [argocd-token-0123456789]}}}}\n",
            base_yaml(dir.path()).replace("server: {listen: \"127.0.0.1:0\"}\n", "")
        ),
    )
    .expect("write");
    let mut bin = Binary::start(&cfg, &[]);
    let client = reqwest::Client::new();
    let guess = "guessed-token-SECRET-42";
    for _ in 0..3 {
        let r = client
            .post(format!("{}/v1/argocd/events", bin.address))
            .bearer_auth(guess)
            .body("{}")
            .send()
            .await
            .expect("req");
        assert_eq!(r.status(), 401);
    }
    let r = client
        .get(format!("{}/v1/apps", bin.address))
        .bearer_auth("argocd-token-0123456789")
        .send()
        .await
        .expect("req");
    assert_eq!(r.status(), 403);
    let metrics = client
        .get(format!("{}/metrics", bin.address))
        .send()
        .await
        .expect("req")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("herald_auth_failures_total{reason=\"unknown_credential\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("herald_auth_failures_total{reason=\"insufficient_scope\"} 1"),
        "{metrics}"
    );
    bin.terminate().await;
    let logs = bin.logs();
    let refused: Vec<&str> = logs.lines().filter(|l| l.contains("credential refused")).collect();
    assert_eq!(refused.len(), 1, "one line per address per minute: {logs}");
    assert!(
        refused[0].contains("unknown_credential") && refused[0].contains("127.0.0.1"),
        "{logs}"
    );
    assert!(
        !logs.contains(guess) && !logs.contains("argocd-token-0123456789"),
        "{logs}"
    );
}

#[tokio::test]
async fn guessing_tokens_is_answered_429_with_retry_after_even_for_the_right_token() {
    let app = TestApp::spawn("server: {auth: {ingest_tokens: [argocd-token-0123456789]}}").await;
    let url = format!("{}/v1/argocd/events", app.address);
    let post = |token: String| {
        app.client
            .post(&url)
            .bearer_auth(token)
            .body(envelope("pay-api", "payments", "Synced", "Healthy", &now_rfc3339()))
            .send()
    };
    let mut statuses = Vec::new();
    for i in 0..200 {
        statuses.push(post(format!("guess-{i:016}")).await.expect("req").status().as_u16());
    }
    let compared = statuses.iter().filter(|s| **s == 401).count();
    assert!(statuses[..10].iter().all(|s| *s == 401), "{statuses:?}");
    assert!(
        compared <= 12,
        "200 guesses in a moment, {compared} compared: {statuses:?}"
    );
    assert_eq!(statuses.last(), Some(&429));

    let r = post("argocd-token-0123456789".into()).await.expect("req");
    assert_eq!(r.status(), 429, "the right token is not compared either");
    let retry_after: u64 = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in seconds");
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    let_time_pass(Duration::from_secs(retry_after) + Duration::from_millis(100)).await;
    let r = post("argocd-token-0123456789".into()).await.expect("req");
    assert_eq!(r.status(), 202, "after Retry-After, the right token is in");
    app.stop().await;
}
