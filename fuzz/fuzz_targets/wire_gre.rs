//! Arbitrary bytes as a GRE header and payload: no getter of a checked view, no
//! `parse`, no checksum and no `emit` of a parsed `Repr` may panic, and what is
//! emitted parses back to the same `Repr`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::*;

fuzz_target!(|data: &[u8]| {
    let Ok(p) = GrePacket::new_checked(data) else {
        return;
    };
    let _ = (p.checksum_present(), p.key_present(), p.seq_present());
    let _ = (p.version(), p.protocol(), p.header_len());
    let _ = (p.checksum(), p.key(), p.seq(), p.payload().len());
    let _ = p.verify_checksum();
    if let Ok(repr) = GreRepr::parse(&p) {
        let _ = repr.to_string();
        let mut out = vec![0u8; repr.buffer_len() + p.payload().len()];
        out[repr.buffer_len()..].copy_from_slice(p.payload());
        let mut q = GrePacket::new_unchecked(&mut out[..]);
        repr.emit(&mut q);
        q.fill_checksum();
        let q = GrePacket::new_checked(&out[..]).unwrap();
        assert!(q.verify_checksum());
        assert_eq!(GreRepr::parse(&q), Ok(repr));
        assert_eq!(q.payload(), p.payload());
    }
});
