//! `people:` and `people_receivers:`: whom Herald may tell directly (the person who started a failed or pruning
//! sync), keyed by their Argo CD username, and which configured receivers send to a person.

use serde::Deserialize;

use super::{ConfigError, ReceiverKind, ReceiverSettings, Settings, invalid};

/// `people.<username>`: how to reach one person.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonSettings {
    /// An e-mail address.
    pub email: Option<String>,
    /// A Slack user id (`U024BE7LH`): a bot posting to it sends a direct message.
    pub slack: Option<String>,
}

/// `people_receivers`: the receivers that send to people (default: the first `email` receiver, the first `slack`
/// receiver with a bot token).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeopleReceivers {
    pub email: Option<String>,
    pub slack: Option<String>,
}

/// Only a bot token can post to a user id; an incoming webhook posts to its own channel.
fn slack_bot(r: &ReceiverSettings) -> bool {
    matches!(&r.kind, ReceiverKind::Slack(c) if c.token.is_some())
}

fn email(r: &ReceiverSettings) -> bool {
    matches!(r.kind, ReceiverKind::Email(_))
}

impl Settings {
    /// The receiver that e-mails people: `people_receivers.email`, else the first `email` receiver.
    pub fn people_email_receiver(&self) -> Option<&ReceiverSettings> {
        self.people_receiver(self.people_receivers.email.as_deref(), email)
    }

    /// The receiver that sends people Slack direct messages: `people_receivers.slack`, else the first `slack`
    /// receiver with a bot token.
    pub fn people_slack_receiver(&self) -> Option<&ReceiverSettings> {
        self.people_receiver(self.people_receivers.slack.as_deref(), slack_bot)
    }

    fn people_receiver(&self, named: Option<&str>, fits: fn(&ReceiverSettings) -> bool) -> Option<&ReceiverSettings> {
        match named {
            Some(name) => self.receiver(name).filter(|r| fits(r)),
            None => self.receivers.iter().find(|r| fits(r)),
        }
    }
}

/// A Slack user id: `U` or `W` then upper-case letters and digits (channel ids start with `C`, `G` or `D`).
pub fn is_slack_user_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some('U' | 'W'))
        && id.len() >= 3
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

pub(super) fn validate(s: &Settings, errors: &mut Vec<ConfigError>) {
    for (user, p) in &s.people {
        let path = format!("people.{user}");
        if p.email.is_none() && p.slack.is_none() {
            errors.push(invalid(&path, "needs `email` or `slack`"));
        }
        if let Some(id) = &p.slack
            && !is_slack_user_id(id)
        {
            errors.push(invalid(
                format!("{path}.slack"),
                format!("{id:?} is not a Slack user id (U… or W…, as in the member's profile)"),
            ));
        }
        if let Some(a) = &p.email
            && let Err(e) = a.parse::<lettre::Address>()
        {
            errors.push(invalid(
                format!("{path}.email"),
                format!("{a:?} is not an e-mail address: {e}"),
            ));
        }
    }
    let wanted = [
        (
            "email",
            &s.people_receivers.email,
            email as fn(&ReceiverSettings) -> bool,
            "an `email` receiver",
        ),
        (
            "slack",
            &s.people_receivers.slack,
            slack_bot,
            "a `slack` receiver with a bot `token` (a webhook cannot send direct messages)",
        ),
    ];
    for (key, name, fits, what) in wanted {
        let Some(name) = name else { continue };
        let path = format!("people_receivers.{key}");
        match s.receiver(name) {
            None => errors.push(invalid(path, format!("no receiver is named {name:?}"))),
            Some(r) if !fits(r) => errors.push(invalid(path, format!("{name:?} is not {what}"))),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECEIVERS: &str = "receivers:
  - {name: hook, slack: {webhook_url: 'https://hooks.slack.com/services/T/B/X'}}
  - {name: bot, slack: {token: xoxb-1, channel: '#ops'}}
  - {name: console, console: {}}
";

    fn errors(yaml: &str) -> String {
        Settings::from_yaml(&format!("{RECEIVERS}{yaml}"))
            .expect_err(yaml)
            .to_string()
    }

    #[test]
    fn a_person_is_reached_through_the_first_slack_bot_and_the_first_email_receiver() {
        let s = Settings::from_yaml(&format!(
            "{RECEIVERS}people: {{alice@example.com: {{email: alice@example.com, slack: U024BE7LH}}}}"
        ))
        .expect("valid");
        assert_eq!(s.people_slack_receiver().map(|r| r.name.as_str()), Some("bot"));
        assert!(s.people_email_receiver().is_none(), "no email receiver is configured");
        assert_eq!(s.people["alice@example.com"].slack.as_deref(), Some("U024BE7LH"));
    }

    #[test]
    fn check_config_names_each_wrong_person_key() {
        let cases = [
            ("people: {alice: {phone: 123}}", "people"),
            ("people: {alice: {slack: C024BE7LH}}", "people.alice.slack"),
            ("people: {alice: {slack: '#alice'}}", "people.alice.slack"),
            ("people: {alice: {email: not-an-address}}", "people.alice.email"),
            ("people: {alice: {}}", "people.alice"),
            ("people_receivers: {slack: ghost}", "people_receivers.slack"),
            ("people_receivers: {slack: hook}", "people_receivers.slack"),
            ("people_receivers: {email: bot}", "people_receivers.email"),
            ("people_receivers: {pager: bot}", "people_receivers"),
        ];
        for (yaml, path) in cases {
            let err = errors(yaml);
            assert!(err.contains(path), "{yaml}: expected {path} in {err}");
        }
        assert!(errors("people_receivers: {slack: hook}").contains("webhook"));
    }

    #[test]
    fn slack_user_ids_start_with_u_or_w() {
        for id in ["U024BE7LH", "W012A3CDE"] {
            assert!(is_slack_user_id(id), "{id}");
        }
        for id in ["C024BE7LH", "u024be7lh", "U", "alice", ""] {
            assert!(!is_slack_user_id(id), "{id}");
        }
    }

    #[test]
    fn the_initiator_is_told_of_failed_and_pruning_syncs_unless_a_rule_says_otherwise() {
        use crate::domain::Kind;
        let s = Settings::from_yaml("rules: {pruned: {notify_initiator: false}, degraded: {notify_initiator: true}}")
            .expect("valid");
        assert!(s.rules.notify_initiator(Kind::SyncFailed));
        assert!(!s.rules.notify_initiator(Kind::Pruned));
        assert!(s.rules.notify_initiator(Kind::Degraded));
        assert!(!s.rules.notify_initiator(Kind::OutOfSync));
    }
}
