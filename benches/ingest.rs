//! `herald-bench`: posts real-size Argo CD bodies (the captured fixtures, with varied Application names and fresh
//! timestamps) to a Herald, at a chosen concurrency (closed loop) or rate (open loop), and prints events/s,
//! p50/p99/max acknowledgement latency, errors and the peak RSS of the Herald process.
//!
//! It can start Herald itself (`--spawn path/to/herald`, a fresh SQLite store in a temporary directory) or target
//! a running one (`--url`, with `--pid` for RSS). Loopback only. See docs/benchmarks.md.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::Value;

#[derive(Parser, Debug)]
#[command(about = "Ingest benchmark for Herald")]
struct Args {
    /// Start this herald binary with a fresh store (SQLite unless --storage-url).
    #[arg(long)]
    spawn: Option<PathBuf>,
    /// Storage URL for the spawned Herald (default: SQLite in a temporary directory).
    #[arg(long)]
    storage_url: Option<String>,
    /// Number of Herald replicas to spawn (they share --storage-url; needs PostgreSQL for more than one).
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// Target of a running Herald (ignored with --spawn).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// PID of a running Herald, for its peak RSS.
    #[arg(long)]
    pid: Option<u32>,
    /// Requests in flight at once (closed loop).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Fixed arrival rate in events/s (open loop) instead of as fast as possible.
    #[arg(long)]
    rate: Option<u64>,
    /// How long to measure.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Distinct Applications the events are spread over.
    #[arg(long, default_value_t = 2000)]
    apps: usize,
    /// Bearer token to send.
    #[arg(long)]
    token: Option<String>,
    /// Post the same events to a Prometheus Alertmanager (`--url` is its base URL) as alerts, for comparison:
    /// one alert per event, labelled by Application, with the Application JSON as an annotation.
    #[arg(long)]
    alertmanager: bool,
    /// Measure event → first delivery instead: this many failed syncs (each fires at once, group_wait 0), spaced
    /// by 20 ms, to a webhook receiver served by this program; prints the delay percentiles.
    #[arg(long)]
    first_delivery: Option<usize>,
    /// Fixture directory with captured bodies.
    #[arg(long, default_value = "tests/fixtures/argocd/captured")]
    fixtures: PathBuf,
}

struct Spawned {
    children: Vec<std::process::Child>,
    _dir: PathBuf,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}

fn spawn(
    bin: &PathBuf,
    storage: Option<&str>,
    replicas: usize,
    config: Option<&str>,
) -> (Spawned, Vec<String>, Vec<u32>) {
    let dir = std::env::temp_dir().join(format!("herald-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let storage = storage
        .map(str::to_string)
        .unwrap_or_else(|| format!("sqlite://{}/bench.db", dir.display()));
    if let Some(text) = config {
        let _ = std::fs::create_dir_all(dir.join("config"));
        std::fs::write(dir.join("config/herald.yaml"), text).expect("config");
    }
    let mut children = Vec::new();
    let mut urls = Vec::new();
    let mut pids = Vec::new();
    for i in 0..replicas {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
            l.local_addr().expect("addr").port()
        };
        let child = std::process::Command::new(std::fs::canonicalize(bin).expect("herald binary"))
            .arg("serve")
            .current_dir(&dir) // config/herald.yaml there only when given: else the built-in defaults
            .env("HERALD__SERVER__LISTEN", format!("127.0.0.1:{port}"))
            .env("HERALD__STORAGE__URL", &storage)
            .env("HERALD__LOG__LEVEL", "warn")
            .env(
                "HERALD__GROUPING__GROUP_WAIT",
                if config.is_some() { "0s" } else { "1s" },
            )
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("herald-{i}.log"))).expect("log"))
            .spawn()
            .expect("start herald");
        pids.push(child.id());
        children.push(child);
        urls.push(format!("http://127.0.0.1:{port}"));
    }
    (Spawned { children, _dir: dir }, urls, pids)
}

/// The bytes of the spawned SQLite store on disk (the database, its write-ahead log and its index), when it is
/// the one `spawn` made.
fn store_bytes(spawned: Option<&Spawned>, storage_url: Option<&str>) -> Option<u64> {
    let dir = &spawned?._dir;
    if storage_url.is_some() {
        return None;
    }
    let size = |name: &str| std::fs::metadata(dir.join(name)).map_or(0, |m| m.len());
    Some(size("bench.db") + size("bench.db-wal") + size("bench.db-shm"))
}

fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

fn load_templates(dir: &PathBuf) -> Vec<Value> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for f in files {
        if let Ok(v) = serde_json::from_slice::<Value>(&std::fs::read(&f).unwrap_or_default())
            && v.get("app").is_some()
        {
            out.push(v);
        }
    }
    out
}

/// A captured body, serialised once with placeholders where the timestamp, the name, the uid and its creation time
/// go: a request is the pieces and those values put together, so the generator spends little of the CPU it shares
/// with Herald.
struct Template {
    /// The text before the first placeholder, then after each, in order.
    pieces: Vec<Vec<u8>>,
    /// Which value each placeholder takes: 0 the timestamp, 1 the name, 2 the uid, 3 its creation time.
    slots: Vec<usize>,
}

const PLACEHOLDERS: [&str; 4] = [
    "@@herald-bench-ts@@",
    "@@herald-bench-name@@",
    "@@herald-bench-uid@@",
    "@@herald-bench-created@@",
];

fn template(v: &Value) -> Template {
    let mut v = v.clone();
    v["timestamp"] = Value::String(PLACEHOLDERS[0].into());
    v["app"]["metadata"]["name"] = Value::String(PLACEHOLDERS[1].into());
    v["app"]["metadata"]["uid"] = Value::String(PLACEHOLDERS[2].into());
    v["app"]["metadata"]["creationTimestamp"] = Value::String(PLACEHOLDERS[3].into());
    let mut text = serde_json::to_string(&v).unwrap_or_default();
    let (mut pieces, mut slots) = (Vec::new(), Vec::new());
    while let Some((at, slot)) = PLACEHOLDERS
        .iter()
        .enumerate()
        .filter_map(|(slot, p)| text.find(p).map(|at| (at, slot)))
        .min()
    {
        pieces.push(text.as_bytes()[..at].to_vec());
        slots.push(slot);
        text = text[at + PLACEHOLDERS[slot].len()..].to_string();
    }
    pieces.push(text.into_bytes());
    Template { pieces, slots }
}

/// The i-th event: a captured body for application `i % apps`, named and timed afresh. Each round through the
/// captured bodies is another incarnation of the Application (its own uid): the last captured bodies are of an
/// Application being deleted, and a body about a deleted one is stale (stores nothing), so the same uid would make
/// every body after the first round stale instead of a change. Each incarnation is created after the one before
/// (`metadata.creationTimestamp`), as Kubernetes would have it: the one created later is the Application.
fn body(templates: &[Template], i: u64, apps: usize) -> Vec<u8> {
    let round = i as usize / apps;
    let t = &templates[round % templates.len()];
    let incarnation = round / templates.len();
    let created = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH + chrono::Duration::minutes(incarnation as i64);
    let values = [
        chrono::Utc::now().to_rfc3339(),
        format!("bench-{:05}", i as usize % apps),
        format!("uid-{:05}-{incarnation}", i as usize % apps),
        created.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    ];
    let mut out = Vec::with_capacity(t.pieces.iter().map(Vec::len).sum::<usize>() + 64);
    for (piece, slot) in t.pieces.iter().zip(&t.slots) {
        out.extend_from_slice(piece);
        out.extend_from_slice(values[*slot].as_bytes());
    }
    out.extend_from_slice(t.pieces.last().map(Vec::as_slice).unwrap_or_default());
    out
}

/// The machine's busy and idle time so far, in ticks of every core together (`/proc/stat`'s first line).
fn machine_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu: Vec<u64> = (stat.lines().next()?.split_whitespace().skip(1))
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user already)
    let idle = cpu.get(3)? + cpu.get(4)?;
    let busy = cpu.iter().take(8).sum::<u64>() - idle;
    Some((busy, idle))
}

/// CPU seconds (user + system) a process has used so far.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0) // USER_HZ is 100 on Linux
}

/// Event → first delivery: Herald with a webhook receiver pointing here, scheduler and outbox polling at 50 ms.
async fn first_delivery(bin: &PathBuf, n: usize) {
    use std::collections::HashMap;
    let arrived: Arc<std::sync::Mutex<HashMap<String, Instant>>> = Arc::default();
    let sink = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let sink_port = sink.local_addr().expect("addr").port();
    let seen = arrived.clone();
    let server = actix_web::HttpServer::new(move || {
        let seen = seen.clone();
        actix_web::App::new().default_service(actix_web::web::to(move |body: actix_web::web::Bytes| {
            let seen = seen.clone();
            async move {
                let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                for i in v["incidents"].as_array().into_iter().flatten() {
                    if let Some(app) = i["app_name"].as_str() {
                        seen.lock()
                            .expect("lock")
                            .entry(app.to_string())
                            .or_insert_with(Instant::now);
                    }
                }
                actix_web::HttpResponse::Ok().finish()
            }
        }))
    })
    .workers(1)
    .listen(sink)
    .expect("listen")
    .run();
    let handle = server.handle();
    tokio::spawn(server);
    let config = format!(
        "receivers: [{{name: sink, webhook: {{url: 'http://127.0.0.1:{sink_port}/hook'}}}}]\n\
         ownership: {{default_team: t}}\nteams: {{t: {{receivers: [sink]}}}}\n\
         grouping: {{group_by: [app], group_wait: 0s}}\nrules: {{sync_failed: {{for: 0s}}}}\n\
         scheduler: {{tick: 50ms}}\noutbox: {{poll_interval: 50ms}}\n"
    );
    let (_spawned, urls, _pids) = spawn(bin, None, 1, Some(&config));
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if client
            .get(format!("{}/readyz", urls[0]))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut sent = HashMap::new();
    for i in 0..n {
        let app = format!("delivery-{i:05}");
        let body = serde_json::json!({
            "timestamp": chrono::Utc::now().to_rfc3339(),
            "app": {"metadata": {"name": app, "namespace": "argocd"},
                    "status": {"sync": {"status": "OutOfSync"}, "health": {"status": "Healthy"},
                               "operationState": {"phase": "Failed", "message": "failed",
                                                  "startedAt": chrono::Utc::now().to_rfc3339()}}}
        });
        sent.insert(app, Instant::now());
        let _ = client
            .post(format!("{}/v1/argocd/events", urls[0]))
            .body(body.to_string())
            .send()
            .await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = arrived.lock().expect("lock").clone();
    let mut delays: Vec<f64> = sent
        .iter()
        .filter_map(|(app, t)| got.get(app).map(|a| a.duration_since(*t).as_secs_f64() * 1000.0))
        .collect();
    delays.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        delays
            .get(((delays.len() as f64 * p).ceil() as usize).clamp(1, delays.len().max(1)) - 1)
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "event → first delivery: {} of {} delivered (webhook receiver, group_wait 0, tick 50 ms, poll 50 ms)",
        delays.len(),
        n
    );
    println!(
        "delay ms: p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
    handle.stop(true).await;
}

/// The same event as an Alertmanager alert (what a team paging through Alertmanager would send it).
fn as_alert(body: &[u8]) -> Vec<u8> {
    let v: Value = serde_json::from_slice(body).unwrap_or_default();
    let app = &v["app"];
    let alert = serde_json::json!([{
        "labels": {
            "alertname": "ArgoCDApplication",
            "app": app["metadata"]["name"],
            "namespace": app["metadata"]["namespace"],
            "sync": app["status"]["sync"]["status"],
            "health": app["status"]["health"]["status"],
        },
        "annotations": {"application": app.to_string()},
        "startsAt": v["timestamp"],
    }]);
    serde_json::to_vec(&alert).unwrap_or_default()
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let templates: Vec<Template> = load_templates(&args.fixtures).iter().map(template).collect();
    let templates = Arc::new(templates);
    assert!(
        !templates.is_empty(),
        "no captured bodies in {}",
        args.fixtures.display()
    );
    if let (Some(n), Some(bin)) = (args.first_delivery, &args.spawn) {
        first_delivery(bin, n).await;
        return;
    }
    let (_spawned, urls, pids) = match &args.spawn {
        Some(bin) => {
            let (s, u, p) = spawn(bin, args.storage_url.as_deref(), args.replicas, None);
            (Some(s), u, p)
        }
        None => (None, vec![args.url.clone()], args.pid.into_iter().collect()),
    };
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency.max(64))
        .build()
        .expect("client");
    for u in &urls {
        let ready = async {
            for _ in 0..200 {
                // Herald's readiness, Alertmanager's, or a plain health check (the bare stacks of
                // ../shared/perf, to measure what the generator itself costs).
                let probes: &[&str] = if args.alertmanager {
                    &["-/ready"]
                } else {
                    &["readyz", "healthz"]
                };
                for probe in probes {
                    if let Ok(r) = client.get(format!("{u}/{probe}")).send().await
                        && r.status().is_success()
                    {
                        return true;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            false
        };
        assert!(ready.await, "herald at {u} did not become ready");
    }
    let avg_size: usize = (0..templates.len() as u64)
        .map(|i| body(&templates, i * args.apps as u64, args.apps).len())
        .sum::<usize>()
        / templates.len();
    let urls = Arc::new(urls);
    let counter = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    // What the first failed request got, printed with the figures: an error is a finding, not noise.
    let first_error: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    // Herald's answers by outcome (changed, duplicate, stale): whether the run measured what it says it did.
    let outcomes: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let latencies = Arc::new(std::sync::Mutex::new(Vec::<u32>::with_capacity(1 << 20)));
    let cpu_before: Vec<Option<f64>> = pids.iter().map(|p| cpu_seconds(*p)).collect();
    let own_cpu_before = cpu_seconds(std::process::id());
    let machine_before = machine_ticks();
    let store_before = store_bytes(_spawned.as_ref(), args.storage_url.as_deref());
    let start = Instant::now();
    let deadline = start + args.duration;
    let send = {
        let client = client.clone();
        let templates = templates.clone();
        let urls = urls.clone();
        let errors = errors.clone();
        let first_error = first_error.clone();
        let outcomes = outcomes.clone();
        let latencies = latencies.clone();
        let token = args.token.clone();
        let apps = args.apps;
        let alertmanager = args.alertmanager;
        move |i: u64, scheduled: Instant| {
            let client = client.clone();
            let templates = templates.clone();
            let urls = urls.clone();
            let errors = errors.clone();
            let first_error = first_error.clone();
            let outcomes = outcomes.clone();
            let latencies = latencies.clone();
            let token = token.clone();
            async move {
                let b = body(&templates, i, apps);
                let url = &urls[i as usize % urls.len()];
                let mut req = if alertmanager {
                    client
                        .post(format!("{url}/api/v2/alerts"))
                        .header("Content-Type", "application/json")
                        .body(as_alert(&b))
                } else {
                    client.post(format!("{url}/v1/argocd/events")).body(b)
                };
                if let Some(t) = &token {
                    req = req.bearer_auth(t);
                }
                match req.send().await {
                    Ok(r) if r.status().is_success() => {
                        let answer = r.bytes().await.unwrap_or_default();
                        let said = |what: &[u8]| answer.windows(what.len()).any(|w| w == what);
                        let kinds: [&[u8]; 3] = [
                            br#""outcome":"changed""#,
                            br#""outcome":"duplicate""#,
                            br#""outcome":"stale""#,
                        ];
                        if let Some(k) = kinds.iter().position(|k| said(k)) {
                            outcomes[k].fetch_add(1, Ordering::Relaxed);
                        }
                        let us = scheduled.elapsed().as_micros().min(u32::MAX as u128) as u32;
                        latencies.lock().expect("lock").push(us);
                    }
                    failed => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        let what = match failed {
                            Ok(r) => {
                                let status = r.status();
                                let text = r.text().await.unwrap_or_default();
                                format!("{status} {}", text.chars().take(300).collect::<String>())
                            }
                            Err(e) => format!("no answer: {e}"),
                        };
                        first_error.lock().expect("lock").get_or_insert(what);
                    }
                }
            }
        }
    };
    match args.rate {
        None => {
            let mut tasks = Vec::new();
            for _ in 0..args.concurrency {
                let counter = counter.clone();
                let send = send.clone();
                tasks.push(tokio::spawn(async move {
                    while Instant::now() < deadline {
                        let i = counter.fetch_add(1, Ordering::Relaxed);
                        send(i, Instant::now()).await;
                    }
                }));
            }
            for t in tasks {
                let _ = t.await;
            }
        }
        Some(rate) => {
            let interval = Duration::from_secs_f64(1.0 / rate as f64);
            let mut next = Instant::now();
            let mut inflight = tokio::task::JoinSet::new();
            while next < deadline {
                let i = counter.fetch_add(1, Ordering::Relaxed);
                inflight.spawn(send(i, next));
                next += interval;
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    tokio::time::sleep(wait).await;
                }
                while inflight.try_join_next().is_some() {}
            }
            while inflight.join_next().await.is_some() {}
        }
    }
    let elapsed = start.elapsed();
    let machine_after = machine_ticks();
    let mut l = latencies.lock().expect("lock").clone();
    l.sort_unstable();
    let pct = |p: f64| -> f64 {
        if l.is_empty() {
            return 0.0;
        }
        let idx = ((l.len() as f64 * p).ceil() as usize).clamp(1, l.len()) - 1;
        l[idx] as f64 / 1000.0
    };
    let ok = l.len() as f64;
    println!(
        "mode: {}  replicas: {}  apps: {}  avg body: {} bytes",
        match args.rate {
            Some(r) => format!("open loop at {r}/s"),
            None => format!("closed loop, concurrency {}", args.concurrency),
        },
        urls.len(),
        args.apps,
        avg_size
    );
    println!(
        "acknowledged: {}  errors: {}  duration: {:.1}s  throughput: {:.0} events/s",
        l.len(),
        errors.load(Ordering::Relaxed),
        elapsed.as_secs_f64(),
        ok / elapsed.as_secs_f64()
    );
    if let Some(what) = first_error.lock().expect("lock").as_ref() {
        println!("first error: {what}");
        // And what the spawned Heralds logged (warnings and errors only), the last lines of each.
        if let Some(spawned) = &_spawned {
            for i in 0..spawned.children.len() {
                let log = std::fs::read_to_string(spawned._dir.join(format!("herald-{i}.log"))).unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                for line in &lines[lines.len().saturating_sub(5)..] {
                    println!("herald {i} logged: {}", line.chars().take(400).collect::<String>());
                }
            }
        }
    }
    if !args.alertmanager {
        let [changed, duplicate, stale] = [0, 1, 2].map(|k| outcomes[k].load(Ordering::Relaxed));
        println!("outcomes: {changed} changed, {duplicate} duplicate, {stale} stale");
    }
    println!(
        "latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        pct(0.50),
        pct(0.90),
        pct(0.99),
        pct(1.0)
    );
    if let (Some(before), Some(after)) = (
        store_before,
        store_bytes(_spawned.as_ref(), args.storage_url.as_deref()),
    ) && ok > 0.0
    {
        let grown = after.saturating_sub(before);
        println!(
            "store on disk: {:.1} MB after, grew {:.1} MB over the run: {:.0} bytes per acknowledged event \
             (database + write-ahead log, checkpointed or not)",
            after as f64 / 1e6,
            grown as f64 / 1e6,
            grown as f64 / ok
        );
    }
    for (p, before) in pids.iter().zip(cpu_before) {
        if let Some(kb) = peak_rss_kb(*p) {
            println!("herald pid {p}: peak RSS {:.1} MB", kb as f64 / 1024.0);
        }
        if let (Some(before), Some(after)) = (before, cpu_seconds(*p))
            && ok > 0.0
        {
            let used = after - before;
            println!(
                "herald pid {p}: CPU {:.1} s over the run ({:.0} % of one core), {:.0} µs per acknowledged event",
                used,
                used / elapsed.as_secs_f64() * 100.0,
                used / ok * 1e6
            );
        }
    }
    // The generator shares the machine: what it takes of it bounds what is left for the target.
    if let (Some(before), Some(after)) = (own_cpu_before, cpu_seconds(std::process::id()))
        && ok > 0.0
    {
        let used = after - before;
        println!(
            "generator (this process): CPU {:.1} s over the run ({:.0} % of one core), {:.0} µs per acknowledged \
             event",
            used,
            used / elapsed.as_secs_f64() * 100.0,
            used / ok * 1e6
        );
    }
    // How much of the machine the run left unused: a target that cannot scale further on it is one that leaves none.
    if let (Some((b0, i0)), Some((b1, i1))) = (machine_before, machine_after) {
        let (busy, idle) = (b1.saturating_sub(b0), i1.saturating_sub(i0));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if busy + idle > 0 {
            println!(
                "machine: {:.0} % of its {cores} cores busy over the run (every process, the target's and this one's)",
                busy as f64 * 100.0 / (busy + idle) as f64
            );
        }
    }
    // The write-ahead log is bounded (64 MB) but not empty while Herald runs: stopped cleanly, Herald checkpoints
    // it into the database, which is then what the events cost.
    if let (Some(spawned), Some(before)) = (&_spawned, store_before)
        && args.storage_url.is_none()
        && ok > 0.0
        && stop_cleanly(spawned)
        && let Some(after) = store_bytes(Some(spawned), None)
    {
        println!(
            "store after a clean stop: {:.1} MB, {:.0} bytes per acknowledged event (the log checkpointed into the \
             database)",
            after as f64 / 1e6,
            after.saturating_sub(before) as f64 / ok
        );
    }
}

/// Asks each spawned Herald to stop (SIGTERM) and waits up to 30 s for it; answers whether all stopped.
fn stop_cleanly(spawned: &Spawned) -> bool {
    let mut all = true;
    for child in &spawned.children {
        let pid = child.id();
        // SAFETY: kill only sends a signal, to a child this program started and has not reaped.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
        }
        let gone = (0..300).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
        });
        all &= gone;
    }
    all
}
