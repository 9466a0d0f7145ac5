//! The Argo CD API as a second source of state, beside the webhooks, for each instance that has one (each with its
//! own lease, listing, watch and held drop: an instance's listing only ever deletes that instance's Applications):
//! every `argocd.api.resync_interval` one replica (the one that claims the instance's lease in the store) lists every
//! Application and runs each through the pipeline as if
//! Argo CD had sent it, item by item once the listing has arrived whole (a refused one stores nothing); an Application missing from a listing that proves it is
//! complete is deleted, unless so many are missing at once that the drop waits for the next listing to agree
//! ([`DropGuard`]). With `argocd.api.watch` every replica also follows the event stream, and resumes after a break
//! (with backoff) with a listing, never more often than `resync_interval`. Webhooks work without any of this: a
//! failing API is reported (status page, `herald_argocd_api_up`), never fatal. Both wait on the pipeline's
//! [`Clock`](crate::clock::Clock) (the lease checks, the backoff), as they read the time from it: a manual clock
//! moves them.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{Notify, watch};

use crate::argocd::api::{ApiError, Listed, ListingReader, WatchEvent};
use crate::argocd::{AppId, Snapshot};
use crate::pipeline::{HeldDropRow, InstanceApi, Pipeline, app_key};

/// How many snapshots of a listing are in the pipeline at once: enough for the batch writer to group them.
const IN_FLIGHT: usize = 64;

/// Runs each instance's resync (and watch, when configured) until `stop`.
pub async fn run(pipeline: Pipeline, stop: watch::Receiver<bool>) {
    let sources = pipeline.argocd_apis();
    let loops = sources.iter().map(|source| {
        let resync_now = Arc::new(Notify::new());
        if source.api.settings().watch {
            tokio::spawn(follow(
                pipeline.clone(),
                source.clone(),
                resync_now.clone(),
                stop.clone(),
            ));
        }
        resync_loop(pipeline.clone(), source.clone(), resync_now, stop.clone())
    });
    futures_util::future::join_all(loops).await;
}

/// How long after one listing the watch may ask for another when `resync_interval` is 0s (no periodic resync).
const CATCH_UP_GAP_WITHOUT_RESYNC: Duration = Duration::from_secs(300);

async fn resync_loop(
    pipeline: Pipeline,
    source: InstanceApi,
    resync_now: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let interval = source.api.settings().resync_interval;
    let instance = source.api.instance();
    let owner = format!("resync-{}", uuid::Uuid::new_v4().simple());
    // How often the lease is looked at: a fraction of the interval, so a resync is at most that late.
    let check = (interval / 4).clamp(Duration::from_secs(1), Duration::from_secs(15));
    // This replica never lists more often than this, whoever asks (the lease, or the watch catching up after a break).
    let gap = if interval.is_zero() {
        CATCH_UP_GAP_WITHOUT_RESYNC
    } else {
        interval
    };
    let gap = chrono::Duration::from_std(gap).unwrap_or(chrono::Duration::MAX / 2);
    let mut last_listing: Option<chrono::DateTime<chrono::Utc>> = None;
    let mut catch_up = false;
    let clock = pipeline.clock();
    loop {
        // The next look is `check` after this one began, however long this pass takes (or the clock moves in it).
        let next_look = clock.now() + chrono::Duration::from_std(check).unwrap_or(chrono::Duration::MAX / 2);
        let may_list = last_listing.is_none_or(|at| pipeline.now() - at >= gap);
        let due = if !may_list {
            false
        } else if catch_up {
            true
        } else if interval.is_zero() {
            false
        } else {
            match pipeline.claim_resync(instance, &owner, interval).await {
                Ok(claimed) => claimed,
                Err(e) => {
                    tracing::warn!(instance, error = %e, "cannot claim the Argo CD resync; will try again");
                    false
                }
            }
        };
        if due {
            last_listing = Some(pipeline.now());
            catch_up = false;
            resync_once(&pipeline, &source).await;
        } else if let Err(e) = pipeline.refresh_denials(&source).await {
            // Another replica lists: what it recorded of denied projects is shown here too.
            tracing::debug!(instance, error = %e, "cannot read which Argo CD projects are denied");
        }
        tokio::select! {
            _ = clock.sleep_until(next_look) => {}
            // Listed as soon as `gap` allows: a stream that breaks every second must not list every second.
            _ = resync_now.notified() => catch_up = true,
            _ = stop.changed() => return,
        }
    }
}

/// How many unreadable items a resync names in its log line (it counts them all).
const NAMED_UNREADABLE: usize = 10;

/// Lists every Application of one instance once and runs each item through the pipeline once the listing is known
/// complete (a listing refused — too large, cut, malformed — hands over no item, so it stores nothing);
/// deletes what a complete listing lacks, among that instance's Applications only (see [`delete_absent`] for the
/// guard against a listing that suddenly lacks many).
pub async fn resync_once(pipeline: &Pipeline, source: &InstanceApi) {
    let started = pipeline.now();
    let api = &source.api;
    let instance = api.instance();
    // What any replica recorded of the projects the token may not see, for the status page and this pass.
    if let Err(e) = pipeline.refresh_denials(source).await {
        tracing::warn!(instance, error = %e, "cannot read which Argo CD projects are denied");
    }
    // The AppProjects first, so the listing's Applications are owned and routed by their annotations, and held by
    // their sync windows.
    pipeline.read_projects(source).await;
    let mut reader = match api.list(pipeline.item_memory()).await {
        Ok(r) => r,
        Err(e) => return refused(source, started, &e),
    };
    let ListedItems {
        present,
        unreadable,
        failures,
    } = ingest_items(pipeline, source, &mut reader).await;
    let end = reader.finish().await;
    if failures > 0 {
        tracing::warn!(
            instance,
            failures,
            "the store refused part of the Argo CD listing; the next resync repairs it"
        );
        (source.status).failed(started, &format!("{failures} Applications could not be stored"));
        return;
    }
    if let Err(e) = end {
        return refused(source, started, &e);
    }
    let listed = present.len();
    if unreadable.0 > 0 {
        // An Application Herald cannot read is not absent: deleting by absence would be wrong this time.
        tracing::warn!(instance, unreadable = unreadable.0, first = ?unreadable.1, "some Applications in the Argo CD listing cannot be read; not deleting by absence this time");
    } else {
        delete_absent(pipeline, source, &present, started).await;
    }
    tracing::info!(instance, listed, "Argo CD resync done");
    source.status.succeeded(pipeline.now(), listed);
}

/// What handing a listing's items to the writer found.
struct ListedItems {
    /// The listed Applications, by `app_key` (16 bytes each, whatever the names).
    present: HashSet<u128>,
    /// How many items could not be read, the first few named.
    unreadable: (usize, Vec<String>),
    /// How many the store refused.
    failures: usize,
}

/// Hands each item of the listing to the writer as it is read ([`IN_FLIGHT`] at once); an item whose bytes were
/// read before into what is stored is only confirmed.
async fn ingest_items(pipeline: &Pipeline, source: &InstanceApi, reader: &mut ListingReader) -> ListedItems {
    let api = &source.api;
    let mut present = HashSet::new();
    let mut unreadable = (0usize, Vec::new());
    let failures = (reader.items())
        .filter_map(|entry| {
            std::future::ready(match entry {
                Listed::App { mut snap, key } => {
                    api.own(&mut snap);
                    present.insert(app_key(&snap.app));
                    Some((*snap, key))
                }
                Listed::Unchanged(app) => {
                    // The same bytes as a listing before, read into what is stored: seen, nothing else to do.
                    present.insert(app);
                    pipeline.confirm_listed(app);
                    None
                }
                Listed::Unreadable(why) => {
                    unreadable.0 += 1;
                    if unreadable.1.len() < NAMED_UNREADABLE {
                        unreadable.1.push(why);
                    }
                    None
                }
            })
        })
        .map(|(snap, key)| pipeline.ingest_listed(snap, key))
        .buffer_unordered(IN_FLIGHT)
        .filter(|r| std::future::ready(r.is_err()))
        .count()
        .await;
    ListedItems {
        present,
        unreadable,
        failures,
    }
}

/// The listing failed or did not prove complete: nothing is deleted by absence; the status page says why.
fn refused(source: &InstanceApi, started: chrono::DateTime<chrono::Utc>, e: &ApiError) {
    let instance = source.api.instance();
    if matches!(
        e,
        ApiError::Incomplete(_) | ApiError::TooLarge(_) | ApiError::Listing(_) | ApiError::Payload(_)
    ) {
        metrics::counter!("herald_argocd_listings_refused_total", "reason" => e.reason(), "argocd_instance" => instance.to_string())
            .increment(1);
        tracing::warn!(instance, error = %e, "the Argo CD listing is refused: nothing is deleted by absence; webhooks still work");
    } else {
        tracing::warn!(instance, error = %e, "the Argo CD API resync failed; webhooks still work");
    }
    source.status.failed(started, &e.to_string());
}

/// How many confirming GETs a listing makes at once, and at most in all: the rest of what it lacks waits for the
/// next listing (kept meanwhile, never deleted unconfirmed).
const CONFIRMING_AT_ONCE: usize = 8;
const MOST_CONFIRMED: usize = 200;

/// What the listing lacks, confirmed one by one: a stored Application (in the configured projects) is deleted only
/// when a GET naming its project answers 404 and one without answers 403 or 404 ([`ArgoCdApi::confirm`]) — a token
/// that lost its RBAC gets a listing without the Applications it may no longer `get`, so an absence alone proves
/// nothing. A 403 naming the project denies that project ([`Pipeline::project_denied`]): its Applications are kept,
/// unverifiable, and no more of them are asked about in this pass (one GET per denied project per listing). One
/// that answers 200 in its project is kept (and read); one found in another project (moved) is read there. One
/// heard of after the listing started is kept: it may have been created since. What is confirmed gone is then
/// still held back when it is many at once, until the next listing agrees ([`DropGuard`]). A project with an item
/// in the listing, or whose GET answered 200 or 404, is seen: a denial of it ends.
///
/// [`ArgoCdApi::confirm`]: crate::argocd::api::ArgoCdApi::confirm
async fn delete_absent(
    pipeline: &Pipeline,
    source: &InstanceApi,
    present: &HashSet<u128>,
    started: chrono::DateTime<chrono::Utc>,
) {
    let api = &source.api;
    let live = match pipeline.live_apps(api.instance(), &api.settings().projects).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the stored Applications to compare with the listing");
            return;
        }
    };
    let stored = live.len();
    let (mut seen_projects, absent) = lacking(live, present, started);
    let Confirmed { gone, denied, seen, .. } = confirm_absent(pipeline, source, absent).await;
    seen_projects.extend(seen);
    record_projects(pipeline, source, &seen_projects, &denied).await;
    let delete = guard_drop(pipeline, source, gone, stored, started).await;
    for app in delete {
        match pipeline.delete(app.clone()).await {
            Ok(s) => {
                tracing::info!(app = %app, incidents = s.incidents.len(), "not in the Argo CD listing, and Argo CD confirms it is gone: deleted")
            }
            Err(e) => tracing::warn!(app = %app, error = %e, "cannot mark the Application deleted"),
        }
    }
}

/// Of the `live` Applications stored, the projects of those the listing holds (`present`), and those it lacks by
/// project (each project's in a stable order) — but for any heard of after the listing `started`.
fn lacking(
    live: Vec<(AppId, chrono::DateTime<chrono::Utc>, String)>,
    present: &HashSet<u128>,
    started: chrono::DateTime<chrono::Utc>,
) -> (BTreeSet<String>, BTreeMap<String, Vec<AppId>>) {
    let mut seen_projects: BTreeSet<String> = BTreeSet::new();
    let mut absent: BTreeMap<String, Vec<AppId>> = BTreeMap::new();
    for (app, last_seen, project) in live {
        if present.contains(&app_key(&app)) {
            seen_projects.insert(project);
        } else if last_seen < started {
            absent.entry(project).or_default().push(app);
        }
    }
    (seen_projects, absent)
}

/// Records which projects the token was denied, and which it sees (again).
async fn record_projects(
    pipeline: &Pipeline,
    source: &InstanceApi,
    seen_projects: &BTreeSet<String>,
    denied: &BTreeSet<String>,
) {
    let instance = source.api.instance();
    for project in denied {
        if let Err(e) = pipeline.project_denied(source, project).await {
            tracing::warn!(instance, project, error = %e, "cannot record that the project is denied; the next listing asks again");
        }
    }
    for project in seen_projects.iter().filter(|p| !denied.contains(*p)) {
        if let Err(e) = pipeline.project_seen(source, project).await {
            tracing::warn!(instance, project, error = %e, "cannot record that the project is seen again");
        }
    }
}

/// Of the Applications confirmed `gone`, those to delete now: a drop of many at once (against the `stored` count)
/// is held back, recorded, until the next listing agrees ([`DropGuard`]); one the last listing held and this one
/// agrees with is released.
async fn guard_drop(
    pipeline: &Pipeline,
    source: &InstanceApi,
    gone: Vec<AppId>,
    stored: usize,
    started: chrono::DateTime<chrono::Utc>,
) -> Vec<AppId> {
    let (instance, settings) = (source.api.instance(), source.api.settings());
    let guard = DropGuard {
        max_share: settings.max_drop_share,
        min_count: settings.min_drop_count,
    };
    let held = match pipeline.held_drop(instance).await {
        Ok(h) => h.map(|h| h.apps),
        Err(e) => {
            // Without it a large drop is held (again), never applied unchecked.
            tracing::warn!(error = %e, "cannot read the drop the last listing held back");
            None
        }
    };
    let (delete, hold) = guard.absence(gone, stored, held.as_ref());
    let recorded = match hold {
        Some(apps) => {
            tracing::warn!(
                instance,
                lacking = apps.len(),
                stored,
                agreed = delete.len(),
                "the Argo CD listing lacks more than argocd.api.max_drop_share of the stored Applications: \
                 their deletion is held back until the next listing agrees"
            );
            let row = HeldDropRow {
                apps,
                at: started,
                stored,
            };
            pipeline.hold_drop(source, row).await
        }
        None if held.is_some() => pipeline.release_drop(source).await,
        None => Ok(()),
    };
    if let Err(e) = recorded {
        tracing::warn!(error = %e, "cannot record the drop held back; the next listing decides again");
    }
    delete
}

/// What the confirming GETs of one listing found.
#[derive(Default)]
struct Confirmed {
    gone: Vec<AppId>,
    /// Projects a GET naming them answered 403.
    denied: BTreeSet<String>,
    /// Projects a GET naming them answered 200 or 404.
    seen: BTreeSet<String>,
    /// Applications there after all (in their project, or moved to another one), to be read.
    found: Vec<Snapshot>,
}

impl Confirmed {
    /// Asks Argo CD about each of `apps` (with the project Herald knows it in), [`CONFIRMING_AT_ONCE`] at a time,
    /// and records the answers.
    async fn ask(&mut self, api: &crate::argocd::api::ArgoCdApi, apps: Vec<(String, AppId)>) {
        let ask = |(project, app): (String, AppId)| async move {
            let answer = api.confirm(&app, &project).await;
            (project, app, answer)
        };
        let answers: Vec<_> = (futures_util::stream::iter(apps).map(ask))
            .buffer_unordered(CONFIRMING_AT_ONCE)
            .collect()
            .await;
        for (project, app, answer) in answers {
            self.record(&project, &app, answer);
        }
    }

    fn record(&mut self, project: &str, app: &AppId, answer: Result<crate::argocd::api::Confirmation, ApiError>) {
        use crate::argocd::api::Confirmation;
        match answer {
            Ok(Confirmation::Present(snap)) => {
                self.seen.insert(project.to_string());
                self.found.push(*snap);
            }
            Ok(Confirmation::Moved(snap)) => {
                tracing::info!(app = %app, from = project, to = %snap.project, "not in the listing: moved to another project");
                self.seen.insert(project.to_string());
                self.found.push(*snap);
            }
            Ok(Confirmation::Gone) => {
                self.seen.insert(project.to_string());
                self.gone.push(app.clone());
            }
            Ok(Confirmation::Denied) => {
                self.denied.insert(project.to_string());
            }
            Err(e) => {
                tracing::warn!(app = %app, error = %e, "cannot confirm an Application the listing lacks; kept until the next listing");
            }
        }
    }
}

/// Asks Argo CD about each Application the listing lacks (`absent`, by stored project; at most
/// [`MOST_CONFIRMED`], [`CONFIRMING_AT_ONCE`] at a time): one per project first, then the others of the projects
/// that did not answer 403. What is there after all is read through the pipeline.
async fn confirm_absent(pipeline: &Pipeline, source: &InstanceApi, absent: BTreeMap<String, Vec<AppId>>) -> Confirmed {
    let api = &source.api;
    let mut confirmed = Confirmed::default();
    let mut rest = Vec::new();
    let firsts: Vec<(String, AppId)> = (absent.into_iter())
        .filter_map(|(project, apps)| {
            let mut apps = apps.into_iter();
            let first = apps.next()?;
            rest.extend(apps.map(|a| (project.clone(), a)));
            Some((project, first))
        })
        .take(MOST_CONFIRMED)
        .collect();
    let budget = MOST_CONFIRMED - firsts.len();
    confirmed.ask(api, firsts).await;
    let rest: Vec<(String, AppId)> = (rest.into_iter())
        .filter(|(project, _)| !confirmed.denied.contains(project))
        .take(budget)
        .collect();
    confirmed.ask(api, rest).await;
    for snap in std::mem::take(&mut confirmed.found) {
        if let Err(e) = pipeline.ingest(snap, None).await {
            tracing::warn!(error = %e, "cannot store an Application read to confirm it; the next resync repairs it");
        }
    }
    confirmed
}

/// When a listing lacks too many Applications to believe at once.
#[derive(Debug, Clone, Copy)]
struct DropGuard {
    /// More than this share of the stored Applications…
    max_share: f64,
    /// …and at least this many.
    min_count: usize,
}

impl DropGuard {
    /// What to do with the `absent` Applications (out of `stored`), given what the previous listing lacked and held
    /// back (`held`): which to delete now, and which to hold back (`None`: nothing held any more). A large drop is
    /// held; the next listing that lacks the same ones again deletes those ("agrees"), and holds back the rest.
    fn absence(
        self,
        absent: Vec<AppId>,
        stored: usize,
        held: Option<&HashSet<AppId>>,
    ) -> (Vec<AppId>, Option<HashSet<AppId>>) {
        let large = absent.len() >= self.min_count && absent.len() as f64 > self.max_share * stored as f64;
        if !large {
            return (absent, None);
        }
        let Some(held) = held else {
            return (Vec::new(), Some(absent.into_iter().collect()));
        };
        let (agreed, new): (Vec<AppId>, Vec<AppId>) = absent.into_iter().partition(|a| held.contains(a));
        let hold = (!new.is_empty()).then(|| new.into_iter().collect());
        (agreed, hold)
    }
}

/// Follows the event stream; after a break, waits (1 s doubling to 60 s, back to 1 s only after a stream that
/// stayed open a minute; both on the pipeline's clock) and asks for a listing, so nothing that happened during the break is missed — the resync
/// loop lists at most once per `resync_interval`, however often the stream breaks.
async fn follow(pipeline: Pipeline, source: InstanceApi, resync_now: Arc<Notify>, mut stop: watch::Receiver<bool>) {
    let api = &source.api;
    let instance = api.instance();
    const FIRST: Duration = Duration::from_secs(1);
    const MOST: Duration = Duration::from_secs(60);
    let mut backoff = FIRST;
    let clock = pipeline.clock();
    loop {
        let opened = clock.now();
        match api.watch().await {
            Ok(mut stream) => loop {
                let event = tokio::select! {
                    e = stream.next() => e,
                    _ = stop.changed() => return,
                };
                match event {
                    Ok(Some(event)) => apply(&pipeline, event).await,
                    Ok(None) => {
                        tracing::info!(instance, "the Argo CD event stream ended; reconnecting");
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(instance, error = %e, "the Argo CD event stream failed; reconnecting");
                        source.status.failed(pipeline.now(), &e.to_string());
                        break;
                    }
                }
            },
            Err(e) => {
                tracing::warn!(instance, error = %e, "cannot open the Argo CD event stream; will try again");
                source.status.failed(pipeline.now(), &e.to_string());
            }
        }
        // A stream that sends an event and closes is as broken as one that does not open: only one that stayed
        // open starts the backoff again.
        if (clock.now() - opened).to_std().is_ok_and(|open| open >= MOST) {
            backoff = FIRST;
        }
        let jitter = Duration::from_millis(rand::random::<u64>() % 250);
        tokio::select! {
            _ = clock.sleep(backoff + jitter) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(MOST);
        resync_now.notify_one();
    }
}

async fn apply(pipeline: &Pipeline, event: WatchEvent) {
    let result = match event {
        WatchEvent::Changed(snap) => pipeline.ingest(*snap, None).await.map(|_| ()),
        WatchEvent::Deleted(app) => pipeline.delete(app).await.map(|_| ()),
    };
    if let Err(e) = result {
        tracing::warn!(error = %e, "cannot store an event from the Argo CD stream; the next resync repairs it");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apps(names: &[&str]) -> Vec<AppId> {
        (names.iter()).map(|n| AppId::new("argocd", *n)).collect()
    }

    fn many(prefix: &str, n: usize) -> Vec<AppId> {
        let names: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
        apps(&names.iter().map(String::as_str).collect::<Vec<_>>())
    }

    const GUARD: DropGuard = DropGuard {
        max_share: 0.5,
        min_count: 10,
    };

    #[test]
    fn a_small_drop_deletes_at_once() {
        let (delete, hold) = GUARD.absence(many("a", 9), 9, None);
        assert_eq!(delete.len(), 9, "fewer than min_drop_count: deleted even if all");
        assert!(hold.is_none());
        let (delete, hold) = GUARD.absence(many("a", 25), 50, None);
        assert_eq!(delete.len(), 25, "exactly half is not more than half");
        assert!(hold.is_none());
    }

    #[test]
    fn a_large_drop_is_held_and_deleted_when_the_next_listing_agrees() {
        let (delete, hold) = GUARD.absence(many("a", 50), 50, None);
        assert!(delete.is_empty(), "all 50 gone at once: nothing deleted");
        let hold = hold.expect("held");
        assert_eq!(hold.len(), 50);

        // The next listing lacks the same 50 and 10 more: the 50 go, the 10 wait for the one after.
        let mut absent = many("a", 50);
        absent.extend(many("b", 10));
        let (delete, again) = GUARD.absence(absent, 60, Some(&hold));
        assert_eq!(delete.len(), 50);
        assert!(delete.iter().all(|a| a.name.starts_with('a')));
        assert_eq!(again.expect("held").len(), 10);

        // Or the next listing has them back: nothing held, nothing deleted.
        let (delete, hold) = GUARD.absence(Vec::new(), 50, Some(&hold));
        assert!(delete.is_empty() && hold.is_none());
    }
}
