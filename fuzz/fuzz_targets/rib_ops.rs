//! Arbitrary sequences of routing-table changes (add, multipath add, delete of a
//! route or one path, change, prefix text parsing) must never panic, and after each
//! compilation every FIB lookup must agree with the control plane's own longest
//! match (`Rib::get`), whichever algorithm compiled it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use route::{FibAlgo, IpPrefix, NhKind, Rib, RouteSpec, RtBus};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

fn prefix(b: &[u8]) -> IpPrefix {
    if b[0] & 1 == 0 {
        let a = Ipv4Addr::new(198, 18 + (b[1] & 1), b[2], b[3]);
        IpPrefix::new(a.into(), b[4] % 33)
    } else {
        let a = Ipv6Addr::new(0x2001, 2, u16::from(b[1]), u16::from(b[2]), 0, 0, 0, u16::from(b[3]));
        IpPrefix::new(a.into(), b[4] % 129)
    }
}

fn gw(v6: bool, n: u8) -> IpAddr {
    if v6 {
        Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, u16::from(n % 8)).into()
    } else {
        Ipv4Addr::new(198, 18, 0, n % 8).into()
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = s.parse::<IpPrefix>();
    }
    // Poptrie one run in four (its 1 MiB direct table makes a compilation slow next
    // to the radix tree's); DIR-24-8's 64 MiB not at all (property tests cover it).
    let algo = match data.first().map(|b| b % 4) {
        Some(3) => FibAlgo::Poptrie,
        _ => FibAlgo::Radix,
    };
    let mut rib = Rib::new(Arc::new(RtBus::new()), algo, 64);
    let _sub = rib.bus().subscribe(4);
    for op in data.chunks_exact(6) {
        let p = prefix(op);
        let v6 = p.is_ipv6();
        let _ = match op[5] % 6 {
            0 | 1 => rib.add(RouteSpec::via(p, gw(v6, op[3]), u32::from(op[1] % 3))),
            2 => rib.delete(p, None),
            3 => rib.delete(p, Some(gw(v6, op[3]))),
            4 => rib.change(RouteSpec::via(p, gw(v6, op[2]), 0)),
            _ => rib.add(RouteSpec::discard(p, NhKind::Reject)),
        };
    }
    let fib = rib.compile();
    for op in data.chunks_exact(6) {
        let a = prefix(op).addr();
        let want = rib.get(a).map(|r| r.paths.iter().map(|p| p.nexthop).collect::<Vec<_>>());
        let got = match a {
            IpAddr::V4(x) => fib.lookup4(x, || u32::from(op[5])).map(|n| n.index),
            IpAddr::V6(x) => fib.lookup6(x, || u32::from(op[5])).map(|n| n.index),
        };
        match (want, got) {
            (None, None) => {}
            (Some(paths), Some(nh)) => assert!(paths.contains(&nh), "{a}: {nh} not in {paths:?}"),
            (w, g) => panic!("{a}: rib {w:?}, fib {g:?}"),
        }
    }
});
