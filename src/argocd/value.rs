//! The tolerant reader: a parsed JSON [`Value`] → [`Snapshot`], checking every field Herald reads and naming the
//! field in each error. Used for Applications read from the Argo CD API, and for webhook bodies the typed reader
//! (`typed`) does not take, where its errors are the answer.

use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::BTreeMap;

use super::{
    AppId, Condition, Destination, HealthStatus, Initiator, Operation, PayloadError, ResourceStatus, ResultResource,
    Snapshot, Source, SourceRef, SyncPolicy, SyncStatus, parse_time, validate_name, validate_namespace,
};

/// Adds `item` while `list` holds at most `max` (one past the cap, so the caps say there were more): every item of a
/// list is checked, but a hostile body of a million is not kept a million times.
fn keep<T>(list: &mut Vec<T>, item: T, max: usize) {
    if list.len() <= max {
        list.push(item);
    }
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Builds a snapshot from an already-parsed JSON value (also used for Applications read from the Argo CD API).
///
/// The parts are read in this order, which is the order fields are checked in: when several are wrong, the error
/// names the first.
pub fn from_value(value: &Value) -> Result<Snapshot, PayloadError> {
    let (app, prefix, envelope) = locate(value)?;
    let r = Reader { prefix };
    r.check_kind(app)?;
    let meta = r.metadata(app)?;
    let spec = r.spec(app)?;
    let sync = r.sync(app)?;
    let health = r.health(app)?;
    r.refuse_no_value([
        ("status.sync.status", &sync.status),
        ("status.health.status", &health.status),
    ])?;
    let operation = r.operation_state(app)?;
    let resources = r.resources(app)?;
    let conditions = r.conditions(app)?;
    let previous_revision = r.previous_revision(app)?;
    let images = r.images(app)?;
    // Read after the status lists rather than with the health, so that the first wrong field named stays the same.
    let health_changed_at = r.health_changed_at(app)?;
    let observed_at = r.observed_at(app, envelope, operation.as_ref(), health_changed_at)?;
    Ok(Snapshot {
        app: meta.id,
        uid: meta.uid,
        created_at: meta.created_at,
        project: spec.project,
        destination: spec.destination,
        labels: meta.labels,
        annotations: meta.annotations,
        sync_status: sync.status.into(),
        revisions: sync.revisions,
        health_status: health.status.into(),
        health_message: health.message,
        operation,
        resources,
        conditions,
        sync_policy: spec.sync_policy,
        sources: spec.sources,
        previous_revision,
        images,
        deleting: meta.deleting,
        health_changed_at,
        source: Source::Webhook,
        listed: false,
        argocd_url: argocd_url(envelope),
        project_annotations: Default::default(),
        observed_at,
    })
}

/// The envelope's fields (`timestamp`, `context`, `app`), when the body is one.
type Envelope = serde_json::Map<String, Value>;

/// Where the Application is (the envelope's `app`, or the whole body), the prefix of its error paths, and the envelope.
fn locate(value: &Value) -> Result<(&Value, &'static str, Option<&Envelope>), PayloadError> {
    let Value::Object(root) = value else {
        return Err(PayloadError::NotAnObject(type_name(value)));
    };
    match root.get("app") {
        Some(app @ Value::Object(_)) => Ok((app, "app.", Some(root))),
        Some(Value::String(s)) if s.contains("<no value>") => Err(PayloadError::NoValue { path: "app".into() }),
        Some(other) => Err(PayloadError::WrongType {
            path: "app".into(),
            expected: "an object (the Application: {{toJson .app}})",
            found: type_name(other),
        }),
        None if root.contains_key("metadata") || root.contains_key("status") || root.contains_key("spec") => {
            Ok((value, "", None))
        }
        None => {
            let keys: Vec<&str> = root.keys().map(|k| k.as_str()).take(8).collect();
            let found = if keys.is_empty() {
                String::new()
            } else {
                format!(" (found keys: {})", keys.join(", "))
            };
            Err(PayloadError::NoApplication(found))
        }
    }
}

/// The link base from the envelope's `context.argocdUrl`, when it is a safe link (anything else is dropped).
fn argocd_url(envelope: Option<&Envelope>) -> Option<String> {
    let Some(Value::Object(ctx)) = envelope?.get("context") else {
        return None;
    };
    ctx.get("argocdUrl").and_then(Value::as_str).and_then(super::link_base)
}

/// What Herald keeps of `metadata`.
struct Metadata {
    id: AppId,
    uid: Option<String>,
    created_at: Option<DateTime<Utc>>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    deleting: bool,
}

/// What Herald keeps of `spec`.
struct Spec {
    project: String,
    destination: Destination,
    sync_policy: SyncPolicy,
    sources: Vec<SourceRef>,
}

/// What Herald keeps of `status.sync`.
struct SyncPart {
    status: String,
    revisions: Vec<String>,
}

/// What Herald keeps of `status.health`, but its `lastTransitionTime`: read later (see [`Reader::health_changed_at`]).
struct HealthPart {
    status: String,
    message: Option<String>,
}

/// The parts of an Application, one method each, in the order [`from_value`] reads them.
impl Reader {
    /// Refuses another kind of object (a `kind` that is not `Application`); no `kind` is fine.
    fn check_kind(&self, app: &Value) -> Result<(), PayloadError> {
        match self.opt_str(app, &["kind"])? {
            Some(kind) if kind != "Application" => Err(PayloadError::Invalid {
                path: format!("{}kind", self.prefix),
                message: format!("{kind:?} is not an Argo CD Application"),
            }),
            _ => Ok(()),
        }
    }

    /// `metadata`: the name and namespace (checked as Kubernetes names), uid, labels, annotations, deletion.
    fn metadata(&self, app: &Value) -> Result<Metadata, PayloadError> {
        let name = self.req_str(
            app,
            &["metadata", "name"],
            "the Application has no name; send the whole Application",
        )?;
        let namespace = self
            .opt_str(app, &["metadata", "namespace"])?
            .unwrap_or_else(|| "argocd".into());
        validate_name(&format!("{}metadata.name", self.prefix), &name)?;
        validate_namespace(&format!("{}metadata.namespace", self.prefix), &namespace)?;
        let uid = self.opt_str(app, &["metadata", "uid"])?;
        // One that is not RFC 3339 is left out, as the health's time is.
        let created_at = (self.opt_str(app, &["metadata", "creationTimestamp"])?)
            .as_deref()
            .and_then(parse_time);
        let labels = self.str_map(app, &["metadata", "labels"])?;
        let mut annotations = self.str_map(app, &["metadata", "annotations"])?;
        // Large and of no use to Herald: kubectl's copy of the manifest and the notifications controller's bookkeeping.
        annotations.retain(|k, v| super::keep_annotation(k, v));
        super::cap_annotations(&mut annotations);
        let deleting = self.opt_str(app, &["metadata", "deletionTimestamp"])?.is_some();
        Ok(Metadata {
            id: AppId::new(namespace, name),
            uid,
            created_at,
            labels,
            annotations,
            deleting,
        })
    }

    /// `spec`: the project, the destination, the sync policy and the sources.
    fn spec(&self, app: &Value) -> Result<Spec, PayloadError> {
        let project = self
            .opt_str(app, &["spec", "project"])?
            .unwrap_or_else(|| "default".into());
        let destination = Destination {
            server: self.opt_str(app, &["spec", "destination", "server"])?,
            name: self.opt_str(app, &["spec", "destination", "name"])?,
            namespace: self.opt_str(app, &["spec", "destination", "namespace"])?,
        };
        Ok(Spec {
            project,
            destination,
            sync_policy: self.sync_policy(app)?,
            sources: self.sources(app)?,
        })
    }

    /// `spec.syncPolicy.automated`: automated when it is an object, with its `prune` and `selfHeal`.
    fn sync_policy(&self, app: &Value) -> Result<SyncPolicy, PayloadError> {
        let automated = self.get(app, &["spec", "syncPolicy", "automated"]);
        Ok(SyncPolicy {
            automated: matches!(automated, Some(Value::Object(_))),
            prune: self
                .opt_bool(app, &["spec", "syncPolicy", "automated", "prune"])?
                .unwrap_or(false),
            self_heal: self
                .opt_bool(app, &["spec", "syncPolicy", "automated", "selfHeal"])?
                .unwrap_or(false),
        })
    }

    /// `spec.sources` when it lists any, else `spec.source`; items that are not objects are skipped.
    fn sources(&self, app: &Value) -> Result<Vec<SourceRef>, PayloadError> {
        let mut sources = Vec::new();
        let source_values: Vec<(String, &Value)> = match self.get(app, &["spec", "sources"]) {
            Some(Value::Array(list)) if !list.is_empty() => list
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("spec.sources[{i}]"), v))
                .collect(),
            _ => self
                .get(app, &["spec", "source"])
                .map(|v| vec![("spec.source".to_string(), v)])
                .unwrap_or_default(),
        };
        for (p, v) in source_values {
            if !v.is_object() {
                continue;
            }
            sources.push(SourceRef {
                repo_url: self.opt_str_at(v, &p, "repoURL")?.unwrap_or_default(),
                path: self.opt_str_at(v, &p, "path")?,
                chart: self.opt_str_at(v, &p, "chart")?,
                target_revision: self.opt_str_at(v, &p, "targetRevision")?,
            });
        }
        Ok(sources)
    }

    /// `status.sync`: the status, and the revision then the revisions (each once); revisions not a list are ignored.
    fn sync(&self, app: &Value) -> Result<SyncPart, PayloadError> {
        let status = self
            .opt_str(app, &["status", "sync", "status"])?
            .unwrap_or_else(|| "Unknown".into());
        let mut revisions = Vec::new();
        if let Some(rev) = self.opt_str(app, &["status", "sync", "revision"])? {
            revisions.push(rev);
        }
        if let Some(Value::Array(revs)) = self.get(app, &["status", "sync", "revisions"]) {
            for (i, v) in revs.iter().enumerate() {
                let s = entry_str(v, || format!("{}status.sync.revisions[{i}]", self.prefix))?;
                // Past the cap one more (so the caps say there were more) the rest are checked, not kept: a body of a
                // million revisions is not compared a million times a million.
                if revisions.len() <= super::caps::MAX_SOURCES && !revisions.iter().any(|r| r == s) {
                    revisions.push(s.to_string());
                }
            }
        }
        Ok(SyncPart { status, revisions })
    }

    /// `status.health`: the status and message.
    fn health(&self, app: &Value) -> Result<HealthPart, PayloadError> {
        let status = self
            .opt_str(app, &["status", "health", "status"])?
            .unwrap_or_else(|| "Unknown".into());
        let message = self.opt_str(app, &["status", "health", "message"])?;
        Ok(HealthPart { status, message })
    }

    /// Refuses a status the template rendered as `<no value>` (checked once both the sync and health are read).
    fn refuse_no_value(&self, fields: [(&str, &str); 2]) -> Result<(), PayloadError> {
        for (path, v) in fields {
            if v.contains("<no value>") {
                return Err(PayloadError::NoValue {
                    path: format!("{}{path}", self.prefix),
                });
            }
        }
        Ok(())
    }

    /// `status.operationState`, when there is one (null is none).
    fn operation_state(&self, app: &Value) -> Result<Option<Operation>, PayloadError> {
        match self.get(app, &["status", "operationState"]) {
            Some(Value::Object(_)) => Ok(Some(self.operation(app)?)),
            None | Some(Value::Null) => Ok(None),
            Some(other) => Err(PayloadError::WrongType {
                path: format!("{}status.operationState", self.prefix),
                expected: "an object",
                found: type_name(other),
            }),
        }
    }

    /// `status.resources`: those out of sync, to be pruned or unhealthy.
    fn resources(&self, app: &Value) -> Result<Vec<ResourceStatus>, PayloadError> {
        let mut resources = Vec::new();
        for (i, res) in self.array(app, &["status", "resources"])?.iter().enumerate() {
            let p = format!("status.resources[{i}]");
            let requires_pruning = self.opt_bool_at(res, &p, "requiresPruning")?.unwrap_or(false);
            let status = SyncStatus::from(self.opt_str_at(res, &p, "status")?.unwrap_or_default());
            let (health, health_message) = match res.get("health") {
                Some(Value::Object(h)) => (
                    h.get("status").and_then(Value::as_str).map(HealthStatus::from),
                    h.get("message").and_then(Value::as_str).map(str::to_string),
                ),
                _ => (None, None),
            };
            // Kept: what differs from Git, what waits to be pruned, what is unhealthy (a Degraded message names it).
            let healthy = matches!(health, None | Some(HealthStatus::Healthy));
            if status == SyncStatus::Synced && !requires_pruning && healthy {
                continue;
            }
            keep(
                &mut resources,
                ResourceStatus {
                    group: self.opt_str_at(res, &p, "group")?.unwrap_or_default(),
                    kind: self.opt_str_at(res, &p, "kind")?.unwrap_or_default(),
                    namespace: self.opt_str_at(res, &p, "namespace")?.unwrap_or_default(),
                    name: self.opt_str_at(res, &p, "name")?.unwrap_or_default(),
                    status,
                    requires_pruning,
                    health,
                    health_message,
                },
                super::caps::MAX_RESOURCES,
            );
        }
        Ok(resources)
    }

    /// `status.conditions`: each one's type and message.
    fn conditions(&self, app: &Value) -> Result<Vec<Condition>, PayloadError> {
        let mut conditions = Vec::new();
        for (i, c) in self.array(app, &["status", "conditions"])?.iter().enumerate() {
            let p = format!("status.conditions[{i}]");
            keep(
                &mut conditions,
                Condition {
                    r#type: self.opt_str_at(c, &p, "type")?.unwrap_or_default(),
                    message: self.opt_str_at(c, &p, "message")?.unwrap_or_default(),
                },
                super::caps::MAX_CONDITIONS,
            );
        }
        Ok(conditions)
    }

    /// `status.summary.images`: each non-empty one once; past the cap one more is kept (the caps say there were
    /// more), the rest checked only.
    fn images(&self, app: &Value) -> Result<Vec<String>, PayloadError> {
        let mut images: Vec<String> = Vec::new();
        for (i, v) in self.array(app, &["status", "summary", "images"])?.iter().enumerate() {
            let s = entry_str(v, || format!("{}status.summary.images[{i}]", self.prefix))?;
            if !s.is_empty() && images.len() <= super::caps::MAX_IMAGES && !images.iter().any(|k| k == s) {
                images.push(s.to_string());
            }
        }
        Ok(images)
    }

    /// The revision deployed before the current one, from `status.history`.
    fn previous_revision(&self, app: &Value) -> Result<Option<String>, PayloadError> {
        // status.history is oldest first; the entry before the last is what was deployed before.
        let history = self.array(app, &["status", "history"])?;
        Ok(if history.len() >= 2 {
            history[history.len() - 2]
                .get("revision")
                .and_then(Value::as_str)
                .map(str::to_string)
        } else {
            None
        })
    }

    /// `status.health.lastTransitionTime`; one that is not RFC 3339 is left out.
    fn health_changed_at(&self, app: &Value) -> Result<Option<DateTime<Utc>>, PayloadError> {
        Ok(self
            .opt_str(app, &["status", "health", "lastTransitionTime"])?
            .as_deref()
            .and_then(parse_time))
    }

    /// When Argo CD saw this state: the envelope's `timestamp`, else the newest time the Application carries.
    fn observed_at(
        &self,
        app: &Value,
        envelope: Option<&Envelope>,
        operation: Option<&Operation>,
        health_changed_at: Option<DateTime<Utc>>,
    ) -> Result<Option<DateTime<Utc>>, PayloadError> {
        // A timestamp that is not RFC 3339 is ignored rather than refused: the state is still good.
        let stamped = envelope
            .and_then(|env| env.get("timestamp"))
            .and_then(Value::as_str)
            .and_then(parse_time);
        if stamped.is_some() {
            return Ok(stamped);
        }
        let reconciled = self
            .opt_str(app, &["status", "reconciledAt"])?
            .as_deref()
            .and_then(parse_time);
        let (finished, started) = operation.map_or((None, None), |o| (o.finished_at, o.started_at));
        let times = [reconciled, finished, started, health_changed_at];
        Ok(times.into_iter().flatten().max())
    }
}

/// An entry of a map or an item of a list that must be a string; `at` names it (`metadata.labels.team`).
fn entry_str(v: &Value, at: impl FnOnce() -> String) -> Result<&str, PayloadError> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(PayloadError::WrongType {
            path: at(),
            expected: "a string",
            found: type_name(other),
        }),
    }
}

/// Path-aware accessors that turn wrong types into [`PayloadError::WrongType`] naming the field.
struct Reader {
    prefix: &'static str,
}

impl Reader {
    fn get<'a>(&self, v: &'a Value, path: &[&str]) -> Option<&'a Value> {
        let mut cur = v;
        for p in path {
            cur = cur.as_object()?.get(*p)?;
        }
        Some(cur)
    }

    fn path(&self, path: &[&str]) -> String {
        format!("{}{}", self.prefix, path.join("."))
    }

    fn opt_str(&self, v: &Value, path: &[&str]) -> Result<Option<String>, PayloadError> {
        // Each intermediate must be an object when present.
        let mut cur = v;
        for (i, p) in path.iter().enumerate() {
            match cur {
                Value::Object(m) => match m.get(*p) {
                    Some(next) => cur = next,
                    None => return Ok(None),
                },
                Value::Null => return Ok(None),
                other => {
                    return Err(PayloadError::WrongType {
                        path: self.path(&path[..i]),
                        expected: "an object",
                        found: type_name(other),
                    });
                }
            }
        }
        match cur {
            Value::String(s) => Ok(Some(s.clone())),
            Value::Null => Ok(None),
            other => Err(PayloadError::WrongType {
                path: self.path(path),
                expected: "a string",
                found: type_name(other),
            }),
        }
    }

    fn req_str(&self, v: &Value, path: &[&str], hint: &str) -> Result<String, PayloadError> {
        match self.opt_str(v, path)? {
            Some(s) if !s.is_empty() => Ok(s),
            _ => Err(PayloadError::Missing {
                path: self.path(path),
                hint: hint.into(),
            }),
        }
    }

    fn opt_bool(&self, v: &Value, path: &[&str]) -> Result<Option<bool>, PayloadError> {
        match self.get(v, path) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(PayloadError::WrongType {
                path: self.path(path),
                expected: "a boolean",
                found: type_name(other),
            }),
        }
    }

    fn str_map(&self, v: &Value, path: &[&str]) -> Result<BTreeMap<String, String>, PayloadError> {
        match self.get(v, path) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => {
                let mut out = BTreeMap::new();
                for (k, val) in m {
                    let s = entry_str(val, || format!("{}.{k}", self.path(path)))?;
                    out.insert(k.clone(), s.to_string());
                }
                Ok(out)
            }
            Some(other) => Err(PayloadError::WrongType {
                path: self.path(path),
                expected: "an object of strings",
                found: type_name(other),
            }),
        }
    }

    fn array<'a>(&self, v: &'a Value, path: &[&str]) -> Result<&'a [Value], PayloadError> {
        match self.get(v, path) {
            None | Some(Value::Null) => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(other) => Err(PayloadError::WrongType {
                path: self.path(path),
                expected: "an array",
                found: type_name(other),
            }),
        }
    }

    /// A list of strings (absent: empty); empty strings are left out.
    fn strings(&self, v: &Value, path: &[&str]) -> Result<Vec<String>, PayloadError> {
        let mut out = Vec::new();
        for (i, item) in self.array(v, path)?.iter().enumerate() {
            let s = entry_str(item, || format!("{}[{i}]", self.path(path)))?;
            if !s.is_empty() {
                out.push(s.to_string());
            }
        }
        Ok(out)
    }

    fn opt_str_at(&self, v: &Value, at: &str, key: &str) -> Result<Option<String>, PayloadError> {
        match v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(PayloadError::WrongType {
                path: format!("{}{at}.{key}", self.prefix),
                expected: "a string",
                found: type_name(other),
            }),
        }
    }

    fn opt_bool_at(&self, v: &Value, at: &str, key: &str) -> Result<Option<bool>, PayloadError> {
        match v.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(PayloadError::WrongType {
                path: format!("{}{at}.{key}", self.prefix),
                expected: "a boolean",
                found: type_name(other),
            }),
        }
    }

    fn time(&self, v: &Value, path: &[&str]) -> Result<Option<DateTime<Utc>>, PayloadError> {
        match self.opt_str(v, path)? {
            None => Ok(None),
            Some(s) => parse_time(&s).map(Some).ok_or_else(|| PayloadError::Invalid {
                path: self.path(path),
                message: format!("{s:?} is not an RFC 3339 time"),
            }),
        }
    }

    fn operation(&self, app: &Value) -> Result<Operation, PayloadError> {
        let base = ["status", "operationState"];
        let at = |k: &[&'static str]| -> Vec<&'static str> { base.iter().chain(k.iter()).copied().collect() };
        let mut resources = Vec::new();
        for (i, res) in self.array(app, &at(&["syncResult", "resources"]))?.iter().enumerate() {
            let p = format!("status.operationState.syncResult.resources[{i}]");
            keep(
                &mut resources,
                ResultResource {
                    group: self.opt_str_at(res, &p, "group")?.unwrap_or_default(),
                    kind: self.opt_str_at(res, &p, "kind")?.unwrap_or_default(),
                    namespace: self.opt_str_at(res, &p, "namespace")?.unwrap_or_default(),
                    name: self.opt_str_at(res, &p, "name")?.unwrap_or_default(),
                    status: self.opt_str_at(res, &p, "status")?.unwrap_or_default().into(),
                    message: self.opt_str_at(res, &p, "message")?.unwrap_or_default(),
                    hook_phase: self.opt_str_at(res, &p, "hookPhase")?.unwrap_or_default().into(),
                },
                super::caps::MAX_RESOURCES,
            );
        }
        let retry_count = match self.get(app, &at(&["retryCount"])) {
            Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
            _ => 0,
        };
        let retry_limit = match self.get(app, &at(&["operation", "retry", "limit"])) {
            Some(Value::Number(n)) => n.as_i64(),
            _ => None,
        };
        Ok(Operation {
            phase: self.opt_str(app, &at(&["phase"]))?.unwrap_or_default().into(),
            message: self.opt_str(app, &at(&["message"]))?.unwrap_or_default(),
            started_at: self.time(app, &at(&["startedAt"]))?,
            finished_at: self.time(app, &at(&["finishedAt"]))?,
            initiator: Initiator {
                automated: self
                    .opt_bool(app, &at(&["operation", "initiatedBy", "automated"]))?
                    .unwrap_or(false),
                username: self.opt_str(app, &at(&["operation", "initiatedBy", "username"]))?,
            },
            revision: self
                .opt_str(app, &at(&["syncResult", "revision"]))?
                .filter(|r| !r.is_empty())
                .or(self
                    .opt_str(app, &at(&["operation", "sync", "revision"]))?
                    .filter(|r| !r.is_empty())),
            revisions: self.strings(app, &at(&["syncResult", "revisions"]))?,
            retry_count,
            retry_limit,
            resources,
        })
    }
}
