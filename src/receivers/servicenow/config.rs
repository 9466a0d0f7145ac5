//! `servicenow: {instance_url, user + password | token, assignment_group, caller, category, close_code}`.

use std::sync::Arc;

use secrecy::SecretString;
use serde::Deserialize;

use super::ServiceNow;
use crate::configuration::{ConfigError, ReceiverSettings, check_url, invalid};
use crate::receivers::{Capabilities, Integration, Receiver, Sections, Shared};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `https://<instance>.service-now.com`.
    pub instance_url: String,
    /// Basic auth: an integration user with `password`.
    #[serde(default)]
    pub user: Option<String>,
    pub password: Option<SecretString>,
    /// Or an OAuth access token, sent as `Authorization: Bearer`.
    pub token: Option<SecretString>,
    /// The group new incidents are assigned to (a name or a sys_id).
    pub assignment_group: Option<String>,
    /// The incidents' caller (`caller_id`: a user name or a sys_id).
    pub caller: Option<String>,
    pub category: Option<String>,
    /// The resolution code a resolve sets (one of the instance's `close_code` choices).
    #[serde(default = "default_close_code")]
    pub close_code: String,
}

fn default_close_code() -> String {
    "Resolved by caller".into()
}

impl Integration for Config {
    /// One incident per incident, given work notes on updates and resolved when the incident resolves.
    fn capabilities(&self) -> Capabilities {
        Capabilities::ACKNOWLEDGED_PER_INCIDENT
    }

    fn validate(&self, path: &str, _sections: &Sections<'_>, errors: &mut Vec<ConfigError>) {
        check_url(errors, &format!("{path}.instance_url"), &self.instance_url);
        let basic = self.user.is_some() || self.password.is_some();
        match (basic, self.token.is_some()) {
            (true, true) => errors.push(invalid(
                format!("{path}.token"),
                "set either `user` with `password` (Basic) or `token` (Bearer), not both",
            )),
            (false, false) => errors.push(invalid(
                format!("{path}.user"),
                "ServiceNow needs `user` with `password` (Basic) or `token` (Bearer)",
            )),
            (true, false) if self.user.is_none() || self.password.is_none() => errors.push(invalid(
                format!("{path}.{}", if self.user.is_none() { "user" } else { "password" }),
                "Basic auth needs both `user` and `password`",
            )),
            _ => {}
        }
    }

    fn build(&self, _r: &ReceiverSettings, shared: &Shared) -> Result<Arc<dyn Receiver>, String> {
        Ok(Arc::new(ServiceNow::new(self.clone(), shared.http.clone())))
    }
}
