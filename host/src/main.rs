//! The `codemode` command: wires the sandbox, the built-in tools and the SDK generator to the
//! command line. Every subcommand lives in its own module under `cli/`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
