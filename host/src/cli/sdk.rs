//! `codemode sdk`: the `tools:sdk` section for the tools `codemode run` binds.

use codemode_host::builtins;
use codemode_sdk_gen::{render_sdk, tool_list_from_value, Language};

use super::{SdkArgs, SdkLanguage, EXIT_OK, EXIT_USAGE};

pub fn sdk(args: &SdkArgs) -> u8 {
    let tools = match tool_list_from_value(&builtins::schemas(), "") {
        Ok(tools) => tools,
        Err(error) => {
            eprintln!("codemode sdk: {error}");
            return EXIT_USAGE;
        }
    };
    let language = match args.lang {
        SdkLanguage::Typescript => Language::TypeScript,
        SdkLanguage::Python => Language::Python,
    };
    println!("{}", render_sdk(&tools, language));
    EXIT_OK
}
