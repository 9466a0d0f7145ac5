//! `receivers[]` as written in the configuration: the fields every receiver has around one integration's block, and
//! the checks that are the same for all. Each integration's block, its defaults and its own checks live with the
//! integration (`crate::receivers`); so does `smtp`, which only e-mail reads.

use serde::Deserialize;

use super::{ConfigError, invalid};
use crate::receivers::{Capabilities, Sections};

pub use crate::receivers::ReceiverKind;
pub use crate::receivers::email::SmtpSettings;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiverSettings {
    pub name: String,
    /// Send a message when the incident resolves (default: true for tickets and paging, false for the rest).
    pub send_resolved: Option<bool>,
    /// Optional minijinja template for the message text, for teams that want their own wording.
    pub template: Option<String>,
    /// Messages per second at most (Slack's default is 1 per channel).
    pub rate_limit_per_second: Option<f64>,
    #[serde(flatten)]
    pub kind: ReceiverKind,
}

impl ReceiverSettings {
    pub fn capabilities(&self) -> Capabilities {
        self.kind.capabilities()
    }

    /// `send_resolved` when set, else the integration's default.
    pub fn sends_resolved(&self) -> bool {
        self.send_resolved.unwrap_or(self.capabilities().sends_resolved)
    }

    /// Ticket and paging receivers get one notification per incident (one ticket per incident); the others get
    /// one per group.
    pub fn per_incident(&self) -> bool {
        self.capabilities().per_incident
    }

    /// `rate_limit_per_second` when set, else the integration's default (Slack: 1 per second); `None`: no limit.
    pub fn rate_limit(&self) -> Option<f64> {
        self.rate_limit_per_second.or(self.capabilities().default_rate)
    }
}

pub(super) fn default_receivers() -> Vec<ReceiverSettings> {
    vec![ReceiverSettings {
        name: "console".into(),
        send_resolved: Some(true),
        template: None,
        rate_limit_per_second: None,
        kind: ReceiverKind::Console(Default::default()),
    }]
}

/// Checks every receiver block; returns the receiver names, for the sections that refer to them.
pub(super) fn validate<'a>(
    receivers: &'a [ReceiverSettings],
    smtp: Option<&SmtpSettings>,
    errors: &mut Vec<ConfigError>,
) -> std::collections::HashSet<&'a str> {
    let sections = Sections { smtp };
    let mut names = std::collections::HashSet::new();
    for (i, r) in receivers.iter().enumerate() {
        if r.name.trim().is_empty() {
            errors.push(invalid(format!("receivers[{i}].name"), "must not be empty"));
        }
        if !names.insert(r.name.as_str()) {
            errors.push(invalid(
                format!("receivers[{i}].name"),
                format!("duplicate receiver name {:?}", r.name),
            ));
        }
        let path = format!("receivers[{i}].{}", r.kind.type_name());
        r.kind.integration().validate(&path, &sections, errors);
        if let Some(rate) = r.rate_limit_per_second
            && (rate.is_nan() || rate <= 0.0)
        {
            errors.push(invalid(
                format!("receivers[{i}].rate_limit_per_second"),
                "must be a positive number",
            ));
        }
        // Rendered against what the receiver may be sent, as a delivery would: a template that fails there would
        // fail every such delivery for good.
        if let Some(t) = &r.template
            && let Err(e) = crate::receivers::render::template::check(t, r.capabilities().digest)
        {
            errors.push(invalid(
                format!("receivers[{i}].template"),
                format!("does not render: {e}"),
            ));
        }
    }
    names
}
