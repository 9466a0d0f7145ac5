//! Delivery: the worker loop claims due outbox rows with a short lease (one transaction), calls the receiver with
//! no transaction open, and records the outcome in a second short transaction. Retries back off exponentially with
//! jitter ([`next_delay`], pure), honour Retry-After, and stop at `outbox.max_age`: the row is then dead, visible
//! and retryable through the API. A per-receiver rate limit spaces messages (Slack: 1/s by default). The receivers
//! are replaced whole on reload ([`ReceiverSet`]); a delivery finishes with the receiver it started with.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::clock::SharedClock;
use crate::configuration::{OutboxSettings, Settings};
use crate::domain::Notification;
use crate::live::Live;
use crate::progress::{Loop, Progress};
use crate::receivers::{DeliveryError, Receiver};
use crate::store::{OutboxRecord, Store};

/// The delay before attempt `attempt + 1`: exponential from `initial`, capped at `max`, with "equal jitter"
/// (half fixed, half random from `unit` in [0, 1)), and never shorter than the receiver's Retry-After.
pub fn next_delay(
    attempt: u32,
    initial: Duration,
    max: Duration,
    retry_after: Option<Duration>,
    unit: f64,
) -> Duration {
    let exp = initial.saturating_mul(1u32.checked_shl(attempt.saturating_sub(1).min(20)).unwrap_or(u32::MAX));
    let capped = exp.min(max);
    let jittered = capped / 2 + capped.mul_f64(unit.clamp(0.0, 1.0) / 2.0);
    match retry_after {
        Some(ra) => jittered.max(ra),
        None => jittered,
    }
}

/// Spaces the messages of one receiver.
struct RateLimiter {
    interval: Duration,
    next: Mutex<tokio::time::Instant>,
}

impl RateLimiter {
    async fn wait(&self) {
        let mut next = self.next.lock().await;
        let now = tokio::time::Instant::now();
        if *next > now {
            tokio::time::sleep_until(*next).await;
        }
        *next = tokio::time::Instant::now() + self.interval;
    }
}

/// The receivers by name and their rate limits; replaced whole on reload.
struct Fleet {
    receivers: HashMap<String, Arc<dyn Receiver>>,
    limits: HashMap<String, Arc<RateLimiter>>,
}

impl Fleet {
    /// `previous`'s limiter is kept for a receiver whose rate did not change, so a reload does not let a burst
    /// through.
    fn new(receivers: HashMap<String, Arc<dyn Receiver>>, settings: &Settings, previous: Option<&Fleet>) -> Self {
        let limits = settings
            .receivers
            .iter()
            .filter_map(|r| {
                let rate = r.rate_limit()?;
                let interval = Duration::from_secs_f64(1.0 / rate);
                let kept = previous
                    .and_then(|p| p.limits.get(&r.name))
                    .filter(|l| l.interval == interval)
                    .cloned();
                let limiter = kept.unwrap_or_else(|| {
                    Arc::new(RateLimiter {
                        interval,
                        next: Mutex::new(tokio::time::Instant::now()),
                    })
                });
                Some((r.name.clone(), limiter))
            })
            .collect();
        Self { receivers, limits }
    }
}

/// Gives a running worker new receivers (SIGHUP); deliveries in flight finish with the old ones.
#[derive(Clone)]
pub struct ReceiverSet(Arc<Live<Fleet>>);

impl ReceiverSet {
    pub fn replace(&self, receivers: HashMap<String, Arc<dyn Receiver>>, settings: &Settings) {
        let previous = self.0.get();
        self.0.replace(Fleet::new(receivers, settings, Some(&previous)));
    }
}

pub struct Worker {
    store: Store,
    fleet: Arc<Live<Fleet>>,
    settings: OutboxSettings,
    clock: SharedClock,
    owner: String,
    wake: Arc<tokio::sync::Notify>,
    progress: Progress,
}

impl Worker {
    pub fn new(
        store: Store,
        receivers: HashMap<String, Arc<dyn Receiver>>,
        settings: &Settings,
        clock: SharedClock,
    ) -> Self {
        Self {
            store,
            fleet: Arc::new(Live::new(Fleet::new(receivers, settings, None))),
            settings: settings.outbox.clone(),
            clock,
            owner: format!("{}-{}", hostname(), uuid::Uuid::new_v4().simple()),
            wake: Arc::default(),
            progress: Progress::default(),
        }
    }

    /// The handle that replaces this worker's receivers while it runs.
    pub fn receiver_set(&self) -> ReceiverSet {
        ReceiverSet(self.fleet.clone())
    }

    /// Counts each pass in `progress` (see `crate::progress`).
    pub fn reporting_to(mut self, progress: Progress) -> Self {
        self.progress = progress;
        self
    }

    /// Polls at once when `wake` is rung (new deliveries queued), not only every `outbox.poll_interval`.
    pub fn woken_by(mut self, wake: Arc<tokio::sync::Notify>) -> Self {
        self.wake = wake;
        self
    }

    /// Claims and delivers one batch. Returns how many rows it handled.
    pub async fn run_once(&self) -> Result<usize, crate::store::StoreError> {
        let now = self.clock.now();
        let lease = now + chrono::Duration::from_std(self.settings.lease).unwrap_or_default();
        let rows = self
            .store
            .claim_deliveries(&self.owner, now, lease, self.settings.concurrency as i64)
            .await?;
        let n = rows.len();
        let results = futures_util::future::join_all(rows.into_iter().map(|row| self.deliver(row))).await;
        for r in results {
            r?;
        }
        Ok(n)
    }

    async fn deliver(&self, row: OutboxRecord) -> Result<(), crate::store::StoreError> {
        // One span per attempt, so what a receiver logs is tied to the row, its thread and the attempt.
        let span = tracing::info_span!(
            "delivery",
            receiver = %row.receiver,
            outbox = row.id,
            thread = %row.thread_key,
            attempt = row.attempts
        );
        let attempt = async move {
            let started = std::time::Instant::now();
            let receiver_name = row.receiver.clone();
            let outcome = self.attempt(&row).await?;
            let now = self.clock.now();
            let label = match &outcome {
                Ok(_) => "delivered",
                Err(DeliveryError::Transient { .. }) => "retry",
                Err(DeliveryError::Permanent { .. }) => "dead",
            };
            metrics::histogram!("herald_delivery_duration_seconds", "receiver" => receiver_name.clone())
                .record(started.elapsed().as_secs_f64());
            match outcome {
                Ok(d) => {
                    tracing::info!(receiver = %row.receiver, outbox = row.id, action = %row.action, detail = %d.detail, "notification delivered");
                    self.store.delivered(&row, d.memo.as_ref(), now).await?;
                }
                Err(DeliveryError::Transient { reason, retry_after }) => {
                    if !self.retry_later(&row, &reason, retry_after, now).await? {
                        metrics::counter!("herald_deliveries_total", "receiver" => receiver_name, "outcome" => "dead")
                            .increment(1);
                        return Ok(());
                    }
                }
                Err(DeliveryError::Permanent { reason }) => {
                    tracing::error!(receiver = %row.receiver, outbox = row.id, error = %reason, "delivery failed permanently: dead");
                    self.store.failed(row.id, &reason, None).await?;
                }
            }
            metrics::counter!("herald_deliveries_total", "receiver" => receiver_name, "outcome" => label).increment(1);
            Ok(())
        };
        tracing::Instrument::instrument(attempt, span).await
    }

    /// One call to the row's receiver (after its rate limit's wait), with the thread's memo; a permanent failure
    /// when the receiver is no longer configured or the stored notification cannot be read.
    async fn attempt(
        &self,
        row: &OutboxRecord,
    ) -> Result<Result<crate::receivers::Delivered, DeliveryError>, crate::store::StoreError> {
        let fleet = self.fleet.get();
        Ok(
            match (
                fleet.receivers.get(&row.receiver),
                serde_json::from_str::<Notification>(&row.payload),
            ) {
                (None, _) => Err(DeliveryError::permanent(format!(
                    "receiver {:?} is no longer configured",
                    row.receiver
                ))),
                (_, Err(e)) => Err(DeliveryError::permanent(format!("stored notification unreadable: {e}"))),
                (Some(r), Ok(n)) => {
                    if let Some(l) = fleet.limits.get(&row.receiver) {
                        l.wait().await;
                    }
                    let memo = self.store.memo(&row.receiver, &row.thread_key).await?;
                    r.deliver(&n, memo.as_ref()).await
                }
            },
        )
    }

    /// A transient failure (`reason`) at `now`: the row is retried after the backoff (or `retry_after`), unless
    /// that is past `outbox.max_age` from its creation: then it is dead. `false` when dead.
    async fn retry_later(
        &self,
        row: &OutboxRecord,
        reason: &str,
        retry_after: Option<Duration>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool, crate::store::StoreError> {
        let delay = next_delay(
            row.attempts.max(1) as u32,
            self.settings.initial_backoff,
            self.settings.max_backoff,
            retry_after,
            rand::random::<f64>(),
        );
        let retry_at = now + chrono::Duration::from_std(delay).unwrap_or_default();
        let age = retry_at - row.created_at;
        if age > chrono::Duration::from_std(self.settings.max_age).unwrap_or(chrono::Duration::MAX) {
            tracing::warn!(receiver = %row.receiver, outbox = row.id, error = %reason, "delivery failed for longer than outbox.max_age: dead");
            self.store.failed(row.id, reason, None).await?;
            return Ok(false);
        }
        tracing::warn!(receiver = %row.receiver, outbox = row.id, error = %reason, retry_in_ms = delay.as_millis() as u64, "delivery failed; will retry");
        self.store.failed(row.id, reason, Some(retry_at)).await?;
        Ok(true)
    }

    /// Runs until `stop` says so; then finishes the batch in flight.
    pub async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            if *stop.borrow() {
                return;
            }
            match self.run_once().await {
                Ok(n) if n > 0 => {
                    self.progress.passed(Loop::Outbox, true);
                    continue;
                }
                Ok(_) => self.progress.passed(Loop::Outbox, false),
                Err(e) => {
                    tracing::warn!(error = %e, "outbox worker cannot reach the store; retrying");
                    self.progress.passed(Loop::Outbox, true);
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.settings.poll_interval) => {}
                _ = self.wake.notified() => {}
                _ = stop.changed() => {}
            }
        }
    }
}

fn hostname() -> String {
    std::env::var("HOSTNAME").unwrap_or_else(|_| "herald".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_rate_limit_spaces_messages() {
        let l = RateLimiter {
            interval: Duration::from_secs(1),
            next: Mutex::new(tokio::time::Instant::now()),
        };
        let start = tokio::time::Instant::now();
        let mut at = Vec::new();
        for _ in 0..3 {
            l.wait().await;
            at.push(start.elapsed());
        }
        assert_eq!(at, [Duration::ZERO, Duration::from_secs(1), Duration::from_secs(2)]);
    }

    #[test]
    fn backoff_grows_caps_and_obeys_retry_after() {
        let i = Duration::from_secs(1);
        let m = Duration::from_secs(60);
        assert_eq!(next_delay(1, i, m, None, 1.0), Duration::from_secs(1));
        assert_eq!(next_delay(3, i, m, None, 1.0), Duration::from_secs(4));
        assert_eq!(next_delay(3, i, m, None, 0.0), Duration::from_secs(2));
        assert_eq!(next_delay(30, i, m, None, 1.0), m);
        assert_eq!(
            next_delay(1, i, m, Some(Duration::from_secs(30)), 0.5),
            Duration::from_secs(30)
        );
    }
}
