//! The search space (kopt-space's language) and a space file read from disk.

use std::path::Path;

pub use kopt_space::{
    check_value, parse_assignment, parse_param, parse_space_text, parse_values, Expr, Param, Space,
    SpaceError, Value, MAX_VALUES,
};

use crate::error::{Error, Result};

/// A space file (see [`parse_space_text`]): its parameters and constraints.
pub fn parse_file(path: &Path) -> Result<(Vec<Param>, Vec<String>)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Input(format!("{}: cannot read: {e}", path.display())))?;
    parse_space_text(&text).map_err(|e| Error::Input(format!("{}: {e}", path.display())))
}
