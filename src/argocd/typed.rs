//! The typed reader: a well-formed body read in one pass straight into a [`Snapshot`], borrowing strings from the
//! body and skipping everything Herald does not keep (managed fields, the resource tree's synced entries' extras,
//! kubectl's copy of the manifest), instead of building a `serde_json::Value` of the whole Application first.
//!
//! It is an accelerator, not a second parser with its own rules: it answers `None` for anything it is not sure to
//! read exactly as the tolerant reader (`value`) does — a wrong type, a `null` where an object is needed, a missing
//! name, a bad time — and the caller then asks the tolerant reader, whose answer (snapshot or error) is the one
//! given. Every shape it accepts, it reads to the same snapshot (`tests` below check that on the captured bodies).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

mod shapes;

use shapes::{Body, Context, OperationStateDoc, ResourceDoc, SourceDoc, Spec, Status};

use super::caps::{MAX_CONDITIONS, MAX_IMAGES, MAX_RESOURCES, MAX_SOURCES};

use super::{
    AppId, Condition, Destination, HealthStatus, Initiator, Operation, ResourceStatus, ResultResource, Snapshot,
    Source, SourceRef, SyncPolicy, SyncStatus, parse_time, validate_name, validate_namespace,
};

/// Reads `text` into a snapshot, or `None` when the tolerant reader must decide.
pub(super) fn parse(text: &str) -> Option<Snapshot> {
    let Obj(mut body) = serde_json::from_str::<Obj<Body>>(text).ok()?;
    match body.app.take() {
        Some(Obj(app)) => build(*app, Some((body.timestamp, body.context))),
        None => build(body, None),
    }
}

/// A JSON string, borrowed from the body unless it has escapes. Refuses any other type (and `null`: `Option` takes
/// that before it gets here).
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

impl Str<'_> {
    fn owned(self) -> String {
        self.0.into_owned()
    }
}

fn owned(s: Option<Str>) -> Option<String> {
    s.map(Str::owned)
}

fn owned_or_default(s: Option<Str>) -> String {
    s.map(Str::owned).unwrap_or_default()
}

/// A word of Argo CD's vocabulary (`argocd::status`), empty (`Other("")`) when absent; only an unknown one is copied.
fn word<T: for<'s> From<&'s str>>(s: Option<Str>) -> T {
    T::from(s.as_ref().map_or("", |s| &s.0))
}

/// A string whose content is not kept (checked to be a string, as the tolerant reader checks it).
struct AnyStr;

impl<'de> Deserialize<'de> for AnyStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = AnyStr;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E>(self, _: &str) -> Result<AnyStr, E> {
                Ok(AnyStr)
            }
        }
        d.deserialize_str(V)
    }
}

/// A JSON array read item by item: every item is read as `T` (so checked as the tolerant reader checks it), but
/// only what Herald can keep stays in memory — the first `MAX` items `P` picks (and one more, so the caps can say
/// that there were more), or with [`Last`] the last `MAX` — and the rest are dropped as they are read. A body of a
/// million empty resources costs one resource's memory while it is read, not a million's.
pub(super) struct Capped<T, P, const MAX: usize> {
    items: Vec<T>,
    pick: PhantomData<P>,
}

/// Which items of an array a [`Capped`] keeps.
pub(super) trait Pick<T> {
    /// The last `MAX` items rather than the first.
    const LAST: bool = false;
    fn keep(_: &T) -> bool {
        true
    }
    /// Whether `item` counts as one already kept (then it is not kept again).
    fn same(_kept: &T, _item: &T) -> bool {
        false
    }
}

/// Every item, the first ones.
pub(super) struct First;
impl<T> Pick<T> for First {}

/// Every item, the last ones (an Application's history: the newest entries are last).
pub(super) struct Last;
impl<T> Pick<T> for Last {
    const LAST: bool = true;
}

/// Every item once, the first ones (revisions).
pub(super) struct Distinct;
impl Pick<Str<'_>> for Distinct {
    fn same(kept: &Str<'_>, item: &Str<'_>) -> bool {
        kept.0 == item.0
    }
}

/// Every non-empty item once, the first ones (`status.summary.images`).
pub(super) struct Images;
impl Pick<Str<'_>> for Images {
    fn keep(item: &Str<'_>) -> bool {
        !item.0.is_empty()
    }
    fn same(kept: &Str<'_>, item: &Str<'_>) -> bool {
        kept.0 == item.0
    }
}

/// The resources Herald keeps of `status.resources`: out of sync, waiting to be pruned, or unhealthy.
pub(super) struct NotFine;
impl Pick<Obj<shapes::ResourceDoc<'_>>> for NotFine {
    fn keep(Obj(res): &Obj<shapes::ResourceDoc<'_>>) -> bool {
        let health = res.health.as_ref().and_then(|Obj(h)| h.status.as_ref());
        res.status.as_ref().is_none_or(|s| s.0 != "Synced")
            || res.requires_pruning.unwrap_or(false)
            || health.is_some_and(|h| h.0 != "Healthy")
    }
}

impl<T, P, const MAX: usize> Default for Capped<T, P, MAX> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            pick: PhantomData,
        }
    }
}

impl<T, P, const MAX: usize> Capped<T, P, MAX> {
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<T, P, const MAX: usize> IntoIterator for Capped<T, P, MAX> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

impl<'de, T: Deserialize<'de>, P: Pick<T>, const MAX: usize> Deserialize<'de> for Capped<T, P, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T, P, const MAX: usize>(PhantomData<(T, P)>);
        impl<'de, T: Deserialize<'de>, P: Pick<T>, const MAX: usize> Visitor<'de> for V<T, P, MAX> {
            type Value = Capped<T, P, MAX>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut kept = Capped::default();
                while let Some(item) = seq.next_element::<T>()? {
                    if !P::keep(&item) || kept.items.iter().any(|k| P::same(k, &item)) {
                        continue;
                    }
                    if P::LAST {
                        if kept.items.len() == MAX {
                            kept.items.remove(0);
                        }
                        kept.items.push(item);
                    } else if kept.items.len() <= MAX {
                        kept.items.push(item);
                    }
                }
                Ok(kept)
            }
        }
        d.deserialize_seq(V::<T, P, MAX>(PhantomData))
    }
}

/// A struct read only from a JSON object: serde's derived structs also take an array of their fields in order,
/// which the tolerant reader refuses.
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

/// A field that must not be `null` when present (`"app": null` is an error, not a bare Application).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// `metadata.annotations` without the two large ones Herald drops (their values are checked, not copied) and without
/// values too large to keep (see `keep_annotation`).
struct Annotations(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for Annotations {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Annotations;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Annotations, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(Str(key)) = map.next_key::<Str>()? {
                    if super::DROPPED_ANNOTATIONS.contains(&key.as_ref()) {
                        map.next_value::<AnyStr>()?;
                    } else {
                        let value: String = map.next_value()?;
                        if super::keep_annotation(&key, &value) {
                            out.insert(key.into_owned(), value);
                        }
                    }
                }
                super::cap_annotations(&mut out);
                Ok(Annotations(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// The snapshot from the typed documents, with the tolerant reader's defaults and checks; `None` where it would
/// refuse the body.
fn build(app: Body, envelope: Option<(Option<Str>, Option<Obj<Context>>)>) -> Option<Snapshot> {
    if app.kind.as_ref().is_some_and(|k| k.0 != "Application") {
        return None;
    }
    let metadata = app.metadata?.0;
    let name = metadata.name.filter(|n| !n.0.is_empty())?.owned();
    let namespace = metadata.namespace.map_or_else(|| "argocd".to_string(), Str::owned);
    validate_name("", &name).ok()?;
    validate_namespace("", &namespace).ok()?;
    let spec = app.spec.map(|Obj(s)| s);
    let status = app.status.map(|Obj(s)| s);
    let (project, destination, sync_policy, sources) = match spec {
        Some(spec) => spec_parts(spec),
        None => (
            "default".into(),
            Destination::default(),
            SyncPolicy::default(),
            Vec::new(),
        ),
    };
    let mut snap = Snapshot {
        app: AppId::new(namespace, name),
        uid: owned(metadata.uid),
        created_at: metadata.creation_timestamp.as_ref().and_then(|t| parse_time(&t.0)),
        project,
        destination,
        labels: metadata.labels.unwrap_or_default(),
        annotations: metadata.annotations.map(|a| a.0).unwrap_or_default(),
        sync_status: SyncStatus::Unknown,
        revisions: Vec::new(),
        health_status: HealthStatus::Unknown,
        health_message: None,
        operation: None,
        resources: Vec::new(),
        conditions: Vec::new(),
        sync_policy,
        sources,
        previous_revision: None,
        images: Vec::new(),
        deleting: metadata.deletion_timestamp.is_some(),
        health_changed_at: None,
        source: Source::Webhook,
        listed: false,
        argocd_url: None,
        project_annotations: BTreeMap::new(),
        observed_at: None,
    };
    let mut reconciled_at = None;
    let mut health_time = None;
    if let Some(mut status) = status {
        reconciled_at = status.reconciled_at.take();
        health_time = status_parts(&mut snap, status)?;
    }
    if snap.sync_status.as_str().contains("<no value>") || snap.health_status.as_str().contains("<no value>") {
        return None;
    }
    times_and_link(&mut snap, envelope, reconciled_at, health_time);
    Some(snap)
}

/// The health's time, the envelope's Argo CD link and time, and, without the envelope's time, when the body was
/// observed: the latest of its reconciliation, its last sync's end and start, its health's change.
fn times_and_link(
    snap: &mut Snapshot,
    envelope: Option<(Option<Str>, Option<Obj<Context>>)>,
    reconciled_at: Option<Str>,
    health_time: Option<Str>,
) {
    snap.health_changed_at = health_time.as_ref().and_then(|t| parse_time(&t.0));
    if let Some((timestamp, context)) = envelope {
        snap.argocd_url = context
            .and_then(|Obj(c)| c.argocd_url)
            .and_then(|u| super::link_base(&u.0));
        // A timestamp that is not RFC 3339 is ignored rather than refused, as by the tolerant reader.
        snap.observed_at = timestamp.and_then(|t| parse_time(&t.0));
    }
    if snap.observed_at.is_none() {
        let op = snap.operation.as_ref();
        snap.observed_at = [
            reconciled_at.and_then(|t| parse_time(&t.0)),
            op.and_then(|o| o.finished_at),
            op.and_then(|o| o.started_at),
            health_time.and_then(|t| parse_time(&t.0)),
        ]
        .into_iter()
        .flatten()
        .max();
    }
}

fn spec_parts(spec: Spec) -> (String, Destination, SyncPolicy, Vec<SourceRef>) {
    let destination = spec
        .destination
        .map(|Obj(d)| Destination {
            server: owned(d.server),
            name: owned(d.name),
            namespace: owned(d.namespace),
        })
        .unwrap_or_default();
    let automated = spec.sync_policy.and_then(|Obj(p)| p.automated).map(|Obj(a)| a);
    let sync_policy = SyncPolicy {
        automated: automated.is_some(),
        prune: automated.as_ref().and_then(|a| a.prune).unwrap_or(false),
        self_heal: automated.as_ref().and_then(|a| a.self_heal).unwrap_or(false),
    };
    let source_ref = |Obj(s): Obj<SourceDoc>| SourceRef {
        repo_url: owned_or_default(s.repo_url),
        path: owned(s.path),
        chart: owned(s.chart),
        target_revision: owned(s.target_revision),
    };
    let sources = match spec.sources {
        Some(list) if !list.is_empty() => list.into_iter().map(source_ref).collect(),
        _ => spec.source.map(source_ref).into_iter().collect(),
    };
    let project = spec.project.map_or_else(|| "default".to_string(), Str::owned);
    (project, destination, sync_policy, sources)
}

/// A resource of `status.resources`, kept as by the tolerant reader: out of sync, waiting to be pruned, or
/// unhealthy; `None` for one that is fine.
fn resource_status(res: ResourceDoc) -> Option<ResourceStatus> {
    let requires_pruning = res.requires_pruning.unwrap_or(false);
    let sync_status: SyncStatus = word(res.status);
    let (health, health_message) = match res.health {
        Some(Obj(h)) => (h.status.map(|s| word(Some(s))), owned(h.message)),
        None => (None, None),
    };
    let healthy = matches!(health, None | Some(HealthStatus::Healthy));
    if sync_status == SyncStatus::Synced && !requires_pruning && healthy {
        return None;
    }
    Some(ResourceStatus {
        group: owned_or_default(res.group),
        kind: owned_or_default(res.kind),
        namespace: owned_or_default(res.namespace),
        name: owned_or_default(res.name),
        status: sync_status,
        requires_pruning,
        health,
        health_message,
    })
}

/// Fills what `status` says into `snap`; the health's `lastTransitionTime` is returned for the caller's times.
/// `None`: a value the tolerant reader refuses (a bad operation time).
fn status_parts<'a>(snap: &mut Snapshot, status: Status<'a>) -> Option<Option<Str<'a>>> {
    let mut health_time = None;
    if let Some(Obj(sync)) = status.sync {
        if let Some(s) = sync.status {
            snap.sync_status = word(Some(s));
        }
        if let Some(rev) = sync.revision {
            snap.revisions.push(rev.owned());
        }
        for rev in sync.revisions.into_iter().flatten() {
            if !snap.revisions.iter().any(|r| *r == rev.0) {
                snap.revisions.push(rev.owned());
            }
        }
    }
    if let Some(Obj(health)) = status.health {
        if let Some(s) = health.status {
            snap.health_status = word(Some(s));
        }
        snap.health_message = owned(health.message);
        health_time = health.last_transition_time;
    }
    if let Some(Obj(op)) = status.operation_state {
        snap.operation = Some(operation(op)?);
    }
    for Obj(res) in status.resources.into_iter().flatten() {
        if let Some(r) = resource_status(res) {
            snap.resources.push(r);
        }
    }
    snap.conditions = (status.conditions.into_iter().flatten())
        .map(|Obj(c)| Condition {
            r#type: owned_or_default(c.kind),
            message: owned_or_default(c.message),
        })
        .collect();
    if let Some(Obj(summary)) = status.summary {
        snap.images = (summary.images.into_iter().flatten()).map(|i| i.owned()).collect();
    }
    let history = status.history.unwrap_or_default();
    if history.len() >= 2 {
        snap.previous_revision = history.into_iter().rev().nth(1).and_then(|Obj(h)| owned(h.revision));
    }
    Some(health_time)
}

fn operation(op: OperationStateDoc) -> Option<Operation> {
    let time = |t: Option<Str>| match t {
        None => Some(None),
        Some(s) => parse_time(&s.0).map(Some),
    };
    let started_at = time(op.started_at)?;
    let finished_at = time(op.finished_at)?;
    let (initiated_by, retry, sync) = match op.operation {
        Some(Obj(o)) => (o.initiated_by.map(|Obj(i)| i), o.retry, o.sync),
        None => (None, None, None),
    };
    let result = op.sync_result.map(|Obj(r)| sync_result(r)).unwrap_or_default();
    let non_empty = |r: Option<Str>| r.filter(|r| !r.0.is_empty()).map(Str::owned);
    let revision = result
        .revision
        .or_else(|| non_empty(sync.and_then(|Obj(s)| s.revision)));
    let (automated, username) = match initiated_by {
        Some(i) => (i.automated.unwrap_or(false), owned(i.username)),
        None => (false, None),
    };
    Some(Operation {
        phase: word(op.phase),
        message: owned_or_default(op.message),
        started_at,
        finished_at,
        initiator: Initiator { automated, username },
        revision,
        revisions: result.revisions,
        retry_count: match op.retry_count {
            Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
            _ => 0,
        },
        retry_limit: match retry.and_then(|Obj(r)| r.limit) {
            Some(Value::Number(n)) => n.as_i64(),
            _ => None,
        },
        resources: result.resources,
    })
}

/// A sync result (`SyncOperationResult`) as an [`Operation`] holding only its revision(s) and resources.
fn sync_result(r: shapes::SyncResultDoc) -> Operation {
    let non_empty = |r: Option<Str>| r.filter(|r| !r.0.is_empty()).map(Str::owned);
    Operation {
        revision: non_empty(r.revision),
        revisions: (r.revisions.into_iter().flatten())
            .filter(|r| !r.0.is_empty())
            .map(Str::owned)
            .collect(),
        resources: (r.resources.into_iter().flatten())
            .map(|Obj(r)| ResultResource {
                group: owned_or_default(r.group),
                kind: owned_or_default(r.kind),
                namespace: owned_or_default(r.namespace),
                name: owned_or_default(r.name),
                status: word(r.status),
                message: owned_or_default(r.message),
                hook_phase: word(r.hook_phase),
            })
            .collect(),
        ..Default::default()
    }
}

/// The sync result of a listing item: Argo CD's field selection writes it under
/// `status.operationState.operation.sync` (its `appFields` table), where a whole Application has the operation asked
/// for. Read with the shapes of a whole Application's `syncResult` (capped as they are); `None` when there is none
/// or it is not of that shape.
pub(super) fn listed_sync_result(text: &str) -> Option<Operation> {
    let Obj(item) = serde_json::from_str::<Obj<shapes::ListedItem>>(text).ok()?;
    let Obj(status) = item.status?;
    let Obj(state) = status.operation_state?;
    let Obj(operation) = state.operation?;
    let Obj(result) = operation.sync?;
    Some(sync_result(result))
}

#[cfg(test)]
mod tests;
