//! `argocd`: the Argo CD instances Herald hears from — each one's UI link (for messages), its optional read-only
//! API access (resync, watch, confirmation), and how a body is told to be its own. The top-level `url`/`api` are the
//! instance named `default` (what a configuration written before instances existed describes); `instances` adds more.

use secrecy::SecretString;
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArgoCdSettings {
    /// Base URL of the Argo CD UI, for links; wins over a body's `context.argocdUrl` (see `argocd::ui_base`).
    pub url: Option<String>,
    /// Optional read-only API access: a second source of state (periodic resync, optional watch) and the check
    /// of a condition in the cluster before a timed rule fires.
    pub api: Option<ArgoCdApiSettings>,
    /// More Argo CD instances, each with its own name, UI link and API access.
    pub instances: Vec<InstanceSettings>,
    /// Each instance's UI and API URL reduced by [`same_site`], computed at the first body that needs them (not at
    /// every body): what `context.argocdUrl` is compared with.
    #[serde(skip)]
    sites: std::sync::OnceLock<Vec<(String, Vec<String>)>>,
}

/// One more Argo CD instance (`argocd.instances[]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceSettings {
    /// Part of each of its Applications' identity (API paths, matchers `instance=…`, `--instance`): lowercase
    /// letters, digits and `-`, at most 63 characters.
    pub name: String,
    /// Base URL of its UI: links in messages, and how a body's `context.argocdUrl` is recognised as its own.
    pub url: Option<String>,
    pub api: Option<ArgoCdApiSettings>,
}

/// One Argo CD instance as the rest of Herald sees it, resolved from the top-level block or `instances`.
#[derive(Debug, Clone, Copy)]
pub struct Instance<'a> {
    pub name: &'a str,
    pub url: Option<&'a str>,
    pub api: Option<&'a ArgoCdApiSettings>,
}

/// Why a body could not be given to an instance: said in the 4xx, with how to configure it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnknownInstance {
    #[error(
        "this body names no configured Argo CD instance (context.argocdUrl {url:?} is none of {known}): give each \
         Argo CD its own ingest token with `instance: <name>` (server.auth.ingest_tokens), or set \
         argocd.instances[].url to the URL its notifications template sends as context.argocdUrl"
    )]
    NoMatch { url: String, known: String },
    #[error(
        "several Argo CD instances are configured ({known}) and this body does not say which it comes from (no \
         context.argocdUrl): give each Argo CD its own ingest token with `instance: <name>` \
         (server.auth.ingest_tokens), or send `context: {{argocdUrl: …}}` in the template and set argocd.instances[].url \
         to it"
    )]
    Unnamed { known: String },
    #[error("the ingest token names Argo CD instance {0:?}, which is not configured (argocd.instances)")]
    NotConfigured(String),
    #[error(
        "this body was sent with the ingest token of Argo CD instance {token:?}, but its context.argocdUrl {url:?} \
         is instance {body:?}'s: if it comes from {body:?}, give that Argo CD its own token (the one with \
         `instance: {body}` in server.auth.ingest_tokens, in its argocd-notifications-secret); if it comes from \
         {token:?}, fix the argocdUrl its notifications context sends (or argocd.instances[].url)"
    )]
    Mismatch { token: String, body: String, url: String },
}

impl UnknownInstance {
    /// The `reason` label of `herald_requests_refused_total` for a refusal worth counting apart.
    pub fn reason(&self) -> Option<&'static str> {
        matches!(self, UnknownInstance::Mismatch { .. }).then_some("instance_mismatch")
    }
}

impl ArgoCdSettings {
    /// Whether the top-level block describes an instance: it has a URL or an API, or no instance is listed.
    fn has_default(&self) -> bool {
        self.instances.is_empty() || self.url.is_some() || self.api.is_some()
    }

    /// Every configured instance: `default` (the top-level block) first when there is one, then `instances`.
    pub fn all(&self) -> Vec<Instance<'_>> {
        let mut out = Vec::with_capacity(self.instances.len() + 1);
        if self.has_default() {
            out.push(Instance {
                name: crate::domain::DEFAULT_INSTANCE,
                url: self.url.as_deref(),
                api: self.api.as_ref(),
            });
        }
        out.extend(self.instances.iter().map(|i| Instance {
            name: &i.name,
            url: i.url.as_deref(),
            api: i.api.as_ref(),
        }));
        out
    }

    pub fn instance(&self, name: &str) -> Option<Instance<'_>> {
        if name == crate::domain::DEFAULT_INSTANCE && self.has_default() {
            return Some(Instance {
                name: crate::domain::DEFAULT_INSTANCE,
                url: self.url.as_deref(),
                api: self.api.as_ref(),
            });
        }
        (self.instances.iter().find(|i| i.name == name)).map(|i| Instance {
            name: &i.name,
            url: i.url.as_deref(),
            api: i.api.as_ref(),
        })
    }

    /// More than one instance: listings and digests group by instance, messages name it.
    pub fn several(&self) -> bool {
        self.instances.len() + usize::from(self.has_default()) > 1
    }

    /// The instances' names, for messages that list them: `default, eu`.
    pub fn names(&self) -> String {
        self.all().iter().map(|i| i.name).collect::<Vec<_>>().join(", ")
    }

    /// The configured UI URL of `instance` (links; wins over a body's `context.argocdUrl`).
    pub fn ui_url(&self, instance: &str) -> Option<&str> {
        self.instance(instance).and_then(|i| i.url)
    }

    /// Which instance a body is from: the one its ingest credential names, else the one whose UI (or API) URL its
    /// `context.argocdUrl` is, else the only one configured. With several configured, a body that none of these
    /// names is refused: guessing would merge two instances' Applications of the same name. A body whose credential
    /// names one instance and whose `context.argocdUrl` is another configured instance's is refused too (one Argo
    /// CD holding another's token, or a template sending the wrong URL: either way one of them is wrong, and
    /// taking it would make a phantom Application); a URL that is no configured instance's changes nothing then.
    pub fn identify(&self, by_credential: Option<&str>, body_url: Option<&str>) -> Result<String, UnknownInstance> {
        if let Some(name) = by_credential {
            let Some(own) = self.instance(name) else {
                return Err(UnknownInstance::NotConfigured(name.to_string()));
            };
            if let Some(url) = body_url
                && self.several()
            {
                let wanted = same_site(url);
                let sites = self.sites();
                let named: Vec<&str> = (sites.iter())
                    .filter(|(_, urls)| urls.contains(&wanted))
                    .map(|(n, _)| n.as_str())
                    .collect();
                if let Some(other) = named.first()
                    && !named.contains(&own.name)
                {
                    return Err(UnknownInstance::Mismatch {
                        token: own.name.to_string(),
                        body: other.to_string(),
                        url: url.to_string(),
                    });
                }
            }
            return Ok(own.name.to_string());
        }
        // One instance (most configurations): every body is its own, nothing to compare.
        if !self.several() {
            let only = match self.instances.first() {
                Some(i) if !self.has_default() => i.name.as_str(),
                _ => crate::domain::DEFAULT_INSTANCE,
            };
            return Ok(only.to_string());
        }
        let Some(url) = body_url else {
            return Err(UnknownInstance::Unnamed { known: self.names() });
        };
        let wanted = same_site(url);
        match self.sites().iter().find(|(_, urls)| urls.contains(&wanted)) {
            Some((name, _)) => Ok(name.clone()),
            None => Err(UnknownInstance::NoMatch {
                url: url.to_string(),
                known: self.names(),
            }),
        }
    }

    /// Each instance's name with its UI and API URLs reduced by [`same_site`].
    fn sites(&self) -> &[(String, Vec<String>)] {
        self.sites.get_or_init(|| {
            (self.all().iter())
                .map(|i| {
                    let urls = i.url.into_iter().chain(i.api.map(|a| a.url.as_str()));
                    (i.name.to_string(), urls.map(same_site).collect())
                })
                .collect()
        })
    }

    pub(super) fn validate(&self, errors: &mut Vec<super::ConfigError>) {
        if let Some(api) = &self.api {
            api.validate("argocd.api", errors);
        }
        let mut seen = std::collections::HashSet::new();
        if self.has_default() {
            seen.insert(crate::domain::DEFAULT_INSTANCE);
        }
        for (i, inst) in self.instances.iter().enumerate() {
            let at = format!("argocd.instances[{i}]");
            if !valid_instance_name(&inst.name) {
                errors.push(super::invalid(
                    format!("{at}.name"),
                    format!(
                        "{:?} is not an instance name: lowercase letters, digits and '-', starting with a letter, \
                         at most 63 characters (it is part of API paths and matchers)",
                        inst.name
                    ),
                ));
            } else if !seen.insert(&inst.name) {
                let why = if inst.name == crate::domain::DEFAULT_INSTANCE {
                    "is the instance the top-level argocd.url / argocd.api describe: name this one differently, or \
                     move those keys here"
                } else {
                    "is the name of another instance: each instance needs its own"
                };
                errors.push(super::invalid(format!("{at}.name"), format!("{:?} {why}", inst.name)));
            }
            if let Some(u) = &inst.url {
                check_ui_url(errors, &format!("{at}.url"), u);
            }
            if let Some(api) = &inst.api {
                api.validate(&format!("{at}.api"), errors);
            }
        }
        if let Some(u) = &self.url {
            check_ui_url(errors, "argocd.url", u);
        }
    }
}

/// Every link is built on it: it must pass the check each link passes.
fn check_ui_url(errors: &mut Vec<super::ConfigError>, path: &str, u: &str) {
    if crate::domain::link::safe_url(u).is_none() {
        let why = "is not a plain http(s) URL (a host, no credentials, no spaces or line breaks)";
        errors.push(super::invalid(path, format!("{} {why}", super::shown_url(u))));
    }
}

/// `[a-z][a-z0-9-]{0,62}`: safe in a URL path segment, a metric label and a matcher.
pub fn valid_instance_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A URL reduced to what tells two Argo CD installations apart: scheme, host and port, and the path without its
/// trailing `/` (an Argo CD served under `/argocd` on a shared host), lowercased.
fn same_site(url: &str) -> String {
    match url::Url::parse(url.trim()) {
        Ok(u) => format!(
            "{}://{}:{}{}",
            u.scheme(),
            u.host_str().unwrap_or_default().to_ascii_lowercase(),
            u.port_or_known_default().unwrap_or(0),
            u.path().trim_end_matches('/').to_ascii_lowercase()
        ),
        Err(_) => url.trim().trim_end_matches('/').to_ascii_lowercase(),
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgoCdApiSettings {
    pub url: String,
    /// A read-only account's token (or `token_file`: the path of a mounted Secret).
    pub token: SecretString,
    #[serde(default = "default_api_timeout", with = "crate::configuration::duration")]
    pub timeout: Duration,
    /// How long a rule may wait for a reachable API before it fires unconfirmed.
    #[serde(default = "default_confirm_wait", with = "crate::configuration::duration")]
    pub confirm_wait: Duration,
    /// How often every Application is listed and run through the pipeline as if Argo CD had sent it; an
    /// Application missing from a complete listing is deleted. `0s` turns the resync off.
    #[serde(default = "default_resync_interval", with = "crate::configuration::duration")]
    pub resync_interval: Duration,
    /// Only these Argo CD projects (all when empty): listing, watch and deletion by absence are limited to them.
    #[serde(default)]
    pub projects: Vec<String>,
    /// Follow the event stream too, so every change arrives, not only those that flip a trigger.
    #[serde(default)]
    pub watch: bool,
    /// A listing larger than this (bytes, as received) is refused and deletes nothing: it is read item by item, so
    /// memory does not grow with it, but one that never ends must not run forever.
    #[serde(default = "default_max_listing_bytes")]
    pub max_listing_bytes: u64,
    /// A listing that lacks more than this share of the stored Applications (and at least `min_drop_count` of them)
    /// deletes nothing at once: the drop is held back, shown and counted, and applies when the next listing agrees.
    #[serde(default = "default_max_drop_share")]
    pub max_drop_share: f64,
    #[serde(default = "default_min_drop_count")]
    pub min_drop_count: usize,
}

impl ArgoCdApiSettings {
    fn validate(&self, at: &str, errors: &mut Vec<super::ConfigError>) {
        super::check_url(errors, &format!("{at}.url"), &self.url);
        if !self.resync_interval.is_zero() && self.resync_interval < Duration::from_secs(10) {
            errors.push(super::invalid(
                format!("{at}.resync_interval"),
                "must be 0s (off) or at least 10s: a listing of every Application is not cheap for Argo CD",
            ));
        }
        if !(self.max_drop_share > 0.0 && self.max_drop_share <= 1.0) {
            errors.push(super::invalid(
                format!("{at}.max_drop_share"),
                "must be more than 0 and at most 1 (the share of the stored Applications one listing may delete)",
            ));
        }
        if self.max_listing_bytes < 1024 * 1024 {
            errors.push(super::invalid(
                format!("{at}.max_listing_bytes"),
                "must be at least 1 MiB (a listing of 10,000 Applications is about 100 MB)",
            ));
        }
    }
}

fn default_api_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_confirm_wait() -> Duration {
    Duration::from_secs(120)
}
fn default_max_listing_bytes() -> u64 {
    512 * 1024 * 1024
}
fn default_max_drop_share() -> f64 {
    0.5
}
fn default_min_drop_count() -> usize {
    10
}
fn default_resync_interval() -> Duration {
    Duration::from_secs(300)
}

#[cfg(test)]
mod tests {
    use crate::configuration::Settings;

    fn refused(yaml: &str) -> String {
        Settings::from_yaml(yaml).expect_err(yaml).to_string()
    }

    const TWO: &str =
        "argocd: {url: 'https://a.example.com', instances: [{name: eu, url: 'https://eu.example.com/argocd/'}]}";

    #[test]
    fn the_top_level_block_is_the_default_instance_and_instances_add_more() {
        let one = Settings::from_yaml("argocd: {url: 'https://a.example.com'}").expect("valid");
        let names: Vec<&str> = one.argocd.all().iter().map(|i| i.name).collect();
        assert_eq!(names, ["default"]);
        assert!(!one.argocd.several());
        let none = Settings::from_yaml("").expect("valid");
        assert_eq!(none.argocd.all().len(), 1, "no argocd block: one default instance");

        let two = Settings::from_yaml(TWO).expect("valid");
        let names: Vec<&str> = two.argocd.all().iter().map(|i| i.name).collect();
        assert_eq!(names, ["default", "eu"]);
        assert_eq!(two.argocd.ui_url("eu"), Some("https://eu.example.com/argocd/"));
        assert_eq!(two.argocd.ui_url("default"), Some("https://a.example.com"));

        // Only instances listed, the top-level block empty: there is no default instance.
        let only = Settings::from_yaml("argocd: {instances: [{name: eu}, {name: us}]}").expect("valid");
        let names: Vec<&str> = only.argocd.all().iter().map(|i| i.name).collect();
        assert_eq!(names, ["eu", "us"]);
    }

    #[test]
    fn a_body_is_given_to_the_instance_its_token_or_url_names() {
        let s = Settings::from_yaml(TWO).expect("valid");
        let a = &s.argocd;
        assert_eq!(a.identify(Some("eu"), None).as_deref(), Ok("eu"));
        assert_eq!(
            a.identify(Some("eu"), Some("https://eu.example.com/argocd")).as_deref(),
            Ok("eu")
        );
        // A URL that is no configured instance's: the token says which (as before instances were compared).
        assert_eq!(
            a.identify(Some("eu"), Some("https://elsewhere.example.com")).as_deref(),
            Ok("eu")
        );
        assert_eq!(a.identify(Some("eu"), Some("not a url")).as_deref(), Ok("eu"));
        // Another configured instance's URL with eu's token: one of them is wrong, and both are named.
        let mismatch = a
            .identify(Some("eu"), Some("https://A.example.com/"))
            .expect_err("mismatch");
        assert_eq!(mismatch.reason(), Some("instance_mismatch"));
        let said = mismatch.to_string();
        assert!(
            said.contains("instance \"eu\"") && said.contains("instance \"default\"'s"),
            "{said}"
        );
        assert_eq!(
            a.identify(Some("default"), Some("https://eu.example.com/argocd/"))
                .expect_err("mismatch")
                .reason(),
            Some("instance_mismatch")
        );
        assert_eq!(
            a.identify(None, Some("https://EU.example.com/argocd")).as_deref(),
            Ok("eu")
        );
        assert_eq!(
            a.identify(None, Some("https://a.example.com/")).as_deref(),
            Ok("default")
        );
        // Another path on the same host is another Argo CD.
        assert!(a.identify(None, Some("https://eu.example.com/")).is_err());
        assert!(a.identify(None, None).is_err());
        assert!(a.identify(Some("us"), None).is_err());
        let one = Settings::from_yaml("").expect("valid");
        assert_eq!(
            one.argocd
                .identify(None, Some("https://anything.example.com"))
                .as_deref(),
            Ok("default")
        );
        assert_eq!(one.argocd.identify(None, None).as_deref(), Ok("default"));
    }

    #[test]
    fn instance_names_tokens_and_routes_are_checked() {
        for (yaml, says) in [
            ("argocd: {instances: [{name: EU}]}", "argocd.instances[0].name"),
            ("argocd: {instances: [{name: 'a/b'}]}", "not an instance name"),
            (
                "argocd: {instances: [{name: eu}, {name: eu}]}",
                "argocd.instances[1].name",
            ),
            (
                "argocd: {url: 'https://a.example.com', instances: [{name: default}]}",
                "top-level argocd.url",
            ),
            (
                "argocd: {instances: [{name: eu, url: 'ftp://x'}]}",
                "argocd.instances[0].url",
            ),
            (
                "argocd: {instances: [{name: eu, api: {url: 'https://x', token: t, resync_interval: 1s}}]}",
                "argocd.instances[0].api.resync_interval",
            ),
            (
                "argocd: {instances: [{name: eu}]}\nserver: {auth: {ingest_tokens: [{name: x, token: token-0123456789abcdef, instance: us}]}}",
                "server.auth.ingest_tokens[0].instance: \"us\" is not a configured Argo CD instance (eu)",
            ),
            (
                "server: {auth: {read_tokens: [{name: x, token: token-0123456789abcdef, instance: default}]}}",
                "only an ingest token speaks for an Argo CD instance",
            ),
            (
                "receivers: [{name: c, console: {}}]\nroutes: [{instance: us, receivers: [c]}]",
                "routes[0].instance",
            ),
        ] {
            let e = refused(yaml);
            assert!(e.contains(says), "{yaml}: {e}");
        }
    }
}
