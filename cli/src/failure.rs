//! The one error of the `zermelo` command: what to say on stderr and the exit code.

use std::fmt;

/// A failure that ends a command: a message and the process's exit code (2 for bad input or a
/// damaged table, 1 for a check that failed, as each command's `--help` says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    /// A failure with exit code `code`.
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// Bad input (exit 2).
    pub fn input(message: impl Into<String>) -> Failure {
        Failure::new(2, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}
