//! Logs (tracing, text or JSON) and the Prometheus recorder. The recorder is process-wide, installed once.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::configuration::{LogFormat, LogSettings};
use crate::store::Store;

pub fn init_logs(s: &LogSettings) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&s.level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match s.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// The process-wide Prometheus handle.
pub fn metrics() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&[
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0,
                ])
                .map(|b| b.build_recorder())
                .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
            let handle = recorder.handle();
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Gauges read from the store at scrape time: Applications by status, open incidents, queued and dead deliveries.
pub async fn refresh_gauges(store: &Store) {
    if let Ok(rows) = store.app_counts().await {
        for (sync, health, n) in rows {
            metrics::gauge!("herald_applications", "sync" => sync, "health" => health)
                .set(n as f64);
        }
    }
    if let Ok(rows) = store.incident_counts().await {
        for (state, kind, team, n) in rows {
            metrics::gauge!("herald_incidents_open", "state" => state, "kind" => kind, "team" => team).set(n as f64);
        }
    }
    if let Ok(rows) = store.outbox_counts().await {
        for (receiver, state, n) in rows {
            metrics::gauge!("herald_outbox", "receiver" => receiver, "state" => state)
                .set(n as f64);
        }
    }
}
