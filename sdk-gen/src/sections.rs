//! The two prompt sections this crate contributes, as values a prompt assembler can order:
//! `tools:code-only` (order 99) and `tools:sdk` (order 150, in the tool-guidance band 100–199).

use crate::instructions::CODE_ONLY_RULE;
use crate::sdk::{render_sdk, Language, ToolSchema};

/// Id of the section that tells the model `run_code` is its only directly callable tool.
pub const CODE_ONLY_SECTION_ID: &str = "tools:code-only";
/// Its position in the assembled prompt.
pub const CODE_ONLY_SECTION_ORDER: u32 = 99;
/// Id of the section that declares the SDK.
pub const SDK_SECTION_ID: &str = "tools:sdk";
/// Its position in the assembled prompt.
pub const SDK_SECTION_ORDER: u32 = 150;

/// One section of a system prompt. An empty `text` contributes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptSection {
    /// The section's id, e.g. `tools:sdk`.
    pub id: &'static str,
    /// Where the section goes in the prompt; lower comes first.
    pub order: u32,
    /// The section's text.
    pub text: String,
}

/// How an agent reaches its tools: the registry's presentation mode.
pub use codemode_runtime::tools::ToolMode as ToolsMode;

/// `tools:code-only`: the rule text under `code`, empty otherwise.
pub fn code_only_section(mode: ToolsMode) -> PromptSection {
    let text = match mode {
        ToolsMode::Code => CODE_ONLY_RULE.to_owned(),
        ToolsMode::Native | ToolsMode::Both => String::new(),
    };
    PromptSection {
        id: CODE_ONLY_SECTION_ID,
        order: CODE_ONLY_SECTION_ORDER,
        text,
    }
}

/// `tools:sdk` for the calling scope's visible tools (without `run_code`): empty for a native
/// agent, the SDK text otherwise. Byte-identical for the same set of tools in any order.
pub fn sdk_section(mode: ToolsMode, tools: &[ToolSchema], language: Language) -> PromptSection {
    let text = match mode {
        ToolsMode::Native => String::new(),
        ToolsMode::Code | ToolsMode::Both => render_sdk(tools, language),
    };
    PromptSection {
        id: SDK_SECTION_ID,
        order: SDK_SECTION_ORDER,
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_only_rule_is_empty_unless_the_mode_is_code() {
        let code = code_only_section(ToolsMode::Code);
        assert_eq!((code.id, code.order), ("tools:code-only", 99));
        assert!(code
            .text
            .starts_with("`run_code` is the only tool you can call directly — "));
        assert_eq!(code_only_section(ToolsMode::Both).text, "");
        assert_eq!(code_only_section(ToolsMode::Native).text, "");
    }

    #[test]
    fn sdk_section_is_empty_for_native_agents() {
        let sdk = sdk_section(ToolsMode::Native, &[], Language::TypeScript);
        assert_eq!(
            (sdk.id, sdk.order, sdk.text.as_str()),
            ("tools:sdk", 150, "")
        );
        let both = sdk_section(ToolsMode::Both, &[], Language::TypeScript);
        assert!(both.text.starts_with("## Writing code for run_code\n"));
    }
}
