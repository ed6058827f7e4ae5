//! Configuration errors that say where: the file, the line, the key path, and the
//! environment variable when an override supplied the value. Messages never carry a secret's value:
//! they name references (`password_env = "X"`), not what the reference resolves to.

use std::fmt;

/// One problem at one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key path, e.g. `upstreams[0].provider.interval`.
    pub path: String,
    /// The 1-based line of the key in the file (of its nearest written parent when the key
    /// itself is not written, e.g. a missing required key); `None` when the value came
    /// from the environment or the file has no such table.
    pub line: Option<usize>,
    /// The environment variable that set the value, when one did.
    pub env_var: Option<String>,
    pub message: String,
}

impl Problem {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            path: path.into(),
            line: None,
            env_var: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if self.path.is_empty() {
            f.write_str("(top level)")?;
        } else {
            f.write_str(&self.path)?;
        }
        if let Some(var) = &self.env_var {
            write!(f, " (set by environment variable {var})")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read the file: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// TOML syntax. Only the parser's message and position are kept, not the source line,
    /// which could hold something pasted by mistake.
    #[error("{file}:{line}:{column}: TOML syntax error: {message}")]
    Syntax {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: invalid configuration:\n{}", render(.problems))]
    Invalid {
        file: String,
        problems: Vec<Problem>,
    },
}

fn render(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  - {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl ConfigError {
    /// The problems of an `Invalid` error (empty for the others).
    pub fn problems(&self) -> &[Problem] {
        match self {
            ConfigError::Invalid { problems, .. } => problems,
            _ => &[],
        }
    }
}
