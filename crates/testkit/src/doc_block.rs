//! Configuration blocks the docs show, read by the tests from the page itself so the page
//! and what the tests run cannot drift apart.

/// The first ```` ```toml ```` block after the HTML comment that starts with `marker` in
/// `page` (a doc's text, from `include_str!`). Panics, naming the marker, when the page
/// has no such block: the doc moved the example, and the test must follow it.
pub fn marked_toml_block(page: &'static str, marker: &str) -> &'static str {
    let at = page
        .find(&format!("<!-- {marker}"))
        .unwrap_or_else(|| panic!("the page has no <!-- {marker} ... --> marker"));
    let rest = &page[at..];
    let start = rest
        .find("```toml\n")
        .unwrap_or_else(|| panic!("no toml block follows the {marker} marker"))
        + "```toml\n".len();
    let end = start
        + rest[start..]
            .find("```")
            .unwrap_or_else(|| panic!("the toml block after {marker} does not end"));
    &rest[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_block_after_its_marker_only() {
        let page = "```toml\nfirst = 1\n```\n<!-- mine: read -->\ntext\n```toml\nsecond = 2\n```\n";
        assert_eq!(marked_toml_block(page, "mine:"), "second = 2\n");
    }

    #[test]
    #[should_panic(expected = "no <!-- other")]
    fn a_missing_marker_is_named() {
        marked_toml_block("```toml\nx = 1\n```", "other");
    }
}
