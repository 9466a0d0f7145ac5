//! A story's stage: Herald's pipeline on a manual clock over a real store (SQLite, or PostgreSQL from
//! `HERALD_TEST_POSTGRES_URL`), fed Argo CD bodies and commands, and a transcript of every notification it queued —
//! to which receiver, for which person, what action, with what title, why, about which incidents. The transcript
//! is compared with a reviewed golden file (`tests/stories/golden/<story>.txt`, the same for both engines): a
//! missing message and an extra one fail alike. `HERALD_BLESS=1` writes the golden files instead.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use herald::clock::{Clock, ManualClock};
use herald::configuration::Settings;
use herald::domain::Notification;
use herald::pipeline::Pipeline;
use herald::routing::{Matcher, Silence};
use herald::store::Store;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::argocd_bodies::{application, envelope_around};
use crate::fresh_db::{FreshDb, fresh_db};

pub struct Story {
    name: String,
    settings: Arc<Settings>,
    clock: ManualClock,
    pipeline: Option<Pipeline>,
    store_url: String,
    transcript: Vec<String>,
    /// Outbox rows already in the transcript.
    seen: usize,
    /// The story's configuration, as written (for `herald replay`).
    config: String,
    /// Every body sent, as sent (with its timestamp).
    bodies: Vec<Value>,
    /// Every notification queued, as `herald replay` prints it: `<time> would notify <receiver> (<action>): <title>`.
    queued: Vec<String>,
    /// Silences added so far (their ids are `silence-N`, so transcripts do not change from run to run).
    silences: usize,
    /// Whether each notification's line ends with its thread (`{thread key}`): for stories about threads.
    threads: bool,
    _db: FreshDb,
}

/// The teams, receivers and people most stories share: three teams, each with chat (Slack) and e-mail;
/// payments also has Jira and a pager as its escalation step after 30 minutes.
pub const CONFIG: &str = r##"
ownership: {default_team: platform}
rules: {pruned: {production: {namespaces: ["prod-*"]}}}
teams:
  payments:
    receivers: [payments-slack, payments-mail, payments-jira]
    escalation: [{after: 30m, receivers: [payments-pager]}]
  shop: {receivers: [shop-slack, shop-mail]}
  platform: {receivers: [platform-slack]}
people:
  alice: {email: alice@example.com, slack: UALICE}
  bob: {email: bob@example.com, slack: UBOB}
people_receivers: {email: people-mail, slack: people-slack}
receivers:
  - {name: payments-slack, slack: {webhook_url: "http://127.0.0.1:9/payments"}}
  - {name: payments-mail, email: {to: [payments@example.com]}}
  - {name: payments-jira, jira: {url: "http://127.0.0.1:9", api: cloud, project: PAY, user: bot@example.com, token: t}}
  - {name: payments-pager, pagerduty: {url: "http://127.0.0.1:9/v2/enqueue", routing_key: k}}
  - {name: shop-slack, slack: {webhook_url: "http://127.0.0.1:9/shop"}}
  - {name: shop-mail, email: {to: [shop@example.com]}}
  - {name: platform-slack, slack: {webhook_url: "http://127.0.0.1:9/platform"}}
  - {name: people-mail, email: {to: [nobody@example.com]}}
  - {name: people-slack, slack: {token: xoxb-t, channel: "#people", api_url: "http://127.0.0.1:9/api"}}
smtp: {url: "smtp://127.0.0.1:9", from: herald@example.com}
grouping: {group_wait: 30s, group_interval: 5m, repeat_interval: 4h}
"##;

/// Monday 2026-01-05 09:00 UTC: every story starts then.
pub fn start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-05T09:00:00Z")
        .expect("a time")
        .with_timezone(&Utc)
}

impl Story {
    /// A story named `name` (its golden file) on `engine`, with `config` (YAML), its clock at [`start`].
    pub async fn begin(name: &str, engine: &str, config: &str) -> Self {
        let db = fresh_db(engine, "story").await;
        let url = db.url.clone();
        let mut settings = Settings::from_yaml(config).unwrap_or_else(|e| panic!("{name}: bad config: {e}"));
        settings.storage.url = SecretString::from(url.clone());
        let clock = ManualClock::new(start());
        let mut story = Self {
            name: name.into(),
            settings: Arc::new(settings),
            clock,
            pipeline: None,
            store_url: url,
            transcript: Vec::new(),
            seen: 0,
            silences: 0,
            threads: false,
            config: config.to_string(),
            bodies: Vec::new(),
            queued: Vec::new(),
            _db: db,
        };
        story.boot().await;
        story
    }

    async fn boot(&mut self) {
        let mut settings = (*self.settings).clone();
        settings.storage.url = SecretString::from(self.store_url.clone());
        let store = Store::connect(&settings.storage).await.expect("store");
        self.pipeline = Some(Pipeline::new(Arc::new(settings), store, Arc::new(self.clock.clone())));
    }

    fn p(&self) -> &Pipeline {
        self.pipeline.as_ref().expect("running")
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// A line of its own in the transcript: what happens next in the story.
    pub fn say(&mut self, what: &str) {
        self.transcript.push(format!("{}  -- {what}", stamp(self.now())));
    }

    /// From now on, each notification's line ends with the thread it is in.
    pub fn show_threads(&mut self) {
        self.threads = true;
    }

    /// Argo CD sends `body` now (its timestamp set to now); what it queued is recorded. Its Argo CD instance is
    /// the one the service would settle on (by its `context.argocdUrl`, with no ingest token).
    pub async fn body(&mut self, what: &str, mut body: Value) {
        body["timestamp"] = json!(self.now().to_rfc3339());
        self.bodies.push(body.clone());
        let mut snap = herald::argocd::parse_body(body.to_string().as_bytes(), 64)
            .unwrap_or_else(|e| panic!("{}: a story body must parse: {e}", self.name));
        snap.app.instance = (self.settings.argocd)
            .identify(None, snap.argocd_url.as_deref())
            .unwrap_or_else(|e| panic!("{}: a story body must name its instance: {e}", self.name));
        let summary = self.p().ingest(snap, None).await.expect("ingest");
        let incidents: Vec<String> = (summary.incidents.iter())
            .map(|i| format!("{} {}", i.kind, i.state))
            .collect();
        self.transcript.push(format!(
            "{}  <- {what}: {}{}",
            stamp(self.now()),
            summary.outcome,
            if incidents.is_empty() {
                String::new()
            } else {
                format!(" [{}]", incidents.join(", "))
            }
        ));
        self.tick().await;
    }

    /// The clock moves `d` in 30-second steps (as `herald replay` moves it), the timers running at each.
    pub async fn pass(&mut self, d: Duration) {
        self.pass_by(d, Duration::from_secs(30)).await
    }

    /// The clock moves `d` in steps of `step` (long quiet spans: days in 10-minute steps).
    pub async fn pass_by(&mut self, d: Duration, step: Duration) {
        let end = self.now() + chrono::Duration::from_std(d).expect("a duration");
        let step = chrono::Duration::from_std(step).expect("a step");
        loop {
            self.tick().await;
            let now = self.now();
            if now >= end {
                return;
            }
            self.clock.set(now + (end - now).min(step));
        }
    }

    async fn tick(&mut self) {
        self.p().tick().await.expect("tick");
        self.record().await;
    }

    /// `herald silence add` with `matchers` (`field=glob`), by `who`, for `d`; returns its id.
    pub async fn silence(&mut self, matchers: &[(&str, &str)], who: &str, d: Duration) -> String {
        let now = self.now();
        self.silences += 1;
        let s = Silence {
            id: format!("silence-{}", self.silences),
            matchers: matchers.iter().map(|(n, v)| Matcher::new(*n, *v)).collect(),
            starts_at: now,
            ends_at: now + chrono::Duration::from_std(d).expect("a duration"),
            created_by: who.into(),
            comment: "story".into(),
            created_at: now,
        };
        self.p().add_silence(&s).await.expect("add silence");
        let shown: Vec<String> = matchers.iter().map(|(n, v)| format!("{n}={v}")).collect();
        self.transcript.push(format!(
            "{}  !! {who} silences {} for {}",
            stamp(now),
            shown.join(" "),
            humantime::format_duration(d)
        ));
        s.id
    }

    /// Herald lists every Application of each Argo CD instance with an API (what the resync does every
    /// `resync_interval`), confirming what the listing lacks; what it queued is recorded.
    pub async fn list(&mut self, what: &str) {
        let pipeline = self.p().clone();
        for source in pipeline.argocd_apis().iter() {
            herald::resync::resync_once(&pipeline, source).await;
        }
        let filter = herald::store::AppFilter {
            limit: 1000,
            ..Default::default()
        };
        let names: Vec<String> = (pipeline.apps(&filter).await.expect("apps").iter())
            .map(|a| format!("{} ({})", a.state.snapshot.app.name, a.state.snapshot.project))
            .collect();
        self.transcript.push(format!(
            "{}  <- Argo CD listing ({what}); Herald holds: {}",
            stamp(self.now()),
            names.join(", ")
        ));
        self.tick().await;
    }

    /// Records what the status page says of each Argo CD API source's denied projects.
    pub fn look_at_argocd(&mut self) {
        let now = self.now();
        let mut lines = Vec::new();
        for source in self.p().argocd_apis().iter() {
            for (project, since) in source.status.report().denied {
                lines.push(format!(
                    "{}  ?? {}: permission denied for project {project} since {}",
                    stamp(now),
                    source.api.instance(),
                    stamp(since)
                ));
            }
        }
        if lines.is_empty() {
            lines.push(format!("{}  ?? every project visible", stamp(now)));
        }
        self.transcript.extend(lines);
    }

    /// `herald ack` by `who` of the open `kind` incident of `app` (`instance/namespace/name`, or `namespace/name`
    /// in the default instance), until it resolves.
    pub async fn ack(&mut self, app: &str, kind: &str, who: &str) {
        let filter = herald::store::IncidentFilter {
            limit: 100,
            ..Default::default()
        };
        let incidents = self.p().incidents(&filter).await.expect("incidents");
        let found = (incidents.iter())
            .find(|r| r.app.to_string() == app && r.kind.as_str() == kind && r.state.as_str() != "resolved")
            .unwrap_or_else(|| panic!("{}: no open {kind} incident of {app}", self.name));
        let ack = herald::domain::Acknowledgement {
            by: who.into(),
            at: self.now(),
            until: None,
            comment: String::new(),
        };
        self.p().acknowledge(found.id, ack).await.expect("acknowledge");
        self.transcript
            .push(format!("{}  !! {who} acknowledges {kind} of {app}", stamp(self.now())));
        self.tick().await;
    }

    /// A stop and a start on the same store, as a deploy or a crash would: whatever is due is the store's.
    pub async fn restart(&mut self) {
        drop(self.pipeline.take());
        tokio::task::yield_now().await;
        self.boot().await;
        self.transcript
            .push(format!("{}  !! Herald restarts", stamp(self.now())));
        self.tick().await;
    }

    /// The incidents as `GET /v1/incidents` lists them, one line each: state, kind, what holds it back.
    pub async fn incidents(&self) -> Vec<String> {
        let filter = herald::store::IncidentFilter {
            limit: 100,
            ..Default::default()
        };
        (self.p().incidents(&filter).await.expect("incidents").iter())
            .map(|r| {
                let v = r.full_view();
                format!(
                    "{} {} {}{}",
                    r.app,
                    v.kind,
                    v.state,
                    v.held
                        .map(|h| format!(" ({})", h.describe(herald::domain::Zone::UTC)))
                        .unwrap_or_default()
                )
            })
            .collect()
    }

    /// Records the incidents' list and the silences (expired ones too) as a person would see them now.
    pub async fn look(&mut self) {
        let now = self.now();
        let list = self.incidents().await;
        for line in list {
            self.transcript.push(format!("{}  ?? {line}", stamp(now)));
        }
        for s in self.p().silences(true, now).await.expect("silences") {
            self.transcript.push(format!(
                "{}  ?? silence {} by {}: {}",
                stamp(now),
                s.id,
                s.created_by,
                s.state(now)
            ));
        }
    }

    /// Every notification queued since the last look, oldest first.
    async fn record(&mut self) {
        let mut rows = self.p().outbox(None, 100_000, None).await.expect("outbox");
        rows.reverse();
        for r in rows.iter().skip(self.seen) {
            let n: Notification = serde_json::from_str(&r.payload).expect("a notification");
            let mut line = line(r.created_at, &n);
            if self.threads {
                line.push_str(&format!(" {{{}}}", r.thread_key));
            }
            self.transcript.push(line);
            self.queued.push(format!(
                "{} would notify {} ({}): {}",
                r.created_at.format("%Y-%m-%dT%H:%M:%SZ"),
                r.receiver,
                r.action,
                n.title
            ));
        }
        self.seen = rows.len();
    }

    /// Runs `herald replay --clock recorded --until <until>` (the real binary) on the story's bodies and
    /// configuration, and checks it would queue exactly what the running service queued.
    pub fn replay_agrees(&self, until: &str) {
        let dir = tempfile::tempdir().expect("tmp");
        let config = dir.path().join("herald.yaml");
        std::fs::write(&config, &self.config).expect("config");
        let mut files = Vec::new();
        for (k, b) in self.bodies.iter().enumerate() {
            let f = dir.path().join(format!("{k:03}.json"));
            std::fs::write(&f, b.to_string()).expect("body");
            files.push(f);
        }
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
            .args(["replay", "--clock", "recorded", "--until", until, "--config"])
            .arg(&config)
            .args(&files)
            .output()
            .expect("herald replay runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "replay failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let replayed: Vec<String> = (stdout.lines())
            .filter_map(|l| l.trim_start().strip_prefix("→ "))
            .map(|l| l.rsplit_once(" [").map_or(l, |(head, _)| head).to_string())
            .collect();
        assert_eq!(
            replayed, self.queued,
            "{}: `herald replay --until {until}` differs from the running service",
            self.name
        );
    }

    /// Compares the transcript with the golden file (or writes it with `HERALD_BLESS=1`); returns it.
    pub fn end(self) -> Vec<String> {
        let text = self.transcript.join("\n") + "\n";
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/stories/golden")
            .join(format!("{}.txt", self.name));
        if std::env::var("HERALD_BLESS").is_ok_and(|v| v == "1") {
            std::fs::create_dir_all(path.parent().expect("a folder")).expect("golden folder");
            std::fs::write(&path, &text).expect("golden file");
        } else {
            let golden = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e} (write it with HERALD_BLESS=1, then read it)", path.display()));
            if golden != text {
                let diff: Vec<String> = diff_lines(&golden, &text);
                panic!(
                    "story {} differs from {}:\n{}\n(run with HERALD_BLESS=1 to accept, and read the diff)",
                    self.name,
                    path.display(),
                    diff.join("\n")
                );
            }
        }
        self.transcript
    }
}

/// The lines only one side has, marked `-` (golden) and `+` (now).
fn diff_lines(golden: &str, now: &str) -> Vec<String> {
    let (g, n): (Vec<&str>, Vec<&str>) = (golden.lines().collect(), now.lines().collect());
    let mut out: Vec<String> = g.iter().filter(|l| !n.contains(l)).map(|l| format!("- {l}")).collect();
    out.extend(n.iter().filter(|l| !g.contains(l)).map(|l| format!("+ {l}")));
    out
}

/// `Mon 09:00:30`, or with the day number after the first day: `Wed(+2) 03:00:00`.
pub fn stamp(t: DateTime<Utc>) -> String {
    let days = (t.date_naive() - start().date_naive()).num_days();
    if days == 0 {
        t.format("%a %H:%M:%S").to_string()
    } else {
        format!("{}(+{days}) {}", t.format("%a"), t.format("%H:%M:%S"))
    }
}

/// One notification as a line: `→ payments-jira open: <title> (<reason>) [out_of_sync firing]`, and `to bob` for
/// a message to a person.
pub fn line(at: DateTime<Utc>, n: &Notification) -> String {
    let to = n
        .recipient
        .as_ref()
        .map(|r| format!(" to {}", r.username))
        .unwrap_or_default();
    let incidents: Vec<String> = (n.incidents().iter())
        .map(|i| format!("{} {} {}", i.kind, i.state, i.severity))
        .collect();
    format!(
        "{}  -> {}{to} {}: {} ({}) [{}]",
        stamp(at),
        n.receiver,
        n.action,
        n.title,
        n.reason,
        incidents.join(", ")
    )
}

/// A real-shaped Argo CD body for Application `name` (namespace `argocd`) of `team`, from its folder of
/// `acme/deploy`, deployed to `dest` (its timestamp is set when the story sends it).
pub fn app(name: &str, team: &str, dest: &str, sync: &str, health: &str) -> Value {
    let mut app = application(name, team, sync, health);
    app["spec"]["destination"]["namespace"] = json!(dest);
    app["spec"]["source"] =
        json!({"repoURL": "https://github.com/acme/deploy", "path": name, "targetRevision": "HEAD"});
    envelope_around(app, "")
}

/// `body` with resources waiting to be pruned (`status.resources[]` with `requiresPruning`).
pub fn waiting_to_prune(mut body: Value, resources: &[(&str, &str)]) -> Value {
    let ns = body["app"]["spec"]["destination"]["namespace"].clone();
    body["app"]["status"]["resources"] = resources
        .iter()
        .map(|(kind, name)| {
            json!({"kind": kind, "version": "v1", "namespace": ns, "name": name, "status": "OutOfSync",
                   "requiresPruning": true})
        })
        .collect();
    body
}

/// `body` with a finished sync operation: its `phase`, started by `user` (or automated), at `started`
/// (RFC 3339), with `pruned` resources (kind, name) deleted and `failed` ones that did not apply.
pub fn with_sync(
    mut body: Value,
    phase: &str,
    user: Option<&str>,
    started: DateTime<Utc>,
    pruned: &[(&str, &str)],
    message: &str,
) -> Value {
    let ns = body["app"]["spec"]["destination"]["namespace"].clone();
    let mut resources: Vec<Value> = (pruned.iter())
        .map(|(kind, name)| {
            json!({"kind": kind, "version": "v1", "namespace": ns, "name": name, "status": "Pruned",
                   "message": "pruned", "syncPhase": "Sync"})
        })
        .collect();
    if phase == "Failed" {
        resources.push(
            json!({"group": "monitoring.coreos.com", "kind": "ServiceMonitor", "version": "v1",
            "namespace": ns, "name": "api", "status": "SyncFailed",
            "message": "the server could not find the requested resource", "syncPhase": "Sync"}),
        );
    }
    let initiated = match user {
        Some(u) => json!({"username": u}),
        None => json!({"automated": true}),
    };
    body["app"]["status"]["operationState"] = json!({
        "phase": phase,
        "message": message,
        "startedAt": started.to_rfc3339(),
        "finishedAt": (started + chrono::Duration::seconds(20)).to_rfc3339(),
        "operation": {"initiatedBy": initiated, "sync": {"prune": !pruned.is_empty(), "revision": "0123456789abcdef0123456789abcdef01234567"}},
        "syncResult": {"revision": "0123456789abcdef0123456789abcdef01234567", "resources": resources}
    });
    body
}

/// `body` with a sync operation started by `user` (or automated) at `started` that is still Running with Argo CD's
/// `message`, and `hook` (kind, name) a PreSync hook of it still running.
pub fn still_syncing(
    mut body: Value,
    user: Option<&str>,
    started: DateTime<Utc>,
    hook: Option<(&str, &str)>,
    message: &str,
) -> Value {
    let ns = body["app"]["spec"]["destination"]["namespace"].clone();
    let resources: Vec<Value> = (hook.iter())
        .map(|(kind, name)| {
            json!({"group": "batch", "kind": kind, "version": "v1", "namespace": ns, "name": name,
                   "hookType": "PreSync", "hookPhase": "Running", "syncPhase": "PreSync",
                   "message": "job is still running"})
        })
        .collect();
    let initiated = match user {
        Some(u) => json!({"username": u}),
        None => json!({"automated": true}),
    };
    body["app"]["status"]["operationState"] = json!({
        "phase": "Running",
        "message": message,
        "startedAt": started.to_rfc3339(),
        "operation": {"initiatedBy": initiated, "sync": {"revision": "89abcdef0123456789abcdef0123456789abcdef"}},
        "syncResult": {"revision": "89abcdef0123456789abcdef0123456789abcdef", "resources": resources}
    });
    body
}

/// `body` with `resources` (kind, name, Argo CD's health message) Progressing in `status.resources`.
pub fn rolling_out(mut body: Value, resources: &[(&str, &str, &str)]) -> Value {
    let ns = body["app"]["spec"]["destination"]["namespace"].clone();
    body["app"]["status"]["resources"] = resources
        .iter()
        .map(|(kind, name, message)| {
            json!({"group": "apps", "kind": kind, "version": "v1", "namespace": ns, "name": name,
                   "status": "Synced", "health": {"status": "Progressing", "message": message}})
        })
        .collect();
    body
}
