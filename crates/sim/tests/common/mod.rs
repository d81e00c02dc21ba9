//! Helpers the scenario files share.
#![allow(dead_code)]

use dev::Duration;
use sim::{HostId, Sim};
use std::net::Ipv4Addr;

/// Sends `n` echo requests of `size` bytes from `from` to `to`, checks each reply's
/// data, and returns how many came back.
pub fn ping_n(s: &mut Sim, from: HostId, to: Ipv4Addr, n: u16, size: usize) -> u32 {
    let p = s.host(from).ping_socket(0).unwrap();
    p.set_nonblocking(true).unwrap();
    let data: Vec<u8> = (0..size).map(|i| (i * 7) as u8).collect();
    let mut buf = vec![0u8; 70000];
    let mut got = 0;
    for seq in 0..n {
        p.send_echo(to, seq, &data).unwrap();
        s.run_for(Duration::from_millis(2));
        while let Ok(r) = p.recv_reply(&mut buf) {
            assert_eq!(r.from, to);
            assert_eq!(&buf[..r.len], &data[..], "echo data must come back intact");
            got += 1;
        }
    }
    s.run_for(Duration::from_secs(1));
    while p.recv_reply(&mut buf).is_ok() {
        got += 1;
    }
    got
}
