//! The input rules of a [`crate::QuotaCommand`], checked before any store is touched.
//!
//! They are the seed's patterns, written as byte checks (no regex engine for three fixed
//! shapes). The SQL tables repeat the length limits as CHECK constraints; the character
//! rules live only here (as regular expressions in PostgreSQL they were the costliest part
//! of every decision).

use crate::error::{CommandField, InputProblem, InvalidCommand};

/// Longest project id, in bytes (all allowed characters are ASCII).
pub(crate) const PROJECT_MAX_LEN: usize = 128;
/// Longest subject, in characters.
pub(crate) const SUBJECT_MAX_CHARS: usize = 255;
/// Longest receipt id, in bytes (all allowed characters are ASCII): room for a caller's
/// namespace prefix (`key:`) in front of a 255-byte idempotency key.
pub(crate) const RECEIPT_MAX_LEN: usize = 264;

fn invalid(field: CommandField, problem: InputProblem) -> InvalidCommand {
    InvalidCommand { field, problem }
}

/// `^[A-Za-z0-9][rest]{0,max-1}$` where `rest` adds the given punctuation.
fn ascii_identifier(
    value: &str,
    field: CommandField,
    max_len: usize,
    punctuation: &[u8],
) -> Result<(), InvalidCommand> {
    let bytes = value.as_bytes();
    let Some(first) = bytes.first() else {
        return Err(invalid(field, InputProblem::Empty));
    };
    if bytes.len() > max_len {
        return Err(invalid(field, InputProblem::TooLong));
    }
    if !first.is_ascii_alphanumeric() {
        return Err(invalid(field, InputProblem::BadFirstCharacter));
    }
    if bytes[1..]
        .iter()
        .all(|byte| byte.is_ascii_alphanumeric() || punctuation.contains(byte))
    {
        Ok(())
    } else {
        Err(invalid(field, InputProblem::ForbiddenCharacter))
    }
}

/// `^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`
pub(crate) fn project(value: &str) -> Result<(), InvalidCommand> {
    ascii_identifier(value, CommandField::Project, PROJECT_MAX_LEN, b"._:-")
}

/// `^[A-Za-z0-9][A-Za-z0-9._:/-]{0,263}$`
pub(crate) fn receipt_id(value: &str) -> Result<(), InvalidCommand> {
    ascii_identifier(value, CommandField::ReceiptId, RECEIPT_MAX_LEN, b"._:/-")
}

/// 1..=255 characters, none of them a control character.
pub(crate) fn subject(value: &str) -> Result<(), InvalidCommand> {
    if value.is_empty() {
        return Err(invalid(CommandField::Subject, InputProblem::Empty));
    }
    // Count at most one past the limit: a huge subject costs no more than a long one.
    if value.chars().take(SUBJECT_MAX_CHARS + 1).count() > SUBJECT_MAX_CHARS {
        return Err(invalid(CommandField::Subject, InputProblem::TooLong));
    }
    if value.chars().any(char::is_control) {
        return Err(invalid(
            CommandField::Subject,
            InputProblem::ForbiddenCharacter,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(result: Result<(), InvalidCommand>) -> Option<InputProblem> {
        result.err().map(|error| error.problem)
    }

    #[test]
    fn project_follows_the_seed_pattern() {
        assert!(project("a").is_ok());
        assert!(project("Proj-1.x:y_z").is_ok());
        assert!(project(&"p".repeat(PROJECT_MAX_LEN)).is_ok());
        assert_eq!(problem(project("")), Some(InputProblem::Empty));
        assert_eq!(
            problem(project(&"p".repeat(PROJECT_MAX_LEN + 1))),
            Some(InputProblem::TooLong)
        );
        assert_eq!(
            problem(project("-a")),
            Some(InputProblem::BadFirstCharacter)
        );
        assert_eq!(
            problem(project("_a")),
            Some(InputProblem::BadFirstCharacter)
        );
        assert_eq!(
            problem(project("a/b")),
            Some(InputProblem::ForbiddenCharacter)
        );
        assert_eq!(
            problem(project("a b")),
            Some(InputProblem::ForbiddenCharacter)
        );
        assert_eq!(
            problem(project("aé")),
            Some(InputProblem::ForbiddenCharacter)
        );
    }

    #[test]
    fn receipt_allows_slashes_and_255_bytes() {
        assert!(receipt_id("idem/2026-01-01:abc_9.z").is_ok());
        assert!(receipt_id(&"r".repeat(RECEIPT_MAX_LEN)).is_ok());
        assert_eq!(
            problem(receipt_id(&"r".repeat(RECEIPT_MAX_LEN + 1))),
            Some(InputProblem::TooLong)
        );
        assert_eq!(
            problem(receipt_id("/a")),
            Some(InputProblem::BadFirstCharacter)
        );
        assert_eq!(
            problem(receipt_id("a\"b")),
            Some(InputProblem::ForbiddenCharacter)
        );
        assert_eq!(
            problem(receipt_id("a\\b")),
            Some(InputProblem::ForbiddenCharacter)
        );
    }

    #[test]
    fn subject_counts_characters_and_refuses_controls() {
        assert!(subject("client 7 / ünïcödé").is_ok());
        assert!(subject(&"é".repeat(SUBJECT_MAX_CHARS)).is_ok());
        assert_eq!(
            problem(subject(&"é".repeat(SUBJECT_MAX_CHARS + 1))),
            Some(InputProblem::TooLong)
        );
        assert_eq!(problem(subject("")), Some(InputProblem::Empty));
        for bad in ["a\nb", "a\0", "\u{7f}", "tab\there", "c1\u{85}"] {
            assert_eq!(
                problem(subject(bad)),
                Some(InputProblem::ForbiddenCharacter),
                "{bad:?}"
            );
        }
    }
}
