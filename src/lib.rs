//! Herald: the Argo CD Notifications webhook target with memory.
//!
//! The data flows one way: `api → argocd → state → incidents → routing → store/outbox → receivers`.
//! `pipeline` ties the pure core to the store; `startup` wires the service; `cli` is the command line.

pub mod api;
pub mod argocd;
pub mod cli;
pub mod client;
pub mod clock;
pub mod config_error;
pub mod configuration;
pub mod digest;
pub mod domain;
pub mod incidents;
pub mod live;
pub mod oncall;
pub mod outbox;
pub mod pipeline;
pub mod progress;
pub mod receivers;
pub mod reload;
pub mod resync;
pub mod routing;
pub mod startup;
pub mod state;
pub mod store;
pub mod telemetry;
