//! `codemode bench`: the standard workloads, in process.

use super::BenchArgs;

pub async fn bench(_args: BenchArgs) -> u8 {
    eprintln!("codemode bench: not available in this build");
    super::EXIT_USAGE
}
