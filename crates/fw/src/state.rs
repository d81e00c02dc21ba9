//! Dynamic states — PLACEHOLDER on the `fw-core` branch only: a tiny mutex-guarded map
//! with exactly the API of the real state module (written in parallel), so that the
//! rule engine compiles and its tests run. Drop this file at merge in favour of the
//! real one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// A flow as the rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowId {
    pub proto: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
}

/// Which way a packet runs along the state's flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Forward,
    Reverse,
}

/// A state found for a packet: the rule that created it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateHit {
    pub rule: u32,
    pub rule_id: u32,
    pub dir: Dir,
}

/// Which fields of the flow a `limit` counts states by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitMask {
    pub src_addr: bool,
    pub src_port: bool,
    pub dst_addr: bool,
    pub dst_port: bool,
}

/// Why a state was not installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateError {
    Full,
    LimitReached,
}

/// Bounds of the state table.
#[derive(Clone, Copy, Debug)]
pub struct StateConfig {
    pub max: usize,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig { max: 4096 }
    }
}

/// The state table (placeholder: one map behind one lock, no expiry).
#[derive(Debug)]
pub struct StateShards {
    map: Mutex<HashMap<FlowId, (u32, u32)>>,
    cfg: StateConfig,
}

fn reverse(f: &FlowId) -> FlowId {
    FlowId {
        proto: f.proto,
        src: f.dst,
        dst: f.src,
        sport: f.dport,
        dport: f.sport,
    }
}

fn masked(f: &FlowId, m: LimitMask) -> (Option<IpAddr>, Option<u16>, Option<IpAddr>, Option<u16>) {
    (
        m.src_addr.then_some(f.src),
        m.src_port.then_some(f.sport),
        m.dst_addr.then_some(f.dst),
        m.dst_port.then_some(f.dport),
    )
}

impl StateShards {
    pub fn new(_shards: usize, cfg: StateConfig) -> Self {
        StateShards {
            map: Mutex::new(HashMap::new()),
            cfg,
        }
    }

    pub fn lookup(&self, f: &FlowId, _tcp_flags: u8, _now: u64) -> Option<StateHit> {
        let map = self.map.lock().unwrap();
        if let Some(&(rule, rule_id)) = map.get(f) {
            return Some(StateHit {
                rule,
                rule_id,
                dir: Dir::Forward,
            });
        }
        map.get(&reverse(f)).map(|&(rule, rule_id)| StateHit {
            rule,
            rule_id,
            dir: Dir::Reverse,
        })
    }

    pub fn insert(
        &self,
        f: &FlowId,
        rule: u32,
        rule_id: u32,
        _tcp_flags: u8,
        _now: u64,
    ) -> Result<(), StateError> {
        let mut map = self.map.lock().unwrap();
        if map.contains_key(f) || map.contains_key(&reverse(f)) {
            return Ok(());
        }
        if map.len() >= self.cfg.max {
            return Err(StateError::Full);
        }
        map.insert(*f, (rule, rule_id));
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub fn insert_limited(
        &self,
        f: &FlowId,
        rule: u32,
        rule_id: u32,
        tcp_flags: u8,
        mask: LimitMask,
        limit: u32,
        now: u64,
    ) -> Result<(), StateError> {
        {
            let map = self.map.lock().unwrap();
            if map.contains_key(f) || map.contains_key(&reverse(f)) {
                return Ok(());
            }
            let key = masked(f, mask);
            let n = map
                .iter()
                .filter(|(g, &(_, id))| id == rule_id && masked(g, mask) == key)
                .count();
            if n as u32 >= limit {
                return Err(StateError::LimitReached);
            }
        }
        self.insert(f, rule, rule_id, tcp_flags, now)
    }

    pub fn remove_rule(&self, rule_id: u32) -> usize {
        let mut map = self.map.lock().unwrap();
        let before = map.len();
        map.retain(|_, v| v.1 != rule_id);
        before - map.len()
    }

    pub fn flush(&self) {
        self.map.lock().unwrap().clear();
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
