//! Steady-state ping and UDP echo do no heap allocation per packet: a counting global
//! allocator watches 1,000 exchanges of each after a warm-up, for 1 and 2 workers;
//! the same for pings forwarded through a router (both ways through `ip_forward`,
//! the FIB and a next hop's L2 rewrite).
//!
//! No test harness (`harness = false`): libtest's main thread allocates its own
//! bookkeeping while a test runs, and under load that landed inside the count
//! (4 allocations in about half the runs with two busy CPUs); here the process
//! runs only the code under test.

use dev::mem::WireConfig;
use dev::Duration;
use sim::Sim;
use std::net::{Ipv4Addr, SocketAddrV4};

#[global_allocator]
static A: dev::alloc_count::CountingAlloc = dev::alloc_count::CountingAlloc;

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, n)
}

fn steady_state(workers: usize) -> (u64, u64) {
    let mut s = Sim::new(1);
    let hub = s.add_hub(WireConfig::default());
    let a = s.add_host("a", workers);
    let b = s.add_host("b", workers);
    s.connect(a, hub, "198.18.0.1/24");
    s.connect(b, hub, "198.18.0.2/24");
    let ping = s.host(a).ping_socket(0).unwrap();
    ping.set_nonblocking(true).unwrap();
    let server = s
        .host(b)
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7))
        .unwrap();
    server.set_nonblocking(true).unwrap();
    let client = s
        .host(a)
        .udp_bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
        .unwrap();
    client.set_nonblocking(true).unwrap();
    let to = SocketAddrV4::new(ip(2), 7);
    let mut buf = [0u8; 2048];
    let data = [0x5au8; 1000];

    let mut round = |s: &mut Sim, seq: u16| -> (u32, u32) {
        let (mut pings, mut echoes) = (0, 0);
        ping.send_echo(ip(2), seq, &data[..56]).unwrap();
        client.send_to(&data[..512], to).unwrap();
        s.run_for(Duration::from_micros(200));
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            server.send_to(&buf[..n], from).unwrap();
        }
        s.run_for(Duration::from_micros(200));
        while ping.recv_reply(&mut buf).is_ok() {
            pings += 1;
        }
        while client.recv_from(&mut buf).is_ok() {
            echoes += 1;
        }
        (pings, echoes)
    };
    for seq in 0..200 {
        round(&mut s, seq);
    }
    dev::alloc_count::start();
    let (mut p, mut e) = (0, 0);
    for seq in 200..1200 {
        let (a, b) = round(&mut s, seq);
        p += a;
        e += b;
    }
    let (allocs, _bytes) = dev::alloc_count::stop();
    assert_eq!(
        (p, e),
        (1000, 1000),
        "workers={workers}: every exchange completed"
    );
    (allocs, 2000)
}

fn steady_state_ping_and_udp_echo_do_not_allocate() {
    // One test function: the counter is global, so the cases must not run in parallel.
    for workers in [1, 2] {
        let (allocs, exchanges) = steady_state(workers);
        assert_eq!(
            allocs, 0,
            "workers={workers}: {allocs} heap allocations over {exchanges} exchanges"
        );
        let allocs = routed(workers, false);
        assert_eq!(
            allocs, 0,
            "workers={workers}: {allocs} heap allocations over 1000 routed echoes"
        );
        let allocs = routed(workers, true);
        assert_eq!(
            allocs, 0,
            "workers={workers}: {allocs} heap allocations over 1000 routed echoes through ipfw"
        );
    }
}

/// A (198.18.1.2) — R — B (198.18.2.2, 198.19.0.1): 1,000 pings through R after a
/// warm-up.
fn routed(workers: usize, firewall: bool) -> u64 {
    let (mut s, a, r, b) = sim::routed(2, workers);
    // The pings go to B's second address, through a gateway route: the next hop's
    // L2 rewrite is what R uses.
    s.host(b)
        .add_address(net::IfIndex(0), "198.19.0.1/16".parse().unwrap())
        .unwrap();
    s.host(r)
        .add_route_via(
            "198.19.0.0/16".parse().unwrap(),
            "198.18.2.2".parse().unwrap(),
        )
        .unwrap();
    // The router's firewall: a state per echo flow, a count, a skipto.
    let fw = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), workers).unwrap();
    fw.load(
        "add 100 check-state
add 200 count icmp from any to any
add 300 skipto 500 icmp from 198.18.1.0/24 to any
add 400 deny ip from any to any
add 500 allow icmp from any to any keep-state",
    )
    .unwrap();
    if firewall {
        fw.attach(s.host(r));
    }
    let ping = s.host(a).ping_socket(0).unwrap();
    ping.set_nonblocking(true).unwrap();
    let data = [0x5au8; 56];
    let mut buf = [0u8; 2048];
    let dst = Ipv4Addr::new(198, 19, 0, 1);
    let mut round = |s: &mut Sim, seq: u16| -> u32 {
        ping.send_echo(dst, seq, &data).unwrap();
        s.run_for(Duration::from_micros(300));
        let mut n = 0;
        while ping.recv_reply(&mut buf).is_ok() {
            n += 1;
        }
        n
    };
    for seq in 0..200 {
        round(&mut s, seq);
    }
    dev::alloc_count::start();
    let mut got = 0;
    for seq in 200..1200 {
        got += round(&mut s, seq);
    }
    let (allocs, _) = dev::alloc_count::stop();
    assert_eq!(got, 1000, "workers={workers}: every routed echo came back");
    assert!(s.host(r).stats().ip.forward >= 2400);
    let fib = s.host(r).fib();
    let nh = fib.lookup4(dst, || 0).expect("route");
    assert_eq!(
        nh.l2(s.now().as_nanos()),
        Some(s.host(b).interfaces()[0].mac.0),
        "the neighbour table wrote B's MAC into the next hop"
    );
    allocs
}

fn main() {
    steady_state_ping_and_udp_echo_do_not_allocate();
    println!("steady_state_ping_and_udp_echo_do_not_allocate: ok");
}
