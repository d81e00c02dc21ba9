//! The evaluator allocates nothing: a counting global allocator watches a flood of
//! packets through a ruleset that uses every kind of operand (address lists, port
//! ranges, each table type, or-blocks, call/return, tags, states already made),
//! counted into a worker's own counters and into shared ones.
//!
//! No test harness (`harness = false`): libtest's own threads may allocate while the
//! count runs (its main thread blocking on the result channel does), which made the
//! count flaky under load; here the process has one thread.

use fw::{Counters, Decision, Env, IfName, IfRef, PacketInfo, Ruleset, SharedCounters, Verdict};
use std::net::IpAddr;

#[global_allocator]
static A: dev::alloc_count::CountingAlloc = dev::alloc_count::CountingAlloc;

struct Host;

impl Env for Host {
    fn is_local(&self, a: IpAddr) -> bool {
        a == IpAddr::from([10, 0, 0, 1])
    }
    fn verrevpath(&self, _: IpAddr, _: u32) -> bool {
        true
    }
    fn antispoof(&self, _: IpAddr, _: u32) -> bool {
        true
    }
}

const RULES: &str = "
table big create type addr
table ifs create type iface
table ifs add em0 3
table ports create type number
table ports add 53 4
table fl create type flow:src-ip,proto,dst-port
table fl add 192.0.2.1,17,53 5
add 100 check-state ip from any to any
add 200 call 1000 ip from any to any
add 300 skipto tablearg ip from table(big) to any
add 400 pipe tablearg udp from any to any lookup dst-port ports
add 500 allow tcp from any to me 22 setup keep-state
add 600 queue tablearg ip from any to any flow table(fl) recv table(ifs)
add 350 deny ip from { 198.51.100.0/24 or 203.0.113.0/24 } to any 1-1023,8080
add 1000 count ip from any to any { via em1 or recv em0 } tag 7
add 1100 count ip from any to any tagged 7 untag 7
add 1200 return ip from any to any
add 60000 allow ip from any to any iplen 0-1500 dscp 0-63 not frag
";

fn main() {
    eval_never_allocates();
    println!("eval_never_allocates: ok");
}

fn eval_never_allocates() {
    let mut rs = Ruleset::default();
    rs.load(RULES).unwrap();
    for i in 0..2000u32 {
        let a = std::net::Ipv4Addr::from(0xac10_0000 | (i << 4));
        rs.table_add("big", &format!("{a}/28"), 60000).unwrap();
    }
    let prog = rs.program().unwrap();
    let states = rs.states().clone();
    let mut ctr = Counters::new();
    // A worker's counters as `show` reads them from another thread.
    let shared = SharedCounters::new();
    let mut rng = 7;
    let packets: Vec<PacketInfo> = (0..64u32)
        .map(|i| {
            let src = match i % 4 {
                0 => IpAddr::from([192, 0, 2, 1]),
                1 => IpAddr::from(std::net::Ipv4Addr::from(0xac10_0000u32 | (i << 4))),
                2 => IpAddr::from([198, 51, 100, i as u8]),
                _ => IpAddr::from([192, 0, 2, 100]),
            };
            let proto = if i % 3 == 0 { 6 } else { 17 };
            let mut p = PacketInfo::new(src, IpAddr::from([10, 0, 0, 1]), proto);
            p.sport = 1000 + i as u16;
            p.dport = if proto == 6 { 22 } else { 53 };
            p.tcp_flags = 0x02;
            p.len = 100;
            p.ip_len = 100;
            p.rcvif = Some(IfRef {
                index: 1,
                name: IfName::new("em0").unwrap(),
            });
            p
        })
        .collect();
    // The first pass moves the counters to the program and makes the TCP states.
    for p in &packets {
        let _ = prog.eval(&mut p.clone(), &Host, &states, &mut ctr, 1, &mut rng);
        let _ = prog.eval(&mut p.clone(), &Host, &states, &shared, 1, &mut rng);
    }
    let mut seen = [0u32; 4];
    // eval_batch too: check-state comes first, so it looks up each vector's states
    // before the walks, and it keeps table(big)'s lookups for a vector in an array.
    let mut batch = packets.clone();
    let mut out = vec![
        Verdict {
            decision: Decision::Deny,
            rule: 0,
            log: false
        };
        batch.len()
    ];
    dev::alloc_count::start();
    for round in 0..50 {
        prog.eval_batch(
            &mut batch, &mut out, &Host, &states, &mut ctr, round, &mut rng,
        );
        prog.eval_batch(
            &mut batch, &mut out, &Host, &states, &shared, round, &mut rng,
        );
    }
    for round in 0..500 {
        for p in &packets {
            let mut p = *p;
            let v = prog.eval(&mut p, &Host, &states, &mut ctr, round, &mut rng);
            let _ = prog.eval(&mut p.clone(), &Host, &states, &shared, round, &mut rng);
            seen[match v.decision {
                Decision::Allow | Decision::Fwd(_) => 0,
                Decision::Pipe(_) | Decision::Queue(_) => 1,
                Decision::Deny => 2,
                Decision::Reject(_) => 3,
            }] += 1;
        }
    }
    let (allocs, bytes) = dev::alloc_count::stop();
    assert_eq!((allocs, bytes), (0, 0));
    assert!(seen[0] > 0 && seen[1] > 0 && seen[2] > 0, "{seen:?}");
}
