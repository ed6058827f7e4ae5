//! The control loop, off the hot path: [`client`] speaks the worker control API (HTTP/1.1
//! JSON over hyper) and [`runner`] keeps a session, long-polls and applies snapshots (the
//! protocol's `Applier` decides how, the snapshot store carries it out), acknowledges them
//! and posts runtime reports; [`keeper`] cuts proxies whose lease passed
//! unextended.

pub(crate) mod client;
pub(crate) mod keeper;
pub(crate) mod runner;

pub(crate) use client::ControlClient;
pub(crate) use runner::ControlLoop;
