//! The fields that routes, groups and silences match on, and the one list of their names: `group_by`,
//! silence matchers and their error messages all read [`FIELDS`], so they cannot drift apart.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::incident::{Incident, Kind, Severity};

/// Every field name a `group_by` entry or a silence matcher may use, besides `labels.<key>`.
pub const FIELDS: [&str; 10] = [
    "instance",
    "team",
    "kind",
    "severity",
    "project",
    "app",
    "app_namespace",
    "namespace",
    "cluster",
    "fingerprint",
];

/// Whether `name` is a known field or `labels.<key>` with a non-empty key.
pub fn is_field(name: &str) -> bool {
    FIELDS.contains(&name) || name.strip_prefix("labels.").is_some_and(|k| !k.is_empty())
}

/// The list for error messages: "team, kind, …, fingerprint or labels.<key>".
pub fn field_list() -> String {
    format!("{} or labels.<key>", FIELDS.join(", "))
}

/// The label values of one incident.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Labels {
    /// The Argo CD instance (`default` when only one is configured).
    pub instance: String,
    pub team: String,
    pub kind: Kind,
    pub severity: Severity,
    pub project: String,
    pub app: String,
    pub app_namespace: String,
    pub namespace: String,
    pub cluster: String,
    pub fingerprint: String,
    pub labels: BTreeMap<String, String>,
    /// The receivers the Application's annotation asks for (not a matchable field).
    #[serde(default)]
    pub asked_receivers: Vec<String>,
}

impl Labels {
    pub fn get(&self, field: &str) -> Option<&str> {
        Some(match field {
            "instance" => &self.instance,
            "team" => &self.team,
            "kind" => self.kind.as_str(),
            "severity" => self.severity.as_str(),
            "project" => &self.project,
            "app" => &self.app,
            "app_namespace" => &self.app_namespace,
            "namespace" => &self.namespace,
            "cluster" => &self.cluster,
            "fingerprint" => &self.fingerprint,
            other => {
                return other
                    .strip_prefix("labels.")
                    .and_then(|k| self.labels.get(k))
                    .map(|s| s.as_str());
            }
        })
    }

    pub fn of(v: &Incident) -> Self {
        let instance = if super::is_default_instance(&v.instance) {
            super::default_instance()
        } else {
            v.instance.clone()
        };
        Self {
            instance,
            team: v.team.clone(),
            kind: v.kind,
            severity: v.severity,
            project: v.project.clone(),
            app: v.app_name.clone(),
            app_namespace: v.app_namespace.clone(),
            namespace: v.destination_namespace.clone(),
            cluster: v.destination_cluster.clone(),
            fingerprint: v.fingerprint.clone(),
            labels: v.labels.clone(),
            asked_receivers: v.asked_receivers.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_field_can_be_read() {
        let l = Labels::default();
        for f in FIELDS {
            assert!(l.get(f).is_some(), "{f}");
            assert!(is_field(f));
        }
        assert!(is_field("labels.env"));
        assert!(!is_field("labels."));
        assert!(!is_field("colour"));
    }
}
