//! Environment: the overrides (`PROXYPOOL__SECTION__KEY=value`) and the variables that
//! `*_env` secret references name.
//!
//! Overrides are applied to the parsed TOML tree *before* it is typed, so an override is
//! checked exactly like the file (unknown keys, types, ranges) and an error names the
//! variable. Path segments are separated by `__` and lower-cased; inside an array of tables
//! a segment picks the element by its `id` (or by index): `PROXYPOOL__UPSTREAMS__ACME__MAX_SIZE=500`.
//! A value is read as a TOML literal when it parses as one (`500`, `true`, `["a"]`) and as a
//! string otherwise (`30s`, `redis://h:6379`).

use super::error::Problem;
use std::collections::BTreeMap;
use toml::{Table, Value};

/// Prefix of override variables. Secret references use their own names, which should not
/// start with it (a single `_` after `PROXYPOOL` is fine: `PROXYPOOL_WORKER_TOKEN`).
pub const ENV_PREFIX: &str = "PROXYPOOL__";

/// A snapshot of environment variables (the process's, or a test's).
#[derive(Clone, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: values may be secrets.
        f.debug_struct("Env")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Env {
    /// The process environment (variables that are not valid UTF-8 are skipped).
    pub fn from_process() -> Self {
        Env {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        }
    }

    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    fn overrides(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars
            .iter()
            .filter(|(k, _)| k.starts_with(ENV_PREFIX))
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Which key path each override set, so later errors at that path can name the variable.
pub(crate) type OverrideOrigins = Vec<(String, String)>;

/// Applies every `PROXYPOOL__*` override to `root`.
pub(crate) fn apply_overrides(
    root: &mut Table,
    env: &Env,
) -> Result<OverrideOrigins, Vec<Problem>> {
    let mut origins = Vec::new();
    let mut problems = Vec::new();
    for (var, raw) in env.overrides() {
        let segments: Vec<String> = var[ENV_PREFIX.len()..]
            .split("__")
            .map(str::to_ascii_lowercase)
            .collect();
        match apply_one(root, &segments, parse_value(raw)) {
            Ok(path) => origins.push((path, var.to_owned())),
            Err((path, message)) => problems.push(Problem {
                env_var: Some(var.to_owned()),
                ..Problem::new(path, message)
            }),
        }
    }
    if problems.is_empty() {
        Ok(origins)
    } else {
        Err(problems)
    }
}

fn parse_value(raw: &str) -> Value {
    let wrapped = format!("v = {raw}");
    match wrapped.parse::<Table>() {
        Ok(mut table) => table
            .remove("v")
            .unwrap_or_else(|| Value::String(raw.to_owned())),
        Err(_) => Value::String(raw.to_owned()),
    }
}

fn normalize_id(id: &str) -> String {
    id.chars()
        .map(|c| match c {
            '-' | '.' | ':' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

fn apply_one(
    root: &mut Table,
    segments: &[String],
    value: Value,
) -> Result<String, (String, String)> {
    if segments.iter().any(String::is_empty) {
        return Err((
            String::new(),
            "empty path segment (use __ between keys)".into(),
        ));
    }
    let mut path = String::new();
    let mut table = root;
    let (last, parents) = segments
        .split_last()
        .ok_or((String::new(), "no key after the prefix".to_owned()))?;
    let mut iter = parents.iter();
    while let Some(segment) = iter.next() {
        push_key(&mut path, segment);
        let entry = table
            .entry(segment.clone())
            .or_insert_with(|| Value::Table(Table::new()));
        table = match entry {
            Value::Table(inner) => inner,
            Value::Array(items) => {
                let selector = iter.next().ok_or((
                    path.clone(),
                    "name an element (by id or index) of this array".to_owned(),
                ))?;
                let index = match selector.parse::<usize>() {
                    Ok(index) if index < items.len() => index,
                    _ => items
                        .iter()
                        .position(|item| {
                            item.get("id")
                                .and_then(Value::as_str)
                                .is_some_and(|id| normalize_id(id) == *selector)
                        })
                        .ok_or((
                            path.clone(),
                            format!("no element with id or index {selector:?}"),
                        ))?,
                };
                path.push_str(&format!("[{index}]"));
                match &mut items[index] {
                    Value::Table(inner) => inner,
                    _ => return Err((path, "this element is not a table".into())),
                }
            }
            _ => return Err((path, "this key is not a table".into())),
        };
    }
    push_key(&mut path, last);
    table.insert(last.clone(), value);
    Ok(path)
}

fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_reach_nested_keys_and_array_elements_by_id() {
        let mut root: Table = r#"
            [store]
            url = "memory"
            [[upstreams]]
            id = "acme-resi"
            max_size = 10
        "#
        .parse()
        .unwrap();
        let env = Env::from_pairs([
            ("PROXYPOOL__STORE__URL", "redis://127.0.0.1:6379/0"),
            ("PROXYPOOL__UPSTREAMS__ACME_RESI__MAX_SIZE", "500"),
            ("PROXYPOOL__CHECKER__TIMEOUT", "2s"),
            ("UNRELATED", "x"),
        ]);
        let origins = apply_overrides(&mut root, &env).unwrap();
        assert_eq!(
            root["store"]["url"].as_str(),
            Some("redis://127.0.0.1:6379/0")
        );
        assert_eq!(root["upstreams"][0]["max_size"].as_integer(), Some(500));
        assert_eq!(root["checker"]["timeout"].as_str(), Some("2s"));
        assert!(origins.contains(&(
            "upstreams[0].max_size".to_owned(),
            "PROXYPOOL__UPSTREAMS__ACME_RESI__MAX_SIZE".to_owned()
        )));
    }

    #[test]
    fn unknown_array_elements_are_reported_with_the_variable() {
        let mut root: Table = "[[upstreams]]\nid = \"a\"\n".parse().unwrap();
        let env = Env::from_pairs([("PROXYPOOL__UPSTREAMS__NOPE__TTL", "1s")]);
        let problems = apply_overrides(&mut root, &env).unwrap_err();
        assert_eq!(
            problems[0].env_var.as_deref(),
            Some("PROXYPOOL__UPSTREAMS__NOPE__TTL")
        );
        assert_eq!(problems[0].path, "upstreams");
    }
}
