//! The HTTP application the stack calls: what a request path names. The stack (sans-IO)
//! parses requests and moves bytes; only an `Application` touches files.
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;

use crate::http::{self, HttpError};

/// A resource found for a request: its size and type, and a reader for its body.
pub struct Resource<B> {
    pub body: B,
    pub len: u64,
    pub content_type: &'static str,
}

pub trait Application {
    /// The body of a resource, read in chunks as the connection's send buffer takes them.
    type Body: Read;
    /// The resource at a decoded request path (crates/leanweb/src/http.rs: `Request::path`).
    fn open(&mut self, path: &str) -> Result<Resource<Self::Body>, HttpError>;
}

/// Static files under one canonical root; nothing outside it (crates/leanweb/src/http.rs: `resolve`).
pub struct StaticFiles {
    root: PathBuf,
}

impl StaticFiles {
    /// `root` must be canonical (crates/leanweb/src/config.rs makes it so).
    pub fn new(root: PathBuf) -> Self {
        StaticFiles { root }
    }
}

impl Application for StaticFiles {
    type Body = File;

    fn open(&mut self, path: &str) -> Result<Resource<File>, HttpError> {
        let path = http::resolve(&self.root, path)?;
        let file = File::open(&path).map_err(|_| HttpError::NotFound)?;
        let len = file.metadata().map_err(|_| HttpError::NotFound)?.len();
        Ok(Resource { body: file, len, content_type: http::content_type(&path) })
    }
}
