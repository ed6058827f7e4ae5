//! `PROXYPOOL__API__*` / `PROXYPOOL__GATEWAY__*` environment overrides for the binary's
//! own tables, with the controller's rules: `__` between keys (lower-cased), a value read
//! as a TOML literal when it parses as one (`9`, `true`) and as a string otherwise
//! (`0.0.0.0:8080`). These tables hold no arrays of tables, so keys only name tables.

use proxypool_controller::config::ENV_PREFIX;
use toml::{Table, Value};

/// Applies every override of `section` to `table` (creating it when the file has none).
pub(crate) fn apply(
    section: &str,
    table: &mut Option<Table>,
    env: &[(String, String)],
) -> Result<(), String> {
    let prefix = format!("{ENV_PREFIX}{}__", section.to_ascii_uppercase());
    for (var, raw) in env {
        let Some(rest) = var.strip_prefix(&prefix) else {
            continue;
        };
        let segments: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
        if segments.iter().any(String::is_empty) {
            return Err(format!(
                "{section} (set by environment variable {var}): empty key (use __ between keys)"
            ));
        }
        let root = table.get_or_insert_with(Table::new);
        set(root, &segments, parse_value(raw)).map_err(|path| {
            format!("{section}.{path} (set by environment variable {var}): is not a table")
        })?;
    }
    Ok(())
}

/// Sets `segments` (a key path) to `value`; on a non-table parent, the path that was one.
fn set(root: &mut Table, segments: &[String], value: Value) -> Result<(), String> {
    let (last, parents) = segments.split_last().ok_or_else(String::new)?;
    let mut table = root;
    let mut path = Vec::new();
    for segment in parents {
        path.push(segment.as_str());
        let entry = table
            .entry(segment.clone())
            .or_insert_with(|| Value::Table(Table::new()));
        table = match entry {
            Value::Table(inner) => inner,
            _ => return Err(path.join(".")),
        };
    }
    table.insert(last.clone(), value);
    Ok(())
}

fn parse_value(raw: &str) -> Value {
    format!("v = {raw}")
        .parse::<Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_nested_keys_with_typed_values() {
        let env = vec![
            (
                "PROXYPOOL__GATEWAY__LISTENERS__HTTP".to_owned(),
                "0.0.0.0:8080".to_owned(),
            ),
            (
                "PROXYPOOL__GATEWAY__SHUTDOWN_GRACE_MS".to_owned(),
                "500".to_owned(),
            ),
            (
                "PROXYPOOL__API__LIMITS__MAX_CONNECTIONS".to_owned(),
                "3".to_owned(),
            ),
        ];
        let mut gateway = None;
        apply("gateway", &mut gateway, &env).unwrap();
        let gateway = gateway.unwrap();
        assert_eq!(gateway["listeners"]["http"].as_str(), Some("0.0.0.0:8080"));
        assert_eq!(gateway["shutdown_grace_ms"].as_integer(), Some(500));
        assert!(!gateway.contains_key("limits"));

        let mut bad = Some("listeners = 1".parse::<Table>().unwrap());
        let message = apply("gateway", &mut bad, &env).unwrap_err();
        assert!(message.contains("gateway.listeners"), "{message}");
    }
}
