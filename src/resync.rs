//! The Argo CD API as a second source of state, beside the webhooks: every `argocd.api.resync_interval` one replica
//! (the one that claims the lease in the store) lists every Application and runs each through the pipeline as if
//! Argo CD had sent it; an Application missing from a complete listing is deleted. With `argocd.api.watch` every
//! replica also follows the event stream, and resumes after a break with a listing. Webhooks work without any of
//! this: a failing API is reported (status page, `herald_argocd_api_up`), never fatal.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{Notify, watch};

use crate::argocd::api::{ArgoCdApi, WatchEvent};
use crate::pipeline::Pipeline;

/// How many snapshots of a listing are in the pipeline at once: enough for the batch writer to group them.
const IN_FLIGHT: usize = 64;

/// Runs the resync (and the watch, when configured) until `stop`.
pub async fn run(pipeline: Pipeline, stop: watch::Receiver<bool>) {
    let Some(api) = pipeline.argocd_api() else {
        return;
    };
    let resync_now = Arc::new(Notify::new());
    if api.settings().watch {
        tokio::spawn(follow(pipeline.clone(), api.clone(), resync_now.clone(), stop.clone()));
    }
    resync_loop(pipeline, api, resync_now, stop).await;
}

async fn resync_loop(pipeline: Pipeline, api: ArgoCdApi, resync_now: Arc<Notify>, mut stop: watch::Receiver<bool>) {
    let interval = api.settings().resync_interval;
    let owner = format!("resync-{}", uuid::Uuid::new_v4().simple());
    // How often the lease is looked at: a fraction of the interval, so a resync is at most that late.
    let check = (interval / 4).clamp(Duration::from_secs(1), Duration::from_secs(15));
    let mut forced = false;
    loop {
        let due = if forced {
            true
        } else if interval.is_zero() {
            false
        } else {
            match pipeline.claim_resync(&owner, interval).await {
                Ok(claimed) => claimed,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot claim the Argo CD resync; will try again");
                    false
                }
            }
        };
        if due {
            resync_once(&pipeline, &api).await;
        }
        forced = tokio::select! {
            _ = tokio::time::sleep(check) => false,
            _ = resync_now.notified() => true,
            _ = stop.changed() => return,
        };
    }
}

/// Lists every Application once and runs each through the pipeline; deletes what a complete listing lacks.
pub async fn resync_once(pipeline: &Pipeline, api: &ArgoCdApi) {
    let started = pipeline.now();
    let listing = match api.list().await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "the Argo CD API resync failed; webhooks still work");
            pipeline.api_source().failed(started, &e.to_string());
            return;
        }
    };
    let present: HashSet<_> = listing.apps.iter().map(|s| s.app.clone()).collect();
    let listed = listing.apps.len();
    let failures = futures_util::stream::iter(listing.apps)
        .map(|snap| pipeline.ingest(snap, None))
        .buffer_unordered(IN_FLIGHT)
        .filter(|r| std::future::ready(r.is_err()))
        .count()
        .await;
    if failures > 0 {
        tracing::warn!(
            failures,
            "the store refused part of the Argo CD listing; the next resync repairs it"
        );
        pipeline
            .api_source()
            .failed(started, &format!("{failures} Applications could not be stored"));
        return;
    }
    if !listing.unreadable.is_empty() {
        // An Application Herald cannot read is not absent: deleting by absence would be wrong this time.
        tracing::warn!(unreadable = ?listing.unreadable, "some Applications in the Argo CD listing cannot be read; not deleting by absence this time");
    } else {
        delete_absent(pipeline, api, &present, started).await;
    }
    tracing::info!(listed, "Argo CD resync done");
    pipeline.api_source().succeeded(pipeline.now(), listed);
}

/// Deletes the stored Applications (in the configured projects) that the listing lacks. One heard of after the
/// listing started is kept: it may have been created since.
async fn delete_absent(
    pipeline: &Pipeline,
    api: &ArgoCdApi,
    present: &HashSet<crate::argocd::AppId>,
    started: chrono::DateTime<chrono::Utc>,
) {
    let live = match pipeline.live_apps(&api.settings().projects).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the stored Applications to compare with the listing");
            return;
        }
    };
    for (app, last_seen) in live {
        if present.contains(&app) || last_seen >= started {
            continue;
        }
        match pipeline.delete(app.clone()).await {
            Ok(s) => tracing::info!(app = %app, incidents = s.incidents.len(), "not in the Argo CD listing: deleted"),
            Err(e) => tracing::warn!(app = %app, error = %e, "cannot mark the Application deleted"),
        }
    }
}

/// Follows the event stream; after a break, waits (1 s doubling to 60 s) and asks for a listing, so nothing that
/// happened during the break is missed.
async fn follow(pipeline: Pipeline, api: ArgoCdApi, resync_now: Arc<Notify>, mut stop: watch::Receiver<bool>) {
    let mut backoff = Duration::from_secs(1);
    loop {
        match api.watch().await {
            Ok(mut stream) => loop {
                let event = tokio::select! {
                    e = stream.next() => e,
                    _ = stop.changed() => return,
                };
                match event {
                    Ok(Some(event)) => {
                        backoff = Duration::from_secs(1);
                        apply(&pipeline, event).await;
                    }
                    Ok(None) => {
                        tracing::info!("the Argo CD event stream ended; reconnecting");
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the Argo CD event stream failed; reconnecting");
                        pipeline.api_source().failed(pipeline.now(), &e.to_string());
                        break;
                    }
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, "cannot open the Argo CD event stream; will try again");
                pipeline.api_source().failed(pipeline.now(), &e.to_string());
            }
        }
        let jitter = Duration::from_millis(rand::random::<u64>() % 250);
        tokio::select! {
            _ = tokio::time::sleep(backoff + jitter) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(60));
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
