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

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Mutex;

use crate::argocd::AppId;

/// How many bodies are remembered (about 200 bytes each, the Application's name and its project's annotations
/// aside), and how many Applications' versions.
const BODIES: NonZeroUsize = NonZeroUsize::new(16_384).expect("not zero");
const APPS: NonZeroUsize = NonZeroUsize::new(16_384).expect("not zero");

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

struct Inner {
    answers: lru::LruCache<BodyKey, Answer>,
    versions: lru::LruCache<AppId, i64>,
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
                    versions: lru::LruCache::new(APPS),
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
        (inner.versions.get(&answer.app) == Some(&answer.version)).then_some(answer)
    }

    /// After a batch committed: the versions of its Applications now, and the answers it found worth keeping.
    pub(super) fn committed<'a>(
        &self,
        versions: impl IntoIterator<Item = (&'a AppId, i64)>,
        answers: Vec<(BodyKey, Answer)>,
    ) {
        let Some(mut inner) = self.lock() else { return };
        for (app, version) in versions {
            match inner.versions.get_mut(app) {
                Some(v) => *v = version,
                None => {
                    inner.versions.push(app.clone(), version);
                }
            }
        }
        for (key, answer) in answers {
            inner.answers.push(key, answer);
        }
    }

    /// Forgets everything.
    pub(super) fn clear(&self) {
        if let Some(mut inner) = self.lock() {
            inner.answers.clear();
            inner.versions.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        repeats.committed([(&app, 3)], vec![(key, answer(3))]);
        assert_eq!(repeats.answer(key), Some(answer(3)));
        // Something was written for the Application since: the same bytes are judged again.
        repeats.committed([(&app, 4)], vec![]);
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
        repeats.committed([(&app, 1)], vec![(key, answer(1))]);
        assert_eq!(repeats.answer(key), None);
        assert!(!repeats.enabled());
    }

    #[test]
    fn a_clear_forgets_every_answer() {
        let repeats = Repeats::new(true);
        let key = body_key(None, b"x");
        let app = AppId::new("argocd", "pay");
        repeats.committed([(&app, 1)], vec![(key, answer(1))]);
        repeats.clear();
        assert_eq!(repeats.answer(key), None);
    }
}
