//! [`Failure`]: what a subcommand reports when it cannot do its job, with the exit code
//! the process ends with. Messages are for people and never carry a secret's value.

use std::fmt;

/// Exit codes shared by every subcommand (`extract` adds its own, see `commands::extract`).
pub(crate) mod code {
    /// Something failed at run time (a store, a listener, a peer).
    pub(crate) const RUNTIME: u8 = 1;
    /// The configuration (file, flags or environment) cannot be used.
    pub(crate) const CONFIG: u8 = 2;
}

/// A failed subcommand.
#[derive(Debug)]
pub(crate) struct Failure {
    pub message: String,
    pub code: u8,
}

impl Failure {
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code,
        }
    }

    /// A configuration problem (exit code 2).
    pub(crate) fn config(message: impl Into<String>) -> Failure {
        Failure::new(code::CONFIG, message)
    }

    /// A run-time problem (exit code 1).
    pub(crate) fn runtime(message: impl Into<String>) -> Failure {
        Failure::new(code::RUNTIME, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
