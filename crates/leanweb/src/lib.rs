//! leanweb: the lean ("bare PC") web server — a TAP device, leantcp and a small HTTP/1.1
//! static-file server, with one receive path for IPv4 and IPv6.
#![deny(unsafe_code)]
#[cfg(feature = "cli")]
pub mod config;
pub mod http;
pub mod log;
pub mod neighbors;
pub mod stack;
#[cfg(feature = "cli")]
#[allow(unsafe_code)] // three libc calls (if_nametoindex, TUNSETIFF ioctl, poll), nothing else
pub mod tap;
