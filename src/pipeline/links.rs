//! Signed one-click links: made for every chat and e-mail message about firing incidents when it is queued
//! ([`add_links`]), and acted on once when someone confirms one ([`Pipeline::act_on_link`]): an
//! acknowledgement, or a silence of the incident's Application and kind for an hour or until Monday 09:00 in the
//! team's time zone (its digest's, else `server.time_zone`). The pages' Silence forms make the same silence
//! ([`Pipeline::silence_incident`]).

use chrono::{DateTime, Datelike, Duration, NaiveTime, TimeZone, Utc, Weekday};

use super::{AckOutcome, Core, Pipeline, PipelineError};
use crate::configuration::Settings;
use crate::domain::action_link::{ActionLink, LinkAction, LinkRefusal, MessageLink};
use crate::domain::{Acknowledgement, Action, Incident, IncidentState, Notification, Zone};
use crate::routing::{Matcher, Silence};
use crate::store::Store;

/// What confirming a link did, in people's words.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkOutcome {
    /// Done now.
    Done(String),
    /// The link was used before: what it did then.
    AlreadyUsed(String),
    /// The incident is gone or resolved: nothing to do.
    Nothing(String),
}

/// Gives each firing incident of `n` its signed links, when `n` is a chat or e-mail message that opens or
/// repeats and `server.public_url` and `server.link_signing_key` are set (`notify::finish`, as it is queued).
pub(super) fn add_links(settings: &Settings, n: &mut Notification, now: DateTime<Utc>) {
    let Some((base, key)) = settings.server.links() else {
        return;
    };
    let per_incident = settings.receiver(&n.receiver).is_none_or(|r| r.per_incident());
    if per_incident || !matches!(n.action, Action::Open | Action::Update) {
        return;
    }
    let expires = Duration::from_std(settings.server.link_ttl)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    let by = n.recipient.as_ref().map(|r| r.username.clone());
    // Only a stored incident (an id) can be acted on: a test message's or an Argo CD access notice's is none.
    let actionable = |i: &&mut Incident| i.id > 0 && i.state == IncidentState::Firing && !i.kind.is_informational();
    for i in n.incidents_mut().iter_mut().filter(actionable) {
        let mut links: Vec<MessageLink> = LinkAction::ALL
            .iter()
            .map(|a| MessageLink {
                label: label(settings, *a, &i.team),
                url: format!(
                    "{base}/act/{}",
                    ActionLink::new(*a, i.id, expires, by.clone()).token(key)
                ),
            })
            .collect();
        if let Some(url) = crate::domain::link::herald_app_page(base, &i.instance, &i.app_namespace, &i.app_name) {
            links.push(MessageLink {
                label: "Open in Herald".into(),
                url,
            });
        }
        i.actions = links;
    }
    // A message about a group too large to show each incident's links offers one that acknowledges them all.
    if !crate::receivers::render::detailed(n) {
        let ids: Vec<i64> = n
            .incidents()
            .iter()
            .filter(|i| !i.actions.is_empty())
            .map(|i| i.id)
            .collect();
        if ids.len() > 1
            && let Some(link) = ActionLink::acknowledge_all(&ids, expires, by)
            && let token = link.token(key)
            && ActionLink::fits(&token)
        {
            n.group_actions = vec![MessageLink {
                label: format!("Acknowledge all {}", ids.len()),
                url: format!("{base}/act/{token}"),
            }];
        }
    }
}

/// A link's words: "Silence until Monday 09:00 (Europe/Berlin)".
fn label(settings: &Settings, action: LinkAction, team: &str) -> String {
    match action {
        LinkAction::SilenceUntilMonday => format!("{} ({})", action.label(), zone_of(settings, team).0.name()),
        _ => action.label().into(),
    }
}

/// The time zone `team` reads times in: its digest's, else `server.time_zone` (UTC unless set).
pub(super) fn zone_of(settings: &Settings, team: &str) -> Zone {
    (settings.teams.get(team))
        .and_then(|t| t.digest.as_ref())
        .map_or_else(|| settings.server.reader_zone(), |d| Zone(d.timezone.tz()))
}

impl Core {
    /// The time zone `team` reads times in ([`zone_of`]).
    pub(super) fn zone_of(&self, team: &str) -> Zone {
        zone_of(&self.settings, team)
    }
}

/// The next Monday 09:00 in `tz` after `now` (today's, when it is Monday before 09:00).
pub fn next_monday_nine(now: DateTime<Utc>, tz: chrono_tz::Tz) -> DateTime<Utc> {
    let local = now.with_timezone(&tz);
    let nine = NaiveTime::from_hms_opt(9, 0, 0).unwrap_or_default();
    let mut day = local.date_naive();
    loop {
        if day.weekday() == Weekday::Mon
            && let Some(at) = tz.from_local_datetime(&day.and_time(nine)).earliest()
            && at > local
        {
            return at.with_timezone(&Utc);
        }
        day = day.succ_opt().unwrap_or(day);
    }
}

impl Pipeline {
    /// The link `token` carries, checked against `server.link_signing_key` now; `None` when links are not
    /// configured (no key or no `server.public_url`).
    pub fn verify_link(&self, token: &str) -> Option<Result<ActionLink, LinkRefusal>> {
        let core = self.core();
        let (_, key) = core.settings.server.links()?;
        Some(ActionLink::verify(token, key, core.clock.now()))
    }

    /// The team of incident `id`, while it is kept: what a credential bound to teams may act on.
    pub async fn incident_team(&self, id: i64) -> Result<Option<String>, PipelineError> {
        let core = self.core();
        let mut tx = core.store.begin().await?;
        let rec = Store::incident(&mut tx, id).await?;
        tx.commit().await?;
        Ok(rec.map(|r| r.team))
    }

    /// What the link `nonce` did, if it was used.
    pub async fn link_used(&self, nonce: &str) -> Result<Option<String>, PipelineError> {
        Ok(self.core().store.link_outcome(nonce).await?)
    }

    /// Acts on a verified link once, as `by`: a link used before only says what it did then.
    pub async fn act_on_link(&self, link: &ActionLink, by: &str) -> Result<LinkOutcome, PipelineError> {
        let core = self.core();
        let now = core.clock.now();
        if !core.store.claim_link(&link.nonce, link.expires, now).await? {
            let before = core.store.link_outcome(&link.nonce).await?.unwrap_or_default();
            return Ok(LinkOutcome::AlreadyUsed(before));
        }
        let origin = "from a link in a message";
        let acted = match link.also.is_empty() {
            true => self.act_on_incident(link.incident, link.action, by, origin, "").await,
            false => self.acknowledge_together(&link.incidents(), by).await,
        };
        let outcome = match acted {
            Ok(outcome) => outcome,
            Err(e) => {
                // Nothing was done: the link stays usable (a retry acts) rather than "being used" for good.
                if let Err(release) = core.store.release_link(&link.nonce).await {
                    tracing::warn!(error = %release, "cannot give back the claim on a link that failed to act");
                }
                return Err(e);
            }
        };
        let words = match &outcome {
            LinkOutcome::Done(w) | LinkOutcome::AlreadyUsed(w) | LinkOutcome::Nothing(w) => w.clone(),
        };
        core.store.set_link_outcome(&link.nonce, &words).await?;
        Ok(outcome)
    }

    /// "Acknowledge all 40": every one of `ids` still firing, acknowledged by `by` until it resolves.
    async fn acknowledge_together(&self, ids: &[i64], by: &str) -> Result<LinkOutcome, PipelineError> {
        let now = self.core().clock.now();
        let ack = Acknowledgement {
            by: by.to_string(),
            at: now,
            until: None,
            comment: String::new(),
        };
        let (done, gone) = self.acknowledge_all(ids, ack).await?;
        let count = |n: usize| match n {
            1 => "1 incident".to_string(),
            n => format!("{n} incidents"),
        };
        let Some(first) = done.first().and_then(|r| r.ack.as_ref()) else {
            return Ok(LinkOutcome::Nothing(format!(
                "the {} have resolved (or are gone): nothing to acknowledge",
                count(ids.len())
            )));
        };
        let zone = done.first().map_or(Zone::UTC, |r| self.core().zone_of(&r.team));
        let mut words = format!(
            "{} {}",
            count(done.len()),
            first.words(IncidentState::Firing, now, zone)
        );
        if gone > 0 {
            words.push_str(&format!("; {} had resolved (or are gone)", count(gone)));
        }
        Ok(LinkOutcome::Done(words))
    }

    /// What a one-click link or a Slack button asks, done on `incident` as `by`: an acknowledgement until it
    /// resolves (with `comment`), or a silence of its Application and kind (its comment says `origin`, "from a
    /// link in a message", and `comment`). Whoever calls this has checked the request's signature.
    pub async fn act_on_incident(
        &self,
        incident: i64,
        action: LinkAction,
        by: &str,
        origin: &str,
        comment: &str,
    ) -> Result<LinkOutcome, PipelineError> {
        let core = self.core();
        let now = core.clock.now();
        let mut tx = core.store.begin().await?;
        let rec = Store::incident(&mut tx, incident).await?;
        tx.commit().await?;
        let Some(rec) = rec.filter(|r| r.state != IncidentState::Resolved) else {
            return Ok(LinkOutcome::Nothing(format!(
                "incident {incident} has resolved (or is gone): nothing to do"
            )));
        };
        match action {
            LinkAction::Acknowledge => {
                let ack = Acknowledgement {
                    by: by.to_string(),
                    at: now,
                    until: None,
                    comment: comment.to_string(),
                };
                Ok(match self.acknowledge(rec.id, ack).await? {
                    AckOutcome::Done(r) => {
                        let zone = core.zone_of(&r.team);
                        LinkOutcome::Done(
                            r.ack
                                .map_or_else(|| "acknowledged".into(), |a| a.words(r.state, now, zone)),
                        )
                    }
                    _ => LinkOutcome::Nothing("the incident has resolved: nothing to acknowledge".into()),
                })
            }
            LinkAction::SilenceHour | LinkAction::SilenceUntilMonday => {
                let end = match action {
                    LinkAction::SilenceHour => SilenceEnd::For(Duration::hours(1)),
                    _ => SilenceEnd::UntilMonday,
                };
                let comment = match comment {
                    "" => format!("{origin} about incident {}", rec.id),
                    c => format!("{origin} about incident {} ({c})", rec.id),
                };
                self.silence(&core, &rec, end, by, comment, now, false).await
            }
        }
    }

    /// Silences an open incident's Application and kind (in its own Argo CD instance) from a page's form, as `by`;
    /// with `bind_team` (a caller bound to teams) also its team, so the silence is that team's (see
    /// `api::silences`).
    pub async fn silence_incident(
        &self,
        id: i64,
        end: SilenceEnd,
        by: &str,
        comment: &str,
        bind_team: bool,
    ) -> Result<LinkOutcome, PipelineError> {
        let core = self.core();
        let now = core.clock.now();
        let mut tx = core.store.begin().await?;
        let rec = Store::incident(&mut tx, id).await?;
        tx.commit().await?;
        let Some(rec) = rec.filter(|r| r.state != IncidentState::Resolved) else {
            return Ok(LinkOutcome::Nothing(format!(
                "incident {id} has resolved (or is gone): nothing to silence"
            )));
        };
        let comment = if comment.trim().is_empty() {
            format!("from Herald's page, about incident {id}")
        } else {
            comment.trim().to_string()
        };
        self.silence(&core, &rec, end, by, comment, now, bind_team).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn silence(
        &self,
        core: &Core,
        rec: &crate::store::IncidentRecord,
        end: SilenceEnd,
        by: &str,
        comment: String,
        now: DateTime<Utc>,
        bind_team: bool,
    ) -> Result<LinkOutcome, PipelineError> {
        let ends_at = match end {
            SilenceEnd::For(d) => now.checked_add_signed(d).unwrap_or(DateTime::<Utc>::MAX_UTC),
            SilenceEnd::UntilMonday => next_monday_nine(now, core.zone_of(&rec.team).0),
        };
        let silence = Silence {
            id: uuid::Uuid::new_v4().to_string(),
            // The incident's Application in its own Argo CD instance, and its kind.
            matchers: vec![
                Matcher::new("instance", &rec.app.instance),
                Matcher::new("app_namespace", &rec.app.namespace),
                Matcher::new("app", &rec.app.name),
                Matcher::new("kind", rec.kind.as_str()),
            ]
            .into_iter()
            .chain(bind_team.then(|| Matcher::new("team", &rec.team)))
            .collect(),
            starts_at: now,
            ends_at,
            created_by: by.to_string(),
            comment,
            created_at: now,
        };
        self.add_silence(&silence).await?;
        Ok(LinkOutcome::Done(format!(
            "silenced {} ({}) for {by} until {} (silence {})",
            rec.app.name,
            rec.kind.words(),
            core.zone_of(&rec.team).stamp(ends_at),
            silence.id
        )))
    }
}

/// How long a silence made from a link or a page's form lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SilenceEnd {
    For(Duration),
    /// Until the next Monday 09:00 in the team's time zone (its digest's, else `server.time_zone`).
    UntilMonday,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monday_nine_is_the_next_one_in_the_teams_zone() {
        let at = |s: &str| DateTime::parse_from_rfc3339(s).expect("t").with_timezone(&Utc);
        let berlin: chrono_tz::Tz = "Europe/Berlin".parse().expect("tz");
        // Wednesday 2026-03-04 → Monday 2026-03-09 09:00 CET (08:00 UTC).
        assert_eq!(
            next_monday_nine(at("2026-03-04T12:00:00Z"), berlin),
            at("2026-03-09T08:00:00Z")
        );
        // Monday 07:00 UTC is 08:00 in Berlin: today at 09:00.
        assert_eq!(
            next_monday_nine(at("2026-03-09T07:00:00Z"), berlin),
            at("2026-03-09T08:00:00Z")
        );
        // Monday after nine: next week.
        assert_eq!(
            next_monday_nine(at("2026-03-09T09:00:00Z"), chrono_tz::UTC),
            at("2026-03-16T09:00:00Z")
        );
    }
}
