//! leanweb: the lean ("bare PC") web server — a TAP device, leantcp and a small HTTP/1.1
//! static-file server, with one receive path for IPv4 and IPv6.
#![deny(unsafe_code)]
pub mod app;
#[cfg(feature = "cli")]
pub mod config;
pub mod gso;
pub mod http;
#[cfg(feature = "cli")]
pub mod knobs;
#[cfg(feature = "cli")]
pub mod link_state;
pub mod log;
pub mod neighbors;
pub mod stack;
#[cfg(feature = "cli")]
#[allow(unsafe_code)] // four libc calls (if_nametoindex, the TUNSETIFF and TUNSETVNETHDRSZ ioctls, ppoll), nothing else
pub mod tap;
