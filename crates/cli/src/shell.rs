//! Command lines printed for a person to paste: how to call this binary, and words quoted
//! for a POSIX shell. `dev`'s banner and `init`'s next steps use them, so what they print
//! works as printed from the directory the command ran in.

/// How to call this binary from the current directory (`target/release/proxypool` after
/// `cargo run --release`), falling back to `proxypool`.
pub(crate) fn this_binary() -> String {
    let (Ok(exe), Ok(cwd)) = (std::env::current_exe(), std::env::current_dir()) else {
        return "proxypool".to_owned();
    };
    let path = match exe.strip_prefix(&cwd) {
        Ok(relative) => relative.display().to_string(),
        Err(_) => exe.display().to_string(),
    };
    word(&path)
}

/// `text` as one shell word: as it is when nothing in it is special to a shell, else in
/// single quotes (a single quote inside written as `'\''`).
pub(crate) fn word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-');
    if !text.is_empty() && text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_a_shell_would_read_them_otherwise() {
        assert_eq!(word("target/release/proxypool"), "target/release/proxypool");
        assert_eq!(word("my dir/x"), "'my dir/x'");
        assert_eq!(word("it's"), r"'it'\''s'");
        assert_eq!(word("$HOME"), "'$HOME'");
        assert_eq!(word(""), "''");
    }
}
