//! How an Argo CD instance's API source is doing: the last good listing, and since when and why it fails. Kept in
//! memory per replica (it describes this replica's view of the API); shown on the status page and as
//! `herald_argocd_api_up{instance}`.

use chrono::{DateTime, Utc};
use std::sync::Mutex;

#[derive(Debug)]
pub struct ApiSource {
    instance: String,
    inner: Mutex<SourceReport>,
}

/// A copy of the source's state.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SourceReport {
    pub last_ok: Option<DateTime<Utc>>,
    /// How many Applications the last good listing had.
    pub listed: usize,
    pub failing_since: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    /// A drop held back: what the listing lacked, and out of how many.
    pub held: Option<HeldDrop>,
    /// The projects whose Applications the token may no longer `get` (a GET with the project answered 403), and
    /// since when: their Applications are kept as they were, unverifiable (see `pipeline::access`).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub denied: std::collections::BTreeMap<String, DateTime<Utc>>,
}

/// A listing lacked `count` of the `stored` Applications (more than `argocd.api.max_drop_share`): not deleted yet.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HeldDrop {
    pub at: DateTime<Utc>,
    pub count: usize,
    pub stored: usize,
}

impl ApiSource {
    pub fn new(instance: &str) -> Self {
        Self {
            instance: instance.to_string(),
            inner: Mutex::default(),
        }
    }

    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub fn succeeded(&self, at: DateTime<Utc>, listed: usize) {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.last_ok = Some(at);
        s.listed = listed;
        s.failing_since = None;
        s.last_error = None;
        metrics::gauge!("herald_argocd_api_up", "argocd_instance" => self.instance.clone()).set(1.0);
        metrics::counter!("herald_argocd_resyncs_total", "outcome" => "ok", "argocd_instance" => self.instance.clone())
            .increment(1);
    }

    /// `error` must not hold secrets: the API client's errors carry no URL and no token.
    pub fn failed(&self, at: DateTime<Utc>, error: &str) {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.failing_since.get_or_insert(at);
        s.last_error = Some(error.chars().take(300).collect());
        metrics::gauge!("herald_argocd_api_up", "argocd_instance" => self.instance.clone()).set(0.0);
        metrics::counter!("herald_argocd_resyncs_total", "outcome" => "failed", "argocd_instance" => self.instance.clone())
            .increment(1);
    }

    /// The listing at `at` lacked `count` of the `stored` Applications: their deletion is held back (the
    /// Applications themselves are in the store, for the next listing on any replica).
    pub fn held(&self, held: HeldDrop) {
        let count = held.count;
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).held = Some(held);
        metrics::counter!("herald_argocd_listing_held_total", "argocd_instance" => self.instance.clone()).increment(1);
        metrics::gauge!("herald_argocd_listing_held_apps", "argocd_instance" => self.instance.clone())
            .set(count as f64);
    }

    /// Nothing is held back any more (the next listing agreed, or did not lack as many).
    pub fn released(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).held = None;
        metrics::gauge!("herald_argocd_listing_held_apps", "argocd_instance" => self.instance.clone()).set(0.0);
    }

    /// The projects denied now, as the store holds them (`argocd_access`, written by whichever replica saw it):
    /// `herald_argocd_permission_denied{argocd_instance, project}` is 1 for each, 0 for one no longer denied.
    pub fn denials(&self, denied: std::collections::BTreeMap<String, DateTime<Utc>>) {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for project in s.denied.keys().filter(|p| !denied.contains_key(*p)) {
            metrics::gauge!("herald_argocd_permission_denied", "argocd_instance" => self.instance.clone(), "project" => project.clone())
                .set(0.0);
        }
        for project in denied.keys() {
            metrics::gauge!("herald_argocd_permission_denied", "argocd_instance" => self.instance.clone(), "project" => project.clone())
                .set(1.0);
        }
        s.denied = denied;
    }

    pub fn report(&self) -> SourceReport {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
