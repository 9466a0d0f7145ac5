//! Test harness: the real application on a random port (in-process, like zero-to-production's `spawn_app`), or the
//! real binary as a child process (for restarts, kill -9 and log checks). The bodies Argo CD sends are built by
//! `tests/common/argocd_bodies.rs` and the fixtures read by `tests/common/fixtures.rs`, as in every test binary.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald::clock::{ManualClock, SharedClock, SystemClock};
use herald::progress::{Passes, Progress};

pub use crate::argocd_bodies::*;
pub use crate::fixtures::*;
pub use crate::wait::{eventually, let_time_pass, let_time_pass_blocking, until_asleep};
use herald::configuration::Settings;
use herald::startup::Application;
use serde_json::Value;

/// Base settings for tests: loopback, random port, a private SQLite file, fast timers.
pub fn base_yaml(dir: &Path) -> String {
    format!(
        r#"
server: {{listen: "127.0.0.1:0"}}
storage: {{url: "sqlite://{db}"}}
scheduler: {{tick: 50ms}}
outbox: {{poll_interval: 50ms, initial_backoff: 100ms, max_backoff: 1s}}
log: {{level: warn}}
"#,
        db = dir.join("herald.db").display()
    )
}

pub struct TestApp {
    pub address: String,
    pub client: reqwest::Client,
    pub dir: Arc<tempfile::TempDir>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<()>>,
    progress: Progress,
}

/// Merges `extra` YAML over the base settings (top-level keys of `extra` win).
pub fn settings(dir: &Path, extra: &str) -> Settings {
    let mut base: serde_norway::Value = serde_norway::from_str(&base_yaml(dir)).expect("base yaml");
    let extra: serde_norway::Value =
        serde_norway::from_str(if extra.trim().is_empty() { "{}" } else { extra }).expect("extra yaml");
    if let (Some(b), Some(e)) = (base.as_mapping_mut(), extra.as_mapping()) {
        for (k, v) in e {
            match (b.get_mut(k), v) {
                (Some(serde_norway::Value::Mapping(bm)), serde_norway::Value::Mapping(em)) => {
                    for (k2, v2) in em {
                        bm.insert(k2.clone(), v2.clone());
                    }
                }
                _ => {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
    }
    Settings::from_yaml(&serde_norway::to_string(&base).expect("yaml")).expect("test settings are valid")
}

impl TestApp {
    pub async fn spawn(extra: &str) -> Self {
        Self::spawn_in(
            Arc::new(tempfile::tempdir().expect("tempdir")),
            extra,
            Arc::new(SystemClock),
        )
        .await
    }

    /// Starts on an existing directory (same database): a restart.
    pub async fn spawn_in(dir: Arc<tempfile::TempDir>, extra: &str, clock: SharedClock) -> Self {
        let s = settings(dir.path(), extra);
        let app = Application::build_with_clock(s, clock).await.expect("app builds");
        let address = format!("http://127.0.0.1:{}", app.port());
        let progress = app.progress();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            let _ = app
                .run_until(async {
                    let _ = rx.await;
                })
                .await;
        });
        Self {
            address,
            client: reqwest::Client::new(),
            dir,
            stop: Some(tx),
            handle: Some(handle),
            progress,
        }
    }

    /// Waits until the scheduler and the outbox worker are idle at the clock's current time: whatever was due
    /// has run and been delivered (or failed), so "nothing more was sent" is seen, not guessed after a pause.
    pub async fn settle(&self) {
        tokio::time::timeout(SETTLE_WITHIN, self.progress.settled())
            .await
            .unwrap_or_else(|_| panic!("the scheduler and the outbox did not settle within {SETTLE_WITHIN:?}"));
    }

    /// Moves `clock` by `d`, then [`settle`](Self::settle)s.
    pub async fn advance(&self, clock: &ManualClock, d: Duration) {
        clock.advance(d);
        self.settle().await;
    }

    /// Sets `clock` to `at`, then [`settle`](Self::settle)s.
    pub async fn advance_to(&self, clock: &ManualClock, at: chrono::DateTime<chrono::Utc>) {
        clock.set(at);
        self.settle().await;
    }

    /// Stops gracefully and waits until the store is closed.
    pub async fn stop(mut self) -> Arc<tempfile::TempDir> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = h.await;
        }
        self.dir.clone()
    }

    pub async fn post(&self, body: impl Into<reqwest::Body>) -> reqwest::Response {
        self.client
            .post(format!("{}/v1/argocd/events", self.address))
            .body(body)
            .send()
            .await
            .expect("request")
    }

    /// [`post`](Self::post) with an `ingest` bearer token (for a Herald with `server.auth`).
    pub async fn post_as(&self, token: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
        self.client
            .post(format!("{}/v1/argocd/events", self.address))
            .bearer_auth(token)
            .body(body)
            .send()
            .await
            .expect("request")
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> String {
        let r = self
            .client
            .get(format!("{}/metrics", self.address))
            .send()
            .await
            .expect("metrics");
        assert!(r.status().is_success(), "GET /metrics: {}", r.status());
        r.text().await.expect("metrics text")
    }

    pub async fn get_json(&self, path: &str) -> Value {
        let r = self
            .client
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .expect("request");
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.expect("json")
    }
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339()
}

/// How long the loops may take to settle after a step of a test; far more than they need.
const SETTLE_WITHIN: Duration = Duration::from_secs(20);

/// Runs `cmd` (`what`, for the failure) to completion; panics with its output when it fails or cannot start
/// (`install`: how to get it).
pub fn run_to_completion(what: &str, cmd: &mut Command, install: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}; {install}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts the server `cmd` (`what`, for the failure) with its output in the file `log`; panics when it cannot start
/// (`install`: how to get it).
pub fn spawn_logged(what: &str, cmd: &mut Command, log: &Path, install: &str) -> Child {
    let file = std::fs::File::create(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    cmd.stdin(Stdio::null())
        .stdout(file.try_clone().expect("log file"))
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}; {install}"))
}

/// A port free on 127.0.0.1 now, for a server a test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Waits until the server `child` runs answers `probe` with a 2xx; fails with `log()` when it exits first or has
/// not answered within `timeout`.
pub async fn wait_until_serving(
    name: &str,
    child: &mut Child,
    timeout: Duration,
    probe: impl Fn() -> reqwest::RequestBuilder,
    log: impl Fn() -> String,
) {
    let serving = eventually(timeout, || {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{name} exited with {status}:\n{}", log());
        }
        let request = probe();
        async move {
            let r = request.send().await.ok()?;
            r.status().is_success().then_some(())
        }
    })
    .await;
    assert!(serving.is_some(), "{name} did not start:\n{}", log());
}

/// Sends a request to the server `name` that must succeed; answers its JSON body (`null` when it has none).
pub async fn succeeds(name: &str, request: reqwest::RequestBuilder) -> Value {
    let r = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("request to {name}: {e}"));
    let status = r.status();
    let body: Value = r.json().await.unwrap_or_default();
    assert!(status.is_success(), "{name} answered {status}: {body}");
    body
}

/// Reads the JSON lines a console receiver with `file:` wrote.
pub fn delivered(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

/// Waits until the console receiver writing `path` has at least `n` notifications, and returns them all.
pub async fn wait_for(path: &Path, n: usize) -> Vec<Value> {
    eventually(Duration::from_secs(10), || async {
        let l = delivered(path);
        (l.len() >= n).then_some(l)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "{} got fewer than {n} notifications: {:?}",
            path.display(),
            delivered(path)
        )
    })
}

/// The real `herald` binary as a child process; its output is collected for log assertions.
pub struct Binary {
    pub child: Child,
    pub address: String,
    pub output: Arc<Mutex<String>>,
}

impl Binary {
    /// Starts `herald serve --config FILE` and waits until it says which port it listens on.
    pub fn start(config: &Path, env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_herald"));
        cmd.arg("serve").arg("--config").arg(config);
        cmd.env("RUST_LOG", "info").env("NO_COLOR", "1");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start herald");
        let output = Arc::new(Mutex::new(String::new()));
        let (port_tx, port_rx) = std::sync::mpsc::channel::<u16>();
        let stderr = child.stderr.take().expect("stderr");
        let stdout = child.stdout.take().expect("stdout");
        for (stream, tx) in [
            (Box::new(stderr) as Box<dyn std::io::Read + Send>, Some(port_tx)),
            (Box::new(stdout) as Box<dyn std::io::Read + Send>, None),
        ] {
            let out = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if let Some(tx) = &tx
                        && line.contains("herald is listening")
                        && let Some(p) = line.split("port=").nth(1)
                        && let Ok(port) = p.trim().trim_matches(|c: char| !c.is_ascii_digit()).parse::<u16>()
                    {
                        let _ = tx.send(port);
                    }
                    out.lock().expect("lock").push_str(&format!("{line}\n"));
                }
            });
        }
        let port = match port_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(p) => p,
            Err(_) => {
                let _ = child.kill();
                panic!("herald did not start: {}", output.lock().expect("lock"));
            }
        };
        Self {
            child,
            address: format!("http://127.0.0.1:{port}"),
            output,
        }
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits for the exit status (SIGKILL after 30 s).
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let child = &mut self.child;
        match eventually(Duration::from_secs(30), || {
            std::future::ready(child.try_wait().ok().flatten())
        })
        .await
        {
            Some(status) => status,
            None => {
                let _ = self.child.kill();
                self.child.wait().expect("wait")
            }
        }
    }

    /// The loops' passes as `/metrics` counts them (`herald_loop_passes_total`).
    async fn passes(&self) -> Passes {
        let text = reqwest::get(format!("{}/metrics", self.address))
            .await
            .and_then(|r| r.error_for_status())
            .expect("GET /metrics")
            .text()
            .await
            .expect("metrics text");
        let mut p = Passes::default();
        for line in text.lines().filter(|l| l.starts_with("herald_loop_passes_total{")) {
            let count: u64 = line
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0) as u64;
            if line.contains("loop=\"scheduler\"") {
                p.scheduler += count;
            }
            if line.contains("loop=\"outbox\"") {
                p.outbox += count;
            }
            if line.contains("outcome=\"worked\"") {
                p.worked += count;
            }
        }
        p
    }

    /// As [`TestApp::settle`], seen from outside through `/metrics`: both loops made a whole pass, and none did
    /// anything, since this was called.
    pub async fn settle(&self) {
        loop {
            let before = self.passes().await;
            let after = eventually(SETTLE_WITHIN, || async {
                let now = self.passes().await;
                now.both_passed_since(&before).then_some(now)
            })
            .await
            .unwrap_or_else(|| panic!("herald did not settle within {SETTLE_WITHIN:?}: {}", self.logs()));
            if after.worked == before.worked {
                return;
            }
        }
    }

    pub fn logs(&self) -> String {
        self.output.lock().expect("lock").clone()
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A stateful GitHub Issues fake for wiremock: issues are kept, found by label, created, commented and closed, so
/// "one ticket per incident" can be checked across crashes (counts creations per fingerprint label).
#[derive(Clone, Default)]
pub struct GithubFake {
    pub issues: Arc<Mutex<Vec<Value>>>,
    pub creations: Arc<Mutex<Vec<Vec<String>>>>,
    pub comments: Arc<Mutex<usize>>,
}

impl wiremock::Respond for GithubFake {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        use wiremock::ResponseTemplate;
        let path = req.url.path().to_string();
        let mut issues = self.issues.lock().expect("lock");
        match req.method.as_str() {
            "GET" if path.ends_with("/issues") => {
                let wanted: Vec<String> = req
                    .url
                    .query_pairs()
                    .find(|(k, _)| k == "labels")
                    .map(|(_, v)| v.split(',').map(str::to_string).collect())
                    .unwrap_or_default();
                let found: Vec<Value> = issues
                    .iter()
                    .filter(|i| i["state"] == "open")
                    .filter(|i| {
                        let names: Vec<&str> = i["labels"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|l| l["name"].as_str())
                            .collect();
                        wanted.iter().all(|w| names.contains(&w.as_str()))
                    })
                    .cloned()
                    .collect();
                ResponseTemplate::new(200).set_body_json(found)
            }
            "POST" if path.ends_with("/issues") => {
                let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
                let labels: Vec<String> = body["labels"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|l| l.as_str().map(str::to_string))
                    .collect();
                let number = issues.len() + 1;
                let issue = serde_json::json!({"number": number, "state": "open", "title": body["title"],
                    "html_url": format!("https://github.example/issues/{number}"),
                    "labels": labels.iter().map(|l| serde_json::json!({"name": l})).collect::<Vec<_>>()});
                issues.push(issue.clone());
                self.creations.lock().expect("lock").push(labels);
                ResponseTemplate::new(201).set_body_json(issue)
            }
            "POST" if path.ends_with("/comments") => {
                *self.comments.lock().expect("lock") += 1;
                ResponseTemplate::new(201).set_body_json(serde_json::json!({"id": 1}))
            }
            "PATCH" => {
                let n: usize = path.rsplit('/').next().and_then(|s| s.parse().ok()).unwrap_or(0);
                if let Some(i) = issues.get_mut(n.wrapping_sub(1)) {
                    i["state"] = "closed".into();
                }
                ResponseTemplate::new(200).set_body_json(serde_json::json!({"number": n, "state": "closed"}))
            }
            _ => ResponseTemplate::new(404),
        }
    }
}

impl GithubFake {
    /// Creations per fingerprint label (`herald:` labels).
    pub fn creations_per_fingerprint(&self) -> std::collections::HashMap<String, usize> {
        let mut out = std::collections::HashMap::new();
        for labels in self.creations.lock().expect("lock").iter() {
            for l in labels.iter().filter(|l| l.starts_with("herald")) {
                *out.entry(l.clone()).or_insert(0) += 1;
            }
        }
        out
    }
}

/// A private PostgreSQL server for tests that stop and start it (initdb into a temporary directory, run as the
/// `postgres` user when the tests run as root). Stopped on drop.
pub struct PgServer {
    pub url: String,
    pub port: u16,
    bin: PathBuf,
    dir: tempfile::TempDir,
}

impl PgServer {
    fn bin_dir() -> PathBuf {
        if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
            && out.status.success()
        {
            let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if p.join("initdb").exists() {
                return p;
            }
        }
        std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.path().join("bin"))
                    .find(|p| p.join("initdb").exists())
            })
            .expect("PostgreSQL server binaries (initdb) not found: apt-get install postgresql")
    }

    fn run(&self, prog: &str, args: &[&str]) -> std::process::Output {
        let exe = self.bin.join(prog);
        let root = std::env::var("USER").map(|u| u == "root").unwrap_or(false) || unsafe_is_root();
        let mut cmd = if root {
            let mut c = Command::new("runuser");
            c.arg("-u").arg("postgres").arg("--").arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.args(args).output().expect("run postgres tool")
    }

    pub fn start() -> Self {
        let bin = Self::bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("herald-pg")
            .tempdir_in("/tmp")
            .expect("tmp");
        let port = free_port();
        if unsafe_is_root() {
            let _ = Command::new("chown").arg("postgres").arg(dir.path()).status();
        }
        let s = Self {
            url: format!("postgres://herald@127.0.0.1:{port}/postgres"),
            port,
            bin,
            dir,
        };
        let data = s.dir.path().join("data");
        let out = s.run(
            "initdb",
            &["-D", &data.display().to_string(), "-A", "trust", "-U", "herald"],
        );
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        s.pg_start();
        s
    }

    pub fn pg_start(&self) {
        let data = self.dir.path().join("data").display().to_string();
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=100",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log").display().to_string();
        let out = self.run("pg_ctl", &["-D", &data, "-w", "-l", &log, "-o", &opts, "start"]);
        assert!(
            out.status.success(),
            "pg_ctl start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn pg_stop(&self) {
        let data = self.dir.path().join("data").display().to_string();
        let _ = self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
    }
}

fn unsafe_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.pg_stop();
    }
}
