//! Signed one-click links ("Acknowledge", "Silence 1 h", "Silence until Monday 09:00") that every chat and e-mail
//! message carries: what a link asks ([`ActionLink`]), and its token — the link's fields and an HMAC-SHA256 over
//! them with `server.link_signing_key` — so a link works without logging in, cannot be forged or altered, and
//! expires. Pure: signing and checking only; acting on a link is the pipeline's, its pages the API's.
//!
//! A token is `base64url(payload) "." base64url(mac)`, the payload `v1|action|incident|expires|nonce|by` (`by`
//! base64url, empty when the link names nobody). The nonce makes each link one of a kind, so a used link is
//! remembered by it and a replay says what already happened.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// What a link does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkAction {
    Acknowledge,
    /// A silence of the incident's Application and kind for one hour.
    SilenceHour,
    /// A silence of the incident's Application and kind until the next Monday 09:00 in the team's time zone.
    SilenceUntilMonday,
}

impl LinkAction {
    pub const ALL: [LinkAction; 3] = [
        LinkAction::Acknowledge,
        LinkAction::SilenceHour,
        LinkAction::SilenceUntilMonday,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LinkAction::Acknowledge => "ack",
            LinkAction::SilenceHour => "silence-1h",
            LinkAction::SilenceUntilMonday => "silence-monday",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The link's words in a message and on its button.
    pub fn label(self) -> &'static str {
        match self {
            LinkAction::Acknowledge => "Acknowledge",
            LinkAction::SilenceHour => "Silence 1 h",
            LinkAction::SilenceUntilMonday => "Silence until Monday 09:00",
        }
    }
}

/// One signed link: an action on one incident (or, to acknowledge a group's incidents at once, on several),
/// until `expires`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionLink {
    pub action: LinkAction,
    pub incident: i64,
    /// More incidents the link acts on with `incident` ("Acknowledge all 40" under a message about a group too
    /// large to carry each incident's links): ascending, each above `incident`. Empty for a one-incident link.
    pub also: Vec<i64>,
    pub expires: DateTime<Utc>,
    /// Random, one per link: the key under which a used link is remembered.
    pub nonce: String,
    /// Who the link was made for (a message to one person), if anyone; otherwise the page asks for a name.
    pub by: Option<String>,
}

/// Why a token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkRefusal {
    #[error("this is not a Herald link (it may have been cut or changed on its way)")]
    Malformed,
    #[error("this link's signature does not match: it was changed, or not made by this Herald")]
    Forged,
    #[error("{}", self.words(super::Zone::UTC))]
    Expired(DateTime<Utc>),
}

impl LinkRefusal {
    /// Why, in people's words, with a time in `zone`.
    pub fn words(&self, zone: super::Zone) -> String {
        match self {
            LinkRefusal::Expired(at) => format!(
                "this link expired at {}: use a newer message's link, or Herald itself",
                zone.stamp(*at)
            ),
            other => other.to_string(),
        }
    }
}

type HmacSha256 = Hmac<Sha256>;

/// The longest token read: Slack takes a button's URL up to 3,000 characters, and a message's link to several
/// incidents is made only when it fits ([`ActionLink::fits`]).
pub const MAX_TOKEN_CHARS: usize = 2_800;

impl ActionLink {
    /// A new link for `action` on `incident`, valid until `expires`, with a fresh nonce.
    pub fn new(action: LinkAction, incident: i64, expires: DateTime<Utc>, by: Option<String>) -> Self {
        Self {
            action,
            incident,
            also: Vec::new(),
            expires,
            nonce: B64.encode(rand::random::<[u8; 16]>()),
            by,
        }
    }

    /// A link acknowledging every incident of `ids` at once (none when `ids` is empty).
    pub fn acknowledge_all(ids: &[i64], expires: DateTime<Utc>, by: Option<String>) -> Option<Self> {
        let mut ids: Vec<i64> = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let (&first, rest) = ids.split_first()?;
        Some(Self {
            also: rest.to_vec(),
            ..Self::new(LinkAction::Acknowledge, first, expires, by)
        })
    }

    /// Every incident the link acts on, ascending.
    pub fn incidents(&self) -> Vec<i64> {
        std::iter::once(self.incident)
            .chain(self.also.iter().copied())
            .collect()
    }

    /// The incident field of the payload: `42`, or for several `42.1.5` (the first, then each one's distance from
    /// the one before: short for the near numbers a group's incidents have).
    fn incident_field(&self) -> String {
        let mut s = self.incident.to_string();
        let mut before = self.incident;
        for &id in &self.also {
            s.push_str(&format!(".{}", id - before));
            before = id;
        }
        s
    }

    fn parse_incidents(field: &str) -> Option<(i64, Vec<i64>)> {
        let mut parts = field.split('.');
        let first: i64 = parts.next()?.parse().ok()?;
        let mut before = first;
        let mut also = Vec::new();
        for p in parts {
            let step: i64 = p.parse().ok().filter(|d| *d > 0)?;
            before = before.checked_add(step)?;
            also.push(before);
        }
        Some((first, also))
    }

    fn payload(&self) -> String {
        format!(
            "v1|{}|{}|{}|{}|{}",
            self.action.as_str(),
            self.incident_field(),
            self.expires.timestamp(),
            self.nonce,
            B64.encode(self.by.as_deref().unwrap_or_default())
        )
    }

    /// Whether `token` is short enough to be read back (and to sit behind a Slack button with its base URL).
    pub fn fits(token: &str) -> bool {
        token.len() <= MAX_TOKEN_CHARS
    }

    /// The token that carries this link, signed with `key`.
    pub fn token(&self, key: &[u8]) -> String {
        let payload = self.payload();
        let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
        mac.update(payload.as_bytes());
        format!(
            "{}.{}",
            B64.encode(payload.as_bytes()),
            B64.encode(mac.finalize().into_bytes())
        )
    }

    /// The link `token` carries, if `key` signed it (compared in constant time) and it has not expired at `now`.
    /// The signature is checked before any field is read.
    pub fn verify(token: &str, key: &[u8], now: DateTime<Utc>) -> Result<Self, LinkRefusal> {
        if token.len() > MAX_TOKEN_CHARS {
            return Err(LinkRefusal::Malformed);
        }
        let (payload, sig) = token.split_once('.').ok_or(LinkRefusal::Malformed)?;
        let payload = B64.decode(payload).map_err(|_| LinkRefusal::Malformed)?;
        let sig = B64.decode(sig).map_err(|_| LinkRefusal::Malformed)?;
        let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
        mac.update(&payload);
        mac.verify_slice(&sig).map_err(|_| LinkRefusal::Forged)?;
        let payload = String::from_utf8(payload).map_err(|_| LinkRefusal::Malformed)?;
        let link = Self::parse(&payload).ok_or(LinkRefusal::Malformed)?;
        if link.expires <= now {
            return Err(LinkRefusal::Expired(link.expires));
        }
        Ok(link)
    }

    fn parse(payload: &str) -> Option<Self> {
        let parts: Vec<&str> = payload.split('|').collect();
        let ["v1", action, incident, expires, nonce, by] = parts.as_slice() else {
            return None;
        };
        let by = String::from_utf8(B64.decode(by).ok()?).ok()?;
        let (incident, also) = Self::parse_incidents(incident)?;
        let action = LinkAction::parse(action)?;
        // Only an acknowledgement acts on several incidents at once.
        if !also.is_empty() && action != LinkAction::Acknowledge {
            return None;
        }
        Some(Self {
            action,
            incident,
            also,
            expires: DateTime::from_timestamp(expires.parse().ok()?, 0)?,
            nonce: nonce.to_string(),
            by: (!by.is_empty()).then_some(by),
        })
    }
}

/// A link as a message shows it: its words and its URL.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MessageLink {
    pub label: String,
    pub url: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"a-signing-key-of-thirty-two-bytes!";

    fn now() -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::days(20_000)
    }

    #[test]
    fn a_signed_link_reads_back_and_anything_changed_is_refused() {
        let link = ActionLink::new(
            LinkAction::SilenceHour,
            42,
            now() + chrono::Duration::days(7),
            Some("alice".into()),
        );
        let token = link.token(KEY);
        assert_eq!(ActionLink::verify(&token, KEY, now()), Ok(link.clone()));
        assert_eq!(
            ActionLink::verify(&token, b"another key", now()),
            Err(LinkRefusal::Forged)
        );
        let expired = now() + chrono::Duration::days(8);
        assert!(matches!(
            ActionLink::verify(&token, KEY, expired),
            Err(LinkRefusal::Expired(_))
        ));
        // Another incident in the payload, the same signature: refused.
        let (_, sig) = token.split_once('.').expect("dot");
        let mut other = link.clone();
        other.incident = 43;
        let altered = format!("{}.{sig}", B64.encode(other.payload()));
        assert_eq!(ActionLink::verify(&altered, KEY, now()), Err(LinkRefusal::Forged));
        for bad in ["", "abc", "a.b", &token[..token.len() - 3], &"x".repeat(5000)] {
            assert!(ActionLink::verify(bad, KEY, now()).is_err(), "{bad:?}");
        }
        let mut several =
            ActionLink::acknowledge_all(&[40, 7, 8, 12, 8], now() + chrono::Duration::days(1), None).expect("a link");
        assert_eq!(several.incidents(), vec![7, 8, 12, 40]);
        let token = several.token(KEY);
        assert_eq!(ActionLink::verify(&token, KEY, now()), Ok(several.clone()));
        // A silence of several incidents is no link Herald makes: refused even when signed.
        several.action = LinkAction::SilenceHour;
        assert_eq!(
            ActionLink::verify(&several.token(KEY), KEY, now()),
            Err(LinkRefusal::Malformed)
        );
        assert_ne!(
            ActionLink::new(LinkAction::Acknowledge, 1, now(), None).nonce,
            ActionLink::new(LinkAction::Acknowledge, 1, now(), None).nonce
        );
    }

    #[test]
    fn a_link_to_several_incidents_names_them_shortly_and_a_bad_list_is_no_link() {
        let expires = now() + chrono::Duration::days(7);
        // Six hundred incidents of one group, near each other: within what Slack takes behind a button.
        let ids: Vec<i64> = (0..600).map(|k| 10_000 + k * 3).collect();
        let link = ActionLink::acknowledge_all(&ids, expires, Some("bob".into())).expect("a link");
        let token = link.token(KEY);
        assert!(ActionLink::fits(&token), "{}", token.len());
        assert_eq!(ActionLink::verify(&token, KEY, now()).map(|l| l.incidents()), Ok(ids));
        assert_eq!(ActionLink::acknowledge_all(&[], expires, None), None);
        // Signed but not a list Herald writes: a step of 0 or less, a number that is none, an overflow.
        for field in ["7.0", "7.-1", "7.x", "7..1", &format!("{}.1", i64::MAX)] {
            let payload = format!("v1|ack|{field}|{}|nonce|", expires.timestamp());
            let mut mac = HmacSha256::new_from_slice(KEY).expect("key");
            mac.update(payload.as_bytes());
            let token = format!("{}.{}", B64.encode(&payload), B64.encode(mac.finalize().into_bytes()));
            assert_eq!(
                ActionLink::verify(&token, KEY, now()),
                Err(LinkRefusal::Malformed),
                "{field}"
            );
        }
    }
}
