//! Arbitrary bytes as an HTTP request head into the HTTP service's parser, and the
//! path it yields into the resolver: no panic, and a resolved file never leaves the
//! served directory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mpstack::http_request::{parse, resolve};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let head = String::from_utf8_lossy(data);
    if let Ok(req) = parse(&head) {
        let root = Path::new("/nonexistent-mpstack-fuzz-root");
        if let Some(p) = resolve(root, &req.path) {
            assert!(p.starts_with(root), "{} escaped to {}", req.path, p.display());
        }
    }
});
