//! dualbench: the ANMA dual-stack web benchmark (seed 004) and an http_load-style
//! open-loop HTTP stress client, over one minimal HTTP/1.1 fetch engine.
#![forbid(unsafe_code)]

pub mod addresses;
pub mod anma;
pub mod duration;
pub mod error;
pub mod fetch;
pub mod http;
pub mod limits;
pub mod load;
pub mod report;
pub mod stats;
