//! A ruleset from the input's text part (up to a zero byte), then packets built from
//! the rest, through the compiled program with states and counters: no panic, no hang;
//! a verdict names a rule of the program; the counters of the deciding rule grew.
#![no_main]

use fw::{Counters, Direction, Env, IfName, IfRef, MacHdr, PacketInfo, Ruleset};
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

struct Host;

impl Env for Host {
    fn is_local(&self, a: IpAddr) -> bool {
        matches!(a, IpAddr::V4(v) if v.octets()[3] == 1)
            || matches!(a, IpAddr::V6(v) if v.segments()[7] == 1)
    }
    fn verrevpath(&self, src: IpAddr, rcvif: u32) -> bool {
        matches!(src, IpAddr::V4(v) if v.octets()[3] as u32 % 2 == rcvif % 2)
    }
    fn antispoof(&self, src: IpAddr, rcvif: u32) -> bool {
        !src.is_loopback() || rcvif == 0
    }
}

const BASE: &str = "table t create\ntable t add 10.0.0.0/8 100\ntable t add 2001:db8::/32 200\n\
table i create type iface\ntable i add em0 300\ntable n create type number\ntable n add 22 400\n\
table f create type flow:src-ip,proto,dst-port\ntable f add 10.0.0.1,6,22 500\n\
pipe 1 config\npipe 7 config\nqueue 1 config pipe 1\n";

fn addr(v6: bool, b: u8) -> IpAddr {
    if v6 {
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(b % 4)).into()
    } else {
        Ipv4Addr::new(10 * (b & 1), 0, 0, b % 4).into()
    }
}

fn packet(b: &[u8; 16]) -> PacketInfo {
    let v6 = b[0] & 1 != 0;
    let protos = [6, 17, 1, 58, 132, 47];
    let mut p = PacketInfo::new(
        addr(v6, b[1]),
        addr(v6, b[2]),
        protos[b[3] as usize % protos.len()],
    );
    p.sport = u16::from(b[4] % 4) * 11;
    p.dport = u16::from(b[5] % 4) * 11;
    p.tcp_flags = b[6];
    p.tcp_opts = b[7];
    p.tcp_win = u16::from(b[8]) << 8;
    p.tcp_datalen = u16::from(b[9]);
    p.icmp_type = b[10];
    p.ip_len = u16::from(b[11]) * 8;
    p.ttl = b[12];
    p.tos = b[13];
    p.frag = b[14] & 1 != 0;
    p.dir = if b[14] & 2 != 0 {
        Direction::Out
    } else {
        Direction::In
    };
    let ifr = |i: u8| {
        Some(IfRef {
            index: u32::from(i % 3),
            name: IfName::new(["em0", "em1", "lo0"][i as usize % 3]).unwrap(),
        })
    };
    if b[14] & 4 != 0 {
        p.rcvif = ifr(b[15]);
    }
    if b[14] & 8 != 0 {
        p.xmitif = ifr(b[15] >> 2);
    }
    p.layer2 = b[14] & 16 != 0;
    if b[14] & 32 != 0 {
        p.mac = Some(MacHdr {
            dst: [b[15]; 6],
            src: [b[13]; 6],
            ethertype: 0x0800,
        });
    }
    for t in 0..(b[15] % 4) {
        p.tags.add(u16::from(t) + 1);
    }
    p.len = u32::from(p.ip_len);
    p
}

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let Ok(text) = std::str::from_utf8(&data[..split]) else {
        return;
    };
    let mut rs = Ruleset::default();
    rs.load(BASE).unwrap();
    for (i, line) in text.lines().enumerate().take(64) {
        let _ = rs.execute::<fw::Counters>(line, i + 1, &[]);
    }
    let Ok(prog) = rs.program() else { return };
    let states = rs.states().clone();
    let mut ctr = Counters::new();
    let mut rng = 1;
    let rest = data.get(split + 1..).unwrap_or(&[]);
    // The ids of the rules numbered `n` (several rules may share a number); the
    // default rule is the program's last.
    let ids = |n: u16| -> Vec<u32> {
        let mut v: Vec<u32> = rs
            .rules()
            .filter(|(r, _)| r.num == n)
            .map(|(_, id)| id)
            .collect();
        if n == 65535 {
            v.extend(prog.rule_ids().last());
        }
        v
    };
    let packets = |ctr: &Counters, ids: &[u32]| ids.iter().map(|&i| ctr.get(i).packets).sum::<u64>();
    for (now, chunk) in rest.chunks_exact(16).take(256).enumerate() {
        let mut p = packet(chunk.try_into().unwrap());
        let before = ctr.clone();
        let v = prog.eval(&mut p, &Host, &states, &mut ctr, now as u64, &mut rng);
        let listed = rs.list(Some(v.rule));
        assert!(
            !listed.is_empty(),
            "verdict rule {} is not in the ruleset",
            v.rule
        );
        let deciding = ids(v.rule);
        assert!(
            packets(&ctr, &deciding) > packets(&before, &deciding),
            "rule {}'s counters did not grow",
            v.rule
        );
    }
});
