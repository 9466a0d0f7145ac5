//! Slack interactivity seen from the pipeline: the Slack receivers that have buttons (`slack.signing_secret`, and
//! whose clicks they take: `slack.slack_users`), whether an incident was sent to one of them (its outbox rows: a
//! click acts only on what that receiver was told), who a Slack user is (`people.<name>.slack`), and the requests
//! already taken (in the store, so a replay is refused on any replica). Checking a signature is
//! `domain::slack_interaction`'s; what a click does is [`Pipeline::act_on_incident`].

use chrono::{DateTime, Utc};
use secrecy::SecretString;

use super::{Pipeline, PipelineError};
use crate::receivers::ReceiverKind;
use crate::receivers::slack::SlackUsers;

/// A Slack receiver with buttons, as a click is checked against it.
pub struct SlackApp {
    /// The receiver's name.
    pub receiver: String,
    pub signing_secret: SecretString,
    pub users: SlackUsers,
}

impl Pipeline {
    /// The Slack receivers with interactivity; empty when none has a signing secret.
    pub fn slack_apps(&self) -> Vec<SlackApp> {
        (self.core().settings.receivers.iter())
            .filter_map(|r| match &r.kind {
                ReceiverKind::Slack(c) => Some(SlackApp {
                    receiver: r.name.clone(),
                    signing_secret: c.signing_secret.clone()?,
                    users: c.slack_users,
                }),
                _ => None,
            })
            .collect()
    }

    /// The person (`people.<name>`) whose `slack` is this Slack user id, if any.
    pub fn slack_person(&self, user_id: &str) -> Option<String> {
        (self.core().settings.people.iter())
            .find(|(_, p)| p.slack.as_deref().is_some_and(|s| s.trim() == user_id))
            .map(|(name, _)| name.clone())
    }

    /// Whether incident `incident` was sent to the receiver `receiver` (a delivery about it is in the outbox).
    pub async fn sent_to(&self, receiver: &str, incident: i64) -> Result<bool, PipelineError> {
        Ok(self.core().store.was_told(receiver, incident).await?)
    }

    /// Takes the signed request remembered as `key` once: `false` when it was taken before (a replay). It is
    /// remembered until `expires`, when its timestamp leaves the window anyway.
    pub async fn claim_slack_request(&self, key: &str, expires: DateTime<Utc>) -> Result<bool, PipelineError> {
        let core = self.core();
        let now = core.clock.now();
        Ok(core.store.claim_slack_request(key, expires, now).await?)
    }
}
