//! Time, injected: every component asks a [`Clock`] for "now", and the loops that wait for a time to come (the Argo
//! CD resync's lease checks and the watch's backoff) wait on it too, so tests move time by hand (the one-hour rule
//! is tested by advancing a manual clock 61 minutes, not by sleeping).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;

/// A wait on a [`Clock`]: done once the clock has moved as far as asked.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;

    /// Waits until `d` has passed on this clock (on the wall clock unless the clock says otherwise).
    fn sleep(&self, d: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(d))
    }

    /// Waits until this clock says `t` (at once if it is past): a loop that counts its next pass from when the
    /// last one began is not late by however long that pass took, nor by a clock moved during it.
    fn sleep_until(&self, t: DateTime<Utc>) -> Sleep {
        self.sleep((t - self.now()).to_std().unwrap_or(Duration::ZERO))
    }
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to (tests, and `herald replay --clock recorded`). A [`Clock::sleep`] on it
/// ends when the clock is moved past its end, however little wall-clock time that took.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Manual>);

#[derive(Debug)]
struct Manual {
    /// The time, and a wake-up for every sleep on it each time it moves.
    now: watch::Sender<DateTime<Utc>>,
    /// The ends of the sleeps waiting on this clock, by a number of their own (so a test can see them all asleep).
    sleeps: Mutex<BTreeMap<u64, DateTime<Utc>>>,
    next_sleep: AtomicU64,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self(Arc::new(Manual {
            now: watch::Sender::new(start),
            sleeps: Mutex::default(),
            next_sleep: AtomicU64::new(0),
        }))
    }
    pub fn set(&self, t: DateTime<Utc>) {
        self.0.now.send_replace(t);
    }
    pub fn advance(&self, d: Duration) {
        let d = chrono::Duration::from_std(d).unwrap_or(chrono::Duration::zero());
        self.0.now.send_modify(|t| *t += d);
    }

    /// How many sleeps on this clock wait for a time still to come. Once a test has moved the clock, the loops it
    /// woke have made their pass when this is back to what it was: each waits again, for a later time.
    pub fn sleeping(&self) -> usize {
        let now = self.now();
        let sleeps = self.0.sleeps.lock().unwrap_or_else(|e| e.into_inner());
        sleeps.values().filter(|end| **end > now).count()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.now.borrow()
    }

    fn sleep(&self, d: Duration) -> Sleep {
        self.sleep_until(self.now() + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX / 2))
    }

    fn sleep_until(&self, end: DateTime<Utc>) -> Sleep {
        let id = self.0.next_sleep.fetch_add(1, Ordering::Relaxed);
        (self.0.sleeps.lock().unwrap_or_else(|e| e.into_inner())).insert(id, end);
        // Counted as sleeping until it ends or is dropped (a `select!` that another branch won).
        let asleep = Asleep {
            clock: self.0.clone(),
            id,
        };
        let mut moves = self.0.now.subscribe();
        Box::pin(async move {
            let _asleep = asleep;
            if moves.wait_for(|now| *now >= end).await.is_err() {
                // The clock is gone: it never moves again.
                std::future::pending::<()>().await;
            }
        })
    }
}

/// One sleep on a [`ManualClock`], forgotten by it when dropped.
struct Asleep {
    clock: Arc<Manual>,
    id: u64,
}

impl Drop for Asleep {
    fn drop(&mut self) {
        (self.clock.sleeps.lock().unwrap_or_else(|e| e.into_inner())).remove(&self.id);
    }
}

pub type SharedClock = Arc<dyn Clock>;

/// Milliseconds since the Unix epoch: the one time representation the store uses on both engines.
pub fn to_millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub fn from_millis(ms: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_sleep_on_a_manual_clock_ends_when_the_clock_is_moved_past_it() {
        let clock = ManualClock::new(from_millis(0));
        let sleep = tokio::spawn(clock.sleep(Duration::from_secs(10)));
        tokio::task::yield_now().await;
        assert_eq!(clock.sleeping(), 1);
        clock.advance(Duration::from_secs(9));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleep.is_finished(), "9 s of 10");
        assert_eq!(clock.sleeping(), 1);
        clock.advance(Duration::from_secs(1));
        tokio::time::timeout(Duration::from_secs(5), sleep)
            .await
            .expect("woken when the clock reached its end")
            .expect("the sleep");
        assert_eq!(clock.sleeping(), 0, "forgotten once ended");
    }

    #[tokio::test]
    async fn a_sleep_until_a_time_the_clock_has_passed_ends_at_once() {
        let clock = ManualClock::new(from_millis(0));
        let began = clock.now();
        clock.advance(Duration::from_secs(11));
        tokio::time::timeout(
            Duration::from_secs(5),
            clock.sleep_until(began + chrono::Duration::seconds(2)),
        )
        .await
        .expect("already past");
        assert_eq!(clock.sleeping(), 0);
    }

    #[tokio::test]
    async fn a_sleep_dropped_before_its_end_is_not_sleeping_any_more() {
        let clock = ManualClock::new(from_millis(0));
        let sleep = clock.sleep(Duration::from_secs(10));
        assert_eq!(clock.sleeping(), 1);
        clock.advance(Duration::from_secs(10));
        assert_eq!(clock.sleeping(), 0, "its end has come, even before it is polled");
        drop(sleep);
        assert_eq!(clock.sleeping(), 0);
        let _later = clock.sleep(Duration::from_secs(1));
        assert_eq!(clock.sleeping(), 1);
    }
}
