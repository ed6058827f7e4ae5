//! Loading: read the file, parse TOML, apply environment overrides, type it (rejecting
//! unknown keys), then validate and resolve secret references.

use super::env::{Env, OverrideOrigins, apply_overrides};
use super::error::{ConfigError, Problem};
use super::model::Config;
use super::validate::validate;
use std::path::Path;
use toml::{Table, Value};

impl Config {
    /// Loads `path` with the process environment.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        Config::load_with_env(path, &Env::from_process())
    }

    /// Loads `path` with the given environment (overrides and secret references).
    pub fn load_with_env(path: impl AsRef<Path>, env: &Env) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: file.clone(),
            source,
        })?;
        let base_dir = path.parent().unwrap_or(Path::new("."));
        Config::from_toml_str(&text, &file, base_dir, env)
    }

    /// Loads from text; `file` names it in errors and `base_dir` anchors relative paths
    /// (`*_file` references, `sqlite://` paths).
    pub fn from_toml_str(
        text: &str,
        file: &str,
        base_dir: &Path,
        env: &Env,
    ) -> Result<Config, ConfigError> {
        let mut table: Table = text.parse().map_err(|e: toml::de::Error| {
            let (line, column) = e
                .span()
                .map(|span| line_column(text, span.start))
                .unwrap_or((0, 0));
            ConfigError::Syntax {
                file: file.to_owned(),
                line,
                column,
                message: e.message().to_owned(),
            }
        })?;
        let invalid = |problems: Vec<Problem>| ConfigError::Invalid {
            file: file.to_owned(),
            problems,
        };
        let origins = apply_overrides(&mut table, env).map_err(invalid)?;
        let mut config: Config =
            serde_path_to_error::deserialize(Value::Table(table)).map_err(|e| {
                let path = e.path().to_string();
                let message = e.inner().message().to_owned();
                invalid(vec![attribute(
                    Problem {
                        path: if path == "." { String::new() } else { path },
                        env_var: None,
                        message,
                    },
                    &origins,
                )])
            })?;
        let problems = validate(&mut config, base_dir, env);
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(invalid(
                problems
                    .into_iter()
                    .map(|p| attribute(p, &origins))
                    .collect(),
            ))
        }
    }
}

/// Names the override variable when the problem's key (or a key under it) was overridden.
fn attribute(mut problem: Problem, origins: &OverrideOrigins) -> Problem {
    if let Some((_, var)) = origins
        .iter()
        .find(|(path, _)| problem.path == *path || problem.path.starts_with(&format!("{path}.")))
    {
        problem.env_var = Some(var.clone());
    }
    problem
}

/// 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |nl| before.len() - nl - 1)
        + 1;
    (line, column)
}
