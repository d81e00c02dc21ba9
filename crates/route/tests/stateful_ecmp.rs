//! Stateful ECMP, at the level of the route crate: a next hop joins a group while
//! 10,000 flows are established. With the flow table, not one existing flow moves;
//! without it, exactly the flows of the buckets the new member took move, all to it,
//! about a fifth of them. (The sim scenario `ecmp_keeps_flows_when_nexthop_added`
//! shows the same through whole stacks.)

use route::{flow_hash4, EcmpGroup, FlowKey, FlowMode, FlowTable, FlowTableConfig};

const SEED: u64 = 0x0123_4567_89ab_cdef;

fn flows() -> Vec<(FlowKey, u32)> {
    (0..10_000u32)
        .map(|i| {
            let (src, dst) = (0xc612_0000 | i, 0xcb00_7100 | (i % 251));
            let (sport, dport) = (1024 + (i % 50_000) as u16, 443);
            let key = FlowKey::v4(src, dst, 6, sport, dport);
            (key, flow_hash4(src, dst, 6, sport, dport, SEED))
        })
        .collect()
}

#[test]
fn ecmp_keeps_flows_when_nexthop_added() {
    let mut group = EcmpGroup::with_nexthops(EcmpGroup::DEFAULT_BUCKETS, &[1, 2, 3, 4]).unwrap();
    let mut table: FlowTable<(u32, u32)> = FlowTable::new(FlowTableConfig {
        mode: FlowMode::FourTuple,
        // A set-associative table loses a flow when more than eight flows draw one
        // set: sized at six times the flows, none does here.
        capacity: 1 << 16,
        seed: SEED,
        ..FlowTableConfig::default()
    });
    let generation = 1;
    let flows = flows();
    let before: Vec<u32> = flows
        .iter()
        .map(|&(key, hash)| {
            table
                .lookup_or_insert_with(
                    &key,
                    0,
                    |_| true,
                    || group.select(hash).map(|nh| (nh, generation)),
                )
                .unwrap()
                .0
        })
        .collect();

    assert_eq!(table.stats().evictions, 0);
    group.add_member(5, 1).unwrap();

    // Without the flow table: only the flows of the moved buckets move, all to 5.
    let moved: Vec<(u32, u32)> = flows
        .iter()
        .zip(&before)
        .map(|(&(_, hash), &old)| (old, group.select(hash).unwrap()))
        .filter(|(old, new)| old != new)
        .collect();
    assert!(moved.iter().all(|&(_, new)| new == 5));
    assert!((1600..2400).contains(&moved.len()), "{}", moved.len());

    // With it: every established flow keeps its next hop (each entry still valid: its
    // next hop has not changed, only the group has).
    let now = 1_000_000_000;
    for (&(key, hash), &old) in flows.iter().zip(&before) {
        let nh = table
            .lookup_or_insert_with(
                &key,
                now,
                |&(_, g)| g == generation,
                || group.select(hash).map(|nh| (nh, generation)),
            )
            .unwrap()
            .0;
        assert_eq!(nh, old);
    }
    assert_eq!(table.stats().hits, flows.len() as u64);

    // A new flow is spread over all five.
    let k = FlowKey::v4(1, 2, 17, 3, 4);
    let h = flow_hash4(1, 2, 17, 3, 4, SEED);
    let v = table.lookup_or_insert_with(&k, now, |_| true, || group.select(h).map(|nh| (nh, 1)));
    assert_eq!(v.map(|v| v.0), group.select(h));

    // Removing a member: its flows must move (the flow table's generation check is
    // how they learn: the withdrawn next hop's generation changed), no other does.
    group.remove_member(2);
    let withdrawn = |nh: u32| nh == 2;
    let mut moved = 0;
    for (&(key, hash), &old) in flows.iter().zip(&before) {
        let nh = table
            .lookup_or_insert_with(
                &key,
                now,
                |&(nh, _)| !withdrawn(nh),
                || group.select(hash).map(|nh| (nh, generation)),
            )
            .unwrap()
            .0;
        if old == 2 {
            assert_ne!(nh, 2);
            moved += 1;
        } else {
            assert_eq!(nh, old);
        }
    }
    assert_eq!(table.stats().stale, moved);
}
