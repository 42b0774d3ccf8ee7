//! Progressive discovery for large tool sets: when the whole SDK would cost more prompt than
//! the calls it saves, the prompt lists one line per tool, and a search returns the full typed
//! declarations of the tools that match, the same text the whole SDK would contain.

use crate::sdk::{render_sdk, Language, ToolSchema};
use crate::text::{cmp_utf16, collapse_whitespace};

/// A rough token count: about four characters per token for English prose and code, the usual
/// estimate when no tokenizer is at hand.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Longest summary printed per tool in the index.
const SUMMARY_CHARS: usize = 160;

/// One line per tool, in the SDK's order: `` - `name`: summary `` (the first sentence of the
/// description, shortened).
pub fn tool_index(tools: &[ToolSchema]) -> String {
    let mut ordered: Vec<&ToolSchema> = tools.iter().collect();
    ordered.sort_by(|a, b| cmp_utf16(&a.name, &b.name));
    ordered.dedup_by(|a, b| a.name == b.name);
    let mut out = String::new();
    for tool in ordered {
        out.push_str("- `");
        out.push_str(&tool.name);
        out.push('`');
        let summary = summary(tool.description.as_deref().unwrap_or_default());
        if !summary.is_empty() {
            out.push_str(": ");
            out.push_str(&summary);
        }
        out.push('\n');
    }
    out
}

fn summary(description: &str) -> String {
    let text = collapse_whitespace(description);
    let sentence = match text.find(". ") {
        Some(end) => &text[..=end],
        None => text.as_str(),
    };
    if sentence.chars().count() <= SUMMARY_CHARS {
        return sentence.to_owned();
    }
    let mut short: String = sentence.chars().take(SUMMARY_CHARS - 1).collect();
    short.push('…');
    short
}

/// The fenced declarations of `tools` (the SDK without its instructions).
pub fn render_declarations(tools: &[ToolSchema], language: Language) -> String {
    let sdk = render_sdk(tools, language);
    let fence = match language {
        Language::TypeScript => "```ts\n",
        Language::Python => "```python\n",
    };
    match sdk.find(fence) {
        Some(start) => sdk[start..].to_owned(),
        None => sdk,
    }
}

/// The tools matching `query`, best first, at most `limit`: every word of the query (split on
/// anything but letters and digits, case-insensitive) scores in the name (3) and in the
/// description (1); an exact name scores highest; ties go by name.
pub fn search<'a>(tools: &'a [ToolSchema], query: &str, limit: usize) -> Vec<&'a ToolSchema> {
    let query = query.to_lowercase();
    let words: Vec<&str> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut scored: Vec<(usize, &ToolSchema)> = tools
        .iter()
        .filter_map(|tool| {
            let name = tool.name.to_lowercase();
            let description = tool.description.as_deref().unwrap_or("").to_lowercase();
            let mut score = if name == query.trim() { 100 } else { 0 };
            for word in &words {
                if name.contains(word) {
                    score += 3;
                }
                if description.contains(word) {
                    score += 1;
                }
            }
            (score > 0).then_some((score, tool))
        })
        .collect();
    scored.sort_by(|(sa, a), (sb, b)| sb.cmp(sa).then_with(|| cmp_utf16(&a.name, &b.name)));
    scored
        .into_iter()
        .take(limit)
        .map(|(_, tool)| tool)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: Some(description.into()),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            output: None,
        }
    }

    #[test]
    fn search_ranks_names_over_descriptions_and_exact_names_first() {
        let tools = [
            tool("read_graph", "Read the whole knowledge graph."),
            tool("search_nodes", "Search for nodes in the graph."),
            tool("echo", "Echo a message; mentions nodes."),
        ];
        let names = |q: &str| {
            search(&tools, q, 10)
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(names("nodes"), vec!["search_nodes", "echo"]);
        assert_eq!(names("echo"), vec!["echo"]);
        assert_eq!(names("GRAPH"), vec!["read_graph", "search_nodes"]);
        assert!(names("zebra").is_empty());
        assert_eq!(search(&tools, "graph", 1).len(), 1);
    }

    #[test]
    fn declarations_are_the_sdk_without_its_instructions() {
        let tools = [tool("a", "First. More."), tool("b", "Second")];
        let declarations = render_declarations(&tools[..1], Language::TypeScript);
        assert!(declarations.starts_with("```ts\n"));
        let full = render_sdk(&tools, Language::TypeScript);
        let member = "  /** First. More. */\n  a: {";
        assert!(declarations.contains(member) && full.contains(member));
        assert_eq!(tool_index(&tools), "- `a`: First.\n- `b`: Second\n");
    }
}
