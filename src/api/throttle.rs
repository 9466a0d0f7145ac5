//! How fast credentials may be guessed: failed authentications (a malformed or unknown credential) fill token
//! buckets, one per client (its address; an IPv6 client by its /64, which one host usually holds whole) and one for
//! all clients together. A client whose bucket is empty is answered 429 with `Retry-After`, before its credential is
//! even compared. While the shared bucket is empty (many addresses guessing at once), only the clients that
//! authenticated in the last [`TRUSTED_FOR`] are compared: Argo CD keeps sending, a new address waits. A client that
//! never fails is never slowed down by its own bucket. The client is the TCP peer: a proxy's `X-Forwarded-For` is not
//! trusted, so clients behind one proxy share its bucket.

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

/// How long a client that authenticated stays one that is compared while everyone else waits.
pub const TRUSTED_FOR: Duration = Duration::from_secs(3600);

/// Clients that authenticated, remembered at most; past this, those not seen for [`TRUSTED_FOR`] are forgotten.
const MAX_TRUSTED: usize = 4096;

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
    /// When each client last authenticated.
    trusted: HashMap<Client, Instant>,
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
                trusted: HashMap::new(),
                total: Bucket::full(total, Instant::now()),
                pruned_at: None,
            }),
        }
    }

    /// `Err(wait)` when a request from `addr` must not have its credential compared now: its client has used its
    /// failures, or all clients together have and this one did not authenticate lately.
    pub fn check(&self, addr: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.total.refill(self.total, now);
        let total_wait = s.total.wait(self.total);
        let client = Client::of(addr);
        if let Some(b) = s.clients.get_mut(&client) {
            b.refill(self.per_client, now);
            let wait = b.wait(self.per_client);
            if !wait.is_zero() {
                return Err(wait);
            }
        }
        let trusted = s
            .trusted
            .get(&client)
            .is_some_and(|at| now.saturating_duration_since(*at) < TRUSTED_FOR);
        if total_wait.is_zero() || trusted {
            Ok(())
        } else {
            Err(total_wait)
        }
    }

    /// Remembers that `addr` authenticated (with a valid credential, whatever its scope).
    pub fn succeeded(&self, addr: Option<IpAddr>, now: Instant) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let client = Client::of(addr);
        if s.trusted.len() >= MAX_TRUSTED && !s.trusted.contains_key(&client) {
            s.trusted
                .retain(|_, at| now.saturating_duration_since(*at) < TRUSTED_FOR);
            if s.trusted.len() >= MAX_TRUSTED {
                return;
            }
        }
        s.trusted.insert(client, now);
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
    fn when_all_clients_together_fail_too_often_only_clients_that_authenticated_lately_are_compared() {
        let t = FailureThrottle::new(PER_CLIENT, TOTAL);
        let t0 = Instant::now();
        let argocd = ip("10.9.9.9");
        t.succeeded(argocd, t0);
        // 100 addresses, one failure each: the shared bucket is empty, no client's own is.
        for i in 0..100u32 {
            let a = Some(IpAddr::V4((0x0a00_0000 + i).into()));
            assert_eq!(t.check(a, t0), Ok(()));
            t.failed(a, t0);
        }
        let wait = t.check(ip("192.0.2.1"), t0).expect_err("a new address waits");
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        assert!(t.check(ip("10.0.0.5"), t0).is_err());
        assert_eq!(t.check(argocd, t0), Ok(()), "a client that authenticated keeps going");
        assert_eq!(
            t.check(ip("192.0.2.1"), t0 + Duration::from_secs(1)),
            Ok(()),
            "the total comes back"
        );
        assert!(
            t.check(argocd, t0 + TRUSTED_FOR + Duration::from_secs(1)).is_ok(),
            "the total is back by then"
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
