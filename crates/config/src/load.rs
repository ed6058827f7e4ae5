//! Loading: read the file, parse TOML, apply environment overrides, type it (rejecting
//! unknown keys), then validate and resolve secret references for the role that runs.
//! Every problem names the file, the line and the key (and the overriding variable).

use crate::check::Check;
use crate::env::{Env, OverrideOrigins, apply_overrides};
use crate::error::{ConfigError, Problem};
use crate::locate::{Locator, line_column};
use crate::model::Config;
use crate::role::Role;
use crate::validate::validate;
use std::path::Path;
use toml::{Table, Value};

impl Config {
    /// Loads `path` for `role` with the process environment.
    pub fn load(path: impl AsRef<Path>, role: Role) -> Result<Config, ConfigError> {
        Config::load_with_env(path, role, &Env::from_process())
    }

    /// Loads `path` for `role` with the given environment (overrides and secret references).
    pub fn load_with_env(
        path: impl AsRef<Path>,
        role: Role,
        env: &Env,
    ) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: file.clone(),
            source,
        })?;
        let base_dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Config::from_toml_str(&text, &file, base_dir, role, env)
    }

    /// Loads from text; `file` names it in errors and `base_dir` anchors relative paths
    /// (`{ file = ... }` secrets, `sqlite://` paths).
    pub fn from_toml_str(
        text: &str,
        file: &str,
        base_dir: &Path,
        role: Role,
        env: &Env,
    ) -> Result<Config, ConfigError> {
        let mut table: Table = text.parse().map_err(|e: toml::de::Error| {
            // Only the parser's message and position: the source line could hold a secret
            // pasted by mistake.
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
        let locator = Locator::new(text);
        let invalid = |problems: Vec<Problem>, origins: &OverrideOrigins| ConfigError::Invalid {
            file: file.to_owned(),
            problems: problems
                .into_iter()
                .map(|p| attribute(p, origins, &locator))
                .collect(),
        };
        let origins = apply_overrides(&mut table, env).map_err(|p| invalid(p, &Vec::new()))?;
        let mut config: Config =
            serde_path_to_error::deserialize(Value::Table(table)).map_err(|e| {
                let path = e.path().to_string();
                let path = if path == "." { String::new() } else { path };
                invalid(vec![Problem::new(path, e.inner().message())], &origins)
            })?;
        let mut check = Check::new(base_dir, env);
        validate(&mut check, &mut config, role);
        if check.problems.is_empty() {
            Ok(config)
        } else {
            Err(invalid(check.problems, &origins))
        }
    }
}

/// Names the override variable when the problem's key (or a key above or under it) was
/// overridden, and otherwise the line the key is written on.
fn attribute(mut problem: Problem, origins: &OverrideOrigins, locator: &Locator<'_>) -> Problem {
    let overridden = origins
        .iter()
        .find(|(path, _)| problem.path == *path || problem.path.starts_with(&format!("{path}.")));
    match overridden {
        Some((_, var)) if problem.env_var.is_none() => problem.env_var = Some(var.clone()),
        Some(_) => {}
        None if problem.env_var.is_none() => problem.line = locator.line_of(&problem.path),
        None => {}
    }
    problem
}
