//! The command line: `serve`, `check-config`, `route`, `replay`, `send-test`. Glue only: each verb loads settings
//! and calls the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use crate::clock::{Clock, ManualClock};
use crate::configuration::{ConfigError, Settings};

#[derive(Parser, Debug)]
#[command(name = "herald", version, about = "Argo CD Notifications webhook target with memory")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the service.
    Serve {
        /// Configuration file (default config/herald.yaml; a missing default file means built-in defaults).
        #[arg(long, env = "HERALD_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Validate a configuration file; errors name the key path.
    CheckConfig { file: PathBuf },
    /// Show which team owns an Application, the incidents its state would open, and where they would go.
    Route {
        #[arg(long, env = "HERALD_CONFIG")]
        config: Option<PathBuf>,
        /// An Application (or an Argo CD webhook body) as JSON.
        #[arg(long)]
        app: PathBuf,
    },
    /// Dry run: print what the given bodies would do (transitions, incidents, notifications); sends nothing.
    Replay {
        #[arg(long, env = "HERALD_CONFIG")]
        config: Option<PathBuf>,
        /// `recorded`: each body's envelope timestamp is the clock; `now`: the bodies arrive now, one after another.
        #[arg(long, value_enum, default_value = "now")]
        clock: ReplayClock,
        /// Also print what a receiver of this type would show for each notification (`slack`, `email`,
        /// `msteams`…), or `configured` for each notification's own receiver's type.
        #[arg(long, value_name = "RECEIVER_TYPE")]
        render: Option<String>,
        #[arg(required = true)]
        bodies: Vec<PathBuf>,
    },
    /// Send a clearly marked test notification through one receiver and print the result.
    SendTest {
        #[arg(long, env = "HERALD_CONFIG")]
        config: Option<PathBuf>,
        #[arg(long)]
        receiver: String,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ReplayClock {
    Now,
    Recorded,
}

const DEFAULT_CONFIG: &str = "config/herald.yaml";

fn load(config: Option<PathBuf>) -> Result<Settings, ConfigError> {
    match config {
        Some(p) => Settings::load(Some(&p), false),
        None => Settings::load(Some(std::path::Path::new(DEFAULT_CONFIG)), true),
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("herald: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("herald: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve { config } => {
            let settings = load(config)?;
            crate::telemetry::init_logs(&settings.log);
            let app = crate::startup::Application::build(settings).await?;
            app.run_until_stopped().await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::CheckConfig { file } => match Settings::load(Some(&file), false) {
            Ok(s) => {
                if let Err(e) = s.check_exposure() {
                    println!("{}: warning: {e}", file.display());
                }
                println!(
                    "{}: OK ({} receivers, {} teams, {} routes)",
                    file.display(),
                    s.receivers.len(),
                    s.teams.len(),
                    s.routes.len()
                );
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("{}: invalid configuration:\n{e}", file.display());
                Ok(ExitCode::from(2))
            }
        },
        Command::Route { config, app } => route(load(config)?, app),
        Command::Replay {
            config,
            clock,
            render,
            bodies,
        } => replay(load(config)?, clock, render, bodies).await,
        Command::SendTest { config, receiver } => send_test(load(config)?, receiver).await,
    }
}

fn read_snapshot(path: &PathBuf, max_depth: usize) -> anyhow::Result<crate::argocd::Snapshot> {
    let body = std::fs::read(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    crate::argocd::parse_body(&body, max_depth).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn route(settings: Settings, app: PathBuf) -> anyhow::Result<ExitCode> {
    let snap = read_snapshot(&app, settings.server.max_json_depth)?;
    let Some(e) = crate::pipeline::explain::explain(&settings, snap, chrono::Utc::now()) else {
        anyhow::bail!("unexpected state outcome");
    };
    let team = &e.team;
    println!("application: {}", e.app);
    println!("owning team: {team}");
    if e.incidents.is_empty() {
        println!("incidents:   none (the Application is in no alerting condition)");
    }
    for i in &e.incidents {
        let (h, d) = (&i.held, &i.delivery);
        println!(
            "incident:    {} (severity {}, fires after {}): {}",
            h.kind,
            h.severity.as_str(),
            humantime::format_duration(i.fires_after),
            h.view.summary
        );
        if d.route.matched_routes.is_empty() {
            println!("  routes:    none matched → team {team}'s receivers");
        } else {
            println!(
                "  routes:    {}",
                d.route
                    .matched_routes
                    .iter()
                    .map(|i| format!("routes[{i}]"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        println!(
            "  receivers: {}",
            if d.route.receivers.is_empty() {
                "(none)".into()
            } else {
                d.route.receivers.join(", ")
            }
        );
        for g in &d.groups {
            println!("  group:     {} by {}", g.receiver, g.key);
        }
        for (n, s) in d.escalation.iter().enumerate() {
            println!(
                "  escalation step {}: after {} → {}",
                n + 1,
                humantime::format_duration(s.after),
                s.receivers.join(", ")
            );
        }
        for hint in &h.view.hints {
            println!("  hint:      {}: {}", hint.title, hint.text);
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn replay(
    mut settings: Settings,
    clock_mode: ReplayClock,
    render: Option<String>,
    bodies: Vec<PathBuf>,
) -> anyhow::Result<ExitCode> {
    use secrecy::SecretString;
    if let Some(kind) = render.as_deref()
        && kind != "configured"
        && !crate::receivers::preview::KINDS.contains(&kind)
    {
        anyhow::bail!(
            "--render {kind}: not a receiver type; use `configured` or one of {}",
            crate::receivers::preview::KINDS.join(", ")
        );
    }
    // A private in-memory store: nothing of the real one is touched, nothing is sent.
    let scratch = std::env::temp_dir().join(format!("herald-replay-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&scratch)?;
    let _cleanup = RemoveOnDrop(scratch.clone());
    settings.storage.url = SecretString::from(format!("sqlite://{}", scratch.join("replay.db").display()));
    let settings = Arc::new(settings);
    let store = crate::store::Store::connect(&settings.storage).await?;
    let clock = ManualClock::new(chrono::Utc::now());
    let pipeline = crate::pipeline::Pipeline::new(settings.clone(), store, Arc::new(clock.clone()));
    let mut printed = 0usize;
    let mut parsed = Vec::new();
    for path in &bodies {
        match read_snapshot(path, settings.server.max_json_depth) {
            Ok(s) => parsed.push((path, s)),
            Err(e) => println!("{e}  → refused"),
        }
    }
    if clock_mode == ReplayClock::Recorded {
        // A captured timeline replays in the order it happened (file names need not be in time order).
        parsed.sort_by_key(|(_, s)| s.observed_at);
    }
    if clock_mode == ReplayClock::Recorded
        && let Some(first) = parsed.iter().filter_map(|(_, s)| s.observed_at).min()
    {
        clock.set(first);
    }
    for (path, snap) in parsed {
        if clock_mode == ReplayClock::Recorded {
            if let Some(t) = snap.observed_at
                && t > clock.now()
            {
                advance_to(&pipeline, &clock, t).await?;
                printed = print_outbox(&pipeline, printed, &settings, render.as_deref()).await?;
            }
        } else {
            clock.advance(std::time::Duration::from_secs(1));
        }
        let summary = pipeline.ingest(snap, None).await?;
        println!(
            "{}  {}  {}: {} (sync {}, health {})",
            clock.now().format("%Y-%m-%dT%H:%M:%SZ"),
            path.display(),
            summary.application,
            summary.outcome,
            summary.sync,
            summary.health
        );
        for t in &summary.transitions {
            println!("    {}: {} → {}", t.field, t.from.as_deref().unwrap_or("(new)"), t.to);
        }
        for i in &summary.incidents {
            println!("    incident {} {}: {}", i.kind, i.fingerprint, i.state);
        }
        pipeline.tick().await?;
        printed = print_outbox(&pipeline, printed, &settings, render.as_deref()).await?;
    }
    // Let group_wait pass so what would be sent is shown.
    let end = clock.now() + chrono::Duration::from_std(settings.grouping.group_wait).unwrap_or_default();
    advance_to(&pipeline, &clock, end + chrono::Duration::seconds(1)).await?;
    print_outbox(&pipeline, printed, &settings, render.as_deref()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Removes the replay's scratch directory when the replay ends, however it ends.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Moves the manual clock to `t` in steps, running timers as they fall due.
async fn advance_to(
    p: &crate::pipeline::Pipeline,
    clock: &ManualClock,
    t: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<()> {
    loop {
        p.tick().await?;
        let now = clock.now();
        if now >= t {
            return Ok(());
        }
        let step = (t - now).min(chrono::Duration::seconds(30));
        clock.set(now + step);
    }
}

/// Prints the notifications queued since the `already` first ones, each rendered as `render` says.
async fn print_outbox(
    p: &crate::pipeline::Pipeline,
    already: usize,
    settings: &Settings,
    render: Option<&str>,
) -> anyhow::Result<usize> {
    let mut rows = p.outbox(None, 10_000).await?;
    rows.reverse();
    for r in rows.iter().skip(already) {
        let n: crate::domain::Notification = serde_json::from_str(&r.payload)?;
        println!(
            "  → {} would notify {} ({}): {} [{} incident(s)]",
            r.created_at.format("%Y-%m-%dT%H:%M:%SZ"),
            r.receiver,
            r.action,
            n.title,
            n.incidents.len()
        );
        let kind = match render {
            Some("configured") => settings.receiver(&r.receiver).map(|rs| rs.kind.type_name()),
            other => other,
        };
        let parts = kind.and_then(|k| crate::receivers::preview::preview(k, &n, n.created_at).map(|p| (k, p)));
        if let Some((kind, parts)) = parts {
            for part in parts {
                println!("    ---- {kind} {} ----", part.name);
                for line in part.text.lines() {
                    println!("    {line}");
                }
            }
        }
    }
    Ok(rows.len())
}

async fn send_test(settings: Settings, name: String) -> anyhow::Result<ExitCode> {
    crate::telemetry::init_logs(&settings.log);
    let settings = Arc::new(settings);
    let Some(rs) = settings.receiver(&name) else {
        let names: Vec<&str> = settings.receivers.iter().map(|r| r.name.as_str()).collect();
        eprintln!("no receiver {name:?}; configured: {}", names.join(", "));
        return Ok(ExitCode::from(2));
    };
    let clock: crate::clock::SharedClock = Arc::new(crate::clock::SystemClock);
    let receiver = crate::receivers::build(rs, &crate::receivers::Shared::new(settings.clone(), clock.clone()))?;
    let n = crate::domain::Notification::test(&name, clock.now());
    match receiver.deliver(&n, None).await {
        Ok(d) => {
            println!("{name}: delivered ({})", d.detail);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("{name}: FAILED: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}
