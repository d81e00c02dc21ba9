//! `mpstack run --sysctl NAME=VALUE`: the TCP settings of a node, under the names
//! FreeBSD's sysctl(8) MIB gives them (`net.inet.tcp.*`), so that `--sysctl
//! net.inet.tcp.cc.algorithm=newreno` does here what it does there. Each name maps
//! onto a field of `net::tcp::TcpConfig`; the node applies them before it starts,
//! to every connection. `net.inet.ip.sourceroute` and
//! `net.inet.ip.accept_sourceroute` are here too, in a table of their own over
//! `net::SourceRouting` ([`apply_ip`], [`list_ip`]).
//!
//! What it owns: the table of names. What it may call: nothing but `net`'s types.

use dev::Duration;
use net::tcp::{CongestionControl, TcpConfig};
use net::SourceRouting;

/// One setting of a `T` (TCP's config, the source routing switches, dummynet's
/// limits): its name, what it takes, and how to read and set it.
struct Knob<T> {
    name: &'static str,
    takes: &'static str,
    get: fn(&T) -> String,
    set: fn(&mut T, &str) -> Option<()>,
}

/// Every knob of `knobs` with its value in `v`, as `sysctl -a` lists them.
fn list_of<T>(knobs: &[Knob<T>], v: &T) -> Vec<(String, String)> {
    knobs
        .iter()
        .map(|k| (k.name.to_string(), (k.get)(v)))
        .collect()
}

/// Applies `NAME=VALUE` to `v` if NAME is one of `knobs` (`None` if not, or if
/// `arg` has no `=`); says what changed, as sysctl(8) does.
fn apply_in<T>(knobs: &[Knob<T>], v: &mut T, arg: &str) -> Option<Result<String, String>> {
    let (name, value) = arg.split_once('=')?;
    let k = knobs.iter().find(|k| k.name == name)?;
    let old = (k.get)(v);
    Some(match (k.set)(v, value) {
        Some(()) => Ok(format!("{name}: {old} -> {}", (k.get)(v))),
        None => Err(format!("{name}: '{value}' is not {}", k.takes)),
    })
}

/// Socket buffers (as `net::TcpBuffers` clamps them).
const SPACE: std::ops::RangeInclusive<usize> = 4 * 1024..=64 * 1024 * 1024;

fn flag(v: &str) -> Option<bool> {
    match v {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

fn millis(v: &str, range: std::ops::RangeInclusive<u64>) -> Option<Duration> {
    v.parse::<u64>()
        .ok()
        .filter(|ms| range.contains(ms))
        .map(Duration::from_millis)
}

fn bytes(v: &str) -> Option<usize> {
    v.parse::<usize>().ok().filter(|n| SPACE.contains(n))
}

/// A switch: a bool `$field` (of `TcpConfig`, `SourceRouting`), as 0 or 1.
macro_rules! flag_knob {
    ($name:expr, $field:ident) => {
        flag_knob!($name, $field, "0 or 1")
    };
    ($name:expr, $field:ident, $takes:expr) => {
        Knob {
            name: $name,
            takes: $takes,
            get: |c| u8::from(c.$field).to_string(),
            set: |c, v| {
                c.$field = flag(v)?;
                Some(())
            },
        }
    };
}

/// A time: `TcpConfig`'s Duration `$field`, in milliseconds from 1 to `$max`.
macro_rules! millis_knob {
    ($name:expr, $field:ident, $max:literal) => {
        Knob {
            name: $name,
            takes: concat!("milliseconds, 1 to ", stringify!($max)),
            get: |c| c.$field.as_millis().to_string(),
            set: |c, v| {
                c.$field = millis(v, 1..=$max)?;
                Some(())
            },
        }
    };
}

/// A count: `TcpConfig`'s integer `$field`, from `$lo` to `$hi` `$unit`.
macro_rules! count_knob {
    ($name:expr, $field:ident, $unit:literal, $lo:literal, $hi:literal) => {
        Knob {
            name: $name,
            takes: concat!($unit, ", ", stringify!($lo), " to ", stringify!($hi)),
            get: |c| c.$field.to_string(),
            set: |c, v| {
                c.$field = v.parse().ok().filter(|n| ($lo..=$hi).contains(n))?;
                Some(())
            },
        }
    };
}

/// One of dummynet's queue limits, `DnLimits`' `$field`: kept only if the limits
/// stay valid (`DnLimits::is_valid`).
macro_rules! limit_knob {
    ($name:expr, $field:ident, $takes:expr) => {
        Knob {
            name: $name,
            takes: $takes,
            get: |l| l.$field.to_string(),
            set: |l, v| {
                let new = fw::dummynet::DnLimits {
                    $field: v.parse().ok()?,
                    ..*l
                };
                new.is_valid().then(|| *l = new)
            },
        }
    };
}

/// A socket buffer: `TcpConfig`'s `$field`, in bytes within [`SPACE`].
macro_rules! bytes_knob {
    ($name:expr, $field:ident) => {
        Knob {
            name: $name,
            takes: "bytes, 4096 to 67108864",
            get: |c| c.$field.to_string(),
            set: |c, v| {
                c.$field = bytes(v)?;
                Some(())
            },
        }
    };
}

const KNOBS: &[Knob<TcpConfig>] = &[
    Knob {
        name: "net.inet.tcp.cc.algorithm",
        takes: "cubic, newreno or bbr",
        get: |c| match c.cc {
            CongestionControl::Cubic => "cubic".into(),
            CongestionControl::NewReno => "newreno".into(),
            CongestionControl::Bbr => "bbr".into(),
        },
        set: |c, v| {
            c.cc = match v {
                "cubic" => CongestionControl::Cubic,
                "newreno" => CongestionControl::NewReno,
                "bbr" => CongestionControl::Bbr,
                _ => return None,
            };
            Some(())
        },
    },
    // FreeBSD keeps HyStart++'s tunables under this branch; on or off here.
    flag_knob!("net.inet.tcp.cc.hystartplusplus", hystart),
    bytes_knob!("net.inet.tcp.sendspace", sndbuf),
    bytes_knob!("net.inet.tcp.recvspace", rcvbuf),
    Knob {
        // 0 acknowledges every segment at once.
        name: "net.inet.tcp.delayed_ack",
        takes: "0 or 1",
        get: |c| u8::from(!c.delack.is_zero()).to_string(),
        set: |c, v| {
            c.delack = if flag(v)? {
                TcpConfig::default().delack
            } else {
                Duration::ZERO
            };
            Some(())
        },
    },
    // RFC 1122 §4.2.3.2: an ACK is delayed by less than 500 ms.
    millis_knob!("net.inet.tcp.delacktime", delack, 499),
    flag_knob!("net.inet.tcp.sack.enable", sack),
    // Tail loss probes in recovery too (FreeBSD's RACK stack's tlp_in_recovery,
    // on by default); 0 for RFC 8985 §7.2's none in recovery.
    flag_knob!("net.inet.tcp.rack.tlp_in_recovery", tlp_in_recovery),
    // Segments past the MSS for the device to cut, or cut in software before a
    // device that cannot (Linux's GSO); 0: one MSS a segment.
    flag_knob!("net.inet.tcp.tso", tso),
    // RFC 5681 §4.1's restart window after an idle period (Linux's
    // tcp_slow_start_after_idle; FreeBSD has no switch for it).
    flag_knob!("net.inet.tcp.slowstart_after_idle", slowstart_after_idle),
    // Software LRO on interfaces without offload (FreeBSD sets it per interface,
    // `ifconfig IF lro`; here one switch for the node).
    flag_knob!("net.inet.tcp.lro", lro),
    Knob {
        // As FreeBSD: 1 window scaling and timestamps (RFC 7323), 0 neither, 2 window
        // scaling only, 3 timestamps only.
        name: "net.inet.tcp.rfc1323",
        takes:
            "0, 1, 2 or 3 (neither; window scaling and timestamps; scaling only; timestamps only)",
        get: |c| {
            match (c.window_scaling, c.timestamps) {
                (false, false) => "0",
                (true, true) => "1",
                (true, false) => "2",
                (false, true) => "3",
            }
            .into()
        },
        set: |c, v| {
            (c.window_scaling, c.timestamps) = match v {
                "0" => (false, false),
                "1" => (true, true),
                "2" => (true, false),
                "3" => (false, true),
                _ => return None,
            };
            Some(())
        },
    },
    Knob {
        // TIME_WAIT lasts twice this.
        name: "net.inet.tcp.msl",
        takes: "milliseconds, 1 to 120000",
        get: |c| (c.time_wait / 2).as_millis().to_string(),
        set: |c, v| {
            c.time_wait = millis(v, 1..=120_000)? * 2;
            Some(())
        },
    },
    millis_knob!("net.inet.tcp.rexmit_min", min_rto, 60000),
    Knob {
        // The window scale offered covers a buffer this large.
        name: "kern.ipc.maxsockbuf",
        takes: "bytes, 65536 to 4294967295",
        get: |c| c.max_sockbuf.to_string(),
        set: |c, v| {
            c.max_sockbuf =
                v.parse::<u64>()
                    .ok()
                    .filter(|n| (65_536..=4_294_967_295).contains(n))? as usize;
            Some(())
        },
    },
    // The retransmission timeout before a round trip is measured (RFC 6298's
    // initial RTO, 1 s).
    millis_knob!("net.inet.tcp.rexmit_initial", init_rto, 60000),
    // SYN-SENT and SYN-RECEIVED last at most this long.
    millis_knob!("net.inet.tcp.keepinit", keep_init, 3600000),
    // The idle time SO_KEEPALIVE probes after.
    millis_knob!("net.inet.tcp.keepidle", keep_idle, 86400000),
    millis_knob!("net.inet.tcp.keepintvl", keepalive_interval, 3600000),
    // FIN_WAIT_2 of a closed socket: this long without a segment from the peer,
    // or with fast_finwait2_recycle this long from the close; then dropped.
    millis_knob!("net.inet.tcp.finwait2_timeout", finwait2_timeout, 3600000),
    flag_knob!("net.inet.tcp.fast_finwait2_recycle", fast_finwait2_recycle),
    // A close with received data unread resets (RFC 9293 §3.6.1, Linux); 0 sends
    // the FIN, as FreeBSD.
    flag_knob!("net.inet.tcp.close_unread_rst", close_unread_rst),
    // A closed socket's data stalled by a shut window: this long after the window
    // closed (or the close, if later), whatever the peer answers and however often
    // it opens the window by less than a segment; then dropped.
    millis_knob!(
        "net.inet.tcp.persist_orphan_timeout",
        persist_orphan_timeout,
        3600000
    ),
    // Connections closed by their application and still live (orphans) the
    // node holds, split evenly among its workers; a close beyond them resets
    // the connection at once (tcp.orphandrop), as Linux's tcp_max_orphans.
    count_knob!(
        "net.inet.tcp.maxorphans",
        max_orphans,
        "connections",
        1,
        16777216
    ),
    Knob {
        // The bound on every connection's buffers together, in bytes (Linux's
        // tcp_mem, in bytes rather than pages): LOW PRESSURE HIGH, or HIGH alone
        // (low half of it, pressure two thirds). Past pressure buffers are
        // clamped to 16 KiB, past high to 4 KiB and orphans are reset.
        name: "net.inet.tcp.mem",
        takes:
            "bytes: LOW PRESSURE HIGH (or LOW,PRESSURE,HIGH, or HIGH), in order, HIGH 65536 or more",
        get: |c| format!("{} {} {}", c.mem.low, c.mem.pressure, c.mem.high),
        set: |c, v| {
            let n: Vec<usize> = v
                .split(|ch: char| ch == ',' || ch.is_whitespace())
                .filter(|t| !t.is_empty())
                .map(|t| t.parse().ok())
                .collect::<Option<_>>()?;
            let lim = match n[..] {
                [high] => net::tcp::TcpMemLimits::from_high(high),
                [low, pressure, high] => net::tcp::TcpMemLimits {
                    low,
                    pressure,
                    high,
                },
                _ => return None,
            };
            (lim.is_valid() && lim.high >= 65_536).then(|| c.mem = lim)
        },
    },
    // Unanswered keepalive probes before the connection is dropped.
    count_knob!("net.inet.tcp.keepcnt", keepalive_probes, "probes", 1, 1000),
    Knob {
        // A connection's challenge ACKs (RFC 5961) are counted in windows this long
        // (FreeBSD's ACK war protection); 0 turns the limit off.
        name: "net.inet.tcp.ack_war_timewindow",
        takes: "milliseconds, 0 to 60000",
        get: |c| c.ack_war_time_window.as_millis().to_string(),
        set: |c, v| {
            c.ack_war_time_window = millis(v, 0..=60_000)?;
            Some(())
        },
    },
    // At most this many challenge ACKs per connection in each window (5); 0
    // turns the limit off.
    count_knob!("net.inet.tcp.ack_war_cnt", ack_war_cnt, "ACKs", 0, 1000000),
    // Challenge ACKs a second for the whole node, split among the workers,
    // each second's allowance drawn between half and all of it (RFC 5961 §7,
    // Linux's tcp_challenge_ack_limit); 0: no limit.
    count_knob!(
        "net.inet.tcp.challenge_ack_limit",
        challenge_ack_limit,
        "ACKs a second",
        0,
        1000000000
    ),
    // Resets a second for segments that find no connection, split among the
    // workers, drawn as challenge_ack_limit's (FreeBSD's badport_bandlim under
    // net.inet.icmp.icmplim); 0: no limit.
    count_knob!(
        "net.inet.tcp.rst_limit",
        rst_limit,
        "resets a second",
        0,
        1000000000
    ),
    flag_knob!("net.inet.tcp.insecure_rst", insecure_rst),
    flag_knob!("net.inet.tcp.insecure_syn", insecure_syn),
    flag_knob!("net.inet.tcp.drop_synfin", drop_synfin),
    flag_knob!("net.inet.tcp.icmp_may_rst", icmp_may_rst),
    flag_knob!("net.inet.tcp.rexmit_drop_options", rexmit_drop_options),
    flag_knob!("net.inet.tcp.do_prr", prr),
    // TCP Fast Open (RFC 7413); turning the client off forgets the cookies.
    flag_knob!("net.inet.tcp.fastopen.client_enable", fastopen_client),
    flag_knob!("net.inet.tcp.fastopen.server_enable", fastopen_server),
    Knob {
        // ECN (RFC 3168): 0 off, 1 asked for and granted, 2 only granted.
        name: "net.inet.tcp.ecn.enable",
        takes: "0, 1 or 2",
        get: |c| c.ecn.to_string(),
        set: |c, v| {
            c.ecn = v.parse().ok().filter(|n| *n <= 2)?;
            Some(())
        },
    },
    // Retransmissions of a SYN that still ask for ECN.
    count_knob!(
        "net.inet.tcp.ecn.maxretries",
        ecn_maxretries,
        "retransmissions",
        0,
        30
    ),
    count_knob!(
        "net.inet.tcp.initcwnd_segments",
        init_cwnd_segs,
        "segments",
        1,
        1000
    ),
];

/// Source routing (LSRR, SSRR), as FreeBSD's two switches: both 0 by default, and
/// every source-routed packet is dropped and counted in `ip.srcroute`.
const IP_KNOBS: &[Knob<SourceRouting>] = &[
    // Follow a source route at the hop it names (forwarding on).
    flag_knob!(
        "net.inet.ip.sourceroute",
        forward,
        "0 or 1: forward source-routed packets, recording our address"
    ),
    // Deliver a packet whose source route ends here.
    flag_knob!(
        "net.inet.ip.accept_sourceroute",
        accept,
        "0 or 1: accept source-routed packets whose route ends here"
    ),
];

/// The IP names with their values in `sr`.
pub fn list_ip(sr: &SourceRouting) -> Vec<(String, String)> {
    list_of(IP_KNOBS, sr)
}

/// Applies one `NAME=VALUE` to `sr` if NAME is one of the IP names (`None` if it
/// is not: a TCP one for [`apply`], or unknown); says what changed.
pub fn apply_ip(sr: &mut SourceRouting, arg: &str) -> Option<Result<String, String>> {
    apply_in(IP_KNOBS, sr, arg)
}

/// The names `--sysctl` takes, with what each takes, one a line (for `--help` and
/// for the error naming an unknown one).
pub fn names() -> String {
    KNOBS
        .iter()
        .map(|k| (k.name, k.takes))
        .chain(IP_KNOBS.iter().map(|k| (k.name, k.takes)))
        .map(|(name, takes)| format!("{name} ({takes})"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `--sysctl`'s `--help`: what it does and every name it takes.
pub fn help() -> String {
    format!(
        "A TCP setting under FreeBSD's sysctl name, for every connection of the node, \
         or an IP one (repeatable); each change is printed as `NAME: OLD -> NEW`. The names:\n{}\n\
         And for the firewall's dummynet, before --ipfw loads (the largest queue a pipe \
         or queue may have):\n{}",
        names(),
        DN_KNOBS
            .iter()
            .map(|k| format!("{} ({})", k.name, k.takes))
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// Every name with its value in `cfg`, as `sysctl -a` lists them.
pub fn list(cfg: &TcpConfig) -> Vec<(String, String)> {
    list_of(KNOBS, cfg)
}

/// Applies one `NAME=VALUE` to `cfg`; says what changed, as sysctl(8) does
/// (`net.inet.tcp.cc.algorithm: cubic -> newreno`).
pub fn apply(cfg: &mut TcpConfig, arg: &str) -> Result<String, String> {
    if !arg.contains('=') {
        return Err(format!("'{arg}': expected NAME=VALUE"));
    }
    apply_in(KNOBS, cfg, arg).unwrap_or_else(|| {
        let name = arg.split_once('=').map_or(arg, |(n, _)| n);
        Err(format!(
            "unknown name '{name}'; mpstack knows:\n{}",
            names()
        ))
    })
}

/// dummynet's queue limits (`net.inet.ip.dummynet.pipe_slot_limit`, 100, and
/// `pipe_byte_limit`, 1048576): the largest queue a `pipe`/`queue` config may ask
/// for; FreeBSD's sysctl takes at least 1 slot and 1500 bytes. They are the
/// firewall's, not TCP's: `--sysctl` sets them before `--ipfw` loads, `mpstack
/// sysctl` for the configurations to come.
const DN_KNOBS: &[Knob<fw::dummynet::DnLimits>] = &[
    limit_knob!(
        "net.inet.ip.dummynet.pipe_slot_limit",
        slots,
        "slots, 1 or more"
    ),
    limit_knob!(
        "net.inet.ip.dummynet.pipe_byte_limit",
        bytes,
        "bytes, 1500 or more"
    ),
];

/// The dummynet names with their values in `lim`.
pub fn list_dummynet(lim: &fw::dummynet::DnLimits) -> Vec<(String, String)> {
    list_of(DN_KNOBS, lim)
}

/// Applies `NAME=VALUE` to `lim` if NAME is one of the dummynet names (`None`
/// otherwise); says what changed.
pub fn apply_dummynet(
    lim: &mut fw::dummynet::DnLimits,
    arg: &str,
) -> Option<Result<String, String>> {
    apply_in(DN_KNOBS, lim, arg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dummynet_limits_take_what_freebsd_takes() {
        let mut l = fw::dummynet::DnLimits::default();
        assert_eq!(
            apply_dummynet(&mut l, "net.inet.ip.dummynet.pipe_slot_limit=200"),
            Some(Ok("net.inet.ip.dummynet.pipe_slot_limit: 100 -> 200".into()))
        );
        assert_eq!(l.slots, 200);
        assert!(
            apply_dummynet(&mut l, "net.inet.ip.dummynet.pipe_byte_limit=1499")
                .unwrap()
                .is_err()
        );
        assert!(
            apply_dummynet(&mut l, "net.inet.ip.dummynet.pipe_slot_limit=0")
                .unwrap()
                .is_err()
        );
        assert_eq!(l.bytes, 1 << 20);
        assert!(apply_dummynet(&mut l, "net.inet.tcp.msl=100").is_none());
    }

    #[test]
    fn each_name_sets_its_field_and_reads_back_what_it_was_given() {
        let mut c = TcpConfig::default();
        for (arg, said) in [
            ("net.inet.tcp.cc.algorithm=newreno", "cubic -> newreno"),
            ("net.inet.tcp.cc.hystartplusplus=0", "1 -> 0"),
            ("net.inet.tcp.sendspace=1048576", "262144 -> 1048576"),
            ("net.inet.tcp.recvspace=65536", "262144 -> 65536"),
            ("net.inet.tcp.delayed_ack=0", "1 -> 0"),
            ("net.inet.tcp.sack.enable=0", "1 -> 0"),
            ("net.inet.tcp.rack.tlp_in_recovery=0", "1 -> 0"),
            ("net.inet.tcp.tso=0", "1 -> 0"),
            ("net.inet.tcp.slowstart_after_idle=0", "1 -> 0"),
            ("net.inet.tcp.lro=0", "1 -> 0"),
            ("net.inet.tcp.rfc1323=2", "1 -> 2"),
            ("net.inet.tcp.msl=15000", "30000 -> 15000"),
            ("net.inet.tcp.rexmit_min=30", "200 -> 30"),
            ("net.inet.tcp.rexmit_initial=3000", "1000 -> 3000"),
            ("kern.ipc.maxsockbuf=73728", "2097152 -> 73728"),
            ("net.inet.tcp.initcwnd_segments=4", "10 -> 4"),
            ("net.inet.tcp.fastopen.client_enable=0", "1 -> 0"),
            ("net.inet.tcp.fastopen.server_enable=1", "0 -> 1"),
            ("net.inet.tcp.finwait2_timeout=30000", "60000 -> 30000"),
            ("net.inet.tcp.fast_finwait2_recycle=1", "0 -> 1"),
            (
                "net.inet.tcp.persist_orphan_timeout=20000",
                "60000 -> 20000",
            ),
            ("net.inet.tcp.maxorphans=100", "4096 -> 100"),
            ("net.inet.tcp.ack_war_timewindow=500", "1000 -> 500"),
            ("net.inet.tcp.ack_war_cnt=0", "5 -> 0"),
            ("net.inet.tcp.challenge_ack_limit=0", "1000 -> 0"),
            ("net.inet.tcp.rst_limit=50", "200 -> 50"),
            (
                "net.inet.tcp.mem=8388608,12582912,16777216",
                "67108864 89478484 134217728 -> 8388608 12582912 16777216",
            ),
        ] {
            let msg = apply(&mut c, arg).unwrap();
            assert!(msg.ends_with(said), "{arg}: {msg}");
        }
        assert_eq!(c.cc, CongestionControl::NewReno);
        assert!(!c.hystart && !c.sack && c.delack.is_zero());
        assert!(!c.tso && !c.lro);
        assert_eq!((c.sndbuf, c.rcvbuf), (1 << 20, 65536));
        assert_eq!((c.window_scaling, c.timestamps), (true, false));
        assert_eq!(c.time_wait, Duration::from_secs(30));
        assert_eq!(c.min_rto, Duration::from_millis(30));
        assert_eq!(c.init_cwnd_segs, 4);
        assert!(!c.fastopen_client && c.fastopen_server);
        assert_eq!(c.finwait2_timeout, Duration::from_secs(30));
        assert!(c.fast_finwait2_recycle);
        assert_eq!(c.persist_orphan_timeout, Duration::from_secs(20));
        assert_eq!(c.max_orphans, 100);
        assert_eq!(c.ack_war_time_window, Duration::from_millis(500));
        assert_eq!(
            (c.ack_war_cnt, c.challenge_ack_limit, c.rst_limit),
            (0, 0, 50)
        );
        let want = net::tcp::TcpMemLimits {
            low: 8 << 20,
            pressure: 12 << 20,
            high: 16 << 20,
        };
        assert_eq!(c.mem, want);
        apply(&mut c, "net.inet.tcp.mem=1048576").unwrap();
        assert_eq!(c.mem, net::tcp::TcpMemLimits::from_high(1 << 20));
        for bad in ["3 2 1", "1 2", "x", "1000"] {
            assert!(
                apply(&mut c, &format!("net.inet.tcp.mem={bad}")).is_err(),
                "{bad}"
            );
        }
        // Turned back on, the delay is the default one; its time is its own name.
        apply(&mut c, "net.inet.tcp.delayed_ack=1").unwrap();
        assert_eq!(c.delack, TcpConfig::default().delack);
        apply(&mut c, "net.inet.tcp.delacktime=100").unwrap();
        assert_eq!(c.delack, Duration::from_millis(100));
    }

    #[test]
    fn source_routing_names_set_their_switches() {
        let mut sr = SourceRouting::default();
        let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
        assert!(list_ip(&sr).contains(&pair("net.inet.ip.sourceroute", "0")));
        assert!(list_ip(&sr).contains(&pair("net.inet.ip.accept_sourceroute", "0")));
        let said = apply_ip(&mut sr, "net.inet.ip.sourceroute=1").unwrap();
        assert_eq!(said.unwrap(), "net.inet.ip.sourceroute: 0 -> 1");
        let said = apply_ip(&mut sr, "net.inet.ip.accept_sourceroute=1").unwrap();
        assert_eq!(said.unwrap(), "net.inet.ip.accept_sourceroute: 0 -> 1");
        assert!(sr.forward && sr.accept);
        assert!(list_ip(&sr).contains(&pair("net.inet.ip.sourceroute", "1")));
        let e = apply_ip(&mut sr, "net.inet.ip.sourceroute=yes")
            .unwrap()
            .unwrap_err();
        assert!(e.contains("'yes' is not 0 or 1"), "{e}");
        assert!(sr.forward, "unchanged by a mistake");
        // Not IP names: left to `apply`.
        assert!(apply_ip(&mut sr, "net.inet.tcp.msl=15000").is_none());
        assert!(apply_ip(&mut sr, "net.inet.ip.sourceroute").is_none());
        assert!(names().contains("net.inet.ip.accept_sourceroute (0 or 1"));
    }

    #[test]
    fn mistakes_are_named_and_change_nothing() {
        let mut c = TcpConfig::default();
        let e = apply(&mut c, "net.inet.tcp.cc.algorithm").unwrap_err();
        assert!(e.contains("expected NAME=VALUE"), "{e}");
        let e = apply(&mut c, "net.inet.tcp.nosuch=1").unwrap_err();
        assert!(
            e.contains("unknown name 'net.inet.tcp.nosuch'") && e.contains("net.inet.tcp.msl"),
            "{e}"
        );
        for (arg, want) in [
            (
                "net.inet.tcp.cc.algorithm=vegas",
                "'vegas' is not cubic, newreno or bbr",
            ),
            (
                "net.inet.tcp.sendspace=100",
                "'100' is not bytes, 4096 to 67108864",
            ),
            (
                "net.inet.tcp.delacktime=500",
                "'500' is not milliseconds, 1 to 499",
            ),
            ("net.inet.tcp.rfc1323=4", "'4' is not 0, 1, 2 or 3"),
            ("net.inet.tcp.sack.enable=yes", "'yes' is not 0 or 1"),
            (
                "net.inet.tcp.maxorphans=0",
                "'0' is not connections, 1 to 16777216",
            ),
        ] {
            let e = apply(&mut c, arg).unwrap_err();
            assert!(e.contains(want), "{arg}: {e}");
        }
        assert_eq!(c, TcpConfig::default());
    }
}
