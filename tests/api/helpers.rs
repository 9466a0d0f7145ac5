//! Test harness: the real application on a random port (in-process, like zero-to-production's `spawn_app`), or the
//! real binary as a child process (for restarts, kill -9 and log checks). Fixtures come from ../shared/fixtures.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald::clock::{SharedClock, SystemClock};
use herald::configuration::Settings;
use herald::startup::Application;
use serde_json::Value;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/argocd")
}

pub fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(rel)).unwrap_or_else(|e| panic!("fixture {rel}: {e}"))
}

pub fn captured() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(fixtures().join("captured"))
        .expect("captured fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            let body = std::fs::read(&p).expect("read");
            (name, body)
        })
        .collect()
}

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
}

/// Merges `extra` YAML over the base settings (top-level keys of `extra` win).
pub fn settings(dir: &Path, extra: &str) -> Settings {
    let mut base: serde_norway::Value = serde_norway::from_str(&base_yaml(dir)).expect("base yaml");
    let extra: serde_norway::Value =
        serde_norway::from_str(if extra.trim().is_empty() { "{}" } else { extra })
            .expect("extra yaml");
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
    Settings::from_yaml(&serde_norway::to_string(&base).expect("yaml"))
        .expect("test settings are valid")
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
        let app = Application::build_with_clock(s, clock)
            .await
            .expect("app builds");
        let address = format!("http://127.0.0.1:{}", app.port());
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
        }
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

/// A minimal but real-shaped Argo CD envelope for one Application.
pub fn envelope(name: &str, team: &str, sync: &str, health: &str, timestamp: &str) -> String {
    serde_json::json!({
        "timestamp": timestamp,
        "context": {"argocdUrl": "https://argocd.example.com", "notificationType": "herald"},
        "app": {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd", "uid": format!("uid-{name}"), "labels": {"team": team}},
            "spec": {
                "project": "default",
                "destination": {"server": "https://kubernetes.default.svc", "namespace": name},
                "syncPolicy": {"automated": {"prune": false, "selfHeal": false}}
            },
            "status": {
                "sync": {"status": sync, "revision": "0123456789abcdef0123456789abcdef01234567"},
                "health": {"status": health}
            }
        }
    })
    .to_string()
}

/// Sets `app.status.operationState` on an envelope.
pub fn with_operation(body: &str, op: Value) -> String {
    let mut v: Value = serde_json::from_str(body).expect("json");
    v["app"]["status"]["operationState"] = op;
    v.to_string()
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339()
}

/// Waits until `f` returns Some, polling every 50 ms, for at most `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
            (
                Box::new(stderr) as Box<dyn std::io::Read + Send>,
                Some(port_tx),
            ),
            (Box::new(stdout) as Box<dyn std::io::Read + Send>, None),
        ] {
            let out = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if let Some(tx) = &tx
                        && line.contains("herald is listening")
                        && let Some(p) = line.split("port=").nth(1)
                        && let Ok(port) = p
                            .trim()
                            .trim_matches(|c: char| !c.is_ascii_digit())
                            .parse::<u16>()
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

    /// SIGTERM, then waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..300 {
            if let Ok(Some(s)) = self.child.try_wait() {
                return s;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        self.child.wait().expect("wait")
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
