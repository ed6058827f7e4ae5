//! The control loop, off the hot path: [`client`] speaks the worker control API (HTTP/1.1
//! JSON over hyper) and [`runner`] keeps a session, long-polls and applies snapshots,
//! acknowledges them and posts runtime reports.

pub(crate) mod client;
pub(crate) mod runner;

pub(crate) use client::{ControlClient, ControllerAddr};
pub(crate) use runner::{ControlLoop, new_session_id};
