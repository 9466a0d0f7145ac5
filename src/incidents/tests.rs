//! Table tests of the pure incident decisions.

use super::*;
use crate::argocd::parse_body;
use crate::state::{Outcome, apply};

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).expect("time").with_timezone(&Utc)
}

fn state_of(body: &str, now: DateTime<Utc>) -> AppState {
    let snap = parse_body(body.as_bytes(), 64).expect("valid body");
    match apply(None, snap, now) {
        Outcome::Changed { state, .. } => *state,
        other => panic!("unexpected {other:?}"),
    }
}

/// What `body`, received at `now`, holds under `rules` (for team `t`), and the kinds it keeps open (for `decide`).
fn held_at(body: &str, now: DateTime<Utc>, rules: &RulesSettings) -> (Vec<Held>, HashSet<Kind>) {
    let s = state_of(body, now);
    let mut keep = HashSet::new();
    let held = held_conditions(&s, rules, "t", None, &mut keep);
    (held, keep)
}

/// An Application whose sync status is `sync`, with one condition of `kind` saying `message`.
fn condition(sync: &str, kind: &str, message: &str) -> String {
    serde_json::json!({
        "metadata": {"name": "a"},
        "status": {"sync": {"status": sync}, "conditions": [{"type": kind, "message": message}]},
    })
    .to_string()
}

fn kinds(state: &AppState, rules: &RulesSettings) -> Vec<Kind> {
    let mut keep = HashSet::new();
    held_conditions(state, rules, "team", None, &mut keep)
        .into_iter()
        .map(|h| h.kind)
        .collect()
}

#[test]
fn each_kind_is_held_by_its_condition() {
    let now = t("2025-01-01T00:00:00Z");
    let rules = RulesSettings::default();
    let cases: [(&str, &[Kind]); 7] = [
        (
            r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"Synced"},"health":{"status":"Healthy"}}}"#,
            &[],
        ),
        (
            r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"OutOfSync"},"health":{"status":"Healthy"}}}"#,
            &[Kind::OutOfSync],
        ),
        (
            r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"Synced"},"health":{"status":"Missing"}}}"#,
            &[Kind::Degraded],
        ),
        (
            r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"Unknown"},"health":{"status":"Healthy"}}}"#,
            &[Kind::SyncUnknown],
        ),
        (
            r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"OutOfSync"},"health":{"status":"Healthy"},
               "resources":[{"kind":"CronJob","name":"reminders","namespace":"billing","status":"OutOfSync","requiresPruning":true}]}}"#,
            &[Kind::OutOfSync, Kind::PrunePending],
        ),
        (
            r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"OutOfSync"},"health":{"status":"Healthy"},
               "operationState":{"phase":"Failed","message":"one or more objects failed to apply","startedAt":"2025-01-01T00:00:00Z"}}}"#,
            &[Kind::OutOfSync, Kind::SyncFailed],
        ),
        (
            r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"Synced"},"health":{"status":"Healthy"},
               "operationState":{"phase":"Succeeded","startedAt":"2025-01-01T00:00:00Z","syncResult":{"resources":[
               {"kind":"ConfigMap","name":"payments-config","namespace":"pay","status":"Pruned","message":"pruned"}]}}}}"#,
            &[Kind::Pruned],
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(kinds(&state_of(body, now), &rules), expected, "{body}");
    }
}

#[test]
fn disabled_rules_hold_nothing() {
    let rules = crate::configuration::Settings::from_yaml("rules: {out_of_sync: {enabled: false}}")
        .expect("valid")
        .rules;
    let s = state_of(
        r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"OutOfSync"},"health":{"status":"Healthy"}}}"#,
        t("2025-01-01T00:00:00Z"),
    );
    assert!(kinds(&s, &rules).is_empty());
}

#[test]
fn a_new_condition_is_pending_until_its_for_has_elapsed() {
    let rules = RulesSettings::default();
    let since = t("2025-01-01T00:00:00Z");
    let (held, keep) = held_at(
        r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"OutOfSync"},"health":{"status":"Healthy"}}}"#,
        since,
        &rules,
    );
    let d = decide(&[], held.clone(), &keep, &rules, since);
    match &d[0] {
        Decision::Open { fire_at, fire_now, .. } => {
            assert_eq!(*fire_at, since + chrono::Duration::hours(1));
            assert!(!fire_now);
        }
        other => panic!("{other:?}"),
    }
    // Seen again long after: an open incident is refreshed, not opened twice.
    let open = [OpenIncident {
        id: 7,
        kind: Kind::OutOfSync,
        fingerprint: held[0].fingerprint.clone(),
        state: IncidentState::Pending,
    }];
    let d = decide(&open, held, &keep, &rules, since + chrono::Duration::hours(2));
    assert!(matches!(d.as_slice(), [Decision::Refresh { id: 7, .. }]));
    // Gone: resolved.
    let d = decide(&open, Vec::new(), &keep, &rules, since);
    assert_eq!(d, vec![Decision::Resolve { id: 7 }]);
}

#[test]
fn a_running_sync_does_not_resolve_a_failed_one() {
    let rules = RulesSettings::default();
    let (held, keep) = held_at(
        r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"OutOfSync"},"health":{"status":"Healthy"},
           "operationState":{"phase":"Running","startedAt":"2025-01-01T00:05:00Z"}}}"#,
        t("2025-01-01T00:05:00Z"),
        &rules,
    );
    let open = [OpenIncident {
        id: 1,
        kind: Kind::SyncFailed,
        fingerprint: "old-op".into(),
        state: IncidentState::Firing,
    }];
    let d = decide(&open, held, &keep, &rules, t("2025-01-01T00:05:00Z"));
    assert!(!d.iter().any(|x| matches!(x, Decision::Resolve { .. })), "{d:?}");
}

#[test]
fn hints_from_known_failures() {
    let rules = RulesSettings::default();
    let now = t("2025-01-01T00:00:00Z");
    let cases: [(String, Kind, &str); 11] = [
        (
            condition("OutOfSync", "OrphanedResourceWarning", "Application has 3 orphaned resources"),
            Kind::OutOfSync,
            "orphaned_resources",
        ),
        (
            condition("OutOfSync", "SharedResourceWarning", "ConfigMap/x is part of applications a and b"),
            Kind::OutOfSync,
            "shared_resource",
        ),
        (
            condition("Unknown", "ComparisonError", "Failed to load live state: no matches for kind \"ServiceMonitor\" in version \"monitoring.coreos.com/v1\""),
            Kind::SyncUnknown,
            "missing_crd",
        ),
        (
            r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"OutOfSync"},"operationState":{"phase":"Failed",
               "startedAt":"2025-01-01T00:00:00Z","message":"the server could not find the requested resource"}}}"#.into(),
            Kind::SyncFailed,
            "missing_crd",
        ),
        (
            r#"{"metadata":{"name":"a"},"spec":{"syncPolicy":{"automated":{"prune":false}}},"status":{"sync":{"status":"OutOfSync"},
               "resources":[{"kind":"CronJob","name":"r","namespace":"n","status":"OutOfSync","requiresPruning":true}]}}"#.into(),
            Kind::PrunePending,
            "prune_disabled",
        ),
        (
            r#"{"metadata":{"name":"a"},"spec":{"syncPolicy":{"automated":{"prune":true}}},"status":{"sync":{"status":"OutOfSync"}}}"#.into(),
            Kind::OutOfSync,
            "no_self_heal",
        ),
        (
            r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"OutOfSync"},"operationState":{"phase":"Failed","retryCount":5,
               "startedAt":"2025-01-01T00:00:00Z","operation":{"retry":{"limit":5}},"message":"failed"}}}"#.into(),
            Kind::SyncFailed,
            "retry_exhausted",
        ),
        (
            condition("Unknown", "InvalidSpecError", "repo not permitted"),
            Kind::SyncUnknown,
            "invalid_spec",
        ),
        // Argo CD's own wording for a missing CRD, beside an orphaned-resources warning: the CRD is the cause.
        (
            r#"{"metadata":{"name":"mon"},"status":{"sync":{"status":"Unknown"},"conditions":[
               {"type":"OrphanedResourceWarning","message":"Application has 1 orphaned resources"},
               {"type":"ComparisonError","message":"Failed to load target state: The Kubernetes API could not find monitoring.coreos.com/ServiceMonitor for requested resource monitoring/mon. Make sure the \"ServiceMonitor\" CRD is installed on the destination cluster."}]}}"#.into(),
            Kind::SyncUnknown,
            "missing_crd",
        ),
        (
            condition("Unknown", "ComparisonError", "resource mapping not found for name: \"m\" namespace: \"\" from \"\": no matches for kind \"PodMonitor\" in version \"monitoring.coreos.com/v1\"\nensure CRDs are installed first"),
            Kind::SyncUnknown,
            "missing_crd",
        ),
        // Capture 012: a field of the wrong type in a manifest.
        (
            condition("Unknown", "ComparisonError", "Failed to compare desired state to live state: failed to calculate diff: error calculating structured merge diff: error building typed value from config resource: errors:\n  .spec.template.spec.containers[name=\"a\"].securityContext.runAsUser: expected numeric (int or float), got string"),
            Kind::SyncUnknown,
            "schema_mismatch",
        ),
    ];
    for (body, kind, hint) in cases {
        let (held, _) = held_at(&body, now, &rules);
        let h = held
            .iter()
            .find(|h| h.kind == kind)
            .unwrap_or_else(|| panic!("{kind} not held for {body}"));
        assert!(
            h.view.hints.iter().any(|x| x.id == hint),
            "{hint} missing for {body}: {:?}",
            h.view.hints
        );
    }
}

#[test]
fn a_rename_is_called_out_and_production_prunes_are_critical() {
    let rules = crate::configuration::Settings::from_yaml("rules: {pruned: {production: {namespaces: ['prod-*']}}}")
        .expect("valid")
        .rules;
    let s = state_of(
        r#"{"metadata":{"name":"payments"},"spec":{"destination":{"namespace":"prod-eu"}},"status":{"sync":{"status":"Synced"},
           "history":[{"revision":"aaa111"},{"revision":"bbb222"}],
           "operationState":{"phase":"Succeeded","startedAt":"2025-01-01T00:00:00Z","operation":{"initiatedBy":{"automated":true}},
           "syncResult":{"revision":"bbb222","resources":[
             {"kind":"ConfigMap","name":"payments-config","namespace":"prod-eu","status":"Pruned","message":"pruned"},
             {"kind":"ConfigMap","name":"payments-cfg","namespace":"prod-eu","status":"Synced","message":"configmap/payments-cfg created"}]}}}}"#,
        t("2025-01-01T00:00:00Z"),
    );
    let mut keep = HashSet::new();
    let held = held_conditions(&s, &rules, "pay", None, &mut keep);
    let p = held.iter().find(|h| h.kind == Kind::Pruned).expect("pruned held");
    assert_eq!(p.severity, Severity::Critical);
    assert_eq!(p.view.previous_revision.as_deref(), Some("aaa111"));
    assert_eq!(p.view.initiated_by.as_deref(), Some("automated sync"));
    let ids: Vec<&str> = p.view.hints.iter().map(|h| h.id.as_str()).collect();
    assert!(
        ids.contains(&"rename") && ids.contains(&"pruned_recovery") && ids.contains(&"production_prune"),
        "{ids:?}"
    );
    let recovery = &p
        .view
        .hints
        .iter()
        .find(|h| h.id == "pruned_recovery")
        .expect("recovery")
        .text;
    assert!(
        recovery.contains("argocd app manifests payments --revision aaa111"),
        "{recovery}"
    );
}

#[test]
fn an_application_being_deleted_holds_nothing() {
    // Object 03 of the fixtures: OutOfSync and Degraded, with a deletionTimestamp (the argo-cd metrics test app).
    let now = t("2025-01-01T00:00:00Z");
    let body = r#"{"metadata":{"name":"my-app-3","deletionTimestamp":"2020-03-16T09:17:45Z"},
                  "status":{"sync":{"status":"OutOfSync"},"health":{"status":"Degraded"}}}"#;
    let state = state_of(body, now);
    assert_eq!(state.lifecycle(), crate::state::Lifecycle::Deleting);
    assert_eq!(kinds(&state, &RulesSettings::default()), []);
    let mut live = state.clone();
    live.snapshot.deleting = false;
    assert_eq!(
        kinds(&live, &RulesSettings::default()),
        [Kind::OutOfSync, Kind::Degraded]
    );
}

#[test]
fn the_missing_crd_hint_names_the_kind_from_argo_cds_own_wording() {
    let now = t("2025-01-01T00:00:00Z");
    let body = r#"{"metadata":{"name":"mon"},"status":{"sync":{"status":"Unknown"},"conditions":[{"type":"ComparisonError",
        "message":"Make sure the \"ServiceMonitor\" CRD is installed on the destination cluster."}]}}"#;
    let (held, _) = held_at(body, now, &RulesSettings::default());
    let hint = held[0]
        .view
        .hints
        .iter()
        .find(|h| h.id == "missing_crd")
        .expect("missing_crd");
    assert!(hint.text.contains("of kind ServiceMonitor"), "{}", hint.text);
}

#[test]
fn a_failed_sync_started_when_argo_cd_says_it_finished() {
    let now = t("2025-01-01T02:00:00Z");
    let body = r#"{"metadata":{"name":"a"},"status":{"sync":{"status":"OutOfSync"},"operationState":{"phase":"Failed",
        "startedAt":"2025-01-01T00:59:00Z","finishedAt":"2025-01-01T01:00:00Z","message":"one or more objects failed to apply"}}}"#;
    let (held, keep) = held_at(body, now, &RulesSettings::default());
    let failed = held.iter().find(|h| h.kind == Kind::SyncFailed).expect("held");
    assert_eq!(
        failed.since,
        Some(t("2025-01-01T01:00:00Z")),
        "Argo CD's finishedAt, not the receive time"
    );
    let decisions = decide(&[], held, &keep, &RulesSettings::default(), now);
    let since = decisions.iter().find_map(|d| match d {
        Decision::Open { held, since, .. } if held.kind == Kind::SyncFailed => Some(*since),
        _ => None,
    });
    assert_eq!(since, Some(t("2025-01-01T01:00:00Z")));
}

/// Every `argocd app` command a hint gives names an Application outside the `argocd` namespace with
/// `--app-namespace`, the rollback of a stuck rollout too.
#[test]
fn commands_name_the_application_namespace() {
    let rules = RulesSettings::default();
    let body = serde_json::json!({
        "metadata": {"name": "web", "namespace": "team-a"},
        "status": {"sync": {"status": "Synced"}, "health": {"status": "Degraded",
                   "message": "Deployment \"web\" exceeded its progress deadline"}},
    })
    .to_string();
    let (held, _) = held_at(&body, t("2025-01-01T00:00:00Z"), &rules);
    let degraded = held.iter().find(|h| h.kind == Kind::Degraded).expect("Degraded held");
    let rollout = (degraded.view.hints.iter())
        .find(|h| h.id == "rollout_stuck")
        .unwrap_or_else(|| panic!("{:?}", degraded.view.hints));
    assert!(
        rollout
            .text
            .contains("`argocd app rollback web --app-namespace team-a`"),
        "{}",
        rollout.text
    );
}

/// An Application Degraded with `message` as its health message.
fn degraded_with(message: &str) -> String {
    serde_json::json!({
        "metadata": {"name": "a"},
        "status": {"sync": {"status": "Synced"}, "health": {"status": "Degraded", "message": message}},
    })
    .to_string()
}

#[test]
fn each_message_hint_matches_a_real_argo_cd_message_and_not_another() {
    let now = t("2025-10-01T00:00:00Z");
    let rules = RulesSettings::default();
    let comparison = |m: &str| condition("Unknown", "ComparisonError", m);
    // (body, incident kind, hint id, whether it must be there, words its text must (not) have, why)
    type Case<'a> = (String, Kind, &'a str, bool, Option<(&'a str, bool)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            comparison(
                "resource mapping not found for name: \"m\" namespace: \"\" from \"\": no matches for kind \"PodMonitor\" in version \"monitoring.coreos.com/v1\"\nensure CRDs are installed first",
            ),
            Kind::SyncUnknown,
            "missing_crd",
            true,
            Some(("kind PodMonitor", true)),
            "no matches for kind",
        ),
        (
            comparison("Failed to load live state: the server has asked for the client to provide credentials"),
            Kind::SyncUnknown,
            "missing_crd",
            false,
            None,
            "credentials are not a missing CRD",
        ),
        (
            comparison(
                "Failed to compare desired state to live state: failed to calculate diff: error calculating structured merge diff: error building typed value from config resource: errors:\n  .spec.template.spec.containers[name=\"a\"].securityContext.runAsUser: expected numeric (int or float), got string",
            ),
            Kind::SyncUnknown,
            "schema_mismatch",
            true,
            Some(("quoted string", true)),
            "a value of the wrong type",
        ),
        (
            comparison(
                "Failed to compare desired state to live state: failed to calculate diff: error calculating structured merge diff: error building typed value from config resource: .metadata.labels.app.kubernetes.io/version: field not declared in schema",
            ),
            Kind::SyncUnknown,
            "schema_mismatch",
            true,
            Some(("quoted string", false)),
            "a field the schema does not have is no type error",
        ),
        (
            comparison("Deployment.apps \"a\" is invalid: spec.selector: Invalid value: field is immutable"),
            Kind::SyncUnknown,
            "schema_mismatch",
            false,
            None,
            "an immutable field is another problem",
        ),
        (
            degraded_with("Back-off pulling image \"ghcr.io/acme/api:9.9.9\": ErrImagePull"),
            Kind::Degraded,
            "image_pull",
            true,
            None,
            "an image that cannot be pulled",
        ),
        (
            degraded_with("back-off 5m0s restarting failed container=api pod=api-7c9: CrashLoopBackOff"),
            Kind::Degraded,
            "crash_loop",
            true,
            None,
            "a crash loop",
        ),
        (
            degraded_with("0/3 nodes are available: 3 Insufficient cpu."),
            Kind::Degraded,
            "unschedulable",
            true,
            None,
            "no node can take it",
        ),
        (
            degraded_with("Job has reached the specified backoff limit"),
            Kind::Degraded,
            "job_failed",
            true,
            None,
            "a job out of retries",
        ),
        (
            degraded_with("Deployment \"a\" exceeded its progress deadline"),
            Kind::Degraded,
            "rollout_stuck",
            true,
            None,
            "a rollout past its deadline",
        ),
        (
            degraded_with("Deployment \"a\" exceeded its progress deadline"),
            Kind::Degraded,
            "image_pull",
            false,
            None,
            "a stuck rollout alone is not an image problem",
        ),
        (
            degraded_with(
                "Back-off pulling image \"x\": ErrImagePull; Deployment \"a\" exceeded its progress deadline",
            ),
            Kind::Degraded,
            "rollout_stuck",
            false,
            None,
            "an image that cannot be pulled explains the stuck rollout",
        ),
    ];
    for (body, kind, id, present, words, why) in cases {
        let (held, _) = held_at(&body, now, &rules);
        let h = held
            .iter()
            .find(|h| h.kind == kind)
            .unwrap_or_else(|| panic!("{why}: {kind} not held"));
        let found = h.view.hints.iter().find(|x| x.id == id);
        assert_eq!(found.is_some(), present, "{why}: {:?}", h.view.hints);
        if let (Some(hint), Some((w, has))) = (found, words) {
            assert_eq!(hint.text.contains(w), has, "{why}: {}", hint.text);
        }
    }
}

#[test]
fn every_stored_kind_has_a_finder_and_chose_condition_or_event() {
    // Adding a kind to `Kind::ALL` without its finder (or the other way round) fails here, not in production.
    // `deleted` is the one stored kind found from a change of lifecycle, not from a state (`deletion`); `storm` is
    // found among incidents (`storm`).
    let found: Vec<Kind> = FINDERS.iter().map(|(k, _)| *k).collect();
    let from_states = |k: &Kind| !matches!(k, Kind::Deleted | Kind::Storm);
    for kind in Kind::ALL.into_iter().filter(from_states) {
        assert_eq!(found.iter().filter(|k| **k == kind).count(), 1, "{kind} has one finder");
        let _ = kind.occurrence();
    }
    assert!(!found.contains(&Kind::Deleted) && !found.contains(&Kind::Storm));
    assert_eq!(
        found.len(),
        Kind::ALL.len() - 2,
        "no finder for a kind outside Kind::ALL"
    );
}

/// A sync of `a` started at midnight and still `phase`, with `results` in its sync result and `resources` in the
/// Application's status.
fn running(phase: &str, message: &str, results: serde_json::Value, resources: serde_json::Value) -> String {
    serde_json::json!({
        "metadata": {"name": "a", "namespace": "argocd"},
        "spec": {"destination": {"namespace": "pay"}},
        "status": {
            "sync": {"status": "OutOfSync"},
            "health": {"status": "Progressing"},
            "resources": resources,
            "operationState": {"phase": phase, "message": message, "startedAt": "2025-01-01T00:00:00Z",
                "syncResult": {"resources": results}}
        }
    })
    .to_string()
}

#[test]
fn a_sync_still_running_names_the_hook_it_waits_on_and_counts_from_its_start() {
    let body = running(
        "Running",
        "waiting for completion of hook batch/Job/db-migrate",
        serde_json::json!([{"group": "batch", "kind": "Job", "namespace": "pay", "name": "db-migrate",
            "hookType": "PreSync", "hookPhase": "Running", "message": "job is still running", "syncPhase": "PreSync"}]),
        serde_json::json!([]),
    );
    let (held, keep) = held_at(&body, t("2025-01-01T00:40:00Z"), &RulesSettings::default());
    let h = held
        .iter()
        .find(|h| h.kind == Kind::SyncRunning)
        .expect("sync_running held");
    assert_eq!(
        h.since,
        Some(t("2025-01-01T00:00:00Z")),
        "counted from the operation's start"
    );
    assert_eq!(h.view.condition, "sync still running: waiting for hook Job db-migrate");
    assert_eq!(
        h.view.summary,
        "argocd/a: sync still running — waiting for completion of hook batch/Job/db-migrate"
    );
    assert_eq!(h.view.resources.len(), 1);
    assert_eq!(h.view.resources[0].status, "hook Running");
    assert_eq!(h.view.resources[0].message, "job is still running");
    let hint = h.view.hints.iter().find(|x| x.id == "stuck_sync").expect("a hint");
    assert!(
        hint.text.contains("kubectl logs -n pay job/db-migrate"),
        "{}",
        hint.text
    );
    assert!(hint.text.contains("argocd app terminate-op a"), "{}", hint.text);
    assert!(keep.contains(&Kind::SyncFailed), "whether it fails cannot be told yet");
    // A new operation is a new occurrence: its own incident.
    let later = body.replace("2025-01-01T00:00:00Z", "2025-01-01T02:00:00Z");
    let (again, _) = held_at(&later, t("2025-01-01T02:40:00Z"), &RulesSettings::default());
    let h2 = again.iter().find(|h| h.kind == Kind::SyncRunning).expect("held");
    assert_ne!(h.fingerprint, h2.fingerprint);
}

#[test]
fn a_sync_waiting_for_healthy_names_the_resources_not_yet_healthy_and_a_finished_one_holds_nothing() {
    let body = running(
        "Running",
        "waiting for healthy state of apps/Deployment/api",
        serde_json::json!([{"group": "apps", "kind": "Deployment", "namespace": "pay", "name": "api",
            "status": "Synced", "message": "deployment.apps/api configured", "syncPhase": "Sync"}]),
        serde_json::json!([{"group": "apps", "kind": "Deployment", "namespace": "pay", "name": "api",
            "status": "Synced", "health": {"status": "Progressing",
            "message": "Waiting for rollout to finish: 1 old replicas are pending termination..."}}]),
    );
    let (held, _) = held_at(&body, t("2025-01-01T00:40:00Z"), &RulesSettings::default());
    let h = held
        .iter()
        .find(|h| h.kind == Kind::SyncRunning)
        .expect("sync_running held");
    assert_eq!(
        h.view.condition,
        "sync still running: waiting for Deployment api to be healthy"
    );
    assert_eq!(h.view.resources[0].status, "Progressing");
    let p = held
        .iter()
        .find(|h| h.kind == Kind::Progressing)
        .expect("progressing held too");
    assert_eq!(p.view.summary, "argocd/a is Progressing: Deployment api is not ready");
    assert!(p.view.resources[0].message.starts_with("Waiting for rollout to finish"));
    let hint = p.view.hints.iter().find(|x| x.id == "stuck_rollout").expect("a hint");
    assert!(
        hint.text.contains("kubectl rollout status -n pay deployment/api"),
        "{}",
        hint.text
    );
    let terminating = body.replace("\"Running\"", "\"Terminating\"");
    let (held, _) = held_at(&terminating, t("2025-01-01T00:40:00Z"), &RulesSettings::default());
    let h = held
        .iter()
        .find(|h| h.kind == Kind::SyncRunning)
        .expect("terminating is still running");
    assert!(h.view.condition.starts_with("sync terminating"), "{}", h.view.condition);
    let done = body.replace("\"Running\"", "\"Succeeded\"");
    let (held, _) = held_at(&done, t("2025-01-01T00:40:00Z"), &RulesSettings::default());
    assert!(!held.iter().any(|h| h.kind == Kind::SyncRunning), "the operation ended");
}

#[test]
fn sync_running_and_progressing_fire_after_their_half_hour_from_when_they_began() {
    let rules = RulesSettings::default();
    let body = running("Running", "", serde_json::json!([]), serde_json::json!([]));
    // Herald first hears at 00:10 of a sync started at 00:00: it fires at 00:30, not 00:40.
    let now = t("2025-01-01T00:10:00Z");
    let (held, keep) = held_at(&body, now, &rules);
    let fire_at = |kind: Kind| {
        decide(&[], held.clone(), &keep, &rules, now)
            .into_iter()
            .find_map(|d| match d {
                Decision::Open { held, fire_at, .. } if held.kind == kind => Some(fire_at),
                _ => None,
            })
            .expect("opened")
    };
    assert_eq!(fire_at(Kind::SyncRunning), t("2025-01-01T00:30:00Z"));
    // Progressing counts from when Herald first saw the health (the state has no earlier time).
    assert_eq!(fire_at(Kind::Progressing), t("2025-01-01T00:40:00Z"));
    let off: RulesSettings = serde_json::from_value(serde_json::json!({
        "sync_running": {"enabled": false}, "progressing": {"for": "2h"}
    }))
    .expect("rules");
    let (held, _) = held_at(&body, now, &off);
    assert!(!held.iter().any(|h| h.kind == Kind::SyncRunning), "disabled");
    assert_eq!(off.rule(Kind::Progressing).r#for, std::time::Duration::from_secs(7200));
}

#[test]
fn a_deletion_is_told_while_something_fired_or_in_a_watched_namespace_and_not_otherwise() {
    let at = t("2025-01-01T10:02:00Z");
    let body = r#"{"metadata":{"name":"payments-api","namespace":"argocd","uid":"u1"},
        "spec":{"destination":{"namespace":"prod-pay"}},"status":{"sync":{"status":"OutOfSync"}}}"#;
    let before = state_of(body, t("2025-01-01T08:00:00Z"));
    let rules = RulesSettings::default();
    assert_eq!(
        deletion(&before, &[], &rules, "payments", None, at, crate::domain::Zone::UTC),
        None,
        "nothing fired: not news"
    );
    let firing = Incident {
        kind: Kind::OutOfSync,
        condition: "OutOfSync".into(),
        since: t("2025-01-01T08:02:00Z"),
        ..Default::default()
    };
    let told = deletion(
        &before,
        &[&firing],
        &rules,
        "payments",
        None,
        at,
        crate::domain::Zone::UTC,
    )
    .expect("told");
    assert_eq!(told.kind, Kind::Deleted);
    assert_eq!(
        told.severity,
        Severity::Info,
        "news by default: chat and e-mail, no ticket, no page"
    );
    assert_eq!(
        told.view.summary,
        "payments-api was deleted from Argo CD at 10:02 UTC while OutOfSync for 2 h; its incident is closed"
    );
    let watched: RulesSettings =
        serde_json::from_value(serde_json::json!({"deleted": {"namespaces": ["prod-*"], "severity": "warning"}}))
            .expect("rules");
    let healthy = deletion(&before, &[], &watched, "payments", None, at, crate::domain::Zone::UTC)
        .expect("every deletion in prod-*");
    assert_eq!(
        healthy.view.summary,
        "payments-api was deleted from Argo CD at 10:02 UTC"
    );
    assert_eq!(healthy.severity, Severity::Warning);
    let off: RulesSettings = serde_json::from_value(serde_json::json!({"deleted": {"enabled": false}})).expect("rules");
    assert_eq!(
        deletion(
            &before,
            &[&firing],
            &off,
            "payments",
            None,
            at,
            crate::domain::Zone::UTC
        ),
        None,
        "disabled"
    );
    let mut other = before.clone();
    other.snapshot.app.instance = "us".into();
    let us = deletion(
        &other,
        &[&firing],
        &rules,
        "payments",
        None,
        at,
        crate::domain::Zone::UTC,
    )
    .expect("told");
    assert!(
        us.view
            .summary
            .starts_with("payments-api was deleted from Argo CD (us) at 10:02 UTC")
    );
}
