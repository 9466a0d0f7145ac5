//! Logs (tracing, text or JSON), the Prometheus recorder (process-wide, installed once, with every metric family
//! described for `# HELP` and `herald_build_info`) and the gauges set at scrape time from counts the pipeline reads
//! ([`GaugeReadings`]): this module sets metrics, it reads nothing.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::configuration::{LogFormat, LogSettings};

pub fn init_logs(s: &LogSettings) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&s.level));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none());
    let _ = match s.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Every metric family Herald exports, with its help text: what `# HELP` says on `/metrics`. A family is listed
/// here when it is introduced, wherever it is recorded.
const FAMILIES: [(&str, &str); 15] = [
    ("herald_build_info", "Always 1; the labels say which Herald is running."),
    (
        "herald_events_received_total",
        "Argo CD event bodies received, by outcome (changed, duplicate, stale, rejected, unavailable, error).",
    ),
    (
        "herald_ingest_duration_seconds",
        "Time from receiving an Argo CD body to answering it (committed or refused), in seconds.",
    ),
    (
        "herald_notifications_queued_total",
        "Notifications put in the outbox, by receiver and action (open, update, resolve).",
    ),
    (
        "herald_deliveries_total",
        "Delivery attempts, by receiver and outcome (delivered, retry, dead).",
    ),
    (
        "herald_delivery_duration_seconds",
        "Time one delivery attempt took, by receiver, in seconds.",
    ),
    (
        "herald_auth_failures_total",
        "Requests refused for their credentials, by reason \
         (missing, malformed, unknown_credential, insufficient_scope).",
    ),
    (
        "herald_config_reloads_total",
        "Configuration reloads on SIGHUP, by outcome (applied, refused).",
    ),
    (
        "herald_applications",
        "Applications known, by sync and health status (read from the store at scrape time).",
    ),
    (
        "herald_incidents_open",
        "Open incidents, by state, kind and team (read from the store at scrape time).",
    ),
    (
        "herald_outbox",
        "Deliveries in the outbox, by receiver and state (read from the store at scrape time).",
    ),
    (
        "herald_argocd_api_up",
        "1 when the last call to the Argo CD API (listing, stream) succeeded, 0 when it failed.",
    ),
    (
        "herald_argocd_resyncs_total",
        "Listings of every Application from the Argo CD API, by outcome (ok, failed).",
    ),
    (
        "herald_clock_skew_clamped_total",
        "Bodies dated further ahead than server.max_clock_skew, whose time was taken as now.",
    ),
    (
        "herald_events_shed_total",
        "Event requests refused to bound memory and connections, by reason (busy: 503, timeout: 408).",
    ),
];

/// The process-wide Prometheus handle. The first call installs the recorder, describes every family and sets
/// `herald_build_info`.
pub fn metrics() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&[
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ])
                .map(|b| b.build_recorder())
                .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
            let handle = recorder.handle();
            let installed = metrics::set_global_recorder(recorder).is_ok();
            if installed {
                describe_families();
            }
            handle
        })
        .clone()
}

fn describe_families() {
    for (name, help) in FAMILIES {
        // The recorder keeps one description per name, whatever the kind: describing as a counter is enough.
        metrics::describe_counter!(name, help);
    }
    metrics::gauge!("herald_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
}

type GaugeKey = (&'static str, Vec<(&'static str, String)>);

/// Label sets set at the previous scrape: a set that is gone now (no dead rows left, say) is set back to 0.
fn previous() -> &'static std::sync::Mutex<std::collections::HashSet<GaugeKey>> {
    static SEEN: OnceLock<std::sync::Mutex<std::collections::HashSet<GaugeKey>>> = OnceLock::new();
    SEEN.get_or_init(Default::default)
}

fn set(
    seen: &mut std::collections::HashSet<GaugeKey>,
    name: &'static str,
    labels: Vec<(&'static str, String)>,
    v: f64,
) {
    let owned: Vec<metrics::Label> = labels.iter().map(|(k, v)| metrics::Label::new(*k, v.clone())).collect();
    metrics::gauge!(name, owned).set(v);
    seen.insert((name, labels));
}

/// Counts read at scrape time, each with its label values. A list the store could not give is empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GaugeReadings {
    /// (sync, health, how many Applications)
    pub applications: Vec<(String, String, i64)>,
    /// (state, kind, team, how many open incidents)
    pub incidents: Vec<(String, String, String, i64)>,
    /// (receiver, state, how many deliveries)
    pub outbox: Vec<(String, String, i64)>,
}

/// Sets the gauges: Applications by status, open incidents, queued and dead deliveries. A label set that was set
/// at the previous scrape and is not in `readings` goes back to 0.
pub fn set_gauges(readings: &GaugeReadings) {
    let mut seen = std::collections::HashSet::new();
    for (sync, health, n) in &readings.applications {
        set(
            &mut seen,
            "herald_applications",
            vec![("sync", sync.clone()), ("health", health.clone())],
            *n as f64,
        );
    }
    for (state, kind, team, n) in &readings.incidents {
        set(
            &mut seen,
            "herald_incidents_open",
            vec![("state", state.clone()), ("kind", kind.clone()), ("team", team.clone())],
            *n as f64,
        );
    }
    for (receiver, state, n) in &readings.outbox {
        set(
            &mut seen,
            "herald_outbox",
            vec![("receiver", receiver.clone()), ("state", state.clone())],
            *n as f64,
        );
    }
    let mut prev = previous().lock().unwrap_or_else(|e| e.into_inner());
    for (name, labels) in prev.difference(&seen) {
        let owned: Vec<metrics::Label> = labels.iter().map(|(k, v)| metrics::Label::new(*k, v.clone())).collect();
        metrics::gauge!(*name, owned).set(0.0);
    }
    *prev = seen;
}
