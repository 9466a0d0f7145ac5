//! A fake Argo CD API that answers as Argo CD's own server code does, not as Herald expects it to (argo-cd 3.5):
//! - the listing (`GET /api/v1/applications`, `List` in `server/application/application.go`): the `projects` filter,
//!   then only the Applications the token may `get` (its RBAC, per project), sorted by name; written as
//!   `streamApplicationListJSON` writes it (`{"metadata":…\n,"items":[…\n,…\n]}`), with `fields` selecting only
//!   the paths of `appFields` (a leading `-` excludes them instead; an ancestor covers its descendants; a nil value
//!   is left out where the table returns nil, and written `null` where it returns a nil pointer or map);
//! - one Application (`GET /api/v1/applications/{name}`, `Get` → `getAppEnforceRBAC`): with `project`, 403 when
//!   the token may not get that project's Applications and 404 when it is not there (missing, in another project,
//!   or in a project the token may not see); without, 403 for both "missing" and "not yours";
//! - the event stream (`GET /api/v1/stream/applications`, `Watch` through grpc-gateway 1.16's
//!   `ForwardResponseStream`): ADDED for every permitted Application (sorted by namespace/name), then the queued
//!   events, each a `{"result":{…}}` line; an error is a last `{"error":{…}}` chunk without a newline (and its
//!   HTTP status when nothing was sent before it);
//! - the AppProjects (`GET /api/v1/projects`), those the token may `get`, with their sync windows.
//!
//! Every answer needs `Authorization: Bearer <token>` of a token the fake knows (401 otherwise). What was asked is
//! kept ([`FakeArgoCd::requests`]) for tests that count requests.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::fixtures::fixture_text;

/// What a token may `get`: every project's Applications, or those of some projects only; and whether it may
/// `get` AppProjects.
#[derive(Debug, Clone, PartialEq)]
pub struct Rbac {
    pub applications: Option<BTreeSet<String>>,
    pub projects: bool,
}

impl Rbac {
    /// `p, role:herald, applications, get, */*, allow` and `p, role:herald, projects, get, *, allow`.
    pub fn all() -> Self {
        Self {
            applications: None,
            projects: true,
        }
    }

    /// Applications of these projects only (`applications, get, <project>/*`), and AppProjects.
    pub fn projects(projects: &[&str]) -> Self {
        Self {
            applications: Some(projects.iter().map(|p| p.to_string()).collect()),
            projects: true,
        }
    }

    /// Nothing at all (the role was removed).
    pub fn none() -> Self {
        Self {
            applications: Some(BTreeSet::new()),
            projects: false,
        }
    }

    fn may_get(&self, project: &str) -> bool {
        self.applications.as_ref().is_none_or(|p| p.contains(project))
    }
}

#[derive(Default)]
struct State {
    /// Whole Applications by (namespace, name).
    apps: BTreeMap<(String, String), Value>,
    /// AppProjects by name, with their annotations.
    projects: BTreeMap<String, Value>,
    tokens: BTreeMap<String, Rbac>,
    /// Events the next stream sends after its ADDED ones: (type, Application).
    events: Vec<(String, Value)>,
    /// The error a stream ends with (gRPC code, HTTP status, message), if any.
    stream_error: Option<(u16, u16, String)>,
    requests: Vec<String>,
    resource_version: u64,
}

/// The fake server; cheap to clone (every clone is the same Argo CD).
#[derive(Clone)]
pub struct FakeArgoCd {
    uri: String,
    state: Arc<Mutex<State>>,
    _server: Arc<MockServer>,
}

impl FakeArgoCd {
    /// A fake Argo CD with one token, `token`, that may get everything.
    pub async fn start(token: &str) -> Self {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State::default()));
        state
            .lock()
            .expect("state")
            .tokens
            .insert(token.to_string(), Rbac::all());
        Mock::given(method("GET"))
            .respond_with(Answer(state.clone()))
            .mount(&server)
            .await;
        Self {
            uri: server.uri(),
            state,
            _server: Arc::new(server),
        }
    }

    pub fn uri(&self) -> String {
        self.uri.clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `token` may get from now on (argocd-rbac-cm changed).
    pub fn rbac(&self, token: &str, rbac: Rbac) {
        self.state().tokens.insert(token.to_string(), rbac);
    }

    /// Creates or replaces an Application (a whole object: see [`application`]); the stream tells of it.
    pub fn put(&self, app: Value) {
        let mut s = self.state();
        s.resource_version += 1;
        let key = key_of(&app);
        let kind = if s.apps.contains_key(&key) { "MODIFIED" } else { "ADDED" };
        s.events.push((kind.into(), app.clone()));
        s.apps.insert(key, app);
    }

    /// Deletes an Application; the stream tells of it.
    pub fn delete(&self, namespace: &str, name: &str) {
        let mut s = self.state();
        s.resource_version += 1;
        if let Some(app) = s.apps.remove(&(namespace.to_string(), name.to_string())) {
            s.events.push(("DELETED".into(), app));
        }
    }

    /// The Application as stored, to change and [`put`](Self::put) back.
    pub fn get(&self, namespace: &str, name: &str) -> Value {
        self.state().apps[&(namespace.to_string(), name.to_string())].clone()
    }

    /// Moves an Application to another project (`spec.project` edited).
    pub fn move_to(&self, namespace: &str, name: &str, project: &str) {
        let mut app = self.get(namespace, name);
        app["spec"]["project"] = json!(project);
        self.put(app);
    }

    /// An AppProject with these annotations.
    pub fn project(&self, name: &str, annotations: Value) {
        self.project_with_windows(name, annotations, json!([]));
    }

    /// An AppProject with these annotations and sync windows (`spec.syncWindows`, as `AppProjectSpec` writes them:
    /// left out when empty).
    pub fn project_with_windows(&self, name: &str, annotations: Value, windows: Value) {
        let mut spec = json!({"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*"}]});
        if windows.as_array().is_some_and(|w| !w.is_empty()) {
            spec["syncWindows"] = windows;
        }
        self.state().projects.insert(
            name.to_string(),
            json!({"metadata": {"name": name, "namespace": "argocd", "annotations": annotations}, "spec": spec}),
        );
    }

    /// The next streams end with this error (gRPC code, HTTP status, message), as grpc-gateway writes one.
    pub fn stream_error(&self, error: Option<(u16, u16, &str)>) {
        self.state().stream_error = error.map(|(g, h, m)| (g, h, m.to_string()));
    }

    /// Every request so far, as `path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.state().requests.clone()
    }

    /// The GETs of one Application so far, as `name?query`.
    pub fn gets(&self) -> Vec<String> {
        (self.requests().into_iter())
            .filter_map(|r| r.strip_prefix("/api/v1/applications/").map(str::to_string))
            .collect()
    }

    /// How many listings so far.
    pub fn listings(&self) -> usize {
        (self.requests().iter())
            .filter(|r| r.split('?').next() == Some("/api/v1/applications"))
            .count()
    }
}

fn key_of(app: &Value) -> (String, String) {
    let meta = &app["metadata"];
    (
        meta["namespace"].as_str().unwrap_or("argocd").to_string(),
        meta["name"].as_str().unwrap_or_default().to_string(),
    )
}

/// An Application as Argo CD stores and serves it whole: uid, creation time, spec, status with a comparison, a
/// reconcile time, an operation state (a succeeded sync) and a history of two deployments.
pub fn application(name: &str, project: &str, sync: &str, health: &str) -> Value {
    json!({
        "metadata": {
            "name": name, "namespace": "argocd", "uid": format!("uid-{name}"),
            "creationTimestamp": "2026-01-01T00:00:00Z", "resourceVersion": "100", "generation": 7,
            "labels": {"app.kubernetes.io/part-of": name},
            "managedFields": [{"manager": "argocd-controller", "operation": "Update"}]
        },
        "spec": {
            "project": project,
            "destination": {"server": "https://kubernetes.default.svc", "namespace": name},
            "source": {"repoURL": "https://git.example/deploy.git", "path": name, "targetRevision": "HEAD"},
            "syncPolicy": {"automated": {"prune": false, "selfHeal": false}}
        },
        "status": {
            "sync": {"status": sync, "revision": "c0ffee", "comparedTo": {"destination": {}, "source": {}}},
            "health": {"status": health, "lastTransitionTime": "2026-01-01T00:00:00Z"},
            "reconciledAt": "2026-01-05T08:59:00Z",
            "summary": {"images": ["registry.example/app:1"]},
            "resources": [{"kind": "Deployment", "namespace": name, "name": name, "status": sync,
                           "version": "v1", "group": "apps"}],
            "operationState": {
                "phase": "Succeeded", "message": "successfully synced (all tasks run)",
                "startedAt": "2026-01-05T08:00:00Z", "finishedAt": "2026-01-05T08:00:10Z",
                "operation": {"initiatedBy": {"username": "alice"}, "retry": {"limit": 5},
                              "sync": {"revision": "c0ffee"}},
                "syncResult": {"revision": "c0ffee", "resources": [
                    {"kind": "Deployment", "namespace": name, "name": name, "status": "Synced",
                     "message": "deployment.apps/x configured", "group": "apps", "version": "v1"}]}
            },
            "history": [{"id": 1, "revision": "decade"}, {"id": 2, "revision": "c0ffee"}]
        }
    })
}

struct Answer(Arc<Mutex<State>>);

impl Respond for Answer {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let url = &request.url;
        s.requests.push(match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        });
        let token = (request.headers.get("authorization"))
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let Some(rbac) = token.and_then(|t| s.tokens.get(t)).cloned() else {
            return error(401, 16, "invalid session: token is not valid");
        };
        let query: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let path = url.path().to_string();
        match path.as_str() {
            "/api/v1/applications" => list(&s, &rbac, &query),
            "/api/v1/stream/applications" => stream(&mut s, &rbac, &query),
            "/api/v1/projects" => projects(&s, &rbac),
            p => match p.strip_prefix("/api/v1/applications/") {
                Some(name) if !name.contains('/') => get(&s, &rbac, name, &query),
                _ => error(404, 5, "Not Found"),
            },
        }
    }
}

/// A gRPC error as grpc-gateway 1.16 writes it (`errorBody`).
fn error(http: u16, code: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(http).set_body_raw(
        serde_json::to_vec(&json!({"error": message, "code": code, "message": message})).expect("json"),
        "application/json",
    )
}

/// `getProjectsFromApplicationQuery`: `projects` and `project`, both repeatable.
fn asked_projects(query: &[(String, String)]) -> Vec<String> {
    (query.iter())
        .filter(|(k, _)| k == "projects" || k == "project")
        .map(|(_, v)| v.clone())
        .collect()
}

fn project_of(app: &Value) -> String {
    match app["spec"]["project"].as_str() {
        Some(p) if !p.is_empty() => p.to_string(),
        _ => "default".to_string(),
    }
}

fn list(s: &State, rbac: &Rbac, query: &[(String, String)]) -> ResponseTemplate {
    let projects = asked_projects(query);
    let mut items: Vec<&Value> = (s.apps.values())
        .filter(|a| projects.is_empty() || projects.contains(&project_of(a)))
        .filter(|a| rbac.may_get(&project_of(a)))
        .collect();
    items.sort_by(|a, b| a["metadata"]["name"].as_str().cmp(&b["metadata"]["name"].as_str()));
    let fields = query
        .iter()
        .find(|(k, _)| k == "fields")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    // streamApplicationListJSON: `{`, no TypeMeta (the server sets none), `"metadata":` + Encode (a newline),
    // `,"items":[`, each item Encoded (a newline each), `]}`.
    let mut body = String::from("{\"metadata\":");
    body.push_str(&json!({"resourceVersion": s.resource_version.to_string()}).to_string());
    body.push_str("\n,\"items\":[");
    for (i, app) in items.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        let item = if fields.is_empty() {
            (*app).clone()
        } else {
            select_fields(app, fields)
        };
        body.push_str(&item.to_string());
        body.push('\n');
    }
    body.push_str("]}");
    ResponseTemplate::new(200).set_body_raw(body.into_bytes(), "application/json")
}

/// `appFields`: each selectable path and what it returns. `Nil` is the table's untyped nil (left out); `Null` a
/// nil pointer, slice or map in a typed interface (written as `null`).
enum Field {
    Value(Value),
    Null,
    Nil,
}

fn field(app: &Value, path: &str) -> Field {
    let at = |p: &[&str]| -> Option<&Value> {
        let mut cur = app;
        for k in p {
            cur = cur.get(*k)?;
        }
        Some(cur)
    };
    // A Go value: a string is "" when missing, a struct `{}`, a pointer / slice / map `null`.
    let string = |p: &[&str]| Field::Value(at(p).cloned().unwrap_or_else(|| json!("")));
    let structure = |p: &[&str]| Field::Value(at(p).cloned().unwrap_or_else(|| json!({})));
    let pointer = |p: &[&str]| at(p).cloned().map_or(Field::Null, Field::Value);
    let op = at(&["status", "operationState"]);
    match path {
        "metadata.name" => string(&["metadata", "name"]),
        "metadata.namespace" => string(&["metadata", "namespace"]),
        "metadata.annotations" => pointer(&["metadata", "annotations"]),
        "metadata.labels" => pointer(&["metadata", "labels"]),
        "metadata.creationTimestamp" => pointer(&["metadata", "creationTimestamp"]),
        "metadata.deletionTimestamp" => pointer(&["metadata", "deletionTimestamp"]),
        "spec" => structure(&["spec"]),
        "spec.destination" => structure(&["spec", "destination"]),
        "spec.project" => string(&["spec", "project"]),
        "spec.source" => pointer(&["spec", "source"]),
        "spec.sources" => pointer(&["spec", "sources"]),
        "spec.sourceHydrator" => pointer(&["spec", "sourceHydrator"]),
        "spec.syncPolicy" => pointer(&["spec", "syncPolicy"]),
        "status.sourceHydrator" => structure(&["status", "sourceHydrator"]),
        "status.summary" => structure(&["status", "summary"]),
        "status.sync.status" => string(&["status", "sync", "status"]),
        "status.sync.revision" => string(&["status", "sync", "revision"]),
        "status.health" => structure(&["status", "health"]),
        "status.operationState.startedAt" => match op {
            Some(op) => Field::Value(op.get("startedAt").cloned().unwrap_or(Value::Null)),
            None => Field::Nil,
        },
        "status.operationState.finishedAt" => match op {
            Some(op) => Field::Value(op.get("finishedAt").cloned().unwrap_or(Value::Null)),
            None => Field::Nil,
        },
        "status.resources" => match at(&["status", "resources"]).and_then(Value::as_array) {
            Some(r) if !r.is_empty() => Field::Value(Value::Array(r.clone())),
            _ => Field::Nil,
        },
        "operation.sync" => match at(&["operation"]) {
            Some(o) => pointer_in(o, "sync"),
            None => Field::Nil,
        },
        "status.operationState.phase" => match op {
            Some(op) => Field::Value(op.get("phase").cloned().unwrap_or_else(|| json!(""))),
            None => Field::Nil,
        },
        "status.operationState.operation.sync" => match op {
            // The operation's sync *result* (`SyncResult`), under the operation's path.
            Some(op) => pointer_in(op, "syncResult"),
            None => Field::Nil,
        },
        _ => Field::Nil,
    }
}

fn pointer_in(v: &Value, key: &str) -> Field {
    v.get(key).cloned().map_or(Field::Null, Field::Value)
}

/// Argo CD's `appFields` table (the fixture `app_fields.txt`; see `tests/fixtures/argocd/SOURCES.md`).
fn app_fields() -> impl Iterator<Item = &'static str> {
    static TABLE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| fixture_text("app_fields.txt"));
    TABLE.lines()
}

/// `parseFieldSelection` + `selectAppFields` + `processAppFields`.
fn select_fields(app: &Value, fields: &str) -> Value {
    let (fields, exclude) = match fields.strip_prefix('-') {
        Some(rest) => (rest, true),
        None => (fields, false),
    };
    let asked: BTreeSet<&str> = fields.split(',').collect();
    let selected: BTreeSet<&str> = app_fields()
        .filter(|f| asked.contains(format!("items.{f}").as_str()) != exclude)
        .collect();
    let mut out = Map::new();
    for f in &selected {
        let parts: Vec<&str> = f.split('.').collect();
        let covered = (1..parts.len()).any(|i| selected.contains(parts[..i].join(".").as_str()));
        if covered {
            continue;
        }
        let value = match field(app, f) {
            Field::Nil => continue,
            Field::Null => Value::Null,
            Field::Value(v) => v,
        };
        let mut at = &mut out;
        for (i, part) in parts.iter().enumerate() {
            if i == parts.len() - 1 {
                at.insert(part.to_string(), value.clone());
            } else {
                let next = at.entry(part.to_string()).or_insert_with(|| Value::Object(Map::new()));
                at = next
                    .as_object_mut()
                    .expect("the ancestor rule keeps every parent a map");
            }
        }
    }
    Value::Object(out)
}

/// `getAppEnforceRBAC` for `get`.
fn get(s: &State, rbac: &Rbac, name: &str, query: &[(String, String)]) -> ResponseTemplate {
    let namespace = (query.iter())
        .find(|(k, _)| k == "appNamespace")
        .map(|(_, v)| v.clone())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "argocd".to_string());
    let projects = asked_projects(query);
    if projects.len() > 1 {
        return error(
            400,
            3,
            "multiple projects specified - the get endpoint accepts either zero or one project",
        );
    }
    let project = projects.into_iter().next();
    let denied = || error(403, 7, "permission denied");
    let not_found = || error(404, 5, &format!("applications.argoproj.io \"{name}\" not found"));
    if let Some(p) = &project
        && !rbac.may_get(p)
    {
        return denied();
    }
    let Some(app) = s.apps.get(&(namespace, name.to_string())) else {
        return if project.is_some() { not_found() } else { denied() };
    };
    let effective = project_of(app);
    if !rbac.may_get(&effective) {
        return if project.is_some() { not_found() } else { denied() };
    }
    if project.as_ref().is_some_and(|p| *p != effective) {
        return not_found();
    }
    ResponseTemplate::new(200).set_body_raw(serde_json::to_vec(app).expect("json"), "application/json")
}

/// `Watch` through `ForwardResponseStream`: the permitted Applications ADDED (no resourceVersion asked), then the
/// queued events, then the error chunk if one is set; the queued events are sent once.
fn stream(s: &mut State, rbac: &Rbac, query: &[(String, String)]) -> ResponseTemplate {
    let projects = asked_projects(query);
    let permitted = |a: &Value| {
        let p = project_of(a);
        rbac.may_get(&p) && (projects.is_empty() || projects.contains(&p))
    };
    let mut lines = Vec::new();
    let mut added: Vec<&Value> = s.apps.values().filter(|a| permitted(a)).collect();
    added.sort_by_key(|a| key_of(a));
    for app in added {
        lines.push(json!({"result": {"type": "ADDED", "application": app}}).to_string());
    }
    for (kind, app) in std::mem::take(&mut s.events) {
        if permitted(&app) {
            lines.push(json!({"result": {"type": kind, "application": app}}).to_string());
        }
    }
    let mut body = String::new();
    for line in &lines {
        body.push_str(line);
        body.push('\n');
    }
    let mut status = 200;
    if let Some((grpc, http, message)) = &s.stream_error {
        if lines.is_empty() {
            status = *http;
        }
        let text = match http {
            403 => "Forbidden",
            401 => "Unauthorized",
            404 => "Not Found",
            _ => "Internal Server Error",
        };
        body.push_str(
            &json!({"error": {"grpc_code": grpc, "http_code": http, "message": message, "http_status": text}})
                .to_string(),
        );
    }
    ResponseTemplate::new(status).set_body_raw(body.into_bytes(), "application/json")
}

/// The AppProjects the token may `get` (`projects, get`).
fn projects(s: &State, rbac: &Rbac) -> ResponseTemplate {
    let items: Vec<&Value> = if rbac.projects {
        s.projects.values().collect()
    } else {
        Vec::new()
    };
    ResponseTemplate::new(200).set_body_raw(
        serde_json::to_vec(&json!({"metadata": {}, "items": items})).expect("json"),
        "application/json",
    )
}
