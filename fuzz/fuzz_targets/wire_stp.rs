//! Arbitrary bytes as a BPDU, with and without its LLC header: no getter of a checked view,
//! no `parse` and no `emit` of a parsed `Repr` may panic, and what is emitted parses back to
//! the same `Repr`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::stp::strip_llc;
use wire::*;

fn bpdu(data: &[u8]) {
    let Ok(bpdu) = StpBpdu::new_checked(data) else {
        return;
    };
    let _ = (bpdu.protocol_id(), bpdu.version(), bpdu.bpdu_type());
    let _ = (
        bpdu.header_len(),
        bpdu.flags().port_role(),
        bpdu.flags().to_string(),
    );
    let _ = (
        bpdu.root_id().to_string(),
        bpdu.root_path_cost(),
        bpdu.bridge_id(),
    );
    let _ = (bpdu.port_id(), bpdu.message_age(), bpdu.max_age());
    let _ = (bpdu.hello_time(), bpdu.forward_delay(), bpdu.version1_len());
    if let Ok(repr) = StpRepr::parse(&bpdu) {
        let _ = repr.to_string();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut StpBpdu::new_unchecked(&mut out[..]));
        let again = StpRepr::parse(&StpBpdu::new_checked(&out[..]).unwrap());
        assert_eq!(again, Ok(repr));
        // The fields a BPDU of this type carries come back byte for byte, but for the
        // version (not checked in configuration and TCN BPDUs, 2 or more in RST BPDUs) and
        // the version 1 length of an RST BPDU (not checked at all).
        let end = repr.buffer_len().min(35);
        assert_eq!(out[..2], data[..2]);
        assert_eq!(out[3..end], data[3..end]);
    }
}

fuzz_target!(|data: &[u8]| {
    bpdu(data);
    if let Ok(payload) = strip_llc(data) {
        bpdu(payload);
    }
});
