//! The `rel="next"` target of RFC 8288 `Link` headers: how a vendor that pages by header
//! names its next page.

/// The first `rel="next"` link among `values` (each a `Link` header's value, which may
/// hold several comma-separated links), as written (not yet resolved).
pub fn next_link<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<String> {
    values.into_iter().find_map(|value| {
        let mut rest = value;
        loop {
            let start = rest.find('<')?;
            let end = start + rest[start..].find('>')?;
            let target = &rest[start + 1..end];
            // The parameters run to the next link (a `<` outside quotes) or the end.
            let params_end = next_link_start(&rest[end + 1..]).map_or(rest.len(), |i| end + 1 + i);
            if is_next(&rest[end + 1..params_end]) {
                return Some(target.trim().to_owned());
            }
            rest = &rest[params_end..];
        }
    })
}

/// Where the next `<` outside a quoted string starts.
fn next_link_start(params: &str) -> Option<usize> {
    let mut quoted = false;
    for (i, c) in params.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '<' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// Whether one link's parameters hold `rel=next` (quoted or not; `rel` may list several
/// space-separated relation types).
fn is_next(params: &str) -> bool {
    params.split(';').any(|param| {
        let Some((name, value)) = param.split_once('=') else {
            return false;
        };
        name.trim().eq_ignore_ascii_case("rel")
            && value
                .trim()
                .trim_matches(|c| c == '"' || c == ',')
                .split_ascii_whitespace()
                .any(|rel| rel.eq_ignore_ascii_case("next"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_next_among_other_links_and_headers() {
        assert_eq!(
            next_link([
                r#"<https://a.example/l?page=1>; rel="prev", <https://a.example/l?page=3>; rel="next""#
            ]),
            Some("https://a.example/l?page=3".into())
        );
        assert_eq!(
            next_link([
                "</first>; rel=first",
                "</p/2>; title=\"a, <b>\"; rel=\"last next\""
            ]),
            Some("/p/2".into())
        );
        assert_eq!(next_link(["</x>; REL=Next"]), Some("/x".into()));
    }

    #[test]
    fn no_next_is_none() {
        assert_eq!(next_link([r#"</p/1>; rel="prev""#]), None);
        assert_eq!(next_link(["garbage", "<unterminated; rel=next"]), None);
        assert_eq!(next_link(std::iter::empty()), None);
    }
}
