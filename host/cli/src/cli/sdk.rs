//! `codemode sdk`: the `tools:sdk` section for the tools a program of `codemode run` could call
//! with the same flags (`--deny` and `--allow` leave tools out).

use std::io::Write;

use codemode_runtime::run_code::prompt::run_code_description;
use codemode_runtime::run_code::Flavor;
use codemode_runtime::tools::ToolMode;
use codemode_sdk_gen::{estimate_tokens, render_sdk};

use super::session::ToolSession;
use super::{SdkArgs, EXIT_OK, EXIT_USAGE};

pub async fn sdk(args: &SdkArgs) -> u8 {
    let session = match ToolSession::new(&args.tools, true, ToolMode::Code).await {
        Ok(session) => session,
        Err(message) => {
            eprintln!("{message}");
            return EXIT_USAGE;
        }
    };
    let tools = session.sdk_tools();
    let sdk = render_sdk(&tools, args.lang);
    if args.stats {
        let flavor = Flavor::of(args.lang);
        let (description, discovery) = run_code_description(flavor, &tools, args.sdk_budget);
        let served = if discovery {
            format!(
                "past the budget of {}: the tools' names, with search_tools",
                args.sdk_budget
            )
        } else {
            format!("the whole SDK, within the budget of {}", args.sdk_budget)
        };
        eprintln!(
            "codemode: {} tools; the SDK is about {} tokens; run_code's description over MCP is about {} tokens ({served})",
            tools.len(),
            estimate_tokens(&sdk),
            estimate_tokens(&description),
        );
    }
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{sdk}").and_then(|()| stdout.flush()) {
        Ok(()) => EXIT_OK,
        // A closed pipe (`| head`) is the reader's choice, not an error worth a message.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(error) => {
            eprintln!("codemode: cannot write the SDK: {error}");
            EXIT_USAGE
        }
    }
}
