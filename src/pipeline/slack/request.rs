//! A Slack request read, without acting on it: its signature (`X-Slack-Signature`: `v0=` + hex HMAC-SHA256 over
//! `v0:{X-Slack-Request-Timestamp}:{raw body}` with the app's signing secret, compared in constant time, refused
//! beyond [`MAX_AGE`] either way of now), and the `payload` form field (a `block_actions` JSON: which of Herald's
//! buttons, on which incident, clicked by whom). Pure: checking and reading only; what a click does is the parent
//! module's. The buttons themselves are the Slack receiver's (`receivers/slack/blocks.rs`, with their action ids).

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::domain::action_link::LinkAction;
use crate::receivers::slack::{ACK_ACTION_ID, SILENCE_ACTION_ID};

/// How far a request's timestamp may be from now, either way, as Slack advises: older ones are replays.
pub const MAX_AGE: chrono::Duration = chrono::Duration::minutes(5);

/// The longest Slack user name taken as the name of who acted.
const MAX_USER_NAME: usize = 80;

/// Why a request is not taken as coming from Slack (answered 401). The messages name no secret and echo no
/// signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureRefusal {
    #[error("{0} is missing: Slack signs every request it sends (is this Slack?)")]
    Missing(&'static str),
    #[error("X-Slack-Request-Timestamp is not a number of seconds")]
    BadTimestamp,
    #[error(
        "X-Slack-Request-Timestamp is more than 5 minutes from Herald's clock: a replayed request, or a clock that is off"
    )]
    Stale,
    #[error("X-Slack-Signature does not match the signing secret of any Slack receiver with interactivity")]
    Forged,
    #[error("this exact request was received before: a replay")]
    Replayed,
}

/// A `block_actions` payload Herald cannot act on (answered 400): what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PayloadRefusal(pub String);

/// The request's timestamp, when it is within [`MAX_AGE`] of `now`: checked before the body is read.
pub fn fresh_timestamp(timestamp: Option<&str>, now: DateTime<Utc>) -> Result<i64, SignatureRefusal> {
    let ts = timestamp.ok_or(SignatureRefusal::Missing("X-Slack-Request-Timestamp"))?;
    let secs: i64 = ts.trim().parse().map_err(|_| SignatureRefusal::BadTimestamp)?;
    let at = DateTime::from_timestamp(secs, 0).ok_or(SignatureRefusal::BadTimestamp)?;
    if (now - at).abs() > MAX_AGE {
        return Err(SignatureRefusal::Stale);
    }
    Ok(secs)
}

/// `v0=` + hex HMAC-SHA256 of `v0:{timestamp}:{body}` with `secret`: what Slack puts in `X-Slack-Signature`.
pub fn signature(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// Which of `secrets` signed `body` (its index), comparing in constant time with every one of them.
pub fn signed_by(
    secrets: &[&[u8]],
    timestamp: &str,
    signature_header: Option<&str>,
    body: &[u8],
) -> Result<usize, SignatureRefusal> {
    let given = signature_header.ok_or(SignatureRefusal::Missing("X-Slack-Signature"))?;
    let mut found = None;
    for (k, secret) in secrets.iter().enumerate() {
        let expected = signature(secret, timestamp, body);
        if bool::from(expected.as_bytes().ct_eq(given.trim().as_bytes())) && found.is_none() {
            found = Some(k);
        }
    }
    found.ok_or(SignatureRefusal::Forged)
}

/// The key a request is remembered by against replays: a hash of its signature (the signature itself is not
/// kept).
pub fn replay_key(signature_header: &str) -> String {
    hex::encode(Sha256::digest(signature_header.trim().as_bytes()))
}

/// One click on one of Herald's buttons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interaction {
    pub action: LinkAction,
    pub incident: i64,
    /// The Slack user id (`U…`).
    pub user_id: String,
    /// Their Slack user name, without `@`.
    pub user_name: String,
}

impl Interaction {
    /// Who acted, as Herald records it: `@alice (Slack)`.
    pub fn by(&self) -> String {
        format!("@{} (Slack)", self.user_name)
    }
}

/// At most 64 characters of what the sender wrote, for an error message.
fn short(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// The interaction in a form body `payload=<url-encoded JSON>`, which must be a `block_actions` click on one of
/// Herald's buttons whose value is an incident id.
pub fn parse(body: &[u8]) -> Result<Interaction, PayloadRefusal> {
    let v = payload_json(body)?;
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    if kind != "block_actions" {
        return Err(PayloadRefusal(format!(
            "Herald takes `block_actions` payloads (its buttons), not {:?}",
            short(kind, 64)
        )));
    }
    let (action, incident) = button(&v)?;
    let (user_id, user_name) = clicked_by(&v)?;
    Ok(Interaction {
        action,
        incident,
        user_id: user_id.to_string(),
        user_name: user_name.to_string(),
    })
}

/// The `payload` field of the form body, a JSON object.
fn payload_json(body: &[u8]) -> Result<Value, PayloadRefusal> {
    let refuse = |s: String| PayloadRefusal(s);
    let payload = url::form_urlencoded::parse(body)
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v.into_owned())
        .ok_or_else(|| refuse("the body has no `payload` field (Slack sends payload=<JSON>, form-encoded)".into()))?;
    let v: Value =
        serde_json::from_str(&payload).map_err(|e| refuse(format!("the `payload` field is not JSON: {e}")))?;
    if !v.is_object() {
        return Err(refuse("the `payload` field is not a JSON object".into()));
    }
    Ok(v)
}

/// Which of Herald's buttons was clicked (the first action's `action_id`), on which incident (its `value`).
fn button(v: &Value) -> Result<(LinkAction, i64), PayloadRefusal> {
    let refuse = |s: String| PayloadRefusal(s);
    let action = v
        .pointer("/actions/0")
        .filter(|a| a.is_object())
        .ok_or_else(|| refuse("the payload has no `actions` (an array with the button clicked)".into()))?;
    let action_id = action.get("action_id").and_then(Value::as_str).unwrap_or("");
    let link_action = match action_id {
        ACK_ACTION_ID => LinkAction::Acknowledge,
        SILENCE_ACTION_ID => LinkAction::SilenceHour,
        other => {
            return Err(refuse(format!(
                "unknown action_id {:?}: Herald's buttons are {ACK_ACTION_ID} and {SILENCE_ACTION_ID}",
                short(other, 64)
            )));
        }
    };
    let value = action.get("value").and_then(Value::as_str).unwrap_or("");
    let incident = value.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| {
        refuse(format!(
            "the button's value must be an incident id (a positive number), not {:?}",
            short(value, 64)
        ))
    })?;
    Ok((link_action, incident))
}

/// Who clicked: the `user` object's Slack user id and user name (`username`, else `name`, without `@`).
fn clicked_by(v: &Value) -> Result<(&str, &str), PayloadRefusal> {
    let refuse = |s: String| PayloadRefusal(s);
    let user = v
        .get("user")
        .filter(|u| u.is_object())
        .ok_or_else(|| refuse("the payload has no `user` object (who clicked)".into()))?;
    let user_id = user.get("id").and_then(Value::as_str).unwrap_or("").trim();
    if user_id.is_empty() || user_id.len() > 64 || !user_id.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(refuse("`user.id` must be a Slack user id (letters and digits)".into()));
    }
    let name = ["username", "name"]
        .iter()
        .filter_map(|k| user.get(*k).and_then(Value::as_str))
        .map(|n| n.trim().trim_start_matches('@'))
        .find(|n| !n.is_empty())
        .ok_or_else(|| refuse("the payload's `user` has neither `username` nor `name`".into()))?;
    if name.chars().count() > MAX_USER_NAME || name.chars().any(char::is_control) {
        return Err(refuse(format!(
            "`user.username` must be one line of at most {MAX_USER_NAME} characters"
        )));
    }
    Ok((user_id, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SECRET: &[u8] = b"8f742231b10e8888abcd99yyyzzz85a5";

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_531_420_618, 0).expect("t")
    }

    fn form(payload: &Value) -> Vec<u8> {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &payload.to_string())
            .finish()
            .into_bytes()
    }

    fn click(action_id: &str, value: &str) -> Value {
        json!({
            "type": "block_actions",
            "user": {"id": "U0ALICE", "username": "alice", "name": "alice", "team_id": "T1"},
            "response_url": "https://hooks.slack.com/actions/T1/1/x",
            "actions": [{"action_id": action_id, "block_id": "b", "type": "button", "value": value}],
        })
    }

    #[test]
    fn slacks_documented_example_signature_is_what_herald_computes() {
        // From Slack's "Verifying requests from Slack" page.
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        assert_eq!(
            signature(SECRET, "1531420618", body),
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }

    #[test]
    fn a_request_signed_with_one_of_the_secrets_is_taken_anything_else_is_refused() {
        let body = form(&click(ACK_ACTION_ID, "7"));
        let sig = signature(SECRET, "1531420618", &body);
        let secrets: [&[u8]; 2] = [b"another-secret", SECRET];
        assert_eq!(signed_by(&secrets, "1531420618", Some(&sig), &body), Ok(1));
        assert_eq!(
            signed_by(&secrets, "1531420619", Some(&sig), &body),
            Err(SignatureRefusal::Forged),
            "another timestamp"
        );
        let mut other = body.clone();
        other.push(b'x');
        assert_eq!(
            signed_by(&secrets, "1531420618", Some(&sig), &other),
            Err(SignatureRefusal::Forged)
        );
        assert_eq!(
            signed_by(&secrets, "1531420618", None, &body),
            Err(SignatureRefusal::Missing("X-Slack-Signature"))
        );
        assert_eq!(
            signed_by(&[], "1531420618", Some(&sig), &body),
            Err(SignatureRefusal::Forged)
        );
    }

    #[test]
    fn a_timestamp_more_than_five_minutes_either_way_is_stale() {
        let at = |d: i64| Some((now().timestamp() + d).to_string());
        assert_eq!(fresh_timestamp(at(0).as_deref(), now()), Ok(now().timestamp()));
        assert!(fresh_timestamp(at(-300).as_deref(), now()).is_ok());
        assert!(fresh_timestamp(at(300).as_deref(), now()).is_ok());
        assert_eq!(
            fresh_timestamp(at(-301).as_deref(), now()),
            Err(SignatureRefusal::Stale)
        );
        assert_eq!(fresh_timestamp(at(360).as_deref(), now()), Err(SignatureRefusal::Stale));
        assert_eq!(
            fresh_timestamp(Some("soon"), now()),
            Err(SignatureRefusal::BadTimestamp)
        );
        assert_eq!(
            fresh_timestamp(Some("99999999999999999"), now()),
            Err(SignatureRefusal::BadTimestamp)
        );
        assert_eq!(
            fresh_timestamp(None, now()),
            Err(SignatureRefusal::Missing("X-Slack-Request-Timestamp"))
        );
    }

    #[test]
    fn a_click_reads_as_the_action_the_incident_and_who() {
        let got = parse(&form(&click(SILENCE_ACTION_ID, "42"))).expect("parsed");
        assert_eq!(
            got,
            Interaction {
                action: LinkAction::SilenceHour,
                incident: 42,
                user_id: "U0ALICE".into(),
                user_name: "alice".into(),
            }
        );
        assert_eq!(got.by(), "@alice (Slack)");
        let mut only_name = click(ACK_ACTION_ID, "1");
        only_name["user"] = json!({"id": "U1", "name": "@bob"});
        assert_eq!(parse(&form(&only_name)).expect("parsed").user_name, "bob");
    }

    #[test]
    fn a_payload_herald_cannot_act_on_says_what_is_wrong() {
        let refused = |body: &[u8]| parse(body).expect_err("refused").0;
        assert!(refused(b"").contains("no `payload`"));
        assert!(refused(b"payload=%7Bnot").contains("not JSON"));
        assert!(refused(b"payload=%5B1%5D").contains("not a JSON object"));
        let mut v = click(ACK_ACTION_ID, "1");
        v["type"] = json!("view_submission");
        assert!(refused(&form(&v)).contains("block_actions"));
        assert!(refused(&form(&click("herald_reboot", "1"))).contains("unknown action_id"));
        assert!(refused(&form(&click(ACK_ACTION_ID, "-3"))).contains("incident id"));
        assert!(refused(&form(&click(ACK_ACTION_ID, "abc"))).contains("incident id"));
        let mut v = click(ACK_ACTION_ID, "1");
        v["actions"] = json!("herald_ack");
        assert!(refused(&form(&v)).contains("actions"));
        let mut v = click(ACK_ACTION_ID, "1");
        v["user"] = json!({"id": "U1", "username": 5});
        assert!(refused(&form(&v)).contains("username"));
        let mut v = click(ACK_ACTION_ID, "1");
        v["user"] = json!({"id": "U1", "username": "eve\nERROR forged"});
        assert!(refused(&form(&v)).contains("one line"));
        let mut v = click(ACK_ACTION_ID, "1");
        v["user"]["id"] = json!("U1; DROP");
        assert!(refused(&form(&v)).contains("user.id"));
    }

    #[test]
    fn the_replay_key_is_not_the_signature() {
        let sig = signature(SECRET, "1", b"x");
        let key = replay_key(&sig);
        assert_ne!(key, sig);
        assert!(!key.contains(&sig[3..]));
        assert_eq!(key, replay_key(&format!(" {sig} ")));
    }
}
