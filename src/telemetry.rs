//! Logs (tracing, text or JSON), the Prometheus recorder (process-wide, installed once, with every metric family
//! described for `# HELP` and `herald_build_info`) and the scrape-time gauges rendered from counts the pipeline reads
//! ([`GaugeReadings`], [`render_gauges`]): this module sets and renders metrics, it reads nothing.

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
const FAMILIES: [(&str, &str); 13] = [
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
         (missing, malformed, unknown_credential, insufficient_scope, rate_limited: 429 after too many failures).",
    ),
    (
        "herald_requests_refused_total",
        "Requests refused before any route, by reason (host: not in server.allowed_hosts, content_type: a \
         state change whose body is not JSON, cross_site: a browser request from another site).",
    ),
    (
        "herald_config_reloads_total",
        "Configuration reloads on SIGHUP, by outcome (applied, refused).",
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

/// The values Argo CD documents for each status; anything else is counted as `Other`, so a hostile or broken sender
/// cannot create label sets at will.
const SYNC_STATUSES: [&str; 3] = ["Synced", "OutOfSync", "Unknown"];
const HEALTH_STATUSES: [&str; 6] = ["Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"];

fn known(value: &str, valid: &[&str]) -> String {
    if valid.contains(&value) {
        value.to_string()
    } else {
        "Other".to_string()
    }
}

/// The scrape-time gauges as Prometheus text: Applications by status, open incidents, queued and dead deliveries.
/// Rendered from the counts read for this scrape, not kept in the recorder: a label set that is gone (no dead rows
/// left, a team renamed) is simply not there, rather than lingering at 0.
pub fn render_gauges(readings: &GaugeReadings) -> String {
    use std::collections::BTreeMap;
    use std::fmt::Write;
    let mut out = String::new();
    let mut family = |name: &str, help: &str, rows: BTreeMap<Vec<(&str, String)>, i64>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (labels, n) in rows {
            let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
            let _ = writeln!(out, "{name}{{{}}} {n}", labels.join(","));
        }
        out.push('\n');
    };
    let mut apps = BTreeMap::new();
    for (sync, health, n) in &readings.applications {
        let key = vec![
            ("sync", known(sync, &SYNC_STATUSES)),
            ("health", known(health, &HEALTH_STATUSES)),
        ];
        *apps.entry(key).or_insert(0) += n;
    }
    family(
        "herald_applications",
        "Applications known, by sync and health status (Other: a value Argo CD does not document).",
        apps,
    );
    let mut incidents = BTreeMap::new();
    for (state, kind, team, n) in &readings.incidents {
        *incidents
            .entry(vec![
                ("state", state.clone()),
                ("kind", kind.clone()),
                ("team", team.clone()),
            ])
            .or_insert(0) += n;
    }
    family(
        "herald_incidents_open",
        "Open incidents, by state, kind and team.",
        incidents,
    );
    let mut outbox = BTreeMap::new();
    for (receiver, state, n) in &readings.outbox {
        *outbox
            .entry(vec![("receiver", receiver.clone()), ("state", state.clone())])
            .or_insert(0) += n;
    }
    family(
        "herald_outbox",
        "Deliveries in the outbox, by receiver and state.",
        outbox,
    );
    out
}

/// A label value as the text format wants it: backslash, double quote and new line escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_statuses_are_other_and_label_values_are_escaped() {
        let readings = GaugeReadings {
            applications: vec![
                ("Synced".into(), "Healthy".into(), 2),
                ("outofsync".into(), "Healthy".into(), 1),
                ("<no value>".into(), "Healthy".into(), 1),
            ],
            incidents: vec![("firing".into(), "degraded".into(), "pay\"ments\nx".into(), 1)],
            outbox: vec![],
        };
        let text = render_gauges(&readings);
        assert!(
            text.contains("herald_applications{sync=\"Other\",health=\"Healthy\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("herald_applications{sync=\"Synced\",health=\"Healthy\"} 2"),
            "{text}"
        );
        assert!(text.contains("team=\"pay\\\"ments\\nx\""), "{text}");
        assert!(text.contains("# TYPE herald_outbox gauge"));
        assert!(!text.contains("herald_outbox{"), "no rows, no label sets: {text}");
    }
}
