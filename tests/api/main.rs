//! Black-box tests of Herald: the real application on a random port, and the real binary where a process must
//! restart or die. One test binary (faster to build); each module is a part of the contract.

mod acks;
mod action_links;
mod app_page;
#[path = "../common/argocd_bodies.rs"]
mod argocd_bodies;
mod argocd_rbac;
mod argocd_source;
mod argocd_sync_windows;
mod auth;
mod bad_input;
mod binary;
mod caps;
mod change_events;
mod cli;
mod confirm;
mod connections;
mod contract;
mod data_files;
mod delivery;
mod deployment_change;
mod digest;
#[path = "../common/fake_argocd.rs"]
mod fake_argocd;
mod faults;
#[path = "../common/fixtures.rs"]
mod fixtures;
mod forgery;
#[path = "../common/fresh_db.rs"]
mod fresh_db;
mod helpers;
mod incarnations;
mod ingest;
mod initiator;
mod instances;
mod links;
mod logs;
mod matrix;
mod memory;
mod metrics;
mod oncall;
mod redmine;
mod reload;
mod replicas;
mod rules;
mod send_test;
mod slack_interactions;
mod status_page;
mod store;
mod storm_rows;
mod storms;
mod sync_statuses;
mod teams;
mod telegram;
mod three_incidents;
mod time_intervals;
mod time_zones;
#[path = "../common/wait.rs"]
mod wait;
