//! FreeBSD's tunables as the suite's scripts set them (`` `sysctl -w
//! net.inet.tcp.sack.enable=1` ``), on the stack under test.
//!
//! A script's backtick line runs a shell command; `scripts/packetdrill/sysctl`, put
//! first on the PATH, sends its arguments to the shim over a Unix socket
//! ([`serve`]) and prints the answer. The names mpstack has (`mpstack run
//! --sysctl`'s) set the stack's TCP configuration. A few more are FreeBSD
//! settings mpstack has no switch for, taken only at the value mpstack behaves
//! as ([`FIXED`]); any other value, or any other name, is refused, and the script
//! fails there, which is where it would stop being true of mpstack.

use net::tcp::TcpConfig;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// FreeBSD names mpstack has no switch for, and the values it behaves as.
pub const FIXED: &[(&str, &[&str], &str)] = &[
    (
        "net.inet.tcp.blackhole",
        &["0"],
        "a closed port answers with a reset",
    ),
    (
        "net.inet.tcp.hostcache.purgenow",
        &["0", "1"],
        "there is no host cache to purge",
    ),
    (
        "net.inet.tcp.rexmit_slop",
        &["200"],
        "the minimum RTO already holds it",
    ),
];

/// `sysctl [-n] [-w] NAME[=VALUE]…` against `cfg`: what sysctl(8) would print, or
/// why not.
pub fn command(cfg: &mut TcpConfig, args: &[&str]) -> Result<String, String> {
    let mut out = String::new();
    let mut quiet = false;
    for a in args {
        match *a {
            "-w" => continue,
            "-n" => {
                quiet = true;
                continue;
            }
            "-q" => continue,
            _ => {}
        }
        match a.split_once('=') {
            Some((name, value)) => {
                if let Some((_, ok, _)) = FIXED.iter().find(|f| f.0 == name) {
                    if !ok.contains(&value) {
                        return Err(format!(
                            "{name}={value}: mpstack behaves as {name}={} and has no switch for it",
                            ok.join(" or ")
                        ));
                    }
                    out += &format!("{name}: {value} -> {value}\n");
                } else {
                    out += &apply(cfg, a)?;
                    out.push('\n');
                }
            }
            None => {
                let v = mpstack::sysctl::list(cfg)
                    .into_iter()
                    .find(|(n, _)| n == a)
                    .map(|(_, v)| v)
                    .or_else(|| FIXED.iter().find(|f| f.0 == *a).map(|f| f.1[0].to_string()))
                    .ok_or_else(|| format!("unknown oid '{a}'"))?;
                if quiet {
                    out += &format!("{v}\n");
                } else {
                    out += &format!("{a}: {v}\n");
                }
            }
        }
    }
    Ok(out)
}

/// One `NAME=VALUE` of mpstack's own names.
pub fn apply(cfg: &mut TcpConfig, arg: &str) -> Result<String, String> {
    mpstack::sysctl::apply(cfg, arg).map_err(|e| e.lines().next().unwrap_or("").to_string())
}

/// Serves the `sysctl` wrapper on `listener` until `stop`: a request is one line
/// of arguments separated by spaces; the answer is `0` or `1`, a newline, then the
/// output or the error.
pub fn serve(
    listener: UnixListener,
    stop: Arc<AtomicBool>,
    run: impl Fn(&[&str]) -> Result<String, String>,
) {
    // Blocking: a script's command is answered the moment it asks. The owner wakes
    // the loop to stop with a connection of its own after setting `stop`.
    for conn in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Ok(conn) = conn else { continue };
        let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
        let mut line = String::new();
        let mut r = BufReader::new(&conn);
        if r.read_line(&mut line).is_err() {
            continue;
        }
        let args: Vec<&str> = line.split_whitespace().collect();
        let answer = match run(&args) {
            Ok(s) => format!("0\n{s}"),
            Err(e) => format!("1\n{e}\n"),
        };
        let mut w = &conn;
        let _ = w.write_all(answer.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_set_fixed_ones_hold_and_others_are_refused() {
        let mut c = TcpConfig::default();
        let out = command(&mut c, &["-w", "net.inet.tcp.sack.enable=0"]).unwrap();
        assert_eq!(out, "net.inet.tcp.sack.enable: 1 -> 0\n");
        assert!(!c.sack);
        assert!(command(&mut c, &["-w", "net.inet.tcp.blackhole=0"]).is_ok());
        let e = command(&mut c, &["-w", "net.inet.tcp.blackhole=2"]).unwrap_err();
        assert!(e.contains("no switch"), "{e}");
        let e = command(&mut c, &["-w", "net.inet.tcp.nosuch=1"]).unwrap_err();
        assert!(e.contains("unknown name"), "{e}");
        assert_eq!(
            command(&mut c, &["-n", "net.inet.tcp.rexmit_initial"]).unwrap(),
            "1000\n"
        );
    }
}
