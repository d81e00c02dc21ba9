//! `sysctl`, `sockstat` and `tcpdrop` for packetdrill scripts run against mpstack
//! (`scripts/packetdrill/` holds wrappers of those names that exec this with the
//! name first): the command and its arguments go to the stack under test over the
//! Unix socket `$MPSTACK_PD_SYSCTL` ([`mpstack_packetdrill::sysctl::serve`]), and
//! its answer is printed. Exit status 1 when the stack refused (an unknown name,
//! or a value mpstack does not behave as), 2 when it could not be asked.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("usage: mpstack-pd-ctl sysctl|sockstat|tcpdrop [ARG…]");
        return ExitCode::from(2);
    };
    let Ok(path) = std::env::var("MPSTACK_PD_SYSCTL") else {
        eprintln!("{cmd}: MPSTACK_PD_SYSCTL is not set (run through scripts/packetdrill.sh)");
        return ExitCode::from(2);
    };
    let ask = || -> std::io::Result<String> {
        let mut s = UnixStream::connect(&path)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(format!("{}\n", args.join(" ")).as_bytes())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer)?;
        Ok(answer)
    };
    let answer = match ask() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{cmd}: the stack under test at {path}: {e}");
            return ExitCode::from(2);
        }
    };
    match answer.split_once('\n') {
        Some(("0", text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Some((_, text)) => {
            eprint!(
                "{}: {text}",
                args.get(1).map_or(cmd.as_str(), String::as_str)
            );
            ExitCode::from(1)
        }
        None => {
            eprintln!("{cmd}: no answer from the stack under test");
            ExitCode::from(2)
        }
    }
}
