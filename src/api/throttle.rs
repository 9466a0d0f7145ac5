//! How fast credentials may be guessed: failed authentications (a malformed or unknown credential) fill token
//! buckets, one per client (its address; an IPv6 client by its /64, which one host usually holds whole) and one for
//! all clients together. A client whose bucket is empty is answered 429 with `Retry-After`, before its credential is
//! even compared; while the shared bucket is empty, so is every client that failed recently (each new address gets one
//! try). A client that never fails is never slowed down, whatever others do. The client is the TCP peer: a proxy's
//! `X-Forwarded-For` is not trusted, so clients behind one proxy share its bucket.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many failures are allowed at once, and how fast that allowance comes back.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    pub burst: f64,
    pub per_second: f64,
}

/// Per client: 10 failures at once, then one a second. All clients together: 100 at once, then 10 a second.
pub const PER_CLIENT: Rate = Rate {
    burst: 10.0,
    per_second: 1.0,
};
pub const TOTAL: Rate = Rate {
    burst: 100.0,
    per_second: 10.0,
};

/// Clients remembered at most (about 64 bytes each); past this, those whose bucket is full again are forgotten.
const MAX_CLIENTS: usize = 65_536;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: Rate, now: Instant) -> Self {
        Self {
            tokens: rate.burst,
            at: now,
        }
    }

    fn refill(&mut self, rate: Rate, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate.per_second).min(rate.burst);
        self.at = now;
    }

    fn is_full(&self, rate: Rate) -> bool {
        self.tokens >= rate.burst
    }

    /// How long until one failure is allowed again (zero when one is).
    fn wait(&self, rate: Rate) -> Duration {
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / rate.per_second)
        }
    }
}

/// A client as the buckets know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client {
    V4(u32),
    /// The /64 prefix.
    V6(u64),
    Unknown,
}

impl Client {
    fn of(addr: Option<IpAddr>) -> Self {
        match addr.map(|a| a.to_canonical()) {
            Some(IpAddr::V4(a)) => Client::V4(a.into()),
            Some(IpAddr::V6(a)) => Client::V6((u128::from(a) >> 64) as u64),
            None => Client::Unknown,
        }
    }
}

pub struct FailureThrottle {
    per_client: Rate,
    total: Rate,
    state: Mutex<State>,
}

struct State {
    clients: HashMap<Client, Bucket>,
    total: Bucket,
    /// When the full buckets were last forgotten: at most once a second, so an attack at the bound does not make
    /// every failure walk the whole map.
    pruned_at: Option<Instant>,
}

impl FailureThrottle {
    pub fn new(per_client: Rate, total: Rate) -> Self {
        Self {
            per_client,
            total,
            state: Mutex::new(State {
                clients: HashMap::new(),
                total: Bucket::full(total, Instant::now()),
                pruned_at: None,
            }),
        }
    }

    /// `Err(wait)` when a request from `addr` must not have its credential compared now: its client has used its
    /// failures, or all clients together have and this one failed recently.
    pub fn check(&self, addr: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.total.refill(self.total, now);
        let total_wait = s.total.wait(self.total);
        let client = Client::of(addr);
        let at_bound = s.clients.len() >= MAX_CLIENTS;
        match s.clients.get_mut(&client) {
            Some(b) => {
                b.refill(self.per_client, now);
                let wait = b.wait(self.per_client);
                if !wait.is_zero() {
                    Err(wait)
                } else if !total_wait.is_zero() && !b.is_full(self.per_client) {
                    Err(total_wait)
                } else {
                    Ok(())
                }
            }
            // Not remembered because too many are: under attack, only the shared bucket can tell.
            None if at_bound && !total_wait.is_zero() => Err(total_wait),
            None => Ok(()),
        }
    }

    /// Counts a failed authentication from `addr`.
    pub fn failed(&self, addr: Option<IpAddr>, now: Instant) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let per_client = self.per_client;
        s.total.refill(self.total, now);
        s.total.tokens = (s.total.tokens - 1.0).max(0.0);
        let prune_due = s
            .pruned_at
            .is_none_or(|at| now.saturating_duration_since(at) >= Duration::from_secs(1));
        if s.clients.len() >= MAX_CLIENTS && prune_due {
            s.pruned_at = Some(now);
            s.clients.retain(|_, b| {
                b.refill(per_client, now);
                !b.is_full(per_client)
            });
        }
        let client = Client::of(addr);
        if s.clients.len() >= MAX_CLIENTS && !s.clients.contains_key(&client) {
            return;
        }
        let b = s.clients.entry(client).or_insert_with(|| Bucket::full(per_client, now));
        b.refill(per_client, now);
        b.tokens = (b.tokens - 1.0).max(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[test]
    fn a_client_gets_its_burst_then_waits_and_others_are_not_slowed() {
        let t = FailureThrottle::new(PER_CLIENT, TOTAL);
        let t0 = Instant::now();
        let a = ip("10.0.0.1");
        for _ in 0..10 {
            assert_eq!(t.check(a, t0), Ok(()));
            t.failed(a, t0);
        }
        let wait = t.check(a, t0).expect_err("the burst is used");
        assert!(
            wait > Duration::from_millis(900) && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert_eq!(t.check(ip("10.0.0.2"), t0), Ok(()), "another client is not slowed");
        assert_eq!(
            t.check(a, t0 + Duration::from_secs(1)),
            Ok(()),
            "one failure a second comes back"
        );
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let t = FailureThrottle::new(PER_CLIENT, TOTAL);
        let t0 = Instant::now();
        for i in 0..10 {
            t.failed(ip(&format!("2001:db8:1:2::{i:x}")), t0);
        }
        assert!(t.check(ip("2001:db8:1:2:ffff::1"), t0).is_err());
        assert_eq!(t.check(ip("2001:db8:1:3::1"), t0), Ok(()));
    }

    #[test]
    fn when_all_clients_together_fail_too_often_each_gets_one_try() {
        let t = FailureThrottle::new(PER_CLIENT, TOTAL);
        let t0 = Instant::now();
        // 100 addresses, one failure each: the shared bucket is empty, no client's own is.
        for i in 0..100u32 {
            let a = Some(IpAddr::V4((0x0a00_0000 + i).into()));
            assert_eq!(t.check(a, t0), Ok(()));
            t.failed(a, t0);
        }
        let wait = t
            .check(ip("10.0.0.5"), t0)
            .expect_err("failed recently, and the total is spent");
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        assert_eq!(
            t.check(ip("192.0.2.1"), t0),
            Ok(()),
            "a new address still gets its one try"
        );
        t.failed(ip("192.0.2.1"), t0);
        assert!(t.check(ip("192.0.2.1"), t0).is_err());
        assert_eq!(
            t.check(ip("10.0.0.5"), t0 + Duration::from_secs(1)),
            Ok(()),
            "the total comes back"
        );
    }

    #[test]
    fn memory_is_bounded_by_the_clients_remembered() {
        let t = FailureThrottle::new(PER_CLIENT, TOTAL);
        let t0 = Instant::now();
        for i in 0..(MAX_CLIENTS as u32 + 1000) {
            t.failed(Some(IpAddr::V4(i.into())), t0);
        }
        let s = t.state.lock().expect("lock");
        assert!(s.clients.len() <= MAX_CLIENTS, "{}", s.clients.len());
    }
}
