//! The JSON files of the protocol, field for field as the agent-runner reads and writes them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `prompts/request-{id}.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    #[serde(default)]
    pub request_id: String,
    #[serde(default)]
    pub prompt: String,
    /// Any JSON: the agent passes it on as it is (see `schema.rs` for the shapes understood).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

/// `prompts/result-{id}.json`. The agent leaves out empty `content`, absent `parsed` and empty `error`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResult {
    #[serde(default)]
    pub request_id: String,
    /// `"success"` or `"error"`; anything else is read as an error.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parsed: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub metrics: TokenUsage,
}

pub const SUCCESS: &str = "success";
pub const ERROR: &str = "error";

impl PromptResult {
    pub fn is_success(&self) -> bool {
        self.status == SUCCESS
    }

    pub fn error(request_id: &str, error: impl Into<String>) -> Self {
        PromptResult {
            request_id: request_id.to_owned(),
            status: ERROR.to_owned(),
            content: None,
            parsed: None,
            error: Some(error.into()),
            metrics: TokenUsage::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
}

/// `context/clear-{id}.json`: fire and forget.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClearContextRequest {
    #[serde(default)]
    pub request_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_read_as_the_agent_writes_them() {
        let agent = json!({"requestId": "1", "status": "success", "content": "{\"a\":1}", "parsed": {"a": 1},
                           "metrics": {"inputTokens": 3, "outputTokens": 4}});
        let result: PromptResult = serde_json::from_value(agent).unwrap();
        assert!(result.is_success());
        assert_eq!(result.metrics, TokenUsage { input_tokens: 3, output_tokens: 4 });
        let error: PromptResult = serde_json::from_value(json!({"requestId": "1", "status": "error",
                                                                 "error": "x", "metrics": {}}))
        .unwrap();
        assert!(!error.is_success());
        assert_eq!(
            serde_json::to_value(PromptResult::error("2", "boom")).unwrap(),
            json!({"requestId": "2", "status": "error", "error": "boom",
                   "metrics": {"inputTokens": 0, "outputTokens": 0}})
        );
    }
}
