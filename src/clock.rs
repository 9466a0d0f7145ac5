//! Time, injected: every component asks a [`Clock`] for "now", so tests can move time by hand
//! (the one-hour rule is tested by advancing a manual clock 61 minutes, not by sleeping).

use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to (tests, and `herald replay --clock recorded`).
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self(Arc::new(Mutex::new(start)))
    }
    pub fn set(&self, t: DateTime<Utc>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = t;
    }
    pub fn advance(&self, d: std::time::Duration) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *g += chrono::Duration::from_std(d).unwrap_or(chrono::Duration::zero());
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
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
