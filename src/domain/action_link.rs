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

/// One signed link: an action on one incident, until `expires`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionLink {
    pub action: LinkAction,
    pub incident: i64,
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
    #[error("this link expired at {}: use a newer message's link, or Herald itself", .0.format("%Y-%m-%d %H:%M UTC"))]
    Expired(DateTime<Utc>),
}

type HmacSha256 = Hmac<Sha256>;

impl ActionLink {
    /// A new link for `action` on `incident`, valid until `expires`, with a fresh nonce.
    pub fn new(action: LinkAction, incident: i64, expires: DateTime<Utc>, by: Option<String>) -> Self {
        Self {
            action,
            incident,
            expires,
            nonce: B64.encode(rand::random::<[u8; 16]>()),
            by,
        }
    }

    fn payload(&self) -> String {
        format!(
            "v1|{}|{}|{}|{}|{}",
            self.action.as_str(),
            self.incident,
            self.expires.timestamp(),
            self.nonce,
            B64.encode(self.by.as_deref().unwrap_or_default())
        )
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
        if token.len() > 1024 {
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
        Some(Self {
            action: LinkAction::parse(action)?,
            incident: incident.parse().ok()?,
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
        assert_ne!(
            ActionLink::new(LinkAction::Acknowledge, 1, now(), None).nonce,
            ActionLink::new(LinkAction::Acknowledge, 1, now(), None).nonce
        );
    }
}
