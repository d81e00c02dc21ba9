//! Arbitrary bytes as an FPM stream from a routing daemon (frames of netlink route
//! messages): cutting it into frames and parsing each may refuse but never panic,
//! and every route parsed encodes and parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use route::fpm::{encode_route, parse_frame, FpmMsg, FpmStream};

fuzz_target!(|data: &[u8]| {
    let mut s = FpmStream::new();
    // In two pieces, as a socket may hand it over.
    let cut = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    s.push(&data[..cut]);
    s.push(&data[cut..]);
    while let Some(f) = s.next_frame() {
        let Ok(f) = f else { break };
        let Ok(msgs) = parse_frame(f) else { continue };
        for m in msgs {
            let (add, r) = match m {
                FpmMsg::Add(r) => (true, r),
                FpmMsg::Delete(r) => (false, r),
                FpmMsg::Other(_) => continue,
            };
            if r.table > 255 || r.nexthops.iter().any(|h| h.weight > 256 || h.weight == 0) {
                continue;
            }
            // A next hop with neither gateway nor interface is not written back.
            if r.nexthops.len() == 1 && r.nexthops[0].gateway.is_none() && r.nexthops[0].oif == 0 {
                continue;
            }
            let again = encode_route(add, &r);
            let mut t = FpmStream::new();
            t.push(&again);
            let back = parse_frame(t.next_frame().unwrap().unwrap()).unwrap();
            let want = if add { FpmMsg::Add(r) } else { FpmMsg::Delete(r) };
            assert_eq!(back, [want]);
        }
    }
});
