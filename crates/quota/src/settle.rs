//! Settling a charge once the request it admitted has run: [`Charge`], [`Settlement`] and
//! [`SettleOutcome`].
//!
//! A decision charges before the work runs, because the quota must bound work that has
//! not happened yet. What the work turned out to be can change what is fair:
//! - the service could not serve it (a store down, a timeout, a scan that ran out of
//!   budget): the client must not pay, so the charge is undone and the receipt forgotten,
//!   and a retry is decided afresh ([`Settlement::Refund`]);
//! - it ran and was refused for the client's own reasons (nothing matched): the charge
//!   stays, but the receipt must not stay replayable, or the next request with the same key
//!   would be admitted as a replay and run again for free. The charge is kept under another
//!   receipt and the key is freed ([`Settlement::Spend`]).
//!
//! Only the decision that charged a receipt may settle it ([`crate::QuotaDecision::charge`]):
//! a replay settling would undo the charge of the request it replays. A settlement applies
//! only while the charge's window is the store's current window; once the window has ended
//! the charge is gone with it and there is nothing to settle.

use crate::command::QuotaCommand;
use crate::config::OperationLimits;
use crate::error::{CommandField, InputProblem, InvalidCommand};
use crate::unavailable::UnavailableReason;

/// A charge one decision made: the command, and the window it was charged in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    /// The command that was charged.
    pub command: QuotaCommand,
    /// Start of the window it was charged in (store clock, ms since the Unix epoch).
    pub window_started_at_ms: u64,
    /// The limits it was decided under (the window length tells the store's current window).
    pub limits: OperationLimits,
}

/// What becomes of a charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// Undo it: the receipt is removed and the count drops by one.
    Refund,
    /// Keep it, but under `spent_as` (a receipt of its own, e.g. the server's request id),
    /// so the original receipt is free and charged again when it comes back.
    Spend {
        /// The receipt the charge is kept under; a valid receipt id, not the original.
        spent_as: String,
    },
}

impl Settlement {
    /// The name used in logs and metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            Settlement::Refund => "refund",
            Settlement::Spend { .. } => "spend",
        }
    }
}

/// What settling did.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettleOutcome {
    /// Applied.
    Settled,
    /// Nothing to settle: the charge's window is no longer current, or the receipt is no
    /// longer in it (settled already), or `spent_as` is already charged. Nothing changed.
    NotFound,
    /// The store could not apply it; the charge stands as it was.
    Unavailable {
        /// Why.
        reason: UnavailableReason,
    },
}

impl Charge {
    /// Checks the command and the settlement before any store is touched.
    pub fn validate(&self, settlement: &Settlement) -> Result<(), InvalidCommand> {
        self.command.validate()?;
        if let Settlement::Spend { spent_as } = settlement {
            crate::validate::receipt_id(spent_as).map_err(|invalid| InvalidCommand {
                field: CommandField::SpentAs,
                problem: invalid.problem,
            })?;
            if *spent_as == self.command.receipt_id {
                return Err(InvalidCommand {
                    field: CommandField::SpentAs,
                    problem: InputProblem::SameAsReceipt,
                });
            }
        }
        Ok(())
    }

    /// Whether the charge's window is current at `now_ms` (store clock).
    pub(crate) fn window_is_current(&self, now_ms: u64) -> bool {
        let window_ms = self.limits.window_ms();
        now_ms - now_ms % window_ms == self.window_started_at_ms
    }
}
