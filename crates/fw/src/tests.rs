//! Behaviour of the rule language, the evaluator and the commands.

use crate::program::tcpopt;
use crate::*;
use std::net::IpAddr;

/// For commands that show no counters.
const NO_COUNTERS: &[&Counters] = &[];

struct Host;

impl Env for Host {
    fn is_local(&self, a: IpAddr) -> bool {
        a == ip("10.0.0.1") || a == ip("2001:db8::1")
    }
    fn verrevpath(&self, src: IpAddr, rcvif: u32) -> bool {
        // 192.0.2.0/24 routes out of interface 1; everything else out of 2.
        let via = if IpPrefix::new(ip("192.0.2.0"), 24).contains(src) {
            1
        } else {
            2
        };
        via == rcvif
    }
    fn antispoof(&self, src: IpAddr, rcvif: u32) -> bool {
        // 10.0.0.0/8 is connected to interface 1 only.
        !IpPrefix::new(ip("10.0.0.0"), 8).contains(src) || rcvif == 1
    }
}

use route::IpPrefix;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn ifr(index: u32, name: &str) -> Option<IfRef> {
    Some(IfRef {
        index,
        name: IfName::new(name).unwrap(),
    })
}

/// A TCP SYN from 192.0.2.7:40000 to 10.0.0.1:22 arriving on em0 (index 1).
fn syn() -> PacketInfo {
    let mut p = PacketInfo::new(ip("192.0.2.7"), ip("10.0.0.1"), 6);
    p.sport = 40000;
    p.dport = 22;
    p.tcp_flags = 0x02;
    p.tcp_win = 65535;
    p.tcp_opts = tcpopt::MSS | tcpopt::SACK;
    p.ip_len = 60;
    p.ttl = 64;
    p.rcvif = ifr(1, "em0");
    p.len = 60;
    p
}

fn reply(p: &PacketInfo) -> PacketInfo {
    let mut r = *p;
    std::mem::swap(&mut r.src, &mut r.dst);
    std::mem::swap(&mut r.sport, &mut r.dport);
    r.tcp_flags = 0x12;
    r.dir = Direction::Out;
    r.rcvif = None;
    r.xmitif = ifr(1, "em0");
    r
}

struct Fw {
    rs: Ruleset,
    ctr: Counters,
    rng: u64,
    now: u64,
}

impl Fw {
    fn new(text: &str) -> Fw {
        let mut rs = Ruleset::default();
        rs.load(text).unwrap_or_else(|e| panic!("{e}"));
        Fw {
            rs,
            ctr: Counters::new(),
            rng: 0x1234_5678,
            now: 1,
        }
    }

    fn run(&mut self, p: &mut PacketInfo) -> Verdict {
        let prog = self.rs.program().unwrap();
        let states = self.rs.states().clone();
        self.now += 1;
        prog.eval(p, &Host, &states, &mut self.ctr, self.now, &mut self.rng)
    }

    /// `eval_batch` of `pkts` at time `now`: their verdicts, in order.
    fn run_batch(&mut self, pkts: &mut [PacketInfo], now: u64) -> Vec<Verdict> {
        let prog = self.rs.program().unwrap();
        let blank = Verdict {
            decision: Decision::Allow,
            rule: 0,
            log: false,
        };
        let mut out = vec![blank; pkts.len()];
        prog.eval_batch(
            pkts,
            &mut out,
            &Host,
            self.rs.states(),
            &mut self.ctr,
            now,
            &mut self.rng,
        );
        out
    }

    fn decide(&mut self, mut p: PacketInfo) -> (Decision, u16) {
        let v = self.run(&mut p);
        (v.decision, v.rule)
    }

    /// `eval` of `p` at time `now`, or `eval_error` if it quotes a flow.
    fn decide_quoted(
        &mut self,
        mut p: PacketInfo,
        q: Option<state::FlowId>,
        now: u64,
    ) -> (Decision, u16) {
        let prog = self.rs.program().unwrap();
        let states = self.rs.states().clone();
        let (ctr, rng) = (&mut self.ctr, &mut self.rng);
        let v = match q {
            Some(q) => prog.eval_error(&mut p, q, &Host, &states, ctr, now, rng),
            None => prog.eval(&mut p, &Host, &states, ctr, now, rng),
        };
        (v.decision, v.rule)
    }
}

/// Whether `add 100 allow BODY` lets `p` through (the default rule denies).
fn matches(body: &str, p: PacketInfo) -> bool {
    let mut fw = Fw::new(&format!("add 100 allow {body}"));
    fw.decide(p).0 == Decision::Allow
}

// ---- parsing and listing ------------------------------------------------------

const RULES: &[&str] = &[
    "00100 allow tcp from any to me 22 setup keep-state",
    "00200 deny ip from 10.0.0.0/8 to any in via em0",
    "00300 set 3 prob 0.25 count log udp from not 192.0.2.1,198.51.100.0/24 53 to any 1024-65535",
    "00400 skipto 1000 ip from any to any not established",
    "00500 skipto tablearg ip from table(bad) to any",
    "00600 pipe tablearg tcp from any to table(web,7) 80,443",
    "00700 reject icmp from any to any icmptypes 0,3-5,8",
    "00800 unreach 3 udp from any to me6",
    "00900 reset tcp from any to any tcpflags syn,!ack tcpoptions mss,!ts",
    "01000 allow ip6 from 2001:db8::/32 to any icmp6types 128-129,135",
    "01100 allow ip from any to any { via em0 or not recv em1 or xmit any }",
    "01200 call 5000 ip from any to any tagged 5,7-9",
    "01300 return ip from any to any",
    "01400 check-state ip from any to any",
    "01500 allow tcp from any to any 25 limit src-addr dst-port 10",
    "01600 count ip from any to any tag 42",
    "01700 count ip from any to any untag tablearg",
    "01800 queue 3 ip from any to any iplen 0-100 ipttl 1,255 iptos lowdelay,!mincost dscp 46",
    "01900 allow tcp from any to any tcpwin 0-1024 tcpdatalen 0",
    "02000 deny ip from any to any mac 00:11:22:33:44:55 any mac-type 2048,34525 layer2",
    "02100 deny ip from any to any not antispoof in",
    "02200 deny ip from any to any not verrevpath",
    "02300 allow udp from any to any lookup dst-port ports",
    "02400 allow { tcp or udp } from 10.0.0.0:255.0.255.0 to any frag ip4",
    "02500 deny ip from any to any via table(ifs) out",
    "02600 unreach6 1 ip6 from any to any",
];

#[test]
fn canonical_rules_list_as_they_were_written() {
    for &text in RULES {
        let r = parse_rule(text, 1).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(r.to_string(), text);
    }
}

#[test]
fn aliases_list_in_canonical_form() {
    for (given, canon) in [
        (
            "100 accept all from any to any",
            "00100 allow ip from any to any",
        ),
        (
            "100 drop tcp from {1.2.3.4 or 5.6.7.0/24} to any ssh,http",
            "00100 deny tcp from 1.2.3.4,5.6.7.0/24 to any 22,80",
        ),
        (
            "100 permit ipv6-icmp from any to any",
            "00100 allow ipv6-icmp from any to any",
        ),
        (
            "100 unreach host ip from 1.2.3.4/32 to any",
            "00100 unreach 1 ip from 1.2.3.4 to any",
        ),
        (
            "100 allow ip from 1.2.3.77/24 to any",
            "00100 allow ip from 1.2.3.0/24 to any",
        ),
        (
            "100 allow ip from any to any dscp af11,ef",
            "00100 allow ip from any to any dscp 10,46",
        ),
        (
            "100 allow ip from any to any mac-type ip,arp",
            "00100 allow ip from any to any mac-type 2048,2054",
        ),
        (
            "100 deny ip from any to any mac-type 0x88b5,0x0800-0x0806 layer2",
            "00100 deny ip from any to any mac-type 34997,2048-2054 layer2",
        ),
    ] {
        assert_eq!(parse_rule(given, 1).unwrap().to_string(), canon, "{given}");
    }
}

#[test]
fn parse_errors_name_line_column_and_what_was_expected() {
    let e = parse_rule("100 allow tcp fro any to me", 3).unwrap_err();
    assert_eq!(e.to_string(), "3:15: expected 'from', found 'fro'");
    let e = parse_rule("allow tcp from fro to me", 3).unwrap_err();
    assert_eq!(
        e.to_string(),
        "3:16: expected an address, 'any', 'me' or 'table(NAME)', found 'fro'"
    );
    let e = parse_rule("allow tcp from any to", 1).unwrap_err();
    assert_eq!((e.col, e.found.as_str()), (22, "the end of the line"));
    let e = parse_rule("allow tcp from any to any 99999", 1).unwrap_err();
    assert!(e.expected.starts_with("a port list"), "{e}");
    let e = parse_rule("allow ip from any to any { in or keep-state }", 1).unwrap_err();
    assert!(e.expected.contains("only match options"), "{e}");
    assert!(parse_rule("allow ip from any to any not keep-state", 1).is_err());
    assert!(parse_rule("65535 allow ip from any to any", 1).is_err());
    assert!(parse_rule("set 32 allow ip from any to any", 1).is_err());
    assert!(parse_rule("prob 1.5 allow ip from any to any", 1).is_err());
}

#[test]
fn a_rules_file_loads_with_comments_and_fails_whole_naming_the_line() {
    let mut rs = Ruleset::default();
    let n = rs
        .load("# a comment\n\nadd 100 allow ip from any to any # trailing\nadd deny tcp from any to any\n")
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(
        rs.list(None),
        "00100 allow ip from any to any\n00200 deny tcp from any to any\n65535 deny ip from any to any\n"
    );
    let before = rs.list(None);
    let e = rs
        .load("add 300 allow ip from any to any\n\nadd 400 allow ip fro any to any\n")
        .unwrap_err();
    assert_eq!(e.to_string(), "3:18: expected 'from', found 'fro'");
    assert_eq!(rs.list(None), before, "a failed load changes nothing");
    let e = rs.load("delete 7\n").unwrap_err();
    assert_eq!(e.to_string(), "1:8: rule 7 not found");
    let e = rs.load("frob\n").unwrap_err();
    assert!(e.to_string().starts_with("1:1: expected a command"), "{e}");
}

#[test]
fn rules_naming_undefined_pipes_queues_or_tables_are_refused_at_the_name() {
    let mut rs = Ruleset::default();
    for (cmd, want) in [
        (
            "add 100 pipe 5 ip from any to any",
            "1:14: pipe 5 is not configured (pipe 5 config ...)",
        ),
        (
            "ipfw add 100 queue 7 ip from any to any",
            "1:20: queue 7 is not configured (queue 7 config pipe N ...)",
        ),
        (
            "add 100 deny ip from table(7) to any",
            "1:22: table 7 does not exist (table 7 create type addr)",
        ),
        (
            "add 100 deny ip from any to any lookup dst-port ports",
            "1:49: table ports does not exist (table ports create type number)",
        ),
        (
            "add 100 deny ip from any to any recv table(ifs)",
            "1:38: table ifs does not exist (table ifs create type iface)",
        ),
        (
            "add 100 deny ip from any to any flow table(fl)",
            "1:38: table fl does not exist (table fl create type flow:FIELDS)",
        ),
        (
            "queue 2 config weight 5 pipe 9",
            "1:30: pipe 9 is not configured (pipe 9 config ...)",
        ),
        (
            "sched 3 config type fifo",
            "1:7: pipe 3 is not configured (pipe 3 config ...)",
        ),
        ("pipe 4 delete", "1:6: pipe 4 does not exist"),
    ] {
        let e = rs.execute(cmd, 1, NO_COUNTERS).unwrap_err();
        assert_eq!(e.to_string(), want, "{cmd}");
    }
    assert_eq!(rs.rules().count(), 0);
    assert!(rs.take_dummynet().is_empty() && rs.table_names().next().is_none());
    // Defined first, the same rules are taken.
    for cmd in [
        "pipe 5 config bw 1Mbit/s",
        "queue 7 config pipe 5 weight 10",
        "table 7 create",
        "add 100 pipe 5 ip from any to any",
        "add 200 queue 7 ip from table(7) to any",
    ] {
        rs.execute(cmd, 1, NO_COUNTERS).unwrap();
    }
    assert_eq!(rs.take_dummynet().len(), 2);
    // What a rule or a queue uses cannot be deleted.
    for (cmd, want) in [
        ("pipe 5 delete", "1:6: pipe 5 is in use by rule 100"),
        ("queue 7 delete", "1:7: queue 7 is in use by rule 200"),
        ("table 7 destroy", "1:7: table 7 is in use by rule 200"),
    ] {
        let e = rs.execute(cmd, 1, NO_COUNTERS).unwrap_err();
        assert_eq!(e.to_string(), want, "{cmd}");
    }
    rs.execute("delete 100 200", 1, NO_COUNTERS).unwrap();
    let e = rs.execute("pipe 5 delete", 1, NO_COUNTERS).unwrap_err();
    assert_eq!(e.to_string(), "1:6: pipe 5 is in use by queue 7");
    rs.execute("queue 7 delete", 1, NO_COUNTERS).unwrap();
    rs.execute("pipe 5 delete", 1, NO_COUNTERS).unwrap();
    assert_eq!(rs.dummynet_pipes().count(), 0);
}

#[test]
fn a_file_may_define_pipes_and_tables_after_the_rules_that_use_them() {
    let mut rs = Ruleset::default();
    let n = rs
        .load(
            "add 100 pipe 1 ip from table(lan) to any out\n\
             add 200 queue 2 ip from any to any in\n\
             queue 2 config pipe 1 weight 5\n\
             pipe 1 config bw 10Mbit/s delay 20ms # later in the file\n\
             table lan create type addr\n",
        )
        .unwrap();
    assert_eq!(n, 5);
    assert_eq!(rs.rules().count(), 2);
    let dn = rs.take_dummynet();
    assert_eq!(
        dn.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
        [
            "queue 2 config pipe 1 weight 5",
            "pipe 1 config bw 10Mbit/s delay 20ms"
        ]
    );
    // Still undefined when the file ends: the first use is the error, and nothing
    // of the file stays.
    let before = rs.list(None);
    let e = rs
        .load(
            "pipe 3 config\n\
             add 300 pipe 3 ip from any to any\n\
             add 400 pipe 4 ip from table(nope) to any\n\
             table other create\n",
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "3:14: pipe 4 is not configured (pipe 4 config ...)"
    );
    assert_eq!(rs.list(None), before);
    assert!(
        rs.take_dummynet().is_empty(),
        "a failed load hands nothing on"
    );
    assert_eq!(rs.dummynet_pipes().collect::<Vec<_>>(), [1]);
    // A rule deleted again in the file needs nothing; a queue of an undefined pipe
    // is named at its pipe.
    rs.load("add 500 pipe 8 ip from any to any\ndelete 500\n")
        .unwrap();
    let e = rs.load("\nqueue 4 config pipe 9\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "2:21: pipe 9 is not configured (pipe 9 config ...)"
    );
}

#[test]
fn rule_pipe_and_table_errors_have_one_shape() {
    let mut rs = Ruleset::default();
    for (text, want) in [
        // A rule that does not parse.
        ("\nadd 100 allow tcp fro any to me\n", "2:19: expected 'from', found 'fro'"),
        // A pipe and a queue that do not parse.
        (
            "\n\npipe 1 config bw 10Mbit/sec",
            "3:18: expected a bandwidth like 10Mbit/s, 512Kbit/s or 1MByte/s, found '10Mbit/sec'",
        ),
        (
            "ipfw queue 2 config pipe 1 weight 300",
            "1:35: expected a weight in 1..100, found '300'",
        ),
        (
            "pipe 1 config bw 1Mbit/s delay",
            "1:31: expected a delay in ms, like 20 or 20ms (or with us, ns, s), found the end of the line",
        ),
        // A pipe over the limits.
        (
            "pipe 1 config bw 1Kbit/s queue 99999999",
            "1:6: queue size 99999999 is more than 100 (at most 100 slots: \
             net.inet.ip.dummynet.pipe_slot_limit)",
        ),
        // Tables.
        (
            "table t create type frob",
            "1:21: expected a table type (addr, addr:hash, iface, number, flow:FIELDS), found 'frob'",
        ),
        ("table t add 192.0.2.0/24", "1:7: no table t"),
        (
            "table t create\ntable t add 192.0.2.300",
            "2:13: bad key '192.0.2.300'",
        ),
        (
            "table t create\ntable t delete 198.18.0.1",
            "2:16: no such entry",
        ),
        // A command that parses but cannot be done.
        ("add 100 allow ip from any to any\ndelete 100 7", "2:12: rule 7 not found"),
    ] {
        let e = rs.load(text).unwrap_err();
        assert_eq!(e.to_string(), want, "{text}");
    }
}

#[test]
fn queue_limits_follow_the_ruleset_limits() {
    let mut rs = Ruleset::default();
    assert!(rs.load("pipe 1 config queue 101").is_err());
    assert!(rs.load("pipe 1 config queue 1025KB").is_err());
    rs.load("pipe 1 config queue 100\nqueue 1 config pipe 1 queue 1MB")
        .unwrap();
    assert!(!rs.set_dummynet_limits(crate::dummynet::DnLimits {
        slots: 0,
        bytes: 1 << 20
    }));
    assert!(rs.set_dummynet_limits(crate::dummynet::DnLimits {
        slots: 1000,
        bytes: 1 << 20
    }));
    rs.load("pipe 1 config queue 1000").unwrap();
    assert_eq!(rs.dummynet_limits().slots, 1000);
}

// ---- matching, option by option -------------------------------------------------

#[test]
fn addresses_me_lists_masks_and_not() {
    let p = syn();
    assert!(matches("tcp from any to me", p));
    assert!(!matches("tcp from me to any", p));
    assert!(!matches("tcp from any to me6", p));
    assert!(matches("tcp from 192.0.2.0/24 to 10.0.0.1", p));
    assert!(matches("tcp from { 1.1.1.1 or 192.0.2.7 } to any", p));
    assert!(matches("tcp from 1.1.1.1,192.0.2.0/28 to any", p));
    assert!(!matches("tcp from not 192.0.2.0/24 to any", p));
    assert!(matches("tcp from 192.0.0.7:255.0.0.255 to any", p));
    assert!(
        !matches("tcp from 2001:db8::/32 to any", p),
        "family mismatch"
    );
    assert!(!matches("ip from not any to any", p));
    let mut p6 = PacketInfo::new(ip("2001:db8::7"), ip("2001:db8::1"), 58);
    p6.icmp_type = 128;
    assert!(matches("ip6 from 2001:db8::/32 to me6 icmp6types 128", p6));
    assert!(matches("ipv6-icmp from any to me", p6));
    assert!(!matches("ip4 from any to any", p6));
    assert!(matches("ip4 from any to any", p));
    assert!(!matches("ip6 from any to any", p));
    assert!(!matches("ip from any to any icmp6types 129", p6));
}

#[test]
fn protocols_and_ports() {
    let p = syn();
    assert!(matches("tcp from any 40000 to any 22", p));
    assert!(matches("{ udp or tcp } from any to any 20-25,80", p));
    assert!(!matches("udp from any to any", p));
    assert!(!matches("tcp from any to any 80", p));
    assert!(matches("6 from any to any ssh", p));
    let mut f = p;
    f.frag = true;
    assert!(
        !matches("tcp from any to any 22", f),
        "a later fragment has no ports"
    );
    assert!(matches("tcp from any to any frag", f));
    assert!(!matches("tcp from any to any frag", p));
}

#[test]
fn tcp_options() {
    let p = syn();
    assert!(matches("tcp from any to any setup", p));
    assert!(!matches("tcp from any to any established", p));
    let r = reply(&p);
    assert!(!matches("tcp from any to any setup", r));
    assert!(matches("tcp from any to any established", r));
    assert!(matches("tcp from any to any tcpflags syn,!ack,!rst", p));
    assert!(!matches("tcp from any to any tcpflags syn,ack", p));
    assert!(matches("tcp from any to any tcpoptions mss,sack,!ts", p));
    assert!(!matches("tcp from any to any tcpoptions ts", p));
    assert!(matches("tcp from any to any tcpwin 60000-65535", p));
    assert!(matches("tcp from any to any tcpdatalen 0", p));
    assert!(!matches("tcp from any to any tcpdatalen 1-1500", p));
}

#[test]
fn ip_header_options() {
    let mut p = syn();
    p.tos = 46 << 2 | 0x10;
    assert!(matches("ip from any to any iplen 40-60", p));
    assert!(!matches("ip from any to any iplen 61-1500", p));
    assert!(matches("ip from any to any ipttl 64", p));
    assert!(matches("ip from any to any iptos lowdelay", p));
    assert!(!matches("ip from any to any iptos mincost", p));
    assert!(matches("ip from any to any dscp ef", p));
    assert!(!matches("ip from any to any dscp af11", p));
    let mut icmp = PacketInfo::new(ip("192.0.2.7"), ip("10.0.0.1"), 1);
    icmp.icmp_type = 8;
    assert!(matches("icmp from any to any icmptypes 0,8", icmp));
    assert!(!matches("icmp from any to any icmptypes 3", icmp));
}

#[test]
fn direction_and_interfaces() {
    let p = syn();
    let r = reply(&p);
    assert!(matches("ip from any to any in", p));
    assert!(!matches("ip from any to any out", p));
    assert!(matches("ip from any to any out", r));
    assert!(matches("ip from any to any via em0", p));
    assert!(matches("ip from any to any via em0", r));
    assert!(matches("ip from any to any recv em0", p));
    assert!(!matches("ip from any to any recv em0", r));
    assert!(matches("ip from any to any xmit em0", r));
    assert!(!matches("ip from any to any xmit any", p));
    assert!(matches("ip from any to any recv any", p));
    assert!(!matches("ip from any to any via em1", p));
    assert!(matches("ip from any to any { via em1 or via em0 }", p));
    assert!(!matches("ip from any to any { via em1 or via em2 }", p));
    assert!(matches(
        "ip from any to any { via em1 or not via em2 } in",
        p
    ));
}

#[test]
fn layer2_options() {
    let mut p = syn();
    p.mac = Some(MacHdr {
        dst: [0, 0x11, 0x22, 0x33, 0x44, 0x55],
        src: [2, 0, 0, 0, 0, 1],
        ethertype: 0x0800,
    });
    assert!(!matches("ip from any to any layer2", p));
    assert!(
        !matches("ip from any to any mac any any", p),
        "mac matches on the layer-2 pass only"
    );
    p.layer2 = true;
    assert!(matches("ip from any to any layer2", p));
    assert!(matches("ip from any to any mac 00:11:22:33:44:55 any", p));
    assert!(matches(
        "ip from any to any mac any 02:00:00:00:00:01 mac-type ip",
        p
    ));
    assert!(!matches("ip from any to any mac 00:11:22:33:44:56 any", p));
    assert!(!matches("ip from any to any mac-type ipv6", p));
}

#[test]
fn antispoof_and_verrevpath() {
    let mut p = syn();
    assert!(matches("ip from any to any verrevpath", p));
    p.rcvif = ifr(2, "em1");
    assert!(!matches("ip from any to any verrevpath", p));
    p.src = ip("10.9.9.9");
    assert!(
        !matches("ip from any to any antispoof", p),
        "10/8 lives on interface 1"
    );
    p.rcvif = ifr(1, "em0");
    assert!(matches("ip from any to any antispoof", p));
    let r = reply(&syn());
    assert!(
        matches("ip from any to any verrevpath antispoof", r),
        "outgoing packets pass"
    );
}

#[test]
fn tags_are_set_matched_and_cleared() {
    let mut fw = Fw::new(
        "add 100 count ip from any to any tag 5\n\
         add 200 count ip from any to any tagged 5 tag 6\n\
         add 300 count ip from any to any tagged 6 untag 5\n\
         add 400 allow ip from any to any not tagged 5 tagged 6\n",
    );
    let mut p = syn();
    let v = fw.run(&mut p);
    assert_eq!((v.decision, v.rule), (Decision::Allow, 400));
    assert_eq!(p.tags.as_slice(), &[6]);
}

#[test]
fn prob_matches_about_that_often() {
    let mut fw =
        Fw::new("add 100 prob 0.25 deny ip from any to any\nadd 200 allow ip from any to any\n");
    let denied = (0..4000)
        .filter(|_| fw.decide(syn()).0 == Decision::Deny)
        .count();
    assert!((800..1200).contains(&denied), "{denied}");
}

// ---- actions and flow of control ----------------------------------------------------

#[test]
fn actions_give_their_decisions() {
    let p = syn();
    let mut udp = PacketInfo::new(ip("192.0.2.7"), ip("10.0.0.1"), 17);
    udp.dport = 53;
    for (action, pkt, want) in [
        ("allow", p, Decision::Allow),
        ("deny", p, Decision::Deny),
        ("reject", p, Decision::Reject(RejectKind::Unreach(1))),
        ("unreach port", p, Decision::Reject(RejectKind::Unreach(3))),
        (
            "unreach6 admin-prohib",
            p,
            Decision::Reject(RejectKind::Unreach6(1)),
        ),
        ("reset", p, Decision::Reject(RejectKind::Rst)),
        ("reset", udp, Decision::Deny),
        ("pipe 7", p, Decision::Pipe(7)),
        ("queue 9", p, Decision::Queue(9)),
    ] {
        let mut fw = Fw::new(&format!(
            "pipe 7 config\nqueue 9 config pipe 7\nadd 100 {action} ip from any to any"
        ));
        assert_eq!(fw.decide(pkt), (want, 100), "{action}");
    }
    let mut p6 = PacketInfo::new(ip("2001:db8::7"), ip("2001:db8::1"), 17);
    p6.dport = 1;
    let mut fw = Fw::new("add 100 reject ip from any to any");
    assert_eq!(fw.decide(p6).0, Decision::Reject(RejectKind::Unreach6(1)));
}

#[test]
fn a_batch_gets_one_verdict_per_packet() {
    let mut fw = Fw::new("add 100 allow tcp from any to me 22\nadd 200 deny ip from any to any\n");
    let mut other = syn();
    other.dport = 23;
    let out = fw.run_batch(&mut [syn(), other, syn()], 1);
    let got: Vec<_> = out.iter().map(|v| (v.decision, v.rule)).collect();
    assert_eq!(
        got,
        [
            (Decision::Allow, 100),
            (Decision::Deny, 200),
            (Decision::Allow, 100)
        ]
    );
}

#[test]
fn a_vector_takes_skipped_packets_back_at_their_targets() {
    // The rule-major run parks a packet that takes a skipto until its target's turn;
    // packets skipping to neighbouring rules must each come back at their own (the
    // one skipping to 400 never meets rule 300), as packet by packet.
    let rules = "add 100 skipto 300 tcp from any to any 22\n\
                 add 110 skipto 400 tcp from any to any 23\n\
                 add 200 deny ip from any to any\n\
                 add 300 deny ip from any to any\n\
                 add 400 allow ip from any to any\n";
    let mut pkts = Vec::new();
    for k in 0..70u16 {
        let mut s = syn();
        s.dport = 22 + k % 3;
        pkts.push(s);
    }
    let (mut one, mut batch) = (Fw::new(rules), Fw::new(rules));
    let want: Vec<_> = pkts
        .iter()
        .map(|p| {
            let v = one.run(&mut p.clone());
            (v.decision, v.rule)
        })
        .collect();
    assert_eq!(
        want[..3],
        [
            (Decision::Deny, 300),
            (Decision::Allow, 400),
            (Decision::Deny, 200)
        ]
    );
    let out = batch.run_batch(&mut pkts, 2);
    let got: Vec<_> = out.iter().map(|v| (v.decision, v.rule)).collect();
    assert_eq!(got, want);
    let prog = batch.rs.program().unwrap();
    for id in prog.rule_ids() {
        assert_eq!(
            batch.ctr.get(id).packets,
            one.ctr.get(id).packets,
            "rule id {id}"
        );
    }
}

#[test]
fn a_vector_matches_or_blocks_with_not_as_eval_does() {
    // The rule-major run's or-blocks, `not` members among them (the property test
    // once found `{ not in or frag or ip6 }` matching an incoming IPv4 packet).
    let rules = "add 100 allow udp from any to any { not in or frag or ip6 }\n\
                 add 200 count { tcp or 1 } from any to any { not out or not frag }\n\
                 add 300 deny ip from any to any { in or not ip4 } not frag\n\
                 add 400 allow ip from any to any\n";
    let mut pkts = Vec::new();
    for k in 0..100u16 {
        let mut p = syn();
        p.proto = [6, 17, 1][k as usize % 3];
        p.frag = k & 4 != 0;
        if k & 8 != 0 {
            p.dir = Direction::Out;
        }
        if k & 16 != 0 {
            p.src = ip("2001:db8::7");
            p.dst = ip("2001:db8::1");
        }
        pkts.push(p);
    }
    let (mut one, mut batch) = (Fw::new(rules), Fw::new(rules));
    let want: Vec<_> = pkts
        .iter()
        .map(|p| {
            let v = one.run(&mut p.clone());
            (v.decision, v.rule)
        })
        .collect();
    assert_eq!(want[0], (Decision::Deny, 300));
    let out = batch.run_batch(&mut pkts, 2);
    let got: Vec<_> = out.iter().map(|v| (v.decision, v.rule)).collect();
    assert_eq!(got, want);
    let prog = batch.rs.program().unwrap();
    for id in prog.rule_ids() {
        assert_eq!(
            batch.ctr.get(id).packets,
            one.ctr.get(id).packets,
            "rule id {id}"
        );
    }
}

#[test]
fn a_batch_with_states_is_evals_in_turn() {
    // eval_batch looks up a vector's states before the walks (a count rule, then
    // check-state); a SYN and its answer in one vector must still meet, as they do
    // packet by packet.
    let rules = "add 50 count ip from any to any\n\
                 add 100 check-state\n\
                 add 200 allow tcp from any to me 22 setup keep-state\n\
                 add 300 deny ip from any to any\n";
    let mut pkts = Vec::new();
    for k in 0..70u16 {
        let mut s = syn();
        s.sport = 40000 + k % 23;
        pkts.push(s);
        pkts.push(reply(&s));
        let mut stray = reply(&s);
        stray.sport = 23;
        pkts.push(stray);
    }
    let (mut one, mut batch) = (Fw::new(rules), Fw::new(rules));
    let want: Vec<_> = pkts
        .iter()
        .map(|p| {
            let v = one.run(&mut p.clone());
            (v.decision, v.rule)
        })
        .collect();
    let out = batch.run_batch(&mut pkts, 2);
    let prog = batch.rs.program().unwrap();
    let got: Vec<_> = out.iter().map(|v| (v.decision, v.rule)).collect();
    assert_eq!(got, want);
    assert_eq!(
        want[..3].iter().map(|w| w.1).collect::<Vec<_>>(),
        [200, 200, 300]
    );
    for id in prog.rule_ids() {
        assert_eq!(
            batch.ctr.get(id).packets,
            one.ctr.get(id).packets,
            "rule id {id}"
        );
    }
    let (a, b) = (one.rs.states().stats(), batch.rs.states().stats());
    assert_eq!((a.states, a.created, a.hits), (b.states, b.created, b.hits));
}

#[test]
fn a_batch_with_table_lookups_is_evals_in_turn() {
    // eval_batch makes a vector's address-table lookups together, the first time a
    // walk needs each; the verdicts, counters, tags and tablearg values must be those
    // of eval packet by packet. Six (table, field) pairs, more than eval_batch keeps
    // per vector, so some lookups are made on the spot; `a` by source is shared by
    // four rules, two of which want a value.
    let rules = "table a create type addr\n\
                 table a add 192.0.2.0/25 10\n\
                 table a add 192.0.2.7 20\n\
                 table a add 2001:db8::/64 30\n\
                 table b create type addr\n\
                 table b add 10.0.0.0/8 1300\n\
                 table b add 10.9.9.9 40\n\
                 table h create type addr:hash\n\
                 table h add 198.51.100.9 1200\n\
                 table h add 10.0.0.1 7\n\
                 add 100 count ip from table(a) to any tag tablearg\n\
                 add 150 skipto tablearg ip from table(h) to any\n\
                 add 200 deny ip from not table(a) to table(b) { via em1 or recv em0 }\n\
                 add 300 pipe tablearg ip from table(a,20) to any\n\
                 add 400 count ip from any to not table(b) tagged 10 untag tablearg\n\
                 add 500 queue tablearg tcp from table(a,10) to table(h)\n\
                 add 600 allow ip from table(a) to table(b) { ip6 or not recv em1 }\n\
                 add 700 deny udp from table(b) to table(a)\n\
                 add 1200 count log ip from any to any\n\
                 add 1300 pipe tablearg ip from any to table(b)\n";
    let srcs = [
        "192.0.2.7",
        "192.0.2.9",
        "192.0.2.200",
        "10.1.2.3",
        "198.51.100.9",
        "10.0.0.1",
        "203.0.113.1",
    ];
    let dsts = [
        "10.0.0.1",
        "10.9.9.9",
        "192.0.2.7",
        "203.0.113.2",
        "10.3.3.3",
    ];
    let mut pkts = Vec::new();
    let mut r = 0x9e37_79b9_u32;
    for k in 0..300u32 {
        r ^= r << 13;
        r ^= r >> 17;
        r ^= r << 5;
        let mut p = if k % 37 == 5 {
            PacketInfo::new(ip("2001:db8::5"), ip("2001:db8:1::1"), 6)
        } else {
            let proto = if r & 1 == 0 { 6 } else { 17 };
            PacketInfo::new(
                ip(srcs[(r >> 1) as usize % srcs.len()]),
                ip(dsts[(r >> 9) as usize % dsts.len()]),
                proto,
            )
        };
        p.sport = 1024 + k as u16;
        p.dport = 80;
        p.len = 40 + k % 100;
        p.rcvif = if r & 0x10000 == 0 {
            ifr(1, "em0")
        } else {
            ifr(2, "em1")
        };
        if k % 11 == 0 {
            p.tags.add(10);
        }
        pkts.push(p);
    }
    let (mut one, mut batch) = (Fw::new(rules), Fw::new(rules));
    let mut by_eval = pkts.clone();
    let prog = one.rs.program().unwrap();
    let states = one.rs.states().clone();
    let want: Vec<Verdict> = by_eval
        .iter_mut()
        .map(|p| prog.eval(p, &Host, &states, &mut one.ctr, 1, &mut one.rng))
        .collect();
    // Vectors of 64 and a short last one.
    let out = batch.run_batch(&mut pkts, 1);
    let prog = batch.rs.program().unwrap();
    assert_eq!(out, want);
    assert_eq!(pkts, by_eval, "tags");
    for id in prog.rule_ids() {
        assert_eq!(batch.ctr.get(id), one.ctr.get(id), "rule id {id}");
    }
    assert_eq!(batch.ctr.logged, one.ctr.logged);
    // The rules did what they are there for: every one decided or counted something.
    let decided: std::collections::BTreeSet<u16> = want.iter().map(|v| v.rule).collect();
    for n in [200, 300, 500, 600, 700, 1300, 65535] {
        assert!(
            decided.contains(&n),
            "no packet decided by rule {n}: {decided:?}"
        );
    }
    for id in prog.rule_ids().take(1) {
        assert!(one.ctr.get(id).packets > 0, "rule 100 counted nothing");
    }
    assert!(want.iter().any(|v| v.decision == Decision::Pipe(20)));
    assert!(want.iter().any(|v| v.decision == Decision::Pipe(1300)));
    // tablearg is the value of the last table that matched: table(h)'s, 7.
    assert!(want.iter().any(|v| v.decision == Decision::Queue(7)));
}

#[test]
fn default_rule_is_configurable() {
    let mut fw = Fw::new("");
    assert_eq!(fw.decide(syn()), (Decision::Deny, 65535));
    fw.rs.set_default_allow(true);
    assert_eq!(fw.decide(syn()), (Decision::Allow, 65535));
    assert!(fw
        .rs
        .list(None)
        .ends_with("65535 allow ip from any to any\n"));
}

#[test]
fn count_goes_on_and_log_is_reported() {
    let mut fw =
        Fw::new("add 100 count log ip from any to any\nadd 200 allow ip from any to any\n");
    let v = fw.run(&mut syn());
    assert_eq!((v.decision, v.rule, v.log), (Decision::Allow, 200, true));
    assert_eq!(fw.ctr.logged, 1);
}

#[test]
fn skipto_jumps_forward_only() {
    let mut fw = Fw::new(
        "add 100 skipto 300 ip from any to any\n\
         add 200 deny ip from any to any\n\
         add 300 skipto 100 tcp from any to any\n\
         add 400 allow tcp from any to any\n",
    );
    assert_eq!(fw.decide(syn()), (Decision::Allow, 400));
    // skipto past every rule lands on the default rule.
    let mut fw =
        Fw::new("add 100 skipto 60000 ip from any to any\nadd 200 allow ip from any to any\n");
    assert_eq!(fw.decide(syn()), (Decision::Deny, 65535));
}

#[test]
fn skipto_tablearg_and_pipe_tablearg_take_the_table_value() {
    let mut fw = Fw::new(
        "table t create type addr\n\
         table t add 192.0.2.0/24 300\n\
         table t add 192.0.2.7 500\n\
         add 100 skipto tablearg ip from table(t) to any\n\
         add 300 deny ip from any to any\n\
         add 500 pipe tablearg ip from table(t) to any\n",
    );
    assert_eq!(fw.decide(syn()), (Decision::Pipe(500), 500));
    let mut other = syn();
    other.src = ip("192.0.2.8");
    assert_eq!(fw.decide(other), (Decision::Deny, 300));
    let mut none = syn();
    none.src = ip("198.51.100.1");
    assert_eq!(
        fw.decide(none),
        (Decision::Deny, 300),
        "no table hit: no skip"
    );
}

#[test]
fn call_and_return() {
    let mut fw = Fw::new(
        "add 100 call 1000 ip from any to any\n\
         add 200 allow tcp from any to any tagged 1\n\
         add 300 deny ip from any to any\n\
         add 1000 count ip from any to any tag 1\n\
         add 1100 return ip from any to any\n\
         add 1200 deny ip from any to any\n",
    );
    assert_eq!(fw.decide(syn()), (Decision::Allow, 200));
    // return with an empty stack goes on with the next rule.
    let mut fw = Fw::new("add 100 return ip from any to any\nadd 200 allow ip from any to any\n");
    assert_eq!(fw.decide(syn()), (Decision::Allow, 200));
    // A rule that calls itself fills the stack, then the walk goes on past it.
    let mut fw = Fw::new("add 100 call 100 ip from any to any\nadd 200 allow ip from any to any\n");
    assert_eq!(fw.decide(syn()), (Decision::Allow, 200));
    let c = fw.rs.counter(fw.rs.rules().next().unwrap().1, &[&fw.ctr]);
    assert_eq!(c.packets as usize, crate::program::CALLSTACK + 1);
}

#[test]
fn calls_nest_to_the_stack_depth() {
    // 100 calls 1000 which calls 2000 which returns, then 1000's next rule returns.
    let mut fw = Fw::new(
        "add 100 call 1000 ip from any to any\n\
         add 200 allow ip from any to any tagged 2\n\
         add 1000 call 2000 ip from any to any\n\
         add 1100 return ip from any to any tagged 1\n\
         add 1200 deny ip from any to any\n\
         add 2000 count ip from any to any tag 1\n\
         add 2100 count ip from any to any tag 2\n\
         add 2200 return ip from any to any\n",
    );
    assert_eq!(fw.decide(syn()), (Decision::Allow, 200));
}

// ---- states ------------------------------------------------------------------------

#[test]
fn keep_state_lets_replies_back() {
    let mut fw = Fw::new(
        "add 100 check-state ip from any to any\n\
         add 200 allow tcp from any to me 22 setup keep-state\n\
         add 300 deny ip from any to any\n",
    );
    let p = syn();
    assert_eq!(fw.decide(reply(&p)), (Decision::Deny, 300), "no state yet");
    assert_eq!(fw.decide(p), (Decision::Allow, 200));
    assert_eq!(fw.rs.states().len(), 1);
    assert_eq!(
        fw.decide(reply(&p)),
        (Decision::Allow, 200),
        "the state's rule decides"
    );
    let mut ack = p;
    ack.tcp_flags = 0x10;
    assert_eq!(fw.decide(ack), (Decision::Allow, 200));
    fw.rs.delete(200).unwrap();
    assert_eq!(
        fw.rs.states().len(),
        0,
        "deleting the rule drops its states"
    );
    assert_eq!(fw.decide(ack), (Decision::Deny, 300));
}

/// An ICMP message from `src` to `dst` of type `t` with identifier `id`.
fn icmp(src: &str, dst: &str, t: u8, id: u16) -> PacketInfo {
    let (src, dst) = (ip(src), ip(dst));
    let mut p = PacketInfo::new(src, dst, if src.is_ipv6() { 58 } else { 1 });
    p.icmp_type = t;
    p.icmp_id = id;
    p.len = 84;
    p
}

/// A packet, and the flow it quotes if it is an ICMP error.
type Quoted = (PacketInfo, Option<crate::state::FlowId>);

/// An ICMP error of type `t` from `src` to `dst` quoting `q`, and the quoted
/// flow as a describer gives it to the vector.
fn icmp_error(src: &str, dst: &str, t: u8, q: Option<&PacketInfo>) -> Quoted {
    // A quoted ICMP message's flow is its state's.
    let quote = q.map(|q| match q.proto {
        1 | 58 => {
            crate::state::FlowId::icmp(q.src, q.dst, q.proto, q.icmp_type, q.icmp_id)
                .expect("a quoted query")
                .0
        }
        _ => crate::state::FlowId {
            proto: q.proto,
            src: q.src,
            dst: q.dst,
            sport: q.sport,
            dport: q.dport,
        },
    });
    (icmp(src, dst, t, 0), quote)
}

impl Fw {
    /// `eval_vec` of `pkts` (each with an error's quote, if any) in one vector at
    /// time `now`: their verdicts.
    fn run_vec(&mut self, pkts: &[Quoted], now: u64) -> Vec<(Decision, u16)> {
        let prog = self.rs.program().unwrap();
        let mut v = PacketVec::new();
        for (p, q) in pkts {
            let k = v.push(p);
            if let Some(q) = q {
                v.set_icmp_quote(k, *q);
            }
        }
        let states = self.rs.states().clone();
        prog.eval_vec(&mut v, &Host, &states, &mut self.ctr, now, &mut self.rng);
        (0..pkts.len())
            .map(|k| (v.verdict(k).decision, v.verdict(k).rule))
            .collect()
    }
}

/// A vector keeps an ICMP identifier in the source port's column: no port rule
/// and no flow table's port sees it, on either path.
#[test]
fn an_icmp_identifier_is_no_port() {
    let mut fw = Fw::new(
        "table f create type flow:src-port\ntable f add 80\n\
         add 100 deny ip from any 80 to any\nadd 150 deny ip from any to any flow table(f)\n\
         add 200 allow ip from any to any\n",
    );
    let ping = icmp("10.0.0.5", "192.0.2.9", 8, 80);
    let mut www = PacketInfo::new(ip("10.0.0.5"), ip("192.0.2.9"), 6);
    (www.sport, www.dport) = (80, 5000);
    assert_eq!(
        fw.run_vec(&[(ping, None), (www, None)], 0),
        [(Decision::Allow, 200), (Decision::Deny, 100)]
    );
    assert_eq!(fw.decide(ping), (Decision::Allow, 200));
    let mut v = PacketVec::new();
    let k = v.push(&ping);
    let got = v.get(k);
    assert_eq!((got.sport, got.icmp_id), (0, 80));
}

const ICMP_STATES: &str = "add 100 check-state\n\
     add 200 allow icmp from 10.0.0.0/8 to any keep-state\n\
     add 250 allow ipv6-icmp from 2001:db8::/64 to any keep-state\n\
     add 300 allow udp from 10.0.0.0/8 to any keep-state\n\
     add 400 deny ip from any to any\n";

#[test]
fn icmp_states_admit_the_reply_of_their_query_and_errors_about_their_flows() {
    let ping = icmp("10.0.0.5", "192.0.2.9", 8, 7);
    let ping8 = icmp("10.0.0.5", "192.0.2.9", 8, 8);
    let mut dns = PacketInfo::new(ip("10.0.0.5"), ip("192.0.2.9"), 17);
    (dns.sport, dns.dport) = (5000, 53);
    let mut other_dns = dns;
    other_dns.sport = 5001;
    let mut to_other = dns;
    to_other.src = ip("10.0.0.6");
    let ping6 = icmp("2001:db8::5", "2001:db8:1::9", 128, 3);
    let steps: Vec<(Quoted, (Decision, u16), &str)> = vec![
        (
            (icmp("192.0.2.9", "10.0.0.5", 0, 7), None),
            (Decision::Deny, 400),
            "no state yet",
        ),
        (
            (ping, None),
            (Decision::Allow, 200),
            "the ping makes the state",
        ),
        (
            (icmp("192.0.2.9", "10.0.0.5", 0, 7), None),
            (Decision::Allow, 200),
            "its reply",
        ),
        (
            (icmp("192.0.2.9", "10.0.0.5", 0, 9), None),
            (Decision::Deny, 400),
            "a reply to another id",
        ),
        (
            (icmp("192.0.2.9", "10.0.0.5", 13, 7), None),
            (Decision::Deny, 400),
            "a timestamp request",
        ),
        (
            (icmp("192.0.2.9", "10.0.0.5", 17, 7), None),
            (Decision::Deny, 400),
            "an address mask request",
        ),
        (
            (icmp("192.0.2.9", "10.0.0.5", 8, 7), None),
            (Decision::Deny, 400),
            "an echo request in",
        ),
        (
            (ping8, None),
            (Decision::Allow, 200),
            "a ping whose id is its type",
        ),
        (
            (icmp("192.0.2.9", "10.0.0.5", 8, 8), None),
            (Decision::Deny, 400),
            "the same ports the other way",
        ),
        (
            (icmp("192.0.2.9", "10.0.0.5", 0, 8), None),
            (Decision::Allow, 200),
            "its reply",
        ),
        ((dns, None), (Decision::Allow, 300), "a UDP flow's state"),
        (
            icmp_error("198.51.100.1", "10.0.0.5", 3, Some(&dns)),
            (Decision::Allow, 300),
            "an error about it",
        ),
        (
            icmp_error("198.51.100.1", "10.0.0.5", 11, Some(&ping)),
            (Decision::Allow, 200),
            "time exceeded for the ping",
        ),
        (
            icmp_error("198.51.100.1", "10.0.0.5", 3, Some(&other_dns)),
            (Decision::Deny, 400),
            "about no state",
        ),
        (
            icmp_error("198.51.100.1", "10.0.0.6", 3, Some(&dns)),
            (Decision::Deny, 400),
            "to a host that did not send it",
        ),
        (
            icmp_error("198.51.100.1", "10.0.0.6", 3, Some(&to_other)),
            (Decision::Deny, 400),
            "about a flow with no state",
        ),
        (
            icmp_error("198.51.100.1", "10.0.0.5", 3, None),
            (Decision::Deny, 400),
            "quoting nothing readable",
        ),
        ((ping6, None), (Decision::Allow, 250), "an ICMPv6 echo"),
        (
            (icmp("2001:db8:1::9", "2001:db8::5", 129, 3), None),
            (Decision::Allow, 250),
            "its reply",
        ),
        (
            (icmp("2001:db8:1::9", "2001:db8::5", 129, 4), None),
            (Decision::Deny, 400),
            "another id's",
        ),
        (
            icmp_error("2001:db8:1::1", "2001:db8::5", 1, Some(&ping6)),
            (Decision::Allow, 250),
            "unreachable for it",
        ),
        (
            icmp_error(
                "2001:db8:1::1",
                "2001:db8::5",
                3,
                Some(&icmp("2001:db8::5", "2001:db8:1::9", 128, 4)),
            ),
            (Decision::Deny, 400),
            "for another",
        ),
    ];
    let mut fw = Fw::new(ICMP_STATES);
    for (k, (p, want, why)) in steps.iter().enumerate() {
        assert_eq!(fw.run_vec(&[*p], k as u64 + 2)[0], *want, "{why}: {p:?}");
    }
    // Errors and replies made no state: the pings', the DNS flow's, ICMPv6's.
    assert_eq!(fw.rs.states().len(), 4);
    // One packet at a time agrees: `eval`, and `eval_error` for the errors with
    // their quotes. An error given to `eval` (no quote) matches no state.
    let mut one = Fw::new(ICMP_STATES);
    for (k, ((p, q), want, why)) in steps.iter().enumerate() {
        assert_eq!(
            one.decide_quoted(*p, *q, k as u64 + 2),
            *want,
            "eval: {why}"
        );
    }
    let err = icmp_error("198.51.100.1", "10.0.0.5", 3, Some(&dns)).0;
    assert_eq!(one.decide(err), (Decision::Deny, 400));
    // The same as one vector (the states looked up together, errors left to
    // their walks), and the same again with every state in place before it.
    let mut batch = Fw::new(ICMP_STATES);
    let pkts: Vec<Quoted> = steps.iter().map(|s| s.0).collect();
    let want: Vec<(Decision, u16)> = steps.iter().map(|s| s.1).collect();
    assert_eq!(batch.run_vec(&pkts, 2), want);
    assert_eq!(
        batch.run_vec(&pkts[2..], 3),
        want[2..].to_vec(),
        "every state in place before the vector"
    );
}

#[test]
fn the_first_keep_state_rule_checks_states_too() {
    let mut fw = Fw::new(
        "add 100 pipe 3 tcp from any to me 22 setup keep-state\n\
         add 200 deny ip from any to any\n\
         pipe 3 config bw 1Mbit/s\n",
    );
    let p = syn();
    assert_eq!(fw.decide(p), (Decision::Pipe(3), 100));
    assert_eq!(fw.decide(reply(&p)), (Decision::Pipe(3), 100));
}

#[test]
fn limit_caps_states_per_masked_flow() {
    let mut fw = Fw::new("add 100 allow tcp from any to me 22 setup limit src-addr 2\n");
    for port in 1..=2 {
        let mut p = syn();
        p.sport = port;
        assert_eq!(fw.decide(p), (Decision::Allow, 100));
    }
    let mut p = syn();
    p.sport = 3;
    assert_eq!(
        fw.decide(p),
        (Decision::Deny, 100),
        "a third flow from one source"
    );
    p.src = ip("192.0.2.8");
    assert_eq!(
        fw.decide(p),
        (Decision::Allow, 100),
        "another source has its own limit"
    );
}

// ---- tables ------------------------------------------------------------------------

#[test]
fn table_kinds_match_and_give_tablearg() {
    let mut fw = Fw::new(
        "table ifs create type iface\n\
         table ifs add em0 11\n\
         table ports create type number\n\
         table ports add 22 12\n\
         table fl create type flow:src-ip,proto,dst-port\n\
         table fl add 192.0.2.7,6,22 13\n\
         add 100 pipe tablearg ip from any to any recv table(ifs) not tagged 1 tag 1\n",
    );
    assert_eq!(fw.decide(syn()).0, Decision::Pipe(11));
    let mut fw = Fw::new(
        "table ports create type number\ntable ports add 22 12\nadd 100 queue tablearg tcp from any to any lookup dst-port ports\n",
    );
    assert_eq!(fw.decide(syn()).0, Decision::Queue(12));
    let mut fw = Fw::new(
        "table fl create type flow:src-ip,proto,dst-port\ntable fl add 192.0.2.7,6,22 13\nadd 100 pipe tablearg ip from any to any flow table(fl)\n",
    );
    assert_eq!(fw.decide(syn()).0, Decision::Pipe(13));
    let mut p = syn();
    p.dport = 23;
    assert_eq!(fw.decide(p).0, Decision::Deny);
    // The source port (syn() comes from 40000), and not the destination's.
    let mut fw = Fw::new(
        "table sp create type number
table sp add 40000 14
add 100 pipe tablearg tcp from any to any lookup src-port sp
",
    );
    assert_eq!(fw.decide(syn()).0, Decision::Pipe(14));
    let mut p = syn();
    (p.sport, p.dport) = (22, 40000);
    assert_eq!(fw.decide(p).0, Decision::Deny);
}

#[test]
fn table_with_value_matches_only_that_value() {
    let mut fw = Fw::new(
        "table t create\ntable t add 192.0.2.0/24 1\ntable t add 2001:db8::/32 2\n\
         add 100 allow ip from table(t,2) to any\n",
    );
    assert_eq!(fw.decide(syn()).0, Decision::Deny);
    let p6 = PacketInfo::new(ip("2001:db8::7"), ip("2001:db8::1"), 17);
    assert_eq!(fw.decide(p6).0, Decision::Allow);
}

#[test]
fn hash_tables_match_host_addresses_exactly() {
    let mut fw = Fw::new(
        "table h create type addr:hash\ntable h add 192.0.2.7 9\ntable h add 2001:db8::7 10\n\
         add 100 pipe tablearg ip from table(h) to any\n",
    );
    assert_eq!(fw.decide(syn()).0, Decision::Pipe(9));
    let p6 = PacketInfo::new(ip("2001:db8::7"), ip("2001:db8::1"), 17);
    assert_eq!(fw.decide(p6).0, Decision::Pipe(10));
    let mut other = syn();
    other.src = ip("192.0.2.8");
    assert_eq!(fw.decide(other).0, Decision::Deny);
    assert!(
        fw.rs
            .execute("table h add 192.0.2.0/24", 1, NO_COUNTERS)
            .is_err(),
        "hosts only"
    );
    assert_eq!(
        fw.rs.table_list("h").unwrap(),
        "--- table(h), type addr:hash ---\n192.0.2.7 9\n2001:db8::7 10\n"
    );
}

#[test]
fn table_changes_reach_the_next_program() {
    let mut fw = Fw::new(
        "add 100 deny ip from table(bad) to any\nadd 200 allow ip from any to any\n\
         table bad create\n",
    );
    assert_eq!(fw.rs.table("bad").unwrap().ttype(), TableType::Addr);
    assert_eq!(fw.decide(syn()).0, Decision::Allow);
    fw.rs
        .execute("table bad add 192.0.2.0/25", 1, NO_COUNTERS)
        .unwrap();
    assert_eq!(fw.decide(syn()).0, Decision::Deny);
    assert_eq!(
        fw.rs.table_list("bad").unwrap(),
        "--- table(bad), type addr ---\n192.0.2.0/25 0\n"
    );
    fw.rs
        .execute("table bad delete 192.0.2.0/25", 1, NO_COUNTERS)
        .unwrap();
    assert_eq!(fw.decide(syn()).0, Decision::Allow);
    assert!(fw.rs.table_destroy("bad").is_err(), "in use");
    let e = fw
        .rs
        .execute(
            "add 300 allow ip from any to any via table(bad)",
            4,
            NO_COUNTERS,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "4:38: table bad has type addr, the rule needs iface"
    );
    let e = fw.rs.table_destroy("bad").unwrap_err();
    assert_eq!(e.to_string(), "table bad is in use by rule 100");
}

/// FreeBSD's `table NAME add KEY [VALUE] [KEY [VALUE]]...` and `delete KEY...`:
/// many entries in one command, all of them or none.
#[test]
fn one_table_command_adds_and_deletes_many_entries_all_or_none() {
    let mut rs = Ruleset::new(RulesetConfig {
        table_max_entries: 4,
        ..Default::default()
    });
    let run = |rs: &mut Ruleset, c: &str| rs.execute(c, 1, NO_COUNTERS).map(|_| ());
    run(&mut rs, "table t create").unwrap();
    run(&mut rs, "table t add 192.0.2.1 5").unwrap();
    run(&mut rs, "table t add 192.0.2.1 7 192.0.2.2 8 192.0.2.0/28").unwrap();
    let list = |rs: &Ruleset| rs.table_list("t").unwrap();
    let three = "--- table(t), type addr ---\n192.0.2.0/28 0\n192.0.2.1/32 7\n192.0.2.2/32 8\n";
    assert_eq!(list(&rs), three);
    // A bad key, named by its column: nothing changes.
    let e = run(&mut rs, "table t add 192.0.2.3 1 bogus 2").unwrap_err();
    assert_eq!(e.to_string(), "1:25: bad key 'bogus'");
    // The table holds 4: the fifth fails, and the value replaced before it is
    // put back.
    let e = run(&mut rs, "table t add 192.0.2.1 9 192.0.2.3 1 192.0.2.4 1").unwrap_err();
    assert!(e.to_string().starts_with("1:37: "), "{e}");
    assert_eq!(list(&rs), three);
    // The word after a key is its value (FreeBSD's pairs).
    let e = run(&mut rs, "table t add 192.0.2.5 192.0.2.6").unwrap_err();
    assert!(e.to_string().contains("a value"), "{e}");
    // Deletions: all, or none when one is not there.
    let e = run(&mut rs, "table t delete 192.0.2.1 192.0.2.9").unwrap_err();
    assert!(e.to_string().starts_with("1:26: "), "{e}");
    assert_eq!(list(&rs), three);
    run(&mut rs, "table t delete 192.0.2.1 192.0.2.0/28").unwrap();
    assert_eq!(list(&rs), "--- table(t), type addr ---\n192.0.2.2/32 8\n");
}

#[test]
fn big_address_tables_compile_to_poptrie_and_agree() {
    let mut t = Table::new(TableType::Addr, 1 << 20);
    for i in 0..3000u32 {
        let a = std::net::Ipv4Addr::from(0x0a00_0000 | (i << 8));
        t.add(TableKey::Addr(IpPrefix::new(a.into(), 24)), i)
            .unwrap();
    }
    t.add(TableKey::Addr(IpPrefix::new(ip("10.0.0.0"), 8)), 9999)
        .unwrap();
    // Hosts inside a /24, in the last level of the walk, and a /30 among them.
    for h in [0u8, 1, 63, 64, 200, 255] {
        let a = std::net::Ipv4Addr::new(10, 0, 7, h);
        t.add(TableKey::Addr(IpPrefix::host(a.into())), 5000 + h as u32)
            .unwrap();
    }
    t.add(TableKey::Addr(IpPrefix::new(ip("10.0.7.100"), 30)), 4444)
        .unwrap();
    let c = t.compile();
    assert!(matches!(
        &c,
        crate::table::CompiledTable::Addr {
            v4: crate::table::Lpm::Poptrie(_),
            ..
        }
    ));
    assert_eq!(c.lookup_addr(ip("10.0.5.1")), Some(5));
    assert_eq!(c.lookup_addr(ip("10.255.0.1")), Some(9999));
    assert_eq!(c.lookup_addr(ip("11.0.0.1")), None);
    for h in [0u8, 1, 63, 64, 200, 255] {
        let a = format!("10.0.7.{h}");
        assert_eq!(c.lookup_addr(ip(&a)), Some(5000 + h as u32), "{a}");
    }
    assert_eq!(c.lookup_addr(ip("10.0.7.2")), Some(7));
    assert_eq!(c.lookup_addr(ip("10.0.7.62")), Some(7));
    assert_eq!(c.lookup_addr(ip("10.0.7.101")), Some(4444));
    assert_eq!(c.lookup_addr(ip("10.0.7.104")), Some(7));
    let mut small = Table::new(TableType::Addr, 2);
    small
        .add(TableKey::Addr(IpPrefix::host(ip("1.1.1.1"))), 1)
        .unwrap();
    small
        .add(TableKey::Addr(IpPrefix::host(ip("1.1.1.2"))), 1)
        .unwrap();
    let e = small.add(TableKey::Addr(IpPrefix::host(ip("1.1.1.3"))), 1);
    assert_eq!(e, Err(crate::table::TableError::Full));
}

// ---- sets, counters, commands ---------------------------------------------------------

#[test]
fn sets_disable_move_and_swap() {
    let mut fw = Fw::new(
        "add 100 set 1 deny ip from any to any\n\
         add 200 set 2 pipe 2 ip from any to any\n\
         add 300 allow ip from any to any\n\
         pipe 2 config\n",
    );
    assert_eq!(fw.decide(syn()), (Decision::Deny, 100));
    fw.rs.execute("set disable 1", 1, NO_COUNTERS).unwrap();
    assert_eq!(fw.decide(syn()), (Decision::Pipe(2), 200));
    fw.rs.execute("set swap 1 2", 1, NO_COUNTERS).unwrap();
    // Set 2 now holds rule 100 and is disabled; set 1 holds rule 200, enabled.
    assert_eq!(fw.decide(syn()), (Decision::Pipe(2), 200));
    fw.rs.execute("set move 1 to 2", 1, NO_COUNTERS).unwrap();
    assert_eq!(fw.decide(syn()), (Decision::Allow, 300));
    fw.rs.execute("set enable 2", 1, NO_COUNTERS).unwrap();
    assert_eq!(fw.decide(syn()), (Decision::Deny, 100));
    fw.rs
        .execute("set move rule 100 to 5", 1, NO_COUNTERS)
        .unwrap();
    assert!(fw.rs.list(Some(100)).starts_with("00100 set 5 deny"));
    fw.rs.execute("delete set 5", 1, NO_COUNTERS).unwrap();
    assert_eq!(fw.decide(syn()), (Decision::Pipe(2), 200));
    assert!(fw.rs.execute("set disable 32", 1, NO_COUNTERS).is_err());
}

#[test]
fn counters_are_per_worker_summed_and_zeroed() {
    let mut fw = Fw::new("add 100 count ip from any to any\nadd 200 allow tcp from any to any\n");
    let prog = fw.rs.program().unwrap();
    let states = fw.rs.states().clone();
    let mut w2 = Counters::new();
    let mut rng = 1;
    for _ in 0..3 {
        let _ = fw.run(&mut syn());
        let _ = prog.eval(&mut syn(), &Host, &states, &mut w2, 5, &mut rng);
    }
    let show = fw.rs.show(None, &[&fw.ctr, &w2]);
    assert_eq!(
        show,
        "00100          6          360 count ip from any to any\n\
         00200          6          360 allow tcp from any to any\n\
         65535          0            0 deny ip from any to any\n"
    );
    fw.rs.execute("zero 100", 1, &[&fw.ctr, &w2]).unwrap();
    let _ = fw.run(&mut syn());
    let show = fw.rs.show(None, &[&fw.ctr, &w2]);
    assert!(
        show.starts_with("00100          1           60 count"),
        "{show}"
    );
    assert!(
        show.contains("00200          7          420 allow"),
        "{show}"
    );
    // A new program keeps each rule's counts.
    fw.rs
        .execute("add 150 count udp from any to any", 1, NO_COUNTERS)
        .unwrap();
    let _ = fw.run(&mut syn());
    assert!(fw
        .rs
        .show(Some(200), &[&fw.ctr, &w2])
        .contains("          8          480"));
}

#[test]
fn shared_counters_count_as_owned_ones_and_zero_by_baseline() {
    let text = "add 100 count ip from any to any\nadd 200 allow log tcp from any to any\n";
    let mut fw = Fw::new(text);
    let prog = fw.rs.program().unwrap();
    let states = fw.rs.states().clone();
    let shared = SharedCounters::new();
    let mut rng = 1;
    let mut batch = vec![syn(); 5];
    let mut out = fw.run_batch(&mut batch.clone(), 2);
    prog.eval_batch(&mut batch, &mut out, &Host, &states, &shared, 2, &mut rng);
    for _ in 0..3 {
        let _ = fw.run(&mut syn());
        let _ = prog.eval(&mut syn(), &Host, &states, &shared, 5, &mut rng);
    }
    // The same counts either way; `show` takes either (and both, as trait objects).
    let own = fw.rs.show(None, &[&fw.ctr]);
    assert_eq!(fw.rs.show(None, &[&shared]), own);
    assert!(
        own.starts_with("00100          8          480 count"),
        "{own}"
    );
    assert_eq!(shared.get(fw.rs.rules().next().unwrap().1).last, 5);
    assert_eq!((shared.logged(), fw.ctr.logged), (8, 8));
    let both: [&dyn CounterSource; 2] = [&fw.ctr, &shared];
    assert!(fw
        .rs
        .show(None, &both)
        .starts_with("00100         16          960"));
    assert_eq!(
        shared
            .snapshot()
            .get(fw.rs.rules().nth(1).unwrap().1)
            .packets,
        8
    );
    // `zero` leaves the cells to their worker: it records a baseline.
    fw.rs.zero(Some(100), &both).unwrap();
    assert_eq!(shared.get(fw.rs.rules().next().unwrap().1).packets, 8);
    let _ = prog.eval(&mut syn(), &Host, &states, &shared, 6, &mut rng);
    assert!(fw
        .rs
        .show(Some(100), &both)
        .starts_with("00100          1           60"));
    // A new program (a rule before them): the cells move, each rule keeps its counts.
    fw.rs
        .execute("add 50 count udp from any to any", 1, &both)
        .unwrap();
    let prog = fw.rs.program().unwrap();
    let _ = prog.eval(&mut syn(), &Host, &states, &shared, 7, &mut rng);
    let show = fw.rs.show(None, &[&shared]);
    assert!(
        show.starts_with("00050          0            0 count udp"),
        "{show}"
    );
    assert!(
        show.contains("00200         10          600 allow"),
        "{show}"
    );
}

#[test]
fn show_reads_shared_counters_while_their_worker_counts() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    // Programs change under the worker (each a re-layout of its cells, up to 300
    // rules: bigger blocks) while `show` reads: counts never go back, and none is lost.
    let mut rs = Ruleset::default();
    rs.load("add 65000 count ip from any to any\nadd 65001 allow ip from any to any\n")
        .unwrap();
    let id = rs.rules().next().unwrap().1;
    let published = Mutex::new(rs.program().unwrap());
    let states = rs.states().clone();
    let shared = SharedCounters::new();
    let stop = AtomicBool::new(false);
    // Vectors the worker has counted: each program waits for one more, so that
    // the worker counts under every one.
    let rounds = std::sync::atomic::AtomicU64::new(0);
    let sent = std::thread::scope(|sc| {
        let worker = sc.spawn(|| {
            let mut rng = 1;
            let mut sent = 0u64;
            let mut batch = vec![syn(); 32];
            let mut out = vec![
                Verdict {
                    decision: Decision::Deny,
                    rule: 0,
                    log: false
                };
                32
            ];
            while !stop.load(Ordering::Relaxed) {
                let prog: Arc<Program> = published.lock().unwrap().clone();
                prog.eval_batch(&mut batch, &mut out, &Host, &states, &shared, 1, &mut rng);
                let _ = prog.eval(&mut syn(), &Host, &states, &shared, 1, &mut rng);
                sent += 33;
                rounds.fetch_add(1, Ordering::Relaxed);
            }
            sent
        });
        let mut seen = 0;
        for n in 0..300u32 {
            let r = rounds.load(Ordering::Relaxed);
            while rounds.load(Ordering::Relaxed) == r {
                std::thread::yield_now();
            }
            rs.execute(
                &format!("add {} count udp from any to any", 100 + n),
                1,
                &[&shared],
            )
            .unwrap();
            *published.lock().unwrap() = rs.program().unwrap();
            let c = rs.counter(id, &[&shared]).packets;
            assert!(c >= seen, "{c} after {seen}");
            seen = c;
        }
        stop.store(true, Ordering::Relaxed);
        worker.join().unwrap()
    });
    assert!(sent > 0);
    assert_eq!(rs.counter(id, &[&shared]).packets, sent);
    assert_eq!(shared.snapshot().get(id).packets, sent);
}

#[test]
fn commands_answer_like_ipfw() {
    let mut rs = Ruleset::default();
    let out = rs
        .execute(
            "ipfw add allow tcp from any to me 22 setup keep-state",
            1,
            NO_COUNTERS,
        )
        .unwrap();
    assert_eq!(out, "00100 allow tcp from any to me 22 setup keep-state\n");
    rs.execute("add 100 deny ip from any to any", 2, NO_COUNTERS)
        .unwrap();
    assert_eq!(rs.rules().count(), 2);
    assert!(rs.execute("delete 100 7", 3, NO_COUNTERS).is_err());
    assert_eq!(rs.rules().count(), 2, "a failed delete deletes nothing");
    rs.execute("delete 100", 3, NO_COUNTERS).unwrap();
    assert_eq!(rs.rules().count(), 0);
    rs.execute("add 10 deny ip from any to any", 4, NO_COUNTERS)
        .unwrap();
    rs.execute("flush", 5, NO_COUNTERS).unwrap();
    assert_eq!(rs.list(None), "65535 deny ip from any to any\n");
    let e = rs.execute("set frob 1", 9, NO_COUNTERS).unwrap_err();
    assert_eq!(
        e.to_string(),
        "9:5: expected 'enable', 'disable', 'move' or 'swap', found 'frob'"
    );
}

// ---- round trip, property -------------------------------------------------------------

mod prop {
    use super::*;
    use proptest::prelude::*;

    fn pick(items: &'static [&'static str]) -> impl Strategy<Value = String> {
        proptest::sample::select(items).prop_map(|s| s.to_string())
    }

    fn addr() -> impl Strategy<Value = String> {
        prop_oneof![
            pick(&[
                "any",
                "me",
                "me6",
                "table(a)",
                "table(a,3)",
                "not any",
                "not me"
            ]),
            (any::<u32>(), 0u8..=32)
                .prop_map(|(a, l)| format!("{}/{l}", std::net::Ipv4Addr::from(a))),
            (any::<u128>(), 0u8..=128)
                .prop_map(|(a, l)| format!("{}/{l}", std::net::Ipv6Addr::from(a))),
            (any::<u32>(), any::<u32>()).prop_map(|(a, m)| format!(
                "{}:{}",
                std::net::Ipv4Addr::from(a),
                std::net::Ipv4Addr::from(m)
            )),
            (any::<u32>(), any::<u32>()).prop_map(|(a, b)| format!(
                "{{ {} or {} }}",
                std::net::Ipv4Addr::from(a),
                std::net::Ipv4Addr::from(b)
            )),
        ]
    }

    fn ports() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            (any::<u16>(), any::<u16>()).prop_map(|(a, b)| format!(
                " {},{}-{}",
                a,
                a.min(b),
                a.max(b)
            )),
            pick(&[" ssh", " 22,http"]),
        ]
    }

    fn opt() -> impl Strategy<Value = String> {
        pick(&[
            "in",
            "out",
            "not in",
            "via em0",
            "recv any",
            "xmit table(ifs)",
            "setup",
            "established",
            "tcpflags syn,!ack",
            "tcpflags fin,urg,cwr,!ece",
            "frag",
            "icmptypes 0,8",
            "icmp6types 1-4,255",
            "ip4",
            "ip6",
            "tagged 1-5",
            "iplen 0-9",
            "ipttl 1",
            "iptos throughput,!congestion",
            "dscp cs1,af42",
            "tcpoptions window,!cc",
            "tcpwin 1",
            "tcpdatalen 0-2",
            "mac any 01:02:03:04:05:06",
            "mac-type vlan",
            "layer2",
            "antispoof",
            "not verrevpath",
            "lookup src-port p",
            "flow table(f)",
            "{ in or not out or via x0 }",
            "keep-state",
            "limit src-port dst-addr 5",
            "tag 7",
            "untag tablearg",
        ])
    }

    fn rule() -> impl Strategy<Value = String> {
        (
            pick(&[
                "",
                "100 ",
                "65534 ",
                "7 set 31 ",
                "prob 0.5 ",
                "200 prob 0.0001 ",
            ]),
            pick(&[
                "allow",
                "deny",
                "reject",
                "unreach 3",
                "unreach6 port",
                "reset",
                "count",
                "skipto 5",
                "skipto tablearg",
                "call 9",
                "return",
                "check-state",
                "pipe 3",
                "queue tablearg",
            ]),
            pick(&["", " log"]),
            pick(&[
                "ip",
                "all",
                "tcp",
                "udp",
                "ip6",
                "ip4",
                "{ tcp or 17 }",
                "200",
            ]),
            addr(),
            ports(),
            addr(),
            ports(),
            proptest::collection::vec(opt(), 0..5),
        )
            .prop_map(|(n, a, l, p, s, sp, d, dp, o)| {
                format!("{n}{a}{l} {p} from {s}{sp} to {d}{dp} {}", o.join(" "))
            })
    }

    fn match_opt() -> impl Strategy<Value = String> {
        pick(&[
            "in",
            "out",
            "via em0",
            "recv any",
            "xmit em1",
            "recv table(ifs)",
            "setup",
            "established",
            "tcpflags syn,!ack",
            "tcpflags fin,!rst",
            "frag",
            "icmptypes 0,8",
            "icmp6types 128-135",
            "ip4",
            "ip6",
            "tagged 1-2",
            "iplen 0-200",
            "ipttl 64",
            "iptos lowdelay",
            "dscp 0-10",
            "tcpoptions mss,!ts",
            "tcpwin 0-30000",
            "tcpdatalen 0",
            "mac any 01:01:01:01:01:01",
            "mac-type ip",
            "layer2",
            "antispoof",
            "verrevpath",
            "lookup dst-port p",
        ])
    }

    fn packet() -> impl Strategy<Value = PacketInfo> {
        any::<[u8; 16]>().prop_map(|b| {
            let v6 = b[0] & 1 != 0;
            let a = |x: u8| -> IpAddr {
                if v6 {
                    std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(x % 4)).into()
                } else {
                    std::net::Ipv4Addr::new(10 * (x & 1), 0, 0, x % 4).into()
                }
            };
            let protos = [6, 17, 1, 58];
            let mut p = PacketInfo::new(a(b[1]), a(b[2]), protos[b[3] as usize % 4]);
            p.sport = u16::from(b[4]);
            p.dport = u16::from(b[5]);
            p.tcp_flags = b[6];
            p.tcp_opts = b[7];
            p.tcp_win = u16::from(b[8]) << 8;
            p.tcp_datalen = u16::from(b[9] & 3);
            p.icmp_type = b[10] % 4 * 43;
            p.ip_len = u16::from(b[11]);
            p.ttl = if b[12] & 1 != 0 { 64 } else { b[12] };
            p.tos = b[13];
            p.frag = b[14] & 1 != 0;
            p.dir = if b[14] & 2 != 0 {
                Direction::Out
            } else {
                Direction::In
            };
            let names = ["em0", "em1", "lo0"];
            if b[14] & 4 != 0 {
                p.rcvif = ifr(u32::from(b[15] % 3), names[b[15] as usize % 3]);
            }
            if b[14] & 8 != 0 {
                p.xmitif = ifr(u32::from(b[15] / 3 % 3), names[b[15] as usize / 3 % 3]);
            }
            p.layer2 = b[14] & 16 != 0;
            if b[14] & 32 != 0 {
                p.mac = Some(MacHdr {
                    dst: [b[15] & 1; 6],
                    src: [1; 6],
                    ethertype: 0x0800 | u16::from(b[13] & 1),
                });
            }
            for t in 0..b[15] % 3 {
                p.tags.add(u16::from(t) + 1);
            }
            p
        })
    }

    /// Whether `ip from any to any OPTS` matches, with tables `ifs` (em0) and `p` (22).
    fn matches_opts(opts: &str, p: PacketInfo) -> bool {
        let mut fw = Fw::new(&format!(
            "table ifs create type iface\ntable ifs add em0\ntable p create type number\n\
             table p add 22\nadd 100 allow ip from any to any {opts}"
        ));
        fw.decide(p).0 == Decision::Allow
    }

    /// A rule over the small world of `packet()` (addresses 0.0.0.0-3, 10.0.0.0-3,
    /// 2001:db8::0-3; ports 0-255; tags 1-2), so that rules match often, with every
    /// kind of action and modifier: those a rule-major run takes (terminal actions,
    /// `count`, `skipto N`, `return`, `log`, tags, tables) and those that end it
    /// (`check-state`, `keep-state`, `limit`, `prob`, `call`, `skipto tablearg`).
    /// Rule numbers and targets are drawn from 1-299, so that skips often land on
    /// rules next to each other (packets parked for neighbouring rules).
    fn small_rule() -> impl Strategy<Value = String> {
        let action = prop_oneof![
            10 => pick(&["allow", "deny", "reject", "unreach 3", "unreach6 port", "reset",
                        "pipe 3", "queue tablearg", "pipe tablearg"]),
            8 => Just("count".to_string()),
            4 => (1u16..300).prop_map(|n| format!("skipto {n}")),
            1 => Just("return".to_string()),
            1 => prop_oneof![
                Just("skipto tablearg".to_string()),
                Just("check-state".to_string()),
                (1u16..300).prop_map(|n| format!("call {n}")),
            ],
        ];
        let addr = || {
            pick(&[
                "any",
                "any",
                "any",
                "me",
                "10.0.0.1",
                "10.0.0.0/31",
                "0.0.0.2",
                "not 10.0.0.3",
                "table(a)",
                "table(a,3)",
                "2001:db8::1",
                "2001:db8::/127",
                "{ 0.0.0.1 or 10.0.0.2 }",
                "not any",
                "me6",
            ])
        };
        let ports = || pick(&["", "", "", " 0-100", " 11", " 22,33,200-255"]);
        let opt = prop_oneof![
            12 => match_opt(),
            2 => pick(&["tag 1", "untag 2", "tag 2", "tagged 1", "tag tablearg", "untag tablearg",
                        "{ tagged 2 or out }", "{ not in or frag or ip6 }", "not recv em1",
                        "{ not tagged 1 or iplen 0-100 }"]),
            1 => pick(&["keep-state", "limit src-addr 2"]),
        ];
        (
            1u16..300,
            prop_oneof![24 => Just(""), 1 => Just("prob 0.5 ")],
            action,
            prop_oneof![3 => Just(""), 1 => Just(" log")],
            pick(&["ip", "ip", "tcp", "udp", "ip6", "{ tcp or 17 }", "icmp"]),
            addr(),
            ports(),
            addr(),
            ports(),
            proptest::collection::vec(opt, 0..3),
        )
            .prop_map(|(n, prob, a, l, p, s, sp, d, dp, o)| {
                format!(
                    "add {n} {prob}{a}{l} {p} from {s}{sp} to {d}{dp} {}",
                    o.join(" ")
                )
            })
    }

    const SMALL_TABLES: &str = "table a create\ntable a add 10.0.0.1 3\ntable a add 10.0.0.2 500\n\
        table a add 2001:db8::2 7\ntable a add 0.0.0.0/31 900\n\
        table ifs create type iface\ntable ifs add em0 4\n\
        table p create type number\ntable p add 22\ntable p add 11 600\n";

    /// A ruleset of `rules` (those that do not parse left out), default deny.
    fn small_ruleset(rules: &[String], cfg: RulesetConfig) -> Ruleset {
        let mut rs = Ruleset::new(cfg);
        rs.load(SMALL_TABLES).unwrap();
        for (i, r) in rules.iter().enumerate() {
            let _ = rs.execute(r, i + 1, NO_COUNTERS);
        }
        rs
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The rule-major run plus the walks (`eval_batch` through `eval_vec`) gives
        /// what `eval` gives packet by packet: verdicts, tags, every rule's counters
        /// (packets, bytes, last), `log`'s count, the states and the `prob` coin.
        #[test]
        fn vectors_give_what_eval_gives_packet_by_packet(
            rules in proptest::collection::vec(small_rule(), 1..30),
            pkts in proptest::collection::vec(packet(), 1..150),
            echoes in proptest::collection::vec((0u8..4, any::<proptest::sample::Index>()), 150),
            shared in any::<bool>(),
        ) {
            let mut cfg = RulesetConfig::default();
            cfg.states.max_states = 48;
            let (mut one, mut batch) = (small_ruleset(&rules, cfg), small_ruleset(&rules, cfg));
            let prog = one.program().unwrap();
            let bprog = batch.program().unwrap();
            let (ostates, bstates) = (one.states().clone(), batch.states().clone());
            let (mut octr, mut bctr, sctr) = (Counters::new(), Counters::new(), SharedCounters::new());
            let (mut orng, mut brng) = (7u64, 7u64);
            // Half the packets repeat an earlier packet's flow, or answer it, so that
            // a vector holds packets of one flow: a state one installs is met by a
            // later one of the same vector (whose lookup made before the walks missed).
            let mut pkts: Vec<PacketInfo> = pkts;
            for k in 1..pkts.len() {
                let (how, j) = echoes[k];
                let j = j.index(k);
                match how {
                    0 => pkts[k] = pkts[j],
                    1 => pkts[k] = reply(&pkts[j]),
                    _ => {}
                }
            }
            for (k, p) in pkts.iter_mut().enumerate() {
                p.len = 40 + k as u32;
            }
            // Two rounds, so that states made by the first meet the second.
            for now in [1_000_000u64, 2_000_000] {
                let mut by_eval = pkts.clone();
                let want: Vec<Verdict> = by_eval
                    .iter_mut()
                    .map(|p| prog.eval(p, &Host, &ostates, &mut octr, now, &mut orng))
                    .collect();
                let mut got = vec![want[0]; pkts.len()];
                if shared {
                    bprog.eval_batch(&mut pkts, &mut got, &Host, &bstates, &sctr, now, &mut brng);
                } else {
                    bprog.eval_batch(&mut pkts, &mut got, &Host, &bstates, &mut bctr, now, &mut brng);
                }
                prop_assert_eq!(&got, &want, "{:#?}", rules);
                prop_assert_eq!(&pkts, &by_eval, "tags");
                prop_assert_eq!(brng, orng, "prob's coin");
            }
            for id in prog.rule_ids() {
                let b = if shared { sctr.get(id) } else { bctr.get(id) };
                prop_assert_eq!(b, octr.get(id), "rule id {}", id);
            }
            let logged = if shared { sctr.logged() } else { bctr.logged };
            prop_assert_eq!(logged, octr.logged);
            let (a, b) = (ostates.stats(), bstates.stats());
            prop_assert_eq!(
                (a.states, a.created, a.hits, a.full, a.limited),
                (b.states, b.created, b.hits, b.full, b.limited)
            );
        }
    }

    proptest! {
        #[test]
        fn parse_list_parse_gives_the_same_rule(text in rule()) {
            let r = parse_rule(&text, 1).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
            let listed = r.to_string();
            let again = parse_rule(&listed, 1).map_err(|e| TestCaseError::fail(format!("{listed}: {e}")))?;
            prop_assert_eq!(&again, &r, "{}", listed);
            prop_assert_eq!(again.to_string(), listed);
        }

        #[test]
        fn not_and_or_and_conjunction_hold(a in match_opt(), b in match_opt(), p in packet()) {
            let ma = matches_opts(&a, p);
            let mb = matches_opts(&b, p);
            prop_assert_eq!(matches_opts(&format!("not {a}"), p), !ma, "not {}", a);
            prop_assert_eq!(matches_opts(&format!("{{ {a} or {b} }}"), p), ma || mb);
            prop_assert_eq!(matches_opts(&format!("{{ not {a} or {b} }}"), p), !ma || mb);
            prop_assert_eq!(matches_opts(&format!("{a} {b}"), p), ma && mb);
        }

        #[test]
        fn the_parser_never_panics(text in "[ -~]{0,80}") {
            let _ = parse_rule(&text, 1);
            let _ = Ruleset::default().execute(&text, 1, NO_COUNTERS);
        }
    }
}

/// The vector `eval_batch` makes on its stack at every call keeps no room for ICMP
/// errors' quotes, which `eval_batch` never has: inline, their 2.5 KiB were written
/// and copied at every call, 1.9 ns a packet on bench fw's allow-1rule. (The
/// vector a worker keeps makes its room at its first error.)
#[test]
fn the_vector_of_eval_batch_keeps_no_room_for_quotes() {
    let size = std::mem::size_of::<PacketVec>();
    assert!(size <= 11 * 1024, "PacketVec is {size} bytes");
}

#[test]
fn fwd_parses_in_freebsd_form_with_its_alias_and_lists_back() {
    for text in [
        "00100 fwd 198.18.1.2 ip from any to 198.18.5.0/24",
        "00200 fwd 198.18.1.2,8080 tcp from any to any 80",
        "00300 fwd 2001:2::1 ip6 from any to 2001:2:5::/48",
        "00400 fwd 2001:2::1,3128 tcp from any to any 80",
    ] {
        let r = parse_rule(text, 1).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(r.to_string(), text);
    }
    let r = parse_rule("100 forward 198.18.1.2 ip from any to any", 1).unwrap();
    assert_eq!(r.action, Action::Fwd(ip("198.18.1.2"), None));
    assert_eq!(
        r.to_string(),
        "00100 fwd 198.18.1.2 ip from any to any",
        "the alias lists as fwd"
    );
}

#[test]
fn fwd_without_a_usable_next_hop_is_refused() {
    for bad in [
        "fwd ip from any to any",
        "fwd",
        "fwd 198.18.1 ip from any to any",
        "fwd 198.18.1.2,http ip from any to any",
        "fwd 198.18.1.2,70000 ip from any to any",
        "fwd 198.18.1.2, ip from any to any",
        "fwd 0.0.0.0 ip from any to any",
        "fwd 224.0.0.1 ip from any to any",
        "fwd 255.255.255.255 ip from any to any",
        "fwd :: ip6 from any to any",
        "fwd ff02::1 ip6 from any to any",
        "fwd [2001:2::1]:80 ip6 from any to any",
    ] {
        let e = parse_rule(bad, 1).unwrap_err();
        assert!(
            e.expected.contains("next-hop address") || e.expected.contains("an action"),
            "{bad}: {e}"
        );
    }
    let e = parse_rule("fwd 198.18.1 ip from any to any", 2).unwrap_err();
    assert_eq!(
        e.to_string(),
        "2:5: expected a next-hop address (ADDR[,PORT]), found '198.18.1'"
    );
}

#[test]
fn fwd_verdict_carries_the_next_hop_and_a_miss_goes_on() {
    let mut fw = Fw::new(
        "add 100 fwd 198.18.1.2,8080 tcp from any to 10.0.0.1 22\n\
         add 200 fwd 2001:2::1 ip6 from any to any\n\
         add 300 allow ip from any to any\n",
    );
    let hop = |fw: &mut Fw, d: Decision| match d {
        Decision::Fwd(i) => fw.rs.program().unwrap().fwd_hop(i),
        _ => None,
    };
    let (d, rule) = fw.decide(syn());
    assert_eq!(rule, 100);
    assert_eq!(hop(&mut fw, d), Some((ip("198.18.1.2"), Some(8080))));
    let mut other = syn();
    other.dport = 23;
    assert_eq!(fw.decide(other), (Decision::Allow, 300));
    let mut p6 = PacketInfo::new(ip("2001:2::7"), ip("2001:2:5::9"), 17);
    p6.ip_len = 48;
    p6.len = 48;
    let (d, rule) = fw.decide(p6);
    assert_eq!(rule, 200);
    assert_eq!(hop(&mut fw, d), Some((ip("2001:2::1"), None)));
    // The batch evaluator gives the same verdict as the one-packet walk.
    let mut batch = [syn(), other];
    let v = fw.run_batch(&mut batch, 10);
    assert_eq!(
        hop(&mut fw, v[0].decision),
        Some((ip("198.18.1.2"), Some(8080)))
    );
    assert_eq!(v[1].decision, Decision::Allow);
}
