//! Authentication, exposure, and secrets kept out of logs.

use crate::helpers::*;
use base64::Engine;

#[tokio::test]
async fn bearer_tokens_and_basic_credentials_are_checked() {
    let app = TestApp::spawn(
        "server: {auth: {bearer_tokens: [old-token-123, new-token-456], basic: [{username: argocd, password: s3cret}]}}",
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
        (Some("Bearer old-token-12".to_string()), 401),
        (Some("Bearer".to_string()), 401),
        (Some("Token old-token-123".to_string()), 401),
        (Some(basic("argocd", "wrong")), 401),
        (Some("Basic !!!notbase64".to_string()), 401),
        (Some("Bearer old-token-123".to_string()), 202),
        (Some("Bearer new-token-456".to_string()), 202),
        (Some(basic("argocd", "s3cret")), 202),
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
    bin.terminate();
    let logs = bin.logs();
    assert!(logs.contains("delivery failed"), "the failures were logged: {logs}");
    for secret in [token, slack, hook, "SECRETPATH123", "B000/SECRET"] {
        assert!(!logs.contains(secret), "{secret} leaked into the logs");
        assert!(!answers.contains(secret), "{secret} leaked into an API answer");
    }
}
