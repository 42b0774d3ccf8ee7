//! `codemode-sdk`: prints the `tools:sdk` section for a tool list read from a file or stdin.
//!
//! Exit codes: 0 printed; 2 the input could not be read or is not a valid tool list (the message
//! names the tool and the JSON path). Usage errors also exit 2, as clap does.

use clap::Parser;
use codemode_sdk_gen::{parse_tool_list, render_sdk, Language};
use std::io::{Read, Write};
use std::process::ExitCode;

/// Print the tools:sdk prompt section (run_code instructions and typed declarations) for a tool list.
///
/// The input is a JSON array of {name, description?, parameters, output?} or an MCP tools/list
/// result {"tools": [{name, description?, inputSchema, outputSchema?}]}.
#[derive(Parser)]
#[command(name = "codemode-sdk", version)]
struct Cli {
    /// The tool list file; `-` or nothing reads standard input.
    file: Option<String>,
    /// The language programs are written in.
    #[arg(long, value_enum, default_value_t = Language::TypeScript)]
    lang: Language,
    /// Prepended to every tool name, e.g. `mcp__fs__` for tools of an MCP server named fs.
    #[arg(long, default_value = "")]
    prefix: String,
}

const INPUT_ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (text, source) = match read_input(cli.file.as_deref()) {
        Ok(read) => read,
        Err(message) => return fail(&message),
    };
    let tools = match parse_tool_list(&text, &cli.prefix) {
        Ok(tools) => tools,
        Err(error) => return fail(&format!("{source}: {error}")),
    };
    let sdk = render_sdk(&tools, cli.lang);
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{sdk}").and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`| head`) is the reader's choice, not an error worth a message.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => fail(&format!("cannot write the SDK: {error}")),
    }
}

/// The input text and a name for it in messages.
fn read_input(file: Option<&str>) -> Result<(String, String), String> {
    match file {
        None | Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| format!("cannot read standard input: {e}"))?;
            Ok((text, "<stdin>".to_owned()))
        }
        Some(path) => std::fs::read_to_string(path)
            .map(|text| (text, path.to_owned()))
            .map_err(|e| format!("cannot read {path}: {e}")),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("codemode-sdk: {message}");
    ExitCode::from(INPUT_ERROR)
}
