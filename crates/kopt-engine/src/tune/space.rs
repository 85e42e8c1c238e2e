//! The search space (kopt-space's language) and a space file read from disk.

use std::path::Path;

pub use kopt_space::{
    check_value, parse_assignment, parse_param, parse_space_text, parse_values, Expr, Param, Space,
    SpaceError, Value, MAX_VALUES,
};

use crate::error::{Error, Result};

/// A space file (see [`parse_space_text`]): its parameters and constraints.
pub fn parse_file(path: &Path) -> Result<(Vec<Param>, Vec<String>)> {
    // A space is a few lines of text: 16 MiB is far more than any.
    let bytes = kopt_store::confined::read_regular(path, 16 << 20)
        .map_err(|e| Error::Input(e.to_string()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::Input(format!("{}: not UTF-8 text", path.display())))?;
    parse_space_text(&text).map_err(|e| Error::Input(format!("{}: {e}", path.display())))
}
