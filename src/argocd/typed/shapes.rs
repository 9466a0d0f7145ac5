//! The shapes of what the typed reader reads: only the fields Herald keeps (serde skips the rest without building
//! anything), each typed as the tolerant reader requires it (`null` where it allows `null`).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::{
    Annotations, AnyStr, Capped, Distinct, First, Images, Last, MAX_CONDITIONS, MAX_IMAGES, MAX_RESOURCES, MAX_SOURCES,
    NotFine, Obj, Str, present,
};

/// Declares a shape: a struct whose fields are all optional (`Option<…>` is added), read with serde. A field typed
/// `str` is a string borrowed from the body (`Str<'a>`, which serde borrows only when each field says so — the
/// macro says it); any other type is written as it is, with its own attributes.
macro_rules! shape {
    ($(#[$meta:meta])* $name:ident $(<$lt:lifetime>)? { $($fields:tt)* }) => {
        shape!(@fields [$(#[$meta])* $name $(<$lt>)?] [] $($fields)*);
    };
    (@fields $head:tt [$($done:tt)*] $(#[$attr:meta])* $field:ident: str $(, $($rest:tt)*)?) => {
        shape!(@fields $head [$($done)* $(#[$attr])* #[serde(borrow)] pub(super) $field: Option<Str<'a>>,]
            $($($rest)*)?);
    };
    (@fields $head:tt [$($done:tt)*] $(#[$attr:meta])* $field:ident: $ty:ty $(, $($rest:tt)*)?) => {
        shape!(@fields $head [$($done)* $(#[$attr])* pub(super) $field: Option<$ty>,] $($($rest)*)?);
    };
    (@fields [$(#[$meta:meta])* $name:ident $(<$lt:lifetime>)?] [$($done:tt)*]) => {
        #[derive(Deserialize)]
        $(#[$meta])*
        pub(super) struct $name $(<$lt>)? { $($done)* }
    };
}

// One shape for both forms Argo CD can send: the `{timestamp, context, app}` envelope, whose `app` is the
// Application, and a bare Application, whose keys are at the top. An envelope's `app` is read with this shape too
// (its own `app`, `timestamp` and `context`, which an Application does not have, are then not used): one list of the
// Application's keys, without `#[serde(flatten)]`, which buffers every key of the body into serde's content tree
// first, the very copy this reader exists to skip.
shape! {
    Body<'a> {
        #[serde(default, borrow, deserialize_with = "present")]
        app: Obj<Box<Body<'a>>>,
        timestamp: str,
        #[serde(borrow)]
        context: Obj<Context<'a>>,
        kind: str,
        #[serde(borrow)]
        metadata: Obj<Metadata<'a>>,
        #[serde(borrow)]
        spec: Obj<Spec<'a>>,
        #[serde(borrow)]
        status: Obj<Status<'a>>,
    }
}

shape! {
    Context<'a> {
        #[serde(rename = "argocdUrl")]
        argocd_url: str,
    }
}

shape! {
    Metadata<'a> {
        name: str,
        namespace: str,
        uid: str,
        #[serde(rename = "creationTimestamp")]
        creation_timestamp: str,
        labels: BTreeMap<String, String>,
        annotations: Annotations,
        #[serde(rename = "deletionTimestamp")]
        deletion_timestamp: AnyStr,
    }
}

shape! {
    Spec<'a> {
        project: str,
        #[serde(borrow)]
        destination: Obj<DestinationDoc<'a>>,
        #[serde(rename = "syncPolicy")]
        sync_policy: Obj<SyncPolicyDoc>,
        #[serde(borrow)]
        source: Obj<SourceDoc<'a>>,
        #[serde(borrow)]
        sources: Capped<Obj<SourceDoc<'a>>, First, MAX_SOURCES>,
    }
}

shape! {
    DestinationDoc<'a> {
        server: str,
        name: str,
        namespace: str,
    }
}

shape! {
    SyncPolicyDoc {
        automated: Obj<AutomatedDoc>,
    }
}

shape! {
    AutomatedDoc {
        prune: bool,
        #[serde(rename = "selfHeal")]
        self_heal: bool,
    }
}

shape! {
    SourceDoc<'a> {
        #[serde(rename = "repoURL")]
        repo_url: str,
        path: str,
        chart: str,
        #[serde(rename = "targetRevision")]
        target_revision: str,
    }
}

shape! {
    Status<'a> {
        #[serde(borrow)]
        sync: Obj<SyncDoc<'a>>,
        #[serde(borrow)]
        health: Obj<HealthDoc<'a>>,
        #[serde(rename = "operationState", borrow)]
        operation_state: Obj<OperationStateDoc<'a>>,
        #[serde(borrow)]
        resources: Capped<Obj<ResourceDoc<'a>>, NotFine, MAX_RESOURCES>,
        #[serde(borrow)]
        conditions: Capped<Obj<ConditionDoc<'a>>, First, MAX_CONDITIONS>,
        #[serde(borrow)]
        history: Capped<Obj<HistoryDoc<'a>>, Last, 2>,
        #[serde(borrow)]
        summary: Obj<SummaryDoc<'a>>,
        #[serde(rename = "reconciledAt")]
        reconciled_at: str,
    }
}

shape! {
    SummaryDoc<'a> {
        #[serde(borrow)]
        images: Capped<Str<'a>, Images, MAX_IMAGES>,
    }
}

shape! {
    SyncDoc<'a> {
        status: str,
        revision: str,
        #[serde(borrow)]
        revisions: Capped<Str<'a>, Distinct, MAX_SOURCES>,
    }
}

shape! {
    HealthDoc<'a> {
        status: str,
        message: str,
        #[serde(rename = "lastTransitionTime")]
        last_transition_time: str,
    }
}

shape! {
    OperationStateDoc<'a> {
        phase: str,
        message: str,
        #[serde(rename = "startedAt")]
        started_at: str,
        #[serde(rename = "finishedAt")]
        finished_at: str,
        /// Any type: the tolerant reader takes a number and reads anything else as 0.
        #[serde(rename = "retryCount")]
        retry_count: Value,
        #[serde(borrow)]
        operation: Obj<OperationDoc<'a>>,
        #[serde(rename = "syncResult", borrow)]
        sync_result: Obj<SyncResultDoc<'a>>,
    }
}

shape! {
    OperationDoc<'a> {
        #[serde(rename = "initiatedBy", borrow)]
        initiated_by: Obj<InitiatedByDoc<'a>>,
        retry: Obj<RetryDoc>,
        #[serde(borrow)]
        sync: Obj<SyncOperationDoc<'a>>,
    }
}

shape! {
    InitiatedByDoc<'a> {
        automated: bool,
        username: str,
    }
}

shape! {
    RetryDoc {
        /// Any type, as `retryCount`.
        limit: Value,
    }
}

shape! {
    SyncOperationDoc<'a> {
        revision: str,
    }
}

// A listing item's path to its sync result (see `listed_sync_result`).
shape! {
    ListedItem<'a> {
        #[serde(borrow)]
        status: Obj<ListedStatus<'a>>,
    }
}

shape! {
    ListedStatus<'a> {
        #[serde(rename = "operationState", borrow)]
        operation_state: Obj<ListedOperationState<'a>>,
    }
}

shape! {
    ListedOperationState<'a> {
        #[serde(borrow)]
        operation: Obj<ListedOperation<'a>>,
    }
}

shape! {
    ListedOperation<'a> {
        #[serde(borrow)]
        sync: Obj<SyncResultDoc<'a>>,
    }
}

shape! {
    SyncResultDoc<'a> {
        revision: str,
        #[serde(borrow)]
        revisions: Capped<Str<'a>, First, MAX_SOURCES>,
        #[serde(borrow)]
        resources: Capped<Obj<ResultResourceDoc<'a>>, First, MAX_RESOURCES>,
    }
}

shape! {
    ResultResourceDoc<'a> {
        group: str,
        kind: str,
        namespace: str,
        name: str,
        status: str,
        message: str,
        #[serde(rename = "hookPhase")]
        hook_phase: str,
    }
}

shape! {
    ResourceDoc<'a> {
        group: str,
        kind: str,
        namespace: str,
        name: str,
        status: str,
        #[serde(rename = "requiresPruning")]
        requires_pruning: bool,
        #[serde(borrow)]
        health: Obj<ResourceHealthDoc<'a>>,
    }
}

shape! {
    ResourceHealthDoc<'a> {
        status: str,
        message: str,
    }
}

shape! {
    ConditionDoc<'a> {
        #[serde(rename = "type")]
        kind: str,
        message: str,
    }
}

shape! {
    HistoryDoc<'a> {
        revision: str,
    }
}
