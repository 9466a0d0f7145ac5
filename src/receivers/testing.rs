//! Shared fixtures for the receivers' tests: the clock and HTTP client they are built with.

use std::sync::Arc;

use crate::clock::{SharedClock, SystemClock};

use super::http::Http;

/// The wall clock: most receiver tests talk to real servers (Alertmanager, an SMTP relay) that read it too.
pub fn clock() -> SharedClock {
    Arc::new(SystemClock)
}

/// A plain reqwest client with the wall clock.
pub fn http() -> Http {
    Http::new(reqwest::Client::new(), clock())
}
