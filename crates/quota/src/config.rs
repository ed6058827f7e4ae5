//! Per-operation windows and limits: defaults, hard caps, validation at construction.
//!
//! Every decision takes an [`OperationLimits`]; [`QuotaConfig`] is a plain value (one per
//! client) that callers look the limits up in. The backends keep none of it.
//!
//! Values outside the caps are rejected, never clamped (a silently clamped policy is a
//! policy nobody wrote). Defaults: window 60 s; extract 600, inspect 1000 (the cap; see
//! [`QuotaConfig::default`]), admin 60.

use std::time::Duration;

use crate::command::{Operation, QuotaCommand};
use crate::error::{ConfigError, InvalidCommand};

/// The window and limit of one operation. Construct with [`OperationLimits::new`], which
/// enforces the hard caps; the fields are private so an invalid value cannot exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OperationLimits {
    window: Duration,
    limit: u32,
}

impl OperationLimits {
    /// The shortest window.
    pub const MIN_WINDOW: Duration = Duration::from_secs(1);
    /// The longest window (5 minutes).
    pub const MAX_WINDOW: Duration = Duration::from_secs(300);
    /// The smallest limit.
    pub const MIN_LIMIT: u32 = 1;
    /// The largest limit: also the most receipts one bucket ever holds.
    pub const MAX_LIMIT: u32 = 1000;
    /// The default window.
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);

    /// A validated window and limit.
    pub fn new(window: Duration, limit: u32) -> Result<Self, ConfigError> {
        if window < Self::MIN_WINDOW || window > Self::MAX_WINDOW {
            return Err(ConfigError::WindowOutOfRange {
                window,
                min: Self::MIN_WINDOW,
                max: Self::MAX_WINDOW,
            });
        }
        if window.subsec_nanos() != 0 {
            return Err(ConfigError::WindowNotWholeSeconds { window });
        }
        if !(Self::MIN_LIMIT..=Self::MAX_LIMIT).contains(&limit) {
            return Err(ConfigError::LimitOutOfRange {
                limit,
                min: Self::MIN_LIMIT,
                max: Self::MAX_LIMIT,
            });
        }
        Ok(OperationLimits { window, limit })
    }

    /// The default window with `limit` (for the built-in defaults, known to be valid).
    const fn default_window(limit: u32) -> Self {
        OperationLimits {
            window: Self::DEFAULT_WINDOW,
            limit,
        }
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The window length in milliseconds (what the stores compute with).
    pub fn window_ms(&self) -> u64 {
        self.window.as_secs() * 1000
    }

    /// The window length in whole seconds (what `RateLimit-Policy` states).
    pub fn window_secs(&self) -> u64 {
        self.window.as_secs()
    }

    /// Admissions per window.
    pub fn limit(&self) -> u32 {
        self.limit
    }
}

/// An operation together with its limits: what a decision was made under, and what the
/// `RateLimit-Policy` header describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuotaPolicy {
    /// The metered operation.
    pub operation: Operation,
    /// Its window and limit.
    pub limits: OperationLimits,
}

impl QuotaPolicy {
    /// Checks every field of `command`, then pairs its operation with `limits`: what every
    /// backend's `consume` starts with.
    pub(crate) fn checked(
        command: &QuotaCommand,
        limits: OperationLimits,
    ) -> Result<Self, InvalidCommand> {
        command.validate()?;
        Ok(Self {
            operation: command.operation,
            limits,
        })
    }
}

/// One client's quota: an [`OperationLimits`] per [`Operation`], to pass to
/// [`crate::QuotaPort::consume`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaConfig {
    extract: OperationLimits,
    inspect: OperationLimits,
    admin: OperationLimits,
}

impl Default for QuotaConfig {
    /// Window 60 s for every operation; limits extract 600, inspect 1000, admin 60.
    fn default() -> Self {
        QuotaConfig {
            extract: OperationLimits::default_window(600),
            // 1200 was asked for here, above the hard cap of 1000. The cap wins: it is
            // what bounds a bucket to 1000 receipts and 256 KiB, and the CHECK constraints
            // enforce it. 1000 per 60 s is the closest default that the stores accept.
            inspect: OperationLimits::default_window(OperationLimits::MAX_LIMIT),
            admin: OperationLimits::default_window(60),
        }
    }
}

impl QuotaConfig {
    /// The same limits for every operation (handy in tests).
    pub fn uniform(limits: OperationLimits) -> Self {
        QuotaConfig {
            extract: limits,
            inspect: limits,
            admin: limits,
        }
    }

    /// This configuration with `operation` set to `limits`.
    #[must_use]
    pub fn with(mut self, operation: Operation, limits: OperationLimits) -> Self {
        *self.slot(operation) = limits;
        self
    }

    fn slot(&mut self, operation: Operation) -> &mut OperationLimits {
        match operation {
            Operation::Extract => &mut self.extract,
            Operation::Inspect => &mut self.inspect,
            Operation::Admin => &mut self.admin,
        }
    }

    /// The limits of `operation`.
    pub fn limits(&self, operation: Operation) -> OperationLimits {
        match operation {
            Operation::Extract => self.extract,
            Operation::Inspect => self.inspect,
            Operation::Admin => self.admin,
        }
    }

    /// The policy a decision for `operation` is made under.
    pub fn policy(&self, operation: Operation) -> QuotaPolicy {
        QuotaPolicy {
            operation,
            limits: self.limits(operation),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn caps_are_inclusive_and_enforced() {
        assert!(OperationLimits::new(secs(1), 1).is_ok());
        assert!(OperationLimits::new(secs(300), 1000).is_ok());
        assert!(matches!(
            OperationLimits::new(Duration::from_millis(999), 1),
            Err(ConfigError::WindowOutOfRange { .. })
        ));
        assert!(matches!(
            OperationLimits::new(secs(301), 1),
            Err(ConfigError::WindowOutOfRange { .. })
        ));
        assert!(matches!(
            OperationLimits::new(Duration::from_millis(1500), 1),
            Err(ConfigError::WindowNotWholeSeconds { .. })
        ));
        assert_eq!(
            OperationLimits::new(secs(60), 0),
            Err(ConfigError::LimitOutOfRange {
                limit: 0,
                min: 1,
                max: 1000
            })
        );
        assert!(matches!(
            OperationLimits::new(secs(60), 1001),
            Err(ConfigError::LimitOutOfRange { .. })
        ));
    }

    #[test]
    fn defaults_are_valid_and_per_operation() {
        let config = QuotaConfig::default();
        for (operation, limit) in [
            (Operation::Extract, 600),
            (Operation::Inspect, 1000),
            (Operation::Admin, 60),
        ] {
            let limits = config.limits(operation);
            assert_eq!(
                OperationLimits::new(limits.window(), limits.limit()),
                Ok(limits)
            );
            assert_eq!((limits.window_ms(), limits.limit()), (60_000, limit));
        }
        let changed = config.with(Operation::Admin, OperationLimits::new(secs(5), 2).unwrap());
        assert_eq!(changed.limits(Operation::Admin).window_secs(), 5);
        assert_eq!(
            changed.limits(Operation::Extract),
            config.limits(Operation::Extract)
        );
    }
}
