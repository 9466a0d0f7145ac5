//! How tests wait. For Herald to finish something: until a condition holds ([`eventually`], or the test app's
//! `settle`, which waits on the loops' own count of their passes), or until the loops that sleep on a manual clock
//! have made their pass after it moved ([`until_asleep`]). For time itself, only where the wall clock is what is
//! tested ([`let_time_pass`]). These are the only places the tests pause.

use std::time::Duration;

use herald::clock::ManualClock;

/// Waits until `f` returns Some, polling every 50 ms, for at most `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `n` sleeps on `clock` wait for a time still to come: after the clock moved, the `n` loops that sleep
/// on it (the Argo CD resync's, the watch's) have made the pass it woke them for and sleep again.
pub async fn until_asleep(clock: &ManualClock, n: usize) {
    let asleep = eventually(Duration::from_secs(20), || {
        std::future::ready((clock.sleeping() == n).then_some(()))
    })
    .await;
    assert!(
        asleep.is_some(),
        "{} sleeps on the clock, not {n}, after 20 s",
        clock.sleeping()
    );
}

/// Lets wall-clock time pass on purpose, where it is what the test is about: a real binary down across a
/// deadline, a Retry-After window, a sender's pace. Never to wait for Herald to do something.
pub async fn let_time_pass(d: Duration) {
    tokio::time::sleep(d).await
}

/// [`let_time_pass`] on a plain thread (a writer racing the server).
pub fn let_time_pass_blocking(d: Duration) {
    std::thread::sleep(d)
}
