//! Bodies Herald has seen before, byte for byte: answered without parsing them.
//!
//! Argo CD Notifications sends the same body again and again — after its controller restarts, for each trigger that
//! fires on one change, for each retry of a send that timed out — and a body that changes nothing is the usual case
//! at a busy receiver. Parsing a 10–15 KB body costs most of what ingest costs, so the answer for a body already
//! judged is remembered under a hash of its bytes (and of the Argo CD instance its credential names, which is part of
//! the Application's identity): the Application it is about, the version of that Application's stored state it was
//! judged against, and what it was (a duplicate or stale). The same bytes again, while that Application is still at
//! that version (and its AppProject's Herald annotations are what they were), get the same answer, and a duplicate
//! still counts as seen (`last_seen`). Anything else — a change, a body with no time of its own (its time is when it
//! arrives), a body dated ahead of the clock (clamped to now) — is parsed as always.
//!
//! The writer keeps the versions ([`Repeats::committed`]) after each batch, for every Application the batch held:
//! the answer is only ever reused while nothing was written for the Application since. Only where this process is
//! the only writer (SQLite): with PostgreSQL another replica may write an Application, and every body is parsed.
//! Forgotten on a reload (the clock-skew limit may have changed) and on a purge (rows removed behind the writer).
//!
//! The same memory answers an Application read from the Argo CD API (a listing's item, a watch event, a
//! confirmation) whose state is the one stored: with each version the writer also keeps a hash of the stored state's
//! content hash and whether the Application is live ([`Repeats::unchanged`]), so a resync of 50,000 unchanged
//! Applications neither reads nor writes the store for them. Kept across reloads: it is what is stored, whatever the
//! settings. And a listing's item whose bytes were read before, into the content now stored for its Application, is
//! not even parsed ([`Repeats::listed_unchanged`]): the listing remembers each item's bytes (a hash) with the
//! content they were read into ([`Repeats::remember_listed`]), forgotten when the AppProjects' annotations (which
//! the content includes) or the settings change.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Mutex;

use crate::argocd::AppId;

/// How many bodies are remembered (about 200 bytes each, the Application's name and its project's annotations
/// aside), and how many Applications' stored versions (about 80 bytes each: 8 MB for 100,000).
const BODIES: NonZeroUsize = NonZeroUsize::new(16_384).expect("not zero");
const APPS: usize = 131_072;

/// The key of a body: a 128-bit hash of its bytes, seeded with the instance its credential names.
pub type BodyKey = u128;

/// The key of `body` as sent with a credential naming `instance` (or none).
pub fn body_key(instance: Option<&str>, body: &[u8]) -> BodyKey {
    let seed = instance.map_or(0, |i| xxhash_rust::xxh3::xxh3_64(i.as_bytes()) | 1);
    xxhash_rust::xxh3::xxh3_128_with_seed(body, seed)
}

/// What a body was judged to be, against which state.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Answer {
    pub app: AppId,
    /// The version of the Application's stored state it was judged against.
    pub version: i64,
    /// Stale (older than what is stored) rather than a duplicate of it.
    pub stale: bool,
    /// What the summary says the Application is.
    pub sync: String,
    pub health: String,
    /// The AppProject and the Herald annotations it had (they are part of the Application's state).
    pub project: String,
    pub annotations: BTreeMap<String, String>,
}

/// What the store holds for an Application, as the writer last committed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stored {
    pub version: i64,
    /// A hash of the state's content hash ([`state_key`]).
    pub content: u64,
    /// Not deleted.
    pub live: bool,
}

/// The key of an Application in this memory: a 128-bit hash of its identity (instance, namespace, name).
pub fn app_key(app: &AppId) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for part in [&app.instance, &app.namespace, &app.name] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.digest128()
}

/// The key of a state's content hash (`state::content_hash`).
pub(super) fn state_key(content_hash: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(content_hash.as_bytes())
}

struct Inner {
    answers: lru::LruCache<BodyKey, Answer>,
    /// Bounded by hand ([`APPS`]): an unbounded cache does not reserve room for all of them up front.
    stored: lru::LruCache<u128, Stored>,
    /// A listing item's key (`argocd::api::item_key`) → its Application's key and the content it was read into.
    listed: lru::LruCache<u128, (u128, u64)>,
}

pub(super) struct Repeats {
    /// `None` where another process may write Applications (PostgreSQL).
    inner: Option<Mutex<Inner>>,
}

impl Repeats {
    pub(super) fn new(enabled: bool) -> Self {
        Self {
            inner: enabled.then(|| {
                Mutex::new(Inner {
                    answers: lru::LruCache::new(BODIES),
                    stored: lru::LruCache::unbounded(),
                    listed: lru::LruCache::unbounded(),
                })
            }),
        }
    }

    fn lock(&self) -> Option<std::sync::MutexGuard<'_, Inner>> {
        (self.inner.as_ref()).map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub(super) fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The answer for `key`, if it still holds: the Application is at the version it was judged against.
    pub(super) fn answer(&self, key: BodyKey) -> Option<Answer> {
        let mut inner = self.lock()?;
        let answer = inner.answers.get(&key)?.clone();
        let stored = inner.stored.get(&app_key(&answer.app))?;
        (stored.version == answer.version).then_some(answer)
    }

    /// Whether `app`'s stored state is live and has the content hash `content_hash`: a snapshot with that content
    /// and no time of its own (read from the API) is a duplicate, with nothing to write.
    pub(super) fn unchanged(&self, app: &AppId, content_hash: &str) -> bool {
        let Some(mut inner) = self.lock() else {
            return false;
        };
        (inner.stored.get(&app_key(app))).is_some_and(|s| s.live && s.content == state_key(content_hash))
    }

    /// The key of the Application of the listing item `item` (its bytes' key) when those bytes were read into the
    /// content now stored, live, for it: parsing them again would find a duplicate.
    pub(super) fn listed_unchanged(&self, item: u128) -> Option<u128> {
        let mut inner = self.lock()?;
        let (app, content) = *inner.listed.get(&item)?;
        let stored = inner.stored.peek(&app)?;
        (stored.live && stored.content == content).then_some(app)
    }

    /// The listing item `item` was read into `app` with `content_hash`.
    pub(super) fn remember_listed(&self, item: u128, app: &AppId, content_hash: &str) {
        let Some(mut inner) = self.lock() else { return };
        inner.listed.push(item, (app_key(app), state_key(content_hash)));
        while inner.listed.len() > APPS {
            inner.listed.pop_lru();
        }
    }

    /// Forgets what listing items were read into (the AppProjects' annotations changed).
    pub(super) fn forget_listed(&self) {
        if let Some(mut inner) = self.lock() {
            inner.listed.clear();
        }
    }

    /// After a batch committed: what is stored for its Applications now, and the answers it found worth keeping.
    pub(super) fn committed<'a>(
        &self,
        stored: impl IntoIterator<Item = (&'a AppId, Stored)>,
        answers: Vec<(BodyKey, Answer)>,
    ) {
        let Some(mut inner) = self.lock() else { return };
        for (app, now) in stored {
            inner.stored.push(app_key(app), now);
        }
        while inner.stored.len() > APPS {
            inner.stored.pop_lru();
        }
        for (key, answer) in answers {
            inner.answers.push(key, answer);
        }
    }

    /// Forgets every answer (a reload: what a body was judged, or an item read into, may depend on the settings);
    /// what is stored holds.
    pub(super) fn clear_answers(&self) {
        if let Some(mut inner) = self.lock() {
            inner.answers.clear();
            inner.listed.clear();
        }
    }

    /// Forgets everything.
    pub(super) fn clear(&self) {
        if let Some(mut inner) = self.lock() {
            inner.answers.clear();
            inner.stored.clear();
            inner.listed.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(version: i64) -> Stored {
        Stored {
            version,
            content: state_key("h"),
            live: true,
        }
    }

    fn answer(version: i64) -> Answer {
        Answer {
            app: AppId::new("argocd", "pay"),
            version,
            stale: false,
            sync: "Synced".into(),
            health: "Healthy".into(),
            project: "default".into(),
            annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn an_answer_holds_while_its_application_is_at_the_version_it_was_judged_against() {
        let repeats = Repeats::new(true);
        let key = body_key(None, b"{\"app\":1}");
        let app = AppId::new("argocd", "pay");
        repeats.committed([(&app, stored(3))], vec![(key, answer(3))]);
        assert_eq!(repeats.answer(key), Some(answer(3)));
        // Something was written for the Application since: the same bytes are judged again.
        repeats.committed([(&app, stored(4))], vec![]);
        assert_eq!(repeats.answer(key), None);
    }

    #[test]
    fn the_same_bytes_from_another_instance_are_another_body() {
        let body = b"{\"app\":1}";
        assert_ne!(body_key(None, body), body_key(Some("eu"), body));
        assert_ne!(body_key(Some("eu"), body), body_key(Some("us"), body));
        assert_eq!(body_key(Some("eu"), body), body_key(Some("eu"), body));
    }

    #[test]
    fn nothing_is_remembered_where_another_process_may_write() {
        let repeats = Repeats::new(false);
        let key = body_key(None, b"x");
        let app = AppId::new("argocd", "pay");
        repeats.committed([(&app, stored(1))], vec![(key, answer(1))]);
        assert_eq!(repeats.answer(key), None);
        assert!(!repeats.enabled());
    }

    #[test]
    fn a_clear_forgets_every_answer() {
        let repeats = Repeats::new(true);
        let key = body_key(None, b"x");
        let app = AppId::new("argocd", "pay");
        repeats.committed([(&app, stored(1))], vec![(key, answer(1))]);
        repeats.clear();
        assert_eq!(repeats.answer(key), None);
    }

    #[test]
    fn an_application_read_again_is_unchanged_while_its_live_stored_state_has_that_content() {
        let repeats = Repeats::new(true);
        let app = AppId::new("argocd", "pay");
        assert!(!repeats.unchanged(&app, "h"), "nothing known: the writer decides");
        repeats.committed([(&app, stored(1))], vec![]);
        assert!(repeats.unchanged(&app, "h"));
        assert!(!repeats.unchanged(&app, "other"));
        assert!(!repeats.unchanged(&AppId::new("argocd", "pay2"), "h"));
        let gone = Stored {
            live: false,
            ..stored(2)
        };
        repeats.committed([(&app, gone)], vec![]);
        assert!(
            !repeats.unchanged(&app, "h"),
            "a deleted Application read again is the writer's to judge"
        );
        repeats.committed([(&app, stored(3))], vec![]);
        repeats.clear_answers();
        assert!(repeats.unchanged(&app, "h"), "a reload keeps what is stored");
        repeats.clear();
        assert!(!repeats.unchanged(&app, "h"));
    }

    #[test]
    fn a_listed_item_is_unchanged_while_what_it_was_read_into_is_stored() {
        let repeats = Repeats::new(true);
        let app = AppId::new("argocd", "pay");
        assert_eq!(repeats.listed_unchanged(7), None);
        repeats.remember_listed(7, &app, "h");
        assert_eq!(repeats.listed_unchanged(7), None, "not stored yet");
        repeats.committed([(&app, stored(1))], vec![]);
        assert_eq!(repeats.listed_unchanged(7), Some(app_key(&app)));
        assert_eq!(repeats.listed_unchanged(8), None, "other bytes");
        let other = Stored {
            content: state_key("changed by a webhook"),
            ..stored(2)
        };
        repeats.committed([(&app, other)], vec![]);
        assert_eq!(repeats.listed_unchanged(7), None, "the stored state moved on");
        repeats.committed([(&app, stored(3))], vec![]);
        assert_eq!(repeats.listed_unchanged(7), Some(app_key(&app)), "and came back");
        repeats.forget_listed();
        assert_eq!(repeats.listed_unchanged(7), None);
        repeats.remember_listed(7, &app, "h");
        repeats.clear_answers();
        assert_eq!(repeats.listed_unchanged(7), None, "a reload forgets it");
    }
}
