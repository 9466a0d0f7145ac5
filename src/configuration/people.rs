//! `people:` and `people_receivers:`: whom Herald may tell directly (the person who started a failed or pruning
//! sync), keyed by their Argo CD username, and which configured receivers send to a person.

use serde::Deserialize;

use super::{ConfigError, ReceiverSettings, Settings, invalid};
use crate::domain::Contact;

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

impl PersonSettings {
    /// The person's address of this kind, if `people.<username>` gives one.
    pub fn address(&self, contact: Contact) -> Option<&str> {
        match contact {
            Contact::Email => self.email.as_deref(),
            Contact::Slack => self.slack.as_deref(),
        }
    }
}

impl PeopleReceivers {
    /// The receiver `people_receivers.<contact>` names, if it names one.
    pub fn named(&self, contact: Contact) -> Option<&str> {
        match contact {
            Contact::Email => self.email.as_deref(),
            Contact::Slack => self.slack.as_deref(),
        }
    }
}

/// Whether `r` can message a person by `contact` (its integration says so: `Capabilities::reaches_person`).
fn reaches(r: &ReceiverSettings, contact: Contact) -> bool {
    r.kind.capabilities().reaches_person == Some(contact)
}

/// What `people_receivers.<contact>` must name, for the message that refuses another receiver.
fn wanted(contact: Contact) -> &'static str {
    match contact {
        Contact::Email => "an `email` receiver",
        Contact::Slack => "a `slack` receiver with a bot `token` (a webhook cannot send direct messages)",
    }
}

impl Settings {
    /// The receiver that reaches people by `contact`: the one `people_receivers.<contact>` names, else the first
    /// receiver that can (the first `email` receiver, the first Slack bot).
    pub fn people_receiver(&self, contact: Contact) -> Option<&ReceiverSettings> {
        match self.people_receivers.named(contact) {
            Some(name) => self.receiver(name).filter(|r| reaches(r, contact)),
            None => self.receivers.iter().find(|r| reaches(r, contact)),
        }
    }

    /// The ways Herald can reach `people.<username>` directly: for each contact it gives that a people receiver
    /// can use, that receiver and the recipient. Empty for someone not in `people`.
    pub fn ways_to_reach(&self, username: &str) -> Vec<(&ReceiverSettings, crate::domain::Recipient)> {
        let Some((name, person)) = self.people.get_key_value(username) else {
            return Vec::new();
        };
        (Contact::ALL.into_iter())
            .filter_map(|contact| {
                let receiver = self.people_receiver(contact)?;
                Some((
                    receiver,
                    crate::domain::Recipient::by(name, contact, person.address(contact)?),
                ))
            })
            .collect()
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
    for contact in Contact::ALL {
        let Some(name) = s.people_receivers.named(contact) else {
            continue;
        };
        let path = format!("people_receivers.{}", contact.as_str());
        match s.receiver(name) {
            None => errors.push(invalid(path, format!("no receiver is named {name:?}"))),
            Some(r) if !reaches(r, contact) => {
                errors.push(invalid(path, format!("{name:?} is not {}", wanted(contact))))
            }
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
        assert_eq!(s.people_receiver(Contact::Slack).map(|r| r.name.as_str()), Some("bot"));
        assert!(
            s.people_receiver(Contact::Email).is_none(),
            "no email receiver is configured"
        );
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
