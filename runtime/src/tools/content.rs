//! What a tool call shows the model: content blocks and the contexts a call hands back to the loop.

use serde::{Deserialize, Serialize};

/// One model-facing block of a tool result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text itself.
        text: String,
    },
    /// An inline image.
    Image {
        /// Base64 payload.
        data: String,
        /// The image's MIME type, e.g. `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// The block's `type` tag, as it appears on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            ContentBlock::Text { .. } => "text",
            ContentBlock::Image { .. } => "image",
        }
    }
}

/// Where a deferred context came from, so a session can attribute it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSource {
    /// `plugin`, `tool`, `user`, ...
    pub kind: String,
    /// The plugin's name, for `plugin` sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// How a session should present the context, e.g. `notice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<String>,
    /// A short label for the context, e.g. for a collapsed view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

impl ContextSource {
    /// A source attributed to the named plugin.
    pub fn plugin(name: impl Into<String>) -> Self {
        Self {
            kind: "plugin".into(),
            plugin: Some(name.into()),
            form: None,
            summary: None,
        }
    }
}

/// A user-role message that a call hands to the agent loop, injected after the step's results.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextMessage {
    /// The message's content.
    pub content: Vec<ContentBlock>,
    /// Where the message came from.
    pub source: ContextSource,
}
