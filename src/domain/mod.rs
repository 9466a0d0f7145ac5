//! The domain model every stage shares: an Application's identity ([`AppId`]), the incident ([`Incident`] with
//! typed [`Kind`], [`Severity`] and [`IncidentState`]), the notification a receiver is asked to deliver
//! ([`Notification`]), and the label fields routes, groups and silences match on ([`Labels`]); and the values the
//! settings are parsed into at load, each with its own rules: time zones and wall-clock times ([`time`]), a digest's
//! [`Schedule`], a rotation ([`rotation`]), an on-call calendar ([`calendar`]), Alertmanager's time intervals
//! ([`time_interval`]). Types only: no I/O, no settings; it imports no other module of Herald.

pub mod action_link;
pub mod app;
pub mod calendar;
pub mod digest;
pub mod incident;
pub mod labels;
pub mod link;
pub mod notification;
pub mod revision;
pub mod rotation;
pub mod schedule;
pub mod thread;
pub mod time;
pub mod time_interval;

pub use app::{AppId, DEFAULT_INSTANCE, default_instance, is_default_instance};
pub use digest::Digest;
pub use incident::{
    Acknowledgement, Deployment, Hint, Hold, ImageChange, Incident, IncidentState, Kind, Occurrence, ResourceRef,
    Severity, SourceChange, SyncCounts, SyncWindowHold,
};
pub use labels::Labels;
pub use notification::{
    Action, Body, Change, CommitState, CommitStatus, Contact, DeliveryState, Notification, Recipient,
};
pub use schedule::Schedule;
pub use thread::Thread;
pub use time::Zone;
