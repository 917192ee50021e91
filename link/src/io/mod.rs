//! Everything that touches the OS: TUN devices, network namespaces, and the
//! event loop (the GSO splitting and merging it applies to the bytes it
//! reads and writes are pure, in `gso`).

pub mod event_loop;
pub mod tun;

use std::fmt;

/// A runtime failure that names what was being attempted
/// ("ioctl TUNSETIFF tbA: Operation not permitted").
#[derive(Debug)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// `what: <strerror>` for a failed call (`e`: a `std::io::Error` or a
/// rustix `Errno`).
pub fn os_error(what: impl fmt::Display, e: impl Into<std::io::Error>) -> Error {
    Error(format!("{what}: {}", e.into()))
}
