//! Arbitrary bytes as an IPv4 header's options (up to the 40 a header can hold)
//! into `wire::ipv4_options_check`, the walk `ip_input` makes: no panic; a refusal
//! points at an octet inside the options (or just past them, for a missing length
//! octet); what it accepts can be walked option by option within the bytes, and
//! the source route it names is there.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::ipv4opt::{IPOPT_EOL, IPOPT_LSRR, IPOPT_NOP, IPOPT_RR, IPOPT_SSRR};

fuzz_target!(|data: &[u8]| {
    let opts = &data[..data.len().min(40)];
    match wire::ipv4_options_check(opts) {
        Err(e) => assert!(e.offset <= opts.len(), "{e:?} past {}", opts.len()),
        Ok(o) => {
            // Every option before EOL has a length of 2 or more that fits.
            let mut at = 0;
            while at < opts.len() && opts[at] != IPOPT_EOL {
                if opts[at] == IPOPT_NOP {
                    at += 1;
                    continue;
                }
                let len = usize::from(opts[at + 1]);
                assert!(len >= 2 && at + len <= opts.len(), "accepted {opts:?}");
                at += len;
            }
            if let Some(at) = o.record_route {
                assert_eq!(opts[at], IPOPT_RR);
            }
            if let Some((ty, at)) = o.source_route {
                assert!(ty == IPOPT_LSRR || ty == IPOPT_SSRR);
                assert_eq!(opts[at], ty);
            }
        }
    }
});
