//! `server.auth.proxy`: people signed in by an authenticating proxy in front of Herald (oauth2-proxy, an ingress
//! with SSO), as Grafana's auth proxy takes them. The proxy names the user in `user_header` and their groups in
//! `groups_header` (comma-separated); the headers are believed only on a connection from an address in
//! `trusted_proxies` (anyone else could send them); each group in `groups` gives a scope and, optionally, teams.
//! Checked here, at load: the CIDRs, the header names, the groups' scopes (teams are checked with the other
//! credentials', against the configured teams).

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Deserialize;

use super::{ConfigError, Scope, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxySettings {
    /// The header the proxy names the signed-in user in (`X-Forwarded-User`, `X-Auth-Request-User`…).
    pub user_header: String,
    /// The header the proxy lists the user's groups in, comma-separated (`X-Forwarded-Groups`).
    pub groups_header: String,
    /// The addresses the proxy connects from (`10.0.0.0/8`, `192.0.2.7/32`, `::1/128`; a bare address is /32 or
    /// /128). The headers of any other connection are ignored (it then needs a credential of its own).
    pub trusted_proxies: Vec<String>,
    /// What each group may do: `{scope, teams}`. A user has the widest scope of their groups, with the teams of the
    /// groups giving it; a user in none is refused.
    #[serde(default)]
    pub groups: BTreeMap<String, ProxyGroup>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyGroup {
    /// `read`, `respond` or `admin` (Argo CD sends events with an ingest token, never through a person's proxy).
    pub scope: Scope,
    /// The teams whose incidents the group acts on; unset: every team.
    pub teams: Option<Vec<String>>,
}

/// An address range: `10.0.0.0/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// `address/prefix`, or a bare address (one host); `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let net: IpAddr = addr.parse().ok()?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.len() <= 3 => p.parse().ok()?,
            Some(_) => return None,
        };
        (prefix <= max).then_some(Cidr { net, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        // An IPv4 peer on a dual-stack socket shows as ::ffff:a.b.c.d.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => same_prefix(&n.octets(), &a.octets(), self.prefix),
            (IpAddr::V6(n), IpAddr::V6(a)) => same_prefix(&n.octets(), &a.octets(), self.prefix),
            _ => false,
        }
    }
}

fn same_prefix(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let (whole, bits) = ((prefix / 8) as usize, prefix % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    bits == 0 || (a[whole] ^ b[whole]) >> (8 - bits) == 0
}

/// Whether `name` is an HTTP header name (a token: letters, digits and `!#$%&'*+-.^_`|~`).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl ProxySettings {
    /// The trusted ranges (validated at load; an invalid one is left out).
    pub fn trusted(&self) -> Vec<Cidr> {
        self.trusted_proxies.iter().filter_map(|c| Cidr::parse(c)).collect()
    }

    pub(super) fn validate(&self, errors: &mut Vec<ConfigError>) {
        self.validate_headers(errors);
        self.validate_trusted(errors);
        self.validate_groups(errors);
    }

    /// `user_header` and `groups_header`: two different header names, neither Authorization nor Cookie.
    fn validate_headers(&self, errors: &mut Vec<ConfigError>) {
        let at = "server.auth.proxy";
        for (key, name) in [
            ("user_header", &self.user_header),
            ("groups_header", &self.groups_header),
        ] {
            if name.trim().is_empty() {
                errors.push(invalid(
                    format!("{at}.{key}"),
                    "must not be empty: name the header the proxy sets",
                ));
            } else if !is_header_name(name.trim()) {
                errors.push(invalid(
                    format!("{at}.{key}"),
                    format!(
                        "{:?} is not an HTTP header name (such as X-Forwarded-User)",
                        name.chars().take(64).collect::<String>()
                    ),
                ));
            } else if name.trim().eq_ignore_ascii_case("authorization") || name.trim().eq_ignore_ascii_case("cookie") {
                errors.push(invalid(
                    format!("{at}.{key}"),
                    "must be a header of its own, not Authorization or Cookie",
                ));
            }
        }
        if self.user_header.trim().eq_ignore_ascii_case(self.groups_header.trim())
            && !self.user_header.trim().is_empty()
        {
            errors.push(invalid(format!("{at}.groups_header"), "must differ from user_header"));
        }
    }

    /// `trusted_proxies`: at least one address range, none of them every address.
    fn validate_trusted(&self, errors: &mut Vec<ConfigError>) {
        let at = "server.auth.proxy";
        if self.trusted_proxies.is_empty() {
            errors.push(invalid(
                format!("{at}.trusted_proxies"),
                "must name the addresses the proxy connects from (e.g. [10.0.0.0/8]): without them the headers \
                 would be believed from anyone",
            ));
        }
        for (i, c) in self.trusted_proxies.iter().enumerate() {
            match Cidr::parse(c) {
                None => errors.push(invalid(
                    format!("{at}.trusted_proxies[{i}]"),
                    format!(
                        "{:?} is not an address range such as 10.0.0.0/8, 192.0.2.7/32 or fd00::/8",
                        c.chars().take(64).collect::<String>()
                    ),
                )),
                Some(cidr) if cidr.prefix == 0 => errors.push(invalid(
                    format!("{at}.trusted_proxies[{i}]"),
                    format!(
                        "{c} is every address: anyone could name themselves in the header; name the proxy's addresses"
                    ),
                )),
                Some(_) => {}
            }
        }
    }

    /// `groups`: at least one, each a one-line name with a person's scope (never `ingest`).
    fn validate_groups(&self, errors: &mut Vec<ConfigError>) {
        let at = "server.auth.proxy";
        if self.groups.is_empty() {
            errors.push(invalid(
                format!("{at}.groups"),
                "name at least one group and what it may do ({GROUP: {scope: respond, teams: [payments]}}): a user \
                 in no configured group is refused",
            ));
        }
        for (name, g) in &self.groups {
            if name.trim().is_empty() || name.chars().any(char::is_control) || name.contains(',') {
                errors.push(invalid(
                    format!("{at}.groups.{name}"),
                    "a group name is one line without a comma",
                ));
            }
            if g.scope == Scope::Ingest {
                errors.push(invalid(
                    format!("{at}.groups.{name}.scope"),
                    "a proxy group is read, respond or admin: Argo CD sends events with an ingest token, not as a \
                     person signed in through the proxy",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_range_holds_its_addresses_only() {
        let c = Cidr::parse("10.1.0.0/16").expect("cidr");
        assert!(c.contains("10.1.255.3".parse().expect("ip")));
        assert!(!c.contains("10.2.0.1".parse().expect("ip")));
        assert!(c.contains("::ffff:10.1.2.3".parse().expect("ip")), "IPv4-mapped");
        let one = Cidr::parse("192.0.2.7").expect("bare");
        assert!(one.contains("192.0.2.7".parse().expect("ip")) && !one.contains("192.0.2.8".parse().expect("ip")));
        let odd = Cidr::parse("192.0.2.0/25").expect("cidr");
        assert!(odd.contains("192.0.2.127".parse().expect("ip")) && !odd.contains("192.0.2.128".parse().expect("ip")));
        let v6 = Cidr::parse("fd00::/8").expect("v6");
        assert!(v6.contains("fd12::1".parse().expect("ip")) && !v6.contains("fe80::1".parse().expect("ip")));
        for bad in [
            "10.0.0.0/33",
            "10.0.0/8",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "::/129",
            "proxy",
            "",
        ] {
            assert_eq!(Cidr::parse(bad), None, "{bad:?}");
        }
    }
}
