//! Slack interactivity, all of it but HTTP: the clicks on the buttons of the Slack bot's messages ("Acknowledge",
//! "Silence 1 h"), from the signed request to the act. It owns which Slack receivers have buttons
//! (`slack.signing_secret`, and whose clicks they take: `slack.slack_users`), the request's checks in order (its
//! signing headers and a fresh timestamp before the body is read; then a signature by one of those receivers'
//! secrets, and a request never seen before — remembered in the store, so a replay is refused on any replica), what
//! a click asks ([`request`]: pure), and what is done: a click acts only on an incident sent to the Slack app whose
//! secret signed it (its outbox rows), with `slack_users: known` only for a Slack user `people.<name>.slack` names,
//! as that person (else `@name (Slack)`), through [`Pipeline::act_on_incident`] like a one-click link. The HTTP
//! handler (`api/slack.rs`) reads the headers and the body and answers what [`SlackAnswer`] says.

mod request;

use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret, SecretString};

use request::Interaction;
pub use request::{MAX_AGE, PayloadRefusal, SignatureRefusal};

use super::{LinkOutcome, Pipeline, PipelineError};
use crate::receivers::ReceiverKind;
use crate::receivers::slack::SlackUsers;

/// A Slack receiver with buttons, as a click is checked against it.
pub struct SlackApp {
    /// The receiver's name.
    pub receiver: String,
    pub signing_secret: SecretString,
    pub users: SlackUsers,
}

/// A request's signing headers, checked before its body is read.
pub struct SignedHeaders<'a> {
    /// `X-Slack-Request-Timestamp`, as signed.
    timestamp: &'a str,
    /// `X-Slack-Signature`.
    signature: &'a str,
    /// Until when the request is remembered against replays: when its timestamp leaves the window anyway.
    expires: DateTime<Utc>,
}

/// The request's timestamp is there and within [`MAX_AGE`] of `now`, and its signature is there.
pub fn check_headers<'a>(
    timestamp: Option<&'a str>,
    signature: Option<&'a str>,
    now: DateTime<Utc>,
) -> Result<SignedHeaders<'a>, SignatureRefusal> {
    let sent_at = request::fresh_timestamp(timestamp, now)?;
    let Some(signature) = signature else {
        return Err(SignatureRefusal::Missing("X-Slack-Signature"));
    };
    Ok(SignedHeaders {
        timestamp: timestamp.unwrap_or_default().trim(),
        signature,
        expires: DateTime::from_timestamp(sent_at, 0).unwrap_or(now) + MAX_AGE,
    })
}

/// What Herald answers a signed request; the API maps it to HTTP.
pub enum SlackAnswer {
    /// Not taken as coming from Slack (401).
    Unsigned(SignatureRefusal),
    /// Signed, but not a click on Herald's buttons (400).
    Unreadable(PayloadRefusal),
    /// The click was acted on (or found nothing to do): the words of the outcome, for the person who clicked.
    Acted(String),
    /// Nothing was done, and the text (for the person who clicked) says why.
    Refused(String),
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

    /// The signed request of `headers` with `body`, to one of `apps`: checked (signature, replay), read, and acted
    /// on.
    pub async fn answer_slack_request(
        &self,
        apps: &[SlackApp],
        headers: &SignedHeaders<'_>,
        body: &[u8],
    ) -> Result<SlackAnswer, PipelineError> {
        let keys: Vec<&[u8]> = apps
            .iter()
            .map(|a| a.signing_secret.expose_secret().as_bytes())
            .collect();
        let k = match request::signed_by(&keys, headers.timestamp, Some(headers.signature), body) {
            Ok(k) => k,
            Err(refusal) => return Ok(SlackAnswer::Unsigned(refusal)),
        };
        // One Slack app may post through several receivers (one per channel): every receiver with the secret that
        // signed the click is that app.
        let secret = apps[k].signing_secret.expose_secret();
        let same_app: Vec<&SlackApp> = apps
            .iter()
            .filter(|a| a.signing_secret.expose_secret() == secret)
            .collect();
        let receiver = &apps[k].receiver;
        if !self
            .claim_slack_request(&request::replay_key(headers.signature), headers.expires)
            .await?
        {
            return Ok(SlackAnswer::Unsigned(SignatureRefusal::Replayed));
        }
        let click = match request::parse(body) {
            Ok(click) => click,
            Err(e) => {
                tracing::info!(receiver = %receiver, error = %e, "a signed Slack interaction Herald cannot act on");
                return Ok(SlackAnswer::Unreadable(e));
            }
        };
        self.act_on_click(&same_app, receiver, &click).await
    }

    /// What `click`, signed by the Slack app of the receivers `same_app` (the first one to sign: `receiver`), does.
    async fn act_on_click(
        &self,
        same_app: &[&SlackApp],
        receiver: &str,
        click: &Interaction,
    ) -> Result<SlackAnswer, PipelineError> {
        let Some(app) = self.app_told(same_app, click.incident).await? else {
            tracing::warn!(
                receiver = %receiver,
                incident = click.incident,
                slack_user = %click.user_id,
                "a Slack click on an incident that was not sent to this Slack app was refused"
            );
            metrics::counter!("herald_requests_refused_total", "reason" => "slack_other_incident").increment(1);
            return Ok(SlackAnswer::Refused(format!(
                "Nothing was done: incident {} was not sent to this Slack app (Herald's receiver {receiver}), so it \
                 cannot act on it",
                click.incident
            )));
        };
        let receiver = &app.receiver;
        let person = self.slack_person(&click.user_id);
        if app.users == SlackUsers::Known && person.is_none() {
            tracing::info!(
                receiver = %receiver,
                slack_user = %click.user_id,
                "a Slack click by a user not in people was refused (slack_users: known)"
            );
            metrics::counter!("herald_requests_refused_total", "reason" => "slack_unknown_user").increment(1);
            return Ok(SlackAnswer::Refused(format!(
                "Nothing was done: this Slack app takes clicks only from people Herald knows, and your Slack user id \
                 {} is not in Herald's people (people.<name>.slack); ask whoever runs Herald to add it",
                click.user_id
            )));
        }
        // A person Herald knows is named as Herald knows them; anyone else as Slack names them.
        let by = person.unwrap_or_else(|| click.by());
        let origin = "from a Slack button";
        let comment = format!("Slack user {}", click.user_id);
        let outcome = (self.act_on_incident(click.incident, click.action, &by, origin, &comment)).await?;
        let words = match outcome {
            LinkOutcome::Done(w) | LinkOutcome::AlreadyUsed(w) | LinkOutcome::Nothing(w) => w,
        };
        tracing::info!(
            receiver = %receiver,
            incident = click.incident,
            action = click.action.as_str(),
            by = %by,
            slack_user = %click.user_id,
            outcome = %words,
            "a Slack button was clicked"
        );
        Ok(SlackAnswer::Acted(words))
    }

    /// The first of `same_app` that `incident` was sent to (the receiver whose secret signed a click is the Slack
    /// app it came from: it acts only on what that app was sent — ids are small integers: any other would let one
    /// team's app act on every team's incidents).
    async fn app_told<'a>(
        &self,
        same_app: &[&'a SlackApp],
        incident: i64,
    ) -> Result<Option<&'a SlackApp>, PipelineError> {
        for a in same_app {
            if self.sent_to(&a.receiver, incident).await? {
                return Ok(Some(*a));
            }
        }
        Ok(None)
    }

    /// The person (`people.<name>`) whose `slack` is this Slack user id, if any.
    fn slack_person(&self, user_id: &str) -> Option<String> {
        (self.core().settings.people.iter())
            .find(|(_, p)| p.slack.as_deref().is_some_and(|s| s.trim() == user_id))
            .map(|(name, _)| name.clone())
    }

    /// Whether incident `incident` was sent to the receiver `receiver` (a delivery about it is in the outbox).
    async fn sent_to(&self, receiver: &str, incident: i64) -> Result<bool, PipelineError> {
        Ok(self.core().store.was_told(receiver, incident).await?)
    }

    /// Takes the signed request remembered as `key` once: `false` when it was taken before (a replay). It is
    /// remembered until `expires`, when its timestamp leaves the window anyway.
    async fn claim_slack_request(&self, key: &str, expires: DateTime<Utc>) -> Result<bool, PipelineError> {
        let core = self.core();
        let now = core.clock.now();
        Ok(core.store.claim_slack_request(key, expires, now).await?)
    }
}
