//! The writer's memory: each Application's last stored state ([`AppCache`], a bounded LRU loaded on a miss), so a
//! duplicate or stale body is answered without reading or writing the store, and when duplicates were last seen
//! ([`SeenTimes`], written to the store now and then rather than with each body).
//!
//! It also remembers each Application's last raw body ([`RawChain`], bounded by bytes): the next body is stored as
//! what differs from it (see `store::raws`). A body whose Application's last one is forgotten starts a run, stored
//! whole against the writer's current dictionary of other Applications' bodies ([`Dictionaries`]).
//!
//! Only the writer uses the cache, and only while it holds it (`Core::cache`) from before it reads until after it
//! commits: entries are taken out for a batch and put back once the batch is committed, so a batch that fails leaves
//! nothing behind that the store does not have. With several replicas on PostgreSQL another one may write an
//! Application: each entry carries the version of the row it was read from, checked against the row once the batch
//! has locked it (one small query per batch, in the batch's transaction: [`AppCache::take_locked`]) and again by
//! the write itself (compare-and-set, `Store::save_apps_checked`). On SQLite there is one process, whose writer is
//! the only one: the entries are used as they are.

use std::collections::HashMap;
use std::num::NonZeroUsize;

use chrono::{DateTime, Utc};

use super::repeats::app_key;
use crate::argocd::AppId;
use crate::state::AppState;
use crate::store::{Dictionaries, RawChain, Store, StoreError, StoredApp, WriteTx};

/// How many Applications the writer remembers: 6–8 KB each in memory, so 4,096 cost about 30 MB; an Application
/// not remembered is read from the store when a body for it comes (as every one was before the cache).
const CAPACITY: NonZeroUsize = NonZeroUsize::new(4096).expect("not zero");
/// And how many bytes (each state's JSON size): large Applications (up to `caps::MAX_SNAPSHOT_BYTES` each) make
/// the cache remember fewer of them, the least recently used being forgotten first.
pub(super) const MAX_BYTES: usize = 64 << 20;

/// How many bytes of raw bodies the writer remembers, one per Application (its last): 1 MB holds the last bodies of
/// the 70–120 Applications that changed most recently (8–14 KB each), which change again soonest; an Application
/// whose last body is not remembered has its next one start a run, against the dictionary (a few hundred bytes, where
/// a small change from the last body takes tens). (16 MB, every body of a 2,000-Application benchmark, cost 25 MB of
/// resident memory, half of Herald's: see docs/benchmarks.md.)
const MAX_CHAIN_BYTES: usize = 1 << 20;

pub(super) struct AppCache {
    /// Each entry with its size in bytes.
    lru: lru::LruCache<AppId, (StoredApp, usize)>,
    bytes: usize,
    /// Each Application's run of raw bodies, with the version of the Application it was left at: another replica's
    /// write moves the version, and a run is then not continued (its last body may not be the last stored).
    chains: lru::LruCache<AppId, (RawChain, i64)>,
    chain_bytes: usize,
    /// The dictionaries the first body of each run is compressed with (see `store::raws`).
    pub(super) dictionaries: Dictionaries,
}

/// What an entry weighs: its state's JSON size (what it also costs in the store), plus the entry itself. The JSON
/// is counted as it is written, not kept.
fn weight(entry: &StoredApp) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut json = Count(0);
    let counted = serde_json::to_writer(&mut json, &entry.state).map_or(0, |()| json.0);
    counted + entry.team.len() + 64
}

impl AppCache {
    pub(super) fn new() -> Self {
        Self {
            lru: lru::LruCache::new(CAPACITY),
            bytes: 0,
            chains: lru::LruCache::new(CAPACITY),
            chain_bytes: 0,
            dictionaries: Dictionaries::default(),
        }
    }

    /// The bytes the remembered states weigh.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lru.len()
    }

    /// Takes the Applications `ids` out of the cache and reads the others from the store. Those the store has no
    /// row for are not in the answer. For one writer (SQLite), whose entries are always current.
    pub(super) async fn take(&mut self, store: &Store, ids: &[AppId]) -> Result<HashMap<AppId, StoredApp>, StoreError> {
        let (mut taken, missing) = self.pop(ids);
        if !missing.is_empty() {
            taken.extend(store.stored_apps(&missing).await?);
        }
        Ok(taken)
    }

    /// [`AppCache::take`] where other replicas write (PostgreSQL): the rows of `ids` are locked in `tx` first
    /// (`Store::lock_apps`), then each entry is used only if its version is the stored one, and the others are
    /// read in `tx`. No other replica can write them until `tx` ends.
    pub(super) async fn take_locked(
        &mut self,
        tx: &mut WriteTx,
        ids: &[AppId],
    ) -> Result<HashMap<AppId, StoredApp>, StoreError> {
        let versions = Store::lock_apps(tx, ids).await?;
        let (mut taken, mut missing) = self.pop(ids);
        taken.retain(|id, entry| {
            let current = versions.get(id) == Some(&entry.version);
            if !current {
                missing.push(id.clone());
            }
            current
        });
        // Only those with a row: one without is new to this batch.
        missing.retain(|id| versions.contains_key(id));
        if !missing.is_empty() {
            taken.extend(Store::lock_stored_apps(tx, &missing).await?);
        }
        Ok(taken)
    }

    /// The entries of `ids` taken out, and the ids not remembered.
    fn pop(&mut self, ids: &[AppId]) -> (HashMap<AppId, StoredApp>, Vec<AppId>) {
        let mut taken = HashMap::with_capacity(ids.len());
        let mut missing = Vec::new();
        for id in ids {
            match self.lru.pop(id) {
                Some((entry, size)) => {
                    self.bytes -= size;
                    taken.insert(id.clone(), entry);
                }
                None => missing.push(id.clone()),
            }
        }
        (taken, missing)
    }

    /// Puts back what a committed batch holds.
    pub(super) fn put_back(&mut self, apps: impl IntoIterator<Item = (AppId, StoredApp)>) {
        for (id, entry) in apps {
            let size = weight(&entry);
            if let Some((_, (_, old))) = self.lru.push(id, (entry, size)) {
                self.bytes -= old;
            }
            self.bytes += size;
            while self.bytes > MAX_BYTES
                && let Some((_, (_, old))) = self.lru.pop_lru()
            {
                self.bytes -= old;
            }
        }
    }

    /// Takes out the runs of raw bodies of the Applications `apps` (as taken, with their versions) that are still
    /// where they were left: at the same version of the Application.
    pub(super) fn take_chains(&mut self, apps: &HashMap<AppId, StoredApp>) -> HashMap<AppId, RawChain> {
        let mut taken = HashMap::new();
        for (id, entry) in apps {
            if let Some((chain, version)) = self.chains.pop(id) {
                self.chain_bytes -= chain.weight();
                if version == entry.version {
                    taken.insert(id.clone(), chain);
                }
            }
        }
        taken
    }

    /// Puts back the runs of a committed batch, each at its Application's version now (`apps`, committed). When
    /// the bytes are spent, the runs too old to be continued (`gap` before `now`) are forgotten, and if that is not
    /// enough the run is not remembered: with more Applications than room, those remembered keep their place rather
    /// than all pushing each other out in turn (each Application's bodies come round in turn, the least recently
    /// used is the next one needed).
    pub(super) fn put_back_chains(
        &mut self,
        chains: HashMap<AppId, RawChain>,
        apps: &HashMap<AppId, StoredApp>,
        now: DateTime<Utc>,
        gap: chrono::Duration,
    ) {
        for (id, chain) in chains {
            let Some(entry) = apps.get(&id) else {
                continue;
            };
            while self.chain_bytes + chain.weight() > MAX_CHAIN_BYTES
                && let Some((_, (oldest, _))) = self.chains.peek_lru()
                && now - oldest.last_at() >= gap
            {
                if let Some((_, (old, _))) = self.chains.pop_lru() {
                    self.chain_bytes -= old.weight();
                }
            }
            if self.chain_bytes + chain.weight() > MAX_CHAIN_BYTES {
                continue;
            }
            self.chain_bytes += chain.weight();
            // Beyond the count, the least recently used goes.
            if let Some((_, (old, _))) = self.chains.push(id, (chain, entry.version)) {
                self.chain_bytes -= old.weight();
            }
        }
    }

    /// Forgets every Application (rows were removed behind the writer's back: the purge of deleted Applications).
    /// The runs of raw bodies stay: the purge of raw bodies keeps a run in use whole (see `store::raws`), and a
    /// run left at another version of its Application is not continued.
    pub(super) fn clear(&mut self) {
        self.lru.clear();
        self.bytes = 0;
    }
}

/// When duplicates were last seen, not yet in the store. Written every `FLUSH_EVERY` by the writer; read paths
/// overlay it, so what the API shows does not depend on the flush. Lost on a crash, which costs nothing that
/// matters: `last_seen` is shown, and is compared with a resync's start only for Applications absent from Argo CD's
/// listing, which no duplicate of a live one is.
///
/// Duplicates read from the Argo CD API (a resync's unchanged Applications) are kept apart and never written: a
/// resync of 50,000 unchanged Applications writes nothing. Until the next listing after a restart, such an
/// Application's `last_seen` is the last time a webhook or a change was stored for it.
#[derive(Default)]
pub(super) struct SeenTimes(std::sync::Mutex<Times>);

#[derive(Default)]
struct Times {
    pending: HashMap<AppId, DateTime<Utc>>,
    /// By a hash of the Application's identity (16 bytes a key, not three strings): one per listed Application.
    confirmed: HashMap<u128, DateTime<Utc>>,
}

impl SeenTimes {
    fn times(&self) -> std::sync::MutexGuard<'_, Times> {
        // A panic while holding it cannot leave the maps half-changed: every use is one insert or one take.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn record(&self, seen: impl IntoIterator<Item = (AppId, DateTime<Utc>)>) {
        let mut times = self.times();
        for (app, at) in seen {
            let slot = times.pending.entry(app).or_insert(at);
            *slot = (*slot).max(at);
        }
    }

    /// Duplicates read from the API (by [`app_key`]): kept in memory only.
    pub(super) fn confirmed(&self, seen: impl IntoIterator<Item = (u128, DateTime<Utc>)>) {
        let mut times = self.times();
        for (app, at) in seen {
            let slot = times.confirmed.entry(app).or_insert(at);
            *slot = (*slot).max(at);
        }
    }

    /// Everything not yet written; give it back with [`SeenTimes::record`] if writing fails.
    pub(super) fn take(&self) -> Vec<(AppId, DateTime<Utc>)> {
        self.times().pending.drain().collect()
    }

    pub(super) fn latest(&self, app: &AppId) -> Option<DateTime<Utc>> {
        let times = self.times();
        let pending = times.pending.get(app).copied();
        if times.confirmed.is_empty() {
            return pending;
        }
        pending.max(times.confirmed.get(&app_key(app)).copied())
    }

    /// `state` with the last time a duplicate of it was seen, when that is later than what the store has.
    pub(super) fn overlay(&self, state: &mut AppState) {
        if let Some(at) = self.latest(&state.snapshot.app) {
            state.last_seen = state.last_seen.max(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A stored state of `name` with 1,000 resources with long names: about 0.6 MB.
    fn large(name: &str) -> (AppId, StoredApp) {
        let resources: Vec<_> = (0..1000)
            .map(|k| {
                json!({"kind": "ConfigMap", "namespace": "ns", "name": format!("{k}-{}", "x".repeat(500)),
                            "status": "OutOfSync", "requiresPruning": true})
            })
            .collect();
        let body = json!({"app": {"metadata": {"name": name}, "status": {"resources": resources}}});
        let snap = crate::argocd::parse_body(body.to_string().as_bytes(), 64).expect("valid");
        let crate::state::Outcome::Changed { state, .. } = crate::state::apply(None, snap, Utc::now()) else {
            panic!("a new Application is a change");
        };
        let id = state.snapshot.app.clone();
        (
            id,
            StoredApp {
                team: "t".into(),
                state: *state,
                version: 1,
            },
        )
    }

    #[test]
    fn large_applications_are_remembered_within_the_byte_bound_the_oldest_forgotten() {
        let mut cache = AppCache::new();
        let names: Vec<String> = (0..200).map(|k| format!("app-{k}")).collect();
        for name in &names {
            cache.put_back([large(name)]);
        }
        assert!(cache.bytes() <= MAX_BYTES, "{} bytes", cache.bytes());
        assert!(
            cache.len() < names.len() && cache.len() > 50,
            "{} remembered",
            cache.len()
        );
        let newest = AppId::new("argocd", "app-199");
        let oldest = AppId::new("argocd", "app-0");
        assert!(cache.lru.contains(&newest) && !cache.lru.contains(&oldest));
        let sum: usize = cache.lru.iter().map(|(_, (_, size))| size).sum();
        assert_eq!(sum, cache.bytes(), "the count follows every entry");
        cache.clear();
        assert_eq!(cache.bytes(), 0);
    }
}
