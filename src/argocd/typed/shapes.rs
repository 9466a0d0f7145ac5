//! The shapes of what the typed reader reads: only the fields Herald keeps (serde skips the rest without building
//! anything), each typed as the tolerant reader requires it (`null` where it allows `null`).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::{Annotations, AnyStr, Obj, Str, present};

#[derive(Deserialize)]
pub(super) struct Body<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) app: Option<Obj<AppDoc<'a>>>,
    #[serde(borrow)]
    pub(super) timestamp: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) context: Option<Obj<Context<'a>>>,
    // A bare Application (no envelope) has these at the top.
    #[serde(borrow)]
    pub(super) kind: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) metadata: Option<Obj<Metadata<'a>>>,
    #[serde(borrow)]
    pub(super) spec: Option<Obj<Spec<'a>>>,
    #[serde(borrow)]
    pub(super) status: Option<Obj<Status<'a>>>,
}

#[derive(Deserialize)]
pub(super) struct Context<'a> {
    #[serde(rename = "argocdUrl", borrow)]
    pub(super) argocd_url: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct AppDoc<'a> {
    #[serde(borrow)]
    pub(super) kind: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) metadata: Option<Obj<Metadata<'a>>>,
    #[serde(borrow)]
    pub(super) spec: Option<Obj<Spec<'a>>>,
    #[serde(borrow)]
    pub(super) status: Option<Obj<Status<'a>>>,
}

#[derive(Deserialize)]
pub(super) struct Metadata<'a> {
    #[serde(borrow)]
    pub(super) name: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) namespace: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) uid: Option<Str<'a>>,
    pub(super) labels: Option<BTreeMap<String, String>>,
    pub(super) annotations: Option<Annotations>,
    #[serde(rename = "deletionTimestamp")]
    pub(super) deletion_timestamp: Option<AnyStr>,
}

#[derive(Deserialize)]
pub(super) struct Spec<'a> {
    #[serde(borrow)]
    pub(super) project: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) destination: Option<Obj<DestinationDoc<'a>>>,
    #[serde(rename = "syncPolicy")]
    pub(super) sync_policy: Option<Obj<SyncPolicyDoc>>,
    #[serde(borrow)]
    pub(super) source: Option<Obj<SourceDoc<'a>>>,
    #[serde(borrow)]
    pub(super) sources: Option<Vec<Obj<SourceDoc<'a>>>>,
}

#[derive(Deserialize)]
pub(super) struct DestinationDoc<'a> {
    #[serde(borrow)]
    pub(super) server: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) name: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) namespace: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct SyncPolicyDoc {
    pub(super) automated: Option<Obj<AutomatedDoc>>,
}

#[derive(Deserialize)]
pub(super) struct AutomatedDoc {
    pub(super) prune: Option<bool>,
    #[serde(rename = "selfHeal")]
    pub(super) self_heal: Option<bool>,
}

#[derive(Deserialize)]
pub(super) struct SourceDoc<'a> {
    #[serde(rename = "repoURL", borrow)]
    pub(super) repo_url: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) path: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) chart: Option<Str<'a>>,
    #[serde(rename = "targetRevision", borrow)]
    pub(super) target_revision: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct Status<'a> {
    #[serde(borrow)]
    pub(super) sync: Option<Obj<SyncDoc<'a>>>,
    #[serde(borrow)]
    pub(super) health: Option<Obj<HealthDoc<'a>>>,
    #[serde(rename = "operationState", borrow)]
    pub(super) operation_state: Option<Obj<OperationStateDoc<'a>>>,
    #[serde(borrow)]
    pub(super) resources: Option<Vec<Obj<ResourceDoc<'a>>>>,
    #[serde(borrow)]
    pub(super) conditions: Option<Vec<Obj<ConditionDoc<'a>>>>,
    #[serde(borrow)]
    pub(super) history: Option<Vec<Obj<HistoryDoc<'a>>>>,
    #[serde(rename = "reconciledAt", borrow)]
    pub(super) reconciled_at: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct SyncDoc<'a> {
    #[serde(borrow)]
    pub(super) status: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) revision: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) revisions: Option<Vec<Str<'a>>>,
}

#[derive(Deserialize)]
pub(super) struct HealthDoc<'a> {
    #[serde(borrow)]
    pub(super) status: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) message: Option<Str<'a>>,
    #[serde(rename = "lastTransitionTime", borrow)]
    pub(super) last_transition_time: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct OperationStateDoc<'a> {
    #[serde(borrow)]
    pub(super) phase: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) message: Option<Str<'a>>,
    #[serde(rename = "startedAt", borrow)]
    pub(super) started_at: Option<Str<'a>>,
    #[serde(rename = "finishedAt", borrow)]
    pub(super) finished_at: Option<Str<'a>>,
    /// Any type: the tolerant reader takes a number and reads anything else as 0.
    #[serde(rename = "retryCount")]
    pub(super) retry_count: Option<Value>,
    #[serde(borrow)]
    pub(super) operation: Option<Obj<OperationDoc<'a>>>,
    #[serde(rename = "syncResult", borrow)]
    pub(super) sync_result: Option<Obj<SyncResultDoc<'a>>>,
}

#[derive(Deserialize)]
pub(super) struct OperationDoc<'a> {
    #[serde(rename = "initiatedBy", borrow)]
    pub(super) initiated_by: Option<Obj<InitiatedByDoc<'a>>>,
    pub(super) retry: Option<Obj<RetryDoc>>,
    #[serde(borrow)]
    pub(super) sync: Option<Obj<SyncOperationDoc<'a>>>,
}

#[derive(Deserialize)]
pub(super) struct InitiatedByDoc<'a> {
    pub(super) automated: Option<bool>,
    #[serde(borrow)]
    pub(super) username: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct RetryDoc {
    /// Any type, as `retryCount`.
    pub(super) limit: Option<Value>,
}

#[derive(Deserialize)]
pub(super) struct SyncOperationDoc<'a> {
    #[serde(borrow)]
    pub(super) revision: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct SyncResultDoc<'a> {
    #[serde(borrow)]
    pub(super) revision: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) revisions: Option<Vec<Str<'a>>>,
    #[serde(borrow)]
    pub(super) resources: Option<Vec<Obj<ResultResourceDoc<'a>>>>,
}

#[derive(Deserialize)]
pub(super) struct ResultResourceDoc<'a> {
    #[serde(borrow)]
    pub(super) group: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) kind: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) namespace: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) name: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) status: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) message: Option<Str<'a>>,
    #[serde(rename = "hookPhase", borrow)]
    pub(super) hook_phase: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct ResourceDoc<'a> {
    #[serde(borrow)]
    pub(super) group: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) kind: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) namespace: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) name: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) status: Option<Str<'a>>,
    #[serde(rename = "requiresPruning")]
    pub(super) requires_pruning: Option<bool>,
    #[serde(borrow)]
    pub(super) health: Option<Obj<ResourceHealthDoc<'a>>>,
}

#[derive(Deserialize)]
pub(super) struct ResourceHealthDoc<'a> {
    #[serde(borrow)]
    pub(super) status: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) message: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct ConditionDoc<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) kind: Option<Str<'a>>,
    #[serde(borrow)]
    pub(super) message: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct HistoryDoc<'a> {
    #[serde(borrow)]
    pub(super) revision: Option<Str<'a>>,
}
