//! A real SMTP server for the e-mail tests: aiosmtpd (plain, STARTTLS, implicit TLS, or with AUTH and recipients
//! it refuses), storing what it accepts as a Maildir that Python's e-mail package parses back.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const INSTALL: &str = "these tests need python3 with aiosmtpd: `pip install aiosmtpd==1.4.6`";

pub(super) fn free_port() -> u16 {
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
pub(super) struct SmtpServer {
    child: Child,
    pub(super) port: u16,
    maildir: PathBuf,
}

impl SmtpServer {
    /// The server's URL with `scheme` (`smtp`, `smtps`), as a receiver's `smtp.url`.
    pub(super) fn url(&self, scheme: &str) -> String {
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    pub(super) fn start(dir: &Path, extra_args: &[&str]) -> Self {
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
    pub(super) fn start_with_auth(dir: &Path, user: &str, password: &str) -> Self {
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

    /// A server that offers only AUTH `mechanism` (PLAIN or LOGIN) and refuses every login with a 535 that echoes
    /// each line the client sent, credentials included, as a careless relay might.
    pub(super) fn start_echoing_auth(dir: &Path, mechanism: &str) -> Self {
        let port = free_port();
        let script = dir.join("echo_server.py");
        std::fs::write(&script, ECHO_AUTH_SERVER).unwrap();
        let mut cmd = Command::new("python3");
        cmd.arg(&script).arg(port.to_string()).arg(mechanism);
        Self::spawn(&mut cmd, port, dir.join("maildir"))
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
    pub(super) fn messages(&self, count: usize) -> Vec<serde_json::Value> {
        self.files(count).iter().map(|f| parse_mail(f)).collect()
    }

    /// Waits for `count` stored messages and returns them as the server received them, oldest first.
    pub(super) fn raw_messages(&self, count: usize) -> Vec<Vec<u8>> {
        self.files(count).iter().map(|f| std::fs::read(f).unwrap()).collect()
    }

    /// Waits for `count` stored messages: their files, oldest first.
    fn files(&self, count: usize) -> Vec<PathBuf> {
        let new = self.maildir.join("new");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&new)
                .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
                .unwrap_or_default();
            if files.len() >= count {
                files.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).unwrap());
                return files;
            }
            assert!(
                Instant::now() < deadline,
                "expected {count} messages, found {}",
                files.len()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(super) fn stored(&self) -> usize {
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

const ECHO_AUTH_SERVER: &str = r#"
import socket, sys
port, mechanism = int(sys.argv[1]), sys.argv[2]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen()
def serve(conn):
    f = conn.makefile("rwb")
    def send(line):
        f.write(line.encode() + b"\r\n")
        f.flush()
    send("220 echo ESMTP")
    seen, login = [], None
    for raw in f:
        line = raw.decode(errors="replace").rstrip("\r\n")
        seen.append(line)
        verb = line.split(" ")[0].upper()
        if login is not None:
            login.append(line)
        if verb in ("EHLO", "HELO"):
            send("250-echo")
            send("250 AUTH " + mechanism)
        elif verb == "AUTH" and line.upper().startswith("AUTH LOGIN"):
            login = line.split(" ")[2:]
        elif verb == "QUIT":
            send("221 bye")
            return
        elif verb != "AUTH" and login is None:
            send("250 ok")
        if verb == "AUTH" and line.upper().startswith("AUTH PLAIN") or login is not None and len(login) >= 2:
            send("535 5.7.8 refused: " + " | ".join(seen))
            login = None
        elif login is not None:
            send("334 " + ("VXNlcm5hbWU6" if not login else "UGFzc3dvcmQ6"))
# The readiness probe connects and leaves at once: writing to it may fail, which must not end the server (a client
# queued behind it would be reset).
while True:
    conn, _ = srv.accept()
    try:
        serve(conn)
    except OSError:
        pass
    finally:
        conn.close()
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

pub(super) fn self_signed_cert(dir: &Path) -> (PathBuf, PathBuf) {
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
