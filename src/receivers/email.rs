//! The e-mail receiver: one multipart (plain text + HTML) message per notification, sent over SMTP through one
//! pooled lettre transport per receiver (plain, STARTTLS or implicit TLS; optional AUTH and an extra trusted CA).
//! Messages of one thread are chained with `In-Reply-To`/`References` so mail clients show them as a conversation.

use std::sync::Mutex;
use std::time::Duration;

use lettre::message::{Mailbox, MultiPart, header};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::transport::smtp::{AsyncSmtpTransportBuilder, PoolConfig};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use secrecy::ExposeSecret;

use super::redact::Redactor;
use super::{Delivered, DeliveryError, Memo, Receiver};
use crate::clock::SharedClock;
use crate::configuration::{EmailSettings, SmtpSettings};
use crate::domain::{Action, Notification};
use crate::receivers::render;

type Transport = AsyncSmtpTransport<Tokio1Executor>;

pub struct Email {
    from: Mailbox,
    to: Vec<Mailbox>,
    cc: Vec<Mailbox>,
    template: Option<String>,
    /// Everything needed to connect, checked when the receiver is built.
    builder: AsyncSmtpTransportBuilder,
    /// The pooled transport, built on first use: lettre's pool spawns its cleanup task on the Tokio runtime,
    /// which may not be running yet when receivers are built from settings. Dropped after a timeout, so a
    /// connection abandoned mid-transaction is never reused.
    transport: Mutex<Option<Transport>>,
    /// Bound on one whole send: lettre only bounds the TCP connect, not a server that stops answering.
    timeout: Duration,
    /// Removes the password from every error text, in case a server echoes it back.
    redactor: Redactor,
    /// Dates the messages (lettre would read the machine's clock).
    clock: SharedClock,
}

/// How the connection to the relay is secured, from the URL's scheme and `tls` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Security {
    Plain,
    Opportunistic,
    StartTls,
    Implicit,
}

impl Email {
    pub fn new(
        settings: EmailSettings,
        smtp: Option<SmtpSettings>,
        template: Option<String>,
        clock: SharedClock,
    ) -> Result<Self, String> {
        let smtp = smtp.ok_or("an email receiver needs the `smtp` section (url, from)")?;
        let from: Mailbox = smtp
            .from
            .parse()
            .map_err(|e| format!("smtp.from {:?} is not an e-mail address: {e}", smtp.from))?;
        let parse_all = |field: &str, list: &[String]| -> Result<Vec<Mailbox>, String> {
            list.iter()
                .map(|a| {
                    a.parse::<Mailbox>()
                        .map_err(|e| format!("email.{field}: {a:?} is not an e-mail address: {e}"))
                })
                .collect()
        };
        let to = parse_all("to", &settings.to)?;
        let cc = parse_all("cc", &settings.cc)?;
        if to.is_empty() {
            return Err("email.to needs at least one address".into());
        }
        let builder = transport_builder(&smtp)?;
        Ok(Self {
            from,
            to,
            cc,
            template,
            builder,
            transport: Mutex::new(None),
            timeout: smtp.timeout,
            redactor: match &smtp.password {
                Some(p) => Redactor::default().secret(p.expose_secret()),
                None => Redactor::default(),
            },
            clock,
        })
    }

    fn transport(&self) -> Transport {
        let mut slot = self.transport.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert_with(|| self.builder.clone().build()).clone()
    }

    fn forget_transport(&self) {
        *self.transport.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn subject(n: &Notification) -> String {
        let word = render::status_word(n);
        let tag = format!("[{word}]");
        // The test notification's title already says "[TEST]"; don't say it twice.
        if n.title.starts_with(&tag) {
            n.title.clone()
        } else {
            format!("{tag} {}", n.title)
        }
    }

    /// A fresh Message-ID in the sender's domain, so replies thread under it.
    fn new_message_id(&self) -> String {
        let domain = self.from.email.domain();
        format!("<herald.{}@{domain}>", uuid::Uuid::new_v4().simple())
    }

    fn message(&self, n: &Notification, message_id: &str, parent: Option<&str>) -> Result<Message, DeliveryError> {
        let text = render::custom_text(self.template.as_deref(), n)?.unwrap_or_else(|| render::text(n));
        let mut b = Message::builder()
            .from(self.from.clone())
            .subject(Self::subject(n))
            .message_id(Some(message_id.to_string()))
            .date(std::time::SystemTime::from(self.clock.now()))
            // Tells vacation responders and ticket systems not to answer an automated message.
            .raw_header(header::HeaderValue::new(
                header::HeaderName::new_from_ascii_str("Auto-Submitted"),
                "auto-generated".into(),
            ));
        for m in &self.to {
            b = b.to(m.clone());
        }
        for m in &self.cc {
            b = b.cc(m.clone());
        }
        if let Some(parent) = parent {
            b = b.in_reply_to(parent.to_string()).references(parent.to_string());
        }
        b.multipart(MultiPart::alternative_plain_html(text, render::html(n)))
            .map_err(|e| DeliveryError::permanent(format!("cannot build the message: {e}")))
    }

    /// SMTP reply codes decide: 4xx may pass later, 5xx (bad recipient, failed AUTH) will not. Without a reply,
    /// connection trouble and timeouts are worth retrying; a client-side refusal (no common AUTH mechanism,
    /// no STARTTLS offered) needs a configuration change.
    fn classify(&self, e: lettre::transport::smtp::Error) -> DeliveryError {
        let reason = self.redactor.scrub(&e.to_string());
        if e.is_permanent() {
            DeliveryError::permanent(format!("SMTP server refused the message: {reason}"))
        } else if e.is_transient() {
            DeliveryError::transient(format!("SMTP server deferred the message: {reason}"))
        } else if e.is_timeout() {
            DeliveryError::transient(format!("SMTP timed out: {reason}"))
        } else if e.is_client() {
            DeliveryError::permanent(format!("SMTP client: {reason}"))
        } else {
            DeliveryError::transient(format!("SMTP: {reason}"))
        }
    }
}

/// Turns `smtp.url` (+ credentials, CA, timeout) into a transport builder. Errors never quote the URL: it could
/// carry credentials.
fn transport_builder(smtp: &SmtpSettings) -> Result<AsyncSmtpTransportBuilder, String> {
    let url = url::Url::parse(&smtp.url).map_err(|e| format!("smtp.url is not a valid URL: {e}"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("smtp.url must not carry credentials: set smtp.username and smtp.password".into());
    }
    let host = url.host_str().ok_or("smtp.url needs a host")?.to_string();
    let tls = url.query_pairs().find(|(k, _)| k == "tls").map(|(_, v)| v.into_owned());
    let (security, default_port) = match (url.scheme(), tls.as_deref()) {
        ("smtp", None | Some("none")) => (Security::Plain, 25),
        ("smtp", Some("opportunistic")) => (Security::Opportunistic, 587),
        ("smtp", Some("required")) => (Security::StartTls, 587),
        ("smtps", None) => (Security::Implicit, 465),
        (scheme, tls) => {
            return Err(format!(
                "smtp.url: unsupported scheme {scheme:?} with tls={tls:?} (use smtp://, smtp://…?tls=required or smtps://)"
            ));
        }
    };
    let port = url.port().unwrap_or(default_port);

    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host.clone())
        .port(port)
        .timeout(Some(smtp.timeout))
        .pool_config(PoolConfig::new().max_size(4));
    if url.path().len() > 1 {
        let name = url.path().trim_matches('/').to_string();
        builder = builder.hello_name(lettre::transport::smtp::extension::ClientId::Domain(name));
    }
    if security != Security::Plain {
        let mut params = TlsParameters::builder(host);
        if let Some(path) = &smtp.ca_file {
            let pem = std::fs::read(path).map_err(|e| format!("smtp.ca_file: cannot read {path}: {e}"))?;
            let cert = Certificate::from_pem(&pem).map_err(|e| format!("smtp.ca_file: {path}: {e}"))?;
            params = params.add_root_certificate(cert);
        }
        let params = params.build().map_err(|e| format!("smtp: TLS setup failed: {e}"))?;
        builder = builder.tls(match security {
            Security::Opportunistic => Tls::Opportunistic(params),
            Security::StartTls => Tls::Required(params),
            _ => Tls::Wrapper(params),
        });
    } else if smtp.ca_file.is_some() {
        return Err("smtp.ca_file is set but smtp.url uses no TLS (add ?tls=required or use smtps://)".into());
    }
    match (&smtp.username, &smtp.password) {
        (Some(user), Some(pass)) => {
            builder = builder.credentials(Credentials::new(user.clone(), pass.expose_secret().to_string()));
        }
        (None, None) => {}
        _ => return Err("smtp.username and smtp.password go together".into()),
    }
    Ok(builder)
}

#[async_trait::async_trait]
impl Receiver for Email {
    async fn deliver(&self, n: &Notification, memo: Option<&Memo>) -> Result<Delivered, DeliveryError> {
        // A new firing starts a new conversation; updates and the resolve reply to the first message.
        let parent = match n.action {
            Action::Update | Action::Resolve => memo
                .and_then(|m| m.get("message_id"))
                .and_then(|v| v.as_str())
                .map(str::to_string),
            Action::Open | Action::Test => None,
        };
        let message_id = self.new_message_id();
        let message = self.message(n, &message_id, parent.as_deref())?;
        let recipients = message.envelope().to().len();
        match tokio::time::timeout(self.timeout, self.transport().send(message)).await {
            Ok(sent) => sent.map_err(|e| self.classify(e))?,
            Err(_) => {
                self.forget_transport();
                return Err(DeliveryError::transient(format!(
                    "SMTP server did not answer within {}",
                    humantime::format_duration(self.timeout)
                )));
            }
        };
        let memo = match (n.action, &parent) {
            (Action::Test, _) | (_, Some(_)) => None,
            (_, None) => Some(serde_json::json!({ "message_id": message_id })),
        };
        Ok(Delivered {
            memo,
            detail: format!("sent {message_id} to {recipients} recipient(s)"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Incident, ResourceRef};
    use crate::receivers::testing;
    use secrecy::SecretString;
    use std::net::TcpListener;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::Instant;

    const INSTALL: &str = "these tests need python3 with aiosmtpd: `pip install aiosmtpd==1.4.6`";

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
    }

    fn require_aiosmtpd() {
        let ok = Command::new("python3")
            .args(["-c", "import aiosmtpd"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "{INSTALL}");
    }

    /// A real SMTP server on 127.0.0.1, killed on drop; it stores what it accepts as a Maildir.
    struct SmtpServer {
        child: Child,
        port: u16,
        maildir: PathBuf,
    }

    impl SmtpServer {
        fn start(dir: &Path, extra_args: &[&str]) -> Self {
            require_aiosmtpd();
            let port = free_port();
            let maildir = dir.join("maildir");
            let mut args: Vec<String> = vec!["-m".into(), "aiosmtpd".into(), "-n".into(), "-l".into()];
            args.push(format!("127.0.0.1:{port}"));
            args.extend(extra_args.iter().map(|s| s.to_string()));
            args.extend([
                "-c".into(),
                "aiosmtpd.handlers.Mailbox".into(),
                maildir.display().to_string(),
            ]);
            Self::spawn(Command::new("python3").args(&args), port, maildir)
        }

        /// The AUTH server: a few lines of Python around aiosmtpd's Controller, with recipients that the
        /// server refuses permanently (550) or temporarily (451).
        fn start_with_auth(dir: &Path, user: &str, password: &str) -> Self {
            require_aiosmtpd();
            let port = free_port();
            let maildir = dir.join("maildir");
            let script = dir.join("auth_server.py");
            std::fs::write(&script, AUTH_SERVER).unwrap();
            let mut cmd = Command::new("python3");
            cmd.arg(&script)
                .arg(port.to_string())
                .arg(&maildir)
                .arg(user)
                .arg(password);
            Self::spawn(&mut cmd, port, maildir)
        }

        fn spawn(cmd: &mut Command, port: u16, maildir: PathBuf) -> Self {
            let child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start python3 ({e}); {INSTALL}"));
            let mut server = Self { child, port, maildir };
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return server;
                }
                if let Ok(Some(status)) = server.child.try_wait() {
                    panic!("the SMTP server exited with {status}; {INSTALL}");
                }
                assert!(Instant::now() < deadline, "the SMTP server did not listen on {port}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }

        /// Waits for `count` stored messages and returns them parsed, oldest first.
        fn messages(&self, count: usize) -> Vec<serde_json::Value> {
            let new = self.maildir.join("new");
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let mut files: Vec<PathBuf> = std::fs::read_dir(&new)
                    .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
                    .unwrap_or_default();
                if files.len() >= count {
                    files.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).unwrap());
                    return files.iter().map(|f| parse_mail(f)).collect();
                }
                assert!(
                    Instant::now() < deadline,
                    "expected {count} messages, found {}",
                    files.len()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }

        fn stored(&self) -> usize {
            std::fs::read_dir(self.maildir.join("new"))
                .map(|d| d.count())
                .unwrap_or(0)
        }
    }

    impl Drop for SmtpServer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    const AUTH_SERVER: &str = r#"
import sys, time
from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox
from aiosmtpd.smtp import AuthResult, LoginPassword

port, maildir, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode(), sys.argv[4].encode()

class Handler(Mailbox):
    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("nobody@"):
            return "550 5.1.1 no such user"
        if address.startswith("later@"):
            return "451 4.3.0 mailbox busy, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

def authenticator(server, session, envelope, mechanism, auth_data):
    ok = isinstance(auth_data, LoginPassword) and auth_data.login == user and auth_data.password == password
    # handled=False: aiosmtpd then answers 535 itself (handled=True would leave the client waiting).
    return AuthResult(success=ok, handled=False)

controller = Controller(Handler(maildir), hostname="127.0.0.1", port=port,
                        authenticator=authenticator, auth_require_tls=False, auth_required=True)
controller.start()
while True:
    time.sleep(3600)
"#;

    /// Parses one stored message with Python's e-mail package (already needed for the server).
    fn parse_mail(path: &Path) -> serde_json::Value {
        let script = r#"
import sys, json, email
from email import policy
m = email.message_from_binary_file(open(sys.argv[1], "rb"), policy=policy.default)
text = m.get_body(preferencelist=("plain",))
html = m.get_body(preferencelist=("html",))
print(json.dumps({
    "subject": m["subject"], "from": m["from"], "to": m["to"], "cc": m["cc"],
    "rcpt_to": m["x-rcptto"], "peer": m["x-peer"], "message_id": m["message-id"], "in_reply_to": m["in-reply-to"],
    "references": m["references"], "auto_submitted": m["auto-submitted"],
    "content_type": m.get_content_type(),
    "text": text.get_content() if text else None, "html": html.get_content() if html else None,
}))
"#;
        let out = Command::new("python3").args(["-c", script]).arg(path).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

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

    fn mail_settings() -> EmailSettings {
        EmailSettings {
            to: vec!["payments@example.com".into(), "oncall@example.com".into()],
            cc: vec!["lead@example.com".into()],
        }
    }

    fn notification(action: Action) -> Notification {
        let now = chrono::Utc::now();
        let mut n = Notification::test("team-mail", now);
        n.action = action;
        n.thread_key = "team=payments,kind=sync_failed".into();
        n.title = "payments-api: sync failed <prod>".into();
        n.reason = "fired".into();
        n.incidents = vec![Incident {
            fingerprint: "argocd/payments-api/sync_failed".into(),
            kind: crate::domain::Kind::SyncFailed,
            severity: crate::domain::Severity::Critical,
            state: if action == Action::Resolve {
                crate::domain::IncidentState::Resolved
            } else {
                crate::domain::IncidentState::Firing
            },
            summary: "Sync of payments-api failed: Deployment & Service invalid".into(),
            app_namespace: "argocd".into(),
            app_name: "payments-api".into(),
            project: "payments".into(),
            team: "payments".into(),
            destination_cluster: "in-cluster".into(),
            destination_namespace: "payments".into(),
            app_url: Some("https://argocd.example.com/applications/argocd/payments-api".into()),
            since: now,
            fired_at: Some(now),
            resources: vec![ResourceRef {
                kind: "Deployment".into(),
                namespace: "payments".into(),
                name: "api".into(),
                status: "SyncFailed".into(),
                message: "spec.replicas: Invalid value".into(),
            }],
            ..Default::default()
        }];
        n
    }

    fn self_signed_cert(dir: &Path) -> (PathBuf, PathBuf) {
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        let out = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=localhost",
            ])
            .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
            // rustls refuses a CA certificate as the server's own (CaUsedAsEndEntity), and openssl's default is CA:TRUE.
            .args(["-addext", "basicConstraints=critical,CA:FALSE", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("openssl is needed to make a test certificate: `apt-get install -y openssl`");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (cert, key)
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
            text.contains("* [FIRING] Sync of payments-api failed: Deployment & Service invalid"),
            "{text}"
        );
        assert!(
            text.contains("Deployment/payments/api (SyncFailed): spec.replicas: Invalid value"),
            "{text}"
        );
        let html = m["html"].as_str().unwrap();
        assert!(
            html.contains("<h2>payments-api: sync failed &lt;prod&gt;</h2>"),
            "{html}"
        );
        assert!(html.contains("Deployment &amp; Service invalid"), "{html}");
        assert!(
            html.contains("href=\"https://argocd.example.com/applications/argocd/payments-api\""),
            "{html}"
        );
    }

    #[tokio::test]
    async fn a_firing_group_is_mailed_as_text_and_html_over_plain_smtp() {
        let dir = tempfile::tempdir().unwrap();
        let server = SmtpServer::start(dir.path(), &[]);
        let email = Email::new(
            mail_settings(),
            Some(smtp(format!("smtp://127.0.0.1:{}", server.port))),
            None,
            testing::clock(),
        )
        .unwrap();

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
    async fn updates_and_the_resolve_reply_to_the_first_message_through_one_pooled_connection() {
        let dir = tempfile::tempdir().unwrap();
        let server = SmtpServer::start(dir.path(), &[]);
        let email = Email::new(
            mail_settings(),
            Some(smtp(format!("smtp://127.0.0.1:{}", server.port))),
            None,
            testing::clock(),
        )
        .unwrap();

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
        let (cert, key) = self_signed_cert(dir.path());
        let server = SmtpServer::start(
            dir.path(),
            &["--tlscert", cert.to_str().unwrap(), "--tlskey", key.to_str().unwrap()],
        );
        let url = format!("smtp://127.0.0.1:{}?tls=required", server.port);

        // Without the CA the certificate is refused, and retrying may help once the relay's certificate is fixed.
        let untrusting = Email::new(mail_settings(), Some(smtp(url.clone())), None, testing::clock()).unwrap();
        let err = untrusting.deliver(&notification(Action::Open), None).await.unwrap_err();
        assert!(matches!(err, DeliveryError::Transient { .. }), "{err:?}");

        let mut settings = smtp(url);
        settings.ca_file = Some(cert.display().to_string());
        let email = Email::new(mail_settings(), Some(settings), None, testing::clock()).unwrap();
        email.deliver(&notification(Action::Open), None).await.unwrap();

        let messages = server.messages(1);
        assert_is_the_sync_failed_message(&messages[0]);
        assert_eq!(server.stored(), 1, "the refused attempt stored nothing");
    }

    #[tokio::test]
    async fn implicit_tls_with_smtps() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = self_signed_cert(dir.path());
        let server = SmtpServer::start(
            dir.path(),
            &[
                "--smtpscert",
                cert.to_str().unwrap(),
                "--smtpskey",
                key.to_str().unwrap(),
            ],
        );
        let mut settings = smtp(format!("smtps://127.0.0.1:{}", server.port));
        settings.ca_file = Some(cert.display().to_string());
        let email = Email::new(mail_settings(), Some(settings), None, testing::clock()).unwrap();

        email.deliver(&notification(Action::Open), None).await.unwrap();

        assert_is_the_sync_failed_message(&server.messages(1)[0]);
    }

    #[tokio::test]
    async fn smtp_auth_with_the_right_password_delivers_and_a_wrong_one_is_permanent_without_the_password() {
        let dir = tempfile::tempdir().unwrap();
        let server = SmtpServer::start_with_auth(dir.path(), "herald", "s3cret-Pa55");
        let with_password = |password: &str| {
            let mut s = smtp(format!("smtp://127.0.0.1:{}", server.port));
            s.username = Some("herald".into());
            s.password = Some(SecretString::from(password.to_string()));
            Email::new(mail_settings(), Some(s), None, testing::clock()).unwrap()
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
    async fn a_refused_recipient_is_permanent_and_a_deferred_one_is_transient() {
        let dir = tempfile::tempdir().unwrap();
        let server = SmtpServer::start_with_auth(dir.path(), "herald", "pw");
        let mut s = smtp(format!("smtp://127.0.0.1:{}", server.port));
        s.username = Some("herald".into());
        s.password = Some(SecretString::from("pw".to_string()));
        let to = |address: &str| EmailSettings {
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
        let email = Email::new(
            mail_settings(),
            Some(smtp(format!("smtp://127.0.0.1:{port}"))),
            None,
            testing::clock(),
        )
        .unwrap();
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
        let email = Email::new(mail_settings(), Some(settings), None, testing::clock()).unwrap();

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
            Some(smtp(format!("smtp://127.0.0.1:{}", server.port))),
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
                .contains("<h2>[TEST] Herald test notification</h2>")
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
}
