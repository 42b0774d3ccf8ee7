//! `codemode sdk`: the `tools:sdk` section for the tools a program of `codemode run` could call
//! with the same flags (`--deny` and `--allow` leave tools out).

use std::io::Write;

use codemode_runtime::tools::ToolMode;
use codemode_sdk_gen::render_sdk;

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
    let sdk = render_sdk(&session.sdk_tools(), args.lang);
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
