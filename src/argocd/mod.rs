//! What Argo CD sends: tolerant reading of the many body shapes (the `{timestamp, context, app}` envelope, a bare
//! Application, with or without Content-Type) into one strict [`Snapshot`]. Everything Herald needs is checked here,
//! once, with errors that say what is wrong and how to fix the notification template.

pub mod api;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// An Application's identity: its Argo CD namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AppId {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for AppId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Destination {
    pub server: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
}

impl Destination {
    /// The cluster as people name it: the destination name, else the server URL.
    pub fn cluster(&self) -> String {
        self.name.clone().or_else(|| self.server.clone()).unwrap_or_default()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncPolicy {
    pub automated: bool,
    pub prune: bool,
    pub self_heal: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Initiator {
    pub automated: bool,
    pub username: Option<String>,
}

impl Initiator {
    pub fn describe(&self) -> String {
        match (&self.username, self.automated) {
            (Some(u), _) => format!("user {u}"),
            (None, true) => "automated sync".into(),
            (None, false) => "unknown".into(),
        }
    }
}

/// A resource as reported by the last sync operation (`operationState.syncResult.resources[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultResource {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub status: String,
    pub message: String,
    pub hook_phase: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    pub phase: String,
    pub message: String,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub initiator: Initiator,
    /// The synced revision (single source); empty strings are left out.
    pub revision: Option<String>,
    /// The synced revisions of a multi-source Application (`syncResult.revisions`), one per source in order.
    #[serde(default)]
    pub revisions: Vec<String>,
    pub retry_count: i64,
    pub retry_limit: Option<i64>,
    pub resources: Vec<ResultResource>,
}

/// A resource from `status.resources[]` that is not in sync or requires pruning (synced ones are not kept).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceStatus {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub status: String,
    pub requires_pruning: bool,
    pub health: Option<String>,
    /// `health.message`, where Argo CD keeps per-resource health in the Application (before 3.0, or opted in).
    #[serde(default)]
    pub health_message: Option<String>,
}

/// Where an Application's manifests come from (`spec.source`, or each of `spec.sources`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRef {
    pub repo_url: String,
    pub path: Option<String>,
    pub chart: Option<String>,
    pub target_revision: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    pub r#type: String,
    pub message: String,
}

/// One Application as Herald understands it at one moment. Built only by [`parse_body`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub app: AppId,
    pub uid: Option<String>,
    pub project: String,
    pub destination: Destination,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub sync_status: String,
    pub revisions: Vec<String>,
    pub health_status: String,
    pub health_message: Option<String>,
    pub operation: Option<Operation>,
    pub resources: Vec<ResourceStatus>,
    pub conditions: Vec<Condition>,
    pub sync_policy: SyncPolicy,
    /// `spec.source`, or `spec.sources` for a multi-source Application, in order.
    #[serde(default)]
    pub sources: Vec<SourceRef>,
    /// The revision deployed before the current one (from `status.history`), for recovery steps.
    pub previous_revision: Option<String>,
    /// `metadata.deletionTimestamp` is set: Argo CD is deleting the Application.
    pub deleting: bool,
    /// `status.health.lastTransitionTime` (Argo CD 2.14+): Argo CD's own time of the last health change.
    #[serde(default)]
    pub health_changed_at: Option<DateTime<Utc>>,
    /// Who told Herald: a webhook body, or the Argo CD API (resync, watch, confirmation).
    #[serde(default)]
    pub source: Source,
    /// Link base from `context.argocdUrl`.
    pub argocd_url: Option<String>,
    /// When Argo CD saw this state: envelope `timestamp`, else the newest of `reconciledAt`,
    /// `operationState.finishedAt/startedAt`, `health.lastTransitionTime`. `None`: the body carries no time.
    pub observed_at: Option<DateTime<Utc>>,
}

/// Where a snapshot came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A request from Argo CD Notifications.
    #[default]
    Webhook,
    /// Read from the Argo CD API.
    Api,
}

/// Why a body was refused. Every variant is the sender's fault (4xx) and says how to fix it.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PayloadError {
    #[error("the body is empty: the Argo CD template must send a JSON body, e.g. {{\"app\": {{{{toJson .app}}}}}}")]
    Empty,
    #[error(
        "the body is plain text, not JSON ({preview:?}). Argo CD sends the template's plain `message` when the \
         template has no `webhook.<service>` key equal to the service name: name the key `webhook.herald` for \
         `service.webhook.herald` and give it `method: POST` and a JSON `body` (see deploy/argocd/)"
    )]
    PlainText { preview: String },
    #[error("invalid JSON at line {line}, column {column}: {message}{hint}")]
    InvalidJson {
        line: usize,
        column: usize,
        message: String,
        hint: String,
    },
    #[error("JSON nested deeper than {0} levels is refused")]
    TooDeep(usize),
    #[error("the body must be a JSON object (the envelope or an Application), not {0}")]
    NotAnObject(&'static str),
    #[error(
        "no Application in the body: expected an envelope with `app` (template body `{{\"app\": {{{{toJson .app}}}}}}`) \
         or an Application object with `metadata.name`{0}"
    )]
    NoApplication(String),
    #[error("{path} is missing: {hint}")]
    Missing { path: String, hint: String },
    #[error("{path} must be {expected}, not {found}")]
    WrongType {
        path: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error(
        "{path} is \"<no value>\": the template referenced a key that does not exist (Go templates render a missing \
         key as <no value>); use {{{{toJson .app}}}} for the whole Application"
    )]
    NoValue { path: String },
    #[error("{path} is invalid: {message}")]
    Invalid { path: String, message: String },
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Refuses nesting beyond `max` before serde sees it (a cheap scan that skips strings).
fn check_depth(body: &[u8], max: usize) -> Result<(), PayloadError> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in body {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return Err(PayloadError::TooDeep(max));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Parses one request body into a [`Snapshot`]. `max_depth` bounds JSON nesting.
pub fn parse_body(body: &[u8], max_depth: usize) -> Result<Snapshot, PayloadError> {
    let text_start = body.iter().position(|b| !b.is_ascii_whitespace());
    let Some(start) = text_start else {
        return Err(PayloadError::Empty);
    };
    if body[start] != b'{' && body[start] != b'[' {
        let preview: String = String::from_utf8_lossy(&body[start..body.len().min(start + 80)]).into_owned();
        return Err(PayloadError::PlainText { preview });
    }
    check_depth(body, max_depth)?;
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        let text = String::from_utf8_lossy(body);
        let hint = if text.contains("<no value>") {
            ". The body contains <no value>: the template referenced a key that does not exist; use {{toJson ...}} \
             rather than hand-written JSON"
                .to_string()
        } else if e.is_syntax() || e.is_eof() {
            ". If the template writes JSON by hand, a quote inside a message breaks it: use {{toJson .app}}".to_string()
        } else {
            String::new()
        };
        PayloadError::InvalidJson {
            line: e.line(),
            column: e.column(),
            message: e.to_string().split(" at line").next().unwrap_or_default().to_string(),
            hint,
        }
    })?;
    from_value(&value)
}

/// Builds a snapshot from an already-parsed JSON value (also used for Applications read from the Argo CD API).
pub fn from_value(value: &Value) -> Result<Snapshot, PayloadError> {
    let Value::Object(root) = value else {
        return Err(PayloadError::NotAnObject(type_name(value)));
    };
    let (app, prefix, envelope) = match root.get("app") {
        Some(app @ Value::Object(_)) => (app, "app.", Some(root)),
        Some(Value::String(s)) if s.contains("<no value>") => {
            return Err(PayloadError::NoValue { path: "app".into() });
        }
        Some(other) => {
            return Err(PayloadError::WrongType {
                path: "app".into(),
                expected: "an object (the Application: {{toJson .app}})",
                found: type_name(other),
            });
        }
        None if root.contains_key("metadata") || root.contains_key("status") || root.contains_key("spec") => {
            (value, "", None)
        }
        None => {
            let keys: Vec<&str> = root.keys().map(|k| k.as_str()).take(8).collect();
            let found = if keys.is_empty() {
                String::new()
            } else {
                format!(" (found keys: {})", keys.join(", "))
            };
            return Err(PayloadError::NoApplication(found));
        }
    };
    let r = Reader { prefix };
    if let Some(kind) = r.opt_str(app, &["kind"])?
        && kind != "Application"
    {
        return Err(PayloadError::Invalid {
            path: format!("{prefix}kind"),
            message: format!("{kind:?} is not an Argo CD Application"),
        });
    }
    let name = r.req_str(
        app,
        &["metadata", "name"],
        "the Application has no name; send the whole Application",
    )?;
    let namespace = r
        .opt_str(app, &["metadata", "namespace"])?
        .unwrap_or_else(|| "argocd".into());
    validate_name(&format!("{prefix}metadata.name"), &name)?;
    validate_name(&format!("{prefix}metadata.namespace"), &namespace)?;
    let uid = r.opt_str(app, &["metadata", "uid"])?;
    let labels = r.str_map(app, &["metadata", "labels"])?;
    let mut annotations = r.str_map(app, &["metadata", "annotations"])?;
    // Large and of no use to Herald: kubectl's copy of the manifest and the notifications controller's bookkeeping.
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    annotations.remove("notified.notifications.argoproj.io");
    let deleting = r.opt_str(app, &["metadata", "deletionTimestamp"])?.is_some();
    let project = r
        .opt_str(app, &["spec", "project"])?
        .unwrap_or_else(|| "default".into());
    let destination = Destination {
        server: r.opt_str(app, &["spec", "destination", "server"])?,
        name: r.opt_str(app, &["spec", "destination", "name"])?,
        namespace: r.opt_str(app, &["spec", "destination", "namespace"])?,
    };
    let automated = r.get(app, &["spec", "syncPolicy", "automated"]);
    let sync_policy = SyncPolicy {
        automated: matches!(automated, Some(Value::Object(_))),
        prune: r
            .opt_bool(app, &["spec", "syncPolicy", "automated", "prune"])?
            .unwrap_or(false),
        self_heal: r
            .opt_bool(app, &["spec", "syncPolicy", "automated", "selfHeal"])?
            .unwrap_or(false),
    };
    let mut sources = Vec::new();
    let source_values: Vec<(String, &Value)> = match r.get(app, &["spec", "sources"]) {
        Some(Value::Array(list)) if !list.is_empty() => list
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("spec.sources[{i}]"), v))
            .collect(),
        _ => r
            .get(app, &["spec", "source"])
            .map(|v| vec![("spec.source".to_string(), v)])
            .unwrap_or_default(),
    };
    for (p, v) in source_values {
        if !v.is_object() {
            continue;
        }
        sources.push(SourceRef {
            repo_url: r.opt_str_at(v, &p, "repoURL")?.unwrap_or_default(),
            path: r.opt_str_at(v, &p, "path")?,
            chart: r.opt_str_at(v, &p, "chart")?,
            target_revision: r.opt_str_at(v, &p, "targetRevision")?,
        });
    }
    let sync_status = r
        .opt_str(app, &["status", "sync", "status"])?
        .unwrap_or_else(|| "Unknown".into());
    let mut revisions = Vec::new();
    if let Some(rev) = r.opt_str(app, &["status", "sync", "revision"])? {
        revisions.push(rev);
    }
    if let Some(Value::Array(revs)) = r.get(app, &["status", "sync", "revisions"]) {
        for (i, v) in revs.iter().enumerate() {
            match v {
                Value::String(s) => {
                    if !revisions.contains(s) {
                        revisions.push(s.clone())
                    }
                }
                other => {
                    return Err(PayloadError::WrongType {
                        path: format!("{prefix}status.sync.revisions[{i}]"),
                        expected: "a string",
                        found: type_name(other),
                    });
                }
            }
        }
    }
    let health_status = r
        .opt_str(app, &["status", "health", "status"])?
        .unwrap_or_else(|| "Unknown".into());
    let health_message = r.opt_str(app, &["status", "health", "message"])?;
    for (path, v) in [
        ("status.sync.status", &sync_status),
        ("status.health.status", &health_status),
    ] {
        if v.contains("<no value>") {
            return Err(PayloadError::NoValue {
                path: format!("{prefix}{path}"),
            });
        }
    }
    let operation = match r.get(app, &["status", "operationState"]) {
        Some(Value::Object(_)) => Some(r.operation(app)?),
        None | Some(Value::Null) => None,
        Some(other) => {
            return Err(PayloadError::WrongType {
                path: format!("{prefix}status.operationState"),
                expected: "an object",
                found: type_name(other),
            });
        }
    };
    let mut resources = Vec::new();
    for (i, res) in r.array(app, &["status", "resources"])?.iter().enumerate() {
        let p = format!("status.resources[{i}]");
        let requires_pruning = r.opt_bool_at(res, &p, "requiresPruning")?.unwrap_or(false);
        let status = r.opt_str_at(res, &p, "status")?.unwrap_or_default();
        let (health, health_message) = match res.get("health") {
            Some(Value::Object(h)) => (
                h.get("status").and_then(Value::as_str).map(str::to_string),
                h.get("message").and_then(Value::as_str).map(str::to_string),
            ),
            _ => (None, None),
        };
        // Kept: what differs from Git, what waits to be pruned, and what is unhealthy (a Degraded message names it).
        let healthy = matches!(health.as_deref(), None | Some("Healthy"));
        if status == "Synced" && !requires_pruning && healthy {
            continue;
        }
        resources.push(ResourceStatus {
            group: r.opt_str_at(res, &p, "group")?.unwrap_or_default(),
            kind: r.opt_str_at(res, &p, "kind")?.unwrap_or_default(),
            namespace: r.opt_str_at(res, &p, "namespace")?.unwrap_or_default(),
            name: r.opt_str_at(res, &p, "name")?.unwrap_or_default(),
            status,
            requires_pruning,
            health,
            health_message,
        });
    }
    let mut conditions = Vec::new();
    for (i, c) in r.array(app, &["status", "conditions"])?.iter().enumerate() {
        let p = format!("status.conditions[{i}]");
        conditions.push(Condition {
            r#type: r.opt_str_at(c, &p, "type")?.unwrap_or_default(),
            message: r.opt_str_at(c, &p, "message")?.unwrap_or_default(),
        });
    }
    // status.history is oldest first; the entry before the last is what was deployed before.
    let history = r.array(app, &["status", "history"])?;
    let previous_revision = if history.len() >= 2 {
        history[history.len() - 2]
            .get("revision")
            .and_then(Value::as_str)
            .map(str::to_string)
    } else {
        None
    };

    let mut argocd_url = None;
    let mut observed_at = None;
    if let Some(env) = envelope {
        if let Some(Value::Object(ctx)) = env.get("context") {
            argocd_url = ctx
                .get("argocdUrl")
                .and_then(Value::as_str)
                .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                .map(|u| u.trim_end_matches('/').to_string());
        }
        // A timestamp that is not RFC 3339 is ignored rather than refused: the state is still good.
        observed_at = env.get("timestamp").and_then(Value::as_str).and_then(parse_time);
    }
    let health_changed_at = r
        .opt_str(app, &["status", "health", "lastTransitionTime"])?
        .as_deref()
        .and_then(parse_time);
    if observed_at.is_none() {
        let candidates = [
            r.opt_str(app, &["status", "reconciledAt"])?,
            operation.as_ref().and_then(|o| o.finished_at.map(|t| t.to_rfc3339())),
            operation.as_ref().and_then(|o| o.started_at.map(|t| t.to_rfc3339())),
            r.opt_str(app, &["status", "health", "lastTransitionTime"])?,
        ];
        observed_at = candidates.iter().flatten().filter_map(|s| parse_time(s)).max();
    }

    Ok(Snapshot {
        app: AppId { namespace, name },
        uid,
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
        deleting,
        health_changed_at,
        source: Source::Webhook,
        argocd_url,
        observed_at,
    })
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc))
}

/// Kubernetes names: DNS-1123 subdomain characters, at most 253.
fn validate_name(path: &str, v: &str) -> Result<(), PayloadError> {
    if v.contains("<no value>") {
        return Err(PayloadError::NoValue { path: path.into() });
    }
    let ok = !v.is_empty()
        && v.len() <= 253
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(PayloadError::Invalid {
            path: path.into(),
            message: format!(
                "{:?} is not a Kubernetes name (lowercase letters, digits, '-' and '.', at most 253)",
                v.chars().take(64).collect::<String>()
            ),
        })
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
                    match val {
                        Value::String(s) => {
                            out.insert(k.clone(), s.clone());
                        }
                        other => {
                            return Err(PayloadError::WrongType {
                                path: format!("{}.{k}", self.path(path)),
                                expected: "a string",
                                found: type_name(other),
                            });
                        }
                    }
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
            match item {
                Value::String(s) if s.is_empty() => {}
                Value::String(s) => out.push(s.clone()),
                other => {
                    return Err(PayloadError::WrongType {
                        path: format!("{}[{i}]", self.path(path)),
                        expected: "a string",
                        found: type_name(other),
                    });
                }
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
            resources.push(ResultResource {
                group: self.opt_str_at(res, &p, "group")?.unwrap_or_default(),
                kind: self.opt_str_at(res, &p, "kind")?.unwrap_or_default(),
                namespace: self.opt_str_at(res, &p, "namespace")?.unwrap_or_default(),
                name: self.opt_str_at(res, &p, "name")?.unwrap_or_default(),
                status: self.opt_str_at(res, &p, "status")?.unwrap_or_default(),
                message: self.opt_str_at(res, &p, "message")?.unwrap_or_default(),
                hook_phase: self.opt_str_at(res, &p, "hookPhase")?.unwrap_or_default(),
            });
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
            phase: self.opt_str(app, &at(&["phase"]))?.unwrap_or_default(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_application_is_accepted() {
        let body = br#"{"metadata":{"name":"pay","namespace":"argocd"},"status":{"sync":{"status":"OutOfSync"}}}"#;
        let s = parse_body(body, 64).expect("valid");
        assert_eq!(s.app.name, "pay");
        assert_eq!(s.sync_status, "OutOfSync");
        assert_eq!(s.health_status, "Unknown");
    }

    #[test]
    fn wrong_types_name_the_field() {
        let body = br#"{"app":{"metadata":{"name":5}}}"#;
        let e = parse_body(body, 64).unwrap_err().to_string();
        assert!(e.contains("app.metadata.name must be a string"), "{e}");
    }

    #[test]
    fn nesting_is_bounded() {
        let body = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(parse_body(body.as_bytes(), 64), Err(PayloadError::TooDeep(64)));
    }

    #[test]
    fn offsets_in_timestamps_are_honoured() {
        let body = br#"{"timestamp":"2025-10-02T18:13:13.201298+02:00","app":{"metadata":{"name":"a"}}}"#;
        let s = parse_body(body, 64).expect("valid");
        assert_eq!(
            s.observed_at.map(|t| t.to_rfc3339()),
            Some("2025-10-02T16:13:13.201298+00:00".into())
        );
    }
}
