//! The command line: `serve`, `check-config`, `route`, `replay`, `send-test`, `digest`, and `silence …`, `incidents`, `ack` and `unack`, which
//! talk to a running Herald (`crate::client`). Glue only: each verb loads settings (or reaches the API) and calls the
//! library.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::builder::PossibleValue;
use clap::{Parser, Subcommand, ValueEnum};

use crate::client::commands::{AckArgs, Remote, SilenceAction, ack, incidents, on_call, silence, unack};
use crate::clock::{Clock, ManualClock};
use crate::configuration::{ConfigError, Settings};
use crate::domain::{IncidentState, Kind};
use crate::pipeline::explain::ExplainedIncident;
use crate::receivers::ReceiverType;
use crate::reload::ConfigSource;

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
    /// Validate a configuration file as `serve` would: every error at once, each naming its key path; exits 2
    /// where `serve` would refuse to start.
    CheckConfig {
        /// The file (or `--config FILE`, like every other command, or `HERALD_CONFIG`).
        file: Option<PathBuf>,
        #[arg(long = "config", env = "HERALD_CONFIG", conflicts_with = "file")]
        config: Option<PathBuf>,
    },
    /// Show which team owns an Application, the incidents its state would open, and where they would go.
    Route {
        #[arg(long, env = "HERALD_CONFIG")]
        config: Option<PathBuf>,
        /// An Application (or an Argo CD webhook body) as JSON or YAML (`kubectl get app NAME -o yaml`), or the
        /// answer of `GET /v1/apps/…/raw` (its newest body); `-` reads standard input.
        #[arg(long)]
        app: PathBuf,
        /// The Argo CD instance it comes from (`default`, or an `argocd.instances[].name`); without it, as the
        /// service settles it: the body's `context.argocdUrl`, else the only instance.
        #[arg(long)]
        instance: Option<String>,
        /// Its AppProject as JSON or YAML (`kubectl get appproject NAME -o yaml`): whether its sync windows hold
        /// the Application's OutOfSync now, and until when.
        #[arg(long)]
        project: Option<PathBuf>,
    },
    /// Dry run: print what the given bodies would do (transitions, incidents, notifications); sends nothing.
    Replay {
        #[arg(long, env = "HERALD_CONFIG")]
        config: Option<PathBuf>,
        /// `recorded`: each body's envelope timestamp is the clock; `now`: the bodies arrive now, one after another.
        #[arg(long, value_enum, default_value = "now")]
        clock: ReplayClock,
        /// Keep the clock running after the last body until this time (`+2h`: after the last body; or an RFC 3339
        /// time), then print what fired, what resolved and what is still pending.
        #[arg(long, value_parser = parse_until)]
        until: Option<Until>,
        /// Also print what a receiver of this type would show for each notification, or `configured` for each
        /// notification's own receiver's type.
        #[arg(long, value_name = "RECEIVER_TYPE", value_enum)]
        render: Option<Render>,
        /// The Argo CD instance the bodies come from (`default`, or an `argocd.instances[].name`); without it, as
        /// the service settles it: each body's `context.argocdUrl`, else the only instance.
        #[arg(long)]
        instance: Option<String>,
        /// Argo CD bodies (JSON or YAML), or answers of `GET /v1/apps/…/raw` (their bodies, oldest first).
        #[arg(required = true)]
        bodies: Vec<PathBuf>,
    },
    /// Send a clearly marked test notification through one receiver and print the result; or, with `--render`,
    /// print what the receiver would send (its own template rendered, no secret) and send nothing.
    SendTest {
        #[arg(long, env = "HERALD_CONFIG")]
        config: Option<PathBuf>,
        /// The receiver to send the test through.
        #[arg(long, required_unless_present = "render", conflicts_with = "render")]
        receiver: Option<String>,
        /// Send nothing: print what this receiver would send for the test (and, for a ticket or paging receiver,
        /// for closing it again).
        #[arg(long, value_name = "RECEIVER")]
        render: Option<String>,
    },
    /// Print the digest a team would get now (read from the store the configuration names); sends nothing.
    Digest {
        #[arg(long, env = "HERALD_CONFIG")]
        config: Option<PathBuf>,
        #[arg(long)]
        team: String,
        /// The digest as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Silences of a running Herald: add, list, expire.
    Silence {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        action: SilenceAction,
    },
    /// Acknowledge an incident of a running Herald: no repeats, no further escalation step (its resolve is still
    /// sent); until it resolves, or `--for 2h` / `--until TIME`. Needs a `respond` (or `admin`) token.
    Ack {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        args: AckArgs,
    },
    /// Take back an acknowledgement: repeats and escalation resume.
    Unack {
        #[command(flatten)]
        remote: Remote,
        /// The incident's id.
        id: i64,
    },
    /// Incidents of a running Herald, newest first.
    Incidents {
        #[command(flatten)]
        remote: Remote,
        /// Only incidents in this state (without it: firing, and resolved in the last 24 h after telling someone).
        #[arg(long, value_enum)]
        state: Option<IncidentState>,
        #[arg(long)]
        team: Option<String>,
        /// Only incidents of this kind.
        #[arg(long, value_enum)]
        kind: Option<Kind>,
        /// One Argo CD instance's (`default`, or an `argocd.instances[].name`).
        #[arg(long)]
        instance: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Who is on call in each schedule of a running Herald (or in one), and until when.
    Oncall {
        #[command(flatten)]
        remote: Remote,
        /// One schedule (`schedules.<name>`); without it, every schedule.
        schedule: Option<String>,
        /// At this time instead of now: RFC 3339 (`2026-03-30T09:00:00+02:00`) or `+DURATION` from now (`+8h`).
        #[arg(long, value_parser = parse_at)]
        at: Option<chrono::DateTime<chrono::Utc>>,
    },
}

/// `oncall --at`: an RFC 3339 time, or `+2h` from now.
fn parse_at(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    if let Some(d) = s.strip_prefix('+') {
        let d = crate::configuration::duration::parse(d).map_err(|e| format!("{e} (write +8h, +1d)"))?;
        return chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| chrono::Utc::now().checked_add_signed(d))
            .ok_or_else(|| format!("{s:?} is too far ahead"));
    }
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|_| format!("{s:?} is not a time: write RFC 3339 (2026-03-30T09:00:00+02:00) or +8h"))
}

/// Until when `replay --until` runs the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// This long after the last body.
    After(std::time::Duration),
    At(chrono::DateTime<chrono::Utc>),
}

fn parse_until(s: &str) -> Result<Until, String> {
    if let Some(d) = s.strip_prefix('+') {
        return crate::configuration::duration::parse(d)
            .map(Until::After)
            .map_err(|e| format!("{e} (write +2h, +30m, +1d)"));
    }
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| Until::At(t.with_timezone(&chrono::Utc)))
        .map_err(|e| format!("{s:?}: {e} (write +2h, or an RFC 3339 time such as 2025-10-02T18:00:00Z)"))
}

/// What `replay --render` shows for each notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Render {
    /// What the notification's own receiver would send.
    Configured,
    /// What a receiver of this type would send.
    As(ReceiverType),
}

impl Render {
    /// `configured`, then every receiver type ([`ReceiverType::ALL`]).
    const ALL: [Render; ReceiverType::ALL.len() + 1] = {
        let mut all = [Render::Configured; ReceiverType::ALL.len() + 1];
        let mut i = 0;
        while i < ReceiverType::ALL.len() {
            all[i + 1] = Render::As(ReceiverType::ALL[i]);
            i += 1;
        }
        all
    };
}

// The command line's words for the library's enums: their help lists the values, a wrong one is answered with them.
impl ValueEnum for Render {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Render::Configured => PossibleValue::new("configured"),
            Render::As(t) => PossibleValue::new(t.as_str()),
        })
    }
}

impl ValueEnum for Kind {
    fn value_variants<'a>() -> &'a [Self] {
        &Kind::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.as_str()))
    }
}

impl ValueEnum for IncidentState {
    fn value_variants<'a>() -> &'a [Self] {
        &IncidentState::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.as_str()))
    }
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
        Command::Serve { config } => serve(config).await,
        Command::CheckConfig { file, config } => match file.or(config) {
            Some(f) => Ok(check_config(&f)),
            None => {
                eprintln!("check-config: name the file: herald check-config FILE (or --config FILE)");
                Ok(ExitCode::from(2))
            }
        },
        Command::Route {
            config,
            app,
            instance,
            project,
        } => route(load(config)?, app, instance, project),
        Command::Replay {
            config,
            clock,
            until,
            render,
            instance,
            bodies,
        } => {
            replay(
                load(config)?,
                Replay {
                    clock,
                    until,
                    render,
                    instance,
                },
                bodies,
            )
            .await
        }
        Command::SendTest {
            config,
            receiver,
            render,
        } => send_or_render_test(config, receiver, render).await,
        Command::Digest { config, team, json } => digest(load(config)?, &team, json).await,
        Command::Silence { remote, action } => silence(remote, action).await,
        Command::Ack { remote, args } => ack(remote, args).await,
        Command::Unack { remote, id } => unack(remote, id).await,
        Command::Incidents {
            remote,
            state,
            team,
            kind,
            instance,
            limit,
        } => incidents(remote, state, team, kind, instance, limit).await,
        Command::Oncall { remote, schedule, at } => on_call(remote, schedule, at).await,
    }
}

/// `herald serve`: the settings from `config` (else the default file, if there is one) and the environment, then
/// Herald until it is stopped.
async fn serve(config: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let source = match config {
        Some(file) => ConfigSource { file, optional: false },
        None => ConfigSource {
            file: DEFAULT_CONFIG.into(),
            optional: true,
        },
    };
    let settings = Settings::load(Some(&source.file), source.optional)?;
    crate::telemetry::init_logs(&settings.log);
    let receivers: Vec<&str> = settings.receivers.iter().map(|r| r.name.as_str()).collect();
    // The variables' names only: their values may be credentials.
    let overrides = crate::configuration::environment_overrides();
    tracing::info!(
        config = %if source.file.exists() { source.file.display().to_string() } else { "none: the built-in defaults".into() },
        environment = %if overrides.is_empty() { "none".into() } else { overrides.join(", ") },
        store = %settings.storage.describe(),
        receivers = %receivers.join(", "),
        "starting"
    );
    let app = crate::startup::Application::build(settings)
        .await?
        .reloading_from(source);
    app.run_until_stopped().await?;
    Ok(ExitCode::SUCCESS)
}

/// `herald send-test`: renders the test message for `--render NAME`, else sends it to `--receiver NAME`.
async fn send_or_render_test(
    config: Option<PathBuf>,
    receiver: Option<String>,
    render: Option<String>,
) -> anyhow::Result<ExitCode> {
    match (receiver, render) {
        (_, Some(name)) => Ok(render_test(&load(config)?, &name)),
        (Some(name), None) => send_test(load(config)?, name).await,
        (None, None) => {
            eprintln!("send-test: name the receiver: --receiver NAME (or --render NAME to send nothing)");
            Ok(ExitCode::from(2))
        }
    }
}

/// Loads `file` as `serve` would (environment included), builds the receivers (a CA file that cannot be read, an
/// SMTP URL lettre refuses) and checks the exposure; prints every problem, exits 2 on any.
fn check_config(file: &std::path::Path) -> ExitCode {
    let s = match Settings::load(Some(file), false) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}: invalid configuration:\n{e}", file.display());
            return ExitCode::from(2);
        }
    };
    let mut problems = Vec::new();
    if let Err(e) = s.check_exposure() {
        problems.push(e.to_string());
    }
    let shared = crate::receivers::Shared::new(Arc::new(s.clone()), Arc::new(crate::clock::SystemClock));
    if let Err(e) = crate::receivers::build_all(&shared) {
        problems.push(e.to_string());
    }
    if !problems.is_empty() {
        eprintln!(
            "{}: invalid configuration (herald serve would not start):\n{}",
            file.display(),
            problems.join("\n")
        );
        return ExitCode::from(2);
    }
    println!(
        "{}: OK ({} receivers, {} teams, {} routes)",
        file.display(),
        s.receivers.len(),
        s.teams.len(),
        s.routes.len()
    );
    if let Some(why) = s.server.links_missing() {
        println!("note: {why}");
    }
    for r in s.receivers.iter().filter(|r| r.template.is_some()) {
        let kind = r.kind.receiver_type();
        if crate::receivers::preview::template_escape(kind).is_none() {
            println!(
                "note: receivers[{:?}].template: a {kind} receiver takes no template; it is not used",
                r.name
            );
        }
    }
    ExitCode::SUCCESS
}

/// One body of an input file, as `route` and `replay` take it.
struct Input {
    /// The file, and for an answer of `/v1/apps/…/raw` the item (`raw.json[items.3]`).
    label: String,
    snap: crate::argocd::Snapshot,
    /// When Herald received it (an item of `/v1/apps/…/raw`): the clock of `--clock recorded` when the body
    /// carries no timestamp of its own.
    received_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The bodies in `path` (`-`: standard input), oldest first: one Argo CD body or Application, or every body of an
/// answer of `GET /v1/apps/…/raw` (which lists them newest first), each given to its Argo CD instance.
fn read_inputs(path: &Path, settings: &Settings, instance: Option<&str>) -> anyhow::Result<Vec<Input>> {
    let shown = path.display();
    let body = if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).map_err(|e| anyhow::anyhow!("stdin: {e}"))?;
        buf
    } else {
        std::fs::read(path).map_err(|e| anyhow::anyhow!("{shown}: {e}"))?
    };
    let body = yaml_as_json(body).map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
    let max_depth = settings.server.max_json_depth;
    let Some(raw) = raw_answer(&body).map_err(|e| anyhow::anyhow!("{shown}: {e}"))? else {
        let mut snap = crate::argocd::parse_body(&body, max_depth).map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
        snap.app.instance = settle_instance(settings, instance, &snap).map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
        return Ok(vec![Input {
            label: shown.to_string(),
            snap,
            received_at: None,
        }]);
    };
    // The answer names its Application's instance: what the service settled when it took the bodies.
    if instance.is_none()
        && let Some(name) = &raw.instance
        && settings.argocd.instance(name).is_none()
    {
        anyhow::bail!(
            "{shown}: the answer is of Argo CD instance {name:?}, which this configuration does not have \
             (configured: {}): give --instance",
            settings.argocd.names()
        );
    }
    let instance = instance.or(raw.instance.as_deref());
    let mut out = Vec::with_capacity(raw.items.len());
    for (i, (received_at, body)) in raw.items.into_iter().enumerate().rev() {
        let label = format!("{shown}[items.{i}]");
        let mut snap = crate::argocd::parse_body(&body, max_depth).map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
        snap.app.instance = settle_instance(settings, instance, &snap).map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
        out.push(Input {
            label,
            snap,
            received_at: Some(received_at),
        });
    }
    Ok(out)
}

/// An answer of `GET /v1/apps/…/raw`: `{instance?, count, items: [{received_at, body}]}`, newest first.
struct RawAnswer {
    instance: Option<String>,
    items: Vec<(chrono::DateTime<chrono::Utc>, Vec<u8>)>,
}

/// `Some` when `json` is an answer of `/v1/apps/…/raw` (an object whose `items` hold `received_at` and `body`),
/// `None` when it is anything else (a body, an Application: for the body parser to read or refuse).
fn raw_answer(json: &[u8]) -> anyhow::Result<Option<RawAnswer>> {
    use serde_json::Value;
    let Ok(Value::Object(top)) = serde_json::from_slice::<Value>(json) else {
        return Ok(None);
    };
    let Some(Value::Array(items)) = top.get("items") else {
        return Ok(None);
    };
    let raw_like = |v: &Value| v.get("received_at").is_some() && v.get("body").is_some();
    if top.contains_key("app") || top.contains_key("metadata") || !items.first().is_none_or(raw_like) {
        return Ok(None);
    }
    if items.is_empty() {
        anyhow::bail!(
            "this answer of /v1/apps/…/raw holds no body (the Application received none within storage.raw_retention)"
        );
    }
    let instance = match top.get("instance") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => anyhow::bail!("`instance` must be an Argo CD instance's name, not {other}"),
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("items[{i}]");
        let received_at = match item.get("received_at") {
            Some(Value::String(t)) => chrono::DateTime::parse_from_rfc3339(t)
                .map_err(|e| anyhow::anyhow!("{at}.received_at: {t:?} is not an RFC 3339 time: {e}"))?
                .with_timezone(&chrono::Utc),
            _ => anyhow::bail!("{at}.received_at: missing, or not an RFC 3339 time (items of /v1/apps/…/raw have one)"),
        };
        // The API gives a body that was not JSON as a string.
        let body = match item.get("body") {
            Some(Value::String(text)) => text.clone().into_bytes(),
            Some(v @ Value::Object(_)) => serde_json::to_vec(v)?,
            _ => anyhow::bail!("{at}.body: missing, or neither an Argo CD body nor its text"),
        };
        out.push((received_at, body));
    }
    Ok(Some(RawAnswer { instance, items: out }))
}

/// The Argo CD instance a body is given to, as the service settles it (`ArgoCdSettings::identify`): `--instance`
/// (or the raw answer's) as an ingest token bound to it would, else the body's `context.argocdUrl`, else the only
/// instance.
fn settle_instance(settings: &Settings, named: Option<&str>, snap: &crate::argocd::Snapshot) -> anyhow::Result<String> {
    let argocd = &settings.argocd;
    if let Some(name) = named
        && argocd.instance(name).is_none()
    {
        anyhow::bail!(
            "--instance {name:?} is not a configured Argo CD instance (configured: {})",
            argocd.names()
        );
    }
    argocd.identify(named, snap.argocd_url.as_deref()).map_err(|e| match e {
        crate::configuration::UnknownInstance::Mismatch { token, body, url } => anyhow::anyhow!(
            "the body's context.argocdUrl {url:?} is instance {body:?}'s, not {token:?}'s (the service refuses it \
                 from a token bound to {token:?}): give --instance {body}, or fix the body's argocdUrl"
        ),
        crate::configuration::UnknownInstance::Unnamed { known } => anyhow::anyhow!(
            "several Argo CD instances are configured ({known}) and this body does not say which it comes from \
                 (no context.argocdUrl): name it with --instance"
        ),
        other => anyhow::anyhow!("{other} (or name it with --instance)"),
    })
}

/// The sync windows of the AppProject in `path` (JSON or YAML), which must be the Application's (`expected`).
fn project_windows(path: &Path, expected: &str) -> anyhow::Result<Vec<crate::argocd::sync_windows::SyncWindow>> {
    let shown = path.display();
    let body = std::fs::read(path).map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
    let body = yaml_as_json(body).map_err(|e| anyhow::anyhow!("{shown}: {e}"))?;
    let value: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| anyhow::anyhow!("{shown}: not an AppProject: {e}"))?;
    let name = value["metadata"]["name"].as_str().unwrap_or_default();
    let expected = if expected.is_empty() { "default" } else { expected };
    if name != expected {
        anyhow::bail!("{shown}: AppProject {name:?} is not the Application's project ({expected:?})");
    }
    let spec = value.get("spec").cloned().unwrap_or_default();
    let windows = crate::argocd::sync_windows::parse(name, &spec);
    let all = spec
        .get("syncWindows")
        .and_then(serde_json::Value::as_array)
        .map_or(0, Vec::len);
    if windows.len() < all {
        eprintln!(
            "{shown}: {} of its {all} sync windows cannot be read and are left out",
            all - windows.len()
        );
    }
    Ok(windows)
}

/// A YAML document (`kubectl get app -o yaml`) as JSON; JSON as it is (what Argo CD sends is parsed as JSON, so
/// its errors stay the JSON parser's).
fn yaml_as_json(body: Vec<u8>) -> anyhow::Result<Vec<u8>> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if matches!(first, Some(b'{') | Some(b'[') | None) {
        return Ok(body);
    }
    let value: serde_json::Value =
        serde_norway::from_slice(&body).map_err(|e| anyhow::anyhow!("neither JSON nor YAML: {e}"))?;
    Ok(serde_json::to_vec(&value)?)
}

fn route(
    settings: Settings,
    app: PathBuf,
    instance: Option<String>,
    project: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    // An answer of /v1/apps/…/raw: its newest body is the Application's state.
    let Some(input) = read_inputs(&app, &settings, instance.as_deref())?.pop() else {
        anyhow::bail!("{}: no body", app.display());
    };
    let snap = input.snap;
    let windows = match &project {
        Some(path) => project_windows(path, &snap.project)?,
        None => Vec::new(),
    };
    let Some(e) = crate::pipeline::explain::explain(&settings, snap, &windows, chrono::Utc::now()) else {
        anyhow::bail!("unexpected state outcome");
    };
    let team = &e.team;
    println!("application: {}", e.app);
    println!("owning team: {team}");
    if e.incidents.is_empty() {
        println!("incidents:   none (the Application is in no alerting condition)");
    }
    for i in &e.incidents {
        print_explained(&settings, team, i);
    }
    Ok(ExitCode::SUCCESS)
}

/// One incident of `herald route`'s answer: what it is, where it goes, what holds it back, its hints.
fn print_explained(settings: &Settings, team: &str, i: &ExplainedIncident) {
    let h = &i.held;
    println!(
        "incident:    {} (severity {}, fires after {}): {}",
        h.kind,
        h.severity.as_str(),
        humantime::format_duration(i.fires_after),
        h.view.summary
    );
    print_routes(team, i);
    if let Some(w) = &h.view.sync_window {
        let until = settings.server.reader_zone().stamp(w.until);
        println!(
            "  in a sync window: Argo CD may not sync it{} until {until}; its `for` starts then",
            if w.manual_sync { " (a person may, by hand)" } else { "" }
        );
    }
    if let Some(hold) = &i.hold {
        let zone = settings.server.reader_zone();
        println!("  held back: {} — not sent while it holds", hold.describe(zone));
    }
    print_delivery(i);
    for hint in &h.view.hints {
        println!("  hint:      {}: {}", hint.title, hint.text);
    }
}

/// The routes an incident matched (or the owning team's receivers) and the receivers its annotation asked for that
/// the team does not allow.
fn print_routes(team: &str, i: &ExplainedIncident) {
    let route = &i.delivery.route;
    if route.matched_routes.is_empty() {
        println!("  routes:    none matched → team {team}'s receivers");
    } else {
        println!(
            "  routes:    {}{}",
            route
                .matched_routes
                .iter()
                .map(|i| format!("routes[{i}]"))
                .collect::<Vec<_>>()
                .join(", "),
            if route.owner_kept {
                format!(" (continue: true) + team {team}'s receivers")
            } else {
                String::new()
            }
        );
    }
    if !route.refused.is_empty() {
        println!(
            "  refused:   {} (asked for by the Application's annotation; not in teams.{team}.allowed_receivers)",
            route.refused.join(", ")
        );
    }
}

/// Who an incident is sent to: its receivers, their groups, its escalation steps.
fn print_delivery(i: &ExplainedIncident) {
    let d = &i.delivery;
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
            crate::configuration::step_reaches(&s.receivers, s.on_call.as_deref())
        );
    }
}

/// How `replay` runs: its clock, how long, what it shows, which instance the bodies are from.
struct Replay {
    clock: ReplayClock,
    until: Option<Until>,
    render: Option<Render>,
    instance: Option<String>,
}

async fn replay(mut settings: Settings, how: Replay, bodies: Vec<PathBuf>) -> anyhow::Result<ExitCode> {
    let Replay {
        clock: clock_mode,
        until,
        render,
        instance,
    } = how;
    if let Some(name) = &instance
        && settings.argocd.instance(name).is_none()
    {
        anyhow::bail!(
            "--instance {name:?} is not a configured Argo CD instance (configured: {})",
            settings.argocd.names()
        );
    }
    let parsed = read_bodies(&bodies, &settings, instance.as_deref(), clock_mode);
    let _cleanup = use_scratch_store(&mut settings)?;
    let settings = Arc::new(settings);
    let store = crate::store::Store::connect(&settings.storage).await?;
    let clock = ManualClock::new(chrono::Utc::now());
    let pipeline = crate::pipeline::Pipeline::new(settings.clone(), store.clone(), Arc::new(clock.clone()));
    let mut printed = 0usize;
    if clock_mode == ReplayClock::Recorded
        && let Some(first) = parsed.iter().filter_map(recorded_time).min()
    {
        clock.set(first);
    }
    for input in parsed {
        if clock_mode == ReplayClock::Recorded {
            if let Some(t) = recorded_time(&input)
                && t > clock.now()
            {
                advance_to(&pipeline, &store, &clock, t).await?;
                printed = print_outbox(&pipeline, printed, &settings, render).await?;
            }
        } else {
            clock.advance(std::time::Duration::from_secs(1));
        }
        let summary = pipeline.ingest(input.snap, None).await?;
        print_ingest(clock.now(), &input.label, &summary);
        pipeline.tick().await?;
        printed = print_outbox(&pipeline, printed, &settings, render).await?;
    }
    let end = replay_end(clock.now(), settings.grouping.group_wait, until)?;
    advance_to(&pipeline, &store, &clock, end).await?;
    print_outbox(&pipeline, printed, &settings, render).await?;
    if until.is_some() {
        print_summary(&pipeline).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// When a body arrives under `--clock recorded`: its envelope `timestamp`, else when Herald received it (an item of
/// `/v1/apps/…/raw`).
fn recorded_time(input: &Input) -> Option<chrono::DateTime<chrono::Utc>> {
    input.snap.observed_at.or(input.received_at)
}

/// Points `settings` at a private store in a new temporary directory, removed when the returned guard drops:
/// nothing of the real store is touched, nothing is sent.
fn use_scratch_store(settings: &mut Settings) -> anyhow::Result<RemoveOnDrop> {
    use secrecy::SecretString;
    let scratch = std::env::temp_dir().join(format!("herald-replay-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&scratch)?;
    let cleanup = RemoveOnDrop(scratch.clone());
    settings.storage.url = SecretString::from(format!("sqlite://{}", scratch.join("replay.db").display()));
    Ok(cleanup)
}

/// The bodies that parse, in the order to replay them (a refused one is said at once and skipped).
fn read_bodies(bodies: &[PathBuf], settings: &Settings, instance: Option<&str>, clock_mode: ReplayClock) -> Vec<Input> {
    let mut parsed = Vec::new();
    for path in bodies {
        match read_inputs(path, settings, instance) {
            Ok(inputs) => parsed.extend(inputs),
            Err(e) => println!("{e}  → refused"),
        }
    }
    if clock_mode == ReplayClock::Recorded {
        // A captured timeline replays in the order it happened (file names need not be in time order).
        parsed.sort_by_key(recorded_time);
    }
    parsed
}

/// What ingesting the body at `path` did, as of `now`: the outcome, its transitions, the incidents it touched.
fn print_ingest(now: chrono::DateTime<chrono::Utc>, label: &str, summary: &crate::pipeline::IngestSummary) {
    println!(
        "{}  {}  {}: {} (sync {}, health {})",
        now.format("%Y-%m-%dT%H:%M:%SZ"),
        label,
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
}

/// The clock moves at most 30 seconds a step: a far end would run for hours.
const MAX_UNTIL: chrono::Duration = chrono::Duration::days(31);

/// Where `replay` stops the clock after the last body (at `now`): once group_wait has passed, so what would be sent
/// is shown; or at `--until`.
fn replay_end(
    now: chrono::DateTime<chrono::Utc>,
    group_wait: std::time::Duration,
    until: Option<Until>,
) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    let end = match until {
        None => {
            let wait = chrono::Duration::from_std(group_wait).unwrap_or_default();
            return Ok(now + wait + chrono::Duration::seconds(1));
        }
        Some(Until::After(d)) => chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_add_signed(d)),
        Some(Until::At(t)) => Some(t),
    };
    match end {
        Some(end) if end - now <= MAX_UNTIL => Ok(end),
        _ => anyhow::bail!("--until is more than 31 days after the last body; replay a shorter span"),
    }
}

/// The end of `replay --until`: what fired, what resolved, what is still pending and when it would fire.
async fn print_summary(p: &crate::pipeline::Pipeline) -> anyhow::Result<()> {
    use crate::domain::IncidentState;
    let now = p.now();
    let filter = crate::pipeline::IncidentFilter {
        limit: 10_000,
        ..Default::default()
    };
    let mut list = p.incidents(&filter).await?;
    list.sort_by_key(|i| (i.since, i.id));
    println!("summary at {}:", now.format("%Y-%m-%dT%H:%M:%SZ"));
    let time = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    for i in &list {
        if let Some(at) = i.fired_at {
            println!("  fired     {}  {} {}", time(at), i.kind, i.app);
        }
    }
    for i in &list {
        if let (Some(_), Some(at)) = (i.fired_at, i.resolved_at) {
            println!("  resolved  {}  {} {}", time(at), i.kind, i.app);
        }
    }
    for i in list.iter().filter(|i| i.state == IncidentState::Pending) {
        let left = (i.fire_at - now).to_std().unwrap_or_default();
        let left = humantime::format_duration(std::time::Duration::from_secs(left.as_secs()));
        println!(
            "  pending   {} {} would fire at {} (in {left})",
            i.kind,
            i.app,
            time(i.fire_at)
        );
    }
    if list
        .iter()
        .all(|i| i.fired_at.is_none() && i.state != IncidentState::Pending)
    {
        println!("  nothing fired, nothing pending");
    }
    Ok(())
}

/// Removes the replay's scratch directory when the replay ends, however it ends.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The longest step of the clock: timers the store cannot name ahead (a digest's slot, a silence's end) run at most
/// this late.
const MAX_STEP: chrono::Duration = chrono::Duration::seconds(30);

/// Moves the manual clock to `t`, running timers as they fall due: from one timer to the next (the store names the
/// next pending incident, group flush and escalation step), so each runs at its own time, never at a fixed step's.
async fn advance_to(
    p: &crate::pipeline::Pipeline,
    store: &crate::store::Store,
    clock: &ManualClock,
    t: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<()> {
    loop {
        p.tick().await?;
        let now = clock.now();
        if now >= t {
            return Ok(());
        }
        let mut next = (now + MAX_STEP).min(t);
        if let Some(due) = store.next_timer().await?
            && due > now
        {
            next = next.min(due);
        }
        clock.set(next);
    }
}

/// Prints the notifications queued since the `already` first ones, each rendered as `render` says.
async fn print_outbox(
    p: &crate::pipeline::Pipeline,
    already: usize,
    settings: &Settings,
    render: Option<Render>,
) -> anyhow::Result<usize> {
    let mut rows = p.outbox(None, 10_000, None).await?;
    rows.reverse();
    for r in rows.iter().skip(already) {
        let n: crate::domain::Notification = serde_json::from_str(&r.payload)?;
        println!(
            "  → {} would notify {} ({}): {} [{} incident(s)]",
            r.created_at.format("%Y-%m-%dT%H:%M:%SZ"),
            r.receiver,
            r.action,
            n.title,
            n.incidents().len()
        );
        let kind = match render {
            Some(Render::Configured) => settings.receiver(&r.receiver).map(|rs| rs.kind.receiver_type()),
            Some(Render::As(kind)) => Some(kind),
            None => None,
        };
        if let Some(kind) = kind {
            for part in crate::receivers::preview::preview(kind, &n, n.created_at) {
                println!("    ---- {kind} {} ----", part.name);
                for line in part.text.lines() {
                    println!("    {line}");
                }
            }
        }
    }
    Ok(rows.len())
}

/// The receiver named `name`, or `None` after saying which ones are configured.
fn named_receiver<'a>(settings: &'a Settings, name: &str) -> Option<&'a crate::configuration::ReceiverSettings> {
    let found = settings.receiver(name);
    if found.is_none() {
        let names: Vec<&str> = settings.receivers.iter().map(|r| r.name.as_str()).collect();
        eprintln!("no receiver {name:?}; configured: {}", names.join(", "));
    }
    found
}

/// `herald send-test --render NAME`: what `send-test` would send through the receiver — the test, and for a ticket
/// or paging receiver its closing — rendered as the receiver renders it (its template included), part by part.
/// Builds no receiver and opens no connection.
fn render_test(settings: &Settings, name: &str) -> ExitCode {
    let Some(rs) = named_receiver(settings, name) else {
        return ExitCode::from(2);
    };
    let now = chrono::Utc::now();
    let test = crate::domain::Notification::test(name, now);
    let mut sent = vec![("the test", test.clone())];
    if rs.per_incident() {
        sent.push(("closing the test again", test.test_closed(now)));
    }
    let kind = rs.kind.receiver_type();
    let template = match (&rs.template, crate::receivers::preview::template_escape(kind)) {
        (Some(_), Some(_)) => "with its template",
        (Some(_), None) => "its template unused: this type takes none",
        (None, _) => "Herald's own text",
    };
    println!("{name} ({kind}, {template}): what it would send; nothing is sent");
    for (what, n) in sent {
        match crate::receivers::preview::preview_configured(rs, &n, now) {
            Ok(parts) => {
                for part in parts {
                    println!("---- {what}: {} ----", part.name);
                    println!("{}", part.text);
                }
            }
            Err(e) => {
                println!("{name}: its template does not render {what}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

async fn send_test(settings: Settings, name: String) -> anyhow::Result<ExitCode> {
    crate::telemetry::init_logs(&settings.log);
    let settings = Arc::new(settings);
    let Some(rs) = named_receiver(&settings, &name) else {
        return Ok(ExitCode::from(2));
    };
    let clock: crate::clock::SharedClock = Arc::new(crate::clock::SystemClock);
    let receiver = crate::receivers::build(rs, &crate::receivers::Shared::new(settings.clone(), clock.clone()))?;
    let n = crate::domain::Notification::test(&name, clock.now());
    let opened = match receiver.deliver(&n, None).await {
        Ok(d) => {
            println!("{name}: delivered ({})", d.detail);
            d
        }
        Err(e) => {
            println!("{name}: FAILED: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    // Nothing to close after a message, nor after a receiver told of syncs only (a checked token, an annotation).
    if !rs.per_incident() || !rs.capabilities().incidents {
        return Ok(ExitCode::SUCCESS);
    }
    // A ticket or an alert was opened for the test: close it again, so nobody has a test to clean up.
    let closing = n.test_closed(clock.now());
    match receiver.deliver(&closing, opened.memo.as_ref()).await {
        Ok(d) => {
            println!("{name}: closed the test again ({})", d.detail);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("{name}: FAILED to close the test it opened: {e}; close it by hand");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `herald digest`: the team's digest as it would be sent now (all green included), or exit 2 for an unknown team.
async fn digest(settings: Settings, team: &str, json: bool) -> anyhow::Result<ExitCode> {
    if !settings.teams.contains_key(team) {
        let names: Vec<&str> = settings.teams.keys().map(String::as_str).collect();
        eprintln!("no team {team:?} under `teams`; configured: {}", names.join(", "));
        return Ok(ExitCode::from(2));
    }
    let store = crate::store::Store::connect(&settings.storage).await?;
    let found = crate::digest::preview(&store, &settings, team, chrono::Utc::now()).await;
    store.close().await;
    let Some(d) = found? else {
        return Ok(ExitCode::from(2));
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        print!("{}", crate::receivers::render::digest::console_text(&d));
    }
    Ok(ExitCode::SUCCESS)
}
