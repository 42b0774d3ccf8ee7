//! `codemode sdk`: the `tools:sdk` section for the tools a program of `codemode run` could call
//! with the same flags (`--deny` and `--allow` leave tools out).

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
    println!("{}", render_sdk(&session.sdk_tools(), args.lang));
    EXIT_OK
}
