//! The e-mail receiver against a real SMTP server (aiosmtpd): multipart messages, threading, pooled connections,
//! STARTTLS and implicit TLS, AUTH, refused and deferred recipients, timeouts, templates, settings checks.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use secrecy::SecretString;

use super::test_server::{SmtpServer, free_port, self_signed_cert};
use super::*;
use crate::receivers::testing::{self, APP_URL};

fn smtp(url: String) -> SmtpSettings {
    SmtpSettings {
        url,
        from: "Herald <herald@example.com>".into(),
        username: None,
        password: None,
        ca_file: None,
        timeout: Duration::from_secs(5),
    }
}

/// The e-mail receiver for `payments@` and `oncall@` (cc `lead@`), sending through `smtp`.
fn email(smtp: SmtpSettings) -> Email {
    Email::new(mail_settings(), Some(smtp), None, testing::clock()).unwrap()
}

/// A plain SMTP server keeping its mail in `dir`, and an e-mail receiver sending through it.
fn plain_smtp(dir: &Path) -> (SmtpServer, Email) {
    let server = SmtpServer::start(dir, &[]);
    let email = email(smtp(server.url("smtp")));
    (server, email)
}

/// An SMTP server with a self-signed certificate (kept in `dir`), for STARTTLS (`mode` "tls") or implicit TLS
/// ("smtps"); answers the server and the certificate, which is its own CA.
fn tls_server(dir: &Path, mode: &str) -> (SmtpServer, PathBuf) {
    let (cert, key) = self_signed_cert(dir);
    let args = [
        format!("--{mode}cert"),
        cert.display().to_string(),
        format!("--{mode}key"),
        key.display().to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (SmtpServer::start(dir, &args), cert)
}

fn mail_settings() -> Config {
    Config {
        to: vec!["payments@example.com".into(), "oncall@example.com".into()],
        cc: vec!["lead@example.com".into()],
    }
}

/// A sync failure whose title and summary need escaping in HTML.
fn notification(action: Action) -> Notification {
    let mut n = testing::notification(action);
    n.title = "payments-api: sync failed <prod>".into();
    let i = &mut n.incidents_mut()[0];
    i.summary = "Sync of payments-api failed: Deployment & Service invalid".into();
    i.kind = crate::domain::Kind::SyncFailed;
    i.condition = "sync failed: Deployment & Service invalid".into();
    i.resources[0].status = "SyncFailed".into();
    i.resources[0].message = "spec.replicas: Invalid value".into();
    n
}

fn assert_is_the_sync_failed_message(m: &serde_json::Value) {
    assert_eq!(m["subject"], "[FIRING] payments-api: sync failed <prod>");
    assert_eq!(m["from"], "Herald <herald@example.com>");
    assert_eq!(m["to"], "payments@example.com, oncall@example.com");
    assert_eq!(m["cc"], "lead@example.com");
    assert_eq!(
        m["rcpt_to"],
        "payments@example.com, oncall@example.com, lead@example.com"
    );
    assert_eq!(m["content_type"], "multipart/alternative");
    assert_eq!(m["auto_submitted"], "auto-generated");
    let text = m["text"].as_str().unwrap();
    assert!(
        text.contains("* [FIRING] sync failed: Deployment & Service invalid, at 11:55 UTC"),
        "{text}"
    );
    assert!(
        text.contains("Deployment payments/payments-api: SyncFailed — spec.replicas: Invalid value"),
        "{text}"
    );
    let html = m["html"].as_str().unwrap();
    assert!(html.contains(">payments-api: sync failed &lt;prod&gt;</h2>"), "{html}");
    assert!(html.contains("Deployment &amp; Service invalid"), "{html}");
    assert!(html.contains(&format!("href=\"{APP_URL}\"")), "{html}");
}

#[tokio::test]
async fn a_firing_group_is_mailed_as_text_and_html_over_plain_smtp() {
    let dir = tempfile::tempdir().unwrap();
    let (server, email) = plain_smtp(dir.path());

    let delivered = email.deliver(&notification(Action::Open), None).await.unwrap();

    let messages = server.messages(1);
    assert_is_the_sync_failed_message(&messages[0]);
    assert_eq!(
        delivered.memo,
        Some(serde_json::json!({ "message_id": messages[0]["message_id"] }))
    );
    assert_eq!(server.stored(), 1, "exactly one message");
}

#[tokio::test]
async fn a_digest_is_mailed_as_an_html_table_with_a_plain_text_part_in_no_thread() {
    let dir = tempfile::tempdir().unwrap();
    let server = SmtpServer::start(dir.path(), &[]);
    let email = email(smtp(format!("smtp://127.0.0.1:{}", server.port)));
    let n = crate::receivers::render::digest::tests::notification(crate::receivers::render::digest::tests::digest());

    let delivered = email.deliver(&n, None).await.unwrap();

    let m = &server.messages(1)[0];
    assert_eq!(
        m["subject"],
        "[DIGEST] Digest for payments: 1 OutOfSync, 1 incident firing"
    );
    assert_eq!(m["content_type"], "multipart/alternative");
    let html = m["html"].as_str().unwrap();
    assert!(html.contains("<table") && html.contains("<th"), "{html}");
    assert!(html.contains("Degraded &lt;script&gt;"), "{html}");
    let text = m["text"].as_str().unwrap();
    assert!(text.contains("Incidents firing (1)"), "{text}");
    assert!(
        text.contains("argocd/pay — Degraded <script> — since Fri 2026-10-23 07:30 CEST"),
        "{text}"
    );
    assert_eq!(delivered.memo, None, "a digest starts no thread");
    assert_eq!(server.stored(), 1, "exactly one message");
}

/// RFC 5322 §2.1.1: a line of a message is at most 998 characters before its CRLF.
const MAX_LINE: usize = 998;

#[tokio::test]
async fn a_digest_of_1000_applications_and_a_group_of_500_fit_in_100_kb_with_no_line_over_998_characters() {
    use crate::receivers::limits_tests::{assert_digest_accounted, assert_group_accounted, big_digest, big_group};
    let dir = tempfile::tempdir().unwrap();
    let (server, email) = plain_smtp(dir.path());

    email.deliver(&big_digest(), None).await.unwrap();
    email.deliver(&big_group(), None).await.unwrap();

    for (what, raw) in ["digest", "group"].iter().zip(server.raw_messages(2)) {
        let longest = raw
            .split(|b| *b == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l).len())
            .max();
        assert!(longest.unwrap_or(0) <= MAX_LINE, "{what}: a line of {longest:?} bytes");
        // Gmail clips a message beyond about 102 KB, hiding the cut's count and link.
        assert!(
            raw.len() <= super::MAX_MESSAGE_BYTES + 1_000,
            "{what}: {} bytes as stored",
            raw.len()
        );
        println!("{what}: {} bytes as stored", raw.len());
    }
    // Cut, never lost: each part shows rows and counts the rest, the cut linking to the team's status page.
    let messages = server.messages(2);
    for part in ["text", "html"] {
        let digest = messages[0][part].as_str().unwrap();
        assert_digest_accounted(&format!("digest {part}"), digest, 40);
        let group = messages[1][part].as_str().unwrap();
        assert_group_accounted(&format!("group {part}"), group, 40);
    }
    assert_eq!(server.stored(), 2, "exactly two messages");
}

#[tokio::test]
async fn a_short_message_is_never_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (server, email) = plain_smtp(dir.path());
    let mut n = crate::receivers::limits_tests::big_group();
    crate::receivers::testing::incidents_of(&mut n).truncate(60);
    email.deliver(&n, None).await.unwrap();
    let m = &server.messages(1)[0];
    for part in ["text", "html"] {
        let text = m[part].as_str().unwrap();
        assert_eq!(text.matches("grp-").count(), 60, "{part}: every Application");
        assert!(!text.contains(" more"), "{part}: nothing cut");
    }
}

#[tokio::test]
async fn updates_and_the_resolve_reply_to_the_first_message_through_one_pooled_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (server, email) = plain_smtp(dir.path());

    let first = email.deliver(&notification(Action::Open), None).await.unwrap();
    let memo = first.memo.clone().unwrap();
    // lettre parks a used connection from a spawned task; let it run, as time between deliveries would.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let update = email.deliver(&notification(Action::Update), Some(&memo)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let resolve = email
        .deliver(&notification(Action::Resolve), Some(&memo))
        .await
        .unwrap();
    assert_eq!(
        (update.memo, resolve.memo),
        (None, None),
        "the thread keeps its first message"
    );

    let messages = server.messages(3);
    assert_eq!(server.stored(), 3);
    let first_id = memo["message_id"].as_str().unwrap();
    assert_eq!(messages[0]["message_id"], first_id);
    assert_eq!(messages[0]["in_reply_to"], serde_json::Value::Null);
    for m in &messages[1..] {
        assert_eq!(m["in_reply_to"], first_id);
        assert_eq!(m["references"], first_id);
    }
    assert_eq!(messages[1]["subject"], "[FIRING] payments-api: sync failed <prod>");
    assert_eq!(messages[2]["subject"], "[RESOLVED] payments-api: sync failed <prod>");
    assert!(messages[2]["text"].as_str().unwrap().contains("* [RESOLVED]"));
    // The same client address and port: the pooled connection was reused, not reopened.
    assert_eq!(messages[1]["peer"], messages[0]["peer"]);
    assert_eq!(messages[2]["peer"], messages[0]["peer"]);
}

#[tokio::test]
async fn starttls_to_a_relay_with_a_self_signed_certificate_trusted_through_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let (server, cert) = tls_server(dir.path(), "tls");
    let url = format!("smtp://127.0.0.1:{}?tls=required", server.port);

    // Without the CA the certificate is refused, and retrying may help once the relay's certificate is fixed.
    let untrusting = email(smtp(url.clone()));
    let err = untrusting.deliver(&notification(Action::Open), None).await.unwrap_err();
    assert!(matches!(err, DeliveryError::Transient { .. }), "{err:?}");

    let mut settings = smtp(url);
    settings.ca_file = Some(cert.display().to_string());
    let email = email(settings);
    email.deliver(&notification(Action::Open), None).await.unwrap();

    let messages = server.messages(1);
    assert_is_the_sync_failed_message(&messages[0]);
    assert_eq!(server.stored(), 1, "the refused attempt stored nothing");
}

#[tokio::test]
async fn implicit_tls_with_smtps() {
    let dir = tempfile::tempdir().unwrap();
    let (server, cert) = tls_server(dir.path(), "smtps");
    let mut settings = smtp(server.url("smtps"));
    settings.ca_file = Some(cert.display().to_string());
    let email = email(settings);

    email.deliver(&notification(Action::Open), None).await.unwrap();

    assert_is_the_sync_failed_message(&server.messages(1)[0]);
}

#[tokio::test]
async fn smtp_auth_with_the_right_password_delivers_and_a_wrong_one_is_permanent_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let server = SmtpServer::start_with_auth(dir.path(), "herald", "s3cret-Pa55");
    let with_password = |password: &str| {
        let mut s = smtp(server.url("smtp"));
        s.username = Some("herald".into());
        s.password = Some(SecretString::from(password.to_string()));
        email(s)
    };

    let err = with_password("wrong-Pa55word")
        .deliver(&notification(Action::Open), None)
        .await
        .unwrap_err();
    assert!(matches!(err, DeliveryError::Permanent { .. }), "{err:?}");
    assert!(err.to_string().contains("535"), "{err}");
    assert!(!err.to_string().contains("wrong-Pa55word"), "{err}");
    assert!(!err.to_string().contains("s3cret-Pa55"), "{err}");

    with_password("s3cret-Pa55")
        .deliver(&notification(Action::Open), None)
        .await
        .unwrap();
    assert_is_the_sync_failed_message(&server.messages(1)[0]);
    assert_eq!(server.stored(), 1);
}

#[tokio::test]
async fn a_relay_echoing_the_auth_exchange_leaks_neither_the_plain_nor_the_login_form_of_the_password() {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    for mechanism in ["PLAIN", "LOGIN"] {
        let dir = tempfile::tempdir().unwrap();
        let server = SmtpServer::start_echoing_auth(dir.path(), mechanism);
        let mut s = smtp(server.url("smtp"));
        s.username = Some("herald".into());
        s.password = Some(SecretString::from("pw9".to_string()));

        let err = email(s).deliver(&notification(Action::Open), None).await.unwrap_err();

        let text = testing::error_text(&err);
        assert!(
            text.contains("535") && text.contains("refused: EHLO"),
            "{mechanism}: {text}"
        );
        testing::assert_no_secret(&err, &["pw9", &b64("\0herald\0pw9"), &b64("pw9")]);
    }
}

#[tokio::test]
async fn a_refused_recipient_is_permanent_and_a_deferred_one_is_transient() {
    let dir = tempfile::tempdir().unwrap();
    let server = SmtpServer::start_with_auth(dir.path(), "herald", "pw");
    let mut s = smtp(server.url("smtp"));
    s.username = Some("herald".into());
    s.password = Some(SecretString::from("pw".to_string()));
    let to = |address: &str| Config {
        to: vec![address.into()],
        cc: vec![],
    };

    let refused = Email::new(to("nobody@example.com"), Some(s.clone()), None, testing::clock()).unwrap();
    let err = refused.deliver(&notification(Action::Open), None).await.unwrap_err();
    assert!(matches!(err, DeliveryError::Permanent { .. }), "{err:?}");
    assert!(err.to_string().contains("550"), "{err}");

    let deferred = Email::new(to("later@example.com"), Some(s), None, testing::clock()).unwrap();
    let err = deferred.deliver(&notification(Action::Open), None).await.unwrap_err();
    assert!(matches!(err, DeliveryError::Transient { .. }), "{err:?}");
    assert!(err.to_string().contains("451"), "{err}");

    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(server.stored(), 0);
}

#[tokio::test]
async fn a_relay_that_is_down_is_transient() {
    let port = free_port();
    let email = email(smtp(format!("smtp://127.0.0.1:{port}")));
    let err = email.deliver(&notification(Action::Open), None).await.unwrap_err();
    assert!(matches!(err, DeliveryError::Transient { .. }), "{err:?}");
}

#[tokio::test]
async fn a_relay_that_accepts_but_never_answers_times_out_as_transient() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let mut settings = smtp(format!("smtp://127.0.0.1:{port}"));
    settings.timeout = Duration::from_millis(500);
    let email = email(settings);

    let started = Instant::now();
    let err = email.deliver(&notification(Action::Open), None).await.unwrap_err();
    assert!(matches!(err, DeliveryError::Transient { .. }), "{err:?}");
    assert!(err.to_string().contains("did not answer"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    silent.abort();
}

#[tokio::test]
async fn a_custom_template_replaces_the_text_part_and_test_messages_are_marked_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = SmtpServer::start(dir.path(), &[]);
    let template = "Herald says: {{ notification.title }} ({{ incidents | length }} incident)".to_string();
    let email = Email::new(
        mail_settings(),
        Some(smtp(server.url("smtp"))),
        Some(template),
        testing::clock(),
    )
    .unwrap();

    let n = Notification::test("team-mail", chrono::Utc::now());
    let delivered = email.deliver(&n, None).await.unwrap();
    assert_eq!(delivered.memo, None, "a test message starts no thread");

    let m = &server.messages(1)[0];
    assert_eq!(m["subject"], "[TEST] Herald test notification");
    assert_eq!(
        m["text"].as_str().unwrap().trim_end(),
        "Herald says: [TEST] Herald test notification (1 incident)"
    );
    assert!(
        m["html"]
            .as_str()
            .unwrap()
            .contains(">[TEST] Herald test notification</h2>")
    );
}

#[test]
fn settings_are_checked_when_the_receiver_is_built() {
    let build = |s: SmtpSettings| {
        Email::new(mail_settings(), Some(s), None, testing::clock())
            .err()
            .unwrap_or_default()
    };
    assert!(Email::new(mail_settings(), None, None, testing::clock()).is_err());
    assert!(build(smtp("imap://mail.example.com".into())).contains("unsupported scheme"));
    let with_userinfo = build(smtp("smtps://bob:hunter2@mail.example.com".into()));
    assert!(with_userinfo.contains("must not carry credentials"), "{with_userinfo}");
    assert!(!with_userinfo.contains("hunter2"));
    let mut missing_ca = smtp("smtps://mail.example.com".into());
    missing_ca.ca_file = Some("/nonexistent/ca.pem".into());
    assert!(build(missing_ca).contains("smtp.ca_file"));
    let mut half_auth = smtp("smtp://mail.example.com?tls=required".into());
    half_auth.username = Some("bob".into());
    assert!(build(half_auth).contains("go together"));
    for ok in [
        "smtp://mail.example.com:25",
        "smtp://mail.example.com:587?tls=required",
        "smtps://mail.example.com:465",
    ] {
        assert_eq!(build(smtp(ok.into())), "", "{ok}");
    }
}

#[tokio::test]
async fn a_message_to_a_person_goes_to_their_address_alone() {
    let dir = tempfile::tempdir().unwrap();
    let server = SmtpServer::start(dir.path(), &[]);
    let email = email(smtp(format!("smtp://127.0.0.1:{}", server.port)));
    let mut n = notification(Action::Open);
    n.recipient = Some(crate::domain::Recipient {
        username: "alice".into(),
        email: Some("alice@example.com".into()),
        slack: None,
    });

    email.deliver(&n, None).await.unwrap();

    let m = &server.messages(1)[0];
    assert_eq!(m["to"], "alice@example.com");
    assert_eq!(m["rcpt_to"], "alice@example.com", "not the receiver's to and cc");
    assert_eq!(server.stored(), 1);
}
