//! Configuration reload (`herald serve` on SIGHUP): the file is read again, once and whole (a file that changed while
//! it was read is refused), and validated as a start would (environment and `*_file` secrets included; listening
//! beyond loopback needs credentials), the receivers are built, and only then is anything replaced — a file that does
//! not pass is refused and logged (`herald_config_reloads_total{outcome="refused"}`), and the running configuration
//! stays.
//!
//! A file whose last line has no line break is refused: a writer caught half-way leaves a file that can be valid
//! with its last token cut to a prefix, which would then be a credential.
//!
//! A reload never lowers the authentication in force by accident: a file that would leave no credential while some
//! are in force (an empty file, one cut before `auth:`) is refused unless it says `server.auth.allow_reload_to_lower:
//! true`. Removing some credentials (a rotation) or changing scopes is an ordinary reload.
//!
//! What changes without a restart: receivers and their secrets (`smtp` too), routes, teams, ownership, grouping,
//! rules, the Argo CD UI link, and the credentials. What a restart changes — the listener and the body limits
//! (`server` but `auth`), `storage`, `outbox`, `scheduler`, `log`, `argocd.api` — keeps its running value, and a
//! change to it is logged as ignored.
//!
//! Each part reads its settings through a [`crate::live::Live`] holder per operation (the pipeline per batch and per
//! tick, the outbox worker per delivery, the API per request), so a reload never changes the settings in the middle
//! of one.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use secrecy::ExposeSecret;

use crate::api::AppContext;
use crate::configuration::{ArgoCdApiSettings, ConfigError, Settings};
use crate::outbox::ReceiverSet;
use crate::pipeline::Pipeline;
use crate::receivers::{self, BuildError, Shared};

/// Why a reload was refused; the running configuration stays.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    #[error(transparent)]
    Receiver(#[from] BuildError),
    #[error(
        "server.auth: the new file has no credential while {0} are in force, so anyone could call Herald; if that \
         is meant, say so in the file with server.auth.allow_reload_to_lower: true"
    )]
    LowersAuth(usize),
}

/// Where the configuration comes from, as `herald serve` was started.
#[derive(Debug, Clone)]
pub struct ConfigSource {
    pub file: PathBuf,
    /// The default file may be absent (built-in defaults); a file given with `--config` may not.
    pub optional: bool,
}

pub struct Reloader {
    source: ConfigSource,
    running: Mutex<Arc<Settings>>,
    pipeline: Pipeline,
    receivers: ReceiverSet,
    api: actix_web::web::Data<AppContext>,
}

impl Reloader {
    pub fn new(
        source: ConfigSource,
        running: Arc<Settings>,
        pipeline: Pipeline,
        receivers: ReceiverSet,
        api: actix_web::web::Data<AppContext>,
    ) -> Self {
        Self {
            source,
            running: Mutex::new(running),
            pipeline,
            receivers,
            api,
        }
    }

    /// Reads the configuration again and applies it, or refuses it; logs either way.
    pub fn reload(&self) {
        let file = self.source.file.display().to_string();
        match self.try_reload() {
            Ok(ignored) => {
                metrics::counter!("herald_config_reloads_total", "outcome" => "applied").increment(1);
                for key in ignored {
                    tracing::warn!(%file, key, "configuration reload: {key} changed, which needs a restart; ignored");
                }
                tracing::info!(%file, "configuration reloaded");
            }
            Err(e) => {
                metrics::counter!("herald_config_reloads_total", "outcome" => "refused").increment(1);
                let error = e.to_string().replace('\n', "; ");
                tracing::error!(%file, %error, "configuration reload refused; the running configuration stays");
            }
        }
    }

    /// Applies the file's configuration; returns the restart-only keys whose change was ignored.
    fn try_reload(&self) -> Result<Vec<&'static str>, ReloadError> {
        let new = Settings::load_for_reload(Some(&self.source.file), self.source.optional)?;
        // The file as written must be one `serve` would start with.
        new.check_exposure()?;
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        check_not_lowered(&running, &new)?;
        let (effective, ignored) = keep_restart_only(&running, new);
        // Credentials removed while listening beyond loopback: refused, as `serve` would refuse to start.
        effective.check_exposure()?;
        let effective = Arc::new(effective);
        let built = receivers::build_all(&Shared::new(effective.clone(), self.pipeline.clock()))?;
        self.receivers.replace(built, &effective);
        self.pipeline.reload(effective.clone());
        self.api.auth.replace(&effective.server.auth);
        *running = effective;
        Ok(ignored)
    }
}

/// Refuses `new` when it would take every credential away from a running configuration that has some, unless it
/// says `allow_reload_to_lower`.
fn check_not_lowered(running: &Settings, new: &Settings) -> Result<(), ReloadError> {
    // An authenticating proxy counts as one: a reload that drops it and every credential opens Herald too.
    let in_force = running.server.auth.credentials().len() + usize::from(running.server.auth.proxy.is_some());
    if in_force > 0 && !new.server.auth.has_authentication() {
        if !new.server.auth.allow_reload_to_lower {
            return Err(ReloadError::LowersAuth(in_force));
        }
        tracing::warn!(
            "configuration reload removes every credential (server.auth.allow_reload_to_lower: true): Herald now \
             answers without authentication"
        );
    }
    Ok(())
}

/// `new` with the sections only a restart changes set back to `running`'s, and the keys that differed.
fn keep_restart_only(running: &Settings, mut new: Settings) -> (Settings, Vec<&'static str>) {
    let mut ignored = Vec::new();
    // The whole section but its credentials, so a key added later cannot be forgotten here.
    let without_auth = crate::configuration::ServerSettings {
        auth: running.server.auth.clone(),
        ..new.server.clone()
    };
    if format!("{:?}", running.server) != format!("{without_auth:?}") {
        ignored.push("server (every key but auth)");
    }
    new.server = crate::configuration::ServerSettings {
        auth: new.server.auth,
        ..running.server.clone()
    };
    // Secrets print as [REDACTED] in Debug: they are compared exposed.
    let storage_changed = running.storage.url.expose_secret() != new.storage.url.expose_secret()
        || format!("{:?}", running.storage) != format!("{:?}", new.storage);
    if storage_changed {
        ignored.push("storage");
    }
    new.storage = running.storage.clone();
    for (key, changed) in [
        ("outbox", format!("{:?}", running.outbox) != format!("{:?}", new.outbox)),
        (
            "scheduler",
            format!("{:?}", running.scheduler) != format!("{:?}", new.scheduler),
        ),
        ("log", format!("{:?}", running.log) != format!("{:?}", new.log)),
        ("argocd.api", api_changed(running, &new)),
        ("argocd.instances", instances_changed(running, &new)),
    ] {
        if changed {
            ignored.push(key);
        }
    }
    new.outbox = running.outbox.clone();
    new.scheduler = running.scheduler.clone();
    new.log = running.log.clone();
    new.argocd.api = running.argocd.api.clone();
    // Each instance's API client, lease and status are built at start, and an instance is part of what is stored:
    // the list changes with a restart, as a whole.
    new.argocd.instances = running.argocd.instances.clone();
    (new, ignored)
}

/// The instances added, removed, renamed, or one whose URL or API access (token included) changed.
fn instances_changed(running: &Settings, new: &Settings) -> bool {
    let (a, b) = (&running.argocd.instances, &new.argocd.instances);
    a.len() != b.len()
        || a.iter()
            .zip(b)
            .any(|(x, y)| x.name != y.name || x.url != y.url || api_differs(x.api.as_ref(), y.api.as_ref()))
}

fn api_changed(running: &Settings, new: &Settings) -> bool {
    api_differs(running.argocd.api.as_ref(), new.argocd.api.as_ref())
}

/// Whether two API settings differ, the token included (its `Debug` hides it).
fn api_differs(a: Option<&ArgoCdApiSettings>, b: Option<&ArgoCdApiSettings>) -> bool {
    match (a, b) {
        (None, None) => false,
        (Some(a), Some(b)) => {
            a.token.expose_secret() != b.token.expose_secret() || format!("{a:?}") != format!("{b:?}")
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_may_not_take_every_credential_away_unless_the_new_file_says_so() {
        let running = Settings::from_yaml("server: {auth: {bearer_tokens: [admin-token-0123456789]}}").expect("valid");
        for lower in [
            "",
            "storage: {url: 'sqlite://a.db'}",
            "server: {auth: {allow_anonymous: true}}",
        ] {
            let new = Settings::from_yaml(lower).expect("valid alone");
            let e = check_not_lowered(&running, &new).expect_err(lower).to_string();
            assert!(e.contains("allow_reload_to_lower: true"), "{e}");
        }
        let meant = Settings::from_yaml("server: {auth: {allow_reload_to_lower: true}}").expect("valid");
        assert!(check_not_lowered(&running, &meant).is_ok());
        let rotated = Settings::from_yaml("server: {auth: {read_tokens: [reader-token-0123456789]}}").expect("valid");
        assert!(
            check_not_lowered(&running, &rotated).is_ok(),
            "a rotation is an ordinary reload"
        );
        let anonymous = Settings::from_yaml("").expect("valid");
        assert!(check_not_lowered(&anonymous, &anonymous).is_ok(), "nothing to lower");
    }

    #[test]
    fn the_argocd_instances_stay_as_they_run_until_a_restart() {
        let yaml = |token: &str, url: &str| {
            format!(
                "argocd: {{instances: [{{name: eu, url: '{url}', api: {{url: 'https://eu.example.com', token: {token}}}}}]}}"
            )
        };
        let running = Settings::from_yaml(&yaml("read-token-one", "https://eu.example.com")).expect("valid");
        for (new, why) in [
            (
                yaml("read-token-two", "https://eu.example.com"),
                "a new token (hidden from Debug)",
            ),
            (yaml("read-token-one", "https://eu2.example.com"), "a new URL"),
            ("argocd: {instances: []}".to_string(), "an instance removed"),
        ] {
            let new = Settings::from_yaml(&new).expect("valid");
            let (effective, ignored) = keep_restart_only(&running, new);
            assert_eq!(ignored, ["argocd.instances"], "{why}");
            assert_eq!(effective.argocd.instances.len(), 1, "{why}");
            assert_eq!(effective.argocd.ui_url("eu"), Some("https://eu.example.com"), "{why}");
        }
        let (_, ignored) = keep_restart_only(&running, running.clone());
        assert!(ignored.is_empty(), "{ignored:?}");
    }

    #[test]
    fn restart_only_sections_keep_their_running_value_and_are_named() {
        let running = Settings::from_yaml(
            "server: {listen: '127.0.0.1:8080'}\nstorage: {url: 'sqlite://a.db'}\nrules: {degraded: {for: 5m}}",
        )
        .expect("valid");
        let new = Settings::from_yaml(
            "server: {listen: '127.0.0.1:9090', auth: {read_tokens: [read-token-0123456789]}}\n\
             storage: {url: 'sqlite://b.db'}\nrules: {degraded: {for: 1m}}\nlog: {level: debug}",
        )
        .expect("valid");
        let (effective, ignored) = keep_restart_only(&running, new);
        assert_eq!(ignored, ["server (every key but auth)", "storage", "log"]);
        assert_eq!(effective.server.listen, "127.0.0.1:8080");
        assert_eq!(effective.storage.url.expose_secret(), "sqlite://a.db");
        assert_eq!(effective.log.level, "info");
        assert_eq!(effective.server.auth.credentials().len(), 1, "credentials are reloaded");
        assert_eq!(
            effective.rules.rule(crate::domain::Kind::Degraded).r#for,
            std::time::Duration::from_secs(60),
            "rules are reloaded"
        );
        let (_, ignored) = keep_restart_only(&running, running.clone());
        assert!(ignored.is_empty(), "{ignored:?}");
        // Any server key but the credentials needs a restart, and says so: not only the ones listed once by hand.
        for key in [
            "max_clock_skew: 1m",
            "max_inflight_body_bytes: 1048576",
            "body_read_timeout: 3s",
            "time_zone: Europe/Berlin",
        ] {
            let new = Settings::from_yaml(&format!(
                "server: {{listen: '127.0.0.1:8080', {key}}}\nstorage: {{url: 'sqlite://a.db'}}\nrules: {{degraded: {{for: 5m}}}}"
            ))
            .expect("valid");
            let (effective, ignored) = keep_restart_only(&running, new);
            assert_eq!(ignored, ["server (every key but auth)"], "{key}");
            assert_eq!(
                format!("{:?}", effective.server),
                format!("{:?}", running.server),
                "{key}"
            );
        }
    }
}
