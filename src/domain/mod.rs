//! The domain model every stage shares: the incident ([`Incident`] with typed [`Kind`], [`Severity`] and
//! [`IncidentState`]), the notification a receiver is asked to deliver ([`Notification`]), and the label fields
//! routes, groups and silences match on ([`Labels`]). Types only: no I/O, no settings.

pub mod action_link;
pub mod digest;
pub mod incident;
pub mod labels;
pub mod link;
pub mod notification;
pub mod slack_interaction;
pub mod thread;
pub mod time;

pub use digest::Digest;
pub use incident::{
    Acknowledgement, Deployment, Hint, Hold, ImageChange, Incident, IncidentState, Kind, Occurrence, ResourceRef,
    Severity, SourceChange, SyncCounts, SyncWindowHold,
};
pub use labels::Labels;
pub use notification::{
    Action, Body, Change, CommitState, CommitStatus, Contact, DeliveryState, Notification, Recipient,
};
pub use thread::Thread;
pub use time::Zone;

/// What a stored incident or change written before instances existed is: the default instance's.
pub fn default_instance() -> String {
    crate::argocd::DEFAULT_INSTANCE.to_string()
}

/// Whether `instance` is the default one (then left out of what Herald sends, as before instances existed). An
/// empty name (a value built in code with `Default`) counts as the default.
pub fn is_default_instance(instance: &str) -> bool {
    instance.is_empty() || instance == crate::argocd::DEFAULT_INSTANCE
}
