//! Flag parsing for every subcommand (names, help, defaults) and the exit-code contract:
//! 0 success, 1 the program failed, 2 a usage or I/O error.

mod bench;
mod run;
mod sdk;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

pub const EXIT_OK: u8 = 0;
pub const EXIT_PROGRAM_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;

#[derive(Parser)]
#[command(
    name = "codemode",
    version,
    about = "Run TypeScript programs against tools in a wasm sandbox"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program (the body of an async TypeScript function) with the built-in tools.
    Run(RunArgs),
    /// Print the `tools:sdk` prompt section for the built-in tools.
    Sdk(SdkArgs),
    /// Measure the standard workloads in process.
    Bench(BenchArgs),
}

#[derive(Args)]
pub struct SdkArgs {
    /// Language of the SDK text.
    #[arg(long, value_enum, default_value_t = SdkLanguage::Typescript)]
    pub lang: SdkLanguage,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum SdkLanguage {
    Typescript,
    Python,
}

#[derive(Args)]
pub struct RunArgs {
    /// Program file; `-` or nothing reads standard input.
    pub file: Option<PathBuf>,
    /// Print exactly one JSON object: {"logs":[…],"result":…} or {"logs":[…],"error":{…}}.
    #[arg(long)]
    pub json: bool,
    /// Compute budget in milliseconds of busy time.
    #[arg(long, default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub compute_ms: u64,
    /// Wall-clock budget in milliseconds, waits included.
    #[arg(long, default_value_t = 600_000, value_parser = clap::value_parser!(u64).range(1..=2_147_483_647))]
    pub wall_ms: u64,
    /// Output cap in bytes (JSON of logs plus result or error message).
    #[arg(long, default_value_t = 67_108_864, value_parser = clap::value_parser!(u64).range(4..))]
    pub max_output_bytes: u64,
    /// Sandbox memory limit in MiB.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub memory_mb: u64,
    /// Directory `read_file` and `list_dir` are confined to.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also compare interruption schemes (none, fuel, epoch, both) on the compute workload;
    /// compiles the guest once per scheme unless the disk cache has it.
    #[arg(long)]
    pub interruption: bool,
    /// Iterations of the fresh-run workload.
    #[arg(long, default_value_t = 200)]
    pub runs: usize,
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() {
                EXIT_USAGE
            } else {
                EXIT_OK
            };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(error) => {
            eprintln!("codemode: cannot start the async runtime: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = match cli.command {
        // On a runtime worker rather than the thread blocked in `block_on`, so that waking the
        // run (a tool finishing, a timer) is not a cross-thread unpark.
        Command::Run(args) => runtime.block_on(async {
            tokio::spawn(run::run(args)).await.unwrap_or_else(|error| {
                eprintln!("codemode: the run failed inside the host: {error}");
                EXIT_PROGRAM_FAILED
            })
        }),
        Command::Sdk(args) => sdk::sdk(&args),
        Command::Bench(args) => runtime.block_on(bench::bench(args)),
    };
    ExitCode::from(code)
}
