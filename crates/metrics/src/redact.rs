//! Leaving series out of a rendered exposition by label name: what a `/metrics` endpoint
//! shows a scraper that may not see every tenant's series (the client API drops every
//! series with a `client` label for a scrape without its metrics token).
//!
//! It works on the rendered text, so it needs no second path through the registry: a
//! sample line whose label set names the label is dropped, and a family's `# HELP` and
//! `# TYPE` lines go with it when none of its samples is left.

/// `text` without the samples that carry a label named `label`.
pub fn without_label(text: &str, label: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // The comment lines of the family being read, written only once one of its samples is.
    let mut pending = String::new();
    let mut in_samples = false;
    for line in text.lines() {
        if line.starts_with('#') {
            if in_samples {
                pending.clear();
                in_samples = false;
            }
            pending.push_str(line);
            pending.push('\n');
            continue;
        }
        in_samples = true;
        if line.is_empty() || has_label(line, label) {
            continue;
        }
        out.push_str(&pending);
        pending.clear();
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Whether the sample line's label set has a label named `label`. Label values are read
/// with their escapes (`\\`, `\"`, `\n`), so a value cannot fake a label name.
fn has_label(line: &str, label: &str) -> bool {
    let Some(open) = line.find(['{', ' ']) else {
        return false;
    };
    if !line[open..].starts_with('{') {
        return false;
    }
    let mut rest = &line[open + 1..];
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        if rest.starts_with('}') || rest.is_empty() {
            return false;
        }
        let Some(eq) = rest.find('=') else {
            return false;
        };
        if rest[..eq].trim() == label {
            return true;
        }
        let Some(value) = rest[eq + 1..].trim_start().strip_prefix('"') else {
            return false;
        };
        let mut chars = value.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(end) = end else {
            return false;
        };
        rest = &value[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_the_series_with_the_label_and_the_families_left_empty() {
        let text = "\
# HELP usage_total Usage by client.
# TYPE usage_total counter
usage_total{client=\"acme\",upstream=\"u\"} 3
usage_total{upstream=\"u\",client=\"globex\"} 4
# HELP mixed_total Some with, some without.
# TYPE mixed_total counter
mixed_total{client=\"acme\"} 1
mixed_total{route=\"/x\"} 2
# HELP plain Plain.
# TYPE plain gauge
plain 7
tricky{route=\"a\\\",client=\\\"b\"} 1
";
        let kept = without_label(text, "client");
        assert!(!kept.contains("acme") && !kept.contains("globex"), "{kept}");
        assert!(
            !kept.contains("usage_total"),
            "an emptied family goes: {kept}"
        );
        assert!(kept.contains("# TYPE mixed_total counter\nmixed_total{route=\"/x\"} 2\n"));
        assert!(kept.contains("# TYPE plain gauge\nplain 7\n"));
        assert!(
            kept.contains("tricky{route="),
            "a label value is not a label name: {kept}"
        );
        assert_eq!(without_label(text, "nothing"), text);
    }
}
