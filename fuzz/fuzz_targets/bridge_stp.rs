//! Arbitrary BPDUs and clock steps into a bridge's spanning tree (four ports): no
//! panic, no BPDU storm (what one input or one tick sends is bounded by the ports),
//! whatever the BPDUs claim, the bridge's root is never worse than itself, and a tick
//! leaves no timer overdue.
#![no_main]

use libfuzzer_sys::fuzz_target;
use net::link::bridge::stp::{Stp, StpTimes, DEFAULT_PATH_COST, DEFAULT_PRIORITY};
use wire::{EthernetAddress, StpBpdu, StpRepr};

const PORTS: usize = 4;

fuzz_target!(|data: &[u8]| {
    let mac = EthernetAddress([0x02, 0, 0, 0, 0, 0x42]);
    let mut stp = Stp::new(mac, DEFAULT_PRIORITY, StpTimes::default(), 0);
    let mut out = Vec::new();
    for p in 0..PORTS {
        stp.add_port(DEFAULT_PATH_COST + p as u32);
        stp.enable_port(p, 0, &mut out);
    }
    let mut now = 0u64;
    // Records: a control byte (the port, or a clock step, or a link change), then for
    // a BPDU its length and bytes.
    let mut rest = data;
    while let [ctl, tail @ ..] = rest {
        rest = tail;
        out.clear();
        match ctl >> 6 {
            0 => {
                let Some((&len, tail)) = rest.split_first() else {
                    break;
                };
                let n = usize::from(len).min(tail.len());
                let (bytes, tail) = tail.split_at(n);
                rest = tail;
                if let Ok(v) = StpBpdu::new_checked(bytes) {
                    if let Ok(bpdu) = StpRepr::parse(&v) {
                        stp.input(usize::from(ctl & 3), &bpdu, now, &mut out);
                    }
                }
            }
            1 => {
                now += u64::from(ctl & 0x3f) * 250_000_000;
                stp.tick(now, &mut out);
                // Whatever was due has run.
                assert!(stp.next_deadline().is_none_or(|d| d > now));
            }
            2 => stp.disable_port(usize::from(ctl & 3), now, &mut out),
            _ => stp.enable_port(usize::from(ctl & 3), now, &mut out),
        }
        assert!(out.len() <= 2 * PORTS, "{} BPDUs at once", out.len());
        assert!(stp.root() <= stp.bridge_id());
    }
});
