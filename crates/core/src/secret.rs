//! Secrets that cannot be printed by accident.
//!
//! `Secret` has no `Display` and a redacting `Debug`, so a password never reaches a log line,
//! an error message or a panic through formatting. Serialization does carry the value, because
//! stores and the extraction response must hold it; that is always an explicit choice of the
//! type being serialized.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A secret string (a proxy password). Read it with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret value; every call site is a place where it may leave the process.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Upstream proxy credentials: a username (not secret, it is part of the unique key) and a
/// password (secret).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    pub username: String,
    pub password: Secret,
}

impl Credentials {
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Credentials {
            username: username.into(),
            password: Secret::new(password),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_password() {
        let creds = Credentials::new("alice", "hunter2-very-secret");
        let printed = format!("{creds:?} {:?}", creds.password);
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("alice"));
        assert_eq!(creds.password.expose(), "hunter2-very-secret");
    }
}
