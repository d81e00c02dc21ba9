//! Arbitrary bytes as a request's path into the HTTP service's resolver (hyper
//! parses the request head itself): no panic, and a resolved file never leaves the
//! served directory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mpstack::http_request::resolve;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = String::from_utf8_lossy(data);
    let root = Path::new("/nonexistent-mpstack-fuzz-root");
    if let Some(p) = resolve(root, &path) {
        assert!(p.starts_with(root), "{path} escaped to {}", p.display());
    }
});
