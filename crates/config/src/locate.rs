//! Finding the line of a key path (`upstreams[1].provider.interval`) in the file's text, so
//! every problem can name where it is. The file is parsed a second time with spans; that
//! costs microseconds and keeps the typed model free of span wrappers.

use toml::de::{DeTable, DeValue};

/// Line lookups over one file's text.
pub(crate) struct Locator<'a> {
    text: &'a str,
    root: Option<DeTable<'a>>,
}

impl<'a> Locator<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Locator {
            text,
            root: DeTable::parse(text).ok().map(|t| t.into_inner()),
        }
    }

    /// The 1-based line of the deepest written key along `path`.
    pub(crate) fn line_of(&self, path: &str) -> Option<usize> {
        let root = self.root.as_ref()?;
        let mut offset = None;
        let mut table = Some(root);
        let mut array: Option<&[toml::Spanned<DeValue<'a>>]> = None;
        for segment in segments(path) {
            let found = match segment {
                Segment::Key(key) => table
                    .and_then(|t| t.iter().find(|(k, _)| k.get_ref().as_ref() == key))
                    .map(|(k, v)| (k.span().start, v.get_ref())),
                Segment::Index(index) => array
                    .and_then(|items| items.get(index))
                    .map(|item| (item.span().start, item.get_ref())),
            };
            let Some((at, value)) = found else {
                break;
            };
            offset = Some(at);
            (table, array) = descend(value);
            if table.is_none() && array.is_none() {
                break;
            }
        }
        offset.map(|at| line_of_offset(self.text, at))
    }
}

fn descend<'t, 'a>(
    value: &'t DeValue<'a>,
) -> (
    Option<&'t DeTable<'a>>,
    Option<&'t [toml::Spanned<DeValue<'a>>]>,
) {
    match value {
        DeValue::Table(table) => (Some(table), None),
        DeValue::Array(items) => (None, Some(&items[..])),
        _ => (None, None),
    }
}

enum Segment<'p> {
    Key(&'p str),
    Index(usize),
}

/// `a.b[2].c` → `a`, `b`, `[2]`, `c`.
fn segments(path: &str) -> impl Iterator<Item = Segment<'_>> {
    path.split('.').flat_map(|part| {
        let (key, rest) = part.split_once('[').unwrap_or((part, ""));
        let indexes = rest
            .split('[')
            .filter_map(|i| i.trim_end_matches(']').parse::<usize>().ok());
        (!key.is_empty())
            .then_some(Segment::Key(key))
            .into_iter()
            .chain(indexes.map(Segment::Index))
    })
}

/// 1-based line of a byte offset.
pub(crate) fn line_of_offset(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// 1-based line and column of a byte offset.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let column = before
        .rfind('\n')
        .map_or(before.len(), |nl| before.len() - nl - 1)
        + 1;
    (line_of_offset(text, offset), column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keys_tables_and_array_elements() {
        let text = "[store]\nurl = \"memory\"\n\n[[upstreams]]\nid = \"a\"\n\n[[upstreams]]\nid = \"b\"\n[upstreams.provider]\ninterval = \"1s\"\n";
        let locator = Locator::new(text);
        assert_eq!(locator.line_of("store.url"), Some(2));
        assert_eq!(locator.line_of("upstreams[1].provider.interval"), Some(10));
        assert_eq!(locator.line_of("upstreams[1].id"), Some(8));
        // A key that is not written points at its nearest written parent.
        assert_eq!(locator.line_of("upstreams[1].provider.timeout"), Some(9));
        assert_eq!(locator.line_of("checker.timeout"), None);
    }
}
