//! The flow table allocates nothing after construction: a counting global allocator
//! watches a flood of lookups, inserts (with evictions), stale entries and sweeps.
//!
//! No test harness (`harness = false`): libtest's main thread allocates its own
//! bookkeeping while a test runs, and under load that landed inside the count
//! (4 allocations in about half the runs with two busy CPUs); here the process
//! runs only the code under test.

use route::{FlowKey, FlowMode, FlowTable, FlowTableConfig};

#[global_allocator]
static A: dev::alloc_count::CountingAlloc = dev::alloc_count::CountingAlloc;

fn the_flow_table_never_allocates_after_construction() {
    for mode in [FlowMode::Destination, FlowMode::FourTuple] {
        let mut t: FlowTable<(u32, u32)> = FlowTable::new(FlowTableConfig {
            mode,
            capacity: 4096,
            ..FlowTableConfig::default()
        });
        dev::alloc_count::start();
        for i in 0..200_000u32 {
            let now = i as u64 * 1_000_000;
            // Three packets in four from 1,500 recurring flows, one from a flood of
            // new ones; IPv4 and IPv6.
            let j = if i % 4 == 0 { i } else { i % 1500 };
            let k = if i % 2 == 0 {
                FlowKey::v4(j, 0xc000_0000 | j, 17, 5000, 53)
            } else {
                FlowKey::v6(j as u128, (1 << 127) | j as u128, 6, 1, 2)
            };
            let generation = i / 50_000;
            t.lookup_or_insert_with(&k, now, |&(_, g)| g == generation, || Some((i, generation)));
            if i % 1000 == 0 {
                t.expire_some(now, 64);
            }
        }
        t.expire(u64::MAX);
        let (allocs, bytes) = dev::alloc_count::stop();
        assert_eq!((allocs, bytes), (0, 0), "{mode:?}");
        let s = t.stats();
        assert!(
            s.hits > 0 && s.misses > 0 && s.stale > 0 && s.evictions > 0,
            "{s:?}"
        );
    }
}

fn main() {
    the_flow_table_never_allocates_after_construction();
    println!("the_flow_table_never_allocates_after_construction: ok");
}
