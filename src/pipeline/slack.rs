//! Slack interactivity seen from the pipeline: the signing secrets of the Slack receivers that have buttons
//! (`slack.signing_secret`), and the requests already taken (in the store, so a replay is refused on any replica).
//! Checking a signature is `domain::slack_interaction`'s; what a click does is [`Pipeline::act_on_incident`].

use chrono::{DateTime, Utc};
use secrecy::SecretString;

use super::{Pipeline, PipelineError};
use crate::receivers::ReceiverKind;

impl Pipeline {
    /// The signing secrets of the Slack receivers with interactivity, by receiver name; empty when none has one.
    pub fn slack_signing_secrets(&self) -> Vec<(String, SecretString)> {
        (self.core().settings.receivers.iter())
            .filter_map(|r| match &r.kind {
                ReceiverKind::Slack(c) => Some((r.name.clone(), c.signing_secret.clone()?)),
                _ => None,
            })
            .collect()
    }

    /// Takes the signed request remembered as `key` once: `false` when it was taken before (a replay). It is
    /// remembered until `expires`, when its timestamp leaves the window anyway.
    pub async fn claim_slack_request(&self, key: &str, expires: DateTime<Utc>) -> Result<bool, PipelineError> {
        let core = self.core();
        let now = core.clock.now();
        Ok(core.store.claim_slack_request(key, expires, now).await?)
    }
}
