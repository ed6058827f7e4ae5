//! `[log]`: how the process writes its log. Read once, before anything is logged (so the
//! first line is already in the chosen format), by [`peek_log_format`]; a change takes a
//! restart.

use crate::env::Env;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The shape of each log line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line (time, level, target, message and the event's fields),
    /// for log collectors.
    Json,
}

/// The `[log]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSection {
    pub format: LogFormat,
}

/// The `[log] format` of the file at `path`, with the environment's override
/// (`PROXYPOOL__LOG__FORMAT`) applied, read before the log starts. `None` when the file
/// cannot be read or parsed, or names no format this knows: the full load that follows
/// reports why, and the log stays text until then.
pub fn peek_log_format(path: &Path, env: &Env) -> Option<LogFormat> {
    let overridden = env.get("PROXYPOOL__LOG__FORMAT").map(str::to_owned);
    let written = || -> Option<String> {
        let text = std::fs::read_to_string(path).ok()?;
        let table: toml::Table = text.parse().ok()?;
        let format = table.get("log")?.get("format")?.as_str()?;
        Some(format.to_owned())
    };
    match overridden.or_else(written)?.as_str() {
        "text" => Some(LogFormat::Text),
        "json" => Some(LogFormat::Json),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_read_from_the_file_and_the_environment_wins() {
        let dir = tempfile_dir();
        let path = dir.join("p.toml");
        std::fs::write(&path, "[log]\nformat = \"json\"\n").unwrap();
        assert_eq!(
            peek_log_format(&path, &Env::default()),
            Some(LogFormat::Json)
        );
        let env = Env::from_pairs([("PROXYPOOL__LOG__FORMAT", "text")]);
        assert_eq!(peek_log_format(&path, &env), Some(LogFormat::Text));
        std::fs::write(&path, "[store]\nurl = \"memory\"\n").unwrap();
        assert_eq!(peek_log_format(&path, &Env::default()), None);
        std::fs::write(&path, "[log]\nformat = \"xml\"\n").unwrap();
        assert_eq!(peek_log_format(&path, &Env::default()), None);
        assert_eq!(
            peek_log_format(&dir.join("missing.toml"), &Env::default()),
            None
        );
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("proxypool-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
