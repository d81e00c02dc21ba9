//! `mpstack bench WHAT [ARGS]`: replaces this process with the `mpstack-bench` program
//! (crates/bench) found in this program's own directory, the arguments passed on
//! unchanged. The benchmarks are a program of their own so that this one neither links
//! their peer crates (smoltcp, prefix-trie, poptrie, ip_network_table) nor counts its
//! heap; `cargo build --release` puts both in target/release.
//!
//! It owns the lookup of that program and the exec; it calls nothing of the stack.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The benchmarks' program, beside this one.
pub const BENCH_EXE: &str = "mpstack-bench";

/// What `mpstack bench` was given, for `mpstack-bench` (`--help` included).
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The benchmark (tcp, mbuf, lpm, fib, forward, fw, router, bridge, rfc2544,
    /// netchannel, quic, loss) and its options: see
    /// `mpstack bench --help`.
    #[arg(
        value_name = "WHAT [ARGS]",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<OsString>,
}

/// Runs `mpstack-bench` in place of this process; returns only if it cannot.
pub fn main(a: BenchArgs) -> Result<ExitCode, String> {
    let me = std::env::current_exe().map_err(|e| format!("bench: own executable: {e}"))?;
    let exe = beside(&me)?;
    // exec, not spawn: the exit status, the signals (Ctrl-C while `bench tcp` holds
    // network namespaces) and the terminal are the benchmark's own, with no process
    // in between. argv[0] makes its usage lines read `mpstack bench`.
    let err = Command::new(&exe)
        .arg0("mpstack bench")
        .args(&a.args)
        .exec();
    Err(format!("bench: running {}: {err}", exe.display()))
}

/// `mpstack-bench` in the directory of `me`, or why it cannot be run.
fn beside(me: &Path) -> Result<PathBuf, String> {
    let dir = me
        .parent()
        .ok_or_else(|| format!("bench: {} has no directory", me.display()))?;
    let exe = dir.join(BENCH_EXE);
    if exe.is_file() {
        return Ok(exe);
    }
    Err(format!(
        "bench: {} not found. The benchmarks are a program of their own, {BENCH_EXE} \
         (crates/bench), run from this program's directory; build it there with \
         `cargo build --release` (the whole workspace) or `cargo build --release -p \
         {BENCH_EXE}` (without --release for target/debug)",
        exe.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_bench_program_says_how_to_build_it() {
        let e = beside(Path::new("/nonexistent-mpstack-dir/mpstack")).unwrap_err();
        assert!(
            e.contains("/nonexistent-mpstack-dir/mpstack-bench not found"),
            "{e}"
        );
        assert!(e.contains("cargo build --release -p mpstack-bench"), "{e}");
    }
}
