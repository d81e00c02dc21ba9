//! Property tests: the radix tree against a linear scan (the definition of longest
//! prefix match), and every fast structure against the radix tree, on random tables
//! with overlapping prefixes of every length, for random keys and for keys inside the
//! table's prefixes.

use crate::{Addr, Dir248, Lookup, Poptrie, Prefix, Prefix4, Prefix6, Radix};
use proptest::prelude::*;
use std::collections::HashMap;

/// The definition: of the prefixes holding `addr`, the longest; of equal ones, the
/// last listed.
fn linear<A: Addr>(routes: &[(Prefix<A>, u32)], addr: A) -> Option<u32> {
    let mut best: Option<(u8, u32)> = None;
    for &(p, nh) in routes {
        let p = Prefix::new(p.addr, p.len);
        if p.contains(addr) && best.is_none_or(|(l, _)| p.len >= l) {
            best = Some((p.len, nh));
        }
    }
    best.map(|(_, nh)| nh)
}

/// Prefixes of every length 0-32; half of them drawn near 10.0.0.0 so that they
/// overlap and nest, as in a real table.
fn prefix4() -> impl Strategy<Value = Prefix4> {
    prop_oneof![
        (any::<u32>(), 0u8..=32).prop_map(|(a, l)| Prefix4::new(a, l)),
        (any::<u16>(), 8u8..=32).prop_map(|(a, l)| Prefix4::new(0x0a00_0000 | a as u32, l)),
        (any::<u8>(), 20u8..=32).prop_map(|(a, l)| Prefix4::new(0x0a00_0000 | a as u32, l)),
        Just(Prefix4::new(0, 0)),
    ]
}

fn table4(max: usize) -> impl Strategy<Value = Vec<(Prefix4, u32)>> {
    prop::collection::vec((prefix4(), 0u32..1000), 0..max)
}

/// Random keys, keys near 10.0.0.0, and a key inside each route's prefix.
fn keys4(routes: &[(Prefix4, u32)], random: &[u32]) -> Vec<u32> {
    let mut keys: Vec<u32> = random.to_vec();
    keys.extend(random.iter().map(|k| 0x0a00_0000 | (k & 0xffff)));
    for (i, (p, _)) in routes.iter().enumerate() {
        let host = random.get(i).copied().unwrap_or(i as u32);
        let hostmask = !u32::MAX.masked(p.len);
        keys.extend([p.addr, p.addr | (host & hostmask), p.addr | hostmask]);
    }
    keys
}

fn agrees<L: Lookup<Addr = u32>>(routes: &[(Prefix4, u32)], random: &[u32]) {
    let radix = Radix::build(routes);
    let fast = L::build(routes);
    for k in keys4(routes, random) {
        assert_eq!(fast.lookup(k), radix.lookup(k), "key {k:#010x}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn radix_is_longest_prefix_match_v4(
        routes in table4(200),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        let r = Radix::build(&routes);
        for k in keys4(&routes, &random) {
            prop_assert_eq!(r.lookup(k), linear(&routes, k));
        }
    }

    #[test]
    fn radix_is_longest_prefix_match_v6(
        routes in prop::collection::vec(
            (any::<u128>(), 0u8..=128, any::<u16>(), 0u32..1000), 0..100),
        random in prop::collection::vec(any::<u128>(), 64),
    ) {
        // Half the prefixes under 2001:db8::/32 so that they nest.
        let routes: Vec<(Prefix6, u32)> = routes
            .into_iter()
            .map(|(a, l, near, nh)| {
                let a = if near & 1 == 0 { (0x2001_0db8u128 << 96) | (a >> 64) } else { a };
                (Prefix6::new(a, l), nh)
            })
            .collect();
        let r = Radix::build(&routes);
        let mut keys = random.clone();
        keys.extend(routes.iter().map(|(p, _)| p.addr));
        keys.extend(random.iter().map(|k| (0x2001_0db8u128 << 96) | (k >> 64)));
        for k in keys {
            prop_assert_eq!(r.lookup(k), linear(&routes, k));
        }
    }

    #[test]
    fn radix_insert_delete_matches_a_map(
        ops in prop::collection::vec((prefix4(), 0u32..50, any::<bool>()), 0..300),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        let mut r = Radix::new();
        let mut model: HashMap<Prefix4, u32> = HashMap::new();
        for &(p, nh, add) in &ops {
            if add {
                prop_assert_eq!(r.insert(p, nh), model.insert(p, nh));
            } else {
                prop_assert_eq!(r.delete(p), model.remove(&p));
            }
        }
        prop_assert_eq!(r.len(), model.len());
        let mut routes: Vec<(Prefix4, u32)> = model.into_iter().collect();
        routes.sort();
        prop_assert_eq!(r.routes(), routes.clone());
        for k in keys4(&routes, &random) {
            prop_assert_eq!(r.lookup(k), linear(&routes, k));
        }
    }

    #[test]
    fn dir248_agrees_with_radix(
        routes in table4(200),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        agrees::<Dir248>(&routes, &random);
    }

    #[test]
    fn poptrie_agrees_with_radix(
        routes in table4(300),
        random in prop::collection::vec(any::<u32>(), 64),
    ) {
        agrees::<Poptrie>(&routes, &random);
    }
}

#[test]
fn every_structure_agrees_on_all_lengths_under_one_address() {
    // /0 to /32 all nested at one address, and their neighbours: every branch of
    // every level of Poptrie and of DIR-24-8.
    let a = 0xc0a8_01ffu32;
    let routes: Vec<(Prefix4, u32)> = (0..=32).map(|l| (Prefix4::new(a, l), l as u32)).collect();
    let random: Vec<u32> = (0..=32)
        .map(|i| a ^ (1u64 << i).wrapping_sub(1) as u32)
        .collect();
    agrees::<Dir248>(&routes, &random);
    agrees::<Poptrie>(&routes, &random);
    let p = Poptrie::build(&routes);
    for l in 0..32 {
        // The address with bit l flipped leaves every prefix longer than l.
        assert_eq!(p.lookup(a ^ (1 << (31 - l))), Some(l as u32));
    }
}
