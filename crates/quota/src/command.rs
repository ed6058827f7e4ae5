//! What a caller asks the quota: [`QuotaCommand`] and the [`Operation`] it is charged to.

use std::fmt;
use std::str::FromStr;

use crate::error::{CommandField, InputProblem, InvalidCommand};
use crate::validate;

/// The operations proxypool meters. Each has its own window and limit ([`crate::QuotaConfig`])
/// and its own bucket. Adding one needs a migration too: the tables only accept known names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Operation {
    /// Extracting proxies from the distribution API.
    Extract,
    /// Read-only inspection (inventory, an extraction's state).
    Inspect,
    /// Administrative writes (upstreams, clients, policies).
    Admin,
}

impl Operation {
    /// Every operation, in a stable order.
    pub const ALL: [Operation; 3] = [Operation::Extract, Operation::Inspect, Operation::Admin];

    /// The name stored in the database and used as the `RateLimit-Policy` name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Extract => "extract",
            Operation::Inspect => "inspect",
            Operation::Admin => "admin",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl FromStr for Operation {
    type Err = InvalidCommand;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Operation::ALL
            .into_iter()
            .find(|operation| operation.as_str() == name)
            .ok_or(InvalidCommand {
                field: CommandField::Operation,
                problem: InputProblem::Unknown,
            })
    }
}

/// One request to consume quota.
///
/// The fields are plain strings because they arrive from outside (the authenticated client,
/// the request's idempotency key); every backend validates them with [`QuotaCommand::validate`]
/// before it touches its store, so a bad value is an input error and writes nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QuotaCommand {
    /// The tenant: `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`.
    pub project: String,
    /// Who is charged inside the project (the client id): 1..=255 characters, no control
    /// characters.
    pub subject: String,
    /// What is charged.
    pub operation: Operation,
    /// The idempotency identity of the request (for an extraction, its idempotency key):
    /// `^[A-Za-z0-9][A-Za-z0-9._:/-]{0,263}$`. The same receipt inside one window is charged
    /// once.
    pub receipt_id: String,
}

impl QuotaCommand {
    /// A command from its parts (not yet validated).
    pub fn new(
        project: impl Into<String>,
        subject: impl Into<String>,
        operation: Operation,
        receipt_id: impl Into<String>,
    ) -> Self {
        QuotaCommand {
            project: project.into(),
            subject: subject.into(),
            operation,
            receipt_id: receipt_id.into(),
        }
    }

    /// Checks every field; the first bad one is reported (by name, never by value).
    pub fn validate(&self) -> Result<(), InvalidCommand> {
        validate::project(&self.project)?;
        validate::subject(&self.subject)?;
        validate::receipt_id(&self.receipt_id)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_names_round_trip() {
        for operation in Operation::ALL {
            assert_eq!(operation.as_str().parse::<Operation>(), Ok(operation));
        }
        let unknown = "delete".parse::<Operation>().unwrap_err();
        assert_eq!(unknown.field, CommandField::Operation);
        assert_eq!("Extract".parse::<Operation>(), Err(unknown));
    }
}
