//! The crate's error types.
//!
//! Decisions are not errors: "exceeded" and "unavailable" are answers
//! ([`crate::QuotaDecision`]). What remains are mistakes of the caller: a bad command
//! ([`InvalidCommand`], an input error that touches no store), a bad configuration
//! ([`ConfigError`], rejected at construction, never clamped), and setup failures
//! ([`SetupError`]: connecting, migrating, creating the role) for operators.

use std::fmt;
use std::time::Duration;

/// Which field of a [`crate::QuotaCommand`] is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommandField {
    /// `project`.
    Project,
    /// `subject`.
    Subject,
    /// `operation` (only when parsed from a name).
    Operation,
    /// `receipt_id`.
    ReceiptId,
    /// The receipt a settled charge is kept under ([`crate::Settlement::Spend`]).
    SpentAs,
}

impl fmt::Display for CommandField {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            CommandField::Project => "project",
            CommandField::Subject => "subject",
            CommandField::Operation => "operation",
            CommandField::ReceiptId => "receipt_id",
            CommandField::SpentAs => "spent_as",
        })
    }
}

/// What is wrong with the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputProblem {
    /// It is empty.
    Empty,
    /// It is longer than allowed.
    TooLong,
    /// Its first character must be an ASCII letter or digit.
    BadFirstCharacter,
    /// It contains a character outside the allowed set (or a control character).
    ForbiddenCharacter,
    /// Not a known operation name.
    Unknown,
    /// It repeats the receipt it should replace.
    SameAsReceipt,
}

impl fmt::Display for InputProblem {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            InputProblem::Empty => "is empty",
            InputProblem::TooLong => "is too long",
            InputProblem::BadFirstCharacter => "must start with an ASCII letter or digit",
            InputProblem::ForbiddenCharacter => "contains a forbidden character",
            InputProblem::Unknown => "is not a known operation",
            InputProblem::SameAsReceipt => "must differ from the receipt it replaces",
        })
    }
}

/// A command that fails validation. It names the field, never the value, so it is safe to
/// show to the client (the value may be another tenant's identifier or a secret-ish key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{field} {problem}")]
pub struct InvalidCommand {
    /// The offending field.
    pub field: CommandField,
    /// What is wrong with it.
    pub problem: InputProblem,
}

/// A window or limit outside the hard caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The window is shorter than 1 s or longer than 5 min.
    #[error("quota window {window:?} is not between {min:?} and {max:?}")]
    WindowOutOfRange {
        /// The rejected window.
        window: Duration,
        /// The shortest allowed window.
        min: Duration,
        /// The longest allowed window.
        max: Duration,
    },
    /// The window is not a whole number of seconds (`RateLimit-Policy` states it in seconds).
    #[error("quota window {window:?} is not a whole number of seconds")]
    WindowNotWholeSeconds {
        /// The rejected window.
        window: Duration,
    },
    /// The limit is 0 or above 1000.
    #[error("quota limit {limit} is not between {min} and {max}")]
    LimitOutOfRange {
        /// The rejected limit.
        limit: u32,
        /// The smallest allowed limit.
        min: u32,
        /// The largest allowed limit.
        max: u32,
    },
}

/// Connecting, migrating or preparing a store failed. For operators (the CLI's `migrate`,
/// startup); decisions never return it. Only the SQL backends have a store to set up.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A setting is unusable (URL, role name, path).
    #[error("invalid quota store setting: {0}")]
    InvalidSetting(String),
    /// The database refused or failed.
    #[error("quota store: {0}")]
    Database(#[from] sqlx::Error),
    /// Applying the migrations failed.
    #[error("quota migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The store did not answer in time.
    #[error("quota store did not answer within {0:?}")]
    Timeout(Duration),
}
