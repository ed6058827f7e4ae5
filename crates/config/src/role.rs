//! [`Role`]: which process reads the file, which decides what is validated and which
//! secrets are resolved.

/// Which process reads the file: it decides which sections must be present and whose
/// secrets are resolved (a split gateway's host need not have the controller's secrets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `proxypool controller`: the controller's sections and `[api]`.
    Controller,
    /// `proxypool serve`: the controller's sections, `[api]` and an in-process `[gateway]`.
    Serve,
    /// `proxypool gateway`: a split `[gateway]` (worker id, controller URL, token).
    Gateway,
    /// `proxypool check-config`: whatever the file holds; a file with only `[gateway]`
    /// is checked as a split gateway's.
    Check,
}
