//! Errors in what the user gave us; the binary maps them to one line and exit code 3.

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{file}:{line}: {problem}")]
    BadLine { file: String, line: usize, problem: String },
    #[error("{file}: {problem}")]
    BadFile { file: String, problem: String },
    #[error("{0}")]
    BadArgument(String),
}
