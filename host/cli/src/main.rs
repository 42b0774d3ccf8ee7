//! The `codemode` command (see the crate's library for what it wires together).

fn main() -> std::process::ExitCode {
    codemode_cli::main()
}
