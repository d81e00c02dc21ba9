//! The library side of the `mpstack` command: the parts that parse what the network
//! or an operator sends it (so fuzz targets and tests can reach them): the HTTP
//! service's request parser, the control socket and its commands, the tunables; and
//! the services of `mpstack run --serve`, so that tests can run them in process.
//! The command itself is `src/main.rs`.
#![forbid(unsafe_code)]

pub mod control;
pub mod host;
pub mod http_request;
pub mod services;
pub mod sysctl;
