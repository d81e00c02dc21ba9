//! Per-stage runtime counters, as VPP's `show runtime`: for each stage of the data
//! path, how often a worker ran it, how many packets went through it, and the
//! cycles (time-stamp counter ticks) it took — so a running node says where its
//! time goes, per stage and per packet, without a profiler.
//!
//! What it owns: one [`Runtime`] per worker (plain counters, written by that worker
//! alone, two clock reads per stage call) and its published copy ([`RuntimeSlot`],
//! relaxed atomics written once per poll, read by [`crate::Stack::runtime`]).
//! What it may call: `dev::cpu::rdtsc`.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! stages {
    ($($(#[$m:meta])* $v:ident = $name:literal,)*) => {
        /// A stage of the data path, by the BSD name of the function that runs it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Stage {
            $($(#[$m])* $v,)*
        }

        impl Stage {
            /// Every stage, in the order a received packet meets them.
            pub const ALL: &'static [Stage] = &[$(Stage::$v,)*];

            /// The stage's name (`ip_input`, …).
            pub fn name(self) -> &'static str {
                match self {
                    $(Stage::$v => $name,)*
                }
            }
        }
    };
}

stages! {
    /// The devices' receive bursts.
    Rx = "rx",
    /// Software large receive offload over a burst.
    Lro = "lro",
    /// The bridge: learning, the layer-2 hooks, forwarding and flooding of a
    /// member's burst.
    BridgeInput = "bridge_input",
    /// Link header checks and the demultiplexing by type.
    EtherInput = "ether_input",
    ArpInput = "arp_input",
    /// IPv4 header checks, the input hooks, the local-or-forward decision.
    IpInput = "ip_input",
    /// Lookups, TTL and the next hop of forwarded IPv4 packets.
    IpForward = "ip_forward",
    Ip6Input = "ip6_input",
    Ip6Forward = "ip6_forward",
    /// Local delivery: reassembly, then the transport through the protocol switch.
    IpDeliver = "ip_deliver",
    Ip6Deliver = "ip6_deliver",
    /// Link headers of forwarded packets, the output hooks, the transmit vectors.
    EtherOutput = "ether_output",
    /// The devices' transmit bursts.
    Tx = "tx",
}

const N: usize = Stage::ALL.len();

/// One stage's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageStat {
    /// Times the stage ran.
    pub calls: u64,
    /// Times it ran with at least one packet.
    pub vectors: u64,
    pub packets: u64,
    /// Time-stamp counter ticks spent in it.
    pub cycles: u64,
}

impl StageStat {
    /// Cycles a packet (0 without packets).
    pub fn cycles_per_packet(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.cycles as f64 / self.packets as f64
        }
    }

    /// Packets a vector (0 without vectors).
    pub fn vector_size(&self) -> f64 {
        if self.vectors == 0 {
            0.0
        } else {
            self.packets as f64 / self.vectors as f64
        }
    }
}

impl std::ops::AddAssign for StageStat {
    fn add_assign(&mut self, o: StageStat) {
        self.calls += o.calls;
        self.vectors += o.vectors;
        self.packets += o.packets;
        self.cycles += o.cycles;
    }
}

/// A worker's stage counters.
#[derive(Clone, Debug, Default)]
pub struct Runtime {
    stages: [StageStat; N],
}

/// The clock of the stage counters: the time-stamp counter where there is one.
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    dev::cpu::rdtsc().unwrap_or(0)
}

impl Runtime {
    /// Counts one run of `stage` over `packets` packets that started at `since`
    /// ([`ticks`]); returns the time now, for the next stage to start from.
    #[inline]
    pub(crate) fn count(&mut self, stage: Stage, packets: usize, since: u64) -> u64 {
        let now = ticks();
        let s = &mut self.stages[stage as usize];
        s.calls += 1;
        s.vectors += u64::from(packets > 0);
        s.packets += packets as u64;
        s.cycles += now.wrapping_sub(since);
        now
    }

    /// The counters of `stage`.
    pub fn get(&self, stage: Stage) -> StageStat {
        self.stages[stage as usize]
    }

    /// Every stage with its counters, in data path order.
    pub fn iter(&self) -> impl Iterator<Item = (Stage, StageStat)> + '_ {
        Stage::ALL.iter().map(|&s| (s, self.get(s)))
    }

    /// The counts since `earlier` (a reading of the same counters).
    pub fn since(&self, earlier: &Runtime) -> Runtime {
        let mut r = self.clone();
        for (a, b) in r.stages.iter_mut().zip(&earlier.stages) {
            a.calls = a.calls.saturating_sub(b.calls);
            a.vectors = a.vectors.saturating_sub(b.vectors);
            a.packets = a.packets.saturating_sub(b.packets);
            a.cycles = a.cycles.saturating_sub(b.cycles);
        }
        r
    }

    /// `show runtime`: a line per stage that ran, with packets, vectors, packets a
    /// vector and cycles a packet.
    pub fn write_table(&self, out: &mut impl std::fmt::Write) -> std::fmt::Result {
        writeln!(
            out,
            "{:<14} {:>12} {:>10} {:>12} {:>8} {:>10}",
            "stage", "calls", "vectors", "packets", "pkts/vec", "cycles/pkt"
        )?;
        for (st, s) in self.iter().filter(|(_, s)| s.packets > 0) {
            writeln!(
                out,
                "{:<14} {:>12} {:>10} {:>12} {:>8.1} {:>10.1}",
                st.name(),
                s.calls,
                s.vectors,
                s.packets,
                s.vector_size(),
                s.cycles_per_packet()
            )?;
        }
        Ok(())
    }
}

impl std::ops::AddAssign<&Runtime> for Runtime {
    fn add_assign(&mut self, o: &Runtime) {
        for (a, b) in self.stages.iter_mut().zip(&o.stages) {
            *a += *b;
        }
    }
}

/// A worker's published stage counters: written by the worker with relaxed stores
/// once per poll, read by anyone.
#[derive(Debug)]
pub(crate) struct RuntimeSlot {
    v: Box<[AtomicU64]>,
}

impl Default for RuntimeSlot {
    fn default() -> Self {
        RuntimeSlot {
            v: (0..N * 4).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl RuntimeSlot {
    pub(crate) fn publish(&self, r: &Runtime) {
        for (i, s) in r.stages.iter().enumerate() {
            self.v[4 * i].store(s.calls, Ordering::Relaxed);
            self.v[4 * i + 1].store(s.vectors, Ordering::Relaxed);
            self.v[4 * i + 2].store(s.packets, Ordering::Relaxed);
            self.v[4 * i + 3].store(s.cycles, Ordering::Relaxed);
        }
    }

    pub(crate) fn read(&self) -> Runtime {
        let mut r = Runtime::default();
        for (i, s) in r.stages.iter_mut().enumerate() {
            s.calls = self.v[4 * i].load(Ordering::Relaxed);
            s.vectors = self.v[4 * i + 1].load(Ordering::Relaxed);
            s.packets = self.v[4 * i + 2].load(Ordering::Relaxed);
            s.cycles = self.v[4 * i + 3].load(Ordering::Relaxed);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_publishes() {
        let mut r = Runtime::default();
        let t = r.count(Stage::IpInput, 64, ticks());
        r.count(Stage::IpInput, 0, t);
        let s = r.get(Stage::IpInput);
        assert_eq!((s.calls, s.vectors, s.packets), (2, 1, 64));
        assert_eq!(s.vector_size(), 64.0);
        let slot = RuntimeSlot::default();
        slot.publish(&r);
        assert_eq!(slot.read().get(Stage::IpInput), s);
        let mut t = String::new();
        r.write_table(&mut t).unwrap();
        assert!(t.contains("ip_input"), "{t}");
        assert!(
            !t.contains("ip6_input"),
            "stages without packets are left out"
        );
    }
}
