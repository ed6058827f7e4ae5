//! Aligned plain-text tables for the human-readable reports.

/// Renders `rows` under `headers`, each column as wide as its widest cell. Columns listed in
/// `right_aligned` (numbers) are right-aligned so digits line up.
pub(crate) fn render(headers: &[&str], rows: &[Vec<String>], right_aligned: &[usize]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut push_row = |cells: &mut dyn Iterator<Item = &str>| {
        let mut line = String::from(" ");
        for (column, cell) in cells.enumerate() {
            let width = widths[column];
            if right_aligned.contains(&column) {
                line.push_str(&format!(" {cell:>width$}"));
            } else {
                line.push_str(&format!(" {cell:<width$}"));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    };
    push_row(&mut headers.iter().copied());
    for row in rows {
        push_row(&mut row.iter().map(String::as_str));
    }
    out
}

/// One `label : value` line with the label padded to `width`.
pub(crate) fn field(out: &mut String, width: usize, label: &str, value: impl std::fmt::Display) {
    out.push_str(&format!("{label:<width$} : {value}\n"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns() {
        let text = render(
            &["NAME", "N"],
            &[
                vec!["a".into(), "100".into()],
                vec!["long-name".into(), "7".into()],
            ],
            &[1],
        );
        assert_eq!(text, "  NAME        N\n  a         100\n  long-name   7\n");
    }
}
