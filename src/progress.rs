//! How far the background loops have got: every pass of the scheduler (timers) and of the outbox worker
//! (deliveries) is counted, with whether it did anything. `/metrics` shows the counts
//! (`herald_loop_passes_total{loop, outcome}`: a loop whose count stands still has stopped); tests wait on them
//! ([`Progress::settled`]) instead of sleeping after they move the clock.

use std::sync::Arc;

use tokio::sync::watch;

/// A background loop that reports its passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loop {
    Scheduler,
    Outbox,
}

impl Loop {
    pub fn as_str(self) -> &'static str {
        match self {
            Loop::Scheduler => "scheduler",
            Loop::Outbox => "outbox",
        }
    }
}

/// Passes completed since the start, per loop, and how many of them did something.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Passes {
    pub scheduler: u64,
    pub outbox: u64,
    pub worked: u64,
}

impl Passes {
    /// Whether both loops made a whole pass after `before` was read: each completed at least two more, so at
    /// least one of them started after it.
    pub fn both_passed_since(&self, before: &Passes) -> bool {
        self.scheduler >= before.scheduler + 2 && self.outbox >= before.outbox + 2
    }
}

/// One application's loops' count, shared by the loops (which add) and whoever waits.
#[derive(Clone, Debug)]
pub struct Progress(Arc<watch::Sender<Passes>>);

impl Default for Progress {
    fn default() -> Self {
        Progress(Arc::new(watch::Sender::new(Passes::default())))
    }
}

impl Progress {
    /// `l` completed a pass; `worked`: it ran a timer or made a delivery attempt.
    pub fn passed(&self, l: Loop, worked: bool) {
        self.0.send_modify(|p| {
            match l {
                Loop::Scheduler => p.scheduler += 1,
                Loop::Outbox => p.outbox += 1,
            }
            if worked {
                p.worked += 1;
            }
        });
        let outcome = if worked { "worked" } else { "idle" };
        metrics::counter!("herald_loop_passes_total", "loop" => l.as_str(), "outcome" => outcome).increment(1);
    }

    pub fn passes(&self) -> Passes {
        *self.0.borrow()
    }

    /// Waits until the loops are idle at the clock's current time: both made a whole pass, started after the
    /// wait began, and no pass in that time did anything. Whatever was due then has been done, deliveries
    /// included (a timer that queues one makes the round count as work, and the next round sees the outbox).
    /// Returns at once if the loops have stopped.
    pub async fn settled(&self) {
        let mut rx = self.0.subscribe();
        loop {
            let before = *rx.borrow_and_update();
            let Ok(after) = rx.wait_for(|p| p.both_passed_since(&before)).await else {
                return;
            };
            if after.worked == before.worked {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn settled_waits_for_a_whole_idle_pass_of_both_loops() {
        let progress = Progress::default();
        let waiting = tokio::spawn({
            let p = progress.clone();
            async move { p.settled().await }
        });
        // A round with work (the scheduler fired something) does not settle it…
        for worked in [true, false] {
            progress.passed(Loop::Scheduler, worked);
            progress.passed(Loop::Outbox, false);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "work was done in that round");
        // …two idle passes of each after it do.
        for _ in 0..2 {
            progress.passed(Loop::Scheduler, false);
            progress.passed(Loop::Outbox, false);
        }
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("settled after an idle round")
            .expect("joined");
    }
}
