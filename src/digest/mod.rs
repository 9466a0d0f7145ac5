//! The per-team digest: on a schedule in the team's time zone, one message per digest receiver listing what is
//! still not right for that team (Applications OutOfSync, resources waiting to be pruned, incidents firing,
//! silences, dead deliveries), so the chronic problems nobody alerts on any more are seen.
//!
//! This module owns what a digest says (`content`, pure: it gathers the model, [`crate::domain::Digest`]) and
//! sending a due slot exactly once (`runner`: the slot row and its deliveries are written in one transaction, see
//! `store::digests`). How a digest reads is the receivers' (`receivers::render::digest`); neither module imports
//! the other. When one is due is the schedule's ([`crate::domain::schedule`], re-exported here as `schedule`): the
//! settings carry it parsed at load.

pub mod content;
pub mod runner;

pub use content::{Inputs, content};

pub use crate::domain::schedule::{self, Schedule};
pub use runner::{preview, send_due};
