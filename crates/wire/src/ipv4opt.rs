//! IPv4 options (RFC 791 §3.1): the walk a receiver makes over the bytes between
//! the fixed header and the payload, as FreeBSD's `ip_dooptions`
//! (`sys/netinet/ip_options.c`) and Linux's `ip_options_compile` make it.
//!
//! [`ipv4_options_check`] validates every option's length, and the pointer of
//! those that carry one (Record Route, Timestamp, Loose and Strict Source Route),
//! and says which of them the header holds. A malformed option is reported with the
//! offset of its offending octet, for an ICMP Parameter Problem's pointer (RFC 792:
//! "the octet where an error was detected"). Unknown options are length-checked
//! and otherwise passed (RFC 1122 §3.2.1.8: a host MUST ignore an option it does
//! not know). Nothing here changes the header.
//!
//! No-panic contract: any byte slice may be passed; the walk never indexes past it.

/// End of option list (RFC 791).
pub const IPOPT_EOL: u8 = 0;
/// No operation.
pub const IPOPT_NOP: u8 = 1;
/// Record Route.
pub const IPOPT_RR: u8 = 7;
/// Internet Timestamp.
pub const IPOPT_TS: u8 = 68;
/// Loose Source and Record Route.
pub const IPOPT_LSRR: u8 = 131;
/// Strict Source and Record Route.
pub const IPOPT_SSRR: u8 = 137;

/// The smallest pointer of a route option (RFC 791: "the smallest legal value is 4").
const MINOFF: u8 = 4;
/// The smallest pointer of a timestamp option ("the smallest legal value is 5").
const TS_MINOFF: u8 = 5;

/// What the options of a well-formed header hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv4Options {
    /// A Loose or Strict Source Route option: its type and its offset within the
    /// options.
    pub source_route: Option<(u8, usize)>,
    /// A Record Route option: its offset within the options (the first, if
    /// several).
    pub record_route: Option<usize>,
    /// A Timestamp option.
    pub timestamp: bool,
}

/// A malformed option: `offset` is the offending octet's, within the options (add
/// the fixed header's 20 for the Parameter Problem pointer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4OptionError {
    pub offset: usize,
}

/// Walks the options `opts` (a header's bytes from 20 to its length): what they
/// hold, or the first malformed octet.
///
/// Each option other than EOL and NOP is a type, a length that counts both and
/// must fit in what is left of the header, and its data. Record Route and the
/// source routes: length at least 3, pointer at least 4, and while the option is
/// not full (pointer ≤ length) room for a whole address at the pointer.
/// Timestamp: length at least 4, pointer at least 5, and while not full room for
/// one entry of its flag's kind (4 bytes, or 8 with addresses); an unknown flag is
/// malformed. Two source routes in one header are malformed (RFC 1812 §5.2.4.1
/// allows one; Linux refuses the second).
pub fn ipv4_options_check(opts: &[u8]) -> Result<Ipv4Options, Ipv4OptionError> {
    let mut found = Ipv4Options::default();
    let bad = |offset| Err(Ipv4OptionError { offset });
    let mut at = 0;
    while let Some(&ty) = opts.get(at) {
        match ty {
            IPOPT_EOL => break,
            IPOPT_NOP => {
                at += 1;
                continue;
            }
            _ => {}
        }
        // RFC 791: a type-length-value option's length counts the type and length
        // octets; less than 2, or more than the header has left, is malformed.
        let Some(&len) = opts.get(at + 1) else {
            return bad(at + 1);
        };
        let len = usize::from(len);
        if len < 2 || len > opts.len() - at {
            return bad(at + 1);
        }
        let opt = &opts[at..at + len];
        match ty {
            IPOPT_RR | IPOPT_LSRR | IPOPT_SSRR => {
                if len < 3 {
                    return bad(at + 1);
                }
                let ptr = opt[2];
                if ptr < MINOFF {
                    return bad(at + 2);
                }
                // Not full: the next address goes at the pointer (1-origin).
                if usize::from(ptr) <= len && usize::from(ptr) + 3 > len {
                    return bad(at + 2);
                }
                if ty == IPOPT_RR {
                    found.record_route = found.record_route.or(Some(at));
                } else if found.source_route.is_some() {
                    return bad(at);
                } else {
                    found.source_route = Some((ty, at));
                }
            }
            IPOPT_TS => {
                if len < 4 {
                    return bad(at + 1);
                }
                let ptr = opt[2];
                if ptr < TS_MINOFF {
                    return bad(at + 2);
                }
                // The flag (low nibble of the fourth octet): 0 timestamps only,
                // 1 with each router's address, 3 at prespecified addresses.
                let entry = match opt[3] & 0x0f {
                    0 => 4,
                    1 | 3 => 8,
                    _ => return bad(at + 3),
                };
                if usize::from(ptr) <= len && usize::from(ptr) + entry - 1 > len {
                    return bad(at + 2);
                }
                found.timestamp = true;
            }
            _ => {}
        }
        at += len;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn err(at: usize) -> Result<Ipv4Options, Ipv4OptionError> {
        Err(Ipv4OptionError { offset: at })
    }

    #[test]
    fn empty_nop_and_eol_are_fine() {
        assert_eq!(ipv4_options_check(&[]), Ok(Ipv4Options::default()));
        assert_eq!(
            ipv4_options_check(&[1, 1, 1, 0]),
            Ok(Ipv4Options::default())
        );
        // Whatever follows EOL is padding.
        assert_eq!(
            ipv4_options_check(&[0, 7, 99, 0]),
            Ok(Ipv4Options::default())
        );
    }

    #[test]
    fn record_route_with_room_and_full() {
        // NOP, then RR with room for two addresses, pointer at the first.
        let rr = [1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0];
        let o = ipv4_options_check(&rr).unwrap();
        assert!(o.record_route == Some(1) && o.source_route.is_none());
        // Full: the pointer past the length.
        assert!(ipv4_options_check(&[7, 7, 8, 1, 2, 3, 4, 0]).is_ok());
    }

    #[test]
    fn record_route_claiming_more_than_the_header_points_at_its_length() {
        // 40 bytes claimed in 8: the length octet (offset 1, pointer 21) is wrong.
        assert_eq!(ipv4_options_check(&[7, 40, 4, 0, 0, 0, 0, 0]), err(1));
    }

    #[test]
    fn bad_lengths_and_pointers() {
        // Length below 2.
        assert_eq!(ipv4_options_check(&[0x94, 1, 0, 0]), err(1));
        assert_eq!(ipv4_options_check(&[0x94, 0, 0, 0]), err(1));
        // A type with no length octet after it.
        assert_eq!(ipv4_options_check(&[1, 1, 1, 0x94]), err(4));
        // RR too short for its pointer.
        assert_eq!(ipv4_options_check(&[7, 2, 1, 0]), err(1));
        // Pointer below 4.
        assert_eq!(ipv4_options_check(&[7, 7, 3, 0, 0, 0, 0, 0]), err(2));
        // Pointer inside the option but not room for a whole address.
        assert_eq!(ipv4_options_check(&[7, 7, 5, 0, 0, 0, 0, 0]), err(2));
        // Timestamp: pointer below 5, an unknown flag, no room for an entry.
        assert_eq!(ipv4_options_check(&[68, 8, 4, 0, 0, 0, 0, 0]), err(2));
        assert_eq!(ipv4_options_check(&[68, 8, 5, 2, 0, 0, 0, 0]), err(3));
        assert_eq!(ipv4_options_check(&[68, 8, 5, 1, 0, 0, 0, 0]), err(2));
        assert!(ipv4_options_check(&[68, 8, 5, 0, 0, 0, 0, 0]).is_ok());
        // LSRR with a pointer below 4, at offset 1 after a NOP.
        assert_eq!(ipv4_options_check(&[1, 131, 7, 0, 1, 2, 3, 4]), err(3));
    }

    #[test]
    fn source_routes_are_found_and_two_are_malformed() {
        let lsrr = [131, 7, 4, 198, 18, 2, 2, 0];
        assert_eq!(
            ipv4_options_check(&lsrr).unwrap().source_route,
            Some((IPOPT_LSRR, 0))
        );
        let ssrr = [1, 137, 7, 8, 198, 18, 2, 2];
        assert_eq!(
            ipv4_options_check(&ssrr).unwrap().source_route,
            Some((IPOPT_SSRR, 1))
        );
        let two = [131, 7, 4, 1, 2, 3, 4, 137, 7, 4, 1, 2, 3, 4, 0, 0];
        assert_eq!(ipv4_options_check(&two), err(7));
    }

    proptest! {
        #[test]
        fn any_bytes_are_walked_without_panic(opts in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Err(e) = ipv4_options_check(&opts) {
                prop_assert!(e.offset <= opts.len());
            }
        }
    }
}
