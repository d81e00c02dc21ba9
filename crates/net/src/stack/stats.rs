//! The counters of a stack: summed over the workers (with the control plane's, the
//! bridges' and the pfil hooks'), per worker, the stages' runtime counters, the TCP
//! memory bound, and the device queues'.

use super::Stack;
use crate::link::iface::IfIndex;
use crate::stats::Stats;
use std::sync::Arc;

impl Stack {
    /// Counters summed over all workers, and the pfil hooks' own (`fw.*`).
    pub fn stats(&self) -> Stats {
        let mut s = *self
            .shared
            .ctl_stats
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for slot in &self.shared.stats {
            slot.add_into(&mut s);
        }
        for b in &self.shared.cfg.load().bridges.list {
            b.br.rt.stats().add_into(&mut s);
        }
        for h in self.config().pfil.hooks() {
            h.add_stats(&mut s);
        }
        s.tcp.memstate = self.shared.tcp_mem.state() as u64;
        s
    }

    /// The bound on TCP buffer memory (`net.inet.tcp.mem`): the bytes every
    /// connection's buffers hold, as the workers last published, and the state
    /// they put the stack in, to look at from elsewhere (a service sizing its own
    /// buffers by the state).
    pub fn tcp_mem_handle(&self) -> Arc<crate::tcp::TcpMem> {
        self.shared.tcp_mem.clone()
    }

    /// Counters of one worker.
    pub fn worker_stats(&self, w: usize) -> Option<Stats> {
        let slot = self.shared.stats.get(w)?;
        let mut s = Stats::default();
        slot.add_into(&mut s);
        Some(s)
    }

    /// The stages' runtime counters (VPP's `show runtime`), summed over the workers:
    /// per stage, its calls, vectors, packets and cycles.
    pub fn runtime(&self) -> crate::runtime::Runtime {
        let mut r = crate::runtime::Runtime::default();
        for slot in &self.shared.runtime {
            r += &slot.read();
        }
        r
    }

    /// The stages' runtime counters of one worker.
    pub fn worker_runtime(&self, w: usize) -> Option<crate::runtime::Runtime> {
        self.shared.runtime.get(w).map(|s| s.read())
    }

    /// Device queue counters, per worker, per owned queue: (worker, ifindex, stats).
    /// While the workers run, as they last published them (every 100 ms at most).
    pub fn queue_stats(&self) -> Vec<(usize, IfIndex, dev::QueueStats)> {
        if self.is_running() {
            return self
                .shared
                .qstats
                .iter()
                .flat_map(|q| q.lock().unwrap_or_else(|e| e.into_inner()).clone())
                .collect();
        }
        self.workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .flat_map(|w| w.queue_stats())
            .collect()
    }
}
