//! Arbitrary bytes as an Ethernet frame, an 802.1Q tag and an ARP packet: no getter of a
//! checked view, no `parse` and no `emit` of a parsed `Repr` may panic, and what is emitted
//! parses back to the same `Repr`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::*;

fn arp(data: &[u8]) {
    let Ok(packet) = ArpPacket::new_checked(data) else {
        return;
    };
    let _ = (packet.hardware_type(), packet.protocol_type(), packet.operation());
    let _ = (packet.source_hardware_addr(), packet.source_protocol_addr());
    let _ = (packet.target_hardware_addr(), packet.target_protocol_addr());
    if let Ok(repr) = ArpRepr::parse(&packet) {
        let _ = repr.to_string();
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
        let again = ArpRepr::parse(&ArpPacket::new_checked(&out[..]).unwrap());
        assert_eq!(again, Ok(repr));
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = core::str::from_utf8(data) {
        if let Ok(addr) = s.parse::<EthernetAddress>() {
            assert_eq!(addr.to_string().parse::<EthernetAddress>(), Ok(addr));
        }
    }
    arp(data);
    let Ok(frame) = EthernetFrame::new_checked(data) else {
        return;
    };
    let _ = frame.to_string();
    let repr = EthernetRepr::parse(&frame).unwrap();
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
    assert_eq!(out, data[..14]);

    let mut payload = frame.payload();
    let mut ethertype = repr.ethertype;
    // Peel any number of tags (Q-in-Q and beyond): each loop consumes four bytes.
    while matches!(ethertype, EtherType::Vlan | EtherType::QinQ) {
        let Ok(tag) = VlanHeader::new_checked(payload) else {
            return;
        };
        let tag_repr = VlanRepr::parse(&tag).unwrap();
        let _ = (tag.tci(), tag.pcp(), tag.dei(), tag.vid());
        let mut out = [0u8; 4];
        tag_repr.emit(&mut VlanHeader::new_unchecked(&mut out[..]));
        assert_eq!(out, payload[..4]);
        ethertype = tag_repr.ethertype;
        payload = tag.payload();
    }
    if ethertype == EtherType::Arp {
        arp(payload);
    }
});
