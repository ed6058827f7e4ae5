//! Tab-separated layouts written once: a layout lists its fields in stored order, each with
//! the Lua constant that names it. The Rust codec indexes fields by the generated `usize`
//! constants, and the library's Lua constants are generated from the same list
//! (`scripts.rs` puts [`Layout::lua_prelude`] in front of the helpers), so the two sides
//! cannot disagree on a position.

/// One layout as the Lua side sees it.
#[derive(Debug)]
pub(crate) struct Layout {
    /// The Lua constant holding the field count.
    pub(crate) count_name: &'static str,
    /// The Lua constant of each field, in stored order (Lua numbers them from 1).
    pub(crate) lua_names: &'static [&'static str],
}

impl Layout {
    /// `local A, B = 1, 2` and `local COUNT = 2`: library-wide constants every helper and
    /// entry point reads as upvalues.
    pub(crate) fn lua_prelude(&self) -> String {
        let positions: Vec<String> = (1..=self.lua_names.len()).map(|n| n.to_string()).collect();
        format!(
            "local {} = {}\nlocal {} = {}\n",
            self.lua_names.join(", "),
            positions.join(", "),
            self.count_name,
            self.lua_names.len()
        )
    }
}

/// Declares a layout in the calling module: one private `usize` constant per field (its
/// 0-based position, in the order written), `FIELDS` (the count) and `LAYOUT` (the Lua
/// names). `count NAME;` names the Lua count constant.
macro_rules! tab_layout {
    (count $count:ident; $($rust:ident => $lua:ident),+ $(,)?) => {
        $crate::codec::layout::tab_layout!(@at 0usize; $($rust)+);
        /// How many fields the layout has.
        pub(crate) const FIELDS: usize = [$(stringify!($rust)),+].len();
        /// The same fields as the Lua library names them.
        pub(crate) const LAYOUT: $crate::codec::layout::Layout = $crate::codec::layout::Layout {
            count_name: stringify!($count),
            lua_names: &[$(stringify!($lua)),+],
        };
    };
    (@at $n:expr; $head:ident $($rest:ident)*) => {
        // Some fields are read only by the scripts.
        #[allow(dead_code)]
        const $head: usize = $n;
        $crate::codec::layout::tab_layout!(@at $n + 1usize; $($rest)*);
    };
    (@at $n:expr;) => {};
}

pub(crate) use tab_layout;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prelude_numbers_fields_from_one() {
        let layout = Layout {
            count_name: "N",
            lua_names: &["A", "B", "C"],
        };
        assert_eq!(
            layout.lua_prelude(),
            "local A, B, C = 1, 2, 3\nlocal N = 3\n"
        );
    }
}
