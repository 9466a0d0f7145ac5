//! The domain model every stage shares: the incident ([`Incident`] with typed [`Kind`], [`Severity`] and
//! [`IncidentState`]), the notification a receiver is asked to deliver ([`Notification`]), and the label fields
//! routes, groups and silences match on ([`Labels`]). Types only: no I/O, no settings.

pub mod action_link;
pub mod incident;
pub mod labels;
pub mod link;
pub mod notification;

pub use incident::{Acknowledgement, Hint, Hold, Incident, IncidentState, Kind, Occurrence, ResourceRef, Severity};
pub use labels::Labels;
pub use notification::{Action, Change, DeliveryState, Notification, Recipient};
