//! The hint catalog: known failure messages and spec settings → a short text that says what to do. Table-driven:
//! each entry is a condition and a text with the real names filled in.

use crate::argocd::ResultCode;
use crate::configuration::RulesSettings;
use crate::domain::{Hint, Incident};
use crate::state::AppState;

use super::Kind;

fn hint(id: &str, title: &str, text: String) -> Hint {
    Hint {
        id: id.into(),
        title: title.into(),
        text,
    }
}

/// Every message the state carries: conditions, the operation, its resources, health.
fn messages(state: &AppState) -> Vec<&str> {
    let s = &state.snapshot;
    let mut m: Vec<&str> = s.conditions.iter().map(|c| c.message.as_str()).collect();
    if let Some(op) = &s.operation {
        m.push(&op.message);
        m.extend(op.resources.iter().map(|r| r.message.as_str()));
    }
    if let Some(h) = &s.health_message {
        m.push(h);
    }
    m
}

/// What every rule of the catalog reads: the incident, the state it came from, and the names a command needs.
struct Facts<'a> {
    state: &'a AppState,
    view: &'a Incident,
    rules: &'a RulesSettings,
    /// The Application as `argocd app <verb>` takes it: its name, with `--app-namespace NS` when it is outside the
    /// `argocd` namespace.
    app: String,
    messages: Vec<&'a str>,
}

impl Facts<'_> {
    fn snapshot(&self) -> &crate::argocd::Snapshot {
        &self.state.snapshot
    }

    fn has_condition(&self, r#type: &str) -> bool {
        self.snapshot().conditions.iter().any(|c| c.r#type == r#type)
    }
}

/// One rule of the catalog: adds the hints it finds in the facts.
type Rule = fn(&Facts, &mut Vec<Hint>);

/// The catalog, in the order the hints are shown: each rule with the incident kinds it speaks to.
const CATALOG: &[(&[Kind], Rule)] = &[
    (&[Kind::SyncUnknown, Kind::SyncFailed, Kind::OutOfSync], missing_crd),
    (&[Kind::PrunePending], prune_disabled),
    (&[Kind::Degraded], degraded),
    (&[Kind::OutOfSync], no_self_heal),
    (&[Kind::OutOfSync], manual_sync),
    (&[Kind::SyncFailed], retry_exhausted),
    (&[Kind::SyncUnknown, Kind::SyncFailed], invalid_spec),
    (&Kind::ALL, shared_resource),
    (&[Kind::SyncUnknown, Kind::SyncFailed, Kind::OutOfSync], schema_mismatch),
    (
        &[Kind::OutOfSync, Kind::PrunePending, Kind::SyncUnknown],
        orphaned_resources,
    ),
    (&[Kind::Pruned], pruned_recovery),
    (&[Kind::Pruned], rename),
    (&[Kind::Pruned], production_prune),
    (&[Kind::SyncRunning], stuck_sync),
    (&[Kind::Progressing], stuck_rollout),
];

/// The hints for one incident: every catalog entry that speaks to its kind, in catalog order.
pub fn for_incident(kind: Kind, state: &AppState, view: &Incident, rules: &RulesSettings) -> Vec<Hint> {
    let s = &state.snapshot;
    let facts = Facts {
        state,
        view,
        rules,
        app: if s.app.namespace == "argocd" {
            s.app.name.clone()
        } else {
            format!("{} --app-namespace {}", s.app.name, s.app.namespace)
        },
        messages: messages(state),
    };
    let mut out = Vec::new();
    for (kinds, rule) in CATALOG {
        if kinds.contains(&kind) {
            rule(&facts, &mut out);
        }
    }
    out
}

/// The kind whose CRD a message says is missing (empty when it names none); `None` when it says no such thing.
fn missing_crd_kind(m: &str) -> Option<String> {
    if let Some(pos) = m.find("no matches for kind") {
        let rest = &m[pos + "no matches for kind".len()..];
        let kind = rest
            .trim_start()
            .trim_start_matches(['"', '\\'])
            .split(['"', '\\', ' '])
            .next();
        Some(kind.unwrap_or("").to_string())
    } else if let Some(pos) = m.find("CRD is installed") {
        // Argo CD's own wording: `… Make sure the "ServiceMonitor" CRD is installed on the destination cluster.`
        Some(m[..pos].rsplit('"').nth(1).unwrap_or("").to_string())
    } else if m.contains("could not find the requested resource") || m.contains("ensure CRDs are installed") {
        Some(String::new())
    } else {
        None
    }
}

fn missing_crd(f: &Facts, out: &mut Vec<Hint>) {
    let Some(crd_kind) = f.messages.iter().find_map(|m| missing_crd_kind(m)) else {
        return;
    };
    let what = if crd_kind.is_empty() {
        "a resource's CustomResourceDefinition".to_string()
    } else {
        format!("the CustomResourceDefinition of kind {crd_kind}")
    };
    out.push(hint(
        "missing_crd",
        "A CRD is missing",
        format!(
            "The cluster does not know {what}. Install the CRD first: put it in an earlier sync wave \
             (annotation argocd.argoproj.io/sync-wave: \"-1\"), or in a separate Application synced before \
             this one; add SkipDryRunOnMissingResource=true to resources whose CRD is created in the same sync."
        ),
    ));
}

fn prune_disabled(f: &Facts, out: &mut Vec<Hint>) {
    if f.snapshot().sync_policy.prune {
        return;
    }
    // The real resources, as `argocd app sync --resource` names them (GROUP:KIND:NAME, the group empty for core).
    let flags: Vec<String> = (f.view.resources.iter().take(5))
        .map(|r| format!(" --resource {}:{}:{}", r.group, r.kind, r.name))
        .collect();
    let (these, are, them) = match f.view.resources.len() {
        1 => ("This resource was", "is", "it"),
        _ => ("These resources were", "are", "them"),
    };
    let app = &f.app;
    out.push(hint(
        "prune_disabled",
        "Prune is off",
        format!(
            "{these} removed from Git but {are} still running in the cluster, because automated prune is off. \
             Remove {them}: `argocd app sync {app} --prune{}`, or enable syncPolicy.automated.prune. \
             Annotate what must never be removed with argocd.argoproj.io/sync-options: Prune=false.",
            flags.concat()
        ),
    ));
}

fn no_self_heal(f: &Facts, out: &mut Vec<Hint>) {
    let policy = &f.snapshot().sync_policy;
    if policy.automated && !policy.self_heal {
        out.push(hint(
            "no_self_heal",
            "Automated sync without selfHeal",
            "Changes made in the cluster are never reverted while Git does not change: enable \
             syncPolicy.automated.selfHeal, or fix the drift in Git."
                .into(),
        ));
    }
}

fn manual_sync(f: &Facts, out: &mut Vec<Hint>) {
    if f.snapshot().sync_policy.automated {
        return;
    }
    let app = &f.app;
    out.push(hint(
        "manual_sync",
        "Auto-sync is off",
        format!(
            "Nothing syncs this Application by itself. Review the diff (`argocd app diff {app}`) \
             and sync (`argocd app sync {app}`), or enable syncPolicy.automated. If the difference \
             is harmless, ignore it with spec.ignoreDifferences so that OutOfSync means something again."
        ),
    ));
}

fn retry_exhausted(f: &Facts, out: &mut Vec<Hint>) {
    let Some(op) = &f.snapshot().operation else {
        return;
    };
    let Some(limit) = op.retry_limit.filter(|&limit| limit > 0 && op.retry_count >= limit) else {
        return;
    };
    let app = &f.app;
    out.push(hint(
        "retry_exhausted",
        "Retry limit exhausted",
        format!(
            "The sync was retried {} times (limit {limit}) and gave up. Fix the cause, then sync again: \
             `argocd app sync {app}`.",
            op.retry_count
        ),
    ));
}

fn invalid_spec(f: &Facts, out: &mut Vec<Hint>) {
    if f.has_condition("InvalidSpecError") {
        out.push(hint(
            "invalid_spec",
            "The Application spec is invalid",
            "Argo CD cannot use this Application's spec (see the message): check the repository URL and path, \
             the target revision, the destination cluster and namespace, and that the project allows them."
                .into(),
        ));
    }
}

fn shared_resource(f: &Facts, out: &mut Vec<Hint>) {
    if f.has_condition("SharedResourceWarning") {
        out.push(hint(
            "shared_resource",
            "A resource is managed by two Applications",
            "Two Applications manage the same resource and will fight over it: keep it in one of them.".into(),
        ));
    }
}

fn schema_mismatch(f: &Facts, out: &mut Vec<Hint>) {
    let Some(m) = (f.messages.iter()).find(|m| m.contains("error building typed value from config resource")) else {
        return;
    };
    // The field follows the words, on the same line or (after `errors:`) on the next ones.
    let tail = m.split("from config resource:").nth(1).unwrap_or(m);
    let line = (tail.lines())
        .map(|l| l.trim().trim_start_matches("errors:").trim())
        .find(|l| l.starts_with('.'));
    let field: String = line.unwrap_or("a field").chars().take(200).collect();
    // Two different mistakes share the message: a field the schema does not have, and a value of the wrong type.
    let text = if line.is_some_and(|l| l.contains("field not declared in schema")) {
        format!(
            "Argo CD cannot compare a manifest with the cluster because it has a field its schema does not declare \
             ({field}). Usually the manifest is mis-indented (a key one level too deep or too shallow), or, for a \
             custom resource, the CRD in the cluster is older than the manifest: fix the manifest in Git, or update \
             the CRD to the version the manifest is written for."
        )
    } else {
        format!(
            "Argo CD cannot compare a manifest with the cluster because a field has the wrong type ({field}). \
             Fix the manifest in Git — often a number written as a quoted string, e.g. runAsUser: \"1000\" — \
             or, for a custom resource, update the CRD in the cluster to the version the manifest is written for."
        )
    };
    out.push(hint("schema_mismatch", "A manifest does not match its schema", text));
}

fn orphaned_resources(f: &Facts, out: &mut Vec<Hint>) {
    if f.has_condition("OrphanedResourceWarning") {
        out.push(hint(
            "orphaned_resources",
            "Orphaned resources in the namespace",
            "The destination namespace holds resources no Application manages (OrphanedResourceWarning): \
             leftovers of a rename or a manual change. Review them in the Argo CD UI (Orphaned resources) and \
             delete them or add them to Git; ignore expected ones with the project's orphanedResources.ignore."
                .into(),
        ));
    }
}

fn pruned_recovery(f: &Facts, out: &mut Vec<Hint>) {
    let prev = f.view.previous_revision.as_deref().unwrap_or("PREVIOUS_REVISION");
    let after = f.view.revision.as_deref().unwrap_or("the current revision");
    let names: Vec<String> = (f.view.resources.iter())
        .map(|r| format!("{} {}", r.kind, r.name))
        .collect();
    let app = &f.app;
    out.push(hint(
        "pruned_recovery",
        "If this deletion was a mistake",
        format!(
            "Find the manifests in the previous revision: `argocd app history {app}` then \
             `argocd app manifests {app} --revision {prev}`; restore {} as a Git commit (revert the \
             change made in {after}); let the next sync recreate it; verify the workloads that used it.",
            names.join(", ")
        ),
    ));
}

fn rename(f: &Facts, out: &mut Vec<Hint>) {
    for (old, new) in renames(f.state) {
        // A rename pairs two objects of one kind: the pruned one's, as the incident lists it.
        let kind = (f.view.resources.iter())
            .find(|r| r.name == old)
            .map(|r| r.kind.as_str())
            .unwrap_or("");
        out.push(hint(
            "rename",
            "Looks like a rename",
            format!(
                "{kind} {old} was pruned and {kind} {new} was created in the same sync: a rename deletes the old \
                 object before every consumer uses the new one. Do renames as add → migrate consumers → remove."
            ),
        ));
    }
}

fn production_prune(f: &Facts, out: &mut Vec<Hint>) {
    if super::is_production(f.snapshot(), f.rules) {
        out.push(hint(
            "production_prune",
            "Production resources were deleted",
            "This destination is marked production (rules.pruned.production). Check its consumers now; \
             consider requiring a second review for changes that remove manifests, and Prune=false on \
             resources that must never be deleted automatically."
                .into(),
        ));
    }
}

/// A cause of Degraded that resources' health messages show, by the words that say it.
struct Symptom {
    id: &'static str,
    title: &'static str,
    words: &'static [&'static str],
    /// Whether it explains a rollout past its deadline (which is then not hinted on its own).
    explains_rollout: bool,
    /// The advice, given the namespace, the `kind/name` to look at, and the Application.
    advice: fn(ns: &str, target: &str, app: &str) -> String,
}

/// The symptoms, in the order the hints are shown; the rollout past its deadline is last, as it is only hinted
/// when nothing before it explains it.
const SYMPTOMS: &[Symptom] = &[
    Symptom {
        id: "image_pull",
        title: "The image cannot be pulled",
        words: &["ImagePullBackOff", "ErrImagePull", "pulling image", "manifest unknown"],
        explains_rollout: true,
        advice: |ns, target, _| {
            format!(
                "Check the image name and tag in Git, that the registry has it, and the pull secret: \
                 `kubectl -n {ns} describe {target}` shows the failing image in the pods' events."
            )
        },
    },
    Symptom {
        id: "crash_loop",
        title: "A container keeps crashing",
        words: &["CrashLoopBackOff", "Back-off restarting", "OOMKilled"],
        explains_rollout: true,
        advice: |ns, target, _| {
            format!(
                "Read why it stopped: `kubectl -n {ns} logs {target} --previous`; OOMKilled means its memory limit \
                 is too low for it."
            )
        },
    },
    Symptom {
        id: "unschedulable",
        title: "Pods cannot be scheduled",
        words: &[
            "Insufficient cpu",
            "Insufficient memory",
            "Unschedulable",
            "had untolerated taint",
        ],
        explains_rollout: true,
        advice: |ns, target, _| {
            format!(
                "No node can take the pods (resources, node selector, taints): `kubectl -n {ns} describe {target}` \
                 says which; lower the requests or add capacity."
            )
        },
    },
    Symptom {
        id: "job_failed",
        title: "A job ran out of retries",
        words: &["BackoffLimitExceeded", "backoff limit"],
        explains_rollout: false,
        advice: |ns, target, _| {
            format!(
                "Read the last pod's logs: `kubectl -n {ns} logs {target}`; fix the cause, then sync to run it again."
            )
        },
    },
];

const ROLLOUT_STUCK: Symptom = Symptom {
    id: "rollout_stuck",
    title: "The rollout is stuck",
    words: &["progress deadline", "ProgressDeadlineExceeded"],
    explains_rollout: false,
    advice: |ns, target, app| {
        format!(
            "New pods did not become ready in time: `kubectl -n {ns} rollout status {target}` and \
             `kubectl -n {ns} describe {target}` show why (image, crash, probe, scheduling). Roll back with \
             `argocd app rollback {app}` if the previous revision was healthy."
        )
    },
};

/// Why an Application is Degraded, from its resources' and its own health messages: a rollout past its deadline,
/// an image that cannot be pulled, a container that keeps crashing or runs out of memory, a pod that cannot be
/// scheduled, a job out of retries. Each hint names the resource whose message says so (else the first one).
fn degraded(f: &Facts, out: &mut Vec<Hint>) {
    let app_messages: Vec<&str> = (f.view.messages.iter().map(String::as_str))
        .chain(f.snapshot().health_message.as_deref())
        .collect();
    let before = out.len();
    let mut hint_if_shown = |symptom: &Symptom| {
        let shown = where_it_shows(f, &app_messages, symptom.words);
        if let Some((ns, target)) = &shown {
            out.push(hint(symptom.id, symptom.title, (symptom.advice)(ns, target, &f.app)));
        }
        shown.is_some()
    };
    let mut explained = false;
    for symptom in SYMPTOMS {
        explained |= hint_if_shown(symptom) && symptom.explains_rollout;
    }
    if !explained {
        hint_if_shown(&ROLLOUT_STUCK);
    }
    if let (true, Some(r)) = (out.len() == before, f.view.resources.first()) {
        let ns = Some(r.namespace.as_str())
            .filter(|n| !n.is_empty())
            .unwrap_or("NAMESPACE");
        out.push(hint(
            "unhealthy_resource",
            "Look at the unhealthy resource",
            format!(
                "Its events say why it is unhealthy: `kubectl -n {ns} describe {}/{}`.",
                r.kind.to_lowercase(),
                r.name
            ),
        ));
    }
}

/// The namespace and `kind/name` a symptom's words point at: the resource whose message has them, or the first
/// unhealthy one when only the Application's messages have them (`deployment/NAME` when it lists none).
fn where_it_shows(f: &Facts, app_messages: &[&str], words: &[&str]) -> Option<(String, String)> {
    let says = |t: &str| words.iter().any(|w| t.contains(w));
    let in_app_messages = app_messages.iter().any(|m| says(m));
    let destination_ns = f.snapshot().destination.namespace.as_deref();
    let resource = (f.view.resources.iter())
        .find(|r| says(&r.message))
        .or_else(|| in_app_messages.then(|| f.view.resources.first()).flatten());
    match resource {
        Some(r) => Some((
            Some(r.namespace.as_str())
                .filter(|n| !n.is_empty())
                .or(destination_ns)
                .unwrap_or("NAMESPACE")
                .to_string(),
            format!("{}/{}", r.kind.to_lowercase(), r.name),
        )),
        None if in_app_messages => Some((
            destination_ns.unwrap_or("NAMESPACE").to_string(),
            "deployment/NAME".into(),
        )),
        None => None,
    }
}

/// Pairs (pruned name, created name) of the same kind in the last sync: likely renames.
fn renames(state: &AppState) -> Vec<(String, String)> {
    let Some(op) = &state.snapshot.operation else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in op.resources.iter().filter(|r| r.status == ResultCode::Pruned) {
        if let Some(c) = op.resources.iter().find(|r| {
            r.kind == p.kind && r.name != p.name && r.status == ResultCode::Synced && r.message.contains("created")
        }) {
            out.push((p.name.clone(), c.name.clone()));
        }
    }
    out
}

/// A sync that does not end: what it waits on, how to look, how to stop it, how to make it fail by itself next time.
fn stuck_sync(f: &Facts, out: &mut Vec<Hint>) {
    let app = &f.app;
    let look = match f.view.resources.first() {
        Some(r) if r.status == "hook Running" && r.kind == "Job" => {
            format!(
                "Look at the hook's logs: `kubectl logs -n {} job/{}`. ",
                r.namespace, r.name
            )
        }
        Some(r) if r.status == "hook Running" => format!("Look at the hook: `{}`. ", kubectl(r, "describe")),
        Some(r) => format!(
            "The sync waits for each wave to be healthy before the next; see why it is not: `{}`. ",
            kubectl(r, "describe")
        ),
        None => String::new(),
    };
    out.push(hint(
        "stuck_sync",
        "The sync does not end",
        format!(
            "{look}Stop the sync with `argocd app terminate-op {app}` (then sync again once the cause is fixed). \
             Give hook Jobs a spec.activeDeadlineSeconds (and a backoffLimit) so that a stuck hook fails the \
             sync instead of holding it."
        ),
    ));
}

/// A rollout that does not finish: where to look, the usual causes, and the deadline that turns it into Degraded.
fn stuck_rollout(f: &Facts, out: &mut Vec<Hint>) {
    let look = match f.view.resources.first() {
        Some(r) if matches!(r.kind.as_str(), "Deployment" | "StatefulSet" | "DaemonSet") => format!(
            "`kubectl rollout status -n {} {}/{}` and `{}` say what it waits for",
            r.namespace,
            r.kind.to_lowercase(),
            r.name,
            kubectl(r, "describe")
        ),
        Some(r) => format!("`{}` says what it waits for", kubectl(r, "describe")),
        None => format!("`argocd app resources {}` lists what is not ready", f.app),
    };
    out.push(hint(
        "stuck_rollout",
        "A rollout that does not finish",
        format!(
            "{look}: pods that cannot pull their image, fail their readiness probe or stay Pending for lack of \
             room are the usual causes. Set spec.progressDeadlineSeconds on Deployments so that a stuck rollout \
             becomes Degraded (and is told as such) instead of Progressing for ever."
        ),
    ));
}

/// `kubectl VERB -n NS kind name` for one resource of an incident.
fn kubectl(r: &crate::domain::ResourceRef, verb: &str) -> String {
    format!("kubectl {verb} -n {} {} {}", r.namespace, r.kind.to_lowercase(), r.name)
}
