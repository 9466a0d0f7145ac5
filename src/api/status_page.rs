//! `GET /`: the status page an on-call person keeps open — server-rendered HTML (maud), no scripts, no CDN,
//! refreshing itself, readable on a phone. Every Application that is not Synced+Healthy (the longest first, in Argo
//! CD's status colours, linked to Argo CD), firing incidents by team, pending ones ("fires in 35 min"), resources
//! waiting to be pruned, dead notifications, silences. `/?team=payments` shows one team (a link to share); with
//! several Argo CD instances, `/?instance=eu` shows one instance, and Applications outside the default instance are
//! named `instance/namespace/name`. Each Application links to its own page (`app_page`). Incidents are said in
//! people's words (`words`), times in `?tz=` (else `server.time_zone`; links keep it), and a caller allowed to
//! gets the Acknowledge and Silence forms on each firing incident (`forms`). Each
//! section shows its first rows and says how many more there are: no request reads a whole table. Storms (many
//! Applications of one cluster with one problem at once) are one line each at the top, their held Applications
//! counted there, not listed among the incidents.

use actix_web::{HttpRequest, HttpResponse, web};
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;

use super::forms::Forms;
use super::html::{app_path, document, link, or_error_page, respond};
use super::words::{self, Zone, capitalised};
use super::{ApiError, AppContext, query};
use crate::argocd::{HealthStatus, SyncStatus};
use crate::domain::{DeliveryState, Hold, IncidentState, Kind};
use crate::pipeline::{
    AppFilter, AppRecord, IncidentFilter, IncidentRecord, OutboxRecord, Pipeline, PruneRow, StormView,
};
use crate::receivers::render::age;
use crate::routing::Silence;
use actix_web::http::StatusCode;

/// Rows shown per section; the rest are counted ("and 12 more").
const SHOWN: i64 = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageQuery {
    team: Option<String>,
    instance: Option<String>,
    tz: Option<String>,
}

/// What one section shows: its first rows, and how many there are in all.
struct Shown<T> {
    rows: Vec<T>,
    total: usize,
}

pub async fn page(req: HttpRequest, ctx: web::Data<AppContext>) -> HttpResponse {
    or_error_page(answer(&req, &ctx).await)
}

async fn answer(req: &HttpRequest, ctx: &AppContext) -> Result<HttpResponse, ApiError> {
    let q: PageQuery = query(req)?;
    let zone = super::html::zone(ctx, q.tz.as_deref())?;
    let team = q.team.filter(|t| !t.trim().is_empty());
    let instance = super::apps::known_instance(ctx, q.instance.filter(|i| !i.trim().is_empty()))?;
    let p = &ctx.pipeline;
    let now = p.now();
    let attention = needing_attention(p, &team, &instance).await?;
    let storms = p.storms().await?;
    let mut firing = incidents(p, IncidentState::Firing, team.as_deref(), instance.as_deref()).await?;
    let mut pending = incidents(p, IncidentState::Pending, team.as_deref(), instance.as_deref()).await?;
    // The storms' members are counted in their storm's line, not listed one by one.
    let held_firing = firing.take(|i| matches!(i.view.held, Some(Hold::Storm { .. })));
    let held_pending = pending.take(|i| i.storm_id.is_some_and(|id| storms.iter().any(|s| s.incident.id == id)));
    let (mut prunes, omitted, more_prunes) = p.prune_pending(SHOWN, None, SHOWN as usize).await?;
    if let Some(t) = &team {
        prunes.retain(|r| &r.team == t);
    }
    if let Some(i) = &instance {
        prunes.retain(|r| &r.instance == i);
    }
    let settings = p.settings();
    let instances: Vec<&str> = settings.argocd.all().iter().map(|i| i.name).collect();
    let dead = p.outbox(Some(DeliveryState::Dead), SHOWN, None).await?;
    let silences = p.silences(false, now).await?;
    let teams = p.team_names().await;
    let forms = Forms::for_request(req, ctx);
    let mut here_params: Vec<(&str, &str)> = Vec::new();
    if let Some(t) = &team {
        here_params.push(("team", t));
    }
    if let Some(i) = &instance {
        here_params.push(("instance", i));
    }
    let here = link("/", &here_params, &zone);
    let z = &zone;
    let body = html! {
        h1 { "Herald" }
        p { "As of " span #now { (z.time(now)) } ". This page refreshes every 30 seconds. Times in " (z.tz.name()) "." }
        (choices_nav(team.as_deref(), &teams, instance.as_deref(), &instances, z))
        @let sources = p.argocd_apis();
        @for s in sources.iter() {
            (api_source_line(&s.status.report(), (sources.len() > 1).then(|| s.api.instance()), z))
        }
        (storms_section(&storms, z, now))
        (on_call_section(&settings, &p.on_call(None, Some(now)).unwrap_or_default(), team.as_deref(), z, now))
        (attention_section(p, &attention, z, now))
        (windows_section(&[&firing, &pending], z, now))
        (muted_section(&firing, z, now))
        (incidents_section(&firing, held_firing, &forms, &here, z, now))
        (pending_section(&pending, held_pending, z, now))
        (prunes_section(&prunes, omitted, more_prunes.is_some(), z))
        (dead_section(&dead))
        (silences_section(&silences, z, now))
    };
    let title = team.as_deref().unwrap_or("status");
    Ok(respond(StatusCode::OK, document(title, true, body)))
}

/// The Applications that need attention (the longest first), of `team` and `instance` when given.
async fn needing_attention(
    p: &Pipeline,
    team: &Option<String>,
    instance: &Option<String>,
) -> Result<Shown<AppRecord>, ApiError> {
    Ok(Shown {
        rows: p
            .apps(&AppFilter {
                team: team.clone(),
                instance: instance.clone(),
                needs_attention: true,
                by_problem_since: true,
                limit: SHOWN,
                ..Default::default()
            })
            .await?,
        total: p.count_needing_attention(team.as_deref(), instance.as_deref()).await?,
    })
}

/// The links that choose a team (and, with several Argo CD instances, an instance): the one shown in bold.
fn choices_nav(team: Option<&str>, teams: &[String], instance: Option<&str>, instances: &[&str], z: &Zone) -> Markup {
    html! {
        nav #teams {
            "Team: "
            @if team.is_some() { a href=(link("/", &[], z)) { "all" } } @else { b { "all" } " " }
            @for t in teams {
                @if team == Some(t.as_str()) { b { (t) } " " }
                @else { a href=(link("/", &[("team", t)], z)) { (t) } }
            }
        }
        @if instances.len() > 1 {
            nav #instances {
                "Argo CD: "
                @if instance.is_some() { a href=(link("/", &[], z)) { "all" } } @else { b { "all" } " " }
                @for i in instances {
                    @if instance == Some(*i) { b { (i) } " " }
                    @else { a href=(link("/", &[("instance", i)], z)) { (i) } }
                }
            }
        }
    }
}

async fn incidents(
    p: &Pipeline,
    state: IncidentState,
    team: Option<&str>,
    instance: Option<&str>,
) -> Result<Shown<IncidentRecord>, ApiError> {
    let rows = p
        .incidents(&IncidentFilter {
            state: Some(state),
            team: team.map(str::to_string),
            instance: instance.map(str::to_string),
            soonest_first: state == IncidentState::Pending,
            limit: SHOWN,
            ..Default::default()
        })
        .await?;
    let total = p.count_incidents(state, team, instance).await?;
    Ok(Shown { rows, total })
}

impl<T> Shown<T> {
    /// Takes the rows `which` says out of those shown; answers how many.
    fn take(&mut self, which: impl Fn(&T) -> bool) -> usize {
        let before = self.rows.len();
        self.rows.retain(|r| !which(r));
        before - self.rows.len()
    }
}

/// One line per storm: what it is about, its problem since when, how many recovered, how many it holds.
fn storms_section(storms: &[StormView], zone: &Zone, now: DateTime<Utc>) -> Markup {
    html! {
        @for s in storms {
            @let m = &s.members;
            p id=(format!("storm-{}", s.incident.id)) .storm .critical {
                strong { "Storm: " (s.about) } " — " (s.incident.condition)
                @if let Some(r) = s.incident.resolution.as_ref().filter(|_| s.ended_at.is_some()) { ", " (r) }
                ". Holds " (m.firing + m.pending) " Applications' incidents (" (m.firing) " firing, " (m.pending)
                " pending): their teams are not told while it lasts; team " (s.incident.team) " is"
                @if let Some(at) = s.incident.fired_at { " (since " (zone.time(at)) ")" } @else { ", once the first fires" }
                "."
                @if let Some(end) = s.ended_at {
                    " Over at " (zone.short(end, now)) ": what still fires is told to its team soon."
                }
            }
        }
    }
}

fn more<T>(s: &Shown<T>) -> Markup {
    html! {
        @if s.total > s.rows.len() { p.more { "… and " (s.total - s.rows.len()) " more." } }
    }
}

/// One line on an Argo CD API source: failing (and why), or when it last listed. `instance` names it when there
/// are several (the ids then carry its name, so each stays unique).
fn api_source_line(r: &crate::pipeline::SourceReport, instance: Option<&str>, zone: &Zone) -> Markup {
    let when = |t: DateTime<Utc>| zone.time(t);
    let id = |base: &str| instance.map_or_else(|| base.to_string(), |i| format!("{base}-{i}"));
    let source = |the: &str, what: &str| {
        instance.map_or_else(|| format!("{the}Argo CD {what}"), |i| format!("Argo CD {i}'s {what}"))
    };
    html! {
        @if let Some(since) = r.failing_since {
            p id=(id("api-source")) .api-source .critical {
                (source("The ", "API source")) " is failing since " (when(since)) ": "
                (r.last_error.clone().unwrap_or_default())
                ". Webhooks still work; changes that flip no trigger are not seen until it recovers."
            }
        } @else if let Some(at) = r.last_ok {
            p id=(id("api-source")) .api-source { (source("", "API source")) ": last listing at " (when(at)) ", " (r.listed) " Applications." }
        } @else {
            p id=(id("api-source")) .api-source { (source("", "API source")) ": no listing yet." }
        }
        @for (project, since) in &r.denied {
            p id=(id(&format!("permission-denied-{project}"))) .api-source .critical {
                (source("The ", "API")) " answers 403: permission denied for project " (project) " since " (when(*since))
                ". Its Applications are kept as they were, unverifiable: nothing of theirs is deleted or resolved "
                "until Herald may see them again (the token needs `applications, get` on " (project) "/*)."
            }
        }
        @if let Some(h) = &r.held {
            p id=(id("listing-held")) .warning {
                (source("The ", "listing")) " at " (when(h.at)) " lacked " (h.count) " of " (h.stored)
                " Applications: held back, nothing deleted. They are deleted only if the next listing lacks them too."
            }
        }
    }
}

/// Every Application that is not Synced+Healthy, the longest first.
fn attention_section(p: &Pipeline, apps: &Shown<AppRecord>, zone: &Zone, now: DateTime<Utc>) -> Markup {
    html! {
        h2 #attention { "Needs attention (" (apps.total) ")" }
        @if apps.rows.is_empty() { p.empty { "Every Application is Synced and Healthy." } } @else {
            div.scroll { table #attention-table {
                tr { th { "Application" } th { "Team" } th { "Sync" } th { "Health" } th { "Since" } th { "For" }
                     th { "Requiring pruning" } th { "Argo CD" } }
                @for a in &apps.rows {
                    @let s = &a.state;
                    @let since = problem_since(s);
                    tr {
                        td { a.app href=(link(&app_path(&s.snapshot.app), &[], zone)) { (s.snapshot.app) } }
                        td { (a.team) }
                        td { span class={ "badge " (s.snapshot.sync_status) } { (s.snapshot.sync_status) } }
                        td { span class={ "badge " (s.snapshot.health_status) } { (s.snapshot.health_status) } }
                        td { (at_least(s, since)) (zone.time(since)) }
                        td { (age(since, now)) }
                        td { (s.prune_since.len()) }
                        td { @if let Some(l) = p.app_link(s) { a href=(l) { "open" } } }
                    }
                }
            } }
            (more(apps))
        }
    }
}

/// When its trouble started: the older of the two since-times that are not fine.
fn problem_since(s: &crate::state::AppState) -> DateTime<Utc> {
    let sync = (s.snapshot.sync_status != SyncStatus::Synced).then_some(s.sync_since);
    let health = (s.snapshot.health_status != HealthStatus::Healthy).then_some(s.health_since);
    sync.into_iter().chain(health).min().unwrap_or(s.sync_since)
}

fn at_least(s: &crate::state::AppState, since: DateTime<Utc>) -> &'static str {
    let lower_bound =
        (since == s.sync_since && s.sync_since_at_least) || (since == s.health_since && s.health_since_at_least);
    if lower_bound { "at least since " } else { "" }
}

/// Firing incidents, one table per team (`held`: how many of the first rows a storm holds, not listed).
fn incidents_section(
    firing: &Shown<IncidentRecord>,
    held: usize,
    forms: &Forms,
    here: &str,
    zone: &Zone,
    now: DateTime<Utc>,
) -> Markup {
    let mut by_team: BTreeMap<&str, Vec<&IncidentRecord>> = BTreeMap::new();
    for i in &firing.rows {
        by_team.entry(i.team.as_str()).or_default().push(i);
    }
    html! {
        h2 #incidents { "Firing incidents (" (firing.total) ")" }
        @if held > 0 { p.held #incidents-held { (held) " held by storms (above), not listed." } }
        @if firing.rows.is_empty() && held == 0 { p.empty { "None." } }
        @for (team, list) in &by_team {
            h3 { "Team " (team) }
            div.scroll { table.incidents {
                tr { th { "What" } th { "Severity" } th { "Application" } th { "Summary" } th { "Firing since" } }
                @for i in list {
                    tr {
                        td { (words::incident(i, now)) }
                        td class=(i.severity) { (i.severity) }
                        td { (application(i, zone)) }
                        td {
                            (i.view.summary)
                            @if let Some(a) = &i.ack {
                                br; strong.acknowledged { (capitalised(&words::acknowledgement(a, i.state, zone, now))) }
                            }
                            @if let Some(h) = i.view.held.as_ref().filter(|h| !matches!(h, Hold::Acknowledged { .. })) {
                                br; em.held { "Not sent now: " (words::held(h, zone, now)) }
                            }
                            (what_to_do(&i.view.hints))
                            (acts(forms.for_incident(i, here)))
                        }
                        td { (i.fired_at.map(|t| zone.time(t)).unwrap_or_default()) }
                    }
                }
            } }
        }
        (more(firing))
    }
}

/// What the messages say to do, folded under its first step's title: the page stays one line an incident until
/// someone opens it.
fn what_to_do(hints: &[crate::domain::Hint]) -> Markup {
    let Some(first) = hints.first() else {
        return html! {};
    };
    html! {
        details.todo {
            summary { "What to do: " (first.title) }
            @for h in hints {
                p { strong { (h.title) } ": " (code_in(&h.text)) }
            }
        }
    }
}

/// A hint's text with the commands it quotes between backticks as code, as the e-mail writes it.
fn code_in(text: &str) -> maud::PreEscaped<String> {
    use crate::receivers::render::escape::{html, with_code};
    maud::PreEscaped(with_code(text, html, |c| format!("<code>{}</code>", html(c))))
}

/// One incident's forms (acknowledge, silence), folded: the list stays short, the forms one click away.
fn acts(forms: Markup) -> Markup {
    if forms.0.is_empty() {
        return forms;
    }
    html! { details.acts { summary { "Acknowledge or silence" } (forms) } }
}

/// The Applications shown above whose OutOfSync Argo CD's sync windows hold, one line each with until when; no
/// section when there are none.
fn windows_section(lists: &[&Shown<IncidentRecord>], zone: &Zone, now: DateTime<Utc>) -> Markup {
    let held: Vec<(&IncidentRecord, crate::domain::SyncWindowHold)> = (lists.iter().flat_map(|l| &l.rows))
        .filter_map(|i| Some((i, i.view.sync_window.filter(|w| w.active(now))?)))
        .collect();
    html! {
        @if !held.is_empty() {
            h2 #sync-windows { "In a sync window (" (held.len()) ")" }
            ul #sync-windows-list {
                @for (i, w) in &held {
                    li {
                        a.app href=(link(&app_path(&i.app), &[], zone)) { (i.app) }
                        " (" (i.team) "): OutOfSync expected, " (w.describe(&zone.short(w.until, now)))
                    }
                }
            }
        }
    }
}

/// The firing incidents shown below that their owner's time intervals mute (planned quiet hours), one line each
/// with until when, as the sync windows above; no section when there are none.
fn muted_section(firing: &Shown<IncidentRecord>, zone: &Zone, now: DateTime<Utc>) -> Markup {
    let muted: Vec<(&IncidentRecord, &Hold)> = (firing.rows.iter())
        .filter_map(|i| Some((i, i.view.held.as_ref().filter(|h| matches!(h, Hold::Muted { .. }))?)))
        .collect();
    html! {
        @if !muted.is_empty() {
            h2 #muted { "Muted by time intervals (" (muted.len()) ")" }
            ul #muted-list {
                @for (i, h) in &muted {
                    li {
                        a.app href=(link(&app_path(&i.app), &[], zone)) { (i.app) }
                        " (" (i.team) "): " (i.kind) ", " (words::held(h, zone, now))
                    }
                }
            }
        }
    }
}

/// The Application an incident is about, linked to its page; a storm's cluster (or instance), as text.
fn application(i: &IncidentRecord, zone: &Zone) -> Markup {
    html! {
        @if i.kind == Kind::Storm { (i.view.app_name) }
        @else { a.app href=(link(&app_path(&i.app), &[], zone)) { (i.app) } }
    }
}

/// Pending incidents: their condition holds, their `for` has not elapsed yet (`held`: how many of the first rows
/// are a storm's, not listed).
fn pending_section(pending: &Shown<IncidentRecord>, held: usize, zone: &Zone, now: DateTime<Utc>) -> Markup {
    html! {
        h2 #pending { "Pending incidents (" (pending.total) ")" }
        @if held > 0 { p.held #pending-held { (held) " held by storms (above), not listed." } }
        @if pending.rows.is_empty() { @if held == 0 { p.empty { "None." } } } @else {
            div.scroll { table #pending-table {
                tr { th { "Fires in" } th { "What" } th { "Application" } th { "Team" } th { "Summary" } }
                @for i in &pending.rows {
                    tr {
                        td.nowrap { (words::fires_in(i.fire_at, now)) }
                        td { (words::incident(i, now)) }
                        td { (application(i, zone)) }
                        td { (i.team) }
                        td {
                            (i.view.summary)
                            @if let Some(h) = &i.view.held { br; em.held { "Held: " (words::held(h, zone, now)) } }
                        }
                    }
                }
            } }
            (more(pending))
        }
    }
}

/// The first rows of the resources waiting to be pruned; `omitted` more in the same Applications, and more
/// Applications when `more_apps`.
fn prunes_section(prunes: &[PruneRow], omitted: usize, more_apps: bool, zone: &Zone) -> Markup {
    let more = more_apps || omitted > 0;
    html! {
        h2 #prune-pending { "Waiting to be pruned (" (prunes.len() + omitted) (if more_apps { "+" } else { "" }) ")" }
        @if prunes.is_empty() { p.empty { "None." } } @else {
            div.scroll { table #prune-table {
                tr { th { "Application" } th { "Team" } th { "Resource" } th { "Waiting since" } th { "Prune enabled" } }
                @for r in prunes {
                    tr {
                        @let id = crate::argocd::AppId::of(&r.instance, &r.app_namespace, &r.app);
                        td { a.app href=(link(&app_path(&id), &[], zone)) { (id) } }
                        td { (r.team) }
                        td { (r.kind) "/" (r.namespace) "/" (r.name) }
                        td { (zone.time(r.waiting_since)) }
                        td { (if r.prune_enabled { "yes" } else { "no" }) }
                    }
                }
            } }
            @if more {
                p.more #prune-more {
                    "… and " (if omitted > 0 { format!("{omitted} more resources") } else { "more".to_string() }) ": "
                    a href="/v1/prune-pending" { "/v1/prune-pending" }
                }
            }
        }
    }
}

fn dead_section(dead: &[OutboxRecord]) -> Markup {
    html! {
        h2 #dead { "Dead notifications (" (dead.len()) ")" }
        @if dead.is_empty() { p.empty { "None." } } @else {
            div.scroll { table #dead-table {
                tr { th { "Id" } th { "Receiver" } th { "Action" } th { "Attempts" } th { "Last error" } }
                @for d in dead {
                    tr { td { (d.id) } td { (d.receiver) } td { (d.action) } td { (d.attempts) } td { (d.last_error.clone().unwrap_or_default()) } }
                }
            } }
        }
    }
}

/// Per team, who is on call now in each schedule its escalation steps name (none: the section is left out).
fn on_call_section(
    settings: &crate::configuration::Settings,
    schedules: &[crate::pipeline::ScheduleNow],
    team: Option<&str>,
    zone: &Zone,
    now: DateTime<Utc>,
) -> Markup {
    let rows: Vec<(&str, &crate::pipeline::ScheduleNow)> = (settings.teams.keys())
        .filter(|t| team.is_none_or(|only| only == t.as_str()))
        .flat_map(|t| {
            (settings.schedules_of(t).into_iter())
                .filter_map(|name| schedules.iter().find(|s| s.schedule == name))
                .map(move |s| (t.as_str(), s))
        })
        .collect();
    html! {
        @if !rows.is_empty() {
            h2 #on-call { "On call" }
            div.scroll { table #on-call-table {
                tr { th { "Team" } th { "Schedule" } th { "On call" } th { "Until" } }
                @for (t, s) in &rows {
                    tr {
                        td { (t) }
                        td { (s.schedule) }
                        td {
                            @match &s.on_call {
                                Some(o) => { b { (o.person) } @if o.by == crate::oncall::Source::Override { " (override)" } }
                                None => { "nobody — escalation steps go to the team's receivers" }
                            }
                            @if let Some(c) = &s.calendar {
                                @if let Some(e) = &c.error {
                                    br; span.warn {
                                        "Calendar " (c.source) " cannot be read: " (e) "; "
                                        @match c.read_at {
                                            Some(at) => { "using the copy of " (zone.short(at, now)) }
                                            None => { "no copy yet" }
                                        }
                                    }
                                }
                            }
                        }
                        td { @match s.on_call.as_ref().and_then(|o| o.until) { Some(u) => (zone.short(u, now)), None => "-" } }
                    }
                }
            } }
        }
    }
}

fn silences_section(silences: &[Silence], zone: &Zone, now: DateTime<Utc>) -> Markup {
    html! {
        h2 #silences { "Active silences (" (silences.iter().filter(|s| s.active(now)).count()) ")" }
        @if silences.is_empty() { p.empty { "None." } } @else {
            div.scroll { table #silence-table {
                tr { th { "Matchers" } th { "State" } th { "Until" } th { "By" } th { "Comment" } }
                @for s in silences {
                    tr {
                        td { @for m in &s.matchers { (m.name) "=" (m.value) " " } }
                        td { (s.state(now)) }
                        td { (zone.time(s.ends_at)) }
                        td { (s.created_by) }
                        td { (s.comment) }
                    }
                }
            } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Hint;

    #[test]
    fn what_to_do_is_folded_under_its_first_step_with_commands_as_code() {
        let hint = |title: &str, text: &str| Hint {
            id: title.into(),
            title: title.into(),
            text: text.into(),
        };
        assert_eq!(what_to_do(&[]).into_string(), "");
        let html = what_to_do(&[
            hint(
                "Install the CRD",
                "Apply it first: `kubectl apply -f crd.yaml` <b>then</b> sync.",
            ),
            hint("Or skip it", "Set `SkipDryRunOnMissingResource=true`."),
        ])
        .into_string();
        assert_eq!(
            html,
            "<details class=\"todo\"><summary>What to do: Install the CRD</summary>\
             <p><strong>Install the CRD</strong>: Apply it first: <code>kubectl apply -f crd.yaml</code> \
             &lt;b&gt;then&lt;/b&gt; sync.</p>\
             <p><strong>Or skip it</strong>: Set <code>SkipDryRunOnMissingResource=true</code>.</p></details>"
        );
        assert_eq!(acts(html! {}).into_string(), "", "no forms, no fold");
    }
}
