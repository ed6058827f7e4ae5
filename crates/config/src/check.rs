//! [`Check`]: collects every problem of one load with its key path, so one run reports
//! all of them, and resolves secret references on the way.

use crate::duration::Millis;
use crate::env::Env;
use crate::error::Problem;
use crate::secret::SecretRef;
use std::path::{Path, PathBuf};

pub(crate) struct Check<'a> {
    pub(crate) problems: Vec<Problem>,
    pub(crate) base_dir: &'a Path,
    pub(crate) env: &'a Env,
}

impl<'a> Check<'a> {
    pub(crate) fn new(base_dir: &'a Path, env: &'a Env) -> Self {
        Check {
            problems: Vec::new(),
            base_dir,
            env,
        }
    }

    /// Makes a relative `path` relative to the config file's directory (an absolute one
    /// stays as written), so a file named in it does not depend on where the process runs.
    pub(crate) fn anchor(&self, path: &mut PathBuf) {
        if path.is_relative() {
            *path = self.base_dir.join(&*path);
        }
    }

    pub(crate) fn at(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem::new(path, message));
    }

    pub(crate) fn require(&mut self, ok: bool, path: impl Into<String>, message: &str) {
        if !ok {
            self.at(path, message);
        }
    }

    pub(crate) fn duration(&mut self, path: &str, value: Millis, min: Millis, max: Millis) {
        if value < min || value > max {
            self.at(
                path,
                format!("must be between {min} and {max}, not {value}"),
            );
        }
    }

    /// Resolves a secret the service sends (a password, an authorization header).
    pub(crate) fn resolve_plain(&mut self, path: &str, secret: &mut SecretRef) {
        if let Err(message) = secret.resolve_plain(self.base_dir, self.env) {
            self.at(path, message);
        }
    }

    /// Resolves a secret the service only verifies, to a hash salted by `owner`.
    pub(crate) fn resolve_verifier(&mut self, path: &str, owner: &str, secret: &mut SecretRef) {
        if let Err(message) = secret.resolve_verifier(owner, self.base_dir, self.env) {
            self.at(path, message);
        }
    }
}
