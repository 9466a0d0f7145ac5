//! The hint catalog: known failure messages and spec settings → a short text that says what to do. Table-driven:
//! each entry is a condition and a text with the real names filled in.

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

pub fn for_incident(kind: Kind, state: &AppState, view: &Incident, rules: &RulesSettings) -> Vec<Hint> {
    let s = &state.snapshot;
    let app = &s.app.name;
    let ns_flag = if s.app.namespace == "argocd" {
        String::new()
    } else {
        format!(" --app-namespace {}", s.app.namespace)
    };
    let msgs = messages(state);
    let mut out = Vec::new();

    let missing_crd = msgs.iter().find_map(|m| {
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
            let before = &m[..pos];
            let kind = before.rsplit('"').nth(1).unwrap_or("");
            Some(kind.to_string())
        } else if m.contains("could not find the requested resource") || m.contains("ensure CRDs are installed") {
            Some(String::new())
        } else {
            None
        }
    });
    if let Some(crd_kind) = missing_crd
        && matches!(kind, Kind::SyncUnknown | Kind::SyncFailed | Kind::OutOfSync)
    {
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
    if kind == Kind::PrunePending && !s.sync_policy.prune {
        // The real resources, as `argocd app sync --resource` names them (GROUP:KIND:NAME, the group empty for core).
        let flags: Vec<String> = view
            .resources
            .iter()
            .take(5)
            .map(|r| format!(" --resource {}:{}:{}", r.group, r.kind, r.name))
            .collect();
        let (these, are, them) = match view.resources.len() {
            1 => ("This resource was", "is", "it"),
            _ => ("These resources were", "are", "them"),
        };
        out.push(hint(
            "prune_disabled",
            "Prune is off",
            format!(
                "{these} removed from Git but {are} still running in the cluster, because automated prune is off. \
                 Remove {them}: `argocd app sync {app}{ns_flag} --prune{}`, or enable syncPolicy.automated.prune. \
                 Annotate what must never be removed with argocd.argoproj.io/sync-options: Prune=false.",
                flags.concat()
            ),
        ));
    }
    if kind == Kind::Degraded {
        out.extend(degraded(state, view));
    }
    if kind == Kind::OutOfSync && s.sync_policy.automated && !s.sync_policy.self_heal {
        out.push(hint(
            "no_self_heal",
            "Automated sync without selfHeal",
            "Changes made in the cluster are never reverted while Git does not change: enable \
             syncPolicy.automated.selfHeal, or fix the drift in Git."
                .into(),
        ));
    }
    if kind == Kind::OutOfSync && !s.sync_policy.automated {
        out.push(hint(
            "manual_sync",
            "Auto-sync is off",
            format!(
                "Nothing syncs this Application by itself. Review the diff (`argocd app diff {app}{ns_flag}`) \
                 and sync (`argocd app sync {app}{ns_flag}`), or enable syncPolicy.automated. If the difference \
                 is harmless, ignore it with spec.ignoreDifferences so that OutOfSync means something again."
            ),
        ));
    }
    if let Some(op) = &s.operation
        && kind == Kind::SyncFailed
        && let Some(limit) = op.retry_limit
        && limit > 0
        && op.retry_count >= limit
    {
        out.push(hint(
            "retry_exhausted",
            "Retry limit exhausted",
            format!(
                "The sync was retried {} times (limit {limit}) and gave up. Fix the cause, then sync again: \
                 `argocd app sync {app}{ns_flag}`.",
                op.retry_count
            ),
        ));
    }
    if s.conditions.iter().any(|c| c.r#type == "InvalidSpecError")
        && matches!(kind, Kind::SyncUnknown | Kind::SyncFailed)
    {
        out.push(hint(
            "invalid_spec",
            "The Application spec is invalid",
            "Argo CD cannot use this Application's spec (see the message): check the repository URL and path, \
             the target revision, the destination cluster and namespace, and that the project allows them."
                .into(),
        ));
    }
    if s.conditions.iter().any(|c| c.r#type == "SharedResourceWarning") {
        out.push(hint(
            "shared_resource",
            "A resource is managed by two Applications",
            "Two Applications manage the same resource and will fight over it: keep it in one of them.".into(),
        ));
    }
    if let Some(m) = msgs
        .iter()
        .find(|m| m.contains("error building typed value from config resource"))
        && matches!(kind, Kind::SyncUnknown | Kind::SyncFailed | Kind::OutOfSync)
    {
        let field = m
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with('.'))
            .unwrap_or("a field")
            .chars()
            .take(200)
            .collect::<String>();
        out.push(hint(
            "schema_mismatch",
            "A manifest does not match its schema",
            format!(
                "Argo CD cannot compare a manifest with the cluster because a field has the wrong type ({field}). \
                 Fix the manifest in Git — often a number written as a quoted string, e.g. runAsUser: \"1000\" — \
                 or, for a custom resource, update the CRD in the cluster to the version the manifest is written for."
            ),
        ));
    }
    if s.conditions.iter().any(|c| c.r#type == "OrphanedResourceWarning")
        && matches!(kind, Kind::OutOfSync | Kind::PrunePending | Kind::SyncUnknown)
    {
        out.push(hint(
            "orphaned_resources",
            "Orphaned resources in the namespace",
            "The destination namespace holds resources no Application manages (OrphanedResourceWarning): \
             leftovers of a rename or a manual change. Review them in the Argo CD UI (Orphaned resources) and delete \
             them or add them to Git; ignore expected ones with the project's orphanedResources.ignore."
                .into(),
        ));
    }
    if kind == Kind::Pruned {
        let prev = view.previous_revision.as_deref().unwrap_or("PREVIOUS_REVISION");
        let after = view.revision.as_deref().unwrap_or("the current revision");
        let names: Vec<String> = view
            .resources
            .iter()
            .map(|r| format!("{} {}", r.kind, r.name))
            .collect();
        out.push(hint(
            "pruned_recovery",
            "If this deletion was a mistake",
            format!(
                "Find the manifests in the previous revision: `argocd app history {app}{ns_flag}` then \
                 `argocd app manifests {app}{ns_flag} --revision {prev}`; restore {} as a Git commit (revert the \
                 change made in {after}); let the next sync recreate it; verify the workloads that used it.",
                names.join(", ")
            ),
        ));
        for (old, new) in renames(state) {
            out.push(hint(
                "rename",
                "Looks like a rename",
                format!(
                    "{} {old} was pruned and {} {new} was created in the same sync: a rename deletes the old object \
                     before every consumer uses the new one. Do renames as add → migrate consumers → remove.",
                    view.resources
                        .iter()
                        .find(|r| r.name == old)
                        .map(|r| r.kind.as_str())
                        .unwrap_or(""),
                    view.resources
                        .iter()
                        .find(|r| r.name == old)
                        .map(|r| r.kind.as_str())
                        .unwrap_or("")
                ),
            ));
        }
        if super::is_production(s, rules) {
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
    out
}

/// Why an Application is Degraded, from its resources' and its own health messages: a rollout past its deadline,
/// an image that cannot be pulled, a container that keeps crashing or runs out of memory, a pod that cannot be
/// scheduled, a job out of retries. Each hint names the resource whose message says so (else the first one).
fn degraded(state: &AppState, view: &Incident) -> Vec<Hint> {
    let s = &state.snapshot;
    let app_messages: Vec<&str> = view
        .messages
        .iter()
        .map(String::as_str)
        .chain(s.health_message.as_deref())
        .collect();
    // The resource a rule's words point at, or the first unhealthy one when only the Application's message has them.
    let about = |needles: &[&str]| -> Option<(String, String)> {
        let says = |t: &str| needles.iter().any(|n| t.contains(n));
        let r = view.resources.iter().find(|r| says(&r.message)).or_else(|| {
            app_messages
                .iter()
                .any(|m| says(m))
                .then(|| view.resources.first())
                .flatten()
        });
        let target = |r: &crate::domain::ResourceRef| format!("{}/{}", r.kind.to_lowercase(), r.name);
        match r {
            Some(r) => Some((
                Some(r.namespace.as_str())
                    .filter(|n| !n.is_empty())
                    .or(s.destination.namespace.as_deref())
                    .unwrap_or("NAMESPACE")
                    .to_string(),
                target(r),
            )),
            None if app_messages.iter().any(|m| says(m)) => Some((
                s.destination.namespace.clone().unwrap_or_else(|| "NAMESPACE".into()),
                "deployment/NAME".into(),
            )),
            None => None,
        }
    };
    let mut out = Vec::new();
    let image = about(&["ImagePullBackOff", "ErrImagePull", "pulling image", "manifest unknown"]);
    if let Some((ns, target)) = &image {
        out.push(hint(
            "image_pull",
            "The image cannot be pulled",
            format!(
                "Check the image name and tag in Git, that the registry has it, and the pull secret: \
                 `kubectl -n {ns} describe {target}` shows the failing image in the pods' events."
            ),
        ));
    }
    let crash = about(&["CrashLoopBackOff", "Back-off restarting", "OOMKilled"]);
    if let Some((ns, target)) = &crash {
        out.push(hint(
            "crash_loop",
            "A container keeps crashing",
            format!(
                "Read why it stopped: `kubectl -n {ns} logs {target} --previous`; OOMKilled means its memory limit \
                 is too low for it."
            ),
        ));
    }
    let unschedulable = about(&[
        "Insufficient cpu",
        "Insufficient memory",
        "Unschedulable",
        "had untolerated taint",
    ]);
    if let Some((ns, target)) = &unschedulable {
        out.push(hint(
            "unschedulable",
            "Pods cannot be scheduled",
            format!(
                "No node can take the pods (resources, node selector, taints): `kubectl -n {ns} describe {target}` \
                 says which; lower the requests or add capacity."
            ),
        ));
    }
    if let Some((ns, target)) = about(&["BackoffLimitExceeded", "backoff limit"]) {
        out.push(hint(
            "job_failed",
            "A job ran out of retries",
            format!(
                "Read the last pod's logs: `kubectl -n {ns} logs {target}`; fix the cause, then sync to run it again."
            ),
        ));
    }
    // A rollout past its deadline is explained by the hints above when one applies.
    let explained = image.is_some() || crash.is_some() || unschedulable.is_some();
    if let Some((ns, target)) = about(&["progress deadline", "ProgressDeadlineExceeded"]).filter(|_| !explained) {
        out.push(hint(
            "rollout_stuck",
            "The rollout is stuck",
            format!(
                "New pods did not become ready in time: `kubectl -n {ns} rollout status {target}` and \
                 `kubectl -n {ns} describe {target}` show why (image, crash, probe, scheduling). Roll back with \
                 `argocd app rollback {}` if the previous revision was healthy.",
                s.app.name
            ),
        ));
    }
    if let (true, Some(r)) = (out.is_empty(), view.resources.first()) {
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
    out
}

/// Pairs (pruned name, created name) of the same kind in the last sync: likely renames.
pub fn renames(state: &AppState) -> Vec<(String, String)> {
    let Some(op) = &state.snapshot.operation else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in op.resources.iter().filter(|r| r.status == "Pruned") {
        if let Some(c) = op.resources.iter().find(|r| {
            r.kind == p.kind
                && r.name != p.name
                && r.status == "Synced"
                && (r.message.ends_with(" created") || r.message.contains("created"))
        }) {
            out.push((p.name.clone(), c.name.clone()));
        }
    }
    out
}
