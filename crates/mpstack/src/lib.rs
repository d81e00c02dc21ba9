//! The library side of the `mpstack` command: the parts that parse what the network
//! sends it (so fuzz targets and tests can reach them). The command itself is
//! `src/main.rs`.

pub mod host;
pub mod http_request;
