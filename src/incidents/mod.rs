//! Incidents: which conditions an Application's state is in, and the lifecycle decisions
//! (pending → firing → resolved) that follow. Pure: no I/O, time comes in as an argument.

mod kind;

pub use kind::Kind;
