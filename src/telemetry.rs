//! Logs (tracing, text or JSON; in text every field value and message has its control characters escaped, see
//! [`EscapedFields`]), the Prometheus recorder (process-wide, installed once, with every metric family
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
        LogFormat::Text => builder.fmt_fields(EscapedFields).try_init(),
    };
}

/// The text log's fields, as tracing's default writes them (`message` first and bare, then `name=value`), with every
/// control character of every value escaped (`\n`, `\r`, `\t`, `\u{1b}`…): values come from outside (a team
/// annotation, an Application name, a request path), and a raw CR/LF would start a forged log line, an ESC rewrite
/// the terminal. JSON logs are escaped by JSON itself.
pub struct EscapedFields;

impl<'w> tracing_subscriber::fmt::FormatFields<'w> for EscapedFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        writer: tracing_subscriber::fmt::format::Writer<'w>,
        fields: R,
    ) -> std::fmt::Result {
        let mut visitor = EscapingVisitor {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct EscapingVisitor<'w> {
    writer: tracing_subscriber::fmt::format::Writer<'w>,
    first: bool,
    result: std::fmt::Result,
}

impl tracing::field::Visit for EscapingVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        let name = field.name();
        // What the `log` crate's records carry about themselves: the default formatter leaves it out too.
        if self.result.is_err() || name.starts_with("log.") {
            return;
        }
        let separator = if self.first { "" } else { " " };
        self.first = false;
        self.result = if name == "message" {
            write!(self.writer, "{separator}")
        } else {
            write!(self.writer, "{separator}{}=", name.strip_prefix("r#").unwrap_or(name))
        }
        .and_then(|_| write!(Escaping(&mut self.writer), "{value:?}"));
    }
}

/// A writer that escapes the control characters (and the Unicode line and paragraph separators, and the bidi
/// overrides that reorder what a reader sees) of whatever is written through it.
struct Escaping<'a, W: std::fmt::Write>(&'a mut W);

impl<W: std::fmt::Write> std::fmt::Write for Escaping<'_, W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let mut rest = s;
        while let Some(at) = rest.find(needs_escape) {
            self.0.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().unwrap_or('\0');
            match c {
                '\n' => self.0.write_str("\\n")?,
                '\r' => self.0.write_str("\\r")?,
                '\t' => self.0.write_str("\\t")?,
                c => write!(self.0, "\\u{{{:x}}}", c as u32)?,
            }
            rest = &rest[at + c.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Every metric family Herald exports, with its help text: what `# HELP` says on `/metrics`. A family is listed
/// here when it is introduced, wherever it is recorded.
const FAMILIES: [(&str, &str); 23] = [
    ("herald_build_info", "Always 1; the labels say which Herald is running."),
    (
        "herald_last_event_timestamp_seconds",
        "When this replica last accepted an Argo CD body (Unix seconds; its start time until the first one).",
    ),
    (
        "herald_annotation_receivers_refused_total",
        "Receivers an Application's annotation asked for that its team does not allow (not used).",
    ),
    (
        "herald_digest_slots_total",
        "Team digest slots done, by state (sent, empty, skipped: missed by more than catch_up).",
    ),
    (
        "herald_events_received_total",
        "Argo CD event bodies received, by outcome (changed, duplicate, stale, rejected, unavailable, error).",
    ),
    (
        "herald_events_repeated_total",
        "Of those, duplicate or stale bodies answered without parsing: the same bytes as a body already judged, \
         its Application unchanged since.",
    ),
    (
        "herald_argocd_unchanged_total",
        "Applications read from the Argo CD API (a resync's listing, the watch, a confirmation) that are as stored: \
         answered from memory, nothing read or written.",
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
         state change whose body is not JSON, cross_site: a browser request from another site); \
         slack_signature: a Slack interaction unsigned, stale or replayed (refused by its route); and \
         instance_mismatch: an Argo CD body whose ingest token is bound to one instance and whose \
         context.argocdUrl names another (422).",
    ),
    (
        "herald_config_reloads_total",
        "Configuration reloads on SIGHUP, by outcome (applied, refused).",
    ),
    (
        "herald_argocd_permission_denied",
        "1 while the Argo CD API answers 403 to Herald's token for a project's Applications (they are kept, \
         unverifiable), 0 once it answers again; by argocd_instance and project.",
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
        "herald_argocd_listings_refused_total",
        "Argo CD listings that deleted nothing by absence because they did not prove complete, by reason \
         (incomplete, too_large, invalid).",
    ),
    (
        "herald_argocd_listing_held_total",
        "Argo CD listings whose drop (more than argocd.api.max_drop_share of the stored Applications) was held back.",
    ),
    (
        "herald_argocd_listing_held_apps",
        "Applications a listing lacked whose deletion is held back until the next listing agrees (0: none).",
    ),
    (
        "herald_clock_skew_clamped_total",
        "Bodies dated further ahead than server.max_clock_skew, whose time was taken as now.",
    ),
    (
        "herald_loop_passes_total",
        "Passes of the background loops, by loop (scheduler, outbox) and outcome (worked, idle): a loop whose count \
         stands still has stopped.",
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
                upkeep(handle.clone());
            }
            handle
        })
        .clone()
}

/// Histograms keep each sample until they are drained, which the exporter does when `/metrics` is rendered — and
/// nobody may scrape for hours (no Prometheus yet, or one that scrapes another replica): at 40,000 events a second
/// that is 10 MB a minute. A thread drains them every few seconds, as the exporter's own HTTP listener would.
fn upkeep(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(5));
                handle.run_upkeep();
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the metrics upkeep thread: histograms grow until /metrics is read");
    }
}

fn describe_families() {
    for (name, help) in FAMILIES {
        // The recorder keeps one description per name, whatever the kind: describing as a counter is enough.
        metrics::describe_counter!(name, help);
    }
    metrics::gauge!("herald_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    // From the start: a replica that never receives a body (Argo CD's token refused) is seen growing old.
    event_accepted();
}

/// An Argo CD body was accepted now: `herald_last_event_timestamp_seconds` (wall clock, as Prometheus' `time()`).
pub fn event_accepted() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    metrics::gauge!("herald_last_event_timestamp_seconds").set(now);
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
    /// How long the oldest delivery still waiting has waited, in seconds (none waiting: `None`).
    pub oldest_pending_seconds: Option<i64>,
}

impl GaugeReadings {
    /// The same counts without the team's name: open incidents by state and kind only (`server.metrics.team_labels:
    /// false`).
    pub fn without_teams(mut self) -> Self {
        for incident in &mut self.incidents {
            incident.2.clear();
        }
        self
    }
}

/// The values Argo CD documents for each status; anything else is counted as `Other`, so a hostile or broken sender
/// cannot create label sets at will.
fn known<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "Other".to_string(), |v| v.to_string())
}

/// The scrape-time gauges as Prometheus text: Applications by status, open incidents, queued and dead deliveries.
/// Rendered from the counts read for this scrape, not kept in the recorder: a label set that is gone (no dead rows
/// left, a team renamed) is simply not there, rather than lingering at 0.
pub fn render_gauges(readings: &GaugeReadings) -> String {
    use std::collections::BTreeMap;
    let mut out = String::new();
    let mut family = |name: &str, help: &str, rows: GaugeRows| write_family(&mut out, name, help, rows);
    let mut apps = BTreeMap::new();
    for (sync, health, n) in &readings.applications {
        let key = vec![
            ("sync", known(crate::argocd::SyncStatus::known(sync))),
            ("health", known(crate::argocd::HealthStatus::known(health))),
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
        let mut labels = vec![("state", state.clone()), ("kind", kind.clone())];
        if !team.is_empty() {
            labels.push(("team", team.clone()));
        }
        *incidents.entry(labels).or_insert(0) += n;
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
    let oldest = BTreeMap::from([(Vec::new(), readings.oldest_pending_seconds.unwrap_or(0))]);
    family(
        "herald_outbox_oldest_pending_age_seconds",
        "How long the oldest delivery still waiting in the outbox has waited, in seconds (0: none waiting).",
        oldest,
    );
    out
}

/// One gauge's values, by their labels (name, value).
type GaugeRows<'a> = std::collections::BTreeMap<Vec<(&'a str, String)>, i64>;

/// One gauge family in the text format: its help and type lines, a line per label set, a blank line.
fn write_family(out: &mut String, name: &str, help: &str, rows: GaugeRows) {
    use std::fmt::Write;
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    for (labels, n) in rows {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {n}");
        } else {
            let _ = writeln!(out, "{name}{{{}}} {n}", labels.join(","));
        }
    }
    out.push('\n');
}

/// A label value as the text format wants it: backslash, double quote and new line escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_value_with_control_characters_cannot_forge_a_text_log_line() {
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .fmt_fields(EscapedFields)
            .finish();
        let team = "payments\r\n2026-01-01T00:00:00Z ERROR herald: forged\u{1b}[2J\u{2028}x";
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("delivery", thread = %team, outbox = 7);
            let _entered = span.enter();
            tracing::warn!(app = %"pay\napi", path = "/a\rb", "delivery failed for {team}");
        });
        let text = String::from_utf8(out.0.lock().expect("lock").clone()).expect("utf-8");
        assert_eq!(text.lines().count(), 1, "one event, one line: {text:?}");
        assert!(
            !text.contains('\r') && !text.contains('\u{1b}') && !text.contains('\u{2028}'),
            "{text:?}"
        );
        for escaped in [
            "thread=payments\\r\\n2026-01-01T00:00:00Z ERROR herald: forged\\u{1b}[2J\\u{2028}x",
            "outbox=7",
            "app=pay\\napi",
            "path=\"/a\\rb\"",
            "delivery failed for payments\\r\\n",
        ] {
            assert!(text.contains(escaped), "{escaped} in {text:?}");
        }
    }

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
            oldest_pending_seconds: Some(90),
        };
        let text = render_gauges(&readings);
        assert!(
            text.contains("\nherald_outbox_oldest_pending_age_seconds 90\n"),
            "{text}"
        );
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
