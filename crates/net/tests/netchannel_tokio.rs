//! A netchannel's async side (feature `tokio`), between two stacks with worker
//! threads on the real clock: a task waits for a flow's raw packets, woken by the
//! receiving stack's worker, and echoes each back raw through the stack.
#![cfg(feature = "tokio")]

use dev::mem::{wire, MemDevice, WireConfig};
use net::netchan::Classifier;
use net::{IfConfig, Stack, StackConfig};
use std::net::SocketAddr;
use std::time::Duration;

fn host(name: &str, dev: MemDevice, addr: &str) -> Stack {
    let mut s = Stack::new(StackConfig {
        name: name.into(),
        workers: 2,
        ..StackConfig::default()
    });
    let addrs = vec![addr.parse().expect("an address")];
    s.add_interface(
        Box::new(dev),
        IfConfig {
            addrs,
            ..IfConfig::default()
        },
    )
    .expect("an interface");
    s.start().expect("worker threads");
    s
}

#[test]
fn a_task_takes_a_flow_raw_and_answers_it_raw() {
    let (da, db) = wire(WireConfig {
        num_queues: 2,
        ..WireConfig::default()
    });
    let a = host("nc-a", da, "198.18.0.1/24");
    let b = host("nc-b", db, "198.18.0.2/24");
    let ch = b.netchannel(Classifier::udp().local_port(7)).unwrap();
    let u = a
        .udp_bind("198.18.0.1:0".parse::<SocketAddr>().unwrap())
        .unwrap();
    u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let client = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let to: SocketAddr = "198.18.0.2:7".parse().unwrap();
        for i in 0..100u32 {
            u.send_to(&i.to_be_bytes(), to).unwrap();
            let (n, from) = u.recv_from(&mut buf).unwrap();
            assert_eq!((&buf[..n], from), (&i.to_be_bytes()[..], to));
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let echo = async {
        let mut batch = Vec::new();
        let mut seen = 0;
        while seen < 100 {
            batch.clear();
            seen += ch.recv_batch_async(&mut batch, 32).await;
            for p in &batch {
                // Addresses and ports swapped; the stack fills the checksums.
                let mut b = p.to_vec();
                let (src, dst) = (b[12..16].to_vec(), b[16..20].to_vec());
                b[12..16].copy_from_slice(&dst);
                b[16..20].copy_from_slice(&src);
                let (sp, dp) = (b[20..22].to_vec(), b[22..24].to_vec());
                b[20..22].copy_from_slice(&dp);
                b[22..24].copy_from_slice(&sp);
                ch.send(&b).unwrap();
            }
        }
    };
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(30), echo).await })
        .expect("100 datagrams echoed within 30 s");
    client.join().expect("every answer came back, byte-exact");
}
