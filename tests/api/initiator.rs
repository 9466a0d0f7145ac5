//! The person who started a failed sync hears of it directly (issue 15): a Slack direct message and an e-mail to
//! them besides the team's message, durable across a restart; nobody extra for an automated sync; the team alone,
//! told "no contact configured", for a user Herald has no contact for.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{any, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::helpers::{TestApp, envelope, eventually, free_port, now_rfc3339, wait_for, with_operation};
use herald::clock::SystemClock;

/// aiosmtpd on a loopback port, keeping what it accepts as a Maildir; killed on drop.
pub(crate) struct Mailbox {
    server: Child,
    pub(crate) port: u16,
    maildir: PathBuf,
}

impl Mailbox {
    pub(crate) async fn start(dir: &Path) -> Self {
        let port = free_port();
        let maildir = dir.join("mail");
        let server = Command::new("python3")
            .args(["-m", "aiosmtpd", "-n", "-l", &format!("127.0.0.1:{port}")])
            .args(["-c", "aiosmtpd.handlers.Mailbox", &maildir.display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 with aiosmtpd (pip install aiosmtpd)");
        // Owned from here: dropped (killed) should it never listen.
        let mailbox = Self { server, port, maildir };
        let listening = eventually(Duration::from_secs(15), || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
        assert!(listening.is_some(), "aiosmtpd did not listen on {port}");
        mailbox
    }

    /// The raw messages stored so far.
    pub(crate) fn messages(&self) -> Vec<String> {
        std::fs::read_dir(self.maildir.join("new"))
            .map(|d| d.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok()).collect())
            .unwrap_or_default()
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// The team's messages go to a console file; Slack's Web API is `slack`; e-mail goes through the SMTP server on
/// `smtp_port` (a `Mailbox`'s, or one where nothing listens).
pub(crate) fn config(dir: &Path, slack: &MockServer, smtp_port: u16) -> String {
    format!(
        r##"
teams: {{payments: {{receivers: [team]}}}}
grouping: {{group_wait: 0s}}
receivers:
  - {{name: team, console: {{file: "{team}"}}}}
  - {{name: slack-bot, slack: {{token: xoxb-test, channel: "#ops", api_url: "{slack}/api"}}}}
  - {{name: mail, email: {{to: [oncall@example.com]}}}}
smtp: {{url: "smtp://127.0.0.1:{port}", from: herald@example.com}}
people:
  alice: {{email: alice@example.com, slack: U024BE7LH}}
"##,
        team = dir.join("team.jsonl").display(),
        slack = slack.uri(),
        port = smtp_port,
    )
}

/// A sync of `app` that failed, started by `by` (`{"username": "alice"}`, `{"automated": true}`).
fn failed_sync(app: &str, by: Value) -> String {
    with_operation(
        &envelope(app, "payments", "OutOfSync", "Healthy", &now_rfc3339()),
        json!({"phase": "Failed", "message": "one or more objects failed to apply", "startedAt": now_rfc3339(),
               "operation": {"initiatedBy": by, "sync": {"revision": "0123456789abcdef0123456789abcdef01234567"}}}),
    )
}

async fn slack_answering(status: u16) -> MockServer {
    let server = MockServer::start().await;
    let answer = ResponseTemplate::new(status).set_body_json(json!({"ok": true, "channel": "D0ALICE", "ts": "1.0"}));
    Mock::given(method("POST"))
        .and(path("/api/chat.postMessage"))
        .respond_with(answer)
        .mount(&server)
        .await;
    server
}

/// The channels Slack was asked to post to.
async fn slack_channels(server: &MockServer) -> Vec<String> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter_map(|b| b["channel"].as_str().map(str::to_string))
        .collect()
}

/// The channels Slack was asked to post to, once it was asked anything (within 10 s).
async fn slack_posts(server: &MockServer) -> Option<Vec<String>> {
    eventually(Duration::from_secs(10), || async {
        Some(slack_channels(server).await).filter(|c| !c.is_empty())
    })
    .await
}

/// The notes of every incident the team was told of.
fn team_notes(messages: &[Value]) -> Vec<String> {
    (messages.iter())
        .flat_map(|m| m["incidents"].as_array().cloned().unwrap_or_default())
        .flat_map(|i| i["notes"].as_array().cloned().unwrap_or_default())
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect()
}

/// One Herald whose team is told through a console file, with a Slack and a mailbox for people.
struct Setup {
    dir: tempfile::TempDir,
    slack: MockServer,
    mail: Mailbox,
    app: TestApp,
}

impl Setup {
    async fn start(extra: &str) -> Self {
        let dir = tempfile::tempdir().expect("tmp");
        let (slack, mail) = (slack_answering(200).await, Mailbox::start(dir.path()).await);
        let app = TestApp::spawn(&(config(dir.path(), &slack, mail.port) + extra)).await;
        Self { dir, slack, mail, app }
    }

    /// The notes of the team's first message, once it is there.
    async fn team_notes(&self) -> Vec<String> {
        team_notes(&wait_for(&self.dir.path().join("team.jsonl"), 1).await)
    }

    /// After a while: one message to the team, and `dms` Slack messages and `mails` e-mails to people.
    async fn told_once(self, dms: usize, mails: usize) {
        self.app.settle().await;
        assert_eq!(slack_channels(&self.slack).await.len(), dms, "Slack messages");
        assert_eq!(self.mail.messages().len(), mails, "e-mails");
        assert_eq!(crate::helpers::delivered(&self.dir.path().join("team.jsonl")).len(), 1);
        self.app.stop().await;
    }
}

#[tokio::test]
async fn a_failed_sync_started_by_alice_tells_the_team_and_alice_by_slack_and_by_email() {
    let s = Setup::start("").await;

    let r = s
        .app
        .post(failed_sync("payments-api", json!({"username": "alice"})))
        .await;
    assert_eq!(r.status(), 202);

    assert_eq!(s.team_notes().await, vec!["started by alice"]);
    let dm = slack_posts(&s.slack).await;
    assert_eq!(
        dm,
        Some(vec!["U024BE7LH".to_string()]),
        "a DM to alice, not the team's #ops"
    );
    let mails = eventually(Duration::from_secs(10), || async {
        Some(s.mail.messages()).filter(|m| !m.is_empty())
    })
    .await
    .expect("an e-mail to alice");
    assert!(mails[0].contains("To: alice@example.com"), "{}", mails[0]);
    assert!(!mails[0].contains("oncall@example.com"), "not the receiver's own list");
    s.told_once(1, 1).await;
}

/// The person who started the failed sync is asked to act, so their message offers the way to act: the signed
/// Acknowledge and Silence links and the Application's page on Herald, in the Slack DM and in the e-mail alike.
#[tokio::test]
async fn alices_dm_and_e_mail_carry_the_one_click_links() {
    let s = Setup::start(
        "server: {public_url: 'https://herald.example.com', link_signing_key: 'a-link-signing-key-of-at-least-32-chars'}\n",
    )
    .await;
    let r = s
        .app
        .post(failed_sync("payments-api", json!({"username": "alice"})))
        .await;
    assert_eq!(r.status(), 202);
    let mails = eventually(Duration::from_secs(10), || async {
        Some(s.mail.messages()).filter(|m| !m.is_empty())
    })
    .await
    .expect("an e-mail to alice");
    // Quoted-printable, read back: soft line breaks joined, `=3D` an `=`.
    let mail = mails[0].replace("=\r\n", "").replace("=\n", "").replace("=3D", "=");
    assert!(mail.contains("https://herald.example.com/act/"), "{mail}");
    assert!(
        mail.contains("https://herald.example.com/apps/argocd/payments-api"),
        "{mail}"
    );
    slack_posts(&s.slack).await.expect("a DM");
    let requests = s.slack.received_requests().await.unwrap_or_default();
    let dm = String::from_utf8_lossy(&requests[0].body).to_string();
    assert!(dm.contains("https://herald.example.com/act/"), "{dm}");
    s.told_once(1, 1).await;
}

#[tokio::test]
async fn an_automated_failed_sync_tells_the_team_only() {
    let s = Setup::start("").await;

    s.app
        .post(failed_sync("payments-api", json!({"automated": true})))
        .await;

    assert!(s.team_notes().await.is_empty());
    s.told_once(0, 0).await;
}

#[tokio::test]
async fn a_user_with_no_contact_is_the_teams_alone_and_the_team_is_told_so() {
    let s = Setup::start("").await;

    s.app
        .post(failed_sync("payments-api", json!({"username": "mallory"})))
        .await;

    assert_eq!(s.team_notes().await, vec!["started by mallory (no contact configured)"]);
    s.told_once(0, 0).await;
}

#[tokio::test]
async fn a_restart_between_ingest_and_delivery_still_tells_alice_once() {
    let dir = Arc::new(tempfile::tempdir().expect("tmp"));
    let mail = Mailbox::start(dir.path()).await;
    // Slack is down while the failure is ingested: the DM waits in the outbox.
    let down = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(503))
        .mount(&down)
        .await;
    let app = TestApp::spawn_in(
        dir.clone(),
        &config(dir.path(), &down, mail.port),
        Arc::new(SystemClock),
    )
    .await;
    app.post(failed_sync("payments-api", json!({"username": "alice"})))
        .await;
    // Both rows are tried before the restart (each by its own worker pass: wait for both, not one).
    let emailed = eventually(Duration::from_secs(10), || async {
        Some(()).filter(|_| !mail.messages().is_empty())
    })
    .await;
    assert!(emailed.is_some(), "the e-mail went before the restart");
    assert!(slack_posts(&down).await.is_some(), "the DM was tried and failed");
    let dir = app.stop().await;

    let up = slack_answering(200).await;
    let app = TestApp::spawn_in(dir.clone(), &config(dir.path(), &up, mail.port), Arc::new(SystemClock)).await;

    let dm = slack_posts(&up).await;
    assert_eq!(dm, Some(vec!["U024BE7LH".to_string()]));
    app.settle().await;
    assert_eq!(slack_channels(&up).await.len(), 1, "delivered once");
    assert_eq!(
        mail.messages().len(),
        1,
        "the e-mail went once, before the restart or after"
    );
    app.stop().await;
}

#[test]
fn check_config_refuses_wrong_people_and_people_receivers() {
    let dir = tempfile::tempdir().expect("tmp");
    let cases = [
        ("people: {alice: {email: alice@example.com, phone: '123'}}", "people"),
        ("people: {alice: {slack: C024BE7LH}}", "people.alice.slack"),
        ("people: {alice: {email: 'alice at example'}}", "people.alice.email"),
        ("people_receivers: {slack: nobody}", "people_receivers.slack"),
        ("people_receivers: {email: hook}", "people_receivers.email"),
        ("people_receivers: {slack: hook}", "people_receivers.slack"),
    ];
    for (yaml, key) in cases {
        let file = dir.path().join("herald.yaml");
        let receivers = "receivers: [{name: hook, slack: {webhook_url: 'https://hooks.slack.com/services/T/B/X'}}]";
        std::fs::write(&file, format!("{receivers}\n{yaml}\n")).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(["check-config", &file.display().to_string()])
            .output()
            .expect("herald runs");
        let text = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{yaml}: accepted");
        assert!(text.contains(key), "{yaml}: expected {key} in {text}");
    }
}

#[tokio::test]
async fn a_failure_that_fires_later_tells_alice_when_it_fires() {
    let s = Setup::start("rules: {sync_failed: {for: 1s}}\n").await;

    s.app
        .post(failed_sync("payments-api", json!({"username": "alice"})))
        .await;
    assert!(slack_channels(&s.slack).await.is_empty(), "pending: nobody is told yet");

    assert_eq!(s.team_notes().await, vec!["started by alice"]);
    assert_eq!(slack_posts(&s.slack).await, Some(vec!["U024BE7LH".to_string()]));
    s.told_once(1, 1).await;
}

#[tokio::test]
async fn a_sync_alice_started_that_pruned_tells_her_too() {
    let s = Setup::start("").await;
    let pruned = with_operation(
        &envelope("payments-api", "payments", "Synced", "Healthy", &now_rfc3339()),
        json!({"phase": "Succeeded", "message": "successfully synced", "startedAt": now_rfc3339(),
               "operation": {"initiatedBy": {"username": "alice"}},
               "syncResult": {"resources": [{"kind": "ConfigMap", "namespace": "payments-api", "name": "old",
                                              "status": "Pruned", "message": "pruned"}]}}),
    );

    s.app.post(pruned).await;

    assert_eq!(s.team_notes().await, vec!["started by alice"]);
    assert_eq!(slack_posts(&s.slack).await, Some(vec!["U024BE7LH".to_string()]));
    s.told_once(1, 1).await;
}
