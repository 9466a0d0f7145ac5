//! The content hash of a snapshot: SHA-256 over the fields that make up an Application's state, fed one by one
//! (each string with its length, each optional value with a tag), so nothing is copied or re-serialised. Every field
//! but the body's time, the link base and the source counts: the same state sent twice hashes the same.
//!
//! The encoding is Herald's own and stable across Rust versions (the hash is stored and compared after restarts);
//! the fields are destructured exhaustively, so a new field in [`Snapshot`] does not compile until it is placed here.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::argocd::{
    AppId, Condition, Destination, HealthStatus, Operation, ResourceStatus, ResultResource, Snapshot, SourceRef,
    SyncPolicy,
};

/// Bumped when the encoding changes, so old and new hashes never meet by accident.
const VERSION: &[u8] = b"herald-state-v2";

pub fn content_hash(s: &Snapshot) -> String {
    let mut h = Feed(Sha256::new());
    h.0.update(VERSION);
    let Snapshot {
        app: AppId {
            instance: _,
            namespace,
            name,
        },
        uid,
        // Not part of the state: an incarnation's creation never changes, and another one has another uid.
        created_at: _,
        project,
        destination,
        labels,
        annotations,
        sync_status,
        revisions,
        health_status,
        health_message,
        operation,
        resources,
        conditions,
        sync_policy,
        sources,
        previous_revision,
        images,
        deleting,
        health_changed_at,
        source: _,
        listed: _,
        argocd_url: _,
        observed_at: _,
        project_annotations,
    } = s;
    h.str(namespace);
    h.str(name);
    h.opt(uid.as_deref());
    h.str(project);
    h.destination(destination);
    h.map(labels);
    h.map(annotations);
    h.project_annotations(project_annotations);
    h.str(sync_status.as_str());
    h.strs(revisions);
    h.str(health_status.as_str());
    h.opt(health_message.as_deref());
    h.maybe(operation.as_ref(), Feed::operation);
    h.list(resources, Feed::resource);
    h.list(conditions, Feed::condition);
    h.sync_policy(sync_policy);
    h.list(sources, Feed::source);
    h.opt(previous_revision.as_deref());
    h.images(images);
    h.tag(u8::from(*deleting));
    h.time(*health_changed_at);
    hex::encode(&h.0.finalize()[..16])
}

/// The hasher with the encoding of each kind of value.
struct Feed(Sha256);

impl Feed {
    fn tag(&mut self, t: u8) {
        self.0.update([t]);
    }

    fn len(&mut self, n: usize) {
        self.0.update((n as u64).to_le_bytes());
    }

    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.update(s.as_bytes());
    }

    /// An optional value: tag 0, or tag 1 then what `feed` writes of the value.
    fn maybe<T>(&mut self, v: Option<T>, feed: impl FnOnce(&mut Self, T)) {
        match v {
            None => self.tag(0),
            Some(v) => {
                self.tag(1);
                feed(self, v);
            }
        }
    }

    fn opt(&mut self, s: Option<&str>) {
        self.maybe(s, Self::str);
    }

    fn strs(&mut self, list: &[String]) {
        self.len(list.len());
        for s in list {
            self.str(s);
        }
    }

    fn time(&mut self, t: Option<DateTime<Utc>>) {
        self.maybe(t, |h, t| {
            h.0.update(t.timestamp().to_le_bytes());
            h.0.update(t.timestamp_subsec_nanos().to_le_bytes());
        });
    }

    /// A list: its length, then each item as `feed` writes it.
    fn list<T>(&mut self, items: &[T], feed: impl Fn(&mut Self, &T)) {
        self.len(items.len());
        for item in items {
            feed(self, item);
        }
    }

    /// Fed only when present, so the hash of every Application whose project has none stays what it was.
    fn project_annotations(&mut self, map: &BTreeMap<String, String>) {
        if !map.is_empty() {
            self.tag(2);
            self.map(map);
        }
    }

    /// Fed only when present, so the hash of every Application stored before images were read stays what it was.
    fn images(&mut self, images: &[String]) {
        if !images.is_empty() {
            self.tag(3);
            self.strs(images);
        }
    }

    fn condition(&mut self, condition: &Condition) {
        let Condition { r#type, message } = condition;
        self.str(r#type);
        self.str(message);
    }

    fn map(&mut self, map: &BTreeMap<String, String>) {
        self.len(map.len());
        for (k, v) in map {
            self.str(k);
            self.str(v);
        }
    }

    fn destination(&mut self, destination: &Destination) {
        let Destination {
            server,
            name,
            namespace,
        } = destination;
        self.opt(server.as_deref());
        self.opt(name.as_deref());
        self.opt(namespace.as_deref());
    }

    /// The three switches in one tag byte.
    fn sync_policy(&mut self, policy: &SyncPolicy) {
        let SyncPolicy {
            automated,
            prune,
            self_heal,
        } = policy;
        self.tag(u8::from(*automated) | u8::from(*prune) << 1 | u8::from(*self_heal) << 2);
    }

    fn source(&mut self, source: &SourceRef) {
        let SourceRef {
            repo_url,
            path,
            chart,
            target_revision,
        } = source;
        self.str(repo_url);
        self.opt(path.as_deref());
        self.opt(chart.as_deref());
        self.opt(target_revision.as_deref());
    }

    fn operation(&mut self, op: &Operation) {
        let Operation {
            phase,
            message,
            started_at,
            finished_at,
            initiator,
            revision,
            revisions,
            retry_count,
            retry_limit,
            resources,
        } = op;
        self.str(phase.as_str());
        self.str(message);
        self.time(*started_at);
        self.time(*finished_at);
        self.tag(u8::from(initiator.automated));
        self.opt(initiator.username.as_deref());
        self.opt(revision.as_deref());
        self.strs(revisions);
        self.0.update(retry_count.to_le_bytes());
        self.maybe(*retry_limit, |h, l| h.0.update(l.to_le_bytes()));
        self.len(resources.len());
        for ResultResource {
            group,
            kind,
            namespace,
            name,
            status,
            message,
            hook_phase,
        } in resources
        {
            for s in [
                group,
                kind,
                namespace,
                name,
                status.as_str(),
                message,
                hook_phase.as_str(),
            ] {
                self.str(s);
            }
        }
    }

    fn resource(&mut self, r: &ResourceStatus) {
        let ResourceStatus {
            group,
            kind,
            namespace,
            name,
            status,
            requires_pruning,
            health,
            health_message,
        } = r;
        for s in [group, kind, namespace, name, status.as_str()] {
            self.str(s);
        }
        self.tag(u8::from(*requires_pruning));
        self.opt(health.as_ref().map(HealthStatus::as_str));
        self.opt(health_message.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::content_hash;
    use crate::argocd::parse_body;

    fn snap(body: &str) -> crate::argocd::Snapshot {
        parse_body(body.as_bytes(), 64).expect("valid")
    }

    #[test]
    fn the_time_link_and_source_do_not_count_and_everything_else_does() {
        let a = snap(r#"{"timestamp":"2025-01-01T00:00:00Z","app":{"metadata":{"name":"a"}}}"#);
        let mut b = snap(
            r#"{"timestamp":"2025-01-02T00:00:00Z","context":{"argocdUrl":"https://cd"},"app":{"metadata":{"name":"a"}}}"#,
        );
        b.source = crate::argocd::Source::Api;
        assert_eq!(content_hash(&a), content_hash(&b));
        let mut c = a.clone();
        c.labels.insert("team".into(), "x".into());
        assert_ne!(content_hash(&a), content_hash(&c));
        let mut d = a.clone();
        d.revisions = vec!["ab".into(), "c".into()];
        let mut e = a.clone();
        e.revisions = vec!["a".into(), "bc".into()];
        assert_ne!(content_hash(&d), content_hash(&e), "strings are delimited");
        let mut f = a.clone();
        f.sync_policy.prune = true;
        assert_ne!(content_hash(&a), content_hash(&f));
    }

    /// An Application with every kind of resource status: known, unknown, absent, and the template's `<nil>`.
    const RESOURCES_BODY: &str = r#"{"app":{"metadata":{"name":"pay","namespace":"argocd"},
        "status":{"sync":{"status":"OutOfSync"},"health":{"status":"Degraded","message":"1 of 2 down"},
        "resources":[
          {"kind":"Deployment","name":"api","namespace":"pay","status":"OutOfSync","health":{"status":"Degraded","message":"crash loop"}},
          {"kind":"CronJob","name":"old","namespace":"pay","status":"OutOfSync","requiresPruning":true},
          {"kind":"Widget","group":"x.io","name":"w","namespace":"pay","status":"Drifting","health":{"status":"Flapping"}},
          {"kind":"Secret","name":"s","namespace":"pay","health":{"status":"<nil>"}},
          {"kind":"Service","name":"ok","namespace":"pay","status":"Synced","health":{"status":"Healthy"}},
          {"kind":"Job","name":"j","namespace":"pay","status":"Synced","health":{"status":"Missing"}}],
        "operationState":{"phase":"Failed","message":"one or more objects failed to apply",
          "startedAt":"2025-01-01T00:00:00Z","finishedAt":"2025-01-01T00:01:00Z",
          "syncResult":{"revision":"abc","resources":[
            {"kind":"Job","name":"migrate","namespace":"pay","status":"SyncFailed","hookPhase":"Failed","message":"backoff"},
            {"kind":"ConfigMap","name":"c","namespace":"pay","status":"Pruned","message":"pruned"},
            {"kind":"CronJob","name":"old","namespace":"pay","status":"PruneSkipped","message":"ignored (requires pruning)"},
            {"kind":"Widget","name":"w","namespace":"pay","status":"<nil>","hookPhase":"Waiting"},
            {"kind":"Service","name":"ok","namespace":"pay"}]}}}}}"#;

    /// What the version before the typed resource statuses computed for [`RESOURCES_BODY`], read by `parse_body`
    /// (`<nil>` cleared) and by the tolerant reader alone (`<nil>` kept as sent): hash and stored JSON.
    const TYPED_HASH: &str = "5157d8f1ed7983497fb7164e4c27aab5";
    const TYPED_JSON: &str = r#"{"app":{"instance":"default","namespace":"argocd","name":"pay"},"uid":null,"project":"default","destination":{"server":null,"name":null,"namespace":null},"labels":{},"annotations":{},"sync_status":"OutOfSync","revisions":[],"health_status":"Degraded","health_message":"1 of 2 down","operation":{"phase":"Failed","message":"one or more objects failed to apply","started_at":"2025-01-01T00:00:00Z","finished_at":"2025-01-01T00:01:00Z","initiator":{"automated":false,"username":null},"revision":"abc","revisions":[],"retry_count":0,"retry_limit":null,"resources":[{"group":"","kind":"Job","namespace":"pay","name":"migrate","status":"SyncFailed","message":"backoff","hook_phase":"Failed"},{"group":"","kind":"ConfigMap","namespace":"pay","name":"c","status":"Pruned","message":"pruned","hook_phase":""},{"group":"","kind":"CronJob","namespace":"pay","name":"old","status":"PruneSkipped","message":"ignored (requires pruning)","hook_phase":""},{"group":"","kind":"Widget","namespace":"pay","name":"w","status":"","message":"","hook_phase":"Waiting"},{"group":"","kind":"Service","namespace":"pay","name":"ok","status":"","message":"","hook_phase":""}]},"resources":[{"group":"","kind":"Deployment","namespace":"pay","name":"api","status":"OutOfSync","requires_pruning":false,"health":"Degraded","health_message":"crash loop"},{"group":"","kind":"CronJob","namespace":"pay","name":"old","status":"OutOfSync","requires_pruning":true,"health":null,"health_message":null},{"group":"x.io","kind":"Widget","namespace":"pay","name":"w","status":"Drifting","requires_pruning":false,"health":"Flapping","health_message":null},{"group":"","kind":"Secret","namespace":"pay","name":"s","status":"","requires_pruning":false,"health":null,"health_message":null},{"group":"","kind":"Job","namespace":"pay","name":"j","status":"Synced","requires_pruning":false,"health":"Missing","health_message":null}],"conditions":[],"sync_policy":{"automated":false,"prune":false,"self_heal":false},"sources":[],"previous_revision":null,"deleting":false,"health_changed_at":null,"source":"webhook","argocd_url":null,"observed_at":"2025-01-01T00:01:00Z"}"#;
    const TOLERANT_HASH: &str = "a278438755e654ebd128d516a0989718";
    const TOLERANT_JSON: &str = r#"{"app":{"instance":"default","namespace":"argocd","name":"pay"},"uid":null,"project":"default","destination":{"server":null,"name":null,"namespace":null},"labels":{},"annotations":{},"sync_status":"OutOfSync","revisions":[],"health_status":"Degraded","health_message":"1 of 2 down","operation":{"phase":"Failed","message":"one or more objects failed to apply","started_at":"2025-01-01T00:00:00Z","finished_at":"2025-01-01T00:01:00Z","initiator":{"automated":false,"username":null},"revision":"abc","revisions":[],"retry_count":0,"retry_limit":null,"resources":[{"group":"","kind":"Job","namespace":"pay","name":"migrate","status":"SyncFailed","message":"backoff","hook_phase":"Failed"},{"group":"","kind":"ConfigMap","namespace":"pay","name":"c","status":"Pruned","message":"pruned","hook_phase":""},{"group":"","kind":"CronJob","namespace":"pay","name":"old","status":"PruneSkipped","message":"ignored (requires pruning)","hook_phase":""},{"group":"","kind":"Widget","namespace":"pay","name":"w","status":"<nil>","message":"","hook_phase":"Waiting"},{"group":"","kind":"Service","namespace":"pay","name":"ok","status":"","message":"","hook_phase":""}]},"resources":[{"group":"","kind":"Deployment","namespace":"pay","name":"api","status":"OutOfSync","requires_pruning":false,"health":"Degraded","health_message":"crash loop"},{"group":"","kind":"CronJob","namespace":"pay","name":"old","status":"OutOfSync","requires_pruning":true,"health":null,"health_message":null},{"group":"x.io","kind":"Widget","namespace":"pay","name":"w","status":"Drifting","requires_pruning":false,"health":"Flapping","health_message":null},{"group":"","kind":"Secret","namespace":"pay","name":"s","status":"","requires_pruning":false,"health":"<nil>","health_message":null},{"group":"","kind":"Job","namespace":"pay","name":"j","status":"Synced","requires_pruning":false,"health":"Missing","health_message":null}],"conditions":[],"sync_policy":{"automated":false,"prune":false,"self_heal":false},"sources":[],"previous_revision":null,"deleting":false,"health_changed_at":null,"source":"webhook","argocd_url":null,"observed_at":"2025-01-01T00:01:00Z"}"#;

    #[test]
    fn resource_statuses_are_hashed_and_stored_as_argo_cd_wrote_them() {
        let typed = snap(RESOURCES_BODY);
        let value: serde_json::Value = serde_json::from_str(RESOURCES_BODY).expect("json");
        let tolerant = crate::argocd::from_value(&value).expect("valid");
        for (s, hash, json) in [
            (&typed, TYPED_HASH, TYPED_JSON),
            (&tolerant, TOLERANT_HASH, TOLERANT_JSON),
        ] {
            assert_eq!(content_hash(s), hash, "the stored hash stays");
            assert_eq!(serde_json::to_string(s).expect("json"), json, "the stored JSON stays");
            let back: crate::argocd::Snapshot = serde_json::from_str(json).expect("stored JSON reads back");
            assert_eq!(&back, s, "and reads back as the same snapshot");
        }
    }
}
