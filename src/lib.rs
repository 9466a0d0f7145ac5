//! Herald: the Argo CD Notifications webhook target with memory.
//!
//! The data flows one way: `api → argocd → state → incidents → routing → store/outbox → receivers`.

pub mod argocd;
pub mod clock;
pub mod configuration;
pub mod incidents;
pub mod notify;
pub mod receivers;
